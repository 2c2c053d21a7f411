#!/usr/bin/env python3
"""Mixed-precision plans run on the CPU backend, as torch computes them.

    check_mixed_precision.py BUILD_DIR [--keep DIR] [--only CASE ...]

1. Casts: a graph casting float32 values to bfloat16 and float16 and back
   (and float16 to bfloat16, int64 to both) gives the same bits as torch's
   `.to(dtype)`: ties to even, NaN, infinities, f16 overflow and
   subnormals, negative zero.
2. Training: corpus models compiled with `param-dtype=bf16` (or f16) and
   `reduce-dtype=f32` (FULL_SHARD at world size 1, fsdp-mixed-precision),
   3 AdamW steps with fsdp-run, against torch FSDP's MixedPrecision
   semantics written out without FSDP: each step casts the fp32 master
   parameters (and the float inputs) to the low precision, runs forward
   and backward there, and AdamW updates the fp32 masters with the
   gradients cast to fp32. Every loss must be exact in the low precision
   (the plan computes in it; an fp32 computation would not be) and within
   2% (bf16) or 0.5% (f16) of torch's; the parameters' updates must point
   the same way as torch's (cosine similarity of the change over 3 steps
   above 0.98) and be of the same size (norms within 5%).
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_grads  # noqa: E402  (models, export and run helpers)

run = check_grads.run
STEPS, LR = 3, 1e-3
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
# name: (model, auto-wrap policy, dtype)
CASES = {
    "gpt2-bf16": ("gpt2", "policy=transformer layer-classes=GPT2Block", "bf16"),
    "llama-bf16": ("llama", "policy=transformer layer-classes=LlamaBlock", "bf16"),
    "tied_mlp-bf16": ("tied_mlp", "policy=transformer layer-classes=Sequential", "bf16"),
}
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3}


def check_casts(bindir: Path, work: Path) -> bool:
    specials = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"),
                65504.0, 65520.0, 65519.99, 1e5, -1e5, 2.0 ** -24, 2.0 ** -25,
                3 * 2.0 ** -26, 2.0 ** -14, 6e-8, 1e-40, 3.4e38,
                1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                257.0, 259.0, 2049.0, 2051.0]
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array(specials, np.float32),
                        rng.standard_normal(4000).astype(np.float32) *
                        np.float32(10.0) ** rng.integers(-9, 9, 4000).astype(np.float32)])
    ints = np.array([0, 1, -1, 255, 257, 65504, 65519, 65520, 70000, -(2 ** 40) - 1,
                     2 ** 53 + 1], np.int64)
    n, m = len(x), len(ints)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
         helper.make_node("Cast", ["b"], ["bf16_f32"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["x"], ["f16"], to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["f16"], ["f16_bf16"], to=TensorProto.BFLOAT16),
         helper.make_node("Cast", ["f16_bf16"], ["f16_bf16_f32"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["i"], ["ib"], to=TensorProto.BFLOAT16),
         helper.make_node("Cast", ["ib"], ["i_bf16_f32"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["i"], ["i_f16"], to=TensorProto.FLOAT16)],
        "casts",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [m])],
        [helper.make_tensor_value_info("bf16_f32", TensorProto.FLOAT, [n]),
         helper.make_tensor_value_info("f16", TensorProto.FLOAT16, [n]),
         helper.make_tensor_value_info("f16_bf16_f32", TensorProto.FLOAT, [n]),
         helper.make_tensor_value_info("i_bf16_f32", TensorProto.FLOAT, [m]),
         helper.make_tensor_value_info("i_f16", TensorProto.FLOAT16, [m])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, work / "casts.onnx")
    run([bindir / "fsdp-opt", work / "casts.onnx", "--fsdp-inference-pipeline",
         "-o", work / "casts.mlir"])
    run([bindir / "fsdp-translate", "--mlir-to-plan", work / "casts.mlir",
         "-o", work / "casts.plan"])
    np.save(work / "x.npy", x)
    np.save(work / "i.npy", ints)
    run([bindir / "fsdp-run", work / "casts.plan", "--input", f"x={work / 'x.npy'}",
         "--input", f"i={work / 'i.npy'}", "--output-dir", work / "casts"])
    tx, ti = torch.from_numpy(x), torch.from_numpy(ints)
    want = {
        "bf16_f32": tx.to(torch.bfloat16).float(),
        "f16": tx.to(torch.float16),
        "f16_bf16_f32": tx.to(torch.float16).to(torch.bfloat16).float(),
        "i_bf16_f32": ti.to(torch.bfloat16).float(),
        "i_f16": ti.to(torch.float16),
    }
    ok = True
    for name, expect in want.items():
        got = np.load(work / "casts" / f"{name}.npy")
        expect = expect.numpy()
        bits = np.uint32 if got.dtype == np.float32 else np.uint16
        gb, eb = got.view(bits), expect.view(bits)
        # NaN payloads may differ; NaN must stay NaN.
        same = (gb == eb) | (np.isnan(got) & np.isnan(expect))
        if got.dtype != expect.dtype or not same.all():
            bad = np.flatnonzero(~same)[:5]
            print(f"  cast {name}: {int((~same).sum())} of {same.size} differ from torch, "
                  f"e.g. at {bad.tolist()}: ours {got[bad].tolist()} torch {expect[bad].tolist()}")
            ok = False
    print(f"  casts: {n} floats and {m} integers to bf16 and f16 and back "
          f"{'bit-identical to torch' if ok else 'DIFFER'}")
    return ok


def torch_steps(model, inputs, labels, loss_fn, dtype):
    """MixedPrecision(param_dtype=dtype, reduce_dtype=float32) without FSDP:
    the losses and the fp32 master parameters after STEPS AdamW steps."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, LR)
    losses = []
    for _ in range(STEPS):
        low = copy.deepcopy(model).to(dtype)
        xs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
        loss = loss_fn(low(*xs), labels)
        loss.backward()
        for p, q in zip(model.parameters(), low.parameters()):
            if p.requires_grad:
                p.grad = None if q.grad is None else q.grad.float()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return losses, {fqn: p.detach().numpy().copy() for fqn, p in model.named_parameters()}


def check(case: str, bindir: Path, work: Path) -> bool:
    name, policy, low = CASES[case]
    model, inputs, labels, loss_fn, onnx_path, names, label_name, autodiff = \
        check_grads.prepare(name, work)
    initial = {fqn: p.detach().numpy().copy() for fqn, p in model.named_parameters()}
    batch = inputs[0].shape[0]
    run([bindir / "fsdp-opt", onnx_path, f"--batch-size={batch}",
         f"--fsdp-auto-wrap={policy} param-dtype={low} reduce-dtype=f32",
         f"--fsdp-autodiff{autodiff}", "--fsdp-flatten=world-size=1",
         "--fsdp-optimizer=optimizer=adamw", "--fsdp-shard", "--fsdp-mixed-precision",
         "--fsdp-inference", "--fsdp-lower-pipeline", "-o", work / f"{case}.mlir"])
    run([bindir / "fsdp-translate", "--mlir-to-plan", work / f"{case}.mlir",
         "-o", work / f"{case}.plan"])
    flags = []
    for input_name, value in zip(names + [label_name], inputs + [labels]):
        np.save(work / f"{input_name}.npy", value.numpy())
        flags += ["--input", f"{input_name}={work / input_name}.npy"]
    report = json.loads(run([bindir / "fsdp-run", work / f"{case}.plan", *flags,
                             "--steps", STEPS, "--lr", LR, "--save-state",
                             work / f"{case}.state", "--json"]))
    ours = {f.stem: np.load(f) for f in (work / f"{case}.state").glob("*.npy")}
    want_losses, want = torch_steps(copy.deepcopy(model), inputs, labels, loss_fn,
                                    DTYPES[low])
    got = report["losses"]
    exact = all(float(torch.tensor(v).to(DTYPES[low]).float()) == v for v in got)
    close = np.allclose(got, want_losses, rtol=TOLERANCE[low], atol=0)
    print(f"  {case}: losses {', '.join(f'{v:.5g}' for v in got)} (torch "
          f"{', '.join(f'{v:.5g}' for v in want_losses)}): "
          f"{'exact in ' + low if exact else 'NOT EXACT IN ' + low}, "
          f"{'within' if close else 'NOT WITHIN'} {TOLERANCE[low]:.1%}")
    ok = exact and close
    moved = [(fqn, ours[fqn] - initial[fqn], want[fqn] - initial[fqn])
             for fqn in sorted(want) if fqn in ours]
    if len(moved) != len(want):
        print(f"  {case}: {len(moved)} of torch's {len(want)} parameters saved")
        ok = False
    a = np.concatenate([m[1].ravel() for m in moved]).astype(np.float64)
    b = np.concatenate([m[2].ravel() for m in moved]).astype(np.float64)
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    ratio = float(np.linalg.norm(a) / np.linalg.norm(b))
    same = cosine > 0.98 and abs(ratio - 1) < 0.05
    print(f"  {case}: parameter updates over {STEPS} steps: cosine {cosine:.4f}, "
          f"norm ratio {ratio:.4f} {'ok' if same else 'MISMATCH'}")
    return ok and same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--only", nargs="*", help="check only these cases (and 'casts')")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    bindir = args.build.resolve() / "bin"
    check_grads.ROOT_BUILD = args.build.resolve()
    chosen = args.only or ["casts"] + list(CASES)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for case in chosen:
            ok = check_casts(bindir, work) if case == "casts" else check(case, bindir, work)
            if not ok:
                failed.append(case)
    print(f"{len(chosen) - len(failed)}/{len(chosen)} mixed-precision checks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
