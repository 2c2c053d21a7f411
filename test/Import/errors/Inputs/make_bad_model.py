"""Writes one deliberately bad ONNX model (or data file) for the import
error tests.

    make_bad_model.py CASE OUT [ARGS...]

Every model is built with the onnx Python API at test time; nothing binary
is committed. CASE is one of the functions below (dashes for underscores).
"""

import json
import random
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


def drop_external(out, source, key):
    """SOURCE with the external_data entry KEY removed from its first
    external initializer."""
    model = onnx.load(source, load_external_data=False)
    for t in model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            kept = [e for e in t.external_data if e.key != key]
            del t.external_data[:]
            t.external_data.extend(kept)
            break
    onnx.save_model(model, out)


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


def duplicate_initializer(out):
    model = linear()
    model.graph.initializer.append(weight("fc.weight", [8, 4]))
    onnx.save_model(model, out)


def duplicate_output(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu"),
         helper.make_node("Neg", ["x"], ["y"], name="neg")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
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
    model = graph_model(
        [helper.make_node(op, ["x"], ["y"], name="the_node")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    onnx.save_model(model, out)


# --- Tensors the importer cannot take ----------------------------------------

def typed_param(out):
    """A parameter stored in float_data instead of raw_data."""
    model = linear()
    model.graph.initializer[0].CopyFrom(
        helper.make_tensor("fc.weight", TensorProto.FLOAT, [8, 4], [1.0] * 32))
    onnx.save_model(model, out)


def short_param(out):
    """A parameter whose raw_data holds fewer bytes than its shape needs."""
    model = linear()
    w = model.graph.initializer[0]
    w.raw_data = w.raw_data[:20]
    onnx.save_model(model, out)


def constant_count(out):
    """A small constant whose int64_data has 3 values for shape [4]."""
    c = helper.make_tensor("onnx::Add_3", TensorProto.INT64, [4], [1, 2, 3, 4])
    del c.int64_data[3]
    model = graph_model(
        [helper.make_node("Add", ["x", "onnx::Add_3"], ["y"], name="add")],
        [tensor("x", [2, 4], TensorProto.INT64)],
        [tensor("y", [2, 4], TensorProto.INT64)], [c])
    onnx.save_model(model, out)


def string_input(out):
    model = graph_model(
        [helper.make_node("Identity", ["x"], ["y"], name="identity")],
        [tensor("x", [2], TensorProto.STRING)],
        [tensor("y", [2], TensorProto.STRING)])
    onnx.save_model(model, out)


def complex_param(out):
    w = numpy_helper.from_array(np.ones((8, 4), np.complex64), "fc.weight")
    model = graph_model(
        [helper.make_node("Identity", ["fc.weight"], ["y"], name="identity")],
        [tensor("x", [2])], [tensor("y", [8, 4], TensorProto.COMPLEX64)], [w])
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


def no_outputs(out):
    """A graph without outputs (ONNX's checker accepts it): nothing to compute."""
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor("x", [2, 4])], [])
    onnx.save_model(model, out)


def no_input_shape(out):
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [tensor("y", [2, 4])])
    onnx.save_model(model, out)


def negative_dim(out):
    """A graph input whose fixed dimension is negative."""
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor("x", [-5, 4])], [tensor("y", [-5, 4])])
    onnx.save_model(model, out)


def _constant_of_shape(out, shape):
    shape_node = helper.make_node(
        "Constant", [], ["shape"], name="shape",
        value=numpy_helper.from_array(np.array(shape, np.int64), "shape"))
    model = graph_model(
        [shape_node,
         helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                          name="zeros"),
         helper.make_node("ReduceSum", ["zeros"], ["y"], name="sum",
                          keepdims=0)],
        [tensor("x", [2, 4])], [tensor("y", [])])
    onnx.save_model(model, out)


def huge_constant_of_shape(out):
    """ConstantOfShape of a valid but huge static shape (2^40 elements)."""
    _constant_of_shape(out, [1 << 20, 1 << 20])


def negative_constant_of_shape(out):
    """ConstantOfShape of a shape with a negative dimension."""
    _constant_of_shape(out, [-3, 2])


def string_cast(out):
    """A constant cast to STRING, returned: an unsupported element type."""
    value = numpy_helper.from_array(np.array([8], np.int64), "eight")
    model = graph_model(
        [helper.make_node("Constant", [], ["eight"], name="eight", value=value),
         helper.make_node("Cast", ["eight"], ["s"], name="cast",
                          to=TensorProto.STRING),
         helper.make_node("Identity", ["s"], ["y"], name="identity")],
        [tensor("x", [2, 4])], [tensor("y", [1], TensorProto.STRING)])
    onnx.save_model(model, out)


def unproduced_output(out):
    """A graph output that no node produces."""
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["h"], name="relu")],
        [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    onnx.save_model(model, out)


# --- Exporter-renamed parameters ------------------------------------------------

def torch_folded(out, features="32"):
    """A bias-free Linear on 3-D input exported by torch with constant
    folding in eval mode: the folded transposed weight becomes an
    `onnx::MatMul_N` initializer, and no fsdp_mlir metadata is written.
    FEATURES sets the weight's size (FEATURES x FEATURES/2 floats)."""
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(n, n // 2, bias=False)

        def forward(self, x):
            return self.proj(x)

    n = int(features)
    torch.manual_seed(0)
    torch.onnx.export(Model().eval(), (torch.randn(2, 4, n),), out,
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


# --- found by review ----------------------------------------------------------

def slice_huge_step(out):
    """Slice with step INT64_MAX (ONNX 1.12's inference overflows on it)."""
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), n) for n, v in
             [("d", [10, 20, 30, 40]), ("s", [1]), ("e", [4]), ("a", [0]),
              ("st", [2**63 - 1])]]
    nodes = [helper.make_node("Slice", ["d", "s", "e", "a", "st"], ["r"], name="slice"),
             helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    onnx.save_model(graph_model(nodes, [tensor("x", [1], TensorProto.INT64)],
                                [tensor("y", [1], TensorProto.INT64)], inits), out)


# --- found by fuzz.onnx-importer -----------------------------------------------

def transpose_bad_perm(out):
    """Transpose with perm [1, 82, 2] (ONNX 1.12's inference indexes dims by it
    unchecked and crashes on some models)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["y"], name="/attn/Transpose",
                              perm=[1, 82, 2])]
    onnx.save_model(graph_model(nodes, [tensor("x", [2, 3, 4])],
                                [tensor("y", [3, 2, 4])]), out)


def short_bias(out):
    """An initializer [65] floats long holding 48 (ONNX 1.12's data
    propagation reads past its raw_data and crashes)."""
    b = onnx.TensorProto(name="attn.in_proj_bias", data_type=TensorProto.FLOAT, dims=[65])
    b.raw_data = np.ones(48, dtype=np.float32).tobytes()
    nodes = [helper.make_node("Add", ["attn.in_proj_bias", "x"], ["y"], name="/attn/Add")]
    onnx.save_model(graph_model(nodes, [tensor("x", [65])], [tensor("y", [65])], [b]), out)


def short_constant(out):
    """A Constant node whose value has dims [3] and 4 bytes of raw_data."""
    t = onnx.TensorProto(data_type=TensorProto.INT64, dims=[3])
    t.raw_data = np.ones(1, dtype=np.int32).tobytes()
    nodes = [helper.make_node("Constant", [], ["c"], name="/shape/Constant", value=t),
             helper.make_node("Reshape", ["x", "c"], ["y"], name="/Reshape")]
    onnx.save_model(graph_model(nodes, [tensor("x", [2, 3])], [tensor("y", [6])]), out)


def gpt2_gather_wrong_dim(out, source):
    """The corpus GPT-2 (SOURCE) with one attention block's Gather of the
    sequence dimension reading dimension 0 instead: ONNX 1.12's shape
    inference crashes on the shapes that follow."""
    model = onnx.load(source, load_external_data=False)
    for node in model.graph.node:
        if node.name == "/model/blocks.0/attn/Constant_1":
            node.attribute[0].t.raw_data = np.zeros(1, np.int64).tobytes()
            break
    else:
        raise SystemExit("no /model/blocks.0/attn/Constant_1 in " + source)
    onnx.save_model(model, out)


def negative_initializer_dims(out):
    """An initializer with dims [-2, -2] and 4 values (the checker accepts it)."""
    t = onnx.TensorProto(name="fc.weight", data_type=TensorProto.FLOAT, dims=[-2, -2])
    t.raw_data = np.ones(4, dtype=np.float32).tobytes()
    nodes = [helper.make_node("Shape", ["fc.weight"], ["s"], name="shape"),
             helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Mul", ["x", "sf"], ["y"], name="mul")]
    onnx.save_model(graph_model(nodes, [tensor("x", [2])], [tensor("y", [2])], [t]), out)


def overflowing_initializer_dims(out):
    """An initializer of shape [2^32, 2^32] (no data: counting overflows)."""
    t = onnx.TensorProto(name="onnx::c", data_type=TensorProto.INT64, dims=[2**32, 2**32])
    nodes = [helper.make_node("Identity", ["onnx::c"], ["y"], name="id")]
    onnx.save_model(graph_model(nodes, [tensor("x", [2], TensorProto.INT64)],
                                [tensor("y", ["a", "b"], TensorProto.INT64)], [t]), out)


def bool_cast_chain(out):
    """A bool constant cast to int64 then float, multiplied in: folds to 1, 0."""
    mask = numpy_helper.from_array(np.array([True, False]), "mask")
    nodes = [helper.make_node("Cast", ["mask"], ["mi"], to=TensorProto.INT64, name="cast"),
             helper.make_node("Cast", ["mi"], ["mf"], to=TensorProto.FLOAT, name="castf"),
             helper.make_node("Mul", ["x", "mf"], ["y"], name="mul")]
    onnx.save_model(graph_model(nodes, [tensor("x", [2])], [tensor("y", [2])], [mask]), out)


def shape_chain(out, layers="70"):
    """LAYERS dependent Shape -> Gather -> Div -> Unsqueeze -> Concat ->
    Reshape steps: folding needs one round per step."""
    nodes, inits = [], [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
                        numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
                        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
                        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus")]
    value = "x"
    for i in range(int(layers)):
        nodes += [helper.make_node("Shape", [value], [f"s{i}"], name=f"shape{i}"),
                  helper.make_node("Gather", [f"s{i}", "zero"], [f"g{i}"], name=f"gather{i}"),
                  helper.make_node("Div", [f"g{i}", "one"], [f"d{i}"], name=f"div{i}"),
                  helper.make_node("Unsqueeze", [f"d{i}", "axes"], [f"u{i}"], name=f"unsq{i}"),
                  helper.make_node("Concat", [f"u{i}", "minus"], [f"c{i}"], axis=0, name=f"cat{i}"),
                  helper.make_node("Reshape", [value, f"c{i}"], [f"r{i}"], name=f"reshape{i}")]
        value = f"r{i}"
    nodes.append(helper.make_node("Identity", [value], ["y"], name="out"))
    onnx.save_model(graph_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])],
                                inits), out)


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
        # llvm::json::parse recursed once per '[' and overflowed the stack.
        "deep": '{"version": 1, "params": ' + "[" * 40000 + "]" * 40000 +
                ', "buffers": []}',
        # Brackets inside strings are not nesting.
        "brackets-in-strings": json.dumps({"version": 1, "buffers": [],
                                           "params": [{"fqn": "[" * 1000}]}),
    }[kind]
    helper.set_model_props(model, {"fsdp_mlir": value})
    onnx.save_model(model, out)


def recurrent(out, op, attribute):
    """One LSTM/GRU/RNN node named `the_<op>` over x [3, 2, 4] (hidden
    size 2, weights as parameters) with one extra attribute: `activations`
    (Relu first: not the defaults), `defaults` (the default activations
    spelled out), `clip`, or `none`."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    extra = {"activations": {"activations": ["Relu"] + ["Tanh"] * (min(gates, 3) - 1)},
             "defaults": {"activations": {"LSTM": ["Sigmoid", "Tanh", "Tanh"],
                                          "GRU": ["Sigmoid", "Tanh"],
                                          "RNN": ["Tanh"]}[op]},
             "clip": {"clip": 3.0}, "none": {}}[attribute]
    model = graph_model(
        [helper.make_node(op, ["x", "w", "r"], ["y"], name=f"the_{op.lower()}",
                          hidden_size=2, **extra)],
        [tensor("x", [3, 2, 4])], [tensor("y", [3, 1, 2, 2])],
        [weight("w", [1, 2 * gates, 4]), weight("r", [1, 2 * gates, 2])])
    onnx.save_model(model, out)


def plain(out):
    """A good model (y = x @ W, x [batch, 8]) to give hostile options."""
    onnx.save_model(linear(), out)


CASES = {name.replace("_", "-"): fn for name, fn in list(globals().items())
         if callable(fn) and not name.startswith("_") and fn.__module__ ==
         __name__ and name not in ("graph_model", "tensor", "weight", "linear")}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in CASES:
        sys.exit("usage: make_bad_model.py {%s} OUT [ARGS...]"
                 % ",".join(sorted(CASES)))
    CASES[sys.argv[1]](*sys.argv[2:])
