//===- GradientOpInterface.h - Reverse-mode rule of an op -------*- C++ -*-===//
//
/// The interface fsdp-autodiff differentiates ops through, and the context
/// a rule works in (see GradientOpInterface.td).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE_H
#define FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::fsdp {

/// What fsdp-autodiff's reverse sweep lends an op's gradient rule: the
/// cotangents reached so far, which values are active, and where the
/// backward ops go.
class GradientContext {
public:
  /// The cotangent of `value` (a result of the op being differentiated), or
  /// null when the loss does not depend on it.
  virtual Value getCotangent(Value value) const = 0;

  /// Whether `value` depends on a trainable parameter: only active values
  /// take cotangents.
  virtual bool isActive(Value value) const = 0;

  /// Adds `grad` (of `value`'s type) to the cotangent of `value`.
  virtual void accumulate(Value value, Value grad) = 0;

  /// The builder the backward ops are created with (before the function's
  /// return).
  virtual OpBuilder &getBuilder() = 0;

  /// Whether rules with a fused gradient kernel (fsdp.norm_grad for
  /// LayerNormalization) emit it rather than decomposed ops: fsdp-autodiff's
  /// `fuse-gradients` option.
  virtual bool fuseGradients() const { return true; }

protected:
  ~GradientContext() = default;
};

} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/IR/GradientOpInterface.h.inc"

#endif // FSDP_DIALECT_FSDP_IR_GRADIENTOPINTERFACE_H
