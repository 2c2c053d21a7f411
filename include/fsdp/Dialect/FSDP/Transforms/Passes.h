//===- Passes.h - fsdp dialect passes ---------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H

#include "fsdp/layout/FlatLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"

/// fsdp-optimizer's options as the pass reads `text` (the part after
/// --fsdp-optimizer=), for pipelines that must know the step before it runs.
FailureOr<OptimizerOptions>
parseOptimizerOptions(StringRef text,
                      function_ref<LogicalResult(const Twine &)> errorHandler);

/// The per-parameter state buffers fsdp-optimizer keeps with `options`
/// (AdamW: 2, SGD with momentum: 1, plain SGD: 0): what fsdp-auto-wrap's
/// memory model charges for each sharded parameter.
int64_t optimizerStateCount(const OptimizerOptions &options);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
