#!/usr/bin/env python3
"""The example hosts, built against the installed package, equal fsdp-run.

Installs the build to a temporary prefix (`cmake --install`), builds
examples/hosts/infer (C) and examples/hosts/train (C++) out of tree against
it twice, with CMake's find_package(fsdprt) and with the pkg-config
Makefiles (checking that both use the installed package, not the build
tree, and leave nothing in the source tree), compiles plans for 2 ranks
with the installed fsdp-opt and fsdp-translate, and checks on 2 MPI ranks
that:
 - the inference host's output files (a ViT's logits, each rank its slice
   of the global batch; and with a file of the plan's shape, which every
   rank takes whole) are byte-identical to `fsdp-run --output-dir`'s;
 - the training host's losses (GPT-2 with AdamW, constant learning rate,
   the same batch every step, as fsdp-run feeds it) equal
   `fsdp-run --steps`'s exactly (both average the ranks' losses with
   fsdprt_session_mean_over_ranks);
 - with its own schedule (warmup, cosine decay) and data (a different batch
   each step), a run resumed from the host's step-2 checkpoint prints
   exactly the uninterrupted run's losses for steps 3 and 4;
 - bad inputs end every rank with a "<host>: error:" message naming the
   file or the input, instead of hanging.

Usage: check_hosts.py BUILD_DIR [--keep DIR]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "examples" / "hosts"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl="self,vader")
RANKS = 2
# The hosts build without a warning (the examples leave -Werror to their users).
WARNINGS = "-O2 -Wall -Wextra -Werror"


class CheckFailed(Exception):
    pass


def run(cmd, expect_ok=True, env=None, timeout=300) -> subprocess.CompletedProcess:
    cmd = [str(c) for c in cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"hung for {timeout} s: {' '.join(cmd)}")
    if expect_ok and proc.returncode != 0:
        raise CheckFailed(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                          f"{proc.stdout}\n{proc.stderr}")
    return proc


def mpirun(*cmd, ranks=RANKS, **kw) -> subprocess.CompletedProcess:
    return run(["mpirun", "-np", ranks, "--oversubscribe", *cmd], **kw)


def losses(text: str) -> dict:
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"^step (\d+) loss (\S+)", text, re.M)}


def source_files() -> set:
    return {p for p in HOSTS.rglob("*") if p.is_file()}


def build_hosts(prefix: Path, work: Path) -> dict:
    """Both hosts, each built with CMake and with make: {kind: {name: exe}}."""
    before = source_files()
    hosts = {"cmake": {}, "make": {}}
    for name in ("infer", "train"):
        source = HOSTS / name
        build = work / f"cmake-{name}"
        run(["cmake", "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
             "-DCMAKE_C_FLAGS=-Werror", "-DCMAKE_CXX_FLAGS=-Werror"])
        run(["cmake", "--build", build])
        found = re.search(r"^fsdprt_DIR:PATH=(.*)$",
                          (build / "CMakeCache.txt").read_text(), re.M).group(1)
        if not Path(found).resolve().is_relative_to(prefix.resolve()):
            raise CheckFailed(f"CMake found fsdprt at {found}, not under {prefix}")
        hosts["cmake"][name] = build / name
        out = work / f"make-{name}"
        env = dict(ENV, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
        run(["make", "-s", "-C", source, f"OUT={out}", f"CFLAGS={WARNINGS} -pedantic",
             f"CXXFLAGS={WARNINGS}"], env=env)
        hosts["make"][name] = out / name
    for kind, built in hosts.items():
        for name, exe in built.items():
            line = next((l for l in run(["ldd", exe]).stdout.splitlines()
                         if "libfsdprt" in l), "no libfsdprt")
            if str(prefix) not in line:
                raise CheckFailed(f"{kind}-built {name} links {line.strip()}, not the "
                                  f"installed library under {prefix}")
    left = sorted(str(p.relative_to(ROOT)) for p in source_files() - before)
    if left:
        raise CheckFailed(f"building the hosts left files in the source tree: {left}")
    print(f"built infer and train with CMake (find_package) and make (pkg-config) "
          f"against {prefix}")
    return hosts


def compile_plan(prefix: Path, model: Path, plan: Path, *passes):
    mlir = plan.with_suffix(".mlir")
    run([prefix / "bin" / "fsdp-opt", model, "--batch-size=2", *passes, "-o", mlir])
    run([prefix / "bin" / "fsdp-translate", "--mlir-to-plan", mlir, "-o", plan])


def same_files(want_dir: Path, got_dir: Path) -> list:
    """Differences between two output trees, file by file (bytes)."""
    want = {p.relative_to(want_dir) for p in want_dir.rglob("*.npy")}
    got = {p.relative_to(got_dir) for p in got_dir.rglob("*.npy")}
    problems = [f"{got_dir / p} is missing" for p in sorted(want - got)]
    problems += [f"{got_dir / p} is extra" for p in sorted(got - want)]
    for p in sorted(want & got):
        if (want_dir / p).read_bytes() != (got_dir / p).read_bytes():
            a, b = np.load(want_dir / p), np.load(got_dir / p)
            problems.append(f"{got_dir / p} differs from fsdp-run's: {b.dtype} {b.shape} vs "
                            f"{a.dtype} {a.shape}, max |diff| "
                            f"{np.max(np.abs(a - b)) if a.shape == b.shape else '-'}")
    if len(want) != RANKS:
        problems.append(f"fsdp-run wrote {len(want)} files, expected one per rank")
    return problems


def check_inference(prefix: Path, corpus: Path, hosts: dict, work: Path) -> bool:
    model, plan = corpus / "vit.onnx", work / "vit.plan"
    compile_plan(prefix, model, plan,
                 f"--fsdp-sharded-pipeline=world-size={RANKS}"
                 " auto-wrap={policy=transformer layer-classes=EncoderBlock}")
    graph_input = onnx.load(model, load_external_data=False).graph.input[0]
    dims = [d.dim_value for d in graph_input.type.tensor_type.shape.dim][1:]
    rng = np.random.default_rng(3)
    # The global batch (each rank its slice), and one of the plan's shape
    # (each rank all of it).
    np.save(work / "global.npy", rng.standard_normal([2 * RANKS, *dims]).astype(np.float32))
    np.save(work / "whole.npy", rng.standard_normal([2, *dims]).astype(np.float32))
    ok = True
    for data in ("global", "whole"):
        flag = f"{graph_input.name}={work / f'{data}.npy'}"
        reference = work / f"out-{data}-fsdp-run"
        mpirun(prefix / "bin" / "fsdp-run", plan, "--input", flag, "--output-dir", reference)
        for kind in hosts:
            out = work / f"out-{data}-{kind}"
            proc = mpirun(hosts[kind]["infer"], plan, "--input", flag, "--output-dir", out)
            problems = same_files(reference, out)
            ok &= not problems
            for problem in problems:
                print(f"  FAILED: {problem}")
            print(f"infer ({kind}-built, {data} batch): {RANKS} ranks' outputs "
                  f"{'DIFFER from' if problems else 'byte-identical to'} fsdp-run's; "
                  f"{proc.stdout.strip().splitlines()[0]}")

    # Bad inputs: every rank ends, with a message naming the file.
    infer = hosts["cmake"]["infer"]
    np.save(work / "f64.npy", rng.standard_normal([2 * RANKS, *dims]))
    np.save(work / "odd.npy", rng.standard_normal([3, *dims]).astype(np.float32))
    cases = [
        ([plan, "--input", f"{graph_input.name}={work / 'f64.npy'}"],
         f"'{work / 'f64.npy'}' is <f8 ({2 * RANKS}, {', '.join(map(str, dims))}), but a "
         f"global batch of the plan's input '{graph_input.name}' on {RANKS} rank(s) is "
         f"<f4 (float32) ({2 * RANKS}, {', '.join(map(str, dims))})"),
        ([plan, "--input", f"{graph_input.name}={work / 'odd.npy'}"], f"'{work / 'odd.npy'}' is <f4 (3,"),
        ([plan, "--input", f"{graph_input.name}={work / 'missing.npy'}"],
         f"cannot open '{work / 'missing.npy'}'"),
        ([plan, "--input", f"pixels_typo={work / 'global.npy'}"],
         "the plan has no input 'pixels_typo'"),
        ([plan], f"no --input {graph_input.name}=FILE.npy given"),
    ]
    for args, message in cases:
        ok &= expect_error(infer, "infer", [*args, "--output-dir", work / "out-bad"], message)
    ok &= expect_error(infer, "infer", [plan, "--input", f"{graph_input.name}="
                                        f"{work / 'global.npy'}", "--output-dir", work / "x"],
                       f"'{plan}' is a plan for {RANKS} rank(s), but the job has 1", ranks=1)
    return ok


def expect_error(exe: Path, name: str, args: list, message: str, ranks=RANKS) -> bool:
    proc = mpirun(exe, *args, ranks=ranks, expect_ok=False, timeout=60)
    said = [l for l in proc.stderr.splitlines() if l.startswith(f"{name}: error:")]
    ok = proc.returncode != 0 and any(message in l for l in said)
    print(f"{name} error ({'ok' if ok else 'FAILED'}): exit {proc.returncode}: "
          f"{said[0] if said else proc.stderr.strip()[-400:]}")
    if not ok:
        print(f"  expected a nonzero exit and '{name}: error: ... {message}'")
    return ok


def check_training(prefix: Path, corpus: Path, hosts: dict, work: Path) -> bool:
    plan = work / "gpt2.plan"
    compile_plan(prefix, corpus / "gpt2.onnx", plan,
                 f"--fsdp-train-pipeline=world-size={RANKS}"
                 " auto-wrap={policy=transformer layer-classes=GPT2Block}"
                 " optimizer={optimizer=adamw max-grad-norm=1}")
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
                         "--steps", 3, "--lr", "1e-3").stdout)
    ok = sorted(want) == [1, 2, 3]
    if not ok:
        print(f"  FAILED: fsdp-run printed the losses of steps {sorted(want)}, not 1-3")

    schedule = ["--lr", "2e-3", "--warmup", 2, "--min-lr", "1e-4", "--total-steps", 4]
    for kind in hosts:
        train = hosts[kind]["train"]
        got = losses(mpirun(train, plan, *data("one"), "--steps", 3, "--lr", "1e-3").stdout)
        same = got == want
        ok &= same
        print(f"train ({kind}-built): losses {list(got.values())} "
              f"{'equal' if same else 'DIFFER from'} fsdp-run's {list(want.values())}")

        ck = work / f"ck-{kind}"
        shutil.rmtree(ck, ignore_errors=True)
        full = losses(mpirun(train, plan, *data("four"), "--steps", 4, *schedule,
                             "--checkpoint-dir", ck, "--checkpoint-every", 2).stdout)
        proc = mpirun(train, plan, *data("four"), "--steps", 2, *schedule,
                      "--resume", ck / "step-2")
        resumed = losses(proc.stdout)
        distinct = len(set(full.values())) == 4
        same = (sorted(resumed) == [3, 4] and all(resumed[k] == full.get(k) for k in resumed)
                and f"resumed from {ck / 'step-2'} at step 2" in proc.stdout)
        saved = all((ck / f"step-{k}" / "index.json").exists() for k in (2, 4))
        ok &= same and distinct and saved
        print(f"train ({kind}-built): 4 steps {list(full.values())}"
              f"{'' if distinct else ' (NOT all different: same batch or LR?)'}; "
              f"resumed from step-2: {list(resumed.values())} "
              f"{'equal' if same else 'DIFFER'}"
              f"{'' if saved else '; checkpoints step-2 and step-4 NOT both saved'}")

    train = hosts["cmake"]["train"]
    ok &= expect_error(train, "train", [plan, "--data", f"input_ids={work / 'ids-one.npy'}",
                                        "--steps", 1],
                       "no --data labels=FILE.npy given for the plan's input 'labels'")
    ok &= expect_error(train, "train", [plan, *data("one"), "--steps", "many"],
                       "--steps needs a number, not 'many'")
    ok &= expect_error(train, "train", [plan, *data("one"), "--steps", 1,
                                        "--resume", work / "no-such-checkpoint"],
                       f"cannot resume from {work / 'no-such-checkpoint'}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path, help="work here and keep the files")
    args = ap.parse_args(argv)
    build = args.build.resolve()
    corpus = build / "test" / "corpus"
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.keep or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        prefix = work / "prefix"
        try:
            run(["cmake", "--install", build, "--prefix", prefix])
            hosts = build_hosts(prefix, work)
            ok = check_inference(prefix, corpus, hosts, work)
            ok &= check_training(prefix, corpus, hosts, work)
        except CheckFailed as e:
            print(f"FAILED: {e}")
            ok = False
    print("example hosts: all checks passed" if ok else "example hosts: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
