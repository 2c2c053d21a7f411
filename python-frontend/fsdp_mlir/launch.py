"""python -m fsdp_mlir.launch -n N script.py [args...]: runs the script on
N ranks with Open MPI's mpirun (oversubscribed, loopback transport; as
root with Open MPI's consent variables), so each rank's Session takes its
part of a plan sharded over N ranks."""

from __future__ import annotations

import argparse
import os
import shutil
import sys


def command(n: int, script: str, args: list[str]) -> tuple[list[str], dict]:
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise FileNotFoundError("mpirun not found (Debian: openmpi-bin)")
    # A process that is itself an MPI rank (or a singleton, after a Session
    # of a sharded plan) carries its job's variables; a new job must not.
    inherited = ("PMIX_", "OMPI_APP_CTX_", "OMPI_COMM_WORLD_", "OMPI_MCA_ess",
                 "OMPI_MCA_orte_", "OMPI_MCA_pmix", "ORTE_", "OMPI_UNIVERSE_SIZE",
                 "OMPI_FILE_LOCATION", "OMPI_FIRST_RANKS", "OMPI_NUM_APP_CTX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env.setdefault("OMPI_MCA_btl", "self,vader")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return [mpirun, "-np", str(n), "--oversubscribe", sys.executable, script, *args], env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fsdp_mlir.launch",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    opts = ap.parse_args(argv)
    if opts.nproc < 1:
        ap.error("-n must be >= 1")
    argv, env = command(opts.nproc, opts.script, opts.args)
    os.execvpe(argv[0], argv, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
