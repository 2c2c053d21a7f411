"""Tests of fsdp_mlir's tool lookup and error reporting against the real
fsdp-opt built by the project (found through $FSDP_MLIR_TOOLS_DIR, which
ctest sets, or the repository's build/bin)."""

import io
import os
import shlex
import subprocess
import tempfile
import tomllib
import unittest
from pathlib import Path
from unittest import mock

import fsdp_mlir

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault(fsdp_mlir._tools.TOOLS_DIR_ENV, str(REPO / "build" / "bin"))


class PackageTest(unittest.TestCase):
    def test_version_matches_pyproject(self):
        with open(REPO / "python-frontend" / "pyproject.toml", "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(fsdp_mlir.__version__, project["version"])

    def test_sees_debian_torch_and_onnx(self):
        # The virtual environment must see Debian's packages: the frontend
        # exports with torch and checks with onnx.
        import numpy
        import onnx
        import torch

        self.assertTrue(torch.__version__.startswith("1.13"), torch.__version__)
        self.assertTrue(onnx.__version__.startswith("1.12"), onnx.__version__)
        self.assertIsNotNone(numpy.__version__)


class ToolTest(unittest.TestCase):
    def test_runs_fsdp_opt_on_the_example(self):
        out = fsdp_mlir.run_tool(
            "fsdp-opt",
            [REPO / "examples" / "tiny_gpt.mlir", "--fsdp-print-layout", "-o", os.devnull],
        )
        self.assertIn("flat_param @blocks.0: 12 params, 3280 elements", out)

    def test_failure_carries_a_reproducing_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "bad model.mlir"
            bad.write_text("fsdp.param @w : tensor<2xf32> at "
                           '#fsdp.data_ref<"w.bin", offset = 0, length = 4>\n')
            with self.assertRaises(fsdp_mlir.ToolError) as caught:
                fsdp_mlir.run_tool("fsdp-opt", [bad])
            error = caught.exception
            self.assertEqual(error.returncode, 1)
            self.assertIn("data reference holds 4 bytes but 'tensor<2xf32>' needs 8",
                          str(error))
            self.assertIn(error.command, str(error))
            # The command line, run by a shell, fails the same way.
            rerun = subprocess.run(error.command, shell=True, capture_output=True, text=True)
            self.assertEqual(rerun.returncode, 1)
            self.assertEqual(rerun.stderr, error.stderr)
            self.assertEqual(shlex.split(error.command)[1], str(bad))

    def test_missing_tool_names_where_it_looked(self):
        with mock.patch.dict(os.environ, {fsdp_mlir._tools.TOOLS_DIR_ENV: "/nonexistent"}):
            with self.assertRaises(fsdp_mlir.ToolNotFoundError) as caught:
                fsdp_mlir.find_tool("fsdp-no-such-tool")
        self.assertIn("cannot find the FSDP-MLIR tool 'fsdp-no-such-tool'", str(caught.exception))
        self.assertIn("FSDP_MLIR_TOOLS_DIR='/nonexistent'", str(caught.exception))


if __name__ == "__main__":
    unittest.main()


class LaunchTest(unittest.TestCase):
    """python -m fsdp_mlir.launch: the mpirun command and its settings."""

    def test_keepalive_gives_up_a_silent_link_within_the_deadline(self):
        from fsdp_mlir import launch

        for deadline in (1, 5, 37, 300):
            env = launch.keepalive(deadline)
            given_up = int(env["OMPI_MCA_oob_tcp_keepalive_time"]) + \
                int(env["OMPI_MCA_oob_tcp_keepalive_intvl"]) * \
                int(env["OMPI_MCA_oob_tcp_keepalive_probes"])
            self.assertLess(given_up, deadline + (deadline < 5) * 4, deadline)
        self.assertEqual(launch.keepalive(0), {})

    def test_hosts_use_tcp_and_a_program_runs_without_python(self):
        from fsdp_mlir import launch

        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("OMPI_MCA_btl", None)
            argv, env = launch.command(2, "fsdp-run", ["m.plan"], hosts="a,b",
                                       python=False)
        self.assertEqual(argv[argv.index("--host") + 1], "a,b")
        self.assertEqual(argv[-2:], ["fsdp-run", "m.plan"])
        self.assertIn("tcp", env["OMPI_MCA_btl"])
        argv, _ = launch.command(2, "train.py", [])
        self.assertNotIn("--host", argv)
        self.assertEqual(argv[-2], __import__("sys").executable)

    def test_a_deadline_that_is_not_a_number_is_refused(self):
        from fsdp_mlir import launch

        for bad in ("nan", "inf", "-1"):
            with self.assertRaises(SystemExit) as ended, \
                    mock.patch("sys.stderr", new=io.StringIO()) as err:
                launch.main(["-n", "2", "--timeout", bad, "x.py"])
            self.assertEqual(ended.exception.code, 2)
            self.assertIn("--timeout needs finite seconds", err.getvalue())
