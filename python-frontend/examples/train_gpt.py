"""Train the tiny GPT for 50 steps on 4 CPU ranks, then evaluate the
trained weights in torch.

    python train_gpt.py [--ranks 4] [--steps 50] [--work DIR]

Run alone, it exports the model, compiles a training step sharded over
the ranks (one FSDP unit per block, FULL_SHARD, AdamW with clipping) and
starts itself on every rank with `python -m fsdp_mlir.launch`. Each rank
trains on its slice of the global batch; rank 0 prints the loss averaged
over ranks. At the end every rank takes part in gathering the full state
dict, which rank 0 saves; the launcher then loads it into a fresh torch
module with load_state_dict(strict=True) and evaluates it in torch.
"""

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fsdp_mlir  # noqa: E402
from tiny_gpt import Block, TinyGPT, data, loss_fn  # noqa: E402


def prepare(work: Path, ranks: int) -> Path:
    torch.manual_seed(0)
    model = TinyGPT()
    ids, labels = data()
    torch.save(model.state_dict(), work / "initial.pt")
    np.save(work / "input_ids.npy", ids.numpy())
    np.save(work / "labels.npy", labels.numpy())
    fsdp_mlir.export(model, (ids[:1], labels[:1]), work / "gpt.onnx", loss_fn=loss_fn,
                     input_names=["input_ids", "labels"])
    return fsdp_mlir.compile(work / "gpt.onnx", batch_size=ids.shape[0] // ranks,
                             world_size=ranks,
                             policy=fsdp_mlir.transformer_layers({Block}),
                             optimizer={"optimizer": "adamw", "max_grad_norm": 1.0},
                             out=work / "gpt.plan")


def train(work: Path, steps: int) -> None:
    session = fsdp_mlir.Session(work / "gpt.plan", threads=1)
    batch = {"input_ids": np.load(work / "input_ids.npy"),
             "labels": np.load(work / "labels.npy")}
    losses = []
    for step in range(1, steps + 1):
        losses.append(session.step(batch, lr=3e-3))
        if session.rank == 0 and (step == 1 or step % 10 == 0):
            print(f"step {step:3d} loss {losses[-1]:.4f}", flush=True)
    state = session.state_dict()  # every rank: the members are gathered
    if session.rank == 0:
        torch.save(state, work / "trained.pt")
        np.save(work / "losses.npy", np.array(losses))


def evaluate(work: Path) -> None:
    model = TinyGPT()
    model.load_state_dict(torch.load(work / "trained.pt"), strict=True)
    model.eval()
    ids, labels = data()
    with torch.no_grad():
        trained = float(loss_fn(model(ids), labels))
        model.load_state_dict(torch.load(work / "initial.pt"))
        initial = float(loss_fn(model(ids), labels))
    losses = np.load(work / "losses.npy")
    print(f"in torch: loss {initial:.4f} before training, {trained:.4f} with the trained "
          f"weights (the runtime's last training loss {losses[-1]:.4f})")
    if not (losses[-1] < losses[0] and trained < initial):
        sys.exit("the loss did not fall")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--work", type=Path, default=Path("gpt-run"))
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.train:  # one rank, started by the launcher below
        train(opts.work, opts.steps)
        return 0
    opts.work.mkdir(parents=True, exist_ok=True)
    plan = prepare(opts.work, opts.ranks)
    print(f"compiled {plan} for {opts.ranks} ranks")
    subprocess.run([sys.executable, "-m", "fsdp_mlir.launch", "-n", str(opts.ranks),
                    __file__, "--train", "--work", str(opts.work),
                    "--steps", str(opts.steps)], check=True)
    evaluate(opts.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
