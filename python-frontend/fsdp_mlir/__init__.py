"""FSDP-MLIR's Python frontend.

Export a torch module to ONNX, compile it into a fully sharded data-parallel
plan with the project's tools, and run it. Today the package exports a torch
module with the metadata the compiler needs (`export`) and locates and runs
the command-line tools; the compile and run APIs arrive with their issues.
"""

from fsdp_mlir._tools import ToolError, ToolNotFoundError, find_tool, run_tool
from fsdp_mlir.export import METADATA_KEY, ExportError, export

__version__ = "0.1.0"

__all__ = [
    "ExportError",
    "METADATA_KEY",
    "ToolError",
    "ToolNotFoundError",
    "export",
    "find_tool",
    "run_tool",
    "__version__",
]
