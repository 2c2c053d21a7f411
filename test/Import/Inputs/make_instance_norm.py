"""Writes a model with two InstanceNormalizations on x [batch, 3, 4, 5]:
`affine` with initializers s and b (parameters, as torch's
InstanceNorm2d(affine=True) exports) and epsilon 1e-3, then `plain` with
constant all-ones scale and all-zeros B (as torch's GroupNorm exports).
With `bad-scale`, s has 4 elements for the 3 channels.
    make_instance_norm.py OUT.onnx [bad-scale]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

channels = 4 if len(sys.argv) > 2 and sys.argv[2] == "bad-scale" else 3
initializers = [
    numpy_helper.from_array(np.array([0.5, 2.0, -1.0, 3.0][:channels], np.float32), "s"),
    numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32), "b"),
]
nodes = [
    helper.make_node("InstanceNormalization", ["x", "s", "b"], ["h"], name="affine",
                     epsilon=1e-3),
    helper.make_node("Constant", [], ["ones"], name="ones_const",
                     value=helper.make_tensor("ones", TensorProto.FLOAT, [3], [1.0] * 3)),
    helper.make_node("Constant", [], ["zeros"], name="zeros_const",
                     value=helper.make_tensor("zeros", TensorProto.FLOAT, [3], [0.0] * 3)),
    helper.make_node("InstanceNormalization", ["h", "ones", "zeros"], ["y"], name="plain"),
]
graph = helper.make_graph(
    nodes, "instance_norm",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 4, 5])],
    initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
