"""compile(): an exported ONNX model to a sharded plan, with the tools."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from fsdp_mlir import opset as _opset
from fsdp_mlir._tools import ToolError, run_tool
from fsdp_mlir.policy import Policy, PolicyError, no_wrap

STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")


@dataclass(frozen=True)
class MixedPrecision:
    """torch.distributed.fsdp.MixedPrecision's settings, as dtype names
    ("bf16", "f16", "f32"; None: unchanged)."""

    param_dtype: str | None = None
    reduce_dtype: str | None = None
    buffer_dtype: str | None = None


def _modules(onnx_path: Path) -> list[dict]:
    """The module tree the export embedded (FQN and class per module)."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    for prop in model.metadata_props:
        if prop.key.startswith("fsdp"):
            try:
                data = json.loads(prop.value)
            except ValueError:
                continue
            if isinstance(data, dict) and "modules" in data:
                return data["modules"]
    return []


def _option_text(options: dict[str, Any]) -> str:
    parts = []
    for key, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        parts.append(f"{key.replace('_', '-')}={value}")
    return " ".join(parts)


def compile(onnx_path, *, batch_size: int, world_size: int = 1, policy: Policy | None = None,
            strategy: str = "FULL_SHARD", mesh_shape: tuple[int, int] | None = None,
            mixed_precision: MixedPrecision | None = None,
            optimizer: dict[str, Any] | None = None, loss: str | None = None,
            schedule: dict[str, Any] | None = None, use_orig_params: bool = False,
            ignored_modules: Sequence[str] = (), ignored_params: Sequence[str] = (),
            wrap_frozen: bool | None = None, out=None) -> Path:
    """Compiles the exported model at `onnx_path` into a plan and returns
    its path (`out`, default beside the model: <name>.w<world>.plan).

    batch_size: per rank. policy: fsdp_mlir.size_based / transformer_layers
    / by_fqn / no_wrap (default). strategy: FULL_SHARD, SHARD_GRAD_OP,
    NO_SHARD or HYBRID_SHARD (with mesh_shape=(replicas, shards)).
    optimizer: a training step, e.g. {"optimizer": "adamw",
    "max_grad_norm": 1.0} (fsdp-optimizer's options); None: a forward
    (inference) plan. loss: for a model returning logits, "cross-entropy".
    schedule: fsdp-schedule options (prefetch, limits, cost model).
    use_orig_params: torch's FSDP(use_orig_params=True): every parameter
    starts 16-byte aligned in its flat buffer, and a unit mixing frozen and
    trainable parameters is a warning at auto-wrap, not an error; one flat
    buffer still cannot hold both, so such a unit fails at fsdp-flatten
    (wrap_frozen is the way). ignored_modules / ignored_params:
    FQNs left out of every unit (replicated on every rank).
    wrap_frozen: every largest frozen submodule below trainable ones becomes
    a unit of its own, so a frozen backbone needs no policy; default: on
    without a policy (or with no_wrap()), off otherwise.
    The tools' intermediate files go to a fsdp-compile-XXXXXXXX directory
    beside `out`, removed on success and kept on failure (the ToolError
    names it).
    Raises ToolError, carrying the command line that reproduces it, when a
    tool fails, and PolicyError / ValueError for bad arguments.
    """
    onnx_path = Path(onnx_path)
    if not onnx_path.is_file():
        raise FileNotFoundError(f"no ONNX model at {onnx_path}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, not {world_size!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    if strategy == "HYBRID_SHARD" and (not mesh_shape or
                                      mesh_shape[0] * mesh_shape[1] != world_size):
        raise ValueError("HYBRID_SHARD needs mesh_shape=(replicas, shards) with "
                         f"replicas x shards = world_size ({world_size})")
    policy = policy or no_wrap()
    for name, fqns in (("ignored_modules", ignored_modules),
                       ("ignored_params", ignored_params)):
        if isinstance(fqns, str) or not all(isinstance(f, str) and f and " " not in f
                                            and "," not in f for f in fqns):
            raise ValueError(f"{name} must be a list of FQNs (no spaces or commas), "
                             f"not {fqns!r}")
    if not isinstance(policy, Policy):
        raise PolicyError(f"policy must come from fsdp_mlir.size_based, "
                          f"transformer_layers, by_fqn, no_wrap or auto, not {policy!r}")
    if wrap_frozen is None:
        wrap_frozen = policy.kind == "none"
    out = Path(out) if out else onnx_path.with_suffix(f".w{world_size}.plan")
    written = _opset.default_opset(onnx_path)
    if written > _opset.MAX_OPSET:
        # The plan reads its weights from the model it was compiled from,
        # so the converted model stays beside the plan.
        converted = out.with_name(f"{out.stem}.opset{_opset.MAX_OPSET}.onnx")
        print(f"fsdp_mlir.compile: {onnx_path} is at opset "
              f"{written}; converting it to {_opset.MAX_OPSET} with "
              f"ONNX's version converter as {converted}", file=sys.stderr)
        onnx_path = _opset.convert(onnx_path, converted)
    work = Path(tempfile.mkdtemp(prefix="fsdp-compile-", dir=out.parent))
    try:
        wrap = policy.options(_modules(onnx_path), work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if strategy != "FULL_SHARD":
        wrap.append(f"strategy={strategy}")
    if wrap_frozen:
        wrap.append("wrap-frozen=true")
    if ignored_modules:
        wrap.append("ignored-modules=" + ",".join(ignored_modules))
    if ignored_params:
        wrap.append("ignored-params=" + ",".join(ignored_params))
    mp = mixed_precision or MixedPrecision()
    for key in ("param_dtype", "reduce_dtype", "buffer_dtype"):
        if getattr(mp, key):
            wrap.append(f"{key.replace('_', '-')}={getattr(mp, key)}")
    # One registered pipeline states the ranks once and derives what
    # auto-wrap's search models of the step (optimizer states, clipping).
    pipeline = [f"mesh-shape={mesh_shape[0]},{mesh_shape[1]}" if mesh_shape
                else f"world-size={world_size}", "auto-wrap={" + " ".join(wrap) + "}"]
    if use_orig_params:
        pipeline.append("use-orig-params=true")
    if optimizer is not None:
        pipeline.append("optimizer={" + _option_text(optimizer) + "}")
        if loss:
            pipeline.append(f"autodiff={{loss={loss}}}")
    if mixed_precision is not None:
        pipeline.append("mixed-precision=true")
    if schedule:
        pipeline.append("schedule={" + _option_text(schedule) + "}")
    name = "train" if optimizer is not None else "sharded"
    mlir = work / "step.mlir"
    args = [onnx_path, f"--batch-size={batch_size}",
            f"--fsdp-{name}-pipeline=" + " ".join(pipeline), "-o", mlir]
    try:
        run_tool("fsdp-opt", args)
        run_tool("fsdp-translate", ["--mlir-to-plan", mlir, "-o", out])
    except ToolError as e:
        # The command line reads the policy file and writes step.mlir there.
        raise ToolError(e.command, e.returncode, e.stdout, e.stderr,
                        note=f"intermediate files kept in {work}") from None
    shutil.rmtree(work, ignore_errors=True)
    return out
