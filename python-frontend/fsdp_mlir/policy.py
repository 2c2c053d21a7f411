"""Auto-wrap policies, the PyTorch way, turned into fsdp-auto-wrap options.

    size_based(min_num_params=1_000_000)     # torch's size_based_auto_wrap_policy
    transformer_layers({Block})               # transformer_auto_wrap_policy
    by_fqn(lambda fqn, cls: fqn.startswith("blocks."))   # lambda_auto_wrap_policy

A policy is compiled against the module tree the export embedded in the
ONNX file (FQNs and class names), so class objects and lambdas work
without the model at hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable


class PolicyError(ValueError):
    """A policy that cannot be applied to the model."""


@dataclass(frozen=True)
class Policy:
    """One auto-wrap policy: what `fsdp-auto-wrap` is told."""

    kind: str  # "size", "transformer", "fqn", "none" or "auto"
    min_num_params: int = 0
    memory_budget: int | str | None = None
    cpu_runtime: bool = True
    classes: tuple[str, ...] = ()
    predicate: Callable[[str, str], bool] | None = field(default=None, compare=False)

    def options(self, modules: list[dict], workdir: Path) -> list[str]:
        """fsdp-auto-wrap options for a model with `modules` (the export's
        module tree: dicts with "fqn" and "class")."""
        if self.kind == "none":
            return ["policy=none"]
        if self.kind == "auto":  # the pipeline adds the world size and the step
            return ["policy=auto"] + (
                [f"memory-budget={self.memory_budget}"] if self.memory_budget else []) + (
                ["cpu-runtime=true"] if self.cpu_runtime else [])
        if self.kind == "size":
            return ["policy=size", f"min-num-params={self.min_num_params}"]
        if self.kind == "transformer":
            known = {m["class"] for m in modules}
            missing = sorted(set(self.classes) - known)
            if missing:
                raise PolicyError(
                    f"transformer_layers: the model has no module of class "
                    f"{', '.join(missing)}; its classes: {', '.join(sorted(known))}")
            return ["policy=transformer", "layer-classes=" + ",".join(self.classes)]
        chosen = [m["fqn"] for m in modules
                  if m["fqn"] and self.predicate(m["fqn"], m["class"])]
        if not chosen:
            raise PolicyError("by_fqn: the predicate chose no module")
        path = workdir / "policy.json"
        path.write_text(json.dumps({"modules": {fqn: {} for fqn in chosen}}))
        return ["policy=none", f"policy-file={path}"]


def size_based(min_num_params: int = 100_000_000) -> Policy:
    """Wrap every module whose parameters (not yet wrapped below it) number
    at least `min_num_params` (torch's size_based_auto_wrap_policy)."""
    if not isinstance(min_num_params, int) or min_num_params < 0:
        raise PolicyError(f"size_based: min_num_params must be an int >= 0, "
                          f"not {min_num_params!r}")
    return Policy("size", min_num_params=min_num_params)


def transformer_layers(classes: Iterable) -> Policy:
    """Wrap every module of these classes (torch's
    transformer_auto_wrap_policy); classes or their names."""
    names = tuple(sorted(c if isinstance(c, str) else getattr(c, "__name__", "")
                         for c in classes))
    if not names or not all(names):
        raise PolicyError(f"transformer_layers: expected module classes, got {classes!r}")
    return Policy("transformer", classes=names)


def by_fqn(predicate: Callable[[str, str], bool]) -> Policy:
    """Wrap the modules for which predicate(fqn, class_name) is true
    (torch's lambda_auto_wrap_policy, given the FQN)."""
    if not callable(predicate):
        raise PolicyError(f"by_fqn: expected a callable, got {predicate!r}")
    return Policy("fqn", predicate=predicate)


def auto(memory_budget: int | str | None = None, *, cpu_runtime: bool = True) -> Policy:
    """Let the compiler choose units, strategies and the schedule
    (fsdp-auto-wrap policy=auto): the fastest configuration by its model
    whose peak memory per rank fits `memory_budget` (bytes, or a string
    such as "16G"; None: no limit). cpu_runtime: model the CPU runtime
    (MPI collectives do not overlap compute), where these plans run."""
    if memory_budget is not None and not (
            (isinstance(memory_budget, int) and memory_budget > 0) or
            (isinstance(memory_budget, str) and memory_budget.strip())):
        raise PolicyError(f"auto: memory_budget must be a positive byte count or a "
                          f"string such as '16G', not {memory_budget!r}")
    return Policy("auto", memory_budget=memory_budget, cpu_runtime=cpu_runtime)


def no_wrap() -> Policy:
    """One unit, the root."""
    return Policy("none")
