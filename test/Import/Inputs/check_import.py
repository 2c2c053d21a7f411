"""Checks what fsdp-opt imported from a corpus model against the references
no importer code wrote:
 - every fsdp.param / fsdp.buffer data reference holds its initializer's
   values, as ONNX's own reader (onnx.numpy_helper) decodes them;
 - the imported parameters and buffers are exactly torch's (the module table
   NAME.modules.json written from named_modules() at export), with their
   shapes, requires_grad (`frozen`) and tied aliases from the export metadata.

    check_import.py MODEL.onnx IMPORTED.mlir
"""

import json
import re
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

model_path, mlir_path = Path(sys.argv[1]), Path(sys.argv[2])
model = onnx.load(str(model_path))  # loads external data too
by_name = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

# The importer names state after FQNs; the exporter's metadata maps FQNs to
# initializer names (absent for models from other exporters).
fqn_to_init = {}
for prop in model.metadata_props:
    if prop.key == "fsdp_mlir":
        meta = json.loads(prop.value)
        for entry in meta["params"] + meta["buffers"]:
            if entry["initializer"]:
                fqn_to_init[entry["fqn"]] = entry["initializer"]

pattern = re.compile(
    r'fsdp\.(param|buffer) @"?([^" ]+)"? : tensor<([^>]*)>.* at '
    r'<"([^"]+)", offset = (\d+), length = (\d+)>')
checked = 0
for line in mlir_path.read_text().splitlines():
    match = pattern.search(line)
    if not match:
        continue
    kind, fqn, _, file, offset, length = match.groups()
    offset, length = int(offset), int(length)
    expected = by_name[fqn_to_init.get(fqn, fqn)]
    with open(model_path.parent / file, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    actual = np.frombuffer(data, dtype=expected.dtype).reshape(expected.shape)
    if not np.array_equal(actual, expected):
        sys.exit(f"FAIL: {kind} {fqn}: bytes at {file}+{offset} differ from ONNX's values")
    checked += 1
if checked == 0:
    sys.exit("FAIL: no data references found")

# The imported state against torch's module table.
state = re.compile(r'fsdp\.(param|buffer) @"?([^" ]+)"? : tensor<([^>]*)>( frozen)?'
                   r'(?:.*aliases = \[([^\]]*)\])?')
imported = {}
for line in mlir_path.read_text().splitlines():
    match = state.search(line)
    if match:
        kind, fqn, type_, frozen, aliases = match.groups()
        imported[fqn] = (kind, type_, bool(frozen),
                         re.findall(r'"([^"]+)"', aliases or ""))
modules = json.loads((model_path.parent / (model_path.stem + ".modules.json")).read_text())
torch_params = {p for m in modules for p in m["params"]}
expected = {}
for entry in meta["params"]:
    if not entry["initializer"]:
        continue
    shape = "x".join(str(d) for d in entry["shape"])
    dtype = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64"}[entry["dtype"]]
    expected[entry["fqn"]] = ("param", f"{shape}x{dtype}" if shape else dtype,
                              not entry["requires_grad"], entry["aliases"])
    if not {entry["fqn"], *entry["aliases"]} <= torch_params:
        sys.exit(f"FAIL: metadata param {entry['fqn']} is not a parameter of the torch modules")
for entry in meta["buffers"]:
    if entry["initializer"]:
        shape = "x".join(str(d) for d in entry["shape"])
        dtype = {"float32": "f32", "int64": "i64", "bool": "i1"}[entry["dtype"]]
        expected[entry["fqn"]] = ("buffer", f"{shape}x{dtype}" if shape else dtype,
                                  False, [])
# Every torch parameter that reached the graph is imported under one name.
for fqn in sorted(set(expected) | set(imported)):
    if expected.get(fqn) != imported.get(fqn):
        sys.exit(f"FAIL: {fqn}: torch says {expected.get(fqn)}, imported {imported.get(fqn)}")
covered = {n for fqn, e in expected.items() if e[0] == "param" for n in [fqn, *e[3]]}
print(f"ok: {checked} data references hold their initializers' bytes; "
      f"{len(expected)} params/buffers match torch ({len(covered)} parameter names)")
