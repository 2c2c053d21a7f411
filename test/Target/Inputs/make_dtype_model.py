"""One-node ONNX models whose dtypes a runtime kernel may refuse.

usage: make_dtype_model.py KIND OUT.onnx
  abs-uint8   the_abs = Abs(uint8)
  relu-int32  the_relu = Relu(int32)
  sqrt-f64    the_sqrt = Sqrt(double)
  cast-f16    the_cast = Cast(float -> float16)
  add-int64   the_add = Add(int64, int64)
"""
import sys

import onnx
from onnx import TensorProto, helper

KINDS = {
    "abs-uint8": ("Abs", [TensorProto.UINT8], TensorProto.UINT8, {}),
    "relu-int32": ("Relu", [TensorProto.INT32], TensorProto.INT32, {}),
    "sqrt-f64": ("Sqrt", [TensorProto.DOUBLE], TensorProto.DOUBLE, {}),
    "add-int64": ("Add", [TensorProto.INT64, TensorProto.INT64], TensorProto.INT64, {}),
    "cast-f16": ("Cast", [TensorProto.FLOAT], TensorProto.FLOAT16,
                 {"to": TensorProto.FLOAT16}),
}


def main():
    kind, out = sys.argv[1], sys.argv[2]
    op, inputs, output, attrs = KINDS[kind]
    names = ["a", "b"][: len(inputs)]
    node = helper.make_node(op, names, ["y"], name="the_" + op.lower(), **attrs)
    graph = helper.make_graph(
        [node], kind,
        [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in zip(names, inputs)],
        [helper.make_tensor_value_info("y", output, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
