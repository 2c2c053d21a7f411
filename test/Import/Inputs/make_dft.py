"""Writes a model with DFTs (opset 17): a real x [2, 6, 3, 1] along axis 1
of length 8 (zero-padded), onesided (5 bins): [2, 5, 3, 2]; a complex
z [2, 4, 2] inverse along axis 1 cut to dft_length 3: [2, 3, 2]. With
`run-time-length` the second's dft_length is a graph input.
    make_dft.py OUT.onnx [run-time-length]"""
import sys

import onnx
from onnx import TensorProto, helper

run_time = len(sys.argv) > 2 and sys.argv[2] == "run-time-length"
nodes = [
    helper.make_node("Constant", [], ["eight"], name="eight_const",
                     value=helper.make_tensor("eight", TensorProto.INT64, [], [8])),
    helper.make_node("DFT", ["x", "eight"], ["a"], name="real_dft", axis=1, onesided=1),
    helper.make_node("DFT", ["z", "three"], ["b"], name="inverse_dft", axis=1, inverse=1),
]
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 3, 1]),
          helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4, 2])]
if run_time:
    inputs.append(helper.make_tensor_value_info("three", TensorProto.INT64, []))
else:
    nodes.insert(0, helper.make_node(
        "Constant", [], ["three"], name="three_const",
        value=helper.make_tensor("three", TensorProto.INT64, [], [3])))
graph = helper.make_graph(
    nodes, "dft", inputs,
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 5, 3, 2]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3, 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
