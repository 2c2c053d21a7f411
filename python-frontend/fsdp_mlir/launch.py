"""python -m fsdp_mlir.launch -n N [--hosts H1,H2,...] script.py [args...]:
runs the script on N ranks with Open MPI's mpirun, so each rank's Session
takes its part of a plan sharded over N ranks. On one host: oversubscribed,
shared-memory transport. Across hosts (--hosts or --hostfile): TCP, started
through mpirun's remote agent (ssh). As root, with Open MPI's consent
variables. With --no-python the program is run as it is (fsdp-run, a C/C++
host) instead of with this Python.

A job must end when it cannot go on. A rank whose collective outlives its
deadline ends the job with MPI_Abort; a lost host is noticed by Open MPI
itself, because the launcher sets the keepalive of its daemons' TCP links
from --timeout (the ranks' deadline): a link that stops answering is given
up within 4/5 of it, and the job ends with every process on every host.
Should mpirun still be alive 10 s after a rank ended the job, the launcher
ends it, and says so."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

# Lines of mpirun's (or a rank's) standard error that mean the job is over.
_ENDED = re.compile(r"MPI_ABORT was invoked|timed out after|"
                    r"lost co(nnection|mmunication)|exited on signal|non-zero status")
GRACE_SECONDS = 10.0


def keepalive(timeout: float) -> dict[str, str]:
    """Open MPI settings under which its daemons notice, within 4/5 of
    `timeout`, a TCP link to another host that stopped answering: idle for
    timeout/5, then 3 unanswered probes timeout/5 apart (whole seconds: at
    least 1 s each, so 4 s for a deadline under 5 s). 0: none set."""
    if timeout <= 0:
        return {}
    step = str(max(1, int(timeout / 5)))
    return {"OMPI_MCA_oob_tcp_keepalive_time": step,
            "OMPI_MCA_oob_tcp_keepalive_intvl": step,
            "OMPI_MCA_oob_tcp_keepalive_probes": "3"}


def command(n: int, script: str, args: list[str], hosts: str | None = None,
            hostfile: str | None = None, timeout: float = 300.0,
            python: bool = True) -> tuple[list[str], dict]:
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise FileNotFoundError("mpirun not found (Debian: openmpi-bin)")
    # A process that is itself an MPI rank (or a singleton, after a Session
    # of a sharded plan) carries its job's variables; a new job must not.
    inherited = ("PMIX_", "OMPI_APP_CTX_", "OMPI_COMM_WORLD_", "OMPI_MCA_ess",
                 "OMPI_MCA_orte_", "OMPI_MCA_pmix", "ORTE_", "OMPI_UNIVERSE_SIZE",
                 "OMPI_FILE_LOCATION", "OMPI_FIRST_RANKS", "OMPI_NUM_APP_CTX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    remote = bool(hosts or hostfile)
    env.setdefault("OMPI_MCA_btl", "self,vader,tcp" if remote else "self,vader")
    for key, value in keepalive(timeout).items():
        env.setdefault(key, value)
    # OpenMP's idle threads sleep instead of spinning, as fsdp-run makes
    # them (docs/runtime.md, "Threads"): libgomp reads this when each rank
    # loads it.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    argv = [mpirun, "-np", str(n), "--oversubscribe"]
    if hosts:
        argv += ["--host", hosts]
    if hostfile:
        argv += ["--hostfile", hostfile]
    argv += ([sys.executable] if python else []) + [script, *args]
    return argv, env


def _status(code: int) -> int:
    """A child's exit status as a shell reports it (128 + N for signal N)."""
    return 128 - code if code < 0 else code


def supervise(argv: list[str], env: dict, grace: float = GRACE_SECONDS,
              isolate: bool = True) -> int:
    """Runs mpirun, passing its output through, and its exit status back.
    Once a line of its standard error says the job ended (an abort, a
    missed deadline, a lost host), mpirun has `grace` seconds to exit
    before it is killed."""
    # Open MPI 4.1 creates its session directory under $TMPDIR racily: two
    # jobs started at once on one host can fail with "File exists". Each
    # one-host job (`isolate`) gets a directory of its own, removed when it
    # ends.
    session = None
    if isolate and not any(k.endswith("tmpdir_base") for k in env if k.startswith("OMPI_MCA_")):
        session = tempfile.mkdtemp(prefix="fsdp-mpi-")
        env = dict(env, OMPI_MCA_orte_tmpdir_base=session)
    try:
        return _supervise(argv, env, grace)
    finally:
        if session:
            shutil.rmtree(session, ignore_errors=True)


def _supervise(argv: list[str], env: dict, grace: float) -> int:
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    ended = threading.Event()

    def relay():
        for line in iter(proc.stderr.readline, b""):
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
            if _ENDED.search(line.decode(errors="replace")):
                ended.set()
        ended.set()  # mpirun closed its standard error: it is exiting

    threading.Thread(target=relay, daemon=True).start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    while True:
        try:
            return _status(proc.wait(timeout=0.5))
        except subprocess.TimeoutExpired:
            pass
        if ended.is_set():
            try:
                return _status(proc.wait(timeout=grace))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print(f"fsdp_mlir.launch: the job ended on a rank, but mpirun was "
                      f"still running {grace:g} s later; killed it", file=sys.stderr)
                return 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fsdp_mlir.launch",
                                 description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n")[1])
    ap.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    ap.add_argument("--hosts", help="comma-separated hosts (mpirun --host; "
                    "HOST:SLOTS gives a host several ranks)")
    ap.add_argument("--hostfile", help="an Open MPI hostfile (mpirun --hostfile)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="the ranks' collective deadline in seconds, as given to "
                         "fsdp-run --timeout or Session(timeout=...) (default 300; "
                         "0: none): a lost host ends the job within it")
    ap.add_argument("--no-python", action="store_true",
                    help="run the program itself, not with this Python")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    opts = ap.parse_args(argv)
    if opts.nproc < 1:
        ap.error("-n must be >= 1")
    if not opts.timeout >= 0 or opts.timeout == float("inf"):
        ap.error(f"--timeout needs finite seconds >= 0, not {opts.timeout}")
    argv, env = command(opts.nproc, opts.script, opts.args, opts.hosts,
                        opts.hostfile, opts.timeout, not opts.no_python)
    return supervise(argv, env, isolate=not (opts.hosts or opts.hostfile))


if __name__ == "__main__":
    sys.exit(main())
