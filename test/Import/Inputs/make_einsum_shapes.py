"""Writes a model with Einsums inside it, whose result shapes ONNX 1.12's
shape inference leaves unknown (rank only): q, k, v [batch, 4, 3];
s = Einsum "b i d, b j d -> b i j" (spaces, as torch passes the user's
string), p = Softmax(s), y = Einsum "bij,bjd->bid" (p, v) and z = Einsum
"bij,kjd" (p, v), an implicit output: the letters used once in ASCII
order, "bdik", [batch, 3, 4, batch], declared with unknown dimensions.
    make_einsum_shapes.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

nodes = [
    helper.make_node("Einsum", ["q", "k"], ["s"], name="scores",
                     equation="b i d, b j d -> b i j"),
    helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
    helper.make_node("Einsum", ["p", "v"], ["y"], name="mix", equation="bij,bjd->bid"),
    helper.make_node("Einsum", ["p", "v"], ["z"], name="implicit", equation="bij,kjd"),
]
inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4, 3])
          for n in ("q", "k", "v")]
graph = helper.make_graph(
    nodes, "einsum_shapes", inputs,
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 3]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
for _ in range(4):
    graph.output[1].type.tensor_type.shape.dim.add()
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
