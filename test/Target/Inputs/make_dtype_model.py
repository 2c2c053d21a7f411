"""One-node ONNX models whose dtypes a runtime kernel may refuse.

usage: make_dtype_model.py KIND OUT.onnx
  add-uint8   the_add = Add(uint8, uint8)
  add-int32   the_add = Add(int32, int32)
  pow-mixed   the_pow = Pow(float, int64)
  cast-f16    the_cast = Cast(float -> float16)
  add-int64   the_add = Add(int64, int64)
"""
import sys

import onnx
from onnx import TensorProto, helper

KINDS = {
    "add-uint8": ("Add", [TensorProto.UINT8, TensorProto.UINT8], TensorProto.UINT8, {}),
    "add-int32": ("Add", [TensorProto.INT32, TensorProto.INT32], TensorProto.INT32, {}),
    "add-int64": ("Add", [TensorProto.INT64, TensorProto.INT64], TensorProto.INT64, {}),
    "pow-mixed": ("Pow", [TensorProto.FLOAT, TensorProto.INT64], TensorProto.FLOAT, {}),
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
