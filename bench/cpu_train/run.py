#!/usr/bin/env python3
"""One AdamW training step on the CPU: fsdp-run against torch eager and
torch FSDP, same models, weights, data and thread counts, in one run.

    /usr/bin/python3 bench/cpu_train/run.py [--build build] [--only gpt2 ...]
        [--threads 1 2] [--ranks 2] [--rounds 3] [--steps 5] [--small]

For each model (the corpus's GPT-2 and LLaMA classes at d=512, 6 layers,
256 tokens; torchvision's ResNet-50 at 64x64; batch 4; `--small` shrinks
them for a smoke run) it exports the model with its loss
(fsdp_mlir.export), compiles the training step with AdamW at world size 1
and, FULL_SHARD with the model's block class as the auto-wrap policy, at
world size `--ranks`, then times, round by round so that load from other
work on the machine falls on every side:

  - ours, T threads:  fsdp-run --threads T --steps S (its own per-step
                      times; weights loaded outside the timing);
  - torch, T threads: the same model, weights, data and AdamW in a fresh
                      process with torch.set_num_threads(T) and
                      OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = T (Debian's
                      torch links OpenBLAS, which set_num_threads alone does
                      not limit); at T > 1 both with and without
                      OMP_WAIT_POLICY=PASSIVE, the ratio taken against the
                      better of the two;
  - ours, N ranks:    mpirun -np N fsdp-run --threads 1 on the global batch;
  - torch FSDP, N ranks: FullyShardedDataParallel (torch 1.13, FULL_SHARD,
                      the same policy) on gloo, one thread per rank, through
                      test/oracle/fsdp_oracle.py's CPU patches (gloo has no
                      reduce-scatter: it runs as an all-reduce there);
  - torch 2.x, for GPT-2 and LLaMA, when `--torch2-python` (default the
                      project's .venv-torch2) has it: eager and
                      torch.compile (inductor, CPU; the model compiled,
                      AdamW eager) at T threads, pinned as above, and FSDP2
                      (fully_shard on every block and the root, gloo) at N
                      ranks; each compared with ours the same way.

Each figure is the median step time over all rounds, the first `--warmup`
steps of every run left out. It prints the ratios (ours / torch: below 1
is faster), peak RSS per rank (ours: fsdp-run's VmHWM; torch: each rank's
ru_maxrss), and where our step goes: one profiled step (FSDPRT_PROFILE=1,
1 thread) summed by kernel class. The loss of the first step must agree
between the two sides (printed; exit 1 when it does not: the sides would
not be training the same model); the figures are never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "test" / "corpus"))
sys.path.insert(0, str(ROOT / "test" / "oracle"))
sys.path.insert(0, str(ROOT / "python-frontend"))

LR = 1e-3

# name: (builder, block class, batch); the builders take `small`.
MODELS = {}


def model(name, block, batch):
    def register(build):
        MODELS[name] = (build, block, batch)
        return build
    return register


@model("gpt2", "GPT2Block", 4)
def gpt2(small: bool):
    import models
    import torch

    torch.manual_seed(0)
    d, layers, seq, vocab = (64, 2, 32, 256) if small else (512, 6, 256, 8192)
    net = models.GPT2(vocab=vocab, d=d, n_layer=layers, n_head=8, max_len=seq)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (4, seq), generator=g)
    labels = torch.randint(0, vocab, (4, seq), generator=g)
    return net, ids, labels, models.lm_loss, f"GPT-2 d={d} x{layers}, vocab {vocab}, 4 x {seq} tokens"


@model("llama", "LlamaBlock", 4)
def llama(small: bool):
    import models
    import torch

    torch.manual_seed(0)
    d, layers, seq, vocab = (64, 2, 32, 256) if small else (512, 6, 256, 8192)
    net = models.Llama(vocab=vocab, d=d, n_layer=layers, n_head=8, hidden=d * 8 // 3,
                       max_len=seq)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (4, seq), generator=g)
    labels = torch.randint(0, vocab, (4, seq), generator=g)
    return net, ids, labels, models.lm_loss, f"LLaMA d={d} x{layers}, vocab {vocab}, 4 x {seq} tokens"


@model("resnet50", "Bottleneck", 4)
def resnet50(small: bool):
    import torch
    import torch.nn.functional as F
    import torchvision

    torch.manual_seed(0)
    side = 32 if small else 64
    net = (torchvision.models.resnet18 if small else torchvision.models.resnet50)(
        weights=None, num_classes=100)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, side, side, generator=g)
    labels = torch.randint(0, 100, (4,), generator=g)
    what = f"torchvision {'resnet18' if small else 'resnet50'}, 4 x 3 x {side} x {side}"
    return net, x, labels, F.cross_entropy, what


def block_of(name: str, small: bool) -> str:
    return "BasicBlock" if name == "resnet50" and small else MODELS[name][1]


# --------------------------------------------------------------------------
# The torch side: a fresh process per run, so its thread settings hold.
# --------------------------------------------------------------------------


def torch_worker(args) -> int:
    """`run.py _torch MODEL WORK STEPS [--small] [--rank R --world N --port P]`:
    the torch steps, one JSON line with the step times, losses and peak RSS."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    build = MODELS[args.model][0]
    net, x, labels, loss_fn, _ = build(args.small)
    net.load_state_dict(torch.load(Path(args.work) / f"{args.model}.init.pt"))
    world = args.world
    if world > 1:
        wrap = fsdp2_wrap if args.fsdp2 else fsdp_wrap
        net, x, labels = wrap(net, x, labels, args)
    net.train()
    if args.compile:
        net = torch.compile(net)
    opt = torch.optim.AdamW(net.parameters(), lr=LR)
    times, losses = [], []
    for _ in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(net(x), labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(dict(times=times, losses=losses, peak_rss=rss)), flush=True)
    return 0


def fsdp_wrap(net, x, labels, args):
    """torch 1.13 FSDP (FULL_SHARD, the block class as the policy) on gloo,
    this rank's slice of the global batch."""
    import datetime
    import functools

    import fsdp_oracle
    import torch.distributed as dist

    fsdp_oracle.enable_fsdp_import()
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    fsdp_oracle.patch_compute_device_cpu(FSDP)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=300))
    fsdp_oracle.enable_cpu_training(dist)
    block = block_of(args.model, args.small)
    classes = {type(m) for m in net.modules() if type(m).__name__ == block}
    policy = functools.partial(transformer_auto_wrap_policy,
                               transformer_layer_cls=classes)
    wrapped = FSDP(net, auto_wrap_policy=policy,
                   sharding_strategy=ShardingStrategy.FULL_SHARD)
    per = x.shape[0] // args.world
    part = slice(args.rank * per, (args.rank + 1) * per)
    return wrapped, x[part], labels[part]


def fsdp2_wrap(net, x, labels, args):
    """torch 2.x FSDP2: fully_shard on every block and the root, gloo,
    this rank's slice of the global batch."""
    import datetime

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=300))
    block = block_of(args.model, args.small)
    for module in net.modules():
        if type(module).__name__ == block:
            fully_shard(module)
    fully_shard(net)
    per = x.shape[0] // args.world
    part = slice(args.rank * per, (args.rank + 1) * per)
    return net, x[part], labels[part]


def torch_env(threads: int, passive: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), GLOO_SOCKET_IFNAME="lo")
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


# torch 2.x's peers: (label, interpreter flag, worker flags).
TORCH2_PEERS = [("torch 2.x eager", []), ("torch.compile", ["--compile"])]
TORCH2_MODELS = ("gpt2", "llama")


def torch_cmd(name: str, work: Path, steps: int, small: bool, python=None,
              flags=()) -> list[str]:
    return [str(python or sys.executable), str(Path(__file__).resolve()), "_torch", name,
            str(work), str(steps)] + (["--small"] if small else []) + list(flags)


def time_torch(name, work, steps, small, threads, passive, python=None, flags=()) -> dict:
    proc = subprocess.run(torch_cmd(name, work, steps, small, python, flags),
                          capture_output=True, text=True, env=torch_env(threads, passive),
                          timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"torch ({name}, {threads} threads, {python or sys.executable} "
                 f"{' '.join(flags)}) failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def torch2_missing(python: Path) -> str:
    """Why `python` cannot run the torch 2.x peers, or ""."""
    if str(python) == "none":
        return "--torch2-python none"
    if not python.exists():
        return f"no {python} (scripts/setup.sh makes it)"
    proc = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip().startswith("2."):
        return f"{python} has no torch 2.x"
    return ""


def time_torch_fsdp(name, work, steps, small, world, python=None, flags=()) -> list[dict]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(torch_cmd(name, work, steps, small, python, flags) +
                              ["--rank", str(r), "--world", str(world), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=torch_env(1, False))
             for r in range(world)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            for q in procs:
                q.kill()
            sys.exit(f"torch FSDP ({name}, {world} ranks) failed:\n{err}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# --------------------------------------------------------------------------
# Our side
# --------------------------------------------------------------------------


def run(cmd, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        sys.exit(f"command failed (exit {proc.returncode}): {' '.join(map(str, cmd))}\n"
                 f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def prepare(name: str, work: Path, bindir: Path, small: bool, ranks: int) -> dict:
    """Exports and compiles `name`; its inputs as .npy, its initial weights."""
    import numpy as np
    import torch

    import fsdp_mlir

    build, _, batch = MODELS[name]
    net, x, labels, loss_fn, what = build(small)
    torch.save(net.state_dict(), work / f"{name}.init.pt")
    onnx = work / f"{name}.onnx"
    fsdp_mlir.export(net, (x, labels), onnx, loss_fn=loss_fn, input_names=["x", "labels"],
                     external_data=True)
    feeds = []
    for input_name, value in (("x", x), ("labels", labels)):
        path = work / f"{name}.{input_name}.npy"
        np.save(path, value.numpy())
        feeds += ["--input", f"{input_name}={path}"]
    plans = {}
    for world in (1, ranks):
        mlir, plan = work / f"{name}.w{world}.mlir", work / f"{name}.w{world}.plan"
        run([bindir / "fsdp-opt", onnx, f"--batch-size={batch // world}",
             f"--fsdp-train-pipeline=world-size={world} autodiff={{}}"
             f" auto-wrap={{policy=transformer layer-classes={block_of(name, small)}}}"
             f" optimizer={{optimizer=adamw}}", "-o", mlir])
        run([bindir / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
        plans[world] = plan
    params = sum(p.numel() for p in net.parameters())
    return dict(plans=plans, feeds=feeds, what=f"{what}, {params / 1e6:.1f}M parameters")


MPI_ENV = dict(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1")


def time_ours(bindir, prepared, steps, threads, world=1, profile=False) -> dict:
    cmd = [bindir / "fsdp-run", prepared["plans"][world], *prepared["feeds"], "--steps",
           steps, "--lr", LR, "--threads", threads, "--json"]
    env = dict(os.environ, **MPI_ENV)
    if world > 1:
        cmd = ["mpirun", "-np", world, "--oversubscribe", "--bind-to", "none", *cmd]
    if profile:
        env["FSDPRT_PROFILE"] = "1"
    proc = run(cmd, env)
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    if profile:
        report["profile"] = proc.stderr
    return report


# Kernel classes of the breakdown: the first pattern that matches the op.
CLASSES = [
    ("GEMM", r"^(matmul|linear|gemm|batch_matmul)"),
    ("convolution", r"^conv"),
    ("attention", r"attention"),
    ("norms", r"norm"),
    ("softmax / cross-entropy", r"softmax|cross_entropy|log_softmax"),
    ("transpose / copy", r"^(transpose|copy|concat|slice|pack|unflatten|cast|expand|gather)"),
    ("optimizer", r"^(adamw|sgd|clip)"),
    ("collectives", r"^(all_gather|reduce_scatter|all_reduce|wait)"),
    ("reductions", r"^reduce"),
    ("pooling", r"pool"),
]


def breakdown(profile: str) -> dict[str, float]:
    """ms per kernel class over the last step of a FSDPRT_PROFILE=1 run."""
    lines = re.findall(r"^fsdprt: kernel (\d+) \((\w+)[^\n]*: ([0-9.]+) ms$", profile,
                       re.MULTILINE)
    last = []
    for index, op, ms in lines:  # the last step: from the last kernel 0 on
        if int(index) == 0:
            last = []
        last.append((op, float(ms)))
    totals: dict[str, float] = {}
    for op, ms in last:
        cls = next((c for c, pattern in CLASSES if re.search(pattern, op)), "elementwise / other")
        totals[cls] = totals.get(cls, 0.0) + ms
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


# --------------------------------------------------------------------------


def median_after(times: list[float], warmup: int) -> float:
    return statistics.median(times[warmup:] if len(times) > warmup else times)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_torch":
        ap = argparse.ArgumentParser()
        ap.add_argument("model")
        ap.add_argument("work")
        ap.add_argument("steps", type=int)
        ap.add_argument("--small", action="store_true")
        ap.add_argument("--rank", type=int, default=0)
        ap.add_argument("--world", type=int, default=1)
        ap.add_argument("--port", type=int, default=0)
        ap.add_argument("--compile", action="store_true", help="torch.compile the model")
        ap.add_argument("--fsdp2", action="store_true", help="fully_shard, not FSDP1")
        return torch_worker(ap.parse_args(argv[1:]))

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--only", nargs="+", choices=list(MODELS), metavar="MODEL")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="steps of each run not timed")
    ap.add_argument("--small", action="store_true", help="small shapes: a smoke run")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--torch2-python", type=Path,
                    default=ROOT / ".venv-torch2" / "bin" / "python",
                    help="the interpreter of the torch 2.x peers ('none': leave them out)")
    args = ap.parse_args(argv)
    if args.steps <= args.warmup:
        ap.error("--steps must be more than --warmup")

    import torch

    bindir = args.build.resolve() / "bin"
    args.no_torch2 = torch2_missing(args.torch2_python)
    if args.no_torch2:
        print(f"torch 2.x peers left out: {args.no_torch2}", flush=True)
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.only or list(MODELS):
            start = time.perf_counter()
            prepared = prepare(name, work, bindir, args.small, args.ranks)
            print(f"{name}: {prepared['what']}; exported and compiled in "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            table += measure(name, work, bindir, prepared, args)

    print()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; medians over {args.rounds} "
          f"rounds of {args.steps} steps, the first {args.warmup} of each run not timed")
    print("| model | setting | torch (ms) | ours (ms) | ours / torch | peak RSS per rank, "
          "ours / torch (MiB) |")
    print("|---|---|---|---|---|---|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    return 0


def ratio_row(name, label, peer, other, mine, rss_mine, rss_other) -> list[str]:
    """One table row (ours against `peer`), also printed."""
    mib = 2.0 ** 20
    print(f"  {label}: {peer} {other:.1f} ms, ours {mine:.1f} ms, ratio {mine / other:.2f}",
          flush=True)
    return [name, label, f"{other:.1f}", f"{mine:.1f}", f"{mine / other:.2f}",
            f"{rss_mine / mib:.0f} / {rss_other / mib:.0f}"]


def measure(name, work, bindir, prepared, args) -> list[list[str]]:
    """The rounds for one model; table rows."""
    settings = [(t, False) for t in args.threads] + [(t, True) for t in args.threads if t > 1]
    ours = {t: [] for t in args.threads}
    theirs = {s: [] for s in settings}
    rss_ours, rss_theirs = {}, {}
    dist_ours, dist_theirs, dist_rss = [], [], (0, 0)
    peers2 = [] if args.no_torch2 or name not in TORCH2_MODELS else TORCH2_PEERS
    theirs2 = {(label, *s): [] for label, _ in peers2 for s in settings}
    rss2, dist2, dist2_rss = {}, [], 0
    losses2 = []
    losses = None
    for _ in range(args.rounds):
        for threads in args.threads:
            report = time_ours(bindir, prepared, args.steps, threads)
            ours[threads].append(median_after(report["run_seconds"], args.warmup))
            rss_ours[threads] = report["memory"]["peak_rss_bytes"]
            losses = (report["losses"][0], None)
            for setting in [s for s in settings if s[0] == threads]:
                result = time_torch(name, work, args.steps, args.small, *setting)
                theirs[setting].append(median_after(result["times"], args.warmup))
                rss_theirs[threads] = result["peak_rss"]
                losses = (losses[0], result["losses"][0])
                for label, flags in peers2:
                    result = time_torch(name, work, args.steps, args.small, *setting,
                                        python=args.torch2_python, flags=flags)
                    theirs2[(label, *setting)].append(median_after(result["times"],
                                                                   args.warmup))
                    rss2[(label, threads)] = result["peak_rss"]
                    losses2.append((label, result["losses"][0]))
        if args.ranks > 1 and peers2:
            results = time_torch_fsdp(name, work, args.steps, args.small, args.ranks,
                                      python=args.torch2_python, flags=["--fsdp2"])
            dist2.append(max(median_after(r["times"], args.warmup) for r in results))
            dist2_rss = max(r["peak_rss"] for r in results)
            losses2.append(("FSDP2", statistics.mean(r["losses"][0] for r in results)))
        if args.ranks > 1:
            report = time_ours(bindir, prepared, args.steps, 1, args.ranks)
            dist_ours.append(median_after(report["run_seconds"], args.warmup))
            results = time_torch_fsdp(name, work, args.steps, args.small, args.ranks)
            dist_theirs.append(max(median_after(r["times"], args.warmup) for r in results))
            dist_rss = (report["memory"]["peak_rss_bytes"], max(r["peak_rss"] for r in results))
    agree = abs(losses[0] - losses[1]) <= 1e-4 * max(abs(losses[1]), 1.0)
    print(f"  first-step loss: ours {losses[0]:.6f}, torch {losses[1]:.6f}"
          f"{'' if agree else '  MISMATCH: the two sides do not train the same model'}",
          flush=True)
    for label, loss in losses2:
        if abs(losses[0] - loss) > 1e-4 * max(abs(loss), 1.0):
            print(f"  first-step loss: ours {losses[0]:.6f}, {label} {loss:.6f}  MISMATCH: "
                  "the two sides do not train the same model", flush=True)
            agree = False
    if not agree:
        sys.exit(1)
    rows = []
    for peer, times, rss in [("torch", theirs, rss_theirs)] + [
            (label, {(t, p): v for (lab, t, p), v in theirs2.items() if lab == label},
             {t: v for (lab, t), v in rss2.items() if lab == label})
            for label, _ in peers2]:
        for threads in args.threads:
            mine = statistics.median(ours[threads]) * 1e3
            options = {p: statistics.median(times[(threads, p)]) * 1e3
                       for p in (False, True) if (threads, p) in times}
            best = min(options, key=options.get)
            label = f"{threads} thread{'s' if threads > 1 else ''}"
            label += "" if peer == "torch" else f" vs {peer}"
            if len(options) > 1:
                label += (f" ({'torch ' if peer == 'torch' else ''}"
                          f"{'PASSIVE' if best else 'default'}; other "
                          f"{options[not best]:.0f} ms)")
            rows.append(ratio_row(name, label, peer, options[best], mine,
                                  rss_ours[threads], rss[threads]))
    for peer, times, rss in (("FSDP2 fully_shard", dist2, dist2_rss),
                             ("torch FSDP", dist_theirs, dist_rss[1])):
        if times and dist_ours:
            rows.append(ratio_row(name, f"{args.ranks} ranks FULL_SHARD vs {peer} (gloo)",
                                  peer, statistics.median(times) * 1e3,
                                  statistics.median(dist_ours) * 1e3, dist_rss[0], rss))
    profiled = time_ours(bindir, prepared, 2, 1, profile=True)
    parts = breakdown(profiled["profile"])
    total = sum(parts.values())
    print(f"  our step at 1 thread by kernel class ({total:.0f} ms profiled): " +
          ", ".join(f"{k} {v:.0f} ms ({v / total:.0%})" for k, v in parts.items()), flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
