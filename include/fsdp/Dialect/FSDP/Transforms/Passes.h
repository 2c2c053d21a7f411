//===- Passes.h - fsdp dialect passes ---------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H

#include "fsdp/layout/FlatLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

/// Says which pass refused the input: while alive, every error and warning
/// emitted in `context` starts with `passArgument` ("fsdp-shard: ..."), the
/// pass's flag, so that messages need not spell it and a failure deep in a
/// pipeline still names its stage. Notes are left as they are. A pass on the
/// module makes one first thing in runOnOperation; nothing else runs then, so
/// the context-wide handler catches only that pass's diagnostics.
class PassDiagnosticScope : public ScopedDiagnosticHandler {
public:
  PassDiagnosticScope(MLIRContext *context, StringRef passArgument);
};

/// fsdp-optimizer's options as the pass reads `text` (the part after
/// --fsdp-optimizer=), for pipelines that must know the step before it runs.
FailureOr<OptimizerOptions>
parseOptimizerOptions(StringRef text,
                      function_ref<LogicalResult(const Twine &)> errorHandler);

/// The per-parameter state buffers fsdp-optimizer keeps with `options`
/// (AdamW: 2, SGD with momentum: 1, plain SGD: 0): what fsdp-auto-wrap's
/// memory model charges for each sharded parameter.
int64_t optimizerStateCount(const OptimizerOptions &options);

/// The ops fsdp-lower-to-runtime has an op-specific pattern for (view-like
/// ops lower through ViewLikeOpInterface instead).
DenseSet<OperationName> getLoweredOps(MLIRContext *context);

/// Where the ONNX operator table (ONNXOpTable.def) disagrees with the code:
/// an onnx op without a row, a row without an op, a Kernel or View row
/// without a lowering (or a Folded or None row with one), a Rule row
/// without a gradient rule or a rule the row does not claim. Empty when the
/// table is true.
SmallVector<std::string> checkOpTable();

/// Gives each random op (onnxir::drawsRandom: Dropout and the random
/// generators) of `func` without an `fsdp.random_op`
/// id the next one after the ids already there, in the function's order:
/// fsdp-autodiff numbers a training step's before anything clones them (so
/// the ids are the same at every world size), fsdp-lower-to-runtime the
/// rest.
void numberRandomOps(func::FuncOp func);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
