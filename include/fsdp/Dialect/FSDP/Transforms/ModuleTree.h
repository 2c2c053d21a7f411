//===- ModuleTree.h - The model's PyTorch module hierarchy ------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::fsdp {

/// The module attribute holding the tree (a list of #fsdp.module).
constexpr llvm::StringLiteral kModulesAttrName = "fsdp.modules";

/// Recovers the module tree of `module` from the export metadata, parameter
/// and buffer FQNs and node scopes, in named_modules() order. Fails with an
/// error on `module` if the metadata is malformed.
FailureOr<SmallVector<ModuleAttr>> recoverModuleTree(ModuleOp module);

/// The tree recorded in `fsdp.modules`, or, if there is none, the recovered
/// one.
FailureOr<SmallVector<ModuleAttr>> getModuleTree(ModuleOp module);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H
