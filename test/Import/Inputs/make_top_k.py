"""Writes a model with a TopK: x [batch, 5] float, K 2 (a constant, or with
`dynamic-k` a graph input), axis -1, largest. y = values, i = indices.
    make_top_k.py OUT.onnx [dynamic-k]"""
import sys

import onnx
from onnx import TensorProto, helper

dynamic = len(sys.argv) > 2 and sys.argv[2] == "dynamic-k"
nodes = [helper.make_node("TopK", ["x", "k"], ["y", "i"], name="top_k", axis=-1)]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])]
if dynamic:
    inputs.append(helper.make_tensor_value_info("k", TensorProto.INT64, [1]))
else:
    nodes.insert(0, helper.make_node(
        "Constant", [], ["k"], name="k_const",
        value=helper.make_tensor("k", TensorProto.INT64, [1], [2])))
graph = helper.make_graph(
    nodes, "top_k", inputs,
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2]),
     helper.make_tensor_value_info("i", TensorProto.INT64, ["batch", 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
