"""Writes a model with two Ranges over graph inputs, their lengths known
only from the declared outputs: float32 start 1, limit 3.4, delta 0.5 gives
[5]; int32 start 10, limit 6, delta -3 gives [2].    make_range.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

scalars = [helper.make_tensor_value_info(name, kind, [])
           for kind in (TensorProto.FLOAT, TensorProto.INT32)
           for name in (f"start_{kind}", f"limit_{kind}", f"delta_{kind}")]
nodes = [helper.make_node("Range", [f"start_{kind}", f"limit_{kind}", f"delta_{kind}"],
                          [name], name=f"range_{name}")
         for kind, name in ((TensorProto.FLOAT, "f"), (TensorProto.INT32, "i"))]
graph = helper.make_graph(
    nodes, "range", scalars,
    [helper.make_tensor_value_info("f", TensorProto.FLOAT, [5]),
     helper.make_tensor_value_info("i", TensorProto.INT32, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
