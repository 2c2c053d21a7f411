"""Writes a model whose shape arithmetic goes through Mod, as torch 2.x's
TorchScript exporter writes nn.MultiheadAttention's shape checks: x is
[batch, 7]; dim 1 (7) mod 3 (Python's sign: 1), -7 mod 3 (2) and -7 fmod 3
(C's sign: -1) are added and scale x.    make_mod_shapes.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper


def const(name, values):
    return helper.make_node("Constant", [], [name], name=f"{name}_const",
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


nodes = [
    helper.make_node("Shape", ["x"], ["shape"], name="shape"),
    const("one", [1]), const("three", [3]), const("minus_seven", [-7]),
    helper.make_node("Gather", ["shape", "one"], ["width"], name="width"),
    helper.make_node("Mod", ["width", "three"], ["a"], name="mod_width"),
    helper.make_node("Mod", ["minus_seven", "three"], ["b"], name="mod_negative"),
    helper.make_node("Mod", ["minus_seven", "three"], ["c"], name="fmod_negative", fmod=1),
    helper.make_node("Add", ["a", "b"], ["ab"], name="add_ab"),
    helper.make_node("Add", ["ab", "c"], ["abc"], name="add_abc"),
    helper.make_node("Cast", ["abc"], ["scale"], name="cast", to=TensorProto.FLOAT),
    helper.make_node("Mul", ["x", "scale"], ["y"], name="scale_x"),
]
graph = helper.make_graph(nodes, "mod_shapes",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 7])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
