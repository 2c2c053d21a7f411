"""Writes a model with two GatherNDs of indices known only at run time:
pairs [batch, 2] over the first two axes of x [3, 4, 5] give [batch, 5];
with batch_dims 1, single indices [2, batch, 1] into y [2, 3, 4] give
[2, batch, 4].    make_gather_nd_run_time.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

nodes = [
    helper.make_node("GatherND", ["x", "pairs"], ["a"], name="take_pairs"),
    helper.make_node("GatherND", ["y", "rows"], ["b"], name="take_rows", batch_dims=1),
]
graph = helper.make_graph(
    nodes, "gather_nd_run_time",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
     helper.make_tensor_value_info("pairs", TensorProto.INT64, ["batch", 2]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4]),
     helper.make_tensor_value_info("rows", TensorProto.INT64, [2, "batch", 1])],
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 5]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, "batch", 4])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
