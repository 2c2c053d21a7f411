"""Writes a model that builds an index table in its forward from constants
and shapes, as Hugging Face's BEiT (relative positions: index_put as
ScatterND, then a sum), Whisper (positions tiled over the batch), DINOv2
(a square root as Pow) and wav2vec2 (a boolean index: NonZero) do, and
reshapes by a parameter's Shape, as torch 1.13 exports a resize of a
position table.    make_index_tables.py OUT.onnx [dynamic-nonzero]

x is [batch, 4]; the table is
  base = [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], base[0, 1] = [10, 20]
  (ScatterND), summed over the last axis ([[1, 30], [9, 13]]), flattened
  to [1, 4], tiled to [batch, 4] and times sqrt(4) = 2 (Pow, Cast):
  [[2, 60, 18, 26]] per row;
out = (x reshaped to [-1, Shape(w)[0]] + table) @ w, and
picked = x[:, nonzero([0, 1, 0, 1])], x's columns 1 and 3. With
dynamic-nonzero the mask is x's first row > 0: NonZero of data, refused."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, array):
    return helper.make_node("Constant", [], [name], name=f"{name}_const",
                            value=numpy_helper.from_array(np.asarray(array), name))


dynamic = len(sys.argv) > 2 and sys.argv[2] == "dynamic-nonzero"
nodes = [
    const("base", np.arange(8, dtype=np.int64).reshape(2, 2, 2)),
    const("where", np.array([[0, 1]], dtype=np.int64)),
    const("updates", np.array([[10, 20]], dtype=np.int64)),
    helper.make_node("ScatterND", ["base", "where", "updates"], ["scattered"],
                     name="index_put"),
    const("last", np.array([2], dtype=np.int64)),
    helper.make_node("ReduceSum", ["scattered", "last"], ["summed"], name="sum",
                     keepdims=0),
    helper.make_node("Flatten", ["summed"], ["flat"], name="flatten", axis=0),
    helper.make_node("Shape", ["x"], ["x_shape"], name="x_shape", start=0, end=1),
    const("one", np.array([1], dtype=np.int64)),
    helper.make_node("Concat", ["x_shape", "one"], ["repeats"], name="repeats", axis=0),
    helper.make_node("Tile", ["flat", "repeats"], ["tiled"], name="tile"),
    const("four", np.array(4.0, dtype=np.float32)),
    const("half", np.array(0.5, dtype=np.float32)),
    helper.make_node("Pow", ["four", "half"], ["root"], name="sqrt_as_pow"),
    helper.make_node("Cast", ["root"], ["root_int"], name="root_int", to=TensorProto.INT64),
    helper.make_node("Mul", ["tiled", "root_int"], ["table"], name="scale"),
    helper.make_node("Cast", ["table"], ["table_f"], name="table_f", to=TensorProto.FLOAT),
    helper.make_node("Shape", ["w"], ["w_shape"], name="w_shape", start=0, end=1),
    const("minus_one", np.array([-1], dtype=np.int64)),
    helper.make_node("Concat", ["minus_one", "w_shape"], ["target"], name="target", axis=0),
    helper.make_node("Reshape", ["x", "target"], ["x2"], name="reshape_by_w"),
    helper.make_node("Add", ["x2", "table_f"], ["h"], name="add_table"),
    helper.make_node("MatMul", ["h", "w"], ["out"], name="project"),
]
if dynamic:
    nodes += [
        const("zero_i", np.array([0], dtype=np.int64)),
        helper.make_node("Gather", ["x", "zero_i"], ["row"], name="first_row", axis=0),
        const("zero_f", np.array(0.0, dtype=np.float32)),
        helper.make_node("Greater", ["row", "zero_f"], ["mask"], name="positive"),
    ]
else:
    nodes.append(const("mask", np.array([0, 1, 0, 1], dtype=np.int64)))
nodes += [
    helper.make_node("NonZero", ["mask"], ["where_nonzero"], name="boolean_index"),
    const("flat_shape", np.array([-1], dtype=np.int64)),
    helper.make_node("Reshape", ["where_nonzero", "flat_shape"], ["columns"],
                     name="columns"),
    helper.make_node("Gather", ["x", "columns"], ["picked"], name="pick", axis=1),
]
w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
graph = helper.make_graph(nodes, "index_tables",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3]),
                           helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["batch", 2])],
                          initializer=[w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
