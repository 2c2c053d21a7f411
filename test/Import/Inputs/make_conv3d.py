"""Writes a model with a 3-D Conv: x [batch, 2, 5, 6, 6], W [4, 2, 3, 3, 3]
and B [4] (initializers), strides [2, 1, 1], pads 1 everywhere, dilations
[1, 2, 1]: y [batch, 4, 3, 4, 6]. With `negative-dilation`, dilations
[-1, 2, 1] (which ONNX's checker accepts) and y's dimensions unknown.
    make_conv3d.py OUT.onnx [negative-dilation]"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

negative = len(sys.argv) > 2 and sys.argv[2] == "negative-dilation"
rng = np.random.default_rng(0)
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv3d", strides=[2, 1, 1],
                      pads=[1, 1, 1, 1, 1, 1], dilations=[-1 if negative else 1, 2, 1])],
    "conv3d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 5, 6, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                   [None] * 5 if negative else ["batch", 4, 3, 4, 6])],
    [numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3, 3)).astype(np.float32), "w"),
     numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
