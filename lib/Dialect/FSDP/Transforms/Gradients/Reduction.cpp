//===- Reduction.cpp - Gradients of reductions, softmax, norms, losses ----===//
//
/// Ops that combine values along axes: the cotangent is broadcast back over
/// the reduced axes, with the statistics recomputed where the rule needs
/// them.
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::GradientContext;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::Rule;
using mlir::fsdp::detail::typeOf;

namespace {

/// Broadcasts g back over the reduced `axes` (all of them when empty):
/// divided by the count for a mean; for a max or min, shared evenly by the
/// extremal elements, as torch's amax; for the norms and log-sums, times
/// the derivative of the reduction at x (torch's: an L2 norm of 0 passes 0).
void reduceBackward(Rule &r, SmallVector<int64_t> axes) {
  OnnxBuilder &bb = r.bb;
  Value x = r.operand(0);
  auto in = typeOf(x);
  if (axes.empty())
    for (int64_t i = 0; i < in.getRank(); ++i)
      axes.push_back(i);
  SmallVector<int64_t> kept(in.getShape());
  int64_t count = 1;
  for (int64_t &axis : axes) {
    if (axis < 0)
      axis += in.getRank();
    count *= in.getDimSize(axis);
    kept[axis] = 1;
  }
  auto keptType = RankedTensorType::get(kept, r.element);
  Value gk = bb.reshape(r.g, keptType);
  if (isa<ReduceMeanOp>(r.op))
    gk = bb.mul(gk, bb.scalar(1.0 / count, r.element), gk.getType());
  Value yk = bb.reshape(r.y, keptType);
  auto expand = [&](Value v) {
    return bb.op<ExpandOp>(in, {v, bb.ints(in.getShape())});
  };
  if (isa<ReduceL2Op>(r.op)) {
    Value zero = bb.scalar(0, r.element);
    auto keptMask = RankedTensorType::get(kept, bb.b.getI1Type());
    Value scale =
        bb.op<WhereOp>(keptType, {bb.op<EqualOp>(keptMask, {yk, zero}), zero,
                                  bb.op<DivOp>(keptType, {gk, yk})});
    r.give(0, bb.mul(x, scale, in));
    return;
  }
  if (isa<ReduceSumSquareOp>(r.op)) {
    r.give(0, bb.mul(bb.mul(x, bb.scalar(2, r.element), in), gk, in));
    return;
  }
  if (isa<ReduceL1Op>(r.op)) {
    r.give(0, bb.mul(bb.op<SignOp>(in, {x}), gk, in));
    return;
  }
  if (isa<ReduceLogSumExpOp>(r.op)) {
    Value softmax = bb.op<ExpOp>(in, {bb.op<SubOp>(in, {x, yk})});
    r.give(0, bb.mul(softmax, gk, in));
    return;
  }
  if (isa<ReduceLogSumOp>(r.op)) {
    r.give(0,
           expand(bb.op<DivOp>(keptType, {gk, bb.op<ExpOp>(keptType, {yk})})));
    return;
  }
  if (isa<ReduceMaxOp, ReduceMinOp>(r.op)) {
    Value zero = bb.scalar(0, r.element);
    Value isMax = bb.op<EqualOp>(
        RankedTensorType::get(in.getShape(), bb.b.getI1Type()), {x, yk});
    Value ties = bb.reduce<ReduceSumOp>(
        bb.op<WhereOp>(in, {isMax, bb.scalar(1, r.element), zero}), axes);
    r.give(0, bb.op<WhereOp>(
                  in, {isMax, bb.op<DivOp>(keptType, {gk, ties}), zero}));
    return;
  }
  r.give(0, expand(gk));
}

LogicalResult backward(ReduceSumOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  SmallVector<int64_t> axes;
  if (!isa<NoneType>(op.getAxes().getType())) {
    auto constant = op.getAxes().getDefiningOp<ConstantOp>();
    auto dense = constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue())
                          : nullptr;
    if (!dense)
      return op->emitOpError("ReduceSum axes must be constant");
    for (const APInt &v : dense.getValues<APInt>())
      axes.push_back(v.getSExtValue());
  }
  reduceBackward(r, axes);
  return success();
}

/// The other reductions: their axes are an attribute.
template <class ReduceOp>
LogicalResult backward(ReduceOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  SmallVector<int64_t> axes;
  if (op.getAxes())
    axes.assign(op.getAxes()->begin(), op.getAxes()->end());
  reduceBackward(r, axes);
  return success();
}

LogicalResult backward(SoftmaxOp op, GradientContext &ctx) {
  // dx = y * (g - sum(g * y, axis))
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += typeOf(r.y).getRank();
  SmallVector<int64_t> kept(typeOf(r.y).getShape());
  kept[axis] = 1;
  Value gy = bb.mul(r.g, r.y, r.yt);
  Value sum = bb.op<ReduceSumOp>(
      RankedTensorType::get(kept, r.element), {gy, bb.ints({axis})},
      {bb.b.getNamedAttr("keepdims", bb.b.getI64IntegerAttr(1))});
  r.give(0, bb.mul(r.y, bb.op<SubOp>(r.yt, {r.g, sum}), r.yt));
  return success();
}

LogicalResult backward(LogSoftmaxOp op, GradientContext &ctx) {
  // g - exp(y) sum(g)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += typeOf(r.y).getRank();
  Value sum = bb.reduce<ReduceSumOp>(r.g, {axis});
  r.give(0, bb.op<SubOp>(r.yt,
                         {r.g, bb.mul(bb.op<ExpOp>(r.yt, {r.y}), sum, r.yt)}));
  return success();
}

/// One fsdp.norm_grad for a layer norm whose scale and bias (if any) have
/// the normalised dims' shape; false (nothing emitted) otherwise.
bool fusedLayerNormGrad(LayerNormalizationOp op, Rule &r, int64_t axis) {
  auto xt = typeOf(op.getX());
  auto normalised = RankedTensorType::get(xt.getShape().drop_front(axis),
                                          xt.getElementType());
  Value bias = op.getB();
  if (!r.ctx.fuseGradients() || op.getScale().getType() != normalised ||
      (!isa<NoneType>(bias.getType()) && bias.getType() != normalised))
    return false;
  OpBuilder &b = r.bb.b;
  auto grad = b.create<mlir::fsdp::NormGradOp>(
      op->getLoc(), TypeRange{xt, normalised, normalised}, r.g, op.getX(),
      op.getScale(), b.getStringAttr("layer"), b.getI64IntegerAttr(axis),
      op.getEpsilonAttr());
  r.give(0, grad.getGradX());
  r.give(1, grad.getGradScale());
  if (!isa<NoneType>(bias.getType()))
    r.give(2, grad.getGradBias());
  return true;
}

LogicalResult backward(LayerNormalizationOp op, GradientContext &ctx) {
  // Recompute the statistics, then
  // dx = rstd * (gs - mean(gs) - xhat * mean(gs * xhat)), gs = g * scale.
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX(), scale = op.getScale(), g = r.g;
  int64_t rank = typeOf(x).getRank(), axis = op.getAxis();
  if (axis < 0)
    axis += rank;
  if (fusedLayerNormGrad(op, r, axis))
    return success();
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  Type xt = x.getType();
  Value mean = bb.reduce<ReduceMeanOp>(x, axes);
  Value centered = bb.op<SubOp>(xt, {x, mean});
  Value var = bb.reduce<ReduceMeanOp>(bb.mul(centered, centered, xt), axes);
  Value eps = bb.scalar(op.getEpsilon().convertToDouble(), r.element);
  Value rstd = bb.op<ReciprocalOp>(
      var.getType(),
      {bb.op<SqrtOp>(var.getType(),
                     {bb.op<AddOp>(var.getType(), {var, eps})})});
  Value xhat = bb.mul(centered, rstd, xt);
  if (r.active(x)) {
    Value gs = bb.mul(g, scale, xt);
    Value a = bb.reduce<ReduceMeanOp>(gs, axes);
    Value c = bb.reduce<ReduceMeanOp>(bb.mul(gs, xhat, xt), axes);
    Value inner =
        bb.op<SubOp>(xt, {bb.op<SubOp>(xt, {gs, a}), bb.mul(xhat, c, xt)});
    r.give(0, bb.mul(rstd, inner, xt));
  }
  if (r.active(scale))
    r.give(1, bb.mul(g, xhat, xt));
  if (!isa<NoneType>(op.getB().getType()) && r.active(op.getB()))
    r.give(2, g);
  return success();
}

/// fsdp.softmax_cross_entropy_grad for `op` (onnx.SoftmaxCrossEntropyLoss
/// or fsdp.softmax_cross_entropy, whose accessors match), reading the
/// forward's per-position log-sum-exp `lse` when there is one.
template <typename LossOp>
LogicalResult crossEntropyGrad(LossOp op, Value lse, GradientContext &ctx) {
  Rule r(op, ctx);
  OpBuilder &b = r.bb.b;
  if (r.active(op.getLabels()))
    return op->emitOpError("labels cannot be differentiated");
  Value weights = op.getWeights();
  if (weights && isa<NoneType>(weights.getType()))
    weights = nullptr;
  if (weights && r.active(weights))
    return op->emitOpError("class weights cannot be differentiated");
  r.give(0, b.create<mlir::fsdp::SoftmaxCrossEntropyGradOp>(
                op->getLoc(), op.getScores().getType(), op.getScores(),
                op.getLabels(), r.g, weights, lse,
                b.getStringAttr(op.getReduction()), op.getIgnoreIndexAttr()));
  return success();
}

LogicalResult backward(SoftmaxCrossEntropyLossOp op, GradientContext &ctx) {
  if (op->getNumResults() > 1 && !op->getResult(1).use_empty())
    return op->emitOpError("SoftmaxCrossEntropyLoss's log_prob "
                           "output has no gradient rule");
  return crossEntropyGrad(op, Value(), ctx);
}

LogicalResult backward(mlir::fsdp::SoftmaxCrossEntropyOp op,
                       GradientContext &ctx) {
  return crossEntropyGrad(op, op.getLse(), ctx);
}

LogicalResult backward(NegativeLogLikelihoodLossOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OpBuilder &b = r.bb.b;
  if (r.active(op.getTarget()))
    return op->emitOpError("target cannot be differentiated");
  if (r.active(op.getWeight()))
    return op->emitOpError("class weights cannot be differentiated");
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("reduction", b.getStringAttr(op.getReduction()))};
  if (op.getIgnoreIndex())
    attrs.push_back(b.getNamedAttr("ignore_index",
                                   b.getI64IntegerAttr(*op.getIgnoreIndex())));
  SmallVector<Value> operands = {op.getTarget(), r.g};
  if (!isa<NoneType>(op.getWeight().getType()))
    operands.push_back(op.getWeight());
  r.give(0, r.bb.op<mlir::fsdp::NllLossGradOp>(op.getInput().getType(),
                                               operands, attrs));
  return success();
}

} // namespace

void mlir::fsdp::detail::attachReductionGradients(MLIRContext &ctx) {
  attachGradient<ReduceSumOp, backward>(ctx);
  attachGradient<ReduceMeanOp, backward>(ctx);
  attachGradient<ReduceMaxOp, backward>(ctx);
  attachGradient<ReduceMinOp, backward>(ctx);
  attachGradient<ReduceL1Op, backward>(ctx);
  attachGradient<ReduceL2Op, backward>(ctx);
  attachGradient<ReduceSumSquareOp, backward>(ctx);
  attachGradient<ReduceLogSumOp, backward>(ctx);
  attachGradient<ReduceLogSumExpOp, backward>(ctx);
  attachGradient<SoftmaxOp, backward>(ctx);
  attachGradient<LogSoftmaxOp, backward>(ctx);
  attachGradient<LayerNormalizationOp, backward>(ctx);
  attachGradient<SoftmaxCrossEntropyLossOp, backward>(ctx);
  attachGradient<NegativeLogLikelihoodLossOp, backward>(ctx);
}

void mlir::fsdp::detail::attachCrossEntropyGradient(MLIRContext &ctx) {
  attachGradient<mlir::fsdp::SoftmaxCrossEntropyOp, backward>(ctx);
}
