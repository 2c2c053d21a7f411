#!/usr/bin/env python3
"""The example hosts, built against the installed package, equal fsdp-run.

Installs the build to a temporary prefix (`cmake --install`), builds
examples/hosts/infer (C) and examples/hosts/train (C++) out of tree against
it twice, with CMake's find_package(fsdprt) and with the pkg-config
Makefiles, compiles plans for 2 ranks with the installed fsdp-opt and
fsdp-translate, and checks on 2 MPI ranks that:
 - the inference host's outputs (a ViT's logits, each rank its slice of the
   batch) are bit-identical to `fsdp-run --output-dir`'s;
 - the training host's losses (GPT-2 with AdamW, constant learning rate,
   the same batch every step) equal `fsdp-run --steps`'s;
 - with its own schedule (warmup, cosine decay) and data (a different batch
   each step), a run resumed from the host's step-2 checkpoint continues
   with the uninterrupted run's losses.

Usage: check_hosts.py BUILD_DIR [--keep DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader")
RANKS = 2


def run(cmd, **kw) -> subprocess.CompletedProcess:
    cmd = [str(c) for c in cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=kw.pop("env", ENV),
                          timeout=300, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return proc


def mpirun(*cmd) -> subprocess.CompletedProcess:
    return run(["mpirun", "-np", RANKS, "--oversubscribe", *cmd])


def losses(text: str) -> dict:
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+) loss (\S+)", text, re.M)}


def build_hosts(prefix: Path, work: Path) -> dict:
    """Both hosts, each built with CMake and with make: {kind: {name: exe}}."""
    hosts = {"cmake": {}, "make": {}}
    for name in ("infer", "train"):
        source = ROOT / "examples" / "hosts" / name
        build = work / f"cmake-{name}"
        run(["cmake", "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}"])
        run(["cmake", "--build", build])
        hosts["cmake"][name] = build / name
        out = work / f"make-{name}"
        out.mkdir()
        env = dict(ENV, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
        run(["make", "-s", "-C", source, f"OUT={out}"], env=env)
        hosts["make"][name] = out / name
    for kind, built in hosts.items():
        for name, exe in built.items():
            libs = run(["ldd", exe]).stdout
            line = next(l for l in libs.splitlines() if "libfsdprt" in l)
            if str(prefix) not in line:
                raise RuntimeError(f"{kind} {name} links {line.strip()}, not the installed "
                                   f"library under {prefix}")
    print(f"built infer and train with CMake (find_package) and make (pkg-config) "
          f"against {prefix}")
    return hosts


def check_inference(prefix: Path, corpus: Path, hosts: dict, work: Path) -> bool:
    onnx_path = corpus / "vit.onnx"
    mlir, plan = work / "vit.mlir", work / "vit.plan"
    run([prefix / "bin" / "fsdp-opt", onnx_path, "--batch-size=2",
         "--fsdp-auto-wrap=policy=transformer layer-classes=EncoderBlock",
         f"--fsdp-flatten=world-size={RANKS}", "--fsdp-shard", "--fsdp-schedule",
         "--fsdp-inference-pipeline", "-o", mlir])
    run([prefix / "bin" / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
    graph_input = onnx.load(onnx_path, load_external_data=False).graph.input[0]
    dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim][1:]
    rng = np.random.default_rng(3)
    np.save(work / "pixels.npy", rng.standard_normal([2 * RANKS, *dims]).astype(np.float32))
    flag = f"{graph_input.name}={work / 'pixels.npy'}"
    mpirun(prefix / "bin" / "fsdp-run", plan, "--input", flag, "--threads", 1,
           "--output-dir", work / "out-fsdp-run")
    ok = True
    for kind in hosts:
        out = work / f"out-{kind}"
        proc = mpirun(hosts[kind]["infer"], plan, "--input", flag, "--output-dir", out)
        compared = 0
        for reference in sorted((work / "out-fsdp-run").glob("rank*/*.npy")):
            got_path = out / reference.parent.name / reference.name
            want, got = np.load(reference), np.load(got_path)
            same = want.dtype == got.dtype and want.shape == got.shape and \
                np.array_equal(want, got)
            ok &= same
            compared += 1
            if not same:
                print(f"  {kind} infer: {got_path} differs from fsdp-run's {reference}")
        ok &= compared == RANKS
        print(f"infer ({kind}): {compared} outputs of {RANKS} ranks "
              f"{'bit-identical to' if ok else 'DIFFER from'} fsdp-run's; "
              f"{proc.stdout.strip().splitlines()[0]}")
    return ok


def check_training(prefix: Path, corpus: Path, hosts: dict, work: Path) -> bool:
    mlir, plan = work / "gpt2.mlir", work / "gpt2.plan"
    run([prefix / "bin" / "fsdp-opt", corpus / "gpt2.onnx", "--batch-size=2",
         "--fsdp-auto-wrap=policy=transformer layer-classes=GPT2Block", "--fsdp-autodiff",
         f"--fsdp-flatten=world-size={RANKS}",
         "--fsdp-optimizer=optimizer=adamw max-grad-norm=1", "--fsdp-shard",
         "--fsdp-schedule", "--fsdp-inference-pipeline", "-o", mlir])
    run([prefix / "bin" / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])
    rng = np.random.default_rng(0)
    global_batch = 2 * RANKS
    # One global batch (fsdp-run feeds the same one every step), and four.
    for name, batches in (("one", 1), ("four", 4)):
        for field in ("ids", "labels"):
            np.save(work / f"{field}-{name}.npy",
                    rng.integers(0, 64, (batches * global_batch, 16)).astype(np.int64))

    def data(name):
        return ["--data", f"input_ids={work / f'ids-{name}.npy'}",
                "--data", f"labels={work / f'labels-{name}.npy'}"]

    want = losses(mpirun(prefix / "bin" / "fsdp-run", plan,
                         "--input", f"input_ids={work / 'ids-one.npy'}",
                         "--input", f"labels={work / 'labels-one.npy'}",
                         "--steps", 3, "--lr", "1e-3", "--threads", 1).stdout)
    ok = len(want) == 3
    schedule = ["--lr", "2e-3", "--warmup", 2, "--min-lr", "1e-4", "--total-steps", 4]
    for kind in hosts:
        train = hosts[kind]["train"]
        got = losses(mpirun(train, plan, *data("one"), "--steps", 3, "--lr", "1e-3").stdout)
        same = got.keys() == want.keys() and all(
            abs(got[k] - want[k]) <= 1e-6 * abs(want[k]) for k in want)
        ok &= same
        print(f"train ({kind}): losses {[got.get(k) for k in sorted(want)]} "
              f"{'equal' if same else 'DIFFER from'} fsdp-run's "
              f"{[want[k] for k in sorted(want)]}")

        ck = work / f"ck-{kind}"
        full = losses(mpirun(train, plan, *data("four"), "--steps", 4, *schedule,
                             "--checkpoint-dir", ck, "--checkpoint-every", 2).stdout)
        resumed = losses(mpirun(train, plan, *data("four"), "--steps", 2, *schedule,
                                "--resume", ck / "step-2").stdout)
        distinct = len({round(v, 6) for v in full.values()}) == 4
        same = sorted(resumed) == [3, 4] and all(
            abs(resumed[k] - full[k]) <= 1e-6 * abs(full[k]) for k in resumed)
        ok &= same and distinct and (ck / "step-4" / "index.json").exists()
        print(f"train ({kind}): 4 steps {[full.get(k) for k in range(1, 5)]}; resumed "
              f"from step-2: {[resumed.get(k) for k in (3, 4)]} "
              f"{'equal' if same else 'DIFFER'}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    build = args.build.resolve()
    corpus = build / "test" / "corpus"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        prefix = work / "prefix"
        run(["cmake", "--install", build, "--prefix", prefix])
        hosts = build_hosts(prefix, work)
        ok = check_inference(prefix, corpus, hosts, work)
        ok &= check_training(prefix, corpus, hosts, work)
    print("example hosts: all checks passed" if ok else "example hosts: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
