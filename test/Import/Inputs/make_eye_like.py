"""Writes a model with two EyeLikes of x [2, batch]: one of x's type on the
diagonal above the main one (k = 1), added to x, and one of int32 below it
(k = -1, dtype int32). With `rank-3` x is [2, batch, 2] instead (ONNX
allows only 2-D).    make_eye_like.py OUT.onnx [rank-3]"""
import sys

import onnx
from onnx import TensorProto, helper

rank3 = len(sys.argv) > 2 and sys.argv[2] == "rank-3"
shape = [2, "batch", 2] if rank3 else [2, "batch"]
nodes = [
    helper.make_node("EyeLike", ["x"], ["eye"], name="eye_above", k=1),
    helper.make_node("Add", ["x", "eye"], ["y"], name="add"),
    helper.make_node("EyeLike", ["x"], ["z"], name="eye_below", k=-1,
                     dtype=TensorProto.INT32),
]
graph = helper.make_graph(
    nodes, "eye_like",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape),
     helper.make_tensor_value_info("z", TensorProto.INT32, shape)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
if not rank3:
    onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
