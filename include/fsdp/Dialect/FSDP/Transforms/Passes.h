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

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_H
