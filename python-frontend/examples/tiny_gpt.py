"""A small GPT-style model for the examples (two pre-norm blocks, tied
embedding and head), and its training data: a fixed, learnable pattern."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4, seq: int = 16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(2)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1),
                             persistent=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.lm_head(self.ln_f(x))


def loss_fn(logits, labels):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       labels.reshape(-1))


def data(batch: int = 8, seq: int = 16, vocab: int = 64):
    """Sequences counting up modulo the vocabulary: the next token is
    always predictable, so the loss can fall."""
    g = torch.Generator().manual_seed(0)
    start = torch.randint(0, vocab, (batch, 1), generator=g)
    ids = (start + torch.arange(seq)) % vocab
    return ids, (ids + 1) % vocab
