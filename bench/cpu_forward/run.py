#!/usr/bin/env python3
"""Forward latency of the CPU executor against torch eager and onnxruntime,
same run.

For each model below (built in torch with fixed seeds, exported with
fsdp_mlir.export, compiled with `fsdp-opt --fsdp-inference-pipeline` and
`fsdp-translate --mlir-to-plan`) and each thread count, this times

  - torch:    model.eval() under torch.no_grad(), torch.set_num_threads(T),
              `--warmup` untimed calls, then `--repeat` timed calls;
  - fsdp-run: the same inputs (.npy), `--threads T --warmup W --repeat R`,
              its own per-run timings (weights loaded once, outside the
              timing, as torch's are);
  - onnxruntime (CPU): the same ONNX file and inputs in a process of
              `--ort-python` (default: the project's .venv-torch2, which
              scripts/setup.sh makes with a pinned onnxruntime), one
              InferenceSession with intra_op_num_threads=T and
              inter_op_num_threads=1, all graph optimizations, `--warmup`
              untimed runs then `--repeat` timed ones; left out, saying
              why, when that interpreter has no onnxruntime;

and prints the median of each, the ratios (fsdp-run / torch and fsdp-run /
onnxruntime: below 1 is faster) and the largest difference between our
output and torch's (and onnxruntime's and torch's) relative to the largest
output magnitude, which must stay within fp32 round-off. The two alternate in `--rounds` rounds so that load from other
work on the machine falls on both; medians over all rounds, not means.

    /usr/bin/python3 bench/cpu_forward/run.py [--build build] [--threads 1 2]
        [--repeat 10] [--only gpt2-small resnet18 ...] [--ort-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(ROOT / "python-frontend"))


def gpt2_small():
    import models
    import torch

    torch.manual_seed(0)
    model = models.GPT2(vocab=1024, d=256, n_layer=4, n_head=8, max_len=128)
    ids = torch.randint(0, 1024, (4, 128))
    return model, (ids,), ["input_ids"], "GPT-2 block x4, d=256, batch 4 x 128 tokens"


def llama_small():
    import models
    import torch

    torch.manual_seed(0)
    model = models.Llama(vocab=1024, d=256, n_layer=4, n_head=8, hidden=688, max_len=128)
    ids = torch.randint(0, 1024, (4, 128))
    return model, (ids,), ["input_ids"], "LLaMA block x4, d=256, batch 4 x 128 tokens"


def bert_small():
    import models
    import torch

    torch.manual_seed(0)
    model = models.Bert(vocab=1024, d=256, n_layer=4, n_head=8, inner=1024, max_len=128)
    ids = torch.randint(0, 1024, (4, 128))
    types = torch.randint(0, 2, (4, 128))
    return (model, (ids, types), ["input_ids", "token_type_ids"],
            "BERT encoder x4, d=256, batch 4 x 128 tokens")


def resnet18():
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    x = torch.randn(2, 3, 224, 224)
    return model, (x,), ["pixels"], "torchvision resnet18, batch 2 x 3 x 224 x 224"


def vit_b16():
    import models
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None)
    models._random_head(model)  # torchvision's zero head makes logits trivial
    x = torch.randn(1, 3, 224, 224)
    return model, (x,), ["pixels"], "torchvision vit_b_16 (86M), batch 1 x 3 x 224 x 224"


MODELS = {
    "gpt2-small": gpt2_small,
    "llama-small": llama_small,
    "bert-small": bert_small,
    "resnet18": resnet18,
    "vit-b16": vit_b16,
}


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    return proc.stdout


def time_torch(model, inputs, threads: int, warmup: int, repeat: int):
    import torch

    torch.set_num_threads(threads)
    model.eval()
    with torch.no_grad():
        for _ in range(warmup):
            out = model(*inputs)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            out = model(*inputs)
            times.append(time.perf_counter() - start)
    out = out[0] if isinstance(out, (tuple, list)) else out
    return times, out.numpy()


# Runs in the --ort-python interpreter: argv = model, threads, warmup,
# repeat, output .npy, then NAME=FILE.npy per input; prints the times as
# JSON.
ORT_TIMER = """
import json, sys, time
import numpy as np
import onnxruntime as ort
path, threads, warmup, repeat, out = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
feeds = {k: np.load(v) for k, v in (a.split("=", 1) for a in sys.argv[6:])}
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
for _ in range(warmup):
    result = session.run(None, feeds)
times = []
for _ in range(repeat):
    start = time.perf_counter()
    result = session.run(None, feeds)
    times.append(time.perf_counter() - start)
np.save(out, result[0])
print(json.dumps({"times": times, "version": ort.__version__}))
"""


def ort_missing(python: Path) -> str:
    """Why onnxruntime cannot be timed with `python`, or "" when it can."""
    if not python.exists():
        return f"no {python} (scripts/setup.sh makes it)"
    proc = subprocess.run([str(python), "-c", "import onnxruntime"], capture_output=True,
                          text=True)
    return "" if proc.returncode == 0 else f"{python} has no onnxruntime"


def time_ort(python: Path, onnx_path: Path, feeds: dict, threads: int, warmup: int,
             repeat: int, out: Path):
    report = json.loads(run([str(python), "-c", ORT_TIMER, str(onnx_path), str(threads),
                             str(warmup), str(repeat), str(out),
                             *(f"{k}={v}" for k, v in feeds.items())]))
    return report["times"], np.load(out), report["version"]


def relative_diff(got, want) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) /
                 max(float(np.max(np.abs(want))), 1e-30))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=list(MODELS), metavar="MODEL")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--ort-python", type=Path, default=ROOT / ".venv-torch2" / "bin" / "python",
                    help="the interpreter that times onnxruntime")
    args = ap.parse_args(argv)

    import fsdp_mlir
    import torch

    bindir = args.build.resolve() / "bin"
    no_ort = ort_missing(args.ort_python)
    if no_ort:
        print(f"onnxruntime left out: {no_ort}", flush=True)
    ort_version = ""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.only or list(MODELS):
            model, inputs, names, what = MODELS[name]()
            onnx_path = work / f"{name}.onnx"
            fsdp_mlir.export(model, inputs, onnx_path, input_names=names,
                             external_data=name == "vit-b16")
            batch = inputs[0].shape[0]
            mlir, plan = work / f"{name}.mlir", work / f"{name}.plan"
            start = time.perf_counter()
            run([str(bindir / "fsdp-opt"), str(onnx_path), f"--batch-size={batch}",
                 "--fsdp-inference-pipeline", "-o", str(mlir)])
            run([str(bindir / "fsdp-translate"), "--mlir-to-plan", str(mlir), "-o", str(plan)])
            compile_s = time.perf_counter() - start
            feeds, files = [], {}
            for n, x in zip(names, inputs):
                files[n] = work / f"{name}.{n}.npy"
                np.save(files[n], x.numpy())
                feeds += ["--input", f"{n}={files[n]}"]
            for threads in args.threads:
                t_torch, t_ours, t_ort = [], [], []
                out = work / f"{name}.out"
                for _ in range(args.rounds):
                    times, want = time_torch(model, inputs, threads, args.warmup, args.repeat)
                    t_torch += times
                    report = json.loads(run(
                        [str(bindir / "fsdp-run"), str(plan), *feeds, "--threads", str(threads),
                         "--warmup", str(args.warmup), "--repeat", str(args.repeat),
                         "--output-dir", str(out), "--json"]))
                    t_ours += report["run_seconds"]
                    if not no_ort:
                        times, ort_out, ort_version = time_ort(
                            args.ort_python, onnx_path, files, threads, args.warmup,
                            args.repeat, work / f"{name}.ort.npy")
                        t_ort += times
                got = np.load(out / f"{report['outputs'][0]['name']}.npy")
                diff = relative_diff(got, want)
                ours = statistics.median(t_ours) * 1e3
                theirs = statistics.median(t_torch) * 1e3
                ort_ms = statistics.median(t_ort) * 1e3 if t_ort else None
                ort_diff = relative_diff(ort_out, want) if t_ort else None
                rows.append((name, threads, theirs, ours, ours / theirs, diff,
                             report["memory"]["activation_bytes"], compile_s, ort_ms,
                             ort_diff))
                print(f"{name:12s} T={threads}  torch {theirs:9.2f} ms  fsdp-run "
                      f"{ours:9.2f} ms  ratio {ours / theirs:5.2f}  rel. diff {diff:.1e}"
                      + (f"  onnxruntime {ort_ms:9.2f} ms  ours/ort {ours / ort_ms:5.2f}"
                         f"  (its rel. diff {ort_diff:.1e})" if ort_ms else ""),
                      flush=True)
            print(f"  ({what}; compile {compile_s:.1f} s)", flush=True)

    print()
    print(f"torch {torch.__version__}, "
          + (f"onnxruntime {ort_version}, " if ort_version else f"no onnxruntime ({no_ort}), ")
          + f"{os.cpu_count()} CPUs; medians of "
          f"{args.rounds} x {args.repeat} runs, each round after {args.warmup} warm-up runs")
    print("| model | threads | torch eager (ms) | onnxruntime (ms) | fsdp-run (ms) "
          "| fsdp-run / torch | fsdp-run / onnxruntime "
          "| max diff / max abs | activation arena (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, threads, theirs, ours, ratio, diff, arena, _, ort_ms, _ in rows:
        print(f"| {name} | {threads} | {theirs:.2f} | "
              + (f"{ort_ms:.2f}" if ort_ms else "-") + f" | {ours:.2f} | {ratio:.2f} | "
              + (f"{ours / ort_ms:.2f}" if ort_ms else "-")
              + f" | {diff:.1e} | {arena / 2**20:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
