"""Writes a model with Einsums inside it, whose result shapes ONNX 1.12's
shape inference leaves unknown (rank only): q, k, v [batch, 4, 3];
s = Einsum "b i d, b j d -> b i j" (spaces, as torch passes the user's
string), p = Softmax(s), y = Einsum "bij,bjd->bid" (p, v) and z = Einsum
"bij,kjd" (p, v), an implicit output: the letters used once in ASCII
order, "bdik", [batch, 3, 4, batch], declared with unknown dimensions; w = Einsum
"...ij,...jd" (p, c), c a [1, 4, 5] initializer: an ellipsis (in front of
the implicit output "...di") whose size-1 dim broadcasts, [batch, 5, 4];
d = Einsum "bii->bi" (s) and t = Einsum "jkj,bij->bi" (e, s), e a [4, 2, 4] initializer: diagonals,
taken by Reshape and Slice (and a Transpose when the repeated dims are not
last).
    make_einsum_shapes.py OUT.onnx"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

nodes = [
    helper.make_node("Einsum", ["q", "k"], ["s"], name="scores",
                     equation="b i d, b j d -> b i j"),
    helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
    helper.make_node("Einsum", ["p", "v"], ["y"], name="mix", equation="bij,bjd->bid"),
    helper.make_node("Einsum", ["p", "v"], ["z"], name="implicit", equation="bij,kjd"),
    helper.make_node("Einsum", ["p", "c"], ["w"], name="ellipsis", equation="...ij,...jd"),
    helper.make_node("Einsum", ["s"], ["d"], name="diagonal", equation="bii->bi"),
    helper.make_node("Einsum", ["e", "s"], ["t"], name="product", equation="jkj,bij->bi"),
]
inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4, 3])
          for n in ("q", "k", "v")]
graph = helper.make_graph(
    nodes, "einsum_shapes", inputs,
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 3]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("d", TensorProto.FLOAT, ["batch", 4]),
     helper.make_tensor_value_info("t", TensorProto.FLOAT, ["batch", 4])],
    [numpy_helper.from_array(np.full((1, 4, 5), 0.5, np.float32), "c"),
     numpy_helper.from_array(np.full((4, 2, 4), 0.5, np.float32), "e")])
for output, rank in ((graph.output[1], 4), (graph.output[2], 3)):
    for _ in range(rank):
        output.type.tensor_type.shape.dim.add()
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
