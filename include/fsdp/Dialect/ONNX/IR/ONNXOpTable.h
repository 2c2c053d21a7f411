//===- ONNXOpTable.h - What each ONNX operator can do -----------*- C++ -*-===//
//
/// The table of ONNXOpTable.def as data: the importer's message, docs/ops.md
/// and `fsdp-opt --print-op-table` read it, and mlir::fsdp::checkOpTable
/// holds it to the code.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_ONNX_IR_ONNXOPTABLE_H
#define FSDP_DIALECT_ONNX_IR_ONNXOPTABLE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::onnxir {

/// How the runtime runs an operator's forward (ONNXOpTable.def says more).
enum class OpForward { Kernel, View, Constant, Folded, Rewritten, None };

/// How fsdp-autodiff differentiates an operator (Rewritten: through the
/// ops its Rewritten forward becomes, which have rules).
enum class OpGradient { Rule, Autodiff, Rewritten, None, NotDifferentiable };

/// One row of the table.
struct OpSupport {
  /// The ONNX operator; its op is `onnx.<name>`.
  const char *name;
  OpForward forward;
  /// Kernel: the runtime kernels, comma-separated; Rewritten: the pass (or
  /// the importer) and the ops it becomes.
  const char *how;
  OpGradient gradient;
  /// Limits on attributes and inputs, or "".
  const char *notes;
};

/// Every row, in alphabetical order.
llvm::ArrayRef<OpSupport> getOpTable();

/// The row of ONNX operator `name`, or null.
const OpSupport *lookupOpSupport(llvm::StringRef name);

/// Whether a compiled plan runs the operator's forward (not None).
bool runsForward(const OpSupport &op);

/// The operators that work, for an error message: those that run in
/// training and inference, then those that run in inference only.
std::string describeSupportedOps();

/// docs/ops.md: the table in Markdown.
void printOpTableMarkdown(llvm::raw_ostream &os);

} // namespace mlir::onnxir

#endif // FSDP_DIALECT_ONNX_IR_ONNXOPTABLE_H
