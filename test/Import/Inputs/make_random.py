"""Writes a model with the random generators: x [batch, 4] times
RandomUniformLike(x) in [-1, 2) (seed 5), plus RandomUniform [1, 4] of
float64 cast to float, plus RandomNormalLike(x) (mean 1, scale 2), plus
RandomNormal [1, 4], plus Bernoulli(Sigmoid(x)) of float64 cast to float.
    make_random.py OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper

nodes = [
    helper.make_node("RandomUniformLike", ["x"], ["r"], name="rand_like",
                     low=-1.0, high=2.0, seed=5.0),
    helper.make_node("Mul", ["x", "r"], ["xr"], name="mul"),
    helper.make_node("RandomUniform", [], ["u64"], name="rand", shape=[1, 4],
                     dtype=TensorProto.DOUBLE),
    helper.make_node("Cast", ["u64"], ["u"], name="cast", to=TensorProto.FLOAT),
    helper.make_node("Add", ["xr", "u"], ["a"], name="add"),
    helper.make_node("RandomNormalLike", ["x"], ["n"], name="normal_like",
                     mean=1.0, scale=2.0),
    helper.make_node("Add", ["a", "n"], ["b"], name="add_normal"),
    helper.make_node("RandomNormal", [], ["m"], name="normal", shape=[1, 4]),
    helper.make_node("Add", ["b", "m"], ["c"], name="add_normal2"),
    helper.make_node("Sigmoid", ["x"], ["p"], name="sigmoid"),
    helper.make_node("Bernoulli", ["p"], ["coin64"], name="coin",
                     dtype=TensorProto.DOUBLE),
    helper.make_node("Cast", ["coin64"], ["coin"], name="cast_coin",
                     to=TensorProto.FLOAT),
    helper.make_node("Add", ["c", "coin"], ["y"], name="add_coin"),
]
graph = helper.make_graph(
    nodes, "random",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
