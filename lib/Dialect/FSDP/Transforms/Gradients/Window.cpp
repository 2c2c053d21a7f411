//===- Window.cpp - Gradients of convolutions and pooling -----------------===//
//
/// Windowed ops: their gradients are fsdp ops carrying the forward's window
/// (fsdp.conv_grad_input, fsdp.conv_grad_weight, fsdp.pool_grad), except
/// the bias's and global pooling's, which are sums and broadcasts.
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

/// The explicit pads of a Conv or pool under its auto_pad (SigLIP's
/// padding="valid", TensorFlow's SAME), as the lowering resolves them for
/// the forward's kernel (onnxir::windowPads); fails, saying why, on one it
/// cannot resolve.
template <typename WindowOp>
FailureOr<SmallVector<int64_t>> explicitPads(WindowOp op,
                                             ArrayRef<int64_t> kernel) {
  std::string why;
  FailureOr<SmallVector<int64_t>> pads = windowPads(
      op.getAutoPad(), op.getPadsOrDefault(), op.getStridesOrDefault(),
      op.getDilationsOrDefault(), typeOf(op.getX()).getShape(), kernel, why);
  if (failed(pads))
    op->emitOpError(why);
  return pads;
}

LogicalResult backward(ConvOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  OpBuilder &b = bb.b;
  FailureOr<SmallVector<int64_t>> pads =
      explicitPads(op, typeOf(op.getW()).getShape().drop_front(2));
  if (failed(pads))
    return failure();
  SmallVector<NamedAttribute> window = {
      b.getNamedAttr("strides",
                     b.getDenseI64ArrayAttr(op.getStridesOrDefault())),
      b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
      b.getNamedAttr("dilations",
                     b.getDenseI64ArrayAttr(op.getDilationsOrDefault())),
      b.getNamedAttr("group", b.getI64IntegerAttr(op.getGroup()))};
  if (r.active(op.getX()))
    r.give(0, bb.op<mlir::fsdp::ConvGradInputOp>(op.getX().getType(),
                                                 {r.g, op.getW()}, window));
  if (r.active(op.getW()))
    r.give(1, bb.op<mlir::fsdp::ConvGradWeightOp>(op.getW().getType(),
                                                  {op.getX(), r.g}, window));
  if (!isa<NoneType>(op.getB().getType()) && r.active(op.getB())) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 0; i < op.getSpatialRank(); ++i)
      axes.push_back(2 + i);
    r.give(2, bb.reshape(bb.reduce<ReduceSumOp>(r.g, axes), typeOf(op.getB())));
  }
  return success();
}

/// ConvTranspose is the adjoint of the convolution it transposes in that
/// convolution's input: dX is that convolution of g by W, dW its weight
/// gradient with g as the input and X as the output gradient.
LogicalResult backward(ConvTransposeOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  OpBuilder &b = bb.b;
  std::string why;
  FailureOr<SmallVector<int64_t>> pads = convolutionPads(op, why);
  if (failed(pads))
    return op->emitOpError(why);
  SmallVector<NamedAttribute> window = {
      b.getNamedAttr("strides",
                     b.getDenseI64ArrayAttr(op.getStridesOrDefault())),
      b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
      b.getNamedAttr("dilations",
                     b.getDenseI64ArrayAttr(op.getDilationsOrDefault())),
      b.getNamedAttr("group", b.getI64IntegerAttr(op.getGroup()))};
  if (r.active(op.getX())) {
    Value none = b.create<NoValueOp>(op.getLoc(), b.getNoneType());
    r.give(0,
           bb.op<ConvOp>(op.getX().getType(), {r.g, op.getW(), none}, window));
  }
  if (r.active(op.getW()))
    r.give(1, bb.op<mlir::fsdp::ConvGradWeightOp>(op.getW().getType(),
                                                  {r.g, op.getX()}, window));
  if (!isa<NoneType>(op.getB().getType()) && r.active(op.getB())) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 0; i < op.getSpatialRank(); ++i)
      axes.push_back(2 + i);
    r.give(2, bb.reshape(bb.reduce<ReduceSumOp>(r.g, axes), typeOf(op.getB())));
  }
  return success();
}

/// MaxPool's and AveragePool's (1-D, 2-D or 3-D, as the forward lowers):
/// fsdp.pool_grad with the forward's window.
template <typename PoolOp>
LogicalResult poolBackward(PoolOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  Value x = op.getX();
  int64_t rank = typeOf(x).getRank();
  if (rank < 3 || rank > 5)
    return op->emitOpError("only 1-D, 2-D and 3-D pooling have a gradient "
                           "rule, not a pool over rank ")
           << rank;
  FailureOr<SmallVector<int64_t>> pads = explicitPads(op, op.getKernelShape());
  if (failed(pads))
    return failure();
  bool max = isa<MaxPoolOp>(op);
  if (max && op.getStorageOrder() != 0)
    return op->emitOpError("MaxPool storage_order 1 has "
                           "no gradient rule");
  OpBuilder &b = r.bb.b;
  r.give(
      0,
      r.bb.op<mlir::fsdp::PoolGradOp>(
          x.getType(), {x, r.g},
          {b.getNamedAttr("mode", b.getStringAttr(max ? "max" : "average")),
           b.getNamedAttr("kernel_shape",
                          b.getDenseI64ArrayAttr(op.getKernelShape())),
           b.getNamedAttr("strides",
                          b.getDenseI64ArrayAttr(op.getStridesOrDefault())),
           b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
           b.getNamedAttr("dilations",
                          b.getDenseI64ArrayAttr(op.getDilationsOrDefault())),
           b.getNamedAttr("ceil_mode", b.getI64IntegerAttr(op.getCeilMode())),
           b.getNamedAttr("count_include_pad",
                          b.getI64IntegerAttr(op.getCountIncludePad()))}));
  return success();
}

LogicalResult backward(MaxPoolOp op, GradientContext &ctx) {
  return poolBackward(op, ctx);
}

LogicalResult backward(AveragePoolOp op, GradientContext &ctx) {
  return poolBackward(op, ctx);
}

LogicalResult backward(GlobalAveragePoolOp op, GradientContext &ctx) {
  // g / |spatial|, spread out.
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto in = typeOf(op.getX());
  int64_t count = in.getNumElements() / (in.getDimSize(0) * in.getDimSize(1));
  Value scaled = bb.mul(r.g, bb.scalar(1.0 / count, r.element), r.yt);
  r.give(0, bb.op<ExpandOp>(in, {scaled, bb.ints(in.getShape())}));
  return success();
}

} // namespace

void mlir::fsdp::detail::attachWindowGradients(MLIRContext &ctx) {
  attachGradient<ConvOp, backward>(ctx);
  attachGradient<ConvTransposeOp, backward>(ctx);
  attachGradient<MaxPoolOp, backward>(ctx);
  attachGradient<AveragePoolOp, backward>(ctx);
  attachGradient<GlobalAveragePoolOp, backward>(ctx);
}
