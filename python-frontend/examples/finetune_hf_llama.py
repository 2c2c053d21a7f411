"""Fine-tune a small Hugging Face LLaMA on 2 CPU ranks on a text file.

    .venv-torch2/bin/python finetune_hf_llama.py TEXT_FILE [--steps 30]
        [--seq 16] [--batch 4] [--work DIR] [--init DIR]

Needs torch 2.x and transformers. The text is tokenised byte by byte (a
byte-level vocabulary of 256 ids; no tokenizer download). The model is a
LlamaForCausalLM made from a small config with random weights, or the
checkpoint in --init (a from_pretrained directory: this script's own output
continues training). Run alone, the script exports the model with a
next-token cross-entropy loss, compiles one training step for 2 ranks
(FULL_SHARD, one FSDP unit per LlamaDecoderLayer, AdamW with clipping) and
starts itself on both ranks with `python -m fsdp_mlir.launch -n 2`; each
step takes a global batch of windows of the text, each rank its half. At
the end rank 0 writes WORK/model/model.safetensors (Session.save(full=True))
beside the config, so `LlamaForCausalLM.from_pretrained(WORK/model)` loads
the fine-tuned model; the script does so and prints its loss in torch.

The causal mask transformers builds folds to a constant at import up to
2^20 elements (batch per rank x seq x seq: seq 1024 at batch 1 per rank).
"""

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import fsdp_mlir  # noqa: E402

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

VOCAB = 256  # bytes


class LlamaLogits(LlamaForCausalLM):
    """LlamaForCausalLM returning the logits tensor from token ids: a
    subclass, so parameter names, layer classes and checkpoints stay the
    LLaMA's own."""

    def forward(self, ids):
        return super().forward(input_ids=ids).logits


def model_for(init):
    if init:
        return LlamaLogits.from_pretrained(init)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, use_cache=False,
                         bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaLogits(config)


def loss_fn(logits, labels):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def batches(text: bytes, steps: int, batch: int, seq: int):
    """`steps` global batches of random windows (ids, next-byte labels)."""
    if len(text) < seq + 2:
        sys.exit(f"the text has {len(text)} bytes; it needs at least {seq + 2}")
    data = np.frombuffer(text, np.uint8).astype(np.int64)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(data) - seq - 1, (steps, batch))
    ids = np.stack([[data[s:s + seq] for s in row] for row in starts])
    return ids, np.stack([[data[s + 1:s + seq + 1] for s in row] for row in starts])


def prepare(opts) -> None:
    work = opts.work
    model = model_for(opts.init)
    ids, labels = batches(Path(opts.text).read_bytes(), opts.steps, opts.batch, opts.seq)
    np.save(work / "ids.npy", ids)
    np.save(work / "labels.npy", labels)
    model.config.save_pretrained(work / "model")
    # A batch of 2 or more: torch.export specialises a dimension of size 1.
    example = (torch.from_numpy(ids[0]), torch.from_numpy(labels[0]))
    fsdp_mlir.export(model, example, work / "llama.onnx", loss_fn=loss_fn,
                     input_names=["input_ids", "labels"])
    fsdp_mlir.compile(work / "llama.onnx", batch_size=opts.batch // 2, world_size=2,
                      policy=fsdp_mlir.transformer_layers(["LlamaDecoderLayer"]),
                      optimizer={"optimizer": "adamw", "max_grad_norm": 1.0},
                      out=work / "llama.plan")


def train(opts) -> None:
    session = fsdp_mlir.Session(opts.work / "llama.plan", threads=1)
    ids, labels = np.load(opts.work / "ids.npy"), np.load(opts.work / "labels.npy")
    losses = []
    for step in range(len(ids)):
        losses.append(session.step({"input_ids": ids[step], "labels": labels[step]},
                                   lr=opts.lr))
        if session.rank == 0 and (step == 0 or (step + 1) % 10 == 0):
            print(f"step {step + 1:3d} loss {losses[-1]:.4f}", flush=True)
    if session.rank == 0:
        np.save(opts.work / "losses.npy", np.array(losses))
    # Collective: every rank takes part, rank 0 writes the file.
    session.save(opts.work / "model" / "model.safetensors", full=True)


def evaluate(opts) -> None:
    # The session's full checkpoint holds torch's state dict exactly (the
    # rotary inv_freq, a non-persistent buffer, is a constant of the plan).
    model = LlamaForCausalLM.from_pretrained(opts.work / "model").eval()
    ids = torch.from_numpy(np.load(opts.work / "ids.npy")[-1])
    labels = torch.from_numpy(np.load(opts.work / "labels.npy")[-1])
    with torch.no_grad():
        loss = float(loss_fn(model(input_ids=ids).logits, labels))
    losses = np.load(opts.work / "losses.npy")
    print(f"from_pretrained({opts.work / 'model'}): loss {loss:.4f} on the last batch "
          f"(the first step's: {losses[0]:.4f})")
    if not (losses[-1] < losses[0] and loss < losses[0]):
        sys.exit("the loss did not fall")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text", help="a text file (any bytes)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=4, help="global batch (even)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--work", type=Path, default=Path("llama-run"))
    ap.add_argument("--init", type=Path, help="a from_pretrained directory to start from")
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.batch < 2 or opts.batch % 2:
        sys.exit("--batch must be even (2 ranks)")
    if opts.train:  # one rank, started by the launcher below
        train(opts)
        return 0
    opts.work.mkdir(parents=True, exist_ok=True)
    prepare(opts)
    print(f"compiled {opts.work / 'llama.plan'} for 2 ranks", flush=True)
    subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", "2", __file__,
                    opts.text, "--train", "--work", str(opts.work), "--lr", str(opts.lr),
                    "--steps", str(opts.steps)], check=True)
    evaluate(opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
