#!/usr/bin/env python3
"""Two hosts joined by a link: equal losses, and a cut link ends the job.

    check_network.py BUILD_DIR [--keep DIR]

Two network namespaces stand for two hosts, joined by a veth pair (a
point-to-point link); mpirun's remote agent is `ip netns exec`, so the
second host's Open MPI daemon and rank live behind the link, as over ssh.
A 2-rank sharded training job (the corpus GPT-2, fsdp-run, started by
`python -m fsdp_mlir.launch --hosts A,B --no-python`) must:
 - print losses bit-identical to the same job on one host;
 - once the link is cut mid-training (the veth taken down: no reset, no
   error, packets are simply lost, as when a cable or switch fails), end
   with a non-zero exit, every process of the job (the launcher, mpirun,
   the remote daemon and both ranks) gone within the deadline (--timeout
   5) plus 10 s.
Prints the figures. Needs root and iproute2 (`ip netns`); without them it
says "skipped: needs root and iproute2" and exits 77 (ctest: skipped).
Exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt2_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 5.0
SLACK = 10.0
SKIP = 77


class Hosts:
    """Two namespaces A and B joined by a veth pair, removed on exit."""

    def __init__(self, work: Path):
        tag = str(os.getpid())
        self.ns = [f"fsdpA{tag}", f"fsdpB{tag}"]
        net = 10 + os.getpid() % 200
        self.addr = [f"10.{net}.77.1", f"10.{net}.77.2"]
        self.subnet = f"10.{net}.77.0/24"
        self.agent = work / "agent.sh"

    def ip(self, *args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def __enter__(self):
        a, b = self.ns
        for ns in self.ns:
            self.ip("netns", "add", ns)
        self.ip("link", "add", "vA", "netns", a, "type", "veth", "peer", "name", "vB",
                "netns", b)
        for ns, dev, addr in ((a, "vA", self.addr[0]), (b, "vB", self.addr[1])):
            self.ip("-n", ns, "addr", "add", addr + "/24", "dev", dev)
            self.ip("-n", ns, "link", "set", "lo", "up")
            self.ip("-n", ns, "link", "set", dev, "up")
        # mpirun's remote agent: "agent [options] HOST COMMAND..." runs the
        # command in that host's namespace, as ssh would on that host.
        cases = "\n".join(f"  {addr}) ns={ns};;" for addr, ns in zip(self.addr, self.ns))
        self.agent.write_text(f"""#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "agent: unknown host $host" >&2; exit 1;;
esac
exec ip netns exec $ns /bin/sh -c "$*"
""")
        self.agent.chmod(0o755)
        return self

    def cut(self):
        self.ip("-n", self.ns[0], "link", "set", "vA", "down")

    def __exit__(self, *exc):
        for ns in self.ns:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def can_run() -> str:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root"
    if not shutil.which("ip") or not shutil.which("mpirun"):
        return "no ip or mpirun"
    name = f"fsdpprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return "" if made.returncode == 0 else "ip netns add failed: " + made.stderr.decode().strip()


def descendants(root: int) -> dict[int, str]:
    """Every live process under `root` (pid: its start time), itself included."""
    children: dict[int, list[int]] = {}
    start: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        start[pid] = fields[19]
        children.setdefault(int(fields[1]), []).append(pid)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in start:
            found[pid] = start[pid]
        todo += children.get(pid, [])
    return found


def alive(procs: dict[int, str]) -> list[int]:
    """Which of `procs` still run (zombies and reused pids are gone)."""
    left = []
    for pid, started in procs.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and fields[19] == started:
            left.append(pid)
    return left


def launch(hosts: Hosts | None, bindir: Path, work: Path, steps: int,
           extra: list[str]) -> tuple[list[str], dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python-frontend"))
    cmd = [sys.executable, "-m", "fsdp_mlir.launch", "-n", "2",
           "--timeout", str(DEADLINE), "--no-python"]
    if hosts:
        cmd = ["ip", "netns", "exec", hosts.ns[0]] + cmd + ["--hosts", ",".join(hosts.addr)]
        env.update(OMPI_MCA_plm_rsh_agent=str(hosts.agent),
                   OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include=hosts.subnet,
                   OMPI_MCA_oob_tcp_if_include=hosts.subnet)
    cmd += [str(bindir / "fsdp-run"), str(work / "g2.plan"),
            "--input", f"input_ids={work / 'ids.npy'}",
            "--input", f"labels={work / 'labels.npy'}", "--steps", str(steps),
            "--lr", "1e-4", "--threads", "1", "--timeout", str(DEADLINE), *extra]
    return cmd, env


def losses(text: str) -> list[str]:
    return re.findall(r"^step \d+ loss (\S+)$", text, re.M)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    why = can_run()
    if why:
        print(f"skipped: needs root and iproute2 ({why})")
        return SKIP
    bindir = args.build.resolve() / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        gpt2_job.prepare(args.build.resolve(), work)
        failures = 0
        cmd, env = launch(None, bindir, work, 5, [])
        one = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        with Hosts(work) as hosts:
            cmd, env = launch(hosts, bindir, work, 5, [])
            two = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            same = one.returncode == 0 and two.returncode == 0 and \
                len(losses(one.stdout)) == 5 and losses(one.stdout) == losses(two.stdout)
            print(f"  losses, one host: {losses(one.stdout)}; two hosts: {losses(two.stdout)}"
                  f" ({'bit-identical' if same else 'DIFFERENT'})")
            if not same:
                print((one.stderr + two.stderr)[-3000:])
                failures += 1

            cmd, env = launch(hosts, bindir, work, 100000000, [])
            log = work / "cut.err"
            with open(log, "w") as err:
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err,
                                        text=True)
                deadline = time.monotonic() + 60
                started = False
                while time.monotonic() < deadline and not started:
                    started = proc.stdout.readline().startswith("step 3 ")
                job = descendants(proc.pid)
                remote = [p for p in job if Path(f"/proc/{p}/comm").exists() and
                          Path(f"/proc/{p}/comm").read_text().strip() == "orted"]
                if not started or not remote:
                    proc.kill()
                    print(f"  cut link: the job did not start on both hosts "
                          f"({len(job)} processes)")
                    return 1
                # Keep reading rank 0's step lines, as a user's terminal would.
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                hosts.cut()
                cut = time.monotonic()
                while alive(job) and time.monotonic() - cut < DEADLINE + SLACK + 60:
                    time.sleep(0.1)
                took = time.monotonic() - cut
                left = alive(job)
                code = proc.wait(timeout=5) if not left else None
            message = [l for l in log.read_text().splitlines()
                       if "timed out" in l or "lost communication" in l or "launch" in l]
            ok = not left and code not in (0, None) and took <= DEADLINE + SLACK
            print(f"  cut link: {len(job)} processes (launcher, mpirun, remote daemon, "
                  f"ranks) gone {took:.1f} s after the cut (bound: deadline {DEADLINE:g} s "
                  f"+ {SLACK:g} s), exit {code}{'' if ok else ' UNEXPECTED'}; "
                  + (message[0].strip() if message else log.read_text()[-300:]))
            if left:
                print(f"  still running: {left}")
            failures += not ok
    print(f"{2 - failures}/2 multi-host checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
