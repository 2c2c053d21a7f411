//===- Sequences.cpp - ONNX sequences resolved at import ------------------===//

#include "Sequences.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>
#include <utility>

using namespace mlir;

namespace fsdp::onnx_import {
namespace {

/// The ops whose result is a sequence (an Identity of a sequence too).
constexpr llvm::StringLiteral kProducers[] = {
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
    "SplitToSequence"};
/// The ops that read one and give a tensor.
constexpr llvm::StringLiteral kReaders[] = {"SequenceAt", "SequenceLength",
                                            "ConcatFromSequence"};

using Elements = llvm::SmallVector<std::string>;

/// A scalar integer constant's value.
std::optional<int64_t>
scalarInteger(const llvm::StringMap<DenseElementsAttr> &constants,
              const std::string &name) {
  auto found = constants.find(name);
  if (found == constants.end() ||
      !isa<IntegerType>(found->second.getElementType()) ||
      found->second.getNumElements() != 1)
    return std::nullopt;
  return (*found->second.getValues<APInt>().begin()).getSExtValue();
}

/// A 1-D (or scalar) integer constant's values.
std::optional<llvm::SmallVector<int64_t>>
integers(const llvm::StringMap<DenseElementsAttr> &constants,
         const std::string &name) {
  auto found = constants.find(name);
  if (found == constants.end() ||
      !isa<IntegerType>(found->second.getElementType()) ||
      found->second.getType().getRank() > 1)
    return std::nullopt;
  llvm::SmallVector<int64_t> values;
  for (const APInt &value : found->second.getValues<APInt>())
    values.push_back(value.getSExtValue());
  return values;
}

/// The static dimensions of `name`'s inferred tensor type, if all are.
std::optional<llvm::SmallVector<int64_t>>
staticShape(const llvm::StringMap<onnx::TypeProto> &types,
            const std::string &name) {
  auto found = types.find(name);
  if (found == types.end() || !found->second.has_tensor_type() ||
      !found->second.tensor_type().has_shape())
    return std::nullopt;
  llvm::SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim :
       found->second.tensor_type().shape().dim()) {
    if (!dim.has_dim_value())
      return std::nullopt;
    shape.push_back(dim.dim_value());
  }
  return shape;
}

int64_t intAttribute(const onnx::NodeProto &node, llvm::StringRef name,
                     int64_t otherwise) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name && attr.type() == onnx::AttributeProto::INT)
      return attr.i();
  return otherwise;
}

void setIntAttribute(onnx::NodeProto &node, llvm::StringRef name,
                     int64_t value) {
  onnx::AttributeProto *attr = node.add_attribute();
  attr->set_name(name.str());
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}

/// Makes `node` a Constant node of int64 `values`, 1-D or (`scalar`) 0-D.
void makeIntsConstant(onnx::NodeProto &node, llvm::ArrayRef<int64_t> values,
                      bool scalar = false) {
  onnx::TensorProto tensor;
  tensor.set_data_type(onnx::TensorProto::INT64);
  if (!scalar)
    tensor.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t value : values)
    tensor.add_int64_data(value);
  makeConstant(node, std::move(tensor));
}

/// The nodes one rewrite puts in place of a node, named after it.
class Replacement {
public:
  Replacement(const onnx::NodeProto &node,
              google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes)
      : label(node.name().empty() ? node.op_type() : node.name()),
        nodes(nodes) {}

  onnx::NodeProto &add(llvm::StringRef op, llvm::ArrayRef<std::string> inputs,
                       llvm::ArrayRef<std::string> outputs) {
    onnx::NodeProto &node = *nodes.Add();
    node.set_op_type(op.str());
    node.set_name(label + "/" + op.str() + "_" + std::to_string(added++));
    for (const std::string &input : inputs)
      node.add_input(input);
    for (const std::string &output : outputs)
      node.add_output(output);
    return node;
  }

  /// A Constant node of int64 `values` (1-D), returning its output's name.
  std::string ints(const std::string &output, llvm::ArrayRef<int64_t> values) {
    makeIntsConstant(add("Constant", {}, {output}), values);
    return output;
  }

  int count() const { return added; }

private:
  std::string label;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes;
  int added = 0;
};

/// Removes the sequence producers whose result no node and no graph output
/// reads (those a reader's rewrite left behind), until none is left.
bool pruneDeadSequences(onnx::GraphProto &graph,
                        const llvm::StringSet<> &sequences) {
  bool removed = false;
  for (bool again = true; again;) {
    llvm::StringSet<> used;
    for (const onnx::NodeProto &node : graph.node())
      for (const std::string &input : node.input())
        used.insert(input);
    for (const onnx::ValueInfoProto &output : graph.output())
      used.insert(output.name());
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    again = false;
    for (onnx::NodeProto &node : *graph.mutable_node()) {
      bool dead = node.output_size() == 1 &&
                  sequences.contains(node.output(0)) &&
                  !used.contains(node.output(0));
      if (dead)
        again = removed = true;
      else
        *kept.Add() = std::move(node);
    }
    graph.mutable_node()->Swap(&kept);
  }
  return removed;
}

} // namespace

bool isSequenceOp(llvm::StringRef opType) {
  return llvm::is_contained(kProducers, opType) ||
         llvm::is_contained(kReaders, opType);
}

const onnx::NodeProto *unresolvedSequence(const onnx::GraphProto &graph,
                                          std::string &why) {
  // After folding, a constant is a Constant node's output or an
  // initializer; a sequence made of tensors at constant positions is known.
  llvm::StringSet<> constant, known;
  for (const onnx::TensorProto &init : graph.initializer())
    constant.insert(init.name());
  const onnx::NodeProto *first = nullptr;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() == "Constant")
      for (const std::string &output : node.output())
        constant.insert(output);
    if (!node.domain().empty() || !isSequenceOp(node.op_type()) ||
        node.output_size() != 1)
      continue;
    first = first ? first : &node;
    llvm::StringRef op = node.op_type();
    int at = op == "SequenceInsert" ? 2 : 1;
    bool fixed = node.input_size() <= at || node.input(at).empty() ||
                 constant.contains(node.input(at));
    bool listed = node.input_size() > 0 && known.contains(node.input(0));
    if (op == "SequenceEmpty" || op == "SequenceConstruct" ||
        ((op == "SequenceInsert" || op == "SequenceErase") && listed &&
         fixed)) {
      known.insert(node.output(0));
      continue;
    }
    if (op == "SplitToSequence") {
      why = "its split sizes must be constant and its input's size along "
            "the axis static";
      return &node;
    }
    if (listed && !fixed) {
      why = "its position '" + node.input(at) +
            "' must be a constant once the shapes are fixed";
      return &node;
    }
  }
  if (first)
    why = "its sequence is not read at constant positions";
  return first;
}

FailureOr<int>
resolveSequences(onnx::GraphProto &graph,
                 const llvm::StringMap<DenseElementsAttr> &constants,
                 const llvm::StringMap<onnx::TypeProto> &types,
                 llvm::function_ref<Location(const onnx::NodeProto &)> locate) {
  if (llvm::none_of(graph.node(), [](const onnx::NodeProto &node) {
        return node.domain().empty() && isSequenceOp(node.op_type());
      }))
    return -1;

  // The tensors of every sequence known so far, and every sequence's name.
  llvm::StringMap<Elements> known;
  llvm::StringSet<> sequences;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  bool changed = false;
  int added = 0;
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    std::string op = node.op_type();
    std::string label = node.name().empty() ? op : node.name();
    auto fail = [&](const llvm::Twine &message) {
      emitError(locate(node))
          << "node '" << label << "' (" << op << "): " << message;
      return failure();
    };
    bool ours = node.domain().empty() && node.output_size() == 1;
    const Elements *list = nullptr;
    if (ours && node.input_size() > 0) {
      auto found = known.find(node.input(0));
      list = found == known.end() ? nullptr : &found->second;
    }
    auto input = [&](int i) {
      return i < node.input_size() ? node.input(i) : std::string();
    };
    // A position input: absent (`otherwise`), constant, or unknown.
    auto position = [&](int i, int64_t otherwise) -> std::optional<int64_t> {
      return input(i).empty() ? std::optional<int64_t>(otherwise)
                              : scalarInteger(constants, input(i));
    };
    // Checks `pos` against [-n, n - 1 + extra] and makes it non-negative.
    auto inRange = [&](int64_t &pos, int64_t extra) {
      int64_t n = static_cast<int64_t>(list->size());
      if (pos < -n || pos > n - 1 + extra)
        return fail("position " + llvm::Twine(pos) + " is outside [" +
                    llvm::Twine(-n) + ", " + llvm::Twine(n - 1 + extra) +
                    "] of a sequence of " + llvm::Twine(n) + " tensors");
      if (pos < 0)
        pos += n;
      return success();
    };

    if (ours && op == "Identity" && list) {
      known[node.output(0)] = *list;
      sequences.insert(node.output(0));
    } else if (ours && llvm::is_contained(kProducers, op)) {
      sequences.insert(node.output(0));
      if (op == "SequenceEmpty") {
        known[node.output(0)] = {};
      } else if (op == "SequenceConstruct") {
        known[node.output(0)] =
            Elements(node.input().begin(), node.input().end());
      } else if (op == "SequenceInsert" && list) {
        std::optional<int64_t> pos = position(2, list->size());
        if (pos) {
          if (failed(inRange(*pos, 1)))
            return failure();
          Elements result = *list;
          result.insert(result.begin() + *pos, input(1));
          known[node.output(0)] = std::move(result);
        }
      } else if (op == "SequenceErase" && list) {
        std::optional<int64_t> pos = position(1, -1);
        if (pos) {
          if (failed(inRange(*pos, 0)))
            return failure();
          Elements result = *list;
          result.erase(result.begin() + *pos);
          known[node.output(0)] = std::move(result);
        }
      } else if (op == "SplitToSequence") {
        std::optional<llvm::SmallVector<int64_t>> shape =
            staticShape(types, input(0));
        int64_t rank = shape ? static_cast<int64_t>(shape->size()) : 0;
        int64_t axis = intAttribute(node, "axis", 0);
        std::optional<llvm::SmallVector<int64_t>> split;
        if (!input(1).empty())
          split = integers(constants, input(1));
        if (shape && axis >= -rank && axis < rank &&
            (input(1).empty() || split)) {
          if (axis < 0)
            axis += rank;
          int64_t size = (*shape)[axis];
          llvm::SmallVector<int64_t> sizes;
          bool squeeze = false;
          if (input(1).empty()) {
            sizes.assign(size, 1);
            squeeze = intAttribute(node, "keepdims", 1) == 0;
          } else if (constants.find(input(1))->second.getType().getRank() ==
                     0) {
            int64_t piece = split->front();
            if (piece <= 0)
              return fail("its split size " + llvm::Twine(piece) +
                          " is not positive");
            for (int64_t start = 0; start < size; start += piece)
              sizes.push_back(std::min(piece, size - start));
          } else {
            sizes = *split;
            int64_t total = 0;
            for (int64_t piece : sizes) {
              if (piece < 0)
                return fail("a split size is negative");
              total += piece;
            }
            if (total != size)
              return fail("its split sizes add up to " + llvm::Twine(total) +
                          ", not to the " + llvm::Twine(size) + " of axis " +
                          llvm::Twine(axis));
          }
          // An empty axis has no pieces and no Split to make them: left
          // for the importer to refuse.
          if (!sizes.empty()) {
            Replacement replace(node, nodes);
            std::string base = node.output(0) + "/";
            Elements pieces;
            for (size_t i = 0; i < sizes.size(); ++i)
              pieces.push_back(base + std::to_string(i));
            std::string splits = replace.ints(base + "split", sizes);
            setIntAttribute(replace.add("Split", {input(0), splits}, pieces),
                            "axis", axis);
            if (squeeze) {
              std::string axes = replace.ints(base + "axes", {axis});
              for (std::string &piece : pieces) {
                replace.add("Squeeze", {piece, axes}, {piece + "/squeezed"});
                piece += "/squeezed";
              }
            }
            replace.add("SequenceConstruct", pieces, {node.output(0)});
            known[node.output(0)] = pieces;
            added += replace.count() - 1;
            changed = true;
            continue;
          }
        }
      }
    } else if (ours && list && op == "SequenceAt") {
      if (std::optional<int64_t> pos = position(1, 0);
          pos && !input(1).empty()) {
        if (failed(inRange(*pos, 0)))
          return failure();
        std::string element = (*list)[*pos];
        node.set_op_type("Identity");
        node.clear_input();
        node.add_input(element);
        changed = true;
      }
    } else if (ours && list && op == "SequenceLength") {
      makeIntsConstant(node, {static_cast<int64_t>(list->size())},
                       /*scalar=*/true);
      changed = true;
    } else if (ours && list && op == "ConcatFromSequence") {
      if (list->empty())
        return fail("the sequence '" + input(0) + "' is empty");
      int64_t axis = intAttribute(node, "axis", 0);
      bool newAxis = intAttribute(node, "new_axis", 0) != 0;
      std::optional<llvm::SmallVector<int64_t>> shape =
          staticShape(types, list->front());
      if (!newAxis || shape) {
        Replacement replace(node, nodes);
        Elements parts = *list;
        if (newAxis) {
          // The new axis is one of rank + 1: -1 is the last.
          if (axis < 0)
            axis += static_cast<int64_t>(shape->size()) + 1;
          std::string axes = replace.ints(node.output(0) + "/axes", {axis});
          for (auto [i, part] : llvm::enumerate(parts)) {
            std::string unsqueezed =
                node.output(0) + "/unsqueezed_" + std::to_string(i);
            replace.add("Unsqueeze", {part, axes}, {unsqueezed});
            part = unsqueezed;
          }
        }
        setIntAttribute(replace.add("Concat", parts, {node.output(0)}), "axis",
                        axis);
        added += replace.count() - 1;
        changed = true;
        continue;
      }
    }
    *nodes.Add() = std::move(node);
  }
  graph.mutable_node()->Swap(&nodes);
  if (pruneDeadSequences(graph, sequences))
    changed = true;
  return changed ? added : -1;
}

void makeConstant(onnx::NodeProto &node, onnx::TensorProto value) {
  node.set_op_type("Constant");
  node.clear_input();
  node.clear_attribute();
  onnx::AttributeProto *attr = node.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = std::move(value);
}

} // namespace fsdp::onnx_import
