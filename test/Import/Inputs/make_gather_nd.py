"""Writes a model with two GatherNDs of constant indices, as torch 2.x's
exporter writes for `x[-2]`: x [3, batch, 4] at [[-2]] gives [1, batch, 4];
y [3, 2, batch] at [[0, 1], [2, -1]] (pairs over the first two axes) gives
[2, batch]. With `out-of-range` the second pair is [3, 0]. A third takes
rows of w [4, 5] at experts [batch, 2, 1], a graph input (a
Mixture-of-Experts layer's w[expert_ids]), giving [batch, 2, 5].
    make_gather_nd.py OUT.onnx [out-of-range]"""
import sys

import onnx
from onnx import TensorProto, helper

bad = len(sys.argv) > 2 and sys.argv[2] == "out-of-range"
pairs = [0, 1, 3, 0] if bad else [0, 1, 2, -1]
nodes = [
    helper.make_node("Constant", [], ["row"], name="row_const",
                     value=helper.make_tensor("row", TensorProto.INT64, [1, 1], [-2])),
    helper.make_node("Constant", [], ["pairs"], name="pairs_const",
                     value=helper.make_tensor("pairs", TensorProto.INT64, [2, 2], pairs)),
    helper.make_node("GatherND", ["x", "row"], ["a"], name="take_row"),
    helper.make_node("GatherND", ["y", "pairs"], ["b"], name="take_pairs"),
    helper.make_node("GatherND", ["w", "experts"], ["c"], name="take_experts"),
]
graph = helper.make_graph(
    nodes, "gather_nd",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, "batch", 4]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2, "batch"]),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 5]),
     helper.make_tensor_value_info("experts", TensorProto.INT64, ["batch", 2, 1])],
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, "batch", 4]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, "batch"]),
     helper.make_tensor_value_info("c", TensorProto.FLOAT, ["batch", 2, 5])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
