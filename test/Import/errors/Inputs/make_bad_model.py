"""Writes one deliberately bad ONNX model (or data file) for the import
error tests.

    make_bad_model.py CASE OUT [ARGS...]

Every model is built with the onnx Python API at test time; nothing binary
is committed. CASE is one of the functions below (dashes for underscores).
"""

import json
import os
import random
import shutil
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper

import numpy as np

OPSET = 17


def graph_model(nodes, inputs, outputs, initializers=(), opset=OPSET,
                domains=(), **kwargs):
    graph = helper.make_graph(nodes, "bad", inputs, outputs,
                              initializer=list(initializers))
    imports = [helper.make_opsetid("", opset)] if opset else []
    imports += [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=imports,
                              producer_name="make_bad_model", **kwargs)
    model.ir_version = 8
    return model


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def weight(name, shape):
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return numpy_helper.from_array(data, name)


def linear(opset=OPSET, domains=()):
    """y = x @ W with a parameter `fc.weight` (a good model to break)."""
    return graph_model([helper.make_node("MatMul", ["x", "fc.weight"], ["y"],
                                         name="fc")],
                       [tensor("x", ["batch", 8])], [tensor("y", ["batch", 4])],
                       [weight("fc.weight", [8, 4])], opset=opset,
                       domains=domains)


# --- Files that are not ONNX models ---------------------------------------

def truncate(out, source, size):
    """The first SIZE bytes of SOURCE; SIZE may be `half` or `minus1`."""
    data = open(source, "rb").read()
    n = {"half": len(data) // 2, "minus1": len(data) - 1}.get(size)
    n = int(size) if n is None else n
    open(out, "wb").write(data[:n])


def garbage(out):
    rng = random.Random(1234)
    open(out, "wb").write(bytes(rng.getrandbits(8) for _ in range(4096)))


def text(out):
    open(out, "w").write("This is a text file, not an ONNX model.\n")


def empty(out):
    open(out, "wb").close()


def bad_nested_message(out):
    """Valid wire format at the top level, but the graph's first node is a
    malformed message (a truncated varint)."""
    model = linear()
    data = bytearray(model.SerializeToString())
    graph = model.graph.SerializeToString()
    node = model.graph.node[0].SerializeToString()
    # Node field (1, length-delimited) inside the graph: replace its payload
    # by the same number of 0xff bytes (an unterminated varint).
    start = data.find(graph) + graph.find(node)
    data[start:start + len(node)] = b"\xff" * len(node)
    open(out, "wb").write(bytes(data))


# --- External data ----------------------------------------------------------

def set_external(out, source, key, value, initializer=None):
    """SOURCE (a model with external data) with one external_data entry of
    one initializer (the first external one, or INITIALIZER) rewritten;
    written to OUT, which must be in a directory the caller prepared."""
    model = onnx.load(source, load_external_data=False)
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        if initializer and t.name != initializer:
            continue
        for entry in t.external_data:
            if entry.key == key:
                entry.value = value
                break
        else:
            t.external_data.add(key=key, value=value)
        break
    onnx.save_model(model, out)


def truncate_data(out, source):
    """Half of SOURCE's bytes."""
    truncate(out, source, "half")


# --- Graphs ONNX's checker rejects -------------------------------------------

def undefined_input(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"),
         helper.make_node("Add", ["h", "nowhere"], ["y"], name="add")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    onnx.save_model(model, out)


def wrong_attribute_type(out):
    model = graph_model(
        [helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=1.5)],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    onnx.save_model(model, out)


def unknown_attribute(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    onnx.save_model(model, out)


def no_ir_version(out):
    model = linear()
    model.ir_version = 0
    onnx.save_model(model, out)


def future_ir_version(out):
    model = linear()
    model.ir_version = 99
    onnx.save_model(model, out)


# --- Opsets, domains, operators ----------------------------------------------

def opset(out, version):
    model = linear(opset=int(version))
    onnx.save_model(model, out)


def no_default_opset(out):
    model = graph_model(
        [helper.make_node("Custom", ["x"], ["y"], name="custom",
                          domain="com.example")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])], opset=0,
        domains=["com.example"])
    onnx.save_model(model, out)


def custom_domain(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"),
         helper.make_node("FancyGelu", ["h"], ["y"], name="fancy",
                          domain="com.example")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])], domains=["com.example"])
    onnx.save_model(model, out)


def unsupported_op(out, op):
    attrs = {"size": 3} if op == "LRN" else {}
    shape = [2, 3, 4, 4] if op == "LRN" else [2, 4]
    model = graph_model(
        [helper.make_node(op, ["x"], ["y"], name="the_node", **attrs)],
        [tensor("x", shape)], [tensor("y", shape)])
    onnx.save_model(model, out)


# --- Dynamic shapes ------------------------------------------------------------

def dynamic_seq(out):
    """x: [batch, seq, 8] -> y = x @ W."""
    model = graph_model(
        [helper.make_node("MatMul", ["x", "fc.weight"], ["y"], name="fc")],
        [tensor("x", ["batch", "seq", 8])], [tensor("y", ["batch", "seq", 4])],
        [weight("fc.weight", [8, 4])])
    onnx.save_model(model, out)


def anonymous_dim(out):
    """x: [batch, ?, 8] with no dim_param on dimension 1."""
    model = graph_model(
        [helper.make_node("MatMul", ["x", "fc.weight"], ["y"], name="fc")],
        [tensor("x", ["batch", None, 8])], [tensor("y", ["batch", None, 4])],
        [weight("fc.weight", [8, 4])])
    onnx.save_model(model, out)


def dynamic_reshape(out):
    """Reshape whose target shape is a runtime graph input: the node's
    output has no static shape, though the graph's (a scalar sum) does."""
    model = graph_model(
        [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("ReduceSum", ["r"], ["y"], name="sum", keepdims=0)],
        [tensor("x", ["batch", 8]), tensor("shape", [2], TensorProto.INT64)],
        [tensor("y", [])])
    onnx.save_model(model, out)


def dynamic_output(out):
    """The same Reshape as the graph's output."""
    model = graph_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")],
        [tensor("x", ["batch", 8]), tensor("shape", [2], TensorProto.INT64)],
        [tensor("y", [None, None])])
    onnx.save_model(model, out)


def no_output_shape(out):
    """A graph output without a shape (ONNX's checker requires one)."""
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor("x", [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save_model(model, out)


def no_input_shape(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [tensor("y", [2, 4])])
    onnx.save_model(model, out)


# --- Exporter-renamed parameters ------------------------------------------------

def torch_folded(out):
    """A bias-free Linear on 3-D input exported by torch with constant
    folding in eval mode: the folded transposed weight becomes an
    `onnx::MatMul_N` initializer, and no fsdp_mlir metadata is written."""
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(32, 16, bias=False)

        def forward(self, x):
            return self.proj(x)

    torch.manual_seed(0)
    torch.onnx.export(Model().eval(), (torch.randn(2, 4, 32),), out,
                      input_names=["x"], output_names=["y"], opset_version=17,
                      do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    names = [t.name for t in onnx.load(out).graph.initializer]
    assert any(n.startswith("onnx::MatMul_") for n in names), names


def renamed_by_hand(out):
    """The same without torch: a weight named `onnx::MatMul_7` (2 KiB)."""
    model = graph_model(
        [helper.make_node("MatMul", ["x", "onnx::MatMul_7"], ["y"], name="fc")],
        [tensor("x", ["batch", 32])], [tensor("y", ["batch", 16])],
        [weight("onnx::MatMul_7", [32, 16])])
    onnx.save_model(model, out)


# --- fsdp_mlir metadata -------------------------------------------------------

def metadata(out, kind):
    model = linear()
    value = {
        "not-json": '{"version": 1, "params": [',
        "version-2": json.dumps({"version": 2, "params": [], "buffers": []}),
        "not-object": "[1, 2, 3]",
        "no-params": json.dumps({"version": 1, "buffers": []}),
        "no-fqn": json.dumps({"version": 1, "buffers": [],
                              "params": [{"initializer": "fc.weight"}]}),
    }[kind]
    helper.set_model_props(model, {"fsdp_mlir": value})
    onnx.save_model(model, out)


CASES = {name.replace("_", "-"): fn for name, fn in list(globals().items())
         if callable(fn) and not name.startswith("_") and fn.__module__ ==
         __name__ and name not in ("graph_model", "tensor", "weight", "linear")}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in CASES:
        sys.exit("usage: make_bad_model.py {%s} OUT [ARGS...]"
                 % ",".join(sorted(CASES)))
    CASES[sys.argv[1]](*sys.argv[2:])
