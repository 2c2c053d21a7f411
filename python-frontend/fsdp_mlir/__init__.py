"""FSDP-MLIR's Python frontend.

Export a torch module to ONNX, compile it into a fully sharded data-parallel
plan with the project's tools, and run it. Today the package locates and runs
the command-line tools; the export, compile and run APIs arrive with their
issues.
"""

from fsdp_mlir._tools import ToolError, ToolNotFoundError, find_tool, run_tool

__version__ = "0.1.0"

__all__ = ["ToolError", "ToolNotFoundError", "find_tool", "run_tool", "__version__"]
