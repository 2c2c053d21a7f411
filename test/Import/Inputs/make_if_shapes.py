"""Writes models with If nodes, as torch's exporter writes shape checks:
x is [batch, 4]; `batch == 2` chooses between branches.

    make_if_shapes.py OUT.onnx [--nested | --dynamic]

default: then = Relu(x) (reading x from the outer scope), else = Neg(x) and
  an initializer of the branch added (x + 5);
--nested: the then branch holds a second If on `width == 4` (true: x * 3,
  false: x * 7), so the whole chain folds to x * 3 at batch 2;
--dynamic: the condition is a graph input, known only at run time."""
import sys

import onnx
from onnx import TensorProto, helper


def const(name, values):
    return helper.make_node("Constant", [], [name], name=f"{name}_const",
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)],
                                                     values))


def branch(name, nodes, out, initializers=()):
    return helper.make_graph(nodes, name, [],
                             [helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                            ["batch", 4])],
                             initializer=list(initializers))


mode = sys.argv[2] if len(sys.argv) > 2 else ""
inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])]
nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
         const("zero", [0]), const("one", [1]), const("two", [2]), const("four", [4]),
         helper.make_node("Gather", ["shape", "zero"], ["batch"], name="batch"),
         helper.make_node("Gather", ["shape", "one"], ["width"], name="width"),
         helper.make_node("Equal", ["batch", "two"], ["is_two_vec"], name="is_two"),
         helper.make_node("Squeeze", ["is_two_vec"], ["is_two"], name="squeeze_cond"),
         helper.make_node("Equal", ["width", "four"], ["is_four_vec"], name="is_four"),
         helper.make_node("Squeeze", ["is_four_vec"], ["is_four"], name="squeeze_width")]
otherwise = branch("else", [helper.make_node("Neg", ["x"], ["negated"], name="neg"),
                            helper.make_node("Add", ["negated", "five"], ["else_out"],
                                             name="add_five")],
                   "else_out", [helper.make_tensor("five", TensorProto.FLOAT, [1], [5.0])])
cond = "is_two"
if mode == "--nested":
    three = helper.make_tensor("three", TensorProto.FLOAT, [1], [3.0])
    seven = helper.make_tensor("seven", TensorProto.FLOAT, [1], [7.0])
    inner = helper.make_node(
        "If", ["is_four"], ["inner_out"], name="inner_if",
        then_branch=branch("times3", [helper.make_node("Mul", ["x", "three"], ["t3"],
                                                       name="times3")], "t3", [three]),
        else_branch=branch("times7", [helper.make_node("Mul", ["x", "seven"], ["t7"],
                                                       name="times7")], "t7", [seven]))
    then = branch("then", [inner], "inner_out")
else:
    then = branch("then", [helper.make_node("Relu", ["x"], ["then_out"], name="relu")],
                  "then_out")
if mode == "--dynamic":
    inputs.append(helper.make_tensor_value_info("flag", TensorProto.BOOL, []))
    cond = "flag"
nodes.append(helper.make_node("If", [cond], ["y"], name="check_batch", then_branch=then,
                              else_branch=otherwise))
graph = helper.make_graph(nodes, "if_shapes", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="handmade")
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
