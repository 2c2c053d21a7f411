"""ONNX models at opsets newer than the compiler reads, converted down.

    python -m fsdp_mlir.opset IN.onnx OUT.onnx [--opset 17]

The compiler's ONNX library (Debian's 1.12) knows opsets up to 17. A model
written at 18 or later (torch 2.x's torch.export-based exporter writes 18
and later) is converted by ONNX's own version converter, from the `onnx`
package of the running Python, which must know the model's opset (torch
2.x's environment has it), after rewriting what it has no adapter for
(export._convert_down: a Split's num_outputs, Pad, Col2Im as a
ConvTranspose). `compile()` does this by itself, writing the
converted model beside the plan; the command line does it by hand for
`fsdp-opt` users.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAX_OPSET = 17  # the newest opset fsdp-opt imports


def default_opset(onnx_path) -> int:
    """The model's opset of the default ONNX domain (0 when it has none)."""
    import onnx

    return _default_opset(onnx.load(str(onnx_path), load_external_data=False))


def _default_opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def convert(onnx_path, out, opset: int = MAX_OPSET) -> Path:
    """Writes `onnx_path` converted to `opset` as `out` (tensors stored in
    `out` itself, or in `<out name>.data` when the input kept its tensors
    outside) and returns `out`. ValueError, naming the opset or the node,
    when the conversion cannot be made, or when `out` (or its data file)
    exists and is not a model this module wrote."""
    import onnx

    from fsdp_mlir.export import _convert_down

    onnx_path, out = Path(onnx_path), Path(out)
    if onnx_path.resolve() == out.resolve():
        raise ValueError(f"{out}: write the converted model to another file")
    # Only a model this module wrote (and its data file) is replaced.
    present = [p for p in (out, out.with_name(out.name + ".data"))
               if p.exists() or p.is_symlink()]
    if present and not _converted(out):
        raise ValueError(f"refusing to overwrite {present[0]}: it is not a model "
                         "python -m fsdp_mlir.opset wrote (choose another path or move "
                         "it away)")
    # The graph without its tensors' bytes: the opset, and where they are.
    header = onnx.load(str(onnx_path), load_external_data=False)
    written = _default_opset(header)
    try:
        onnx.defs.get_schema("Add", written)
        known = written <= onnx.defs.onnx_opset_version()
    except Exception:
        known = False
    if not known:
        raise ValueError(f"{onnx_path} is at opset {written}, which this Python's onnx "
                         f"{onnx.__version__} does not know (it knows up to "
                         f"{onnx.defs.onnx_opset_version()}); run this with torch 2.x's "
                         "environment (the project's .venv-torch2)")
    external = any(t.data_location == onnx.TensorProto.EXTERNAL
                   for t in header.graph.initializer)
    proto = onnx.load(str(onnx_path))
    if written != opset:
        try:
            proto = _convert_down(proto, written, opset)
        except ValueError:
            raise  # _convert_down's own refusals name the node already
        except Exception as e:  # the converter's own errors name the node
            raise ValueError(f"ONNX's version converter cannot convert {onnx_path} from "
                             f"opset {written} to {opset}: {e}") from None
    entry = proto.metadata_props.add()
    entry.key, entry.value = _MARK, str(onnx_path)
    _write(proto, out, external)
    return out


# Metadata key of a model this module wrote: only such a model (and its
# data file) is ever replaced.
_MARK = "fsdp_mlir.opset.converted_from"


def _converted(path: Path) -> bool:
    """Whether `path` is a regular file holding a model this module wrote."""
    import onnx

    if path.is_symlink() or not path.is_file():
        return False
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:
        return False
    return any(p.key == _MARK for p in model.metadata_props)


def _write(proto, out: Path, external: bool) -> None:
    """Writes `proto` as `out` (and `<out name>.data`), putting the new
    files in place only once they are complete."""
    import os
    import tempfile

    import onnx

    data = out.with_name(out.name + ".data")
    with tempfile.TemporaryDirectory(prefix=".fsdp-opset-", dir=out.parent) as tmp:
        staged = Path(tmp) / out.name
        if external:
            onnx.save(proto, str(staged), save_as_external_data=True,
                      location=data.name)
            if (Path(tmp) / data.name).exists():
                os.replace(Path(tmp) / data.name, data)
            else:  # every tensor under onnx's 1 KiB threshold: kept inline
                data.unlink(missing_ok=True)
        else:
            onnx.save(proto, str(staged))
            data.unlink(missing_ok=True)  # ours (checked above), now stale
        os.replace(staged, out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fsdp_mlir.opset",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--opset", type=int, default=MAX_OPSET)
    args = ap.parse_args(argv)
    try:
        written = default_opset(args.model)
        convert(args.model, args.out, args.opset)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.model} (opset {written}) -> {args.out} (opset {args.opset})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
