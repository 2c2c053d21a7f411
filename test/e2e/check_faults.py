#!/usr/bin/env python3
"""Runtime faults end every rank with a message, never a hang.

    check_faults.py BUILD_DIR [--keep DIR]

A 2-rank sharded training job (the corpus GPT-2, fsdp-run under mpirun,
effectively endless --steps) is started, and once it runs one rank is
 - stopped (SIGSTOP: a stalled rank): the other rank's next collective
   misses its --timeout deadline (2 s); fsdp-run reports which collective
   timed out on which rank and ends the job (non-zero exit);
 - killed (SIGKILL: a dead rank): the job ends with a non-zero exit.
Each must end within 60 s of the fault. The rank's process is found by
its OMPI_COMM_WORLD_RANK; no fault hook is compiled into the product.
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

TIMEOUT = 2.0


def rank_pid(root: int, rank: int) -> int | None:
    """The pid of the fsdp-run process of `rank` under mpirun `root`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"fsdp-run") and \
                f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ:
            return int(entry.name)
    return None


def fault(kind: str, bindir: Path, work: Path) -> bool:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", str(bindir / "fsdp-run"),
           str(work / "g2.plan"), "--input", f"input_ids={work / 'ids.npy'}",
           "--input", f"labels={work / 'labels.npy'}", "--steps", "100000000",
           "--lr", "1e-4", "--threads", "1", "--timeout", str(TIMEOUT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    # Wait until it trains (rank 0 prints step lines).
    deadline = time.monotonic() + 60
    started = False
    while time.monotonic() < deadline and not started:
        line = proc.stdout.readline()
        started = line.startswith("step 3 ")
    pid = rank_pid(proc.pid, 1)
    if not started or pid is None:
        proc.kill()
        print(f"  {kind}: the job did not start ({started}, pid {pid})")
        return False
    os.kill(pid, signal.SIGSTOP if kind == "stall" else signal.SIGKILL)
    hit = time.monotonic()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        if kind == "stall":
            os.kill(pid, signal.SIGKILL)
        print(f"  {kind}: HANG: the job did not end within 60 s")
        return False
    took = time.monotonic() - hit
    if kind == "stall":
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    message = [l for l in err.splitlines() if "fsdp-run" in l or "timed out" in l]
    ok = proc.returncode != 0
    if kind == "stall":
        ok &= any("timed out after" in l and "on rank 0" in l for l in err.splitlines())
    print(f"  {kind}: job ended {took:.1f} s after the fault, exit {proc.returncode}"
          f"{'' if ok else ' UNEXPECTED'}; " + (message[0] if message else err.strip()[:200]))
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    bindir = args.build.resolve() / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.prepare(args.build.resolve(), work)
        results = [fault(kind, bindir, work) for kind in ("stall", "kill")]
    print(f"{sum(results)}/{len(results)} faults ended the job with a message")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
