"""Writes a model with an LRN on x [batch, 3, 4, 5] (size 2, alpha 2e-3,
beta 0.5, bias 2) then a MeanVarianceNormalization of the result over the
default axes [0, 2, 3], and one over axes [1] of a [batch, 3, 20] view.
With `bad-size`, the LRN has size 0.
    make_lrn_mvn.py OUT.onnx [bad-size]"""
import sys

import onnx
from onnx import TensorProto, helper

bad = len(sys.argv) > 2 and sys.argv[2] == "bad-size"
graph = helper.make_graph(
    [helper.make_node("LRN", ["x"], ["h"], name="lrn", size=0 if bad else 2,
                      alpha=2e-3, beta=0.5, bias=2.0),
     helper.make_node("MeanVarianceNormalization", ["h"], ["y"], name="mvn"),
     helper.make_node("Constant", [], ["shape"], name="shape_const",
                      value=helper.make_tensor("shape", TensorProto.INT64, [3],
                                               [0, 3, 20])),
     helper.make_node("Reshape", ["y", "shape"], ["v"], name="view"),
     helper.make_node("MeanVarianceNormalization", ["v"], ["z"], name="mvn_channels",
                      axes=[1])],
    "lrn_mvn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4, 5])],
    [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3, 20])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
