//===- OnnxBuilder.h - Building onnx ops in the FSDP passes -----*- C++ -*-===//
//
/// What the passes that write computation as `onnx` ops (fsdp-autodiff,
/// fsdp-optimizer) share: one builder with shapes worked out.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ONNXBUILDER_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ONNXBUILDER_H

#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <numeric>
#include <optional>
#include <type_traits>

namespace mlir::fsdp::detail {

/// The values of a constant integer tensor, if `value` is one.
inline std::optional<SmallVector<int64_t>> constantInts(Value value) {
  auto constant = value.getDefiningOp<onnxir::ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue()) : nullptr;
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> values;
  for (const APInt &v : dense.getValues<APInt>())
    values.push_back(v.getSExtValue());
  return values;
}

inline RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Builds backward ops before the function's return.
class OnnxBuilder {
  using ConstantOp = onnxir::ConstantOp;
  using AddOp = onnxir::AddOp;
  using MulOp = onnxir::MulOp;
  using ReshapeOp = onnxir::ReshapeOp;
  using TransposeOp = onnxir::TransposeOp;
  using ReduceSumOp = onnxir::ReduceSumOp;
  using ConcatOp = onnxir::ConcatOp;

public:
  OnnxBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  template <typename OpTy>
  Value op(Type type, ValueRange operands,
           ArrayRef<NamedAttribute> attrs = {}) {
    return b.create<OpTy>(loc, TypeRange{type}, operands, attrs)->getResult(0);
  }

  Value scalar(double value, Type element) {
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }

  Value zeros(RankedTensorType type) { return splat(type, 0.0); }

  /// A floating-point `type` full of `value`.
  Value splat(Type type, double value) {
    auto shaped = cast<RankedTensorType>(type);
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(
                 shaped, b.getFloatAttr(shaped.getElementType(), value)));
  }

  Value ints(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      b.getI64Type());
    return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, values));
  }

  Value add(Value x, Value y) { return op<AddOp>(x.getType(), {x, y}); }
  Value mul(Value x, Value y, Type type) { return op<MulOp>(type, {x, y}); }

  Value reshape(Value x, RankedTensorType type) {
    if (x.getType() == type)
      return x;
    return op<ReshapeOp>(type, {x, ints(type.getShape())});
  }

  Value transpose(Value x, ArrayRef<int64_t> perm) {
    auto type = typeOf(x);
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(type.getDimSize(p));
    return op<TransposeOp>(
        RankedTensorType::get(shape, type.getElementType()), {x},
        {b.getNamedAttr("perm", b.getDenseI64ArrayAttr(perm))});
  }

  /// Swaps the last two dimensions.
  Value swapLast(Value x) {
    int64_t rank = typeOf(x).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(x, perm);
  }

  /// Reduces over `axes` keeping them (ReduceMean or ReduceSum).
  template <typename ReduceOp> Value reduce(Value x, ArrayRef<int64_t> axes) {
    auto type = typeOf(x);
    SmallVector<int64_t> kept(type.getShape());
    for (int64_t axis : axes)
      kept[axis] = 1;
    auto result = RankedTensorType::get(kept, type.getElementType());
    auto keep = b.getNamedAttr("keepdims", b.getI64IntegerAttr(1));
    if constexpr (std::is_same_v<ReduceOp, ReduceSumOp>)
      return op<ReduceSumOp>(result, {x, ints(axes)}, {keep});
    else
      return op<ReduceOp>(
          result, {x},
          {keep, b.getNamedAttr("axes", b.getDenseI64ArrayAttr(axes))});
  }

  /// A per-channel vector [C] shaped to broadcast over [N, C, spatial...].
  Value channels(Value v, int64_t rank) {
    SmallVector<int64_t> shape(rank, 1);
    shape[1] = typeOf(v).getNumElements();
    return reshape(v, RankedTensorType::get(shape, typeOf(v).getElementType()));
  }

  /// `x` with `before` and `after` zeros around it along `axis`.
  Value padAxis(Value x, int64_t axis, int64_t before, int64_t after) {
    auto type = typeOf(x);
    SmallVector<Value> pieces;
    auto zerosOf = [&](int64_t n) {
      SmallVector<int64_t> shape(type.getShape());
      shape[axis] = n;
      return zeros(RankedTensorType::get(shape, type.getElementType()));
    };
    if (before)
      pieces.push_back(zerosOf(before));
    pieces.push_back(x);
    if (after)
      pieces.push_back(zerosOf(after));
    if (pieces.size() == 1)
      return x;
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] += before + after;
    return op<ConcatOp>(RankedTensorType::get(shape, type.getElementType()),
                        pieces,
                        {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))});
  }

  /// Sums `g` over the dimensions broadcasting stretched to reach its shape
  /// from `target`'s.
  Value sumTo(Value g, RankedTensorType target) {
    auto type = typeOf(g);
    if (type.getShape() == target.getShape())
      return g;
    int64_t rank = type.getRank(), lead = rank - target.getRank();
    SmallVector<int64_t> axes, kept;
    for (int64_t i = 0; i < rank; ++i) {
      bool stretched = i < lead || (target.getDimSize(i - lead) == 1 &&
                                    type.getDimSize(i) != 1);
      if (stretched)
        axes.push_back(i);
      kept.push_back(stretched ? 1 : type.getDimSize(i));
    }
    Value summed = g;
    if (!axes.empty())
      summed = op<ReduceSumOp>(
          RankedTensorType::get(kept, type.getElementType()), {g, ints(axes)},
          {b.getNamedAttr("keepdims", b.getI64IntegerAttr(1))});
    return reshape(summed, target);
  }

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::fsdp::detail

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ONNXBUILDER_H
