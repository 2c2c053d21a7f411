//===- Gradients.h - The ops' reverse-mode rules ----------------*- C++ -*-===//
//
/// fsdp-autodiff's per-op rules, as external models of GradientOpInterface:
/// one `backward(XOp, GradientContext &)` per op, grouped by op family in
/// the files of this directory, each family attaching its own. External
/// models rather than ODS declarations keep the onnx and fsdp dialect
/// libraries free of the builders the rules use (and of each other).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_GRADIENTS_GRADIENTS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_GRADIENTS_GRADIENTS_H

#include "../OnnxBuilder.h"

#include "fsdp/Dialect/FSDP/IR/GradientOpInterface.h"

#include "mlir/IR/DialectRegistry.h"

namespace mlir::fsdp::detail {

/// What most rules start from: their op, its first result and that
/// result's cotangent, and a builder at the op's location.
struct Rule {
  Rule(Operation *op, GradientContext &ctx)
      : op(op), ctx(ctx), bb(ctx.getBuilder(), op->getLoc()),
        y(op->getResult(0)), g(ctx.getCotangent(y)), yt(y.getType()),
        element(typeOf(y).getElementType()) {}

  Value operand(unsigned i) const { return op->getOperand(i); }
  bool active(Value value) const { return ctx.isActive(value); }

  /// Adds `grad` to operand `i`'s cotangent when that operand is active,
  /// summed over the dimensions broadcasting stretched to reach `grad`'s
  /// shape.
  void give(unsigned i, Value grad) {
    Value x = operand(i);
    if (active(x))
      ctx.accumulate(x, bb.sumTo(grad, typeOf(x)));
  }

  Operation *op;
  GradientContext &ctx;
  OnnxBuilder bb;
  Value y, g;
  Type yt, element;
};

/// GradientOpInterface for `OpT` through `rule`.
template <typename OpT, LogicalResult (*rule)(OpT, GradientContext &),
          bool everyResult>
struct GradientModel
    : GradientOpInterface::ExternalModel<GradientModel<OpT, rule, everyResult>,
                                         OpT> {
  LogicalResult backward(Operation *op, GradientContext &ctx) const {
    return rule(cast<OpT>(op), ctx);
  }
  bool differentiatesEveryResult(Operation *) const { return everyResult; }
};

/// Attaches `rule` to `OpT` (`everyResult`: see
/// GradientOpInterface::differentiatesEveryResult).
template <typename OpT, LogicalResult (*rule)(OpT, GradientContext &),
          bool everyResult = false>
void attachGradient(MLIRContext &ctx) {
  OpT::template attachInterface<GradientModel<OpT, rule, everyResult>>(ctx);
}

// One per file of this directory.
void attachElementwiseGradients(MLIRContext &ctx);
void attachMovementGradients(MLIRContext &ctx);
void attachReductionGradients(MLIRContext &ctx);
void attachMatMulGradients(MLIRContext &ctx);
void attachWindowGradients(MLIRContext &ctx);
void attachFusedGradients(MLIRContext &ctx);
void attachRecurrentGradients(MLIRContext &ctx);
/// fsdp.softmax_cross_entropy's rule, next to onnx.SoftmaxCrossEntropyLoss's
/// (Reduction.cpp), attached when the fsdp dialect loads.
void attachCrossEntropyGradient(MLIRContext &ctx);
/// The view rule (a reshape back) on every op of `dialect` that is
/// ViewLikeOpInterface.
void attachViewGradients(Dialect &dialect);

/// Attaches every rule when the onnx and fsdp dialects load.
void registerGradientModels(DialectRegistry &registry);

} // namespace mlir::fsdp::detail

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_GRADIENTS_GRADIENTS_H
