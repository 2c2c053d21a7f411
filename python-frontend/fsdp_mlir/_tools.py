"""Finding and running the FSDP-MLIR command-line tools."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

TOOLS_DIR_ENV = "FSDP_MLIR_TOOLS_DIR"


class ToolNotFoundError(FileNotFoundError):
    """A tool is neither in $FSDP_MLIR_TOOLS_DIR nor on PATH."""


class ToolError(RuntimeError):
    """A tool exited with a non-zero status.

    `command` is the exact shell command line that reproduces the failure;
    `returncode`, `stdout` and `stderr` are what the tool returned.
    """

    def __init__(self, command: str, returncode: int, stdout: str, stderr: str,
                 note: str = ""):
        self.command = command
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.note = note
        detail = stderr.strip() or stdout.strip() or "(no output)"
        super().__init__(
            f"{Path(shlex.split(command)[0]).name} failed with exit code "
            f"{returncode}:\n{detail}\nreproduce with:\n  {command}"
            + (f"\n{note}" if note else "")
        )


def find_tool(name: str) -> Path:
    """Returns the path of tool `name` (e.g. "fsdp-opt").

    Looks in $FSDP_MLIR_TOOLS_DIR first, then on PATH.
    """
    tools_dir = os.environ.get(TOOLS_DIR_ENV)
    if tools_dir:
        candidate = Path(tools_dir) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    where = f"{TOOLS_DIR_ENV}={tools_dir!r} or PATH" if tools_dir else "PATH"
    raise ToolNotFoundError(
        f"cannot find the FSDP-MLIR tool '{name}' in {where}; set "
        f"{TOOLS_DIR_ENV} to the directory holding it (e.g. build/bin)"
    )


def run_tool(name: str, args: Sequence[str], *, cwd: str | os.PathLike | None = None) -> str:
    """Runs tool `name` with `args` and returns its standard output.

    Raises ToolError, carrying the command line that reproduces the failure,
    if the tool exits with a non-zero status.
    """
    argv = [str(find_tool(name)), *map(str, args)]
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        command = shlex.join(argv)
        if cwd is not None:
            command = f"cd {shlex.quote(str(cwd))} && {command}"
        raise ToolError(command, result.returncode, result.stdout, result.stderr)
    return result.stdout
