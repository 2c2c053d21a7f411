"""FSDP-MLIR's Python frontend: from a torch module to a sharded run.

    import fsdp_mlir
    fsdp_mlir.export(model, (ids, labels), "gpt.onnx", loss_fn=loss_fn)
    plan = fsdp_mlir.compile("gpt.onnx", batch_size=1, world_size=4,
                             policy=fsdp_mlir.transformer_layers({Block}),
                             optimizer={"optimizer": "adamw"})
    session = fsdp_mlir.Session(plan)        # under mpirun -np 4
    loss = session.step({"input_ids": ids, "labels": labels}, lr=1e-3)
    model.load_state_dict(session.state_dict())
"""

from fsdp_mlir._tools import ToolError, ToolNotFoundError, find_tool, run_tool
from fsdp_mlir.compile import MixedPrecision, compile
from fsdp_mlir.export import METADATA_KEY, ExportError, export
from fsdp_mlir.policy import (Policy, PolicyError, auto, by_fqn, no_wrap, size_based,
                              transformer_layers)
from fsdp_mlir.runtime import Session

__version__ = "0.1.0"

__all__ = [
    "ExportError",
    "METADATA_KEY",
    "MixedPrecision",
    "Policy",
    "PolicyError",
    "Session",
    "ToolError",
    "ToolNotFoundError",
    "by_fqn",
    "compile",
    "export",
    "find_tool",
    "no_wrap",
    "run_tool",
    "size_based",
    "transformer_layers",
    "__version__",
]
