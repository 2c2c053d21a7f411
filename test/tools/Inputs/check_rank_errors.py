"""Runs `mpirun -np 4 FSDP_RUN PLAN` (every rank fails at once) several
times and checks that each rank's error is a line of its own: the ranks
share stderr, and a line written in pieces ran together with another
rank's ("fsdp-run: fsdp-run: rank 0: ...").

    check_rank_errors.py FSDP_RUN MISSING_PLAN
"""

import os
import re
import subprocess
import sys
import tempfile

fsdp_run, plan = sys.argv[1:3]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader")
line = re.compile(r"fsdp-run: rank [0-3]: error: cannot load the plan: "
                  r"cannot open plan '.*': No such file or directory")
seen = 0
for attempt in range(8):
    # Open MPI's own messages too, as a terminal shows them. Each job gets
    # a session directory of its own (see mpirun-isolated.sh).
    with tempfile.TemporaryDirectory(dir="/tmp") as session:
        run = subprocess.run(["mpirun", "-np", "4", "--oversubscribe", fsdp_run, plan],
                             env=dict(env, TMPDIR=session), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=120)
    if run.returncode == 0:
        sys.exit("fsdp-run succeeded on a missing plan")
    for text in run.stdout.splitlines():
        if "fsdp-run:" in text:
            if not line.fullmatch(text):
                sys.exit(f"a rank's error line is garbled: {text!r}")
            seen += 1
if not seen:
    sys.exit("no rank printed its error")
print("one line per rank")
