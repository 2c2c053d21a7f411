//===- Recurrent.cpp - Gradients of LSTM, GRU and RNN ---------------------===//
//
/// A recurrent op's gradient is one fsdp.recurrent_grad over the whole
/// sequence (back-propagation through time in one kernel) from the
/// cotangents of Y, Y_h and LSTM's Y_c, zeros for those the loss does not
/// reach; it gives X, W, R, B and the initial states theirs.
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::GradientContext;
using mlir::fsdp::RecurrentGradOp;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::typeOf;

namespace {

template <typename RecurrentOp>
LogicalResult recurrentBackward(RecurrentOp op, GradientContext &ctx,
                                StringRef cell, Value initialC) {
  std::string why = recurrentUnsupported(op);
  if (!why.empty())
    return op->emitOpError("has no gradient: ") << why;
  OnnxBuilder bb(ctx.getBuilder(), op->getLoc());
  OpBuilder &b = bb.b;
  auto present = [](Value v) { return v && !isa<NoneType>(v.getType()); };
  SmallVector<Value> inputs = {op.getX(), op.getW(), op.getR()};
  // B, initial_h and initial_c take the results from dB on, in order.
  SmallVector<Value> optional = {op.getB(), op.getInitialH()};
  if (initialC)
    optional.push_back(initialC);
  for (Value value : optional)
    if (present(value))
      inputs.push_back(value);
  SmallVector<Type> resultTypes = recurrentResultTypes(op);
  for (auto [result, type] : llvm::zip(op->getResults(), resultTypes)) {
    Value g =
        isa<NoneType>(result.getType()) ? Value() : ctx.getCotangent(result);
    inputs.push_back(g ? g : bb.zeros(cast<RankedTensorType>(type)));
  }
  Type element = typeOf(op.getX()).getElementType();
  SmallVector<Type> gradTypes = {op.getX().getType(), op.getW().getType(),
                                 op.getR().getType()};
  int64_t biases = 2 * op.getGateCount() * op.getHiddenSize();
  gradTypes.push_back(
      RankedTensorType::get({op.getDirectionCount(), biases}, element));
  for (unsigned i = 1; i < resultTypes.size(); ++i)
    gradTypes.push_back(resultTypes[i]);
  int64_t linearBeforeReset = 0;
  if constexpr (std::is_same_v<RecurrentOp, GRUOp>)
    linearBeforeReset = op.getLinearBeforeReset() != 0;
  auto grad = b.create<RecurrentGradOp>(
      op->getLoc(), gradTypes, inputs, b.getStringAttr(cell),
      b.getI64IntegerAttr(op.getHiddenSize()), op.getDirectionAttr(),
      b.getI64IntegerAttr(op.getLayout()),
      b.getI64IntegerAttr(linearBeforeReset),
      b.getI64IntegerAttr(present(op.getB())),
      b.getI64IntegerAttr(present(op.getInitialH())),
      b.getI64IntegerAttr(present(initialC)));
  for (unsigned i = 0; i < 3; ++i)
    if (ctx.isActive(op->getOperand(i)))
      ctx.accumulate(op->getOperand(i), grad.getResult(i));
  for (auto [index, value] : llvm::enumerate(optional)) {
    if (present(value) && ctx.isActive(value))
      ctx.accumulate(value, grad.getResult(3 + index));
  }
  return success();
}

LogicalResult backward(LSTMOp op, GradientContext &ctx) {
  return recurrentBackward(op, ctx, "lstm", op.getInitialC());
}
LogicalResult backward(GRUOp op, GradientContext &ctx) {
  return recurrentBackward(op, ctx, "gru", Value());
}
LogicalResult backward(RNNOp op, GradientContext &ctx) {
  return recurrentBackward(op, ctx, "rnn", Value());
}

} // namespace

void mlir::fsdp::detail::attachRecurrentGradients(MLIRContext &ctx) {
  attachGradient<LSTMOp, backward, /*everyResult=*/true>(ctx);
  attachGradient<GRUOp, backward, /*everyResult=*/true>(ctx);
  attachGradient<RNNOp, backward, /*everyResult=*/true>(ctx);
}
