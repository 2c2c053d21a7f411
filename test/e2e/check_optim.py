#!/usr/bin/env python3
"""Training steps of fsdp-optimizer against torch.optim, run on the executor.

    check_optim.py BUILD_DIR [--keep DIR] [--only CASE ...]

Each case compiles a model with `fsdp-opt --fsdp-autodiff --fsdp-optimizer
--fsdp-inference --fsdp-lower-pipeline`, runs 3 steps with `fsdp-run --steps 3 --lr LR
--save-state DIR` on one batch, and makes the same 3 steps in torch
(`zero_grad`, `loss.backward()` — per micro-batch with the loss divided by
their number when accumulating —, `clip_grad_norm_`, `opt.step()`). The
losses of every step, every parameter, every BatchNorm running statistic
and every optimizer state (`exp_avg`, `exp_avg_sq`, `momentum_buffer`, by
FQN) must then agree within |ours - torch| <= 1e-5 + 1e-4 |torch|. Exit 1
on any mismatch. The `-flat` cases compile the same step through flat
units (auto-wrap, fsdp-flatten and fsdp-shard at world size 1): parameters
are compared by member FQN, optimizer state as each unit's flat state.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_grads  # noqa: E402  (models, export and run helpers)

ATOL, RTOL = 1e-5, 1e-4
STEPS = 3

# name: (model, fsdp-optimizer options, torch optimizer, lr, clip, micro-batches)
CASES = {
    "tied_mlp-sgd": ("tied_mlp", "optimizer=sgd momentum=0.9 weight-decay=0.01",
                     lambda p, lr: torch.optim.SGD(p, lr, momentum=0.9, weight_decay=0.01),
                     0.1, 0, 1),
    "tied_mlp-sgd-nesterov": ("tied_mlp", "optimizer=sgd momentum=0.8 nesterov=true",
                              lambda p, lr: torch.optim.SGD(p, lr, momentum=0.8, nesterov=True),
                              0.1, 0, 1),
    "seq_mlp-sgd-dampening": ("seq_mlp", "optimizer=sgd momentum=0.9 dampening=0.3",
                              lambda p, lr: torch.optim.SGD(p, lr, momentum=0.9, dampening=0.3),
                              0.05, 0, 1),
    "tied_mlp-adamw": ("tied_mlp", "optimizer=adamw",
                       lambda p, lr: torch.optim.AdamW(p, lr), 0.01, 0, 1),
    "conv_net-adamw-clip": ("conv_net", "optimizer=adamw weight-decay=0.1 beta2=0.99 max-grad-norm=0.5",
                            lambda p, lr: torch.optim.AdamW(p, lr, betas=(0.9, 0.99),
                                                            weight_decay=0.1),
                            0.01, 0.5, 1),
    "conv_net-sgd-accumulate": ("conv_net", "optimizer=sgd momentum=0.9 accumulate=2",
                                lambda p, lr: torch.optim.SGD(p, lr, momentum=0.9),
                                0.05, 0, 2),
    "gpt2-sgd-clip": ("gpt2", "optimizer=sgd momentum=0.9 weight-decay=0.01 max-grad-norm=1",
                      lambda p, lr: torch.optim.SGD(p, lr, momentum=0.9, weight_decay=0.01),
                      0.1, 1.0, 1),
}
# The same steps through flat units on one rank: auto-wrap, fsdp-flatten,
# fsdp-shard (world size 1: no collectives), so the plan's units, pack and
# unflatten views, and the optimizer on flat shards run on the executor.
# name: (case above, fsdp-auto-wrap options)
FLAT = {
    "tied_mlp-adamw-flat": ("tied_mlp-adamw", "policy=transformer layer-classes=Sequential"),
    "conv_net-sgd-accumulate-flat": ("conv_net-sgd-accumulate",
                                     "policy=size min-num-params=100"),
    "gpt2-sgd-clip-flat": ("gpt2-sgd-clip",
                           "policy=transformer layer-classes=GPT2Block"),
}
STATE_NAMES = ["momentum_buffer", "exp_avg", "exp_avg_sq"]


def torch_steps(model, inputs, labels, loss_fn, make_opt, lr, clip, micro,
                steps=STEPS):
    """`steps` steps in torch: the losses, then the state dict (parameters by
    first name, buffers, optimizer state as optim.<state>.<fqn>)."""
    model.train()
    names, params = [], []
    for fqn, p in model.named_parameters():  # tied parameters appear once
        if p.requires_grad:
            names.append(fqn)
            params.append(p)
    opt = make_opt(params, lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        total = 0.0
        chunks = zip(*[x.chunk(micro) for x in inputs], labels.chunk(micro))
        for *xs, ys in chunks:
            loss = loss_fn(model(*xs), ys) / micro
            loss.backward()
            total += float(loss)
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        losses.append(total)
    state = {fqn: p.detach().numpy() for fqn, p in model.named_parameters()}
    state.update({fqn: b.numpy() for fqn, b in model.named_buffers()})
    for fqn, p in zip(names, params):
        for key, value in opt.state[p].items():
            if key in STATE_NAMES:
                state[f"optim.{key}.{fqn}"] = value.numpy()
    return losses, state


def flat_state(want: dict, units: list) -> dict:
    """torch's per-parameter optimizer state laid out as each unit's flat
    state on one rank: members concatenated in flat order, zero padding."""
    flat = {}
    for unit in units:
        for key in STATE_NAMES:
            parts = [want.get(f"optim.{key}.{fqn}") for fqn in unit["members"]]
            if any(p is None for p in parts):
                continue
            values = np.concatenate([p.reshape(-1) for p in parts])
            padded = np.zeros(unit["padded_numel"], values.dtype)
            padded[:values.size] = values
            flat[f"optim.{key}.{unit['name']}"] = padded
    return flat


def check(case: str, bindir: Path, work: Path) -> bool:
    wrap = []
    if case in FLAT:
        case, policy = FLAT[case]
        wrap = [f"--fsdp-auto-wrap={policy}"]
    name, options, make_opt, lr, clip, micro = CASES[case]
    model, inputs, labels, loss_fn, onnx_path, names, label_name, autodiff = \
        check_grads.prepare(name, work, micro)
    run = check_grads.run
    batch = inputs[0].shape[0] // micro
    flat = ["--fsdp-flatten=world-size=1"] if wrap else []
    shard = ["--fsdp-shard"] if wrap else []
    run([bindir / "fsdp-opt", onnx_path, f"--batch-size={batch}", *wrap,
         f"--fsdp-autodiff{autodiff}", *flat, f"--fsdp-optimizer={options}",
         *shard, "--fsdp-inference", "--fsdp-lower-pipeline", "-o", work / "t.mlir"])
    run([bindir / "fsdp-translate", "--mlir-to-plan", work / "t.mlir", "-o", work / "t.plan"])
    units = json.loads(run([bindir / "fsdp-run", work / "t.plan", "--describe",
                            "--json"]))["units"]
    if wrap and not units:
        print("  the plan has no flat units")
        return False
    flags = []
    for input_name, value in zip(names + [label_name], inputs + [labels]):
        np.save(work / f"{input_name}.npy", value.numpy())
        flags += ["--input", f"{input_name}={work / input_name}.npy"]
    report = json.loads(run([bindir / "fsdp-run", work / "t.plan", *flags,
                             "--steps", STEPS, "--lr", lr, "--save-state",
                             work / "state", "--json"]))
    ours = {f.stem: np.load(f) for f in (work / "state").glob("*.npy")}
    want_losses, want = torch_steps(copy.deepcopy(model), inputs, labels, loss_fn,
                                    make_opt, lr, clip, micro)
    want.update(flat_state(want, units))
    for unit in units:  # the shard itself: its members are compared by FQN
        ours.pop(unit["name"], None)

    ok = True
    got_losses = report["losses"]
    close = np.allclose(got_losses, want_losses, rtol=RTOL, atol=ATOL)
    print(f"  losses {', '.join(f'{v:.6f}' for v in got_losses)} "
          f"(torch {', '.join(f'{v:.6f}' for v in want_losses)}) {'ok' if close else 'MISMATCH'}")
    ok &= close
    # The plan holds every parameter and buffer the graph reads, plus state.
    missing = sorted(k for k in ours if k not in want)
    if missing:
        print(f"  state torch does not have: {missing}")
        ok = False
    worst = ("", 0.0)
    for key in sorted(ours):
        if key not in want:
            continue
        got, expect = ours[key].astype(np.float64), want[key].astype(np.float64)
        err = np.abs(got - expect)
        good = got.shape == expect.shape and bool(np.all(err <= ATOL + RTOL * np.abs(expect)))
        if not good:
            print(f"  {key:32s} max |diff| {float(err.max()):.2e} MISMATCH")
        if err.size and float(err.max()) >= worst[1]:
            worst = (key, float(err.max()))
        ok &= good
    states = sum(k.startswith("optim.") for k in ours)
    print(f"  {len(ours)} tensors after {STEPS} steps ({states} optimizer states), "
          f"worst |diff| {worst[1]:.2e} ({worst[0]})")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*", help="check only these cases")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    bindir = args.build.resolve() / "bin"
    check_grads.ROOT_BUILD = args.build.resolve()
    chosen = args.only or list(CASES) + list(FLAT)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in chosen:
            print(f"{case}:", flush=True)
            work = (args.keep or Path(tmp)) / case
            work.mkdir(parents=True, exist_ok=True)
            try:
                if not check(case, bindir, work):
                    failed.append(case)
            except Exception as e:  # noqa: BLE001
                print(f"  FAILED: {e}")
                failed.append(case)
    print(f"{len(chosen) - len(failed)}/{len(chosen)} cases: {STEPS} steps equal to torch.optim"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
