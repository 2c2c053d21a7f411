"""Writes a model with DFTs (opset 17): a real x [2, 6, 3, 1] along axis 1
of length 8 (zero-padded), onesided (5 bins): [2, 5, 3, 2]; a complex
z [2, 4, 2] inverse along axis 1 cut to dft_length 3: [2, 3, 2]. With
`run-time-length` the second's dft_length is a graph input; with
`bad-axis` the second has no dft_length and axis 2 (the real/imaginary
one), giving [2, 4, 2]; with
`three-channels` x is [2, 6, 3, 3]; with `huge-length` the first's length
is 2^20 (a matrix the compiler refuses to build).
    make_dft.py OUT.onnx [run-time-length | bad-axis | three-channels | huge-length]"""
import sys

import onnx
from onnx import TensorProto, helper

variant = sys.argv[2] if len(sys.argv) > 2 else ""
run_time = variant == "run-time-length"
nodes = [
    helper.make_node("Constant", [], ["eight"], name="eight_const",
                     value=helper.make_tensor("eight", TensorProto.INT64, [],
                                              [1 << 20 if variant == "huge-length" else 8])),
    helper.make_node("DFT", ["x", "eight"], ["a"], name="real_dft", axis=1, onesided=1),
    helper.make_node("DFT", ["z"] if variant == "bad-axis" else ["z", "three"], ["b"],
                     name="inverse_dft", axis=2 if variant == "bad-axis" else 1, inverse=1),
]
channels = 3 if variant == "three-channels" else 1
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 3, channels]),
          helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4, 2])]
if run_time:
    inputs.append(helper.make_tensor_value_info("three", TensorProto.INT64, []))
else:
    nodes.insert(0, helper.make_node(
        "Constant", [], ["three"], name="three_const",
        value=helper.make_tensor("three", TensorProto.INT64, [], [3])))
graph = helper.make_graph(
    nodes, "dft", inputs,
    [helper.make_tensor_value_info("a", TensorProto.FLOAT,
                                   [2, "bins" if variant == "huge-length" else 5, 3, 2]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT,
                                   [2, 4 if variant == "bad-axis" else 3, 2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
