//===- Elementwise.cpp - Gradients of elementwise onnx ops ----------------===//
//
/// Arithmetic and activations: each operand's cotangent is g times the
/// partial derivative, summed back over broadcast dimensions (Rule::give).
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::GradientContext;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::Rule;
using mlir::fsdp::detail::typeOf;

namespace {

LogicalResult backward(AddOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.g);
  r.give(1, r.g);
  return success();
}

LogicalResult backward(SubOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.g);
  if (r.active(op.getB()))
    r.give(1, r.bb.op<NegOp>(r.yt, {r.g}));
  return success();
}

LogicalResult backward(MulOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  if (r.active(op.getA()))
    r.give(0, r.bb.mul(r.g, op.getB(), r.yt));
  if (r.active(op.getB()))
    r.give(1, r.bb.mul(r.g, op.getA(), r.yt));
  return success();
}

LogicalResult backward(DivOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  if (r.active(op.getA()))
    r.give(0, bb.op<DivOp>(r.yt, {r.g, op.getB()}));
  if (r.active(op.getB())) // -g * y / b
    r.give(1, bb.op<NegOp>(r.yt, {bb.op<DivOp>(r.yt, {bb.mul(r.g, r.y, r.yt),
                                                      op.getB()})}));
  return success();
}

LogicalResult backward(NegOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.bb.op<NegOp>(r.yt, {r.g}));
  return success();
}

LogicalResult backward(ReluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto mask = RankedTensorType::get(typeOf(r.y).getShape(), bb.b.getI1Type());
  Value positive = bb.op<GreaterOp>(mask, {op.getX(), bb.scalar(0, r.element)});
  r.give(0, bb.op<WhereOp>(r.yt, {positive, r.g, bb.scalar(0, r.element)}));
  return success();
}

LogicalResult backward(TanhOp op, GradientContext &ctx) { // g * (1 - y^2)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value oneMinus =
      bb.op<SubOp>(r.yt, {bb.scalar(1, r.element), bb.mul(r.y, r.y, r.yt)});
  r.give(0, bb.mul(r.g, oneMinus, r.yt));
  return success();
}

LogicalResult backward(SigmoidOp op, GradientContext &ctx) { // g y (1 - y)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value oneMinus = bb.op<SubOp>(r.yt, {bb.scalar(1, r.element), r.y});
  r.give(0, bb.mul(bb.mul(r.g, r.y, r.yt), oneMinus, r.yt));
  return success();
}

LogicalResult backward(LogOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.bb.op<DivOp>(r.yt, {r.g, op.getX()}));
  return success();
}

LogicalResult backward(AbsOp op, GradientContext &ctx) {
  // g * sign(x), 0 at 0 (as torch).
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX(), zero = bb.scalar(0, r.element);
  auto mask = RankedTensorType::get(typeOf(r.y).getShape(), bb.b.getI1Type());
  Value negative = bb.op<WhereOp>(
      r.yt, {bb.op<LessOp>(mask, {x, zero}), bb.op<NegOp>(r.yt, {r.g}), zero});
  r.give(0, bb.op<WhereOp>(r.yt,
                           {bb.op<GreaterOp>(mask, {x, zero}), r.g, negative}));
  return success();
}

LogicalResult backward(CastOp op, GradientContext &ctx) {
  // Between float types: the cotangent cast back (ONNX's type codes).
  Rule r(op, ctx);
  Type from = typeOf(op.getInput()).getElementType();
  if (from == r.element) {
    r.give(0, r.g);
    return success();
  }
  int64_t code = from.isF32()    ? 1
                 : from.isF16()  ? 10
                 : from.isF64()  ? 11
                 : from.isBF16() ? 16
                                 : 0;
  if (!code || !isa<FloatType>(r.element))
    return op->emitOpError("only casts between float "
                           "types have a gradient rule");
  OpBuilder &b = r.bb.b;
  r.give(0, r.bb.op<CastOp>(op.getInput().getType(), {r.g},
                            {b.getNamedAttr("to", b.getI64IntegerAttr(code))}));
  return success();
}

LogicalResult backward(SumOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    r.give(i, r.g);
  return success();
}

LogicalResult backward(ExpOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.bb.mul(r.g, r.y, r.yt));
  return success();
}

LogicalResult backward(ErfOp op, GradientContext &ctx) {
  // g * 2/sqrt(pi) * exp(-x^2)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX();
  Value e = bb.op<ExpOp>(r.yt, {bb.op<NegOp>(r.yt, {bb.mul(x, x, r.yt)})});
  r.give(0,
         bb.mul(r.g, bb.mul(e, bb.scalar(1.1283791670955126, r.element), r.yt),
                r.yt));
  return success();
}

LogicalResult backward(PowOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto constant = op.getB().getDefiningOp<ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseFPElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != 1 || r.active(op.getB()))
    return op->emitOpError("only Pow by a constant scalar "
                           "has a gradient rule yet");
  double c = (*dense.getValues<APFloat>().begin()).convertToDouble();
  Value x = op.getA();
  Value d =
      c == 2.0 ? x : bb.op<PowOp>(typeOf(x), {x, bb.scalar(c - 1, r.element)});
  r.give(0, bb.mul(r.g, bb.mul(d, bb.scalar(c, r.element), typeOf(x)), r.yt));
  return success();
}

LogicalResult backward(SqrtOp op, GradientContext &ctx) { // g / (2 y)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  r.give(0,
         bb.op<DivOp>(r.yt, {r.g, bb.mul(r.y, bb.scalar(2, r.element), r.yt)}));
  return success();
}

LogicalResult backward(ReciprocalOp op, GradientContext &ctx) { // -g y^2
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  r.give(0, bb.op<NegOp>(r.yt, {bb.mul(r.g, bb.mul(r.y, r.y, r.yt), r.yt)}));
  return success();
}

/// A training Dropout (fsdp-autodiff keeps only those that drop, each with
/// its mask): g / (1 - p) where the forward kept, 0 elsewhere, with the
/// forward's own scale (1 / (1 - p) in f32, as torch).
LogicalResult backward(DropoutOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  auto ratio = op.getRatio().getDefiningOp<ConstantOp>();
  auto dense = ratio ? dyn_cast<DenseFPElementsAttr>(ratio.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != 1 ||
      isa<NoneType>(op.getMask().getType()))
    return op.emitOpError("has no gradient rule without a constant ratio and "
                          "its mask");
  double p = (*dense.getValues<APFloat>().begin()).convertToDouble();
  float scale = 1.0f / static_cast<float>(1.0 - p);
  OnnxBuilder &bb = r.bb;
  Value zero = bb.scalar(0, r.element);
  r.give(0, bb.op<WhereOp>(r.yt, {op.getMask(),
                                  bb.mul(r.g, bb.scalar(scale, r.element), r.yt),
                                  zero}));
  return success();
}

LogicalResult backward(WhereOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value zero = bb.scalar(0, r.element);
  if (r.active(op->getOperand(1)))
    r.give(1, bb.op<WhereOp>(r.yt, {op.getCondition(), r.g, zero}));
  if (r.active(op->getOperand(2)))
    r.give(2, bb.op<WhereOp>(r.yt, {op.getCondition(), zero, r.g}));
  return success();
}

/// A bool tensor of `like`'s shape.
RankedTensorType maskLike(Value like, OnnxBuilder &bb) {
  return RankedTensorType::get(typeOf(like).getShape(), bb.b.getI1Type());
}

/// x > 0 ? positive : otherwise, the shape of the ELU family's gradients.
Value wherePositive(Rule &r, Value x, Value positive, Value otherwise) {
  OnnxBuilder &bb = r.bb;
  Value mask = bb.op<GreaterOp>(maskLike(x, bb), {x, bb.scalar(0, r.element)});
  return bb.op<WhereOp>(r.yt, {mask, positive, otherwise});
}

// g * alpha where the line alpha x + beta is inside (0, 1), i.e. where y
// is; 0 where it saturates (torch's hardsigmoid backward).
LogicalResult backward(HardSigmoidOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  RankedTensorType mask = maskLike(r.y, bb);
  Value inside = bb.op<AndOp>(
      mask, {bb.op<GreaterOp>(mask, {r.y, bb.scalar(0, r.element)}),
             bb.op<LessOp>(mask, {r.y, bb.scalar(1, r.element)})});
  Value slope = bb.scalar(op.getAlpha().convertToDouble(), r.element);
  r.give(0, bb.op<WhereOp>(r.yt, {inside, bb.mul(r.g, slope, r.yt),
                                  bb.scalar(0, r.element)}));
  return success();
}

// torch's hardswish backward: 0 below -3, g (x / 3 + 1/2) up to 3, g above.
LogicalResult backward(HardSwishOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  RankedTensorType mask = maskLike(r.y, bb);
  Value x = op.getX();
  Value ramp = bb.add(bb.op<DivOp>(r.yt, {x, bb.scalar(3, r.element)}),
                      bb.scalar(0.5, r.element));
  Value upper = bb.op<WhereOp>(
      r.yt, {bb.op<LessOrEqualOp>(mask, {x, bb.scalar(3, r.element)}),
             bb.mul(r.g, ramp, r.yt), r.g});
  r.give(0, bb.op<WhereOp>(r.yt,
                           {bb.op<LessOp>(mask, {x, bb.scalar(-3, r.element)}),
                            bb.scalar(0, r.element), upper}));
  return success();
}

// torch's prelu backward: dX = x > 0 ? g : slope g; dslope = x > 0 ? 0 :
// x g, summed over the dimensions the slope was broadcast along.
LogicalResult backward(PReluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX(), zero = bb.scalar(0, r.element);
  Value positive = bb.op<GreaterOp>(maskLike(x, bb), {x, zero});
  if (r.active(x))
    r.give(0, bb.op<WhereOp>(
                  r.yt, {positive, r.g, bb.mul(r.g, op.getSlope(), r.yt)}));
  if (r.active(op.getSlope()))
    r.give(1, bb.op<WhereOp>(r.yt, {positive, zero, bb.mul(r.g, x, r.yt)}));
  return success();
}

// torch's elu backward from the result: x > 0 ? g : g (y + alpha).
LogicalResult backward(EluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX();
  Value negative = bb.mul(
      r.g, bb.add(r.y, bb.scalar(op.getAlpha().convertToDouble(), r.element)),
      r.yt);
  r.give(0, wherePositive(r, x, r.g, negative));
  return success();
}


// torch's leaky_relu backward: x > 0 ? g : slope g.
LogicalResult backward(LeakyReluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX();
  Value slope = bb.scalar(op.getAlpha().convertToDouble(), r.element);
  r.give(0, wherePositive(r, x, r.g, bb.mul(r.g, slope, r.yt)));
  return success();
}

// torch's selu backward from the input: x > 0 ? gamma g : gamma alpha e^x g.
LogicalResult backward(SeluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX();
  double gamma = op.getGamma().convertToDouble();
  double alpha = op.getAlpha().convertToDouble();
  Value negative =
      bb.mul(r.g,
             bb.mul(bb.op<ExpOp>(r.yt, {x}), bb.scalar(gamma * alpha, r.element),
                    r.yt),
             r.yt);
  r.give(0, wherePositive(r, x, bb.mul(r.g, bb.scalar(gamma, r.element), r.yt),
                          negative));
  return success();
}

// torch's celu backward: x > 0 ? g : g e^(x / alpha).
LogicalResult backward(CeluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value x = op.getX();
  Value scaled = bb.op<DivOp>(
      r.yt, {x, bb.scalar(op.getAlpha().convertToDouble(), r.element)});
  r.give(0, wherePositive(r, x, r.g,
                          bb.mul(r.g, bb.op<ExpOp>(r.yt, {scaled}), r.yt)));
  return success();
}

// softplus = log(1 + e^x): g sigmoid(x), as torch's at beta 1.
LogicalResult backward(SoftplusOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.bb.mul(r.g, r.bb.op<SigmoidOp>(r.yt, {op.getX()}), r.yt));
  return success();
}

// softsign = x / (1 + |x|): g / (1 + |x|)^2.
LogicalResult backward(SoftsignOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value onePlus = bb.add(bb.op<AbsOp>(r.yt, {op.getX()}), bb.scalar(1, r.element));
  r.give(0, bb.op<DivOp>(r.yt, {r.g, bb.mul(onePlus, onePlus, r.yt)}));
  return success();
}

LogicalResult backward(SinOp op, GradientContext &ctx) { // g cos(x)
  Rule r(op, ctx);
  r.give(0, r.bb.mul(r.g, r.bb.op<CosOp>(r.yt, {op.getX()}), r.yt));
  return success();
}

LogicalResult backward(CosOp op, GradientContext &ctx) { // -g sin(x)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  r.give(0, bb.op<NegOp>(r.yt, {bb.mul(r.g, bb.op<SinOp>(r.yt, {op.getX()}),
                                       r.yt)}));
  return success();
}

LogicalResult backward(TanOp op, GradientContext &ctx) { // g (1 + y^2)
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  r.give(0, bb.mul(r.g, bb.add(bb.mul(r.y, r.y, r.yt), bb.scalar(1, r.element)),
                   r.yt));
  return success();
}

LogicalResult backward(SinhOp op, GradientContext &ctx) { // g cosh(x)
  Rule r(op, ctx);
  r.give(0, r.bb.mul(r.g, r.bb.op<CoshOp>(r.yt, {op.getX()}), r.yt));
  return success();
}

LogicalResult backward(CoshOp op, GradientContext &ctx) { // g sinh(x)
  Rule r(op, ctx);
  r.give(0, r.bb.mul(r.g, r.bb.op<SinhOp>(r.yt, {op.getX()}), r.yt));
  return success();
}

/// g / sqrt(inner): the inverse trigonometric and hyperbolic functions.
Value overSqrt(Rule &r, Value inner) {
  return r.bb.op<DivOp>(r.yt, {r.g, r.bb.op<SqrtOp>(r.yt, {inner})});
}

/// 1 - x^2 (asin, acos).
Value oneMinusSquare(Rule &r, Value x) {
  return r.bb.op<SubOp>(r.yt, {r.bb.scalar(1, r.element), r.bb.mul(x, x, r.yt)});
}

LogicalResult backward(AsinOp op, GradientContext &ctx) { // g / sqrt(1 - x^2)
  Rule r(op, ctx);
  r.give(0, overSqrt(r, oneMinusSquare(r, op.getX())));
  return success();
}

LogicalResult backward(AcosOp op, GradientContext &ctx) { // -g / sqrt(1 - x^2)
  Rule r(op, ctx);
  r.give(0, r.bb.op<NegOp>(r.yt, {overSqrt(r, oneMinusSquare(r, op.getX()))}));
  return success();
}

LogicalResult backward(AsinhOp op, GradientContext &ctx) { // g / sqrt(x^2 + 1)
  Rule r(op, ctx);
  Value x = op.getX();
  r.give(0, overSqrt(r, r.bb.add(r.bb.mul(x, x, r.yt), r.bb.scalar(1, r.element))));
  return success();
}

LogicalResult backward(AcoshOp op, GradientContext &ctx) { // g / sqrt(x^2 - 1)
  Rule r(op, ctx);
  Value x = op.getX();
  r.give(0, overSqrt(r, r.bb.op<SubOp>(r.yt, {r.bb.mul(x, x, r.yt),
                                              r.bb.scalar(1, r.element)})));
  return success();
}

LogicalResult backward(AtanOp op, GradientContext &ctx) { // g / (1 + x^2)
  Rule r(op, ctx);
  Value x = op.getX();
  r.give(0, r.bb.op<DivOp>(r.yt, {r.g, r.bb.add(r.bb.mul(x, x, r.yt),
                                                r.bb.scalar(1, r.element))}));
  return success();
}

LogicalResult backward(AtanhOp op, GradientContext &ctx) { // g / (1 - x^2)
  Rule r(op, ctx);
  r.give(0, r.bb.op<DivOp>(r.yt, {r.g, oneMinusSquare(r, op.getX())}));
  return success();
}

/// Floor, Ceil, Round and Sign are flat almost everywhere: torch's gradient
/// is zero, so no operand receives anything.
template <typename OpT>
LogicalResult flat(OpT, GradientContext &) {
  return success();
}

// torch's clamp backward: g where min <= x <= max (bounds included), 0
// elsewhere; an absent bound does not limit.
LogicalResult backward(ClipOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  for (Value bound : {op.getMin(), op.getMax()})
    if (bound && !isa<NoneType>(bound.getType()) && r.active(bound))
      return op.emitOpError("has a gradient rule for its input only, not for "
                            "trainable bounds");
  Value x = op.getInput();
  RankedTensorType mask = maskLike(r.y, bb);
  Value inside;
  auto limit = [&](Value bound, bool lower) {
    if (!bound || isa<NoneType>(bound.getType()))
      return;
    Value ok = lower ? Value(bb.op<GreaterOrEqualOp>(mask, {x, bound}))
                     : Value(bb.op<LessOrEqualOp>(mask, {x, bound}));
    inside = inside ? Value(bb.op<AndOp>(mask, {inside, ok})) : ok;
  };
  limit(op.getMin(), true);
  limit(op.getMax(), false);
  r.give(0, inside ? bb.op<WhereOp>(r.yt, {inside, r.g, bb.scalar(0, r.element)})
                   : r.g);
  return success();
}

/// torch's maximum / minimum backward: the gradient goes to the input that
/// won, split in halves on ties. `wins` is Greater for Max, Less for Min.
template <typename OpT, typename WinsOp>
LogicalResult extremum(OpT op, GradientContext &ctx) {
  Rule r(op, ctx);
  if (op->getNumOperands() == 1) {
    r.give(0, r.g);
    return success();
  }
  if (op->getNumOperands() != 2)
    return op.emitOpError("has a gradient rule for one or two inputs only, "
                          "not ")
           << op->getNumOperands();
  OnnxBuilder &bb = r.bb;
  Value a = op->getOperand(0), b = op->getOperand(1);
  RankedTensorType mask = maskLike(r.y, bb);
  Value zero = bb.scalar(0, r.element);
  Value half = bb.mul(r.g, bb.scalar(0.5, r.element), r.yt);
  // What the loser gets: half the gradient on a tie, else nothing.
  Value tied = bb.op<WhereOp>(r.yt, {bb.op<EqualOp>(mask, {a, b}), half, zero});
  if (r.active(a))
    r.give(0, bb.op<WhereOp>(r.yt, {bb.op<WinsOp>(mask, {a, b}), r.g, tied}));
  if (r.active(b))
    r.give(1, bb.op<WhereOp>(r.yt, {bb.op<WinsOp>(mask, {b, a}), r.g, tied}));
  return success();
}

LogicalResult backward(MaxOp op, GradientContext &ctx) {
  return extremum<MaxOp, GreaterOp>(op, ctx);
}

LogicalResult backward(MinOp op, GradientContext &ctx) {
  return extremum<MinOp, LessOp>(op, ctx);
}

} // namespace

void mlir::fsdp::detail::attachElementwiseGradients(MLIRContext &ctx) {
  attachGradient<AddOp, backward>(ctx);
  attachGradient<SubOp, backward>(ctx);
  attachGradient<MulOp, backward>(ctx);
  attachGradient<DivOp, backward>(ctx);
  attachGradient<NegOp, backward>(ctx);
  attachGradient<ReluOp, backward>(ctx);
  attachGradient<TanhOp, backward>(ctx);
  attachGradient<SigmoidOp, backward>(ctx);
  attachGradient<LogOp, backward>(ctx);
  attachGradient<AbsOp, backward>(ctx);
  attachGradient<CastOp, backward>(ctx);
  attachGradient<SumOp, backward>(ctx);
  attachGradient<ExpOp, backward>(ctx);
  attachGradient<ErfOp, backward>(ctx);
  attachGradient<PowOp, backward>(ctx);
  attachGradient<SqrtOp, backward>(ctx);
  attachGradient<ReciprocalOp, backward>(ctx);
  attachGradient<WhereOp, backward>(ctx);
  attachGradient<HardSigmoidOp, backward>(ctx);
  attachGradient<HardSwishOp, backward>(ctx);
  attachGradient<PReluOp, backward>(ctx);
  attachGradient<EluOp, backward>(ctx);
  attachGradient<DropoutOp, backward>(ctx);
  attachGradient<LeakyReluOp, backward>(ctx);
  attachGradient<SeluOp, backward>(ctx);
  attachGradient<CeluOp, backward>(ctx);
  attachGradient<SoftplusOp, backward>(ctx);
  attachGradient<SoftsignOp, backward>(ctx);
  attachGradient<SinOp, backward>(ctx);
  attachGradient<CosOp, backward>(ctx);
  attachGradient<TanOp, backward>(ctx);
  attachGradient<SinhOp, backward>(ctx);
  attachGradient<CoshOp, backward>(ctx);
  attachGradient<AsinOp, backward>(ctx);
  attachGradient<AcosOp, backward>(ctx);
  attachGradient<AsinhOp, backward>(ctx);
  attachGradient<AcoshOp, backward>(ctx);
  attachGradient<AtanOp, backward>(ctx);
  attachGradient<AtanhOp, backward>(ctx);
  attachGradient<FloorOp, flat<FloorOp>>(ctx);
  attachGradient<CeilOp, flat<CeilOp>>(ctx);
  attachGradient<RoundOp, flat<RoundOp>>(ctx);
  attachGradient<SignOp, flat<SignOp>>(ctx);
  attachGradient<ClipOp, backward>(ctx);
  attachGradient<MaxOp, backward>(ctx);
  attachGradient<MinOp, backward>(ctx);
}
