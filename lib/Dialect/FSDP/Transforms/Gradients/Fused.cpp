//===- Fused.cpp - Gradients of fsdp's fused ops --------------------------===//
//
/// fsdp-autodiff fuses differentiated attention chains into fsdp.attention
/// (keeping its lse), whose gradient is one fsdp.attention_grad, training
/// batch norms into fsdp.batch_norm_train, whose gradient is one
/// fsdp.batch_norm_grad, and GELU, SiLU and RMSNorm chains into fsdp.gelu,
/// fsdp.silu and fsdp.rms_norm, whose gradients are one
/// fsdp.activation_grad or fsdp.norm_grad.
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include <type_traits>

using namespace mlir;
using mlir::fsdp::ActivationGradOp;
using mlir::fsdp::AttentionGradOp;
using mlir::fsdp::AttentionOp;
using mlir::fsdp::BatchNormGradOp;
using mlir::fsdp::BatchNormTrainOp;
using mlir::fsdp::GeluOp;
using mlir::fsdp::GradientContext;
using mlir::fsdp::NormGradOp;
using mlir::fsdp::RMSNormOp;
using mlir::fsdp::SiluOp;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::Rule;

namespace {

LogicalResult backward(AttentionOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  if (!op.getLse())
    return op->emitOpError("fsdp.attention needs its lse "
                           "result to be differentiated");
  if (op.getMask() && r.active(op.getMask()))
    return op->emitOpError("fsdp.attention gives its mask no "
                           "gradient, but the mask depends on a trainable "
                           "parameter");
  auto grad = r.bb.b.create<AttentionGradOp>(
      op->getLoc(),
      TypeRange{op.getQuery().getType(), op.getKeyT().getType(),
                op.getValue().getType()},
      op.getQuery(), op.getKeyT(), op.getValue(), op.getMask(), op.getOutput(),
      op.getLse(), r.g, op.getScaleAttr(), op.getMaskKindAttr(),
      op.getFillValueAttr(), op.getLayoutAttr());
  r.give(0, grad.getGradQuery());
  r.give(1, grad.getGradKeyT());
  r.give(2, grad.getGradValue());
  return success();
}

/// Training batch norm: one fsdp.batch_norm_grad from the forward's saved
/// statistics gives x, scale and bias theirs; the running statistics get
/// none (buffers).
LogicalResult backward(BatchNormTrainOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  Type scaleType = op.getScale().getType();
  auto grad = r.bb.b.create<BatchNormGradOp>(
      op->getLoc(), TypeRange{op.getX().getType(), scaleType, scaleType},
      r.g, op.getX(), op.getScale(), op.getSavedMean(), op.getSavedInvstd());
  r.give(0, grad.getGradX());
  r.give(1, grad.getGradScale());
  r.give(2, grad.getGradBias());
  return success();
}

/// GELU and SiLU: one fsdp.activation_grad from the forward's input.
template <typename ActivationOp>
LogicalResult backward(ActivationOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  StringRef activation = "silu";
  if constexpr (std::is_same_v<ActivationOp, GeluOp>)
    activation = op.getApproximate() == "tanh" ? "gelu_tanh" : "gelu";
  OpBuilder &b = r.bb.b;
  r.give(0, b.create<ActivationGradOp>(op->getLoc(), r.yt, r.g, op.getInput(),
                                       b.getStringAttr(activation)));
  return success();
}

/// RMSNorm: one fsdp.norm_grad (kind rms) over the last dim.
LogicalResult backward(RMSNormOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  auto xt = cast<RankedTensorType>(op.getInput().getType());
  auto normalised =
      RankedTensorType::get({xt.getShape().back()}, xt.getElementType());
  OpBuilder &b = r.bb.b;
  auto grad = b.create<NormGradOp>(
      op->getLoc(), TypeRange{xt, normalised, normalised}, r.g, op.getInput(),
      op.getScale(), b.getStringAttr("rms"),
      b.getI64IntegerAttr(xt.getRank() - 1), op.getEpsilonAttr());
  r.give(0, grad.getGradX());
  if (op.getScale())
    r.give(1, grad.getGradScale());
  return success();
}

} // namespace

void mlir::fsdp::detail::attachFusedGradients(MLIRContext &ctx) {
  attachGradient<AttentionOp, backward>(ctx);
  attachGradient<BatchNormTrainOp, backward>(ctx);
  attachGradient<GeluOp, backward<GeluOp>>(ctx);
  attachGradient<SiluOp, backward<SiluOp>>(ctx);
  attachGradient<RMSNormOp, backward>(ctx);
}
