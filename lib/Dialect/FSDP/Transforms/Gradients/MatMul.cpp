//===- MatMul.cpp - Gradients of matrix products --------------------------===//
//
/// dA = g B^T and dB = A^T g, for numpy's batched and vector forms
/// (MatMul), ONNX's transposed and scaled one (Gemm) and any product of
/// distinct letters (Einsum).
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::GradientContext;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::Rule;
using mlir::fsdp::detail::typeOf;

namespace {

LogicalResult backward(MatMulOp op, GradientContext &ctx) {
  // dA = g @ B^T, dB = A^T @ g, summed over broadcast batch dims. A 1-D A
  // is a [1, K] matrix and a 1-D B a [K, 1] one, as in numpy; the product
  // drops those dims, so g gets them back first.
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  Value a = op.getA(), b = op.getB();
  auto aType = typeOf(a), bType = typeOf(b);
  SmallVector<int64_t> gShape(typeOf(r.g).getShape());
  if (bType.getRank() == 1)
    gShape.push_back(1);
  if (aType.getRank() == 1)
    gShape.insert(gShape.end() - 1, 1);
  auto promote = [&](Value v, ArrayRef<int64_t> shape) {
    return bb.reshape(v, RankedTensorType::get(shape, r.element));
  };
  Value a2 = aType.getRank() == 1 ? promote(a, {1, aType.getDimSize(0)}) : a;
  Value b2 = bType.getRank() == 1 ? promote(b, {bType.getDimSize(0), 1}) : b;
  Value g2 = promote(r.g, gShape);
  if (r.active(a)) {
    SmallVector<int64_t> shape(gShape);
    shape.back() = typeOf(a2).getShape().back();
    Value d = bb.op<MatMulOp>(RankedTensorType::get(shape, r.element),
                              {g2, bb.swapLast(b2)});
    r.give(0, bb.reshape(bb.sumTo(d, typeOf(a2)), aType));
  }
  if (r.active(b) && typeOf(b2).getRank() == 2 && typeOf(a2).getRank() > 2) {
    // One B for every batch element (a Linear's weight): the batch folds
    // into the contraction, dB = A'^T g' with A' = [rows, K], never a
    // per-element [.., K, N] product summed afterwards.
    int64_t k = typeOf(a2).getShape().back(), n = gShape.back();
    int64_t rows = typeOf(a2).getNumElements() / std::max<int64_t>(k, 1);
    Value aRows = promote(a2, {rows, k});
    Value gRows = promote(g2, {rows, n});
    Value d = bb.op<MatMulOp>(RankedTensorType::get({k, n}, r.element),
                              {bb.transpose(aRows, {1, 0}), gRows});
    r.give(1, bb.reshape(d, bType));
  } else if (r.active(b)) {
    SmallVector<int64_t> shape(gShape);
    shape[shape.size() - 2] = typeOf(b2).getShape().drop_back().back();
    Value d = bb.op<MatMulOp>(RankedTensorType::get(shape, r.element),
                              {bb.swapLast(a2), g2});
    r.give(1, bb.reshape(bb.sumTo(d, typeOf(b2)), bType));
  }
  return success();
}

LogicalResult backward(GemmOp op, GradientContext &ctx) {
  // Y = alpha * op(A) op(B) + beta * C.
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  double alpha = op.getAlpha().convertToDouble();
  Value ga = r.g;
  if (alpha != 1.0)
    ga = bb.mul(r.g, bb.scalar(alpha, r.element), r.yt);
  Value a = op.getA(), b = op.getB();
  Value opA = op.getTransA() ? bb.transpose(a, {1, 0}) : a;
  Value opB = op.getTransB() ? bb.transpose(b, {1, 0}) : b;
  if (r.active(a)) { // d op(A) = g op(B)^T
    Value d = bb.op<MatMulOp>(typeOf(opA), {ga, bb.transpose(opB, {1, 0})});
    r.give(0, op.getTransA() ? bb.transpose(d, {1, 0}) : d);
  }
  if (r.active(b)) { // d op(B) = op(A)^T g
    Value d = bb.op<MatMulOp>(typeOf(opB), {bb.transpose(opA, {1, 0}), ga});
    r.give(1, op.getTransB() ? bb.transpose(d, {1, 0}) : d);
  }
  if (!isa<NoneType>(op.getC().getType()) && r.active(op.getC())) {
    double beta = op.getBeta().convertToDouble();
    r.give(2,
           beta == 1.0 ? r.g : bb.mul(r.g, bb.scalar(beta, r.element), r.yt));
  }
  return success();
}

/// The gradient of an Einsum operand is the Einsum of the cotangent with
/// the other operands giving that operand's letters: y = sum over the
/// dropped letters of prod_i x_i, so dy/dx_i is the product of the others.
/// A letter of x_i that neither the output nor another operand has (the
/// forward summed it away) is absent from that Einsum and broadcast back
/// (Expand); a size-1 dim the forward broadcast is summed back
/// (Rule::give). The Einsums lower as the forward's do.
LogicalResult backward(EinsumOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  OpBuilder &b = ctx.getBuilder();
  ValueRange inputs = op.getInputs();
  SmallVector<int64_t> ranks;
  for (Value input : inputs)
    ranks.push_back(typeOf(input).getRank());
  FailureOr<EinsumTerms> terms = einsumTerms(op.getEquation(), ranks);
  if (failed(terms) || terms->inputs.size() != inputs.size())
    return op->emitOpError() << "equation \"" << op.getEquation()
                             << "\" does not fit its operands";
  for (auto [i, x] : llvm::enumerate(inputs)) {
    if (!r.active(x))
      continue;
    StringRef own = terms->inputs[i];
    // The cotangent and the other operands, with the size of each letter.
    SmallVector<Value> operands = {r.g};
    SmallVector<std::string> read = {terms->output};
    for (auto [j, other] : llvm::enumerate(inputs))
      if (j != i) {
        operands.push_back(other);
        read.push_back(terms->inputs[j]);
      }
    std::map<char, int64_t> sizes;
    for (auto [term, value] : llvm::zip(read, operands))
      for (auto [c, size] : llvm::zip(term, typeOf(value).getShape()))
        sizes[c] = std::max(sizes[c], size);
    std::string kept;
    SmallVector<int64_t> keptShape, ones, full;
    for (auto [c, size] : llvm::zip(own, typeOf(x).getShape())) {
      if (own.find(c) != own.rfind(c))
        return op->emitOpError()
               << "equation \"" << op.getEquation() << "\" repeats the letter '"
               << c
               << "' within one operand's term (a diagonal), which has no "
                  "gradient rule";
      bool there = sizes.count(c);
      if (there) {
        kept.push_back(c);
        keptShape.push_back(sizes[c]);
      }
      ones.push_back(there ? sizes[c] : 1);
      full.push_back(there ? sizes[c] : size);
    }
    Value d = r.g;
    if (operands.size() > 1 || read[0] != kept) {
      std::string equation = llvm::join(read, ",") + "->" + kept;
      d = bb.op<EinsumOp>(
          RankedTensorType::get(keptShape, r.element), operands,
          {b.getNamedAttr("equation", b.getStringAttr(equation))});
    }
    if (kept.size() != own.size())
      d = bb.op<ExpandOp>(
          RankedTensorType::get(full, r.element),
          {bb.reshape(d, RankedTensorType::get(ones, r.element)),
           bb.ints(full)});
    r.give(i, d);
  }
  return success();
}

} // namespace

void mlir::fsdp::detail::attachMatMulGradients(MLIRContext &ctx) {
  attachGradient<MatMulOp, backward>(ctx);
  attachGradient<GemmOp, backward>(ctx);
  attachGradient<EinsumOp, backward>(ctx);
}
