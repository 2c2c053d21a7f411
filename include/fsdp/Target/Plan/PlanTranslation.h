//===- PlanTranslation.h - MLIR to the runtime plan -------------*- C++ -*-===//

#ifndef FSDP_TARGET_PLAN_PLANTRANSLATION_H
#define FSDP_TARGET_PLAN_PLANTRANSLATION_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace fsdp {

/// Writes `module` (lowered by fsdp-lower-to-runtime and planned by
/// fsdp-plan-memory) as a plan (runtime/schema/plan.fbs) to `os`. Errors name
/// the op or value that cannot be written.
mlir::LogicalResult translateToPlan(mlir::ModuleOp module,
                                    llvm::raw_ostream &os);

/// Registers `--mlir-to-plan` with mlir-translate's registry.
void registerToPlanTranslation();

} // namespace fsdp

#endif // FSDP_TARGET_PLAN_PLANTRANSLATION_H
