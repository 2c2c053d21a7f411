#!/usr/bin/python3
"""Exports the demo model: a small GPT-2-style decoder (2 blocks, width 64,
tied lm_head) with its cross-entropy loss, through fsdp_mlir.export.

    export_gpt.py OUT.onnx [REFERENCE_DIR]

With REFERENCE_DIR it also writes a batch of 4 sequences there
(input_ids.npy, labels.npy), torch's eval()-mode loss on them
(expected_loss.npy) and the losses of 5 AdamW steps (lr 3e-3, gradients
clipped to norm 1) on that batch (expected_train_losses.npy), which the
demo compares with the compiled plans'.
"""

import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python-frontend"))
import fsdp_mlir  # noqa: E402


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, ctx=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1),
                             persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.blocks:
            x = block(x, self.mask[:t, :t])
        return self.lm_head(self.ln_f(x))


def loss_fn(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


torch.manual_seed(0)
model = TinyGPT()
ids = torch.randint(0, 256, (2, 32))
fsdp_mlir.export(model, (ids, torch.roll(ids, -1, 1)), sys.argv[1],
                 loss_fn=loss_fn, input_names=["input_ids", "labels"])
print(f"exported {sys.argv[1]}")

if len(sys.argv) > 2:
    import numpy as np

    out = Path(sys.argv[2])
    ids = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(1))
    labels = torch.roll(ids, -1, 1)
    model.eval()
    with torch.no_grad():
        loss = loss_fn(model(ids), labels)
    np.save(out / "input_ids.npy", ids.numpy())
    np.save(out / "labels.npy", labels.numpy())
    np.save(out / "expected_loss.npy", loss.numpy())
    print(f"reference batch and torch eval() loss {loss.item():.6f} in {out}")

    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-3)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = loss_fn(model(ids), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    np.save(out / "expected_train_losses.npy", np.array(losses, dtype=np.float32))
    print(f"torch AdamW losses over 5 steps: {', '.join(f'{v:.4f}' for v in losses)}")
