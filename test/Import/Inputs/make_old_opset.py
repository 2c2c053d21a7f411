"""Tiny models at opsets below 13, for the importer's version conversion.

  make_old_opset.py good DIR OPSET   model.onnx, x.npy and expected.npy in DIR
  make_old_opset.py bad FILE         a model whose conversion fails at a node
  make_old_opset.py batchnorm FILE   BatchNormalization at opset 9
  make_old_opset.py compare GOT WANT exits 1 unless the arrays are close

The good model is y = Unsqueeze(Softmax(Relu(x) @ fc.weight, axis=1),
axes=[1]) on x of shape [2, 3, 4]. Before opset 13 Softmax flattens its
input from `axis` on, so the converter must insert Flatten and Reshape
around it, and Unsqueeze's axes are an attribute it turns into an input. The
weight is larger than the importer's inline limit, so its bytes stay in the
file and must survive the conversion as a reference.
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def good(directory, opset):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4, 80)).astype(np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "fc.weight"], ["m"], name="fc"),
             helper.make_node("Softmax", ["m"], ["s"], name="softmax", axis=1),
             helper.make_node("Unsqueeze", ["s"], ["y"], name="unsqueeze",
                              axes=[1])]
    graph = helper.make_graph(
        nodes, "old", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                     [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 3, 80])],
        initializer=[numpy_helper.from_array(weight, "fc.weight")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 6
    onnx.checker.check_model(model)
    onnx.save_model(model, f"{directory}/model.onnx")

    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    m = np.maximum(x, 0) @ weight
    # Softmax before opset 13: over everything from axis 1 on, as one row.
    flat = m.reshape(2, -1).astype(np.float64)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    y = (e / e.sum(axis=1, keepdims=True)).reshape(2, 1, 3, 80)
    np.save(f"{directory}/x.npy", x)
    np.save(f"{directory}/expected.npy", y.astype(np.float32))


def bad(path):
    # Softmax 12 -> 13 needs its input's shape; this input has none.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Softmax", ["r"], ["y"], name="the_softmax", axis=1)],
        "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 6
    onnx.save_model(model, path)


def batchnorm(path):
    # Before opset 14 BatchNormalization lists five outputs; an inference
    # node uses the first.
    stats = [numpy_helper.from_array(np.full(3, v, np.float32), name)
             for name, v in [("bn.weight", 2.0), ("bn.bias", 0.5),
                             ("bn.running_mean", 0.1), ("bn.running_var", 4.0)]]
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization",
                          ["x", "bn.weight", "bn.bias", "bn.running_mean",
                           "bn.running_var"], ["y"], name="bn")],
        "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
        initializer=stats)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    onnx.save_model(model, path)


def compare(got, want):
    a, b = np.load(got), np.load(want)
    if a.shape != b.shape:
        sys.exit(f"shape {a.shape}, expected {b.shape}")
    worst = float(np.max(np.abs(a - b)))
    if not np.allclose(a, b, rtol=1e-4, atol=1e-6):
        sys.exit(f"max |diff| {worst:.3g} exceeds the tolerance")
    print(f"equal: shape {list(a.shape)}, max |diff| {worst:.3g}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "good":
        good(sys.argv[2], int(sys.argv[3]))
    elif mode == "bad":
        bad(sys.argv[2])
    elif mode == "batchnorm":
        batchnorm(sys.argv[2])
    else:
        compare(sys.argv[2], sys.argv[3])
