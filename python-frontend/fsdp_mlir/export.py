"""Exporting a torch module to ONNX with the metadata FSDP-MLIR needs.

`export()` runs `torch.onnx.export` with the settings under which torch 1.13
keeps parameter names (opset 17, TRAINING mode, no constant folding, no
module functions), then embeds the module tree, the parameter table (with
tied-weight aliases) and the buffers as JSON in the model's
`metadata_props` under the key "fsdp_mlir" (see `METADATA_KEY`), because
ONNX itself carries neither module classes nor tied weights.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

METADATA_KEY = "fsdp_mlir"
METADATA_VERSION = 1
BATCH_DIM_PARAM = "batch"
_WRAPPER_PREFIX = "model."

__all__ = ["export", "ExportError", "METADATA_KEY", "METADATA_VERSION"]


class ExportError(RuntimeError):
    """`export()` failed; the message names the step and the cause."""

    def __init__(self, step: str, detail: str):
        self.step = step
        self.detail = detail
        super().__init__(f"fsdp_mlir.export: {step} failed: {detail}")


@contextlib.contextmanager
def _step(name: str):
    """Turns any exception raised inside into an ExportError naming `name`."""
    try:
        yield
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure is reported
        raise ExportError(name, f"{type(e).__name__}: {e}") from e


# --------------------------------------------------------------------------
# Walking the module tree
# --------------------------------------------------------------------------


def _walk_modules(module, prefix: str = "", stack: tuple = ()):
    """Yields (fqn, module) in named_modules() order WITHOUT removing
    duplicates (a shared submodule is yielded under every name)."""
    if id(module) in stack:  # a cycle: named_modules() would not loop either
        return
    yield prefix, module
    for name, child in module._modules.items():
        if child is None:
            continue
        yield from _walk_modules(
            child, f"{prefix}.{name}" if prefix else name, stack + (id(module),)
        )


def _all_named_parameters(model):
    """named_parameters(remove_duplicate=False) (not in torch 1.13)."""
    for mfqn, m in _walk_modules(model):
        for name, p in m._parameters.items():
            if p is not None:
                yield (f"{mfqn}.{name}" if mfqn else name), p


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _module_table(model) -> list[dict]:
    canonical = {}  # id(module) -> FQN under which named_modules() lists it
    for fqn, m in model.named_modules():
        canonical.setdefault(id(m), fqn)
    table = []
    for fqn, m in model.named_modules():
        cls = type(m)
        table.append(
            {
                "fqn": fqn,
                "class": cls.__name__,
                "qualname": f"{cls.__module__}.{cls.__qualname__}",
                "children": [canonical[id(c)] for _, c in m.named_children()],
                "params": [
                    f"{fqn}.{n}" if fqn else n
                    for n, _ in m.named_parameters(recurse=False)
                ],
                "buffers": [
                    f"{fqn}.{n}" if fqn else n
                    for n, _ in m.named_buffers(recurse=False)
                ],
            }
        )
    return table


def _embedding_table(model) -> list[dict]:
    """Every nn.Embedding's padding_idx, which ONNX's Gather drops: the
    compiler zeroes that row's gradient from the module's own lookup, as
    torch does. The other torch semantics an ONNX Gather cannot carry are
    refused here, naming the module."""
    import torch

    table = []
    for fqn, m in model.named_modules():
        if not isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            continue
        kind = type(m).__name__
        where = f"{kind} '{fqn or '<root>'}'"
        if m.max_norm is not None:
            raise ValueError(
                f"{where} has max_norm={m.max_norm}: torch renormalizes the looked-up "
                "rows of the weight in place during forward, which ONNX cannot express; "
                "construct it without max_norm (or clip the weight in the training loop)")
        if m.scale_grad_by_freq:
            raise ValueError(
                f"{where} has scale_grad_by_freq=True: ONNX cannot scale the gradient "
                "by the frequency of the indices in the batch; construct it with "
                "scale_grad_by_freq=False")
        if m.sparse:
            raise ValueError(
                f"{where} has sparse=True: FSDP-MLIR gives every parameter a dense "
                "gradient; construct it with sparse=False")
        if m.padding_idx is None:
            continue
        if isinstance(m, torch.nn.EmbeddingBag):
            raise ValueError(
                f"{where} has padding_idx={m.padding_idx}: its export has no Gather "
                "whose gradient the compiler could mask; construct it without padding_idx")
        table.append({"module": fqn, "weight": f"{fqn}.weight" if fqn else "weight",
                      "padding_idx": int(m.padding_idx)})
    return table


def _buffer_persistence(model) -> dict[str, bool]:
    out = {}
    for mfqn, m in _walk_modules(model):
        for name, b in m._buffers.items():
            if b is None:
                continue
            fqn = f"{mfqn}.{name}" if mfqn else name
            out.setdefault(fqn, name not in m._non_persistent_buffers_set)
    return out


# --------------------------------------------------------------------------
# Tensors and initializers
# --------------------------------------------------------------------------


def _onnx_elem_type(dtype):
    import torch
    from onnx import TensorProto

    return {
        torch.float32: TensorProto.FLOAT,
        torch.float64: TensorProto.DOUBLE,
        torch.float16: TensorProto.FLOAT16,
        torch.bfloat16: TensorProto.BFLOAT16,
        torch.uint8: TensorProto.UINT8,
        torch.int8: TensorProto.INT8,
        torch.int16: TensorProto.INT16,
        torch.int32: TensorProto.INT32,
        torch.int64: TensorProto.INT64,
        torch.bool: TensorProto.BOOL,
        torch.complex64: TensorProto.COMPLEX64,
        torch.complex128: TensorProto.COMPLEX128,
    }.get(dtype)


def _tensor_bytes(t) -> bytes:
    """The tensor's bytes as ONNX stores them in raw_data (little endian)."""
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def _initializer_bytes(init) -> bytes:
    if init.raw_data:
        return bytes(init.raw_data)
    from onnx import numpy_helper

    return numpy_helper.to_array(init).tobytes()


def _same_type(init, t) -> bool:
    return init.data_type == _onnx_elem_type(t.dtype) and list(init.dims) == list(
        t.shape
    )


class _Matcher:
    """Finds the initializer holding each tensor: by name (the exporter's
    state-dict FQN, possibly with the wrapper prefix), else the single
    unclaimed initializer that is bit-identical in type, shape and values."""

    def __init__(self, graph, prefix: str):
        self.prefix = prefix
        self.by_name = {i.name: i for i in graph.initializer}
        self.claimed: set[str] = set()

    def by_names(self, fqns: Sequence[str], t):
        for fqn in fqns:
            init = self.by_name.get(self.prefix + fqn)
            if init is not None and _same_type(init, t):
                self.claimed.add(init.name)
                return init
        return None

    def by_value(self, t):
        want = _tensor_bytes(t)
        hits = [
            i
            for name, i in self.by_name.items()
            if name not in self.claimed
            and _same_type(i, t)
            and _initializer_bytes(i) == want
        ]
        if len(hits) == 1:
            self.claimed.add(hits[0].name)
            return hits[0]
        return None


def _constants_as_nodes(proto, state: set[str]) -> None:
    """Turns every initializer that is no parameter or buffer (a shape, an
    index: the dynamo exporter keeps them as initializers) into a Constant
    node, so that only the model's state goes to the external data file
    and shape inference, which cannot read that file, still sees them."""
    from onnx import helper

    constants = [init for init in proto.graph.initializer if init.name not in state]
    nodes = [helper.make_node("Constant", [], [init.name], name=f"{init.name}_constant",
                              value=init) for init in constants]
    for init in constants:
        proto.graph.initializer.remove(init)
    graph_nodes = list(proto.graph.node)
    del proto.graph.node[:]
    proto.graph.node.extend(nodes + graph_nodes)


# --------------------------------------------------------------------------
# Inputs and outputs
# --------------------------------------------------------------------------


def _flatten_outputs(out, where="output") -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        flat = []
        for i, o in enumerate(out):
            flat += _flatten_outputs(o, f"{where}[{i}]")
        return flat
    if isinstance(out, dict):
        flat = []
        for k, o in out.items():
            flat += _flatten_outputs(o, f"{where}[{k!r}]")
        return flat
    raise TypeError(
        f"{where} is a {type(out).__name__}; the model may only return tensors "
        "or (nested) tuples, lists or dicts of tensors"
    )


def _make_loss_wrapper(model, loss_fn):
    import torch

    class LossWrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model  # registered: initializers get "model."
            # Not registered: a loss module's own state stays out of the
            # parameter table (the tracer treats it as constants).
            self.__dict__["_loss_fn"] = loss_fn

        def forward(self, *inputs):
            return self._loss_fn(self.model(*inputs[:-1]), inputs[-1])

    return LossWrapper()


# torch.onnx warnings about what export() itself takes care of, one per
# module (53 for ResNet-50's BatchNorms): padding_idx, which the metadata
# carries to fsdp-autodiff; and the num_batches_tracked increment the tracer
# drops, which the plan counts itself (export() stores the counter from
# before the call as an initializer). A BatchNorm with momentum=None reads
# the counter (its cumulative average), which the trace freezes, so the
# warning stays when the model has one. Every other warning is shown.
_PADDING_WARNING = r"Warning: ONNX export of embedding with padding_idx >= 0 for training mode"
_COUNTER_WARNING = (r"ONNX Preprocess - Removing mutation from node aten::add_ on block "
                    r"input: '[^']*num_batches_tracked'")


@contextlib.contextmanager
def _handled_warnings_filtered(model):
    import warnings

    import torch

    patterns = [_PADDING_WARNING]
    if not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.momentum is None
               for m in model.modules()):
        patterns.append(_COUNTER_WARNING)
    with warnings.catch_warnings():
        for pattern in patterns:
            warnings.filterwarnings("ignore", message=pattern, category=UserWarning)
        # F.embedding asserts padding_idx < num_embeddings on the weight's
        # size, which the tracer calls data-dependent; the weight's shape is
        # fixed, so the check holds for every batch.
        for line in _embedding_bound_checks():
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning,
                                    module=r"torch\.nn\.functional$", lineno=line)
        yield


def _embedding_bound_checks() -> list[int]:
    """The lines of F.embedding's padding_idx bound assertions."""
    import inspect

    import torch.nn.functional as F

    try:
        lines, start = inspect.getsourcelines(F.embedding)
    except (OSError, TypeError):  # no source: nothing to filter
        return []
    return [start + i for i, text in enumerate(lines)
            if "Padding_idx must be within num_embeddings" in text]


@contextlib.contextmanager
def _preserved_state(model):
    """Restores the model's buffers (BatchNorm running statistics,
    num_batches_tracked), training flags and the CPU RNG after the forward
    passes that export runs in training mode."""
    import torch

    buffers = [
        (m, name, b, b.detach().clone())
        for m in model.modules()
        for name, b in m._buffers.items()
        if b is not None
    ]
    training = [(m, m.training) for m in model.modules()]
    rng = torch.get_rng_state()
    try:
        yield {id(b): saved for _, _, b, saved in buffers}
    finally:
        with torch.no_grad():
            for m, name, b, saved in buffers:
                b.copy_(saved)
                m._buffers[name] = b  # in case forward rebound the attribute
        for m, flag in training:
            m.training = flag
        torch.set_rng_state(rng)


def _stochastic_depth_modules(model) -> list[tuple[str, Any, float, str]]:
    """(FQN, module, drop probability, mode) of every stochastic-depth module:
    torchvision's StochasticDepth (its `p` and `mode`), and the DropPath
    modules of Hugging Face transformers and timm: a class whose name ends
    in "DropPath" with a float `drop_prob`, dropping whole samples ("row")
    and scaling what it keeps by 1 / (1 - drop_prob) (timm's
    scale_by_keep=False does not scale, so it is left alone)."""
    found = []
    for name, m in model.named_modules():
        kind = type(m).__name__
        if kind == "StochasticDepth" and hasattr(m, "p") \
                and getattr(m, "mode", None) in ("row", "batch"):
            found.append((name, m, float(m.p), m.mode))
        elif kind.endswith("DropPath") and isinstance(getattr(m, "drop_prob", None), float) \
                and getattr(m, "scale_by_keep", True) is True:
            found.append((name, m, m.drop_prob, "row"))
    return found


@contextlib.contextmanager
def _stochastic_depth_as_dropout(model):
    """torch 1.13 cannot export StochasticDepth's `bernoulli_` in training
    mode, and a DropPath's `floor(keep + rand(...))` exports as
    RandomUniform, which draws outside the runtime's keyed randomness. For
    the export each one computes the same thing with the op the runtime
    draws for: its noise, 1/(1-p) or 0 per sample ("row"; one for the batch
    in "batch" mode), is Dropout(ones([N, 1, ...]), p) in training mode,
    which the compiler trains with the runtime's random masks
    (docs/training.md, "Randomness")."""
    import torch

    def dropout_forward(module, p, mode):
        def forward(x):
            if not module.training or p == 0.0:
                return x
            size = [x.shape[0]] + [1] * (x.dim() - 1) if mode == "row" else [1] * x.dim()
            ones = torch.ones(size, dtype=x.dtype, device=x.device)
            return x * torch.nn.functional.dropout(ones, p, True)
        return forward

    swapped = _stochastic_depth_modules(model)
    for _, m, p, mode in swapped:
        m.forward = dropout_forward(m, p, mode)
    try:
        yield [{"fqn": name, "p": p, "mode": mode} for name, _, p, mode in swapped]
    finally:
        for _, m, _, _ in swapped:
            del m.forward


# --------------------------------------------------------------------------
# Which exporter
# --------------------------------------------------------------------------

EXPORTERS = ("auto", "torchscript", "dynamo")


def _has_dynamo() -> bool:
    """Whether torch.onnx.export takes `dynamo=` (torch 2.x)."""
    import inspect

    import torch

    return "dynamo" in inspect.signature(torch.onnx.export).parameters


def _has_torchscript() -> bool:
    """Whether the installed torch still has the TorchScript exporter."""
    import torch

    return hasattr(torch.onnx, "TrainingMode") and hasattr(torch, "jit")


def _choose_exporter(exporter: str) -> str:
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {', '.join(EXPORTERS)}, got {exporter!r}")
    if exporter == "auto":
        return "torchscript" if _has_torchscript() else "dynamo"
    if exporter == "dynamo" and not _has_dynamo():
        import torch

        raise ValueError(f"exporter='dynamo' needs torch 2.x; this is torch {torch.__version__}")
    if exporter == "torchscript" and not _has_torchscript():
        import torch

        raise ValueError(f"torch {torch.__version__} has no TorchScript ONNX exporter; "
                         "use exporter='dynamo'")
    return exporter


def _run_exporter(choice, model, exported, inputs, raw, input_names, output_names,
                  dynamic_axes, opset) -> str:
    """Exports with `choice` ("auto" resolved by _choose_exporter, or a name)
    and returns the exporter that wrote `raw`. Under "auto" on torch 2.x a
    TorchScript failure (an aten op it cannot translate, e.g. aten::rot90)
    falls back to dynamo with a warning naming it."""
    import warnings

    first = _choose_exporter(choice)
    fallback = choice == "auto" and first == "torchscript" and _has_dynamo()
    try:
        with _step(f"torch.onnx.export ({first})"), _handled_warnings_filtered(model):
            _export_with(first, exported, inputs, raw, input_names, output_names,
                         dynamic_axes, opset, diff=not fallback)
        return first
    except ExportError as e:
        if not fallback:
            raise
        reason = e.detail.strip().splitlines()[0][:300] if e.detail.strip() else "no message"
        warnings.warn(f"fsdp_mlir.export: the TorchScript exporter failed ({reason}); "
                      "exporting with dynamo instead (exporter='auto')", stacklevel=3)
    with _step("torch.onnx.export (dynamo, after TorchScript failed)"), \
            _handled_warnings_filtered(model):
        _export_with("dynamo", exported, inputs, raw, input_names, output_names,
                     dynamic_axes, opset)
    return "dynamo"


def _experts_hint(model) -> str:
    """What to do when a Hugging Face Mixture-of-Experts model fails to
    export: its default experts ("grouped_mm", "eager") loop over the
    experts a batch routes to, which torch.export cannot trace; "" for
    other models."""
    for _, module in _walk_modules(model):
        config = getattr(module, "config", None)
        can_set = getattr(module, "_can_set_experts_implementation", None)
        current = getattr(config, "_experts_implementation", None)
        if callable(can_set) and current not in (None, "batched_mm") and can_set():
            return (f"hint: this Hugging Face Mixture-of-Experts model runs its experts "
                    f"with experts_implementation={current!r}, which loops over the "
                    "experts each batch routes to and cannot be traced; call "
                    "model.set_experts_implementation('batched_mm') (or pass "
                    "experts_implementation='batched_mm' to from_pretrained) before "
                    "exporting (docs/python.md, Mixture of Experts)")
    return ""


def _symbolic_registry():
    """torch's TorchScript-exporter symbolic registry (a private module whose
    path moved between torch 1.13 and 2.x), or None."""
    for name in ("torch.onnx._internal.torchscript_exporter.registration",
                 "torch.onnx._internal.registration"):
        try:
            import importlib

            return importlib.import_module(name).registry
        except (ImportError, AttributeError):
            continue
    return None


def _has_user_symbolic(name: str, opset: int) -> bool:
    """Whether the user registered their own symbolic for `name` (then it
    is left alone)."""
    registry = _symbolic_registry()
    group = registry.get_function_group(name) if registry is not None else None
    try:
        return group is not None and any(group._functions.overridden(v)
                                         for v in range(1, opset + 1))
    except AttributeError:
        return False


def _diff_symbolic(g, x, n, dim, prepend, append):
    """aten::diff (torch.diff): Concat(prepend, x, append) along `dim`, then
    n rounds of x[1:] - x[:-1] (Xor for booleans, as torch)."""
    import torch
    from torch.onnx import symbolic_helper as sh

    n = sh._get_const(n, "i", "n")
    dim = sh._get_const(dim, "i", "dim")
    parts = [p for p in (prepend, x, append) if not sh._is_none(p)]
    if len(parts) > 1:
        x = g.op("Concat", *parts, axis_i=dim)
    boolean = x.type().scalarType() == "Bool"

    def const(v):
        return g.op("Constant", value_t=torch.tensor([v], dtype=torch.int64))

    for _ in range(n):
        hi = g.op("Slice", x, const(1), const(2**62), const(dim))
        lo = g.op("Slice", x, const(0), const(-1), const(dim))
        x = g.op("Xor", hi, lo) if boolean else g.op("Sub", hi, lo)
    return x


def _cumsum_symbolic(g, x, dim, dtype):
    """aten::cumsum with torch's result type: `dtype` when given, int64 for
    a boolean or integer input (torch's own symbolic emits CumSum of a
    boolean, which ONNX refuses: Hugging Face's packed-sequence mask does
    `(position_diff != 1).cumsum(-1)`)."""
    import torch
    from torch.onnx import symbolic_helper as sh

    # torch ScalarType numbers -> ONNX TensorProto element types.
    onnx_type = {0: 2, 1: 3, 2: 5, 3: 6, 4: 7, 5: 10, 6: 1, 7: 11, 11: 9, 15: 16}
    dim = sh._get_const(dim, "i", "dim")
    if not sh._is_none(dtype):
        scalar = sh._get_const(dtype, "i", "dtype")
        if scalar not in onnx_type:
            raise ValueError(f"aten::cumsum: dtype {scalar} has no ONNX type")
        x = g.op("Cast", x, to_i=onnx_type[scalar])
    elif x.type().scalarType() in ("Bool", "Byte", "Char", "Short", "Int"):
        x = g.op("Cast", x, to_i=onnx_type[4])
    return g.op("CumSum", x, g.op("Constant", value_t=torch.tensor(dim, dtype=torch.int64)))


def _storage_permutation(shape, strides):
    """The permutation that puts a strided tensor's dims in its storage
    order (largest stride first; dims of size 1 last), or None when its
    elements do not fill their storage densely (gaps or overlaps). A size
    of None (a dynamic dim) is trusted."""
    big = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -strides[d])
    expected = 1
    for d in reversed(big):
        if expected is not None and strides[d] != expected:
            return None
        expected = None if shape[d] is None else strides[d] * shape[d]
    return big + [d for d in range(len(shape)) if shape[d] == 1]


def _as_strided_symbolic(g, x, sizes, strides, offset=None):
    """aten::as_strided indexes its input's storage; torch's symbolic
    indexes the input flattened in row-major order, which is the storage
    only for a contiguous input. Longformer's sliding-window chunks call it
    on a transposed view, where torch's ONNX read other elements than
    torch does (its logits off by 4e-5, its key gradients by far more). A
    dense non-contiguous input is first transposed into its storage order
    (the strides are the traced ones); one whose storage has gaps or
    overlaps is refused, naming why."""
    from torch.onnx import symbolic_opset9

    try:
        shape, have = x.type().varyingSizes(), x.type().strides()
    except (AttributeError, RuntimeError):
        shape = have = None
    if have is not None and shape is not None and len(shape) == len(have) and None not in have:
        perm = _storage_permutation(shape, have)
        if perm is None:
            raise ValueError(f"aten::as_strided of a tensor of sizes {list(shape)} and "
                             f"strides {list(have)}, whose storage has gaps or overlaps: "
                             "ONNX has no strides; call .contiguous() before it")
        if perm != list(range(len(shape))):
            x = g.op("Transpose", x, perm_i=perm)
    return symbolic_opset9.as_strided(g, x, sizes, strides, offset)


def _fold_as_conv_transpose(columns, image, kernel, dilations, pads, strides):
    """Col2Im (torch's fold, the adjoint of unfold) of [N, columns, L] into
    the image `image` as the ConvTranspose of the columns viewed as the
    block grid [N, columns, *blocks] by a constant one-hot weight, one
    group per channel: column c*K + k (k a row-major kernel offset) adds
    into the output at that offset of its block. Exact, and trained by
    ConvTranspose's gradient. `pads` are ONNX's (begins, then ends).
    Returns (channels, blocks, weight, attributes), the weight a float32
    numpy array [columns, 1, *kernel]; ValueError naming the sizes when no
    block grid gives `image`."""
    import numpy as np

    rank = len(image)
    what = (f"image {list(image)}, kernel {list(kernel)}, dilations {list(dilations)}, "
            f"pads {list(pads)}, strides {list(strides)}")
    if not (len(kernel) == len(dilations) == len(strides) == rank and len(pads) == 2 * rank):
        raise ValueError(f"Col2Im of {what}: the sizes do not have one entry per image axis")
    window = int(np.prod(kernel))
    if columns is None or columns % window:
        raise ValueError(f"Col2Im of {what}: its input's {columns} columns are not a "
                         "known multiple of the kernel's size")
    blocks, extra = [], []
    for d in range(rank):
        span = image[d] + pads[d] + pads[rank + d] - dilations[d] * (kernel[d] - 1) - 1
        if span < 0 or strides[d] < 1:
            raise ValueError(f"Col2Im of {what}: no block fits image axis {d}")
        blocks.append(span // strides[d] + 1)
        extra.append(span % strides[d])  # rows past the last block
    weight = np.tile(np.eye(window, dtype=np.float32), (columns // window, 1))
    attributes = {"kernel_shape": list(kernel), "strides": list(strides),
                  "dilations": list(dilations), "pads": list(pads),
                  "output_padding": extra, "group": columns // window}
    return columns // window, blocks, weight.reshape([columns, 1] + list(kernel)), attributes


def _col2im_symbolic(g, x, output_size, kernel_size, dilation, padding, stride):
    """aten::col2im (torch.nn.functional.fold), which ONNX has as Col2Im
    only from opset 18: a Reshape to the block grid and a ConvTranspose
    (_fold_as_conv_transpose) at the sizes of the traced example (the
    traced aten node's: the ONNX value's, after a Reshape to sizes computed
    from shapes, are unknown), which also give an output_size computed from
    shapes (MobileViT v2 folds to its feature map's size)."""
    import math

    import torch
    from torch.onnx import symbolic_helper as sh

    kernel, dilations, padding, strides = [list(sh._get_const(v, "is", name)) for v, name in (
        (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
        (stride, "stride"))]
    image = sh._maybe_get_const(output_size, "is")
    try:
        traced = g.original_node
        shape = traced.inputsAt(0).type().varyingSizes()
        if sh._is_value(image):
            image = traced.output().type().varyingSizes()[-len(kernel):]
    except (AttributeError, RuntimeError):
        shape = image = None
    if shape is None or len(shape) not in (2, 3):
        raise ValueError(f"aten::col2im of an input of sizes {shape}: fold exports for "
                         "a 2-D or 3-D input of known rank only")
    if image is None or None in image:
        raise ValueError(f"aten::col2im of an input of sizes {shape}: its output_size is "
                         f"neither a constant nor known from the traced output ({image})")
    image = list(image)
    channels, blocks, weight, attributes = _fold_as_conv_transpose(
        shape[-2], image, kernel, dilations, padding + padding, strides)
    if shape[-1] is not None and shape[-1] != math.prod(blocks):
        raise ValueError(f"aten::col2im of an input of sizes {list(shape)} into {image}: "
                         f"its {shape[-1]} blocks are not the {blocks} grid of kernel "
                         f"{kernel}, dilation {dilations}, padding {padding}, stride {strides}")
    dtype = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
             "BFloat16": torch.bfloat16}.get(x.type().scalarType())
    if dtype is None:
        raise ValueError(f"aten::col2im of a {x.type().scalarType()} tensor: fold exports "
                         "for floating-point tensors only")

    def ints(values):
        return g.op("Constant", value_t=torch.tensor(values, dtype=torch.int64))

    grid = g.op("Reshape", x, ints([-1 if len(shape) == 3 else 1, shape[-2]] + blocks))
    w = g.op("Constant", value_t=torch.from_numpy(weight).to(dtype))
    y = g.op("ConvTranspose", grid, w, **{f"{k}_i": v for k, v in attributes.items()})
    return y if len(shape) == 3 else g.op("Reshape", y, ints([channels] + image))


def _torch_symbolic(module: str, name: str):
    """torch's own TorchScript symbolic `name` of `module` (symbolic_opset9,
    ...), which moved under torch.onnx._internal in torch 2.x."""
    import importlib

    for package in ("torch.onnx._internal.torchscript_exporter", "torch.onnx"):
        try:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        except (ImportError, AttributeError):
            continue
    raise ValueError(f"torch has no TorchScript symbolic {module}.{name}")


def _traced_sizes(g, x):
    """x's sizes (an entry None where dynamic), else those of the traced aten
    node's first input, or None."""
    for value in (x, getattr(g, "original_node", None)):
        try:
            sizes = (value if value is x else value.inputsAt(0)).type().varyingSizes()
        except (AttributeError, RuntimeError):
            continue
        if sizes is not None:
            return list(sizes)
    return None


def _tensor_split_symbolic(g, x, indices_or_sections, dim, _outputs=None):
    """aten::tensor_split by constant indices or a constant number of
    sections (MViT splits its class token off so): one Slice per piece at
    static bounds. torch's own symbolic writes a Loop over a sequence for
    indices given as a list, which no compiler of static shapes takes; the
    pieces are returned as the SequenceConstruct the unpacking reads with
    constant positions (the importer resolves it into the pieces)."""
    import torch
    from torch.onnx import symbolic_helper as sh

    axis = sh._get_const(dim, "i", "dim")
    value = sh._maybe_get_const(indices_or_sections, "t")
    if sh._is_value(value) or not isinstance(value, torch.Tensor) or value.dim() > 1:
        return _torch_symbolic("symbolic_opset13", "tensor_split")(
            g, x, indices_or_sections, dim, _outputs)
    sizes = _traced_sizes(g, x)
    size = None
    if sizes is not None and -len(sizes) <= axis < len(sizes):
        size = sizes[axis]
    if value.dim() == 1:
        bounds = [0] + [int(v) for v in value.tolist()] + [2**62]
    else:
        sections = int(value)
        if size is None or sections < 1:
            raise ValueError(f"aten::tensor_split into {sections} sections of an axis of "
                             f"size {size}: the size must be known (static) and the "
                             "sections positive")
        step, extra = divmod(size, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + step + (1 if i < extra else 0))

    def ints(v):
        return g.op("Constant", value_t=torch.tensor([v], dtype=torch.int64))

    pieces = [g.op("Slice", x, ints(a), ints(b), ints(axis))
              for a, b in zip(bounds, bounds[1:])]
    return pieces if _outputs is not None else g.op("SequenceConstruct", *pieces)


def _averaging_matrix(size: int, out: int):
    """[out, size]: row i averages torch's adaptive window i, input
    elements floor(i size / out) to ceil((i + 1) size / out) - 1."""
    import numpy as np

    matrix = np.zeros((out, size), dtype=np.float64)
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


def _adaptive_avg_pool_symbolic(rank: int):
    """aten::adaptive_avg_pool{rank}d. torch's symbolic exports only output
    sizes that divide the input's (an AveragePool); VGG and AlexNet at
    small inputs pool a 1x1 or 5x5 map to 7x7 or 6x6. Then each pooled axis
    is a MatMul by the constant matrix of torch's windows
    (_averaging_matrix), exact up to float rounding and trained by
    MatMul's gradient; the rest keeps torch's own symbolic."""

    def symbolic(g, x, output_size):
        import torch
        from torch.onnx import symbolic_helper as sh

        own = _torch_symbolic("symbolic_opset9", f"adaptive_avg_pool{rank}d")
        out = sh._maybe_get_const(output_size, "is")
        sizes = _traced_sizes(g, x)
        if (sh._is_value(out) or sizes is None or len(sizes) < rank
                or None in sizes[-rank:]):
            return own(g, x, output_size)
        out = list(out)
        spatial = sizes[-rank:]
        if all(n % o == 0 for n, o in zip(spatial, out)) or out == [1] * rank:
            return own(g, x, output_size)
        dtype = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
                 "BFloat16": torch.bfloat16}.get(x.type().scalarType())
        if dtype is None:
            raise ValueError(f"aten::adaptive_avg_pool{rank}d of a "
                             f"{x.type().scalarType()} tensor: floating point only")
        total = len(sizes)
        for k, (n, o) in enumerate(zip(spatial, out)):
            if n == o:
                continue
            axis = total - rank + k
            matrix = torch.from_numpy(_averaging_matrix(n, o)).to(dtype)
            if axis == total - 1:  # [..., n] @ [n, o]
                x = g.op("MatMul", x, g.op("Constant", value_t=matrix.t().contiguous()))
                continue
            # The pooled axis next to last: [o, n] @ [..., n, last].
            perm = list(range(total))
            perm[axis], perm[total - 2] = perm[total - 2], perm[axis]
            moved = axis != total - 2
            if moved:
                x = g.op("Transpose", x, perm_i=perm)
            x = g.op("MatMul", g.op("Constant", value_t=matrix), x)
            if moved:
                x = g.op("Transpose", x, perm_i=perm)
        return x

    return symbolic


def _zero_symbolic(g, x):
    """aten::zero (Tensor.zero_, as Swin V2 zeroes the key part of its
    qkv bias): zeros of x's shape and type, which carry no gradient."""
    import torch

    dtype = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
             "BFloat16": torch.bfloat16, "Long": torch.int64, "Int": torch.int32,
             "Bool": torch.bool}.get(x.type().scalarType())
    if dtype is None:
        raise ValueError(f"aten::zero of a {x.type().scalarType()} tensor: its type has "
                         "no ONNX zero here")
    return g.op("ConstantOfShape", g.op("Shape", x),
                value_t=torch.zeros(1, dtype=dtype))


@contextlib.contextmanager
def _extra_symbolics(opset: int, diff: bool):
    """TorchScript symbolics torch lacks or gets wrong, registered for one
    export and removed after: aten::cumsum of booleans and integers,
    aten::as_strided of non-contiguous tensors, aten::tensor_split at
    constant indices, aten::adaptive_avg_pool1d/2d/3d to sizes that do not
    divide the input's, aten::zero (Tensor.zero_), aten::col2im
    (torch.nn.functional.fold) below opset 18, and, when `diff`,
    aten::diff. Under exporter="auto" with dynamo at hand
    aten::diff is left out: Hugging Face's decoders (whose mask code calls
    torch.diff) then export through dynamo, which writes their
    repeat_interleave (MoE experts, Cohere's rotary) with static shapes where
    TorchScript's does not. A symbolic the user registered for any of these
    names is kept."""
    import torch

    table = [("aten::cumsum", _cumsum_symbolic), ("aten::as_strided", _as_strided_symbolic),
             ("aten::tensor_split", _tensor_split_symbolic), ("aten::zero", _zero_symbolic)]
    table += [(f"aten::adaptive_avg_pool{rank}d", _adaptive_avg_pool_symbolic(rank))
              for rank in (1, 2, 3)]
    table += [("aten::col2im", _col2im_symbolic)] if opset < 18 else []
    table += [("aten::diff", _diff_symbolic)] if diff else []
    added = []
    try:
        for name, fn in table:
            if not _has_user_symbolic(name, opset):
                torch.onnx.register_custom_op_symbolic(name, fn, opset)
                added.append(name)
        yield
    finally:
        for name in added:
            torch.onnx.unregister_custom_op_symbolic(name, opset)


def _export_with(exporter, exported, inputs, raw, input_names, output_names,
                 dynamic_axes, opset, diff=True) -> None:
    import torch

    if exporter == "dynamo":
        _export_dynamo(exported, inputs, raw, input_names, output_names, dynamic_axes, opset)
        return
    # torch 2.x defaults to the dynamo exporter: ask for TorchScript's by
    # name (torch 1.13 has no such keyword).
    choice = {"dynamo": False} if _has_dynamo() else {}
    with _extra_symbolics(opset, diff):
        torch.onnx.export(
            exported,
            inputs,
            str(raw),
            export_params=True,
            training=torch.onnx.TrainingMode.TRAINING,
            input_names=input_names,
            output_names=output_names,
            opset_version=opset,
            do_constant_folding=False,
            dynamic_axes=dynamic_axes,
            export_modules_as_functions=False,
            **choice,
        )


def _export_dynamo(exported, inputs, raw, input_names, output_names, dynamic_axes, opset):
    """torch.onnx.export through torch.export, in the module's training
    mode, with the batch dimension dynamic where `dynamic_axes` says; then
    at `opset` (the dynamo exporter writes 18 and later) through ONNX's
    version converter."""
    import inspect
    import logging
    import warnings

    import onnx
    import torch
    from onnxscript import optimizer

    dynamic_shapes = None
    if dynamic_axes:
        batch = torch.export.Dim("batch")
        dynamic_shapes = tuple({0: batch} if name in dynamic_axes else None
                               for name in input_names)
        # forward(*inputs) (the loss wrapper's) is one argument to torch.export.
        params = list(inspect.signature(exported.forward).parameters.values())
        if len(params) == 1 and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
            dynamic_shapes = (dynamic_shapes,)
    warnings.filterwarnings("ignore", message="Exporting a model while it is in training mode",
                            category=UserWarning)
    program = torch.onnx.export(
        exported,
        tuple(inputs),
        dynamo=True,
        input_names=list(input_names),
        output_names=list(output_names),
        opset_version=max(opset, 18),
        dynamic_shapes=dynamic_shapes,
        optimize=False,
        verbose=False,
    )
    _scoped_node_names(program.model.graph)
    # The optimizer removes the exporter's sequence ops and shape
    # arithmetic, but would also rewrite the model's state: fold a
    # transposed weight into a constant, drop a Gemm's bias that happens to
    # be zero (nn.MultiheadAttention's out_proj.bias at initialisation:
    # its gradient would then be lost). While it runs, every parameter and
    # buffer is a graph input with no value, which no rule can read.
    graph = program.model.graph
    state = {name for name, _ in exported.named_parameters(remove_duplicate=False)}
    state |= {name for name, _ in exported.named_buffers(remove_duplicate=False)}
    n_inputs = len(graph.inputs)
    hidden = {}
    for name in [name for name in graph.initializers if name in state]:
        value = graph.initializers.pop(name)
        hidden[name] = value.const_value
        value.const_value = None
        graph.inputs.append(value)
    quiet = [logging.getLogger(name) for name in ("onnxscript", "onnx_ir")]
    levels = [logger.level for logger in quiet]
    try:
        for logger in quiet:
            logger.setLevel(logging.ERROR)
        optimizer.optimize(program.model)
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
        while len(graph.inputs) > n_inputs:
            value = graph.inputs.pop()
            value.const_value = hidden[value.name]
            graph.register_initializer(value)
    # Nodes the optimizer made (a Split, a Reshape) have no scope: they
    # take their first scoped input's module.
    for node in graph:
        if node.name and node.name.startswith("/"):
            continue
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer.name and producer.name.startswith("/"):
                node.name = producer.name.rsplit("/", 1)[0] + "/" + (node.name or node.op_type)
                break
    program.save(str(raw))
    proto = onnx.load(str(raw))
    _batch_norms_in_training(proto, exported)
    written = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    if written != opset:
        proto = _convert_down(proto, written, opset)
    onnx.save(proto, str(raw))


def _scoped_node_names(graph) -> None:
    """Names each node by its module path as the TorchScript exporter does
    (`/model/blocks.0/attn/<node>`), from the name scopes the dynamo
    exporter records in the node's metadata: the compiler gives each op to
    its module by that name (activation checkpointing recomputes a unit's
    own ops)."""
    import ast

    for node in graph:
        scopes = node.metadata_props.get("pkg.torch.onnx.name_scopes")
        if not scopes:
            continue
        try:
            parts = [str(p) for p in ast.literal_eval(scopes)]
        except (ValueError, SyntaxError):
            continue
        # Each scope is a module's FQN ("", "model", "model.blocks.0", ...);
        # the last is the op's own.
        if len(parts) >= 2 and parts[-2]:
            node.name = "/" + "/".join(parts[-2].split(".") + [node.name or node.op_type])


def _batch_norms_in_training(proto, model) -> None:
    """The dynamo exporter writes a training-mode BatchNorm as an inference
    BatchNormalization (running statistics, one output), which would train
    silently wrong: each such node gets `training_mode = 1` and its two
    running-statistics outputs back, as the TorchScript exporter writes it.
    Nodes and modules are matched one to one, in order, by their running
    statistics; anything else is refused."""
    import torch

    modules = [m for m in model.modules()
               if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training]
    nodes = [n for n in proto.graph.node
             if n.op_type == "BatchNormalization" and n.domain in ("", "ai.onnx")]
    inference = [n for n in nodes
                 if not any(a.name == "training_mode" and a.i for a in n.attribute)]
    if not modules or not inference:
        return
    if len(inference) != len(modules) or any(
            m.running_mean is None or len(n.input) < 5 for n, m in zip(inference, modules)):
        raise ValueError(
            f"the dynamo exporter wrote {len(inference)} BatchNormalization nodes in "
            f"inference form for {len(modules)} BatchNorm modules in training mode, "
            "which cannot be matched one to one; export with exporter='torchscript'")
    from onnx import helper

    for node in inference:
        kept = [a for a in node.attribute if a.name != "training_mode"]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute("training_mode", 1)])
        base = node.name or node.output[0]
        node.output.extend([f"{base}_running_mean", f"{base}_running_var"])


_HIDDEN_DOMAIN = "fsdp_mlir.hidden"


def _convert_down(proto, written: int, opset: int):
    """`proto` from opset `written` (18 or later) to `opset` through ONNX's
    version converter, doing first what its adapters do not: a Split with
    `num_outputs` (opset 18) gets its sizes as the `split` input and is
    hidden from the converter, which has no adapter for Split from 18, and
    so is a Pad (none from 18 either), its `axes` input (opset 18) written
    as pads of every axis; a Col2Im (opset 18) becomes a Reshape and a
    ConvTranspose (_fold_as_conv_transpose); an
    opset-18 Reduce's `noop_with_empty_axes` (kept by the ReduceMean
    adapter) is dropped where it is the default and refused otherwise."""
    import numpy as np
    import onnx
    from onnx import numpy_helper, shape_inference, version_converter

    inferred = shape_inference.infer_shapes(proto)
    values = list(inferred.graph.value_info) + list(inferred.graph.input)
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None
                       for d in v.type.tensor_type.shape.dim]
              for v in values if v.type.tensor_type.HasField("shape")}
    types = {v.name: v.type.tensor_type.elem_type for v in values}
    if opset < 18:
        nodes = []
        for node in proto.graph.node:
            if node.domain in ("", "ai.onnx") and node.op_type == "Col2Im":
                nodes += _col2im_nodes(proto, node, shapes, types)
            elif node.domain in ("", "ai.onnx") and node.op_type == "Pad":
                nodes += _pad_without_axes(proto, node, shapes, opset)
            else:
                nodes.append(node)
        del proto.graph.node[:]
        proto.graph.node.extend(nodes)
    hidden = []
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx") or not (
                node.op_type == "Split" or (node.op_type == "Pad" and opset < 18)):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if "num_outputs" in attrs:
            shape = shapes.get(node.input[0])
            axis = attrs.get("axis", 0)
            if shape is None or shape[axis] is None:
                raise ValueError(f"node {node.name!r} (Split): the size of the split axis is "
                                 f"not known, so opset {written} cannot be written as {opset}")
            n, size = attrs["num_outputs"], shape[axis]
            chunk = -(-size // n)
            sizes = [min(chunk, size - i * chunk) for i in range(n)]
            name = f"{node.name or node.output[0]}_sizes"
            proto.graph.initializer.append(numpy_helper.from_array(
                np.array(sizes, dtype=np.int64), name))
            del node.input[1:]
            node.input.append(name)
            keep = [a for a in node.attribute if a.name != "num_outputs"]
            del node.attribute[:]
            node.attribute.extend(keep)
        node.domain = _HIDDEN_DOMAIN
        hidden.append(node.name)
    if hidden:
        proto.opset_import.append(onnx.helper.make_opsetid(_HIDDEN_DOMAIN, 1))
    proto = version_converter.convert_version(proto, opset)
    for node in proto.graph.node:
        if node.domain == _HIDDEN_DOMAIN:
            node.domain = ""
        if node.op_type.startswith("Reduce") and opset < 18:
            for a in list(node.attribute):
                if a.name == "noop_with_empty_axes":
                    if a.i:
                        raise ValueError(f"node {node.name!r} ({node.op_type}) has "
                                         f"noop_with_empty_axes=1, which opset {opset} lacks")
                    node.attribute.remove(a)
    kept = [o for o in proto.opset_import if o.domain != _HIDDEN_DOMAIN]
    del proto.opset_import[:]
    proto.opset_import.extend(kept)
    # The IR version of the opset asked for (opset 17 is IR 8), for readers
    # with an older ONNX library.
    proto.ir_version = min(proto.ir_version, _IR_VERSION_OF_OPSET.get(opset, proto.ir_version))
    return proto


def _constant_input(proto, name: str):
    """The value of the tensor `name` when an initializer or a Constant
    node holds it, as a numpy array, else None."""
    import numpy as np
    from onnx import helper, numpy_helper

    for init in proto.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in proto.graph.node:
        if node.op_type == "Constant" and name in node.output:
            for a in node.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
                if a.name in ("value_int", "value_ints"):
                    return np.array(helper.get_attribute_value(a), dtype=np.int64)
    return None


def _col2im_nodes(proto, node, shapes, types) -> list:
    """The opset-18 Col2Im `node` as a Reshape of its columns to the block
    grid and a ConvTranspose by the one-hot weight of
    _fold_as_conv_transpose (kept as initializers); ValueError naming the
    node when its image and block shapes are not constants or its input's
    columns are not known."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    where = f"node {node.name!r} (Col2Im)"
    image, kernel = (_constant_input(proto, n) if n else None for n in node.input[1:3])
    if image is None or kernel is None:
        raise ValueError(f"{where}: its image_shape and block_shape are not constants, "
                         "so it cannot be written as a ConvTranspose below opset 18")
    image, kernel = [int(v) for v in np.ravel(image)], [int(v) for v in np.ravel(kernel)]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    rank = len(image)
    shape = shapes.get(node.input[0])
    if shape is None or len(shape) not in (2, 3):
        raise ValueError(f"{where}: its input's sizes {shape} are not a known [N, C*K, L] "
                         "or [C*K, L]")
    try:
        channels, blocks, weight, conv = _fold_as_conv_transpose(
            shape[-2], image, kernel, list(attrs.get("dilations", [1] * rank)),
            list(attrs.get("pads", [0] * 2 * rank)), list(attrs.get("strides", [1] * rank)))
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    elem = types.get(node.input[0], onnx.TensorProto.FLOAT)
    if elem not in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16):
        raise ValueError(f"{where}: its input is of ONNX element type {elem}, not a float")
    base = node.name or node.output[0]
    batched = len(shape) == 3
    grid = np.array([-1 if batched else 1, shape[-2]] + blocks, dtype=np.int64)
    proto.graph.initializer.extend([
        numpy_helper.from_array(weight.astype(helper.tensor_dtype_to_np_dtype(elem)),
                                f"{base}_fold_weight"),
        numpy_helper.from_array(grid, f"{base}_fold_grid")])
    out = node.output[0] if batched else f"{base}_fold_image"
    nodes = [helper.make_node("Reshape", [node.input[0], f"{base}_fold_grid"],
                              [f"{base}_fold_blocks"], name=f"{base}_grid"),
             helper.make_node("ConvTranspose", [f"{base}_fold_blocks", f"{base}_fold_weight"],
                              [out], name=node.name, **conv)]
    if not batched:
        proto.graph.initializer.append(numpy_helper.from_array(
            np.array([channels] + image, dtype=np.int64), f"{base}_fold_shape"))
        nodes.append(helper.make_node("Reshape", [out, f"{base}_fold_shape"],
                                      [node.output[0]], name=f"{base}_image"))
    return nodes


def _pad_without_axes(proto, node, shapes, opset: int) -> list:
    """An opset-18 Pad `node` with an `axes` input as the node without it
    and its pads for every axis: Pad before 18 pads every axis. Constant
    pads are written expanded; others are gathered from themselves and a
    zero at constant indices.
    ValueError naming the node when its axes are not constant or its
    input's rank is unknown, or for a mode opset 18 lacks."""
    import numpy as np
    from onnx import helper, numpy_helper

    where = f"node {node.name!r} (Pad)"
    mode = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "mode"),
                b"constant")
    if mode not in (b"constant", b"reflect", b"edge"):
        raise ValueError(f"{where}: mode {mode.decode()!r} is not one of opset {opset}'s "
                         "(constant, reflect, edge)")
    if len(node.input) < 4 or not node.input[3]:
        return [node]
    axes = _constant_input(proto, node.input[3])
    shape = shapes.get(node.input[0])
    if axes is None:
        raise ValueError(f"{where}: its axes are not a constant, so its pads cannot be "
                         "written for every axis below opset 18")
    if shape is None:
        raise ValueError(f"{where}: its input's rank is not known, so its pads cannot be "
                         "written for every axis below opset 18")
    rank, given = len(shape), [int(a) for a in np.ravel(axes)]
    axes = [a % rank for a in given if -rank <= a < rank]
    if len(set(axes)) != len(given):
        raise ValueError(f"{where}: axes {given} are not distinct axes of its rank-{rank} "
                         "input")
    # Each axis's begin and end in [begins of axes..., ends of axes..., 0].
    zero = 2 * len(axes)
    index = [axes.index(d) if d in axes else zero for d in range(rank)]
    index += [axes.index(d) + len(axes) if d in axes else zero for d in range(rank)]
    base = node.name or node.output[0]
    pads, nodes = _constant_input(proto, node.input[1]), []
    if pads is not None:
        padded = np.append(np.ravel(pads).astype(np.int64), 0)
        proto.graph.initializer.append(numpy_helper.from_array(padded[index], f"{base}_pads_all"))
    else:
        proto.graph.initializer.extend([
            numpy_helper.from_array(np.zeros(1, dtype=np.int64), f"{base}_pads_zero"),
            numpy_helper.from_array(np.array(index, dtype=np.int64), f"{base}_pads_index")])
        nodes = [helper.make_node("Concat", [node.input[1], f"{base}_pads_zero"],
                                  [f"{base}_pads_and_zero"], name=f"{base}_pads_and_zero",
                                  axis=0),
                 helper.make_node("Gather", [f"{base}_pads_and_zero", f"{base}_pads_index"],
                                  [f"{base}_pads_all"], name=f"{base}_pads_all", axis=0)]
    node.input[1] = f"{base}_pads_all"
    del node.input[3:]
    return nodes + [node]


# The IR version each opset was released with (onnx/helper.py's table).
_IR_VERSION_OF_OPSET = {13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


# --------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------


def export(
    model,
    example_inputs,
    path,
    *,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    input_names: Sequence[str] | None = None,
    dynamic_batch: bool = True,
    external_data: bool = False,
    opset: int = 17,
    exporter: str = "auto",
) -> Path:
    """Exports `model` to the ONNX file `path` and returns its Path.

    example_inputs: a tensor or a tuple of tensors. With `loss_fn`, the last
    one is the target: the exported graph computes
    `loss_fn(model(*inputs[:-1]), inputs[-1])` and its only output is the
    scalar "loss". Without it the outputs are "output_0", "output_1", ...
    input_names default to "input_0", "input_1", ...
    dynamic_batch: dim 0 of every input, and of every output whose dim 0
    has the batch size, becomes the dim_param "batch".
    external_data: tensors go to "<file name>.data" beside the model.
    exporter: "torchscript" (torch.onnx's TorchScript exporter, the only one
    in torch 1.13), "dynamo" (the torch.export-based one of torch 2.x), or
    "auto": TorchScript where the installed torch has it, else dynamo.

    The model is exported in training mode (BatchNorm as training-mode
    BatchNormalization, dropout live; a torchvision StochasticDepth, whose
    bernoulli_ torch 1.13 cannot export, or a Hugging Face / timm DropPath,
    as the same per-sample noise drawn by a Dropout of ones, listed in the
    metadata's "stochastic_depth") but
    left as it was: its mode,
    buffers and the RNG state are restored, and the file holds the buffer
    values from before the call. Any failure raises ExportError (a
    RuntimeError) naming the failed step.
    """
    with _step("checking the arguments"):
        import onnx
        import torch

        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if isinstance(example_inputs, torch.Tensor):
            inputs = (example_inputs,)
        elif isinstance(example_inputs, (tuple, list)):
            inputs = tuple(example_inputs)
        else:
            raise TypeError(
                "example_inputs must be a tensor or a tuple of tensors, got "
                f"{type(example_inputs).__name__}"
            )
        if not inputs:
            raise ValueError("example_inputs is empty")
        for i, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"example_inputs[{i}] is a {type(x).__name__}, not a tensor")
            if dynamic_batch and x.dim() == 0:
                raise ValueError(
                    f"example_inputs[{i}] is a scalar and has no batch dimension; "
                    "pass dynamic_batch=False"
                )
        if loss_fn is not None and len(inputs) < 2:
            raise ValueError(
                "with loss_fn, example_inputs must hold the model's inputs followed "
                "by the target (at least two tensors)"
            )
        if input_names is None:
            input_names = [f"input_{i}" for i in range(len(inputs))]
        else:
            input_names = [str(n) for n in input_names]
            if len(input_names) != len(inputs):
                raise ValueError(
                    f"{len(input_names)} input_names for {len(inputs)} example inputs"
                )
            if len(set(input_names)) != len(input_names):
                raise ValueError(f"input_names are not unique: {input_names}")
        if not isinstance(opset, int) or opset < 9:
            raise ValueError(f"opset must be an int >= 9, got {opset!r}")
        _choose_exporter(exporter)  # checks the name now; resolved at the export
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)

    with _step("reading the model's parameters and buffers"):
        modules = _module_table(model)
        embeddings = _embedding_table(model)
        aliases: dict[int, list[str]] = {}
        for fqn, p in _all_named_parameters(model):
            aliases.setdefault(id(p), []).append(fqn)
        named_params = list(model.named_parameters())
        named_buffers = list(model.named_buffers())
        persistent = _buffer_persistence(model)
        counters = {f"{fqn}.num_batches_tracked" if fqn else "num_batches_tracked"
                    for fqn, m in model.named_modules()
                    if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                    and getattr(m, "num_batches_tracked", None) is not None}

    exported = model if loss_fn is None else _make_loss_wrapper(model, loss_fn)
    prefix = "" if loss_fn is None else _WRAPPER_PREFIX

    with _preserved_state(model) as saved_buffers, \
            _stochastic_depth_as_dropout(model) as stochastic:
        with _step("running the model on example_inputs (in training mode)"):
            exported.train()
            with torch.no_grad():
                outs = _flatten_outputs(exported(*inputs))
            if loss_fn is not None:
                if len(outs) != 1 or outs[0].dim() != 0:
                    shapes = [tuple(o.shape) for o in outs]
                    raise ValueError(
                        f"loss_fn must return one scalar tensor, got shapes {shapes}"
                    )
                output_names = ["loss"]
            else:
                output_names = [f"output_{i}" for i in range(len(outs))]
            clash = set(output_names) & set(input_names)
            if clash:
                raise ValueError(f"input_names clash with output names: {sorted(clash)}")
            dynamic_axes = None
            if dynamic_batch:
                batch = inputs[0].shape[0]
                dynamic_axes = {n: {0: BATCH_DIM_PARAM} for n in input_names}
                for n, o in zip(output_names, outs):
                    if o.dim() >= 1 and o.shape[0] == batch:
                        dynamic_axes[n] = {0: BATCH_DIM_PARAM}

        with tempfile.TemporaryDirectory(prefix=".fsdp_mlir_export_", dir=path.parent) as tmp:
            raw = Path(tmp) / "torch.onnx"
            try:
                exporter = _run_exporter(exporter, model, exported, inputs, raw,
                                         input_names, output_names, dynamic_axes, opset)
            except ExportError as e:
                hint = _experts_hint(model)
                if not hint:
                    raise
                raise ExportError(e.step, f"{e.detail}\n{hint}") from e.__cause__
            with _step("loading the exported ONNX model"):
                proto = onnx.load(str(raw))

            with _step("matching parameters and buffers to initializers"):
                matcher = _Matcher(proto.graph, prefix)
                param_rows, buffer_rows = [], []
                pending = []  # (row, tensor, value to store or None)
                for fqn, p in named_params:
                    row = {
                        "fqn": fqn,
                        "initializer": None,
                        "shape": list(p.shape),
                        "dtype": _dtype_name(p.dtype),
                        "requires_grad": bool(p.requires_grad),
                        "aliases": [a for a in aliases.get(id(p), []) if a != fqn],
                    }
                    param_rows.append(row)
                    init = matcher.by_names([fqn] + row["aliases"], p)
                    row["initializer"] = init.name if init is not None else None
                    pending.append((row, p, None))
                for fqn, b in named_buffers:
                    row = {
                        "fqn": fqn,
                        "initializer": None,
                        "shape": list(b.shape),
                        "dtype": _dtype_name(b.dtype),
                        "persistent": persistent.get(fqn, True),
                    }
                    buffer_rows.append(row)
                    saved = saved_buffers.get(id(b), b)
                    init = matcher.by_names([fqn], saved)
                    row["initializer"] = init.name if init is not None else None
                    pending.append((row, b, saved))
                # Second pass: what the names did not find, by value.
                for row, t, saved in pending:
                    if row["initializer"] is None:
                        init = matcher.by_value(t if saved is None else saved)
                        if init is None and saved is not None:
                            init = matcher.by_value(t)  # value after the trace
                        if init is not None:
                            row["initializer"] = init.name
                from onnx import numpy_helper

                # BatchNorm's num_batches_tracked is read by no training-mode
                # node, so the exporter drops it; it gets an initializer of
                # its own, which makes it a buffer that fsdp-autodiff counts
                # and state dicts carry. So does a trainable parameter no
                # node reads (a ViT's mask_token): in its unit's flat buffer
                # its gradient is zero, as in torch FSDP's FlatParameter. A
                # frozen one stays out (it would be a frozen parameter in a
                # trainable unit, which FSDP cannot flatten).
                for row, t, saved in pending:
                    unused_param = (saved is None and row["initializer"] is None
                                    and row["requires_grad"])
                    if row["initializer"] is None and (row["fqn"] in counters or unused_param):
                        name = prefix + row["fqn"]
                        if name in matcher.by_name:
                            raise ValueError(f"an initializer is already called {name!r}")
                        value = t if saved is None else saved
                        init = onnx.helper.make_tensor(
                            name, _onnx_elem_type(value.dtype), list(value.shape),
                            _tensor_bytes(value), raw=True)
                        proto.graph.initializer.append(init)
                        matcher.by_name[name] = init
                        matcher.claimed.add(name)
                        row["initializer"] = name
                # torch 1.13 serializes the buffers as the tracing forward left
                # them (BatchNorm stats one momentum step on): store the values
                # from before the call.
                for row, t, saved in pending:
                    if saved is None or row["initializer"] is None:
                        continue
                    init = matcher.by_name[row["initializer"]]
                    data = _tensor_bytes(saved)
                    if _initializer_bytes(init) != data:
                        for field in ("float_data", "int32_data", "int64_data",
                                      "double_data", "uint64_data", "string_data"):
                            init.ClearField(field)
                        init.raw_data = data

            if external_data:
                with _step("keeping the graph's own constants in the model file"):
                    _constants_as_nodes(proto, matcher.claimed)

            with _step("adding the fsdp_mlir metadata"):
                meta = {
                    "version": METADATA_VERSION,
                    "modules": modules,
                    "embeddings": embeddings,
                    "params": param_rows,
                    "buffers": buffer_rows,
                    "inputs": [i.name for i in proto.graph.input],
                    "outputs": [o.name for o in proto.graph.output],
                    "batch_dim": 0 if dynamic_batch else None,
                    "loss": loss_fn is not None,
                    # The loss wrapper's name for the model, which prefixes
                    # every node scope (/model/...): Hugging Face's
                    # *ForCausalLM have a child called `model` too.
                    "scope_prefix": "model" if loss_fn is not None else "",
                    "stochastic_depth": stochastic,
                }
                if meta["inputs"] != list(input_names):
                    raise ValueError(
                        f"the exported graph's inputs {meta['inputs']} are not the "
                        f"example inputs {list(input_names)} (an input the model "
                        "does not use is dropped by the exporter)"
                    )
                if meta["outputs"] != output_names:
                    raise ValueError(
                        f"the exported graph's outputs {meta['outputs']} are not "
                        f"{output_names}"
                    )
                for prop in list(proto.metadata_props):
                    if prop.key == METADATA_KEY:
                        proto.metadata_props.remove(prop)
                entry = proto.metadata_props.add()
                entry.key = METADATA_KEY
                entry.value = json.dumps(meta)

            with _step(f"saving {path}"):
                staged = Path(tmp) / path.name
                data_name = path.name + ".data"
                if external_data:
                    onnx.save_model(
                        proto,
                        str(staged),
                        save_as_external_data=True,
                        all_tensors_to_one_file=True,
                        location=data_name,
                        size_threshold=0,
                    )
                    if (Path(tmp) / data_name).exists():  # absent: no tensors
                        os.replace(Path(tmp) / data_name, path.parent / data_name)
                else:
                    onnx.save_model(proto, str(staged))
                os.replace(staged, path)

    with _step(f"onnx.checker.check_model({str(path)!r})"):
        onnx.checker.check_model(str(path))
    return path
