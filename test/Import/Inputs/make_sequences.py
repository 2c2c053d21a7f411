"""Writes models with ONNX sequences whose tensors and positions are known
at import. x is [batch, 6].

    make_sequences.py OUT.onnx [out-of-range | run-time-position]

default: seq = SequenceEmpty, Insert(x), Insert(Relu(x)) at 0 (a Constant),
  Erase (no position: the last), Insert(Neg(x)) (appended): [Relu x, Neg x];
  a = SequenceAt(seq, 6 - 7) with the position computed from x's shape
  (folded: -1, Neg x); n = SequenceLength(seq) (2); the pieces of
  SplitToSequence(x, split 4, axis 1) ([b, 4] and [b, 2]) read at 1 and
  concatenated with new_axis into [b, 2, 2]; outputs a + n, the stack;
out-of-range: SequenceAt(seq, 5) of a sequence of 2;
run-time-position: SequenceAt(seq, p) with p a graph input."""
import sys

import onnx
from onnx import TensorProto, helper


def const(name, values, scalar=False):
    dims = [] if scalar else [len(values)]
    return helper.make_node("Constant", [], [name], name=f"{name}_const",
                            value=helper.make_tensor(name, TensorProto.INT64, dims, values))


mode = sys.argv[2] if len(sys.argv) > 2 else ""
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])
inputs = [x]
nodes = [
    helper.make_node("Relu", ["x"], ["relu"], name="relu"),
    helper.make_node("Neg", ["x"], ["neg"], name="neg"),
    helper.make_node("SequenceEmpty", [], ["s0"], name="empty", dtype=TensorProto.FLOAT),
    helper.make_node("SequenceInsert", ["s0", "x"], ["s1"], name="insert_x"),
    const("zero", [0], scalar=True),
    helper.make_node("SequenceInsert", ["s1", "relu", "zero"], ["s2"], name="insert_relu"),
    helper.make_node("SequenceErase", ["s2"], ["s3"], name="erase_last"),
    helper.make_node("SequenceInsert", ["s3", "neg"], ["seq"], name="append_neg"),
]
outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])]
if mode == "out-of-range":
    nodes += [const("five", [5], scalar=True),
              helper.make_node("SequenceAt", ["seq", "five"], ["y"], name="at_five")]
elif mode == "run-time-position":
    inputs.append(helper.make_tensor_value_info("p", TensorProto.INT64, []))
    nodes += [helper.make_node("SequenceAt", ["seq", "p"], ["y"], name="at_p")]
else:
    nodes += [
        helper.make_node("Shape", ["x"], ["shape"], name="shape"),
        const("one_index", [1]),
        helper.make_node("Gather", ["shape", "one_index"], ["width"], name="width"),
        const("seven", [7]),
        helper.make_node("Sub", ["width", "seven"], ["minus_one"], name="minus_one"),
        helper.make_node("Squeeze", ["minus_one"], ["last"], name="last"),
        helper.make_node("SequenceAt", ["seq", "last"], ["a"], name="at_last"),
        helper.make_node("SequenceLength", ["seq"], ["n"], name="length"),
        helper.make_node("Cast", ["n"], ["n_float"], name="n_float", to=TensorProto.FLOAT),
        helper.make_node("Add", ["a", "n_float"], ["y"], name="add_n"),
        const("four", [4], scalar=True),
        helper.make_node("SplitToSequence", ["x", "four"], ["pieces"], name="split", axis=1),
        const("one", [1], scalar=True),
        helper.make_node("SequenceAt", ["pieces", "one"], ["tail"], name="at_tail"),
        helper.make_node("SequenceConstruct", ["tail", "tail"], ["pair"], name="pair"),
        helper.make_node("ConcatFromSequence", ["pair"], ["stack"], name="stack", axis=-1,
                         new_axis=1),
    ]
    outputs.append(helper.make_tensor_value_info("stack", TensorProto.FLOAT,
                                                 ["batch", 2, 2]))
graph = helper.make_graph(nodes, "sequences", inputs, outputs)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
