//===- Phases.h - Forward and backward parts of a step ----------*- C++ -*-===//
//
/// Which ops of a training step belong to its forward: everything the
/// non-gradient results depend on. Results that are gradients, or updates
/// of parameters and optimizer state, are the backward's (and the
/// optimizer's); every other result (the loss, model outputs, BatchNorm's
/// running statistics) is the forward's. Shared by fsdp-shard and
/// fsdp-schedule; with what is made from a unit's parameters alone (views of
/// them, ViewLikeOpInterface, included), by fsdp-shard and
/// fsdp-check-reshard.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TRANSFORMS_PHASES_H
#define FSDP_TRANSFORMS_PHASES_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::fsdp {

/// The values computed only from some source values (one unit's gathered
/// buffer, its views) and constants: aliases of them, and ops without memory
/// effects whose every operand is one of them or a constant (a transpose,
/// a cast, a slice, a concatenation, a weight-only product of a unit's
/// parameters). Everything else that reads them is a use.
class DerivedValues {
public:
  /// Finds what `sources` derive, replacing what an earlier call found (the
  /// constants it learnt are kept).
  void collect(ValueRange sources);
  /// The ops that compute only from the sources, in block order.
  SmallVector<Operation *> ops;
  /// Every other op's reads of a source or of such an op's result.
  SmallVector<OpOperand *> uses;
  /// The sources and the results of `ops`.
  llvm::DenseSet<Value> values;

private:
  /// Whether `value` is computed from no block argument and no op with
  /// memory effects.
  bool isConstant(Value value);
  llvm::DenseMap<Value, bool> constant;
};

/// Whether result `index` of `func` is the backward's (or the optimizer's):
/// a gradient, or the update of a parameter or of optimizer state. Every
/// other result (the loss, model outputs, running statistics) is the
/// forward's.
inline bool isBackwardResult(func::FuncOp func, unsigned index,
                             SymbolTableCollection &symbols) {
  if (func.getResultAttr(index, FSDPDialect::GradOfAttrHelper::getNameStr()) ||
      func.getResultAttr(index,
                         FSDPDialect::FlatGradOfAttrHelper::getNameStr()))
    return true;
  auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
      index, FSDPDialect::UpdateOfAttrHelper::getNameStr());
  if (!of)
    return false;
  Operation *target =
      symbols.lookupNearestSymbolFrom(func->getParentOfType<ModuleOp>(), of);
  return isa_and_nonnull<ParamOp, FlatParamOp>(target) ||
         (target &&
          target->hasAttr(FSDPDialect::StateOfAttrHelper::getNameStr()));
}

/// The forward ops of `func`; `training` says whether it has a backward.
inline llvm::DenseSet<Operation *>
forwardOps(func::FuncOp func, SymbolTableCollection &symbols, bool &training) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Operation *> work;
  training = false;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    bool backward = isBackwardResult(func, i, symbols);
    training |= backward;
    if (!backward)
      if (Operation *def = ret.getOperand(i).getDefiningOp())
        work.push_back(def);
  }
  llvm::DenseSet<Operation *> forward;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        work.push_back(def);
  }
  return forward;
}

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_PHASES_H
