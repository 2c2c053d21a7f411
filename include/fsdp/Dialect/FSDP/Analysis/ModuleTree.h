//===- ModuleTree.h - The model's PyTorch module hierarchy ------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <optional>
#include <string>

namespace mlir::fsdp {

/// The module attribute holding the tree (a list of #fsdp.module).
constexpr llvm::StringLiteral kModulesAttrName = "fsdp.modules";

/// The parent FQN of a module or parameter FQN ("" for top-level names).
StringRef parentOf(StringRef fqn);

/// The strings of an array of StringAttr (a module's params, children, ...).
SmallVector<StringRef> stringsOf(ArrayAttr array);

/// Recovers the module tree of `module` from the export metadata, parameter
/// and buffer FQNs and node scopes, in named_modules() order. Fails with an
/// error on `module` if the metadata is malformed.
FailureOr<SmallVector<ModuleAttr>> recoverModuleTree(ModuleOp module);

/// The tree recorded in `fsdp.modules`, or, if there is none, the recovered
/// one.
FailureOr<SmallVector<ModuleAttr>> getModuleTree(ModuleOp module);

/// Maps ops to the module that produced them, from their ONNX node scopes
/// (`/model/blocks.0/attn/MatMul` -> `blocks.0.attn`), undoing the
/// exporter's quirks the same way the tree recovery does.
class ScopeResolver {
public:
  ScopeResolver(ModuleOp module, ArrayRef<ModuleAttr> tree);
  ~ScopeResolver();
  /// The FQN of the known module `op` belongs to ("" for the root), or
  /// nothing when its location carries no scope.
  std::optional<std::string> moduleOf(Operation *op) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_MODULETREE_H
