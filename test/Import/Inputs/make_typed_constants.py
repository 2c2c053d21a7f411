"""Writes a model whose Constants keep their values in typed fields, as
onnx.helper.make_tensor makes them (16-bit floats' bit patterns in
int32_data, floats in float_data, int64 in int64_data), with no producer
version.    make_typed_constants.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

nodes, inputs, outputs = [], [], []
for dtype, name in [(TensorProto.FLOAT16, "f16"), (TensorProto.BFLOAT16, "bf16"),
                    (TensorProto.FLOAT, "f32")]:
    nodes.append(helper.make_node("Constant", [], [f"{name}_c"], name=f"{name}_const",
                                  value=helper.make_tensor(f"{name}_v", dtype, [2], [0.5, -3.0])))
    nodes.append(helper.make_node("Add", [f"{name}_x", f"{name}_c"], [f"{name}_y"], name=f"{name}_add"))
    inputs.append(helper.make_tensor_value_info(f"{name}_x", dtype, [2]))
    outputs.append(helper.make_tensor_value_info(f"{name}_y", dtype, [2]))
nodes.append(helper.make_node("Constant", [], ["shape"], name="shape_const",
                              value=helper.make_tensor("s", TensorProto.INT64, [2], [1, 2])))
nodes.append(helper.make_node("Reshape", ["f32_y", "shape"], ["r"], name="reshape"))
outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 2]))
graph = helper.make_graph(nodes, "typed", inputs, outputs)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
