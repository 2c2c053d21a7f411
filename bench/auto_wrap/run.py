#!/usr/bin/env python3
"""fsdp-auto-wrap policy=auto against the hand policies, on the CPU runtime.

    /usr/bin/python3 bench/auto_wrap/run.py [--build DIR] [--work-dir DIR]
        [--models gpt2 llama] [--worlds 2 4] [--steps 8]

For the GPT-2-style and LLaMA-style models of the test corpus (the same
classes, test/corpus/models.py, at a size where a step takes milliseconds
and communication is a good part of it: width 256, 4 layers, one sequence
of 32 tokens per rank), at each world size:

1. Calibrates the cost model to this machine, in the same run: one core's
   float32 GEMM rate and memory bandwidth (NumPy, one BLAS thread, as the
   ranks run with --threads 1), both scaled by the fraction of them the
   runtime reaches (the model's one-rank step, which has no collectives,
   against the measured one) and by cores / ranks when the ranks outnumber
   the cores and share them; MPI's all-gather bandwidth over the job's
   ranks (mpi_probe.c, fitted to (P-1) alpha + (P-1)/P N beta), the
   runtime's seconds per small collective (the test corpus's tiny LLaMA
   with a unit per module: its communication time per collective; the MPI
   probe's latency is far lower than what a rank waiting for a peer that
   is still computing sees), and cpu-runtime: MPI progresses only inside
   MPI calls, so on the CPU runtime communication adds to the step (and
   clipping, as the step clips the gradient norm).
2. Asks policy=auto without a budget for the modelled figures of every hand
   policy (no wrapping, transformer layers, size-based at powers of ten,
   each with FULL_SHARD, SHARD_GRAD_OP and NO_SHARD throughout:
   `--fsdp-explain-policy=format=json`), then picks budgets from them: none,
   two between the hand policies' peaks, just above the smallest hand peak,
   and one below every hand peak (which must be refused).
3. Compiles every hand policy (each strategy, fsdp-schedule's defaults) and
   policy=auto at each budget through the whole training pipeline (AdamW,
   clipping), runs each plan for --steps steps under mpirun, and measures
   the step time (median of the last two thirds of the steps) and memory (the
   arenas the runtime allocated, its kernel workspace, and the growth of
   rank 0's resident memory over the run).
4. Prints, per model, world size and budget, the auto choice's modelled and
   measured step time and peak beside the best hand policy's (the fastest
   by the model among those that fit), the planned peak (the plan's
   arenas) beside the measured one, and the Spearman rank correlation of
   modelled and measured step times over the distinct candidates.

Exit status 1 if policy=auto is slower by the model than a fitting hand
policy, fails a budget some hand policy fits, or a plan's allocated arenas
differ from its planned peak.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MODELS = {  # corpus class, its arguments
    "gpt2": ("GPT2", dict(vocab=512, d=256, n_layer=4, n_head=4, max_len=32)),
    "llama": ("Llama", dict(vocab=512, d=256, n_layer=4, n_head=4, hidden=688,
                            max_len=32)),
}
# Tokens per sequence, sequences per rank: few tokens for the parameters,
# so that communication is a good part of the step and the policies differ.
SEQ, BATCH = 32, 1
STRATEGIES = ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"]
# A small learning rate: repeated steps on one batch at 1e-3 drive values
# into float32's subnormal range, where the CPU slows down step after step.
LR = "1e-5"
def reserved(peak: int) -> int:
    """The modelled peak with fsdp-auto-wrap's default memory-reserve (10%,
    at least 16 KiB): what must be within a budget."""
    return peak + max(16 << 10, int(peak * 0.1))
MPI_ENV = dict(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, env=None, **kwargs) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                           f"{proc.stderr[-3000:]}")
    return proc.stdout


def mpirun(world: int, cmd) -> str:
    return run(["mpirun", "-np", world, "--oversubscribe", *cmd], env=MPI_ENV)


def export(name: str, out: Path, max_world: int) -> None:
    """Exports the model and a global batch for max_world ranks (in a
    subprocess: one torch export per process)."""
    if (out / f"{name}.onnx").exists():
        return
    code = f"""
import sys
sys.path[:0] = [{str(ROOT / 'test/corpus')!r}, {str(ROOT / 'python-frontend')!r}]
import numpy as np, torch, fsdp_mlir, models
torch.manual_seed(0)
cls, kwargs = {MODELS[name]!r}
model = getattr(models, cls)(**kwargs)
ids = torch.randint(0, kwargs['vocab'], ({max_world * BATCH}, {SEQ}))
labels = torch.randint(0, kwargs['vocab'], ({max_world * BATCH}, {SEQ}))
fsdp_mlir.export(model, (ids[:{BATCH}], labels[:{BATCH}]), {str(out / f'{name}.onnx')!r},
                 loss_fn=models.lm_loss, input_names=['input_ids', 'labels'])
np.save({str(out / f'{name}.input_ids.npy')!r}, ids.numpy())
np.save({str(out / f'{name}.labels.npy')!r}, labels.numpy())
"""
    run(["/usr/bin/python3", "-c", code])


def calibrate(bench, world: int, work: Path, onnx: Path, name: str) -> dict:
    """This machine's cost model: one core's GEMM rate and copy bandwidth,
    MPI all-gather bandwidth over `world` ranks, the runtime's latency per
    collective, and the CPU runtime's collectives (no overlap)."""
    code = """
import time, numpy as np
a = np.random.rand(256, 512).astype(np.float32); b = np.random.rand(512, 512).astype(np.float32)
best = 1e9
for _ in range(30):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
flops = 2 * 256 * 512 * 512 / best
x = np.ones(16 << 20, np.float32); y = np.empty_like(x); best = 1e9
for _ in range(10):
    t = time.perf_counter(); np.copyto(y, x); best = min(best, time.perf_counter() - t)
print(flops, 2 * x.nbytes / best)
"""
    flops, bandwidth = map(float, run(
        ["/usr/bin/python3", "-c", code],
        env=dict(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")).split())
    probe = work / "mpi_probe"
    if not probe.exists():
        run(["mpicc", "-O2", HERE / "mpi_probe.c", "-o", probe])
    p = json.loads(mpirun(world, [probe]).strip().splitlines()[-1])
    steps = world - 1
    beta = max((p["large_seconds"] - p["small_seconds"])
               / (steps / world * (p["large_bytes"] - p["small_bytes"])), 1e-12)
    # The runtime's kernels reach a fraction of NumPy's rates: the model's
    # one-rank step (no collectives, so compute only) against the measured
    # one scales both.
    one = {"peak-flops": f"{flops:.4g}", "memory-bandwidth": f"{bandwidth:.4g}"}
    text = " ".join(f"{k}={v}" for k, v in one.items())
    modelled = bench.explain(onnx, 1, text)["chosen"]["step_seconds"]
    plan = bench.compile(onnx, 1, "policy=none", text, f"{name}-calibration-w1")
    measured = bench.measure(plan, 1, name)["step"]
    efficiency = modelled / measured
    # Ranks beyond the cores share them: each computes at cores/world.
    share = min(1.0, (os.cpu_count() or 1) / world)
    flops, bandwidth = flops * efficiency * share, bandwidth * efficiency * share
    print(f"calibration: one rank's step modelled {modelled * 1e3:.3f} ms at NumPy's "
          f"rates, measured {measured * 1e3:.3f} ms: the runtime reaches "
          f"{efficiency:.2f} of them")
    return {"peak-flops": f"{flops:.4g}", "memory-bandwidth": f"{bandwidth:.4g}",
            "intra-latency": f"{bench.runtime_latency(world):.4g}",
            "intra-bandwidth": f"{1 / beta:.4g}", "ranks-per-node": str(world),
            "cpu-runtime": "true"}


def hand_wrap(policy: str) -> str:
    """fsdp-auto-wrap's options for a hand policy named as the explanation
    names it."""
    if policy.startswith("no wrapping"):
        return "policy=none"
    if policy.startswith("transformer"):
        return "policy=transformer " + policy.split(" ", 1)[1]
    m = re.match(r"size min-num-params=1e(\d+)", policy)
    if m:
        return f"policy=size min-num-params={10 ** int(m.group(1))}"
    raise ValueError(policy)


class Bench:
    def __init__(self, args):
        self.bin = args.build.resolve() / "bin"
        self.work = args.work_dir or Path(tempfile.mkdtemp(prefix="fsdp-auto-wrap-"))
        self.steps = args.steps
        self.failures: list[str] = []

    def opt(self, onnx: Path, world: int, wrap: str, out: Path, extra=(),
            batch=BATCH) -> str:
        return run([self.bin / "fsdp-opt", onnx, f"--batch-size={batch}",
                    f"--fsdp-auto-wrap={wrap}", *extra, "-o", out])

    def explain(self, onnx, world, cost, budget=None) -> dict:
        wrap = f"policy=auto world-size={world} {cost}" + (
            f" memory-budget={budget}" if budget else "")
        return json.loads(self.opt(onnx, world, wrap, "/dev/null",
                                   extra=["--fsdp-explain-policy=format=json"]))

    def compile(self, onnx, world, wrap, schedule, tag, batch=BATCH) -> Path:
        mlir, plan = self.work / f"{tag}.mlir", self.work / f"{tag}.plan"
        self.opt(onnx, world, wrap, mlir, batch=batch, extra=
                 ["--fsdp-autodiff", f"--fsdp-flatten=world-size={world}",
                  "--fsdp-optimizer=optimizer=adamw max-grad-norm=1", "--fsdp-shard",
                  "--fsdp-schedule" + (f"={schedule}" if schedule else ""),
                  "--fsdp-inference", "--fsdp-lower-pipeline"])
        run([self.bin / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
        return plan

    def global_batch(self, name: str, world: int) -> list:
        """fsdp-run's --input flags for the global batch of `world` ranks."""
        import numpy as np
        flags = []
        for what in ("input_ids", "labels"):
            path = self.work / f"{name}.w{world}.{what}.npy"
            if not path.exists():
                np.save(path, np.load(self.work / f"{name}.{what}.npy")[:world * BATCH])
            flags += ["--input", f"{what}={path}"]
        return flags

    def train(self, plan: Path, world: int, steps: int, flags: list) -> dict:
        """fsdp-run's JSON report of `steps` steps on one rank thread each
        (under mpirun for several ranks)."""
        cmd = [self.bin / "fsdp-run", plan, "--threads", 1, "--steps", steps,
               "--lr", LR, "--json", *flags]
        return json.loads(mpirun(world, cmd) if world > 1 else run(cmd))

    def runtime_latency(self, world: int) -> float:
        """Seconds per ring step of a small collective as the runtime sees
        them: the test corpus's tiny LLaMA (not a benchmarked model) with
        every module its own unit, communication seconds per collective
        over a run, divided by the P - 1 steps of a ring."""
        corpus = self.bin.parent / "test/corpus/llama.onnx"
        ids = self.work / "calibration.ids.npy"
        import numpy as np
        np.save(ids, np.random.default_rng(0).integers(0, 64, (world * 2, 16)))
        plan = self.compile(corpus, world, "policy=size min-num-params=1", "",
                            f"calibration-w{world}", batch=2)
        count = json.loads(run([self.bin / "fsdp-run", plan, "--describe", "--json"]))
        collectives = sum(count["collectives"].values())
        report = self.train(plan, world, 20, ["--input", f"input_ids={ids}",
                                              "--input", f"labels={ids}"])
        per_step = report["communication_seconds"] / 20
        return per_step / collectives / (world - 1)

    def measure(self, plan: Path, world: int, name: str) -> dict:
        described = json.loads(run([self.bin / "fsdp-run", plan, "--describe", "--json"]))
        report = self.train(plan, world, self.steps, self.global_batch(name, world))
        mem = report["memory"]
        arenas = mem["activation_bytes"] + mem["weight_bytes"] + mem["constant_bytes"]
        return {"planned": described["peak_bytes"], "arenas": arenas,
                "workspace": mem["workspace_bytes"],
                "rss_growth": mem["peak_rss_bytes"] - mem["rss_before_session_bytes"],
                "step": statistics.median(report["run_seconds"][self.steps // 3:]),
                "units": len(described["units"])}


def spearman(xs, ys) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else float("nan")


def mib(b) -> str:
    return f"{b / 2**20:8.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--worlds", nargs="*", type=int, default=[2, 4])
    ap.add_argument("--steps", type=int, default=24)
    args = ap.parse_args()
    b = Bench(args)
    b.work.mkdir(parents=True, exist_ok=True)
    print(f"work dir {b.work}")
    correlations = []
    for name in args.models:
        export(name, b.work, max(args.worlds))
        onnx = b.work / f"{name}.onnx"
        for world in args.worlds:
            cost = calibrate(b, world, b.work, onnx, name)
            schedule = " ".join(f"{k}={v}" for k, v in cost.items())
            cost_text = schedule + " clipping=true"  # the step clips
            print(f"\n== {name}, {world} ranks; cost model: {schedule}", flush=True)
            # Every hand policy with each strategy, compiled, run, measured.
            rows = {}
            for strategy in STRATEGIES:
                free = b.explain(onnx, world, f"{cost_text} strategy={strategy}")
                for h in free["hand_policies"]:
                    if "invalid" in h:
                        continue
                    label = f"{h['policy']} [{strategy}]"
                    tag = f"{name}-w{world}-{re.sub(r'[^a-zA-Z0-9]+', '_', label)}"
                    plan = b.compile(onnx, world,
                                     f"{hand_wrap(h['policy'])} strategy={strategy}",
                                     schedule, tag)
                    rows[label] = dict(modelled_step=h["step_seconds"],
                                       modelled_peak=h["peak_bytes"],
                                       **b.measure(plan, world, name))
            peaks = sorted(r["modelled_peak"] for r in rows.values())
            budgets = [None, reserved((peaks[0] + peaks[-1]) // 2),
                       reserved((3 * peaks[0] + peaks[-1]) // 4),
                       reserved(peaks[0]) + 64, int(peaks[0] * 0.9)]
            budgets = list(dict.fromkeys(budgets))
            print(f"{'budget MiB':>10s} {'policy':52s} {'units':>5s} {'model ms':>9s} "
                  f"{'meas. ms':>9s} {'model MiB':>9s} {'plan MiB':>9s} "
                  f"{'arenas MiB':>10s} {'wksp MiB':>8s} {'RSS+ MiB':>8s}")

            def line(budget, policy, r):
                print(f"{budget:>10s} {policy:52s} {r['units']:5d} "
                      f"{r['modelled_step'] * 1e3:9.3f} {r['step'] * 1e3:9.3f} "
                      f"{mib(r['modelled_peak']):>9s} {mib(r['planned']):>9s} "
                      f"{mib(r['arenas']):>10s} {mib(r['workspace']):>8s} "
                      f"{mib(r['rss_growth']):>8s}", flush=True)
                if r["arenas"] != r["planned"]:
                    b.failures.append(f"{name} w{world} {policy}: arenas {r['arenas']} "
                                      f"!= planned {r['planned']}")

            for policy, r in rows.items():
                line("(hand)", policy, r)
            candidates = list(rows.values())
            for budget in budgets:
                label = "none" if budget is None else f"{budget / 2**20:.3f}"
                fitting = [(p, r) for p, r in rows.items()
                           if budget is None or reserved(r["modelled_peak"]) <= budget]
                try:
                    choice = b.explain(onnx, world, cost_text, budget)
                except RuntimeError as error:
                    refused = "no configuration fits" in str(error)
                    print(f"{label:>10s} auto: refused ({'as expected' if not fitting else 'WRONG'}): "
                          + str(error).split("error: ", 1)[-1].splitlines()[0][:160])
                    if fitting or not refused:
                        b.failures.append(f"{name} w{world} budget {label}: auto refused "
                                          f"but {fitting[0][0] if fitting else '?'} fits")
                    continue
                c = choice["chosen"]
                tag = f"{name}-w{world}-auto-{label}"
                plan = b.compile(onnx, world,
                                 f"policy=auto world-size={world} {cost_text}"
                                 + (f" memory-budget={budget}" if budget else ""), "", tag)
                r = dict(modelled_step=c["step_seconds"], modelled_peak=c["peak_bytes"],
                         **b.measure(plan, world, name))
                candidates.append(r)
                line(label, "auto (" + ", ".join(sorted({u["strategy"] for u in c["units"]}))
                     + f"; {c['schedule']['limit_all_gathers']} in flight)", r)
                if fitting:
                    best_p, best = min(fitting, key=lambda pr: pr[1]["modelled_step"])
                    print(f"{'':>10s}   best hand that fits: {best_p}: model "
                          f"{best['modelled_step'] * 1e3:.3f} ms vs auto "
                          f"{r['modelled_step'] * 1e3:.3f} ms; measured "
                          f"{best['step'] * 1e3:.3f} ms vs auto {r['step'] * 1e3:.3f} ms")
                    if r["modelled_step"] > best["modelled_step"] * (1 + 1e-9):
                        b.failures.append(f"{name} w{world} budget {label}: auto slower "
                                          f"by the model than {best_p}")
                if budget is not None and r["planned"] > budget:
                    print(f"{'':>10s}   note: planned {r['planned']} B is over the budget "
                          f"{budget} B (the model estimated {r['modelled_peak']} B)")
            rho = spearman([r["modelled_step"] for r in candidates],
                           [r["step"] for r in candidates])
            correlations.append((name, world, len(candidates), rho))
            print(f"Spearman rank correlation, modelled vs measured step time over "
                  f"{len(candidates)} plans: {rho:.2f}")
    print("\nrank correlation of modelled and measured step times:")
    for name, world, n, rho in correlations:
        print(f"  {name:6s} {world} ranks: {rho:5.2f} over {n} plans")
    for failure in b.failures:
        print("FAIL:", failure)
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
