"""The ONNX test corpus: small models in plain torch.nn (and torchvision's
classes at small sizes), each with fixed seeds, example inputs and export
options. `make_corpus.py` exports them with `fsdp_mlir.export`.

Widths are tiny so that every export takes about a second on two cores; the
architectures (parameter naming, tied weights, buffers, norms, attention)
are the real ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


def lm_loss(logits, labels):
    """Cross-entropy over all positions of a language model's logits."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def cls_loss(logits, labels):
    return F.cross_entropy(logits, labels)


# --------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------


class GPT2Attention(nn.Module):
    """Causal self-attention with GPT-2's fused QKV projection (c_attn)."""

    def __init__(self, d, n_head, max_len):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_len, max_len), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, h, C // h).transpose(1, 2)
        k = k.view(B, T, h, C // h).transpose(1, 2)
        v = v.view(B, T, h, C // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate="tanh")  # GPT-2's gelu_new
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, d, n_head, max_len):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = GPT2Attention(d, n_head, max_len)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = GPT2MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab=64, d=32, n_layer=2, n_head=4, max_len=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([GPT2Block(d, n_head, max_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# --------------------------------------------------------------------------
# LLaMA
# --------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.shape
        h = self.n_head
        q = self.wq(x).view(B, T, h, C // h).transpose(1, 2)
        k = self.wk(x).view(B, T, h, C // h).transpose(1, 2)
        v = self.wv(x).view(B, T, h, C // h).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // h))
        att = att.masked_fill(~mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.wo(y)


class LlamaMLP(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        self.w3 = nn.Linear(d, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, d, n_head, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(d)
        self.attention = LlamaAttention(d, n_head)
        self.ffn_norm = RMSNorm(d)
        self.feed_forward = LlamaMLP(d, hidden)

    def forward(self, x, cos, sin, mask):
        x = x + self.attention(self.attention_norm(x), cos, sin, mask)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, vocab=64, d=32, n_layer=2, n_head=4, hidden=64, max_len=16,
                 rope_theta=10000.0):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, n_head, hidden) for _ in range(n_layer)])
        self.norm = RMSNorm(d)
        self.output = nn.Linear(d, vocab, bias=False)  # not tied
        head_dim = d // n_head
        inv_freq = 1.0 / rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(max_len).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)  # (max_len, head_dim)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, idx):
        B, T = idx.shape
        cos, sin, mask = self.rope_cos[:T], self.rope_sin[:T], self.mask[:T, :T]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.output(self.norm(x))


# --------------------------------------------------------------------------
# BERT
# --------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, d, max_len, type_vocab):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(max_len, d)
        self.token_type_embeddings = nn.Embedding(type_vocab, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        # Persistent, as in older HF BERT: an int64 buffer in the state dict.
        self.register_buffer("position_ids", torch.arange(max_len).unsqueeze(0))

    def forward(self, input_ids, token_type_ids):
        T = input_ids.shape[1]
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(self.position_ids[:, :T])
             + self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
        q = self.query(x).view(B, T, h, C // h).transpose(1, 2)
        k = self.key(x).view(B, T, h, C // h).transpose(1, 2)
        v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(C // h), dim=-1)
        return (att @ v).transpose(1, 2).reshape(B, T, C)


class BertSelfOutput(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dense = nn.Linear(d, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class BertAttention(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.self = BertSelfAttention(d, n_head)
        self.output = BertSelfOutput(d)

    def forward(self, x):
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, d, inner):
        super().__init__()
        self.dense = nn.Linear(d, inner)
        self.intermediate_act_fn = nn.GELU()  # exact (erf)

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, inner, d):
        super().__init__()
        self.dense = nn.Linear(inner, d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class BertLayer(nn.Module):
    def __init__(self, d, n_head, inner):
        super().__init__()
        self.attention = BertAttention(d, n_head)
        self.intermediate = BertIntermediate(d, inner)
        self.output = BertOutput(inner, d)

    def forward(self, x):
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, d, n_head, inner, n_layer):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(d, n_head, inner) for _ in range(n_layer)])

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class BertPooler(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dense = nn.Linear(d, d)
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(x[:, 0]))


class Bert(nn.Module):
    def __init__(self, vocab=64, d=32, n_layer=2, n_head=4, inner=64, max_len=16, type_vocab=2):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, d, max_len, type_vocab)
        self.encoder = BertEncoder(d, n_head, inner, n_layer)
        self.pooler = BertPooler(d)

    def forward(self, input_ids, token_type_ids):
        h = self.encoder(self.embeddings(input_ids, token_type_ids))
        return h, self.pooler(h)


# --------------------------------------------------------------------------
# Frozen submodule + tied weights + BatchNorm
# --------------------------------------------------------------------------


class FrozenTied(nn.Module):
    def __init__(self, d_in=8, d=16, d_out=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Linear(d, d))
        self.backbone.requires_grad_(False)  # frozen
        self.bn = nn.BatchNorm1d(d)
        self.enc = nn.Linear(d, d)
        self.dec = nn.Linear(d, d)
        self.dec.weight = self.enc.weight  # tied: two Linear layers, one weight
        self.head = nn.Linear(d, d_out)

    def forward(self, x):
        x = self.bn(self.backbone(x))
        x = self.dec(torch.relu(self.enc(x)))
        return self.head(x)


class Mixed(nn.Module):
    """Everything the wrap rules care about in one model: a frozen backbone,
    nn.MultiheadAttention (a force-leaf module), a weight tied between two
    Linear layers, a BatchNorm (full precision under mixed precision; the
    tests also ignore it), and a head."""

    def __init__(self, d_in=8, d=16, heads=2, d_out=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d_in, d), nn.ReLU())
        self.backbone.requires_grad_(False)  # frozen
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.enc = nn.Linear(d, d)
        self.dec = nn.Linear(d, d)
        self.dec.weight = self.enc.weight  # tied
        self.norm = nn.BatchNorm1d(d)
        self.head = nn.Linear(d, d_out)

    def forward(self, x):
        h = self.backbone(x)
        h = h + self.attn(h, h, h, need_weights=False)[0]
        h = self.dec(torch.relu(self.enc(h))).mean(dim=1)
        return self.head(self.norm(h))


class DerivedBlock(nn.Module):
    """A feed-forward block whose parameters reach the compute through new
    tensors made from them alone: nn.Linear on 3-D inputs (exported as
    Transpose then MatMul), a slice of a weight, two weights concatenated
    and a weight-only product. FULL_SHARD must make each again from the
    backward's gather rather than keep it from the forward."""

    def __init__(self, d, hidden):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)
        self.mix = nn.Parameter(torch.randn(2 * d, d) * d ** -0.5)
        self.left = nn.Parameter(torch.randn(d // 2, d) * d ** -0.5)
        self.right = nn.Parameter(torch.randn(d - d // 2, d) * d ** -0.5)
        self.gain = nn.Parameter(torch.ones(d))

    def forward(self, x):
        d = x.shape[-1]
        h = self.down(torch.relu(self.up(x)))
        h = h + x @ self.mix[:d].t()
        h = h + torch.tanh(x @ torch.cat([self.left, self.right], 0))
        return h * (self.gain * 0.5)


class Derived(nn.Module):
    """Six DerivedBlocks and a classifier over the mean of the sequence."""

    def __init__(self, d=16, hidden=32, n_layer=6, classes=5):
        super().__init__()
        self.blocks = nn.ModuleList(DerivedBlock(d, hidden) for _ in range(n_layer))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x.mean(dim=1))


# --------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------


@dataclass
class Case:
    """One corpus entry: build() -> (model, example_inputs)."""

    name: str
    build: Callable[[], tuple]
    loss_fn: Callable | None = None
    input_names: list[str] | None = None
    external_data: bool = False
    description: str = ""
    export_kwargs: dict = field(default_factory=dict)


def _tokens(vocab, batch, seq, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g)


def build_gpt2():
    torch.manual_seed(0)
    model = GPT2(vocab=64, d=32, n_layer=2, n_head=4, max_len=16)
    return model, (_tokens(64, 2, 16, 1), _tokens(64, 2, 16, 2))


def build_llama():
    torch.manual_seed(0)
    model = Llama(vocab=64, d=32, n_layer=2, n_head=4, hidden=64, max_len=16)
    return model, (_tokens(64, 2, 16, 1), _tokens(64, 2, 16, 2))


def build_bert():
    torch.manual_seed(0)
    model = Bert(vocab=64, d=32, n_layer=2, n_head=4, inner=64, max_len=16)
    return model, (_tokens(64, 2, 16, 1), _tokens(2, 2, 16, 2))


def build_resnet18():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(2, 3, 32, 32, generator=g),
                   torch.randint(0, 10, (2,), generator=g))


def _random_head(vit):
    """torchvision zero-initialises a ViT's classifier, which would make its
    logits the bias alone; a random head makes forward checks see the whole
    network."""
    with torch.no_grad():
        vit.heads.head.weight.normal_(std=0.02)
        vit.heads.head.bias.normal_(std=0.02)


def build_vit():
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(
        image_size=32, patch_size=16, num_layers=2, num_heads=2,
        hidden_dim=32, mlp_dim=64, num_classes=10)
    _random_head(model)
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(2, 3, 32, 32, generator=g),)


def build_vit_b16():
    import torchvision

    torch.manual_seed(0)
    # The real ViT-B/16 configuration (86M parameters), random weights: no
    # download. Batch 1 at export; the batch is dynamic.
    model = torchvision.models.vit_b_16(weights=None)
    _random_head(model)
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(1, 3, 224, 224, generator=g),)


def build_frozen_tied():
    torch.manual_seed(0)
    model = FrozenTied()
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(4, 8, generator=g),)


def build_derived():
    torch.manual_seed(0)
    model = Derived()
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(2, 6, 16, generator=g),
                   torch.randint(0, 5, (2,), generator=g))


def build_mixed():
    torch.manual_seed(0)
    model = Mixed()
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(4, 6, 8, generator=g),)


CASES = {
    c.name: c
    for c in [
        Case("gpt2", build_gpt2, loss_fn=lm_loss, input_names=["input_ids", "labels"],
             description="GPT-2 decoder, tied lm_head, causal mask buffer, LM loss"),
        Case("gpt2_external", build_gpt2, loss_fn=lm_loss,
             input_names=["input_ids", "labels"], external_data=True,
             description="gpt2 with its tensors in gpt2_external.onnx.data"),
        Case("llama", build_llama, loss_fn=lm_loss, input_names=["input_ids", "labels"],
             description="LLaMA decoder: RMSNorm, RoPE, SwiGLU, no biases, untied head"),
        Case("bert", build_bert, input_names=["input_ids", "token_type_ids"],
             description="BERT encoder + pooler, inference outputs"),
        Case("resnet18", build_resnet18, loss_fn=cls_loss, input_names=["pixels", "labels"],
             description="torchvision resnet18, training-mode BatchNorm, CE loss"),
        Case("vit", build_vit, input_names=["pixels"],
             description="torchvision VisionTransformer (ViT-B/16 class, tiny)"),
        Case("vit_b16", build_vit_b16, input_names=["pixels"], external_data=True,
             description="torchvision vit_b_16 at full size (86M parameters, 330 MiB external data)"),
        Case("mixed", build_mixed,
             description="frozen backbone, MultiheadAttention, tied Linears, BatchNorm1d"),
        Case("derived", build_derived, loss_fn=cls_loss, input_names=["x", "labels"],
             description="feed-forward blocks reading transposes, slices, "
                         "concatenations and products of their weights"),
        Case("frozen_tied", build_frozen_tied,
             description="frozen submodule, weight tied across two Linears, BatchNorm1d"),
    ]
}
