//===- OpTableCheck.cpp - The ONNX operator table held to the code --------===//
//
/// ONNXOpTable.def says, per operator, whether a kernel runs it and whether
/// a gradient rule differentiates it; this file asks the code the same
/// questions (fsdp-lower-to-runtime's patterns, the ops' GradientOpInterface
/// models once the rules are attached) and lists every disagreement, so an
/// op added without its row, or a row that claims what the code lacks,
/// fails `fsdp-opt --print-op-table` and with it the docs build and its
/// test.
//
//===----------------------------------------------------------------------===//

#include "Gradients/Gradients.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOpTable.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;
using namespace mlir::onnxir;

namespace {

/// What the code says of one registered onnx op.
struct Found {
  bool lowered, view, rule;
};

/// The disagreements of `row` with `found`.
void compare(const OpSupport &row, const Found &found,
             SmallVector<std::string> &problems) {
  std::string name = row.name;
  bool claimsLowering =
      row.forward == OpForward::Kernel || row.forward == OpForward::View;
  if (row.forward == OpForward::View && !found.view)
    problems.push_back(name + ": the row says View, but the op is not "
                              "ViewLikeOpInterface");
  if (row.forward == OpForward::Kernel && !found.lowered)
    problems.push_back(name + ": the row says Kernel, but "
                              "fsdp-lower-to-runtime has no pattern for it");
  if (!claimsLowering && row.forward != OpForward::Rewritten &&
      (found.lowered || found.view))
    problems.push_back(name + ": fsdp-lower-to-runtime lowers it, but the "
                              "row says it has no kernel");
  if (row.forward == OpForward::Kernel && StringRef(row.how).empty())
    problems.push_back(name + ": a Kernel row names its kernels");
  if (row.gradient == OpGradient::Rule && !found.rule)
    problems.push_back(name + ": the row says Rule, but the op has no "
                              "GradientOpInterface rule");
  if (row.gradient != OpGradient::Rule && found.rule)
    problems.push_back(name + ": the op has a gradient rule, but the row "
                              "does not say Rule");
}

} // namespace

SmallVector<std::string> mlir::fsdp::checkOpTable() {
  DialectRegistry registry;
  registry.insert<ONNXDialect, FSDPDialect>();
  detail::registerGradientModels(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  DenseSet<OperationName> lowered = getLoweredOps(&context);

  SmallVector<std::string> problems;
  DenseSet<StringRef> registered;
  for (RegisteredOperationName op : context.getRegisteredOperations()) {
    if (op.getDialectNamespace() != ONNXDialect::getDialectNamespace() ||
        op.getStringRef() == NoValueOp::getOperationName())
      continue;
    StringRef name = op.getStringRef().drop_front(5); // "onnx."
    registered.insert(name);
    const OpSupport *row = lookupOpSupport(name);
    if (!row) {
      problems.push_back(name.str() + ": an onnx op without a row in "
                                      "ONNXOpTable.def");
      continue;
    }
    compare(*row,
            {lowered.contains(op), op.hasInterface<ViewLikeOpInterface>(),
             op.hasInterface<GradientOpInterface>()},
            problems);
  }
  StringRef previous;
  for (const OpSupport &row : getOpTable()) {
    if (!registered.contains(row.name))
      problems.push_back(std::string(row.name) + ": a row without an onnx op");
    if (StringRef(row.name) <= previous)
      problems.push_back(std::string(row.name) +
                         ": rows are in alphabetical order");
    previous = row.name;
  }
  return problems;
}
