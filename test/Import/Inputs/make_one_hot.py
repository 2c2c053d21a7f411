"""Writes a model with a OneHot: int32 indices [batch, 3], depth 5 (a
constant, or with `dynamic-depth` a graph input), values [2, 7] and
axis 1, negated, so y is [batch, 5, 3]. With `huge-depth` the constant
depth is 2^40, which the compiler must refuse rather than build its class
ids.    make_one_hot.py OUT.onnx [dynamic-depth|huge-depth]"""
import sys

import onnx
from onnx import TensorProto, helper

mode = sys.argv[2] if len(sys.argv) > 2 else ""
dynamic = mode == "dynamic-depth"
depth = 1 << 40 if mode == "huge-depth" else 5
nodes = [
    helper.make_node("Constant", [], ["values"], name="values_const",
                     value=helper.make_tensor("values", TensorProto.FLOAT, [2], [2.0, 7.0])),
    helper.make_node("OneHot", ["ids", "depth", "values"], ["hot"], name="one_hot", axis=1),
    # A value between: shape inference alone leaves its depth unknown.
    helper.make_node("Neg", ["hot"], ["y"], name="neg"),
]
inputs = [helper.make_tensor_value_info("ids", TensorProto.INT32, ["batch", 3])]
if dynamic:
    inputs.append(helper.make_tensor_value_info("depth", TensorProto.INT64, [1]))
else:
    nodes.insert(0, helper.make_node(
        "Constant", [], ["depth"], name="depth_const",
        value=helper.make_tensor("depth", TensorProto.INT64, [], [depth])))
graph = helper.make_graph(nodes, "one_hot", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         ["batch", "classes" if depth != 5 else 5, 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
