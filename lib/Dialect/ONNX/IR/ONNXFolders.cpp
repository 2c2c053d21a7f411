//===- ONNXFolders.cpp - Constant folding of onnx ops ---------------------===//
//
/// Folds the shape computations torch exports (Shape -> Gather -> Unsqueeze
/// -> Concat -> Reshape and friends) once shapes are static, plus arithmetic
/// on small constants (and attention masks computed from shapes). Only constants up to kMaxFoldElements are computed
/// element by element, so folding never blows up the IR with large tensors;
/// splats (ConstantOfShape) and reshapes of constants stay cheap at any size.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::onnxir;

namespace {

// Hugging Face's attention masks are batch x 1 x T x T, built from shapes:
// 2^20 elements is T = 1024 at batch 1, folded in about a second.
constexpr int64_t kMaxFoldElements = 1 << 20;

/// A small dense constant, or null.
DenseElementsAttr smallConstant(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return nullptr;
  return dense;
}

/// The constant's values as int64 (for shapes, axes, indices), or nothing.
std::optional<SmallVector<int64_t>> intValues(Attribute attr) {
  DenseElementsAttr dense = smallConstant(attr);
  if (!dense || !dense.getElementType().isInteger())
    return std::nullopt;
  SmallVector<int64_t> values;
  for (const APInt &v : dense.getValues<APInt>())
    values.push_back(v.getSExtValue());
  return values;
}

RankedTensorType staticType(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() ? ranked : nullptr;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> result(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    result[i] = result[i + 1] * shape[i + 1];
  return result;
}

/// The index into an operand of `operandShape` that numpy broadcasting reads
/// for element `linear` of a result of `resultShape`.
int64_t broadcastIndex(int64_t linear, ArrayRef<int64_t> resultShape,
                       ArrayRef<int64_t> operandShape) {
  SmallVector<int64_t> resultStrides = strides(resultShape);
  SmallVector<int64_t> operandStrides = strides(operandShape);
  int64_t offset = resultShape.size() - operandShape.size();
  int64_t index = 0;
  for (size_t d = 0; d < resultShape.size(); ++d) {
    int64_t coord = (linear / resultStrides[d]) % resultShape[d];
    int64_t od = static_cast<int64_t>(d) - offset;
    if (od >= 0 && operandShape[od] != 1)
      index += coord * operandStrides[od];
  }
  return index;
}

/// Mod: the remainder with the divisor's sign (ONNX Mod, fmod = 0); FMod:
/// with the dividend's (fmod = 1, C's fmod).
enum class BinaryKind { Add, Sub, Mul, Div, Mod, FMod, Pow, Eq, Lt, Le, Gt, Ge, And, Or, Xor };

std::optional<APInt> foldInt(BinaryKind kind, const APInt &a, const APInt &b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    if (b.isZero())
      return std::nullopt;
    return a.sdiv(b);
  case BinaryKind::Mod:
  case BinaryKind::FMod: {
    if (b.isZero())
      return std::nullopt;
    APInt r = a.srem(b);
    if (kind == BinaryKind::Mod && !r.isZero() && r.isNegative() != b.isNegative())
      r += b;
    return r;
  }
  case BinaryKind::Eq:
    return APInt(1, a == b);
  case BinaryKind::Lt:
    return APInt(1, a.slt(b));
  case BinaryKind::Le:
    return APInt(1, a.sle(b));
  case BinaryKind::Gt:
    return APInt(1, a.sgt(b));
  case BinaryKind::Ge:
    return APInt(1, a.sge(b));
  case BinaryKind::And:
    return a & b;
  case BinaryKind::Or:
    return a | b;
  case BinaryKind::Xor:
    return a ^ b;
  case BinaryKind::Pow:
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<APFloat> foldFloat(BinaryKind kind, APFloat a, const APFloat &b) {
  switch (kind) {
  case BinaryKind::Add:
    a.add(b, APFloat::rmNearestTiesToEven);
    return a;
  case BinaryKind::Sub:
    a.subtract(b, APFloat::rmNearestTiesToEven);
    return a;
  case BinaryKind::Mul:
    a.multiply(b, APFloat::rmNearestTiesToEven);
    return a;
  case BinaryKind::Div:
    a.divide(b, APFloat::rmNearestTiesToEven);
    return a;
  case BinaryKind::FMod:
    if (b.isZero())
      return std::nullopt;
    a.mod(b);
    return a;
  case BinaryKind::Pow: {
    bool lost;
    APFloat result(std::pow(a.convertToDouble(), b.convertToDouble()));
    result.convert(a.getSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return result;
  }
  default:
    return std::nullopt;
  }
}

std::optional<bool> compareFloat(BinaryKind kind, const APFloat &a,
                                 const APFloat &b) {
  APFloat::cmpResult cmp = a.compare(b);
  switch (kind) {
  case BinaryKind::Eq:
    return cmp == APFloat::cmpEqual;
  case BinaryKind::Lt:
    return cmp == APFloat::cmpLessThan;
  case BinaryKind::Le:
    return cmp == APFloat::cmpLessThan || cmp == APFloat::cmpEqual;
  case BinaryKind::Gt:
    return cmp == APFloat::cmpGreaterThan;
  case BinaryKind::Ge:
    return cmp == APFloat::cmpGreaterThan || cmp == APFloat::cmpEqual;
  default:
    return std::nullopt;
  }
}

/// Applies `fn` to the broadcast pairs of elements of `lhs` and `rhs`
/// (values read as `In`), giving a constant of `result`; fails when `fn`
/// does for any pair.
template <typename In, typename Out, typename Fn>
OpFoldResult mapBroadcast(DenseElementsAttr lhs, DenseElementsAttr rhs,
                          RankedTensorType result, Fn &&fn) {
  auto a = lhs.getValues<In>(), b = rhs.getValues<In>();
  ArrayRef<int64_t> shape = result.getShape();
  SmallVector<Out> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i) {
    std::optional<Out> v =
        fn(a[broadcastIndex(i, shape, lhs.getType().getShape())],
           b[broadcastIndex(i, shape, rhs.getType().getShape())]);
    if (!v)
      return {};
    values.push_back(*v);
  }
  return DenseElementsAttr::get(result, ArrayRef<Out>(values));
}

/// Folds an elementwise binary op over two small constants.
OpFoldResult foldBinary(BinaryKind kind, Attribute lhsAttr, Attribute rhsAttr,
                        Type resultType) {
  DenseElementsAttr lhs = smallConstant(lhsAttr), rhs = smallConstant(rhsAttr);
  RankedTensorType result = staticType(resultType);
  if (!lhs || !rhs || !result || result.getNumElements() > kMaxFoldElements ||
      lhs.getElementType() != rhs.getElementType())
    return {};
  Type element = lhs.getElementType();
  bool compares = kind == BinaryKind::Eq || kind == BinaryKind::Lt ||
                  kind == BinaryKind::Le || kind == BinaryKind::Gt ||
                  kind == BinaryKind::Ge;
  if (result.getElementType() !=
      (compares ? IntegerType::get(element.getContext(), 1) : element))
    return {};
  if (element.isInteger())
    return mapBroadcast<APInt, APInt>(
        lhs, rhs, result,
        [&](const APInt &a, const APInt &b) { return foldInt(kind, a, b); });
  if (!isa<FloatType>(element))
    return {};
  if (result.getElementType().isInteger(1))
    return mapBroadcast<APFloat, bool>(
        lhs, rhs, result, [&](const APFloat &a, const APFloat &b) {
          return compareFloat(kind, a, b);
        });
  return mapBroadcast<APFloat, APFloat>(
      lhs, rhs, result,
      [&](const APFloat &a, const APFloat &b) { return foldFloat(kind, a, b); });
}

/// A constant reshaped to `type`, or the input itself when nothing changes.
OpFoldResult foldReshapeLike(Value input, Attribute inputAttr, Type type) {
  if (input.getType() == type)
    return input;
  auto dense = dyn_cast_or_null<DenseElementsAttr>(inputAttr);
  RankedTensorType result = staticType(type);
  if (!dense || !result ||
      dense.getElementType() != result.getElementType() ||
      dense.getNumElements() != result.getNumElements())
    return {};
  return dense.reshape(result);
}

} // namespace

OpFoldResult NoValueOp::fold(FoldAdaptor) { return UnitAttr::get(getContext()); }

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

#define FOLD_BINARY(OP, KIND)                                                  \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldBinary(BinaryKind::KIND, adaptor.getA(), adaptor.getB(),        \
                      getType());                                              \
  }
FOLD_BINARY(AddOp, Add)
FOLD_BINARY(SubOp, Sub)
FOLD_BINARY(MulOp, Mul)
FOLD_BINARY(DivOp, Div)
FOLD_BINARY(PowOp, Pow)
FOLD_BINARY(EqualOp, Eq)
FOLD_BINARY(LessOp, Lt)
FOLD_BINARY(LessOrEqualOp, Le)
FOLD_BINARY(GreaterOp, Gt)
FOLD_BINARY(GreaterOrEqualOp, Ge)
FOLD_BINARY(AndOp, And)
FOLD_BINARY(OrOp, Or)
FOLD_BINARY(XorOp, Xor)
#undef FOLD_BINARY

OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  return foldBinary(getFmod() ? BinaryKind::FMod : BinaryKind::Mod,
                    adaptor.getA(), adaptor.getB(), getType());
}

/// A Pad that adds nothing is its input.
OpFoldResult PadOp::fold(FoldAdaptor adaptor) {
  DenseIntElementsAttr pads =
      dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getPads());
  if (!pads || getData().getType() != getType() ||
      !llvm::all_of(pads.getValues<APInt>(),
                    [](const APInt &v) { return v.isZero(); }))
    return {};
  return getData();
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = smallConstant(adaptor.getX());
  if (!input || input.getType() != getType())
    return {};
  if (input.getElementType().isInteger())
    return input.mapValues(input.getElementType(),
                           [](const APInt &v) { return -v; });
  if (isa<FloatType>(input.getElementType()))
    return input.mapValues(input.getElementType(), [](const APFloat &v) {
      return (-v).bitcastToAPInt();
    });
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  DenseElementsAttr input = smallConstant(adaptor.getInput());
  RankedTensorType result = staticType(getType());
  if (!input || !result)
    return {};
  Type from = input.getElementType(), to = result.getElementType();
  if (from.isInteger() && to.isInteger()) {
    unsigned width = to.getIntOrFloatBitWidth();
    return input.mapValues(to, [&](const APInt &v) {
      if (width == 1)
        return APInt(1, !v.isZero());
      // Booleans and unsigned integers widen with zeros.
      return from.isInteger(1) || from.isUnsignedInteger() ? v.zextOrTrunc(width)
                                                           : v.sextOrTrunc(width);
    });
  }
  if (from.isInteger() && isa<FloatType>(to)) {
    SmallVector<APFloat> values;
    for (const APInt &v : input.getValues<APInt>()) {
      APFloat f(cast<FloatType>(to).getFloatSemantics());
      f.convertFromAPInt(v,
                         /*isSigned=*/!from.isInteger(1) &&
                             !from.isUnsignedInteger(),
                         APFloat::rmNearestTiesToEven);
      values.push_back(f);
    }
    return DenseElementsAttr::get(result, values);
  }
  if (isa<FloatType>(from) && isa<FloatType>(to)) {
    SmallVector<APFloat> values;
    for (APFloat v : input.getValues<APFloat>()) {
      bool lost;
      v.convert(cast<FloatType>(to).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    return DenseElementsAttr::get(result, values);
  }
  if (isa<FloatType>(from) && to.isInteger() && !to.isInteger(1)) {
    SmallVector<APInt> values;
    for (const APFloat &v : input.getValues<APFloat>()) {
      APSInt i(to.getIntOrFloatBitWidth(),
               /*isUnsigned=*/to.isUnsignedInteger());
      bool exact;
      v.convertToInteger(i, APFloat::rmTowardZero, &exact);
      values.push_back(i);
    }
    return DenseElementsAttr::get(result, values);
  }
  return {};
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto condition = dyn_cast_or_null<DenseElementsAttr>(adaptor.getCondition());
  if (condition && condition.isSplat()) {
    Value chosen = condition.getSplatValue<bool>() ? getX() : getY();
    if (chosen.getType() == getType())
      return chosen;
  }
  DenseElementsAttr cond = smallConstant(adaptor.getCondition());
  DenseElementsAttr x = smallConstant(adaptor.getX());
  DenseElementsAttr y = smallConstant(adaptor.getY());
  RankedTensorType result = staticType(getType());
  if (!cond || !x || !y || !result || result.getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> shape = result.getShape();
  auto c = cond.getValues<bool>();
  auto xs = x.getValues<Attribute>(), ys = y.getValues<Attribute>();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    values.push_back(c[broadcastIndex(i, shape, cond.getType().getShape())]
                         ? xs[broadcastIndex(i, shape, x.getType().getShape())]
                         : ys[broadcastIndex(i, shape, y.getType().getShape())]);
  return DenseElementsAttr::get(result, values);
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto input = cast<RankedTensorType>(getData().getType());
  RankedTensorType result = staticType(getType());
  if (!input.hasStaticShape() || !result)
    return {};
  int64_t rank = input.getRank();
  auto clamp = [&](int64_t axis) {
    if (axis < 0)
      axis += rank;
    return std::clamp<int64_t>(axis, 0, rank);
  };
  int64_t start = clamp(getStart().value_or(0));
  int64_t end = clamp(getEnd().value_or(rank));
  SmallVector<int64_t> dims(input.getShape().begin() + start,
                            input.getShape().begin() + std::max(start, end));
  if (static_cast<int64_t>(dims.size()) != result.getNumElements())
    return {};
  return DenseElementsAttr::get(result, ArrayRef<int64_t>(dims));
}

OpFoldResult SizeOp::fold(FoldAdaptor) {
  auto input = cast<RankedTensorType>(getData().getType());
  RankedTensorType result = staticType(getType());
  if (!input.hasStaticShape() || !result || !result.getElementType().isInteger(64))
    return {};
  return DenseElementsAttr::get(result, input.getNumElements());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), adaptor.getData(), getType());
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), adaptor.getData(), getType());
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getData(), adaptor.getData(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  RankedTensorType result = staticType(getType());
  if (!result || result.getRank() < 1 ||
      result.getNumElements() > kMaxFoldElements)
    return {};
  int64_t rank = result.getRank();
  // I64Attr reads back as uint64_t: a negative axis needs the cast.
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return {};
  // Row-major: for each index of the leading axes, every input's block of
  // its axis and trailing axes in turn.
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute input : adaptor.getInputs()) {
    auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
    if (!dense || dense.getType().getRank() != rank)
      return {};
    inputs.push_back(dense);
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= result.getShape()[d];
  SmallVector<Attribute> values;
  for (int64_t o = 0; o < outer; ++o)
    for (DenseElementsAttr input : inputs) {
      int64_t block = outer ? input.getNumElements() / outer : 0;
      auto all = input.getValues<Attribute>();
      for (int64_t i = 0; i < block; ++i)
        values.push_back(all[o * block + i]);
    }
  if (static_cast<int64_t>(values.size()) != result.getNumElements())
    return {};
  return DenseElementsAttr::get(result, values);
}

/// One sliced axis: where it starts, its step and how many it keeps, with
/// ONNX's clamping (starts to [0, size] going forward, [0, size - 1]
/// backward; ends to [0, size] or [-1, size - 1]).
struct SlicedAxis {
  int64_t begin, step, count;
};

SlicedAxis sliceAxis(int64_t start, int64_t end, int64_t step, int64_t size) {
  auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0)
      v += size;
    return std::clamp(v, lo, hi);
  };
  int64_t begin = step > 0 ? clamp(start, 0, size) : clamp(start, 0, size - 1);
  int64_t stop = step > 0 ? clamp(end, 0, size) : clamp(end, -1, size - 1);
  // Count first (no overflow for any step), then index begin + k * step.
  int64_t span = step > 0 ? stop - begin : begin - stop;
  uint64_t magnitude =
      step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  int64_t count = span <= 0
                      ? 0
                      : static_cast<int64_t>(
                            (static_cast<uint64_t>(span) - 1) / magnitude + 1);
  return {begin, step, count};
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType() && !adaptor.getData())
    return {}; // A full slice of a non-constant needs its bounds checked; skip.
  DenseElementsAttr data = smallConstant(adaptor.getData());
  RankedTensorType result = staticType(getType());
  std::optional<SmallVector<int64_t>> starts = intValues(adaptor.getStarts());
  std::optional<SmallVector<int64_t>> ends = intValues(adaptor.getEnds());
  if (!data || !result || !starts || !ends || starts->size() != ends->size() ||
      data.getElementType() != result.getElementType())
    return {};
  ArrayRef<int64_t> shape = data.getType().getShape();
  int64_t rank = shape.size();
  std::optional<SmallVector<int64_t>> axes = llvm::to_vector(
      llvm::seq<int64_t>(0, static_cast<int64_t>(starts->size())));
  if (!isa<NoneType>(getAxes().getType()))
    axes = intValues(adaptor.getAxes());
  std::optional<SmallVector<int64_t>> steps =
      SmallVector<int64_t>(starts->size(), 1);
  if (!isa<NoneType>(getSteps().getType()))
    steps = intValues(adaptor.getSteps());
  if (!axes || !steps || axes->size() != starts->size() ||
      steps->size() != starts->size() || llvm::is_contained(*steps, 0))
    return {};
  SmallVector<SlicedAxis> sliced;
  for (int64_t d = 0; d < rank; ++d)
    sliced.push_back({0, 1, shape[d]});
  for (auto [axis, start, end, step] :
       llvm::zip(*axes, *starts, *ends, *steps)) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || shape[a] == 0)
      return {};
    sliced[a] = sliceAxis(start, end, step, shape[a]);
  }
  for (int64_t d = 0; d < rank; ++d)
    if (sliced[d].count != result.getDimSize(d))
      return {};
  auto all = data.getValues<Attribute>();
  SmallVector<int64_t> stride = strides(shape);
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i) {
    int64_t from = 0;
    for (int64_t d = rank - 1, rest = i; d >= 0; rest /= sliced[d].count, --d)
      from += (sliced[d].begin + rest % sliced[d].count * sliced[d].step) *
              stride[d];
    values.push_back(all[from]);
  }
  return DenseElementsAttr::get(result, values);
}

/// A small constant transposed.
OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  RankedTensorType result = staticType(getType());
  if (!data || !result || data.getElementType() != result.getElementType())
    return {};
  SmallVector<int64_t> perm = getPermOrDefault();
  SmallVector<int64_t> stride = strides(data.getType().getShape());
  ArrayRef<int64_t> shape = result.getShape();
  auto all = data.getValues<Attribute>();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i) {
    int64_t from = 0;
    for (int64_t d = result.getRank() - 1, rest = i; d >= 0;
         rest /= shape[d], --d)
      from += rest % shape[d] * stride[perm[d]];
    values.push_back(all[from]);
  }
  return DenseElementsAttr::get(result, values);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  std::optional<SmallVector<int64_t>> indices = intValues(adaptor.getIndices());
  RankedTensorType result = staticType(getType());
  if (!data || !indices || !result || result.getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> shape = data.getType().getShape();
  int64_t axis = getAxis() < 0 ? getAxis() + shape.size() : getAxis();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  auto all = data.getValues<Attribute>();
  SmallVector<Attribute> values;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t index : *indices) {
      if (index < 0)
        index += shape[axis];
      if (index < 0 || index >= shape[axis])
        return {};
      for (int64_t i = 0; i < inner; ++i)
        values.push_back(all[(o * shape[axis] + index) * inner + i]);
    }
  if (static_cast<int64_t>(values.size()) != result.getNumElements())
    return {};
  return DenseElementsAttr::get(result, values);
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor adaptor) {
  // A splat is cheap here, but later passes would materialise it. A static
  // result type is the whole story even when the shape is a graph input:
  // the value fed there must be that shape.
  RankedTensorType result = staticType(getType());
  if (!result || result.getNumElements() > kMaxFoldElements)
    return {};
  Attribute element;
  if (std::optional<ElementsAttr> value = getValue()) {
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense || dense.getNumElements() != 1)
      return {};
    element = *dense.getValues<Attribute>().begin();
  } else {
    element = FloatAttr::get(result.getElementType(), 0.0);
  }
  return DenseElementsAttr::get(result, element);
}

OpFoldResult RangeOp::fold(FoldAdaptor adaptor) {
  RankedTensorType result = staticType(getType());
  std::optional<SmallVector<int64_t>> start = intValues(adaptor.getStart());
  std::optional<SmallVector<int64_t>> limit = intValues(adaptor.getLimit());
  std::optional<SmallVector<int64_t>> delta = intValues(adaptor.getDelta());
  if (!result || !start || !limit || !delta || start->size() != 1 ||
      limit->size() != 1 || delta->size() != 1 || (*delta)[0] == 0 ||
      result.getNumElements() > kMaxFoldElements ||
      !result.getElementType().isInteger())
    return {};
  // ONNX: max(ceil((limit - start) / delta), 0) elements; computed in 128
  // bits, then checked against the result type.
  __int128 span = static_cast<__int128>((*limit)[0]) - (*start)[0];
  __int128 step = (*delta)[0];
  __int128 count = span / step + (span % step != 0 && (span > 0) == (step > 0));
  if (count < 0)
    count = 0;
  if (count != result.getNumElements())
    return {};
  unsigned width = result.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    values.push_back(APInt(width, static_cast<int64_t>((*start)[0] + i * step),
                           /*isSigned=*/true));
  return DenseElementsAttr::get(result, values);
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = smallConstant(adaptor.getX());
  if (!input || input.getType() != getType() ||
      !input.getElementType().isInteger(1))
    return {};
  return input.mapValues(input.getElementType(),
                         [](const APInt &v) { return ~v; });
}

OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = smallConstant(adaptor.getX());
  if (!input || input.getType() != getType() ||
      !(input.getElementType().isF32() || input.getElementType().isF64()))
    return {};
  bool f32 = input.getElementType().isF32();
  return input.mapValues(input.getElementType(), [&](const APFloat &v) {
    double root = std::sqrt(v.convertToDouble());
    return f32 ? APFloat(static_cast<float>(root)).bitcastToAPInt()
               : APFloat(root).bitcastToAPInt();
  });
}

namespace {

/// Rounds a small f32 or f64 constant to an integral value in `mode`.
OpFoldResult foldRounding(Attribute operand, Type type,
                          llvm::RoundingMode mode) {
  DenseElementsAttr input = smallConstant(operand);
  if (!input || input.getType() != type ||
      !(input.getElementType().isF32() || input.getElementType().isF64()))
    return {};
  return input.mapValues(input.getElementType(), [&](const APFloat &v) {
    APFloat rounded = v;
    rounded.roundToIntegral(mode);
    return rounded.bitcastToAPInt();
  });
}

} // namespace

OpFoldResult CeilOp::fold(FoldAdaptor adaptor) {
  return foldRounding(adaptor.getX(), getType(),
                      llvm::RoundingMode::TowardPositive);
}

OpFoldResult FloorOp::fold(FoldAdaptor adaptor) {
  return foldRounding(adaptor.getX(), getType(),
                      llvm::RoundingMode::TowardNegative);
}

namespace {

/// Folds Max or Min of one or two small constants of one element type.
OpFoldResult foldExtremum(bool max, ArrayRef<Attribute> inputs,
                          Type resultType) {
  RankedTensorType result = staticType(resultType);
  if (inputs.empty() || inputs.size() > 2 || !result)
    return {};
  DenseElementsAttr lhs = smallConstant(inputs.front());
  DenseElementsAttr rhs = smallConstant(inputs.back());
  if (!lhs || !rhs || lhs.getElementType() != result.getElementType() ||
      rhs.getElementType() != result.getElementType() ||
      result.getNumElements() > kMaxFoldElements)
    return {};
  if (result.getElementType().isInteger())
    return mapBroadcast<APInt, APInt>(
        lhs, rhs, result, [&](const APInt &a, const APInt &b) {
          return std::optional<APInt>(max == a.sgt(b) ? a : b);
        });
  if (!isa<FloatType>(result.getElementType()))
    return {};
  return mapBroadcast<APFloat, APFloat>(
      lhs, rhs, result, [&](const APFloat &a, const APFloat &b) {
        return std::optional<APFloat>(max ? llvm::maximum(a, b)
                                          : llvm::minimum(a, b));
      });
}

/// The small constant input and static result type of a fold that only
/// rearranges elements (Expand, Tile); a null input when either is missing
/// or they disagree on the element type.
std::pair<DenseElementsAttr, RankedTensorType> rearranged(Attribute inputAttr,
                                                          Type type) {
  DenseElementsAttr input = smallConstant(inputAttr);
  RankedTensorType result = staticType(type);
  if (!input || !result || result.getNumElements() > kMaxFoldElements ||
      input.getElementType() != result.getElementType())
    return {nullptr, result};
  return {input, result};
}

/// The `result`-typed constant whose element i is `input`'s element
/// `source(i)`.
DenseElementsAttr mapElements(DenseElementsAttr input, RankedTensorType result,
                              llvm::function_ref<int64_t(int64_t)> source) {
  auto all = input.getValues<Attribute>();
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < result.getNumElements(); ++i)
    values.push_back(all[source(i)]);
  return DenseElementsAttr::get(result, values);
}

/// The element offset of the slice an index tuple picks: each index of
/// `tuple` (a negative one counting from the end) along `dims`, whose
/// strides are `stride`; nothing when one is out of range (GatherND,
/// ScatterND).
std::optional<int64_t> tupleOffset(ArrayRef<int64_t> tuple,
                                   ArrayRef<int64_t> dims,
                                   ArrayRef<int64_t> stride) {
  int64_t offset = 0;
  for (auto [given, size, step] : llvm::zip(tuple, dims, stride)) {
    int64_t index = given < 0 ? given + size : given;
    if (index < 0 || index >= size)
      return std::nullopt;
    offset += index * step;
  }
  return offset;
}

/// The product of `shape[begin:end]`.
int64_t product(ArrayRef<int64_t> shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d)
    n *= shape[d];
  return n;
}

} // namespace

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldExtremum(/*max=*/true, adaptor.getData_0(), getType());
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldExtremum(/*max=*/false, adaptor.getData_0(), getType());
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  auto [input, result] = rearranged(adaptor.getInput(), getType());
  if (!input || input.getType().getRank() > result.getRank())
    return {};
  ArrayRef<int64_t> shape = result.getShape();
  ArrayRef<int64_t> inputShape = input.getType().getShape();
  return mapElements(input, result, [&](int64_t i) {
    return broadcastIndex(i, shape, inputShape);
  });
}

OpFoldResult GatherNDOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  std::optional<SmallVector<int64_t>> indices = intValues(adaptor.getIndices());
  RankedTensorType result = staticType(getType());
  auto indexType = dyn_cast<RankedTensorType>(getIndices().getType());
  if (!data || !indices || !result || !indexType || indexType.getRank() < 1 ||
      result.getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> shape = data.getType().getShape();
  ArrayRef<int64_t> indexShape = indexType.getShape();
  size_t batch = getBatchDims(), k = indexShape.back();
  if (batch + k > shape.size() || batch >= indexShape.size())
    return {};
  int64_t tuples = product(indexShape, batch, indexShape.size() - 1);
  int64_t slice = product(shape, batch + k, shape.size());
  int64_t batchStride = product(shape, batch, shape.size());
  SmallVector<int64_t> stride = strides(shape);
  auto all = data.getValues<Attribute>();
  SmallVector<Attribute> values;
  for (int64_t b = 0, n = product(shape, 0, batch); b < n; ++b)
    for (int64_t t = 0; t < tuples; ++t) {
      std::optional<int64_t> offset =
          tupleOffset(ArrayRef(*indices).slice((b * tuples + t) * k, k),
                      shape.slice(batch, k), ArrayRef(stride).slice(batch, k));
      if (!offset)
        return {};
      for (int64_t i = 0; i < slice; ++i)
        values.push_back(all[b * batchStride + *offset + i]);
    }
  if (static_cast<int64_t>(values.size()) != result.getNumElements())
    return {};
  return DenseElementsAttr::get(result, values);
}

OpFoldResult CumSumOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr input = smallConstant(adaptor.getX());
  std::optional<SmallVector<int64_t>> axisValue = intValues(adaptor.getAxis());
  if (!input || !axisValue || axisValue->size() != 1 ||
      input.getType() != getType() || !input.getElementType().isInteger() ||
      input.getNumElements() == 0)
    return {};
  ArrayRef<int64_t> shape = input.getType().getShape();
  int64_t rank = shape.size(), axis = (*axisValue)[0];
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return {};
  int64_t size = shape[axis], inner = product(shape, axis + 1, rank);
  int64_t outer = product(shape, 0, axis);
  SmallVector<APInt> values(input.getValues<APInt>());
  SmallVector<APInt> sums(values.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      APInt running = APInt::getZero(values.front().getBitWidth());
      for (int64_t s = 0; s < size; ++s) {
        int64_t j = getReverse() ? size - 1 - s : s;
        int64_t at = (o * size + j) * inner + i;
        if (getExclusive())
          sums[at] = running;
        running += values[at];
        if (!getExclusive())
          sums[at] = running;
      }
    }
  return DenseElementsAttr::get(input.getType(), sums);
}

OpFoldResult FlattenOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getInput(), adaptor.getInput(), getType());
}

OpFoldResult TileOp::fold(FoldAdaptor adaptor) {
  auto [input, result] = rearranged(adaptor.getInput(), getType());
  if (!input || input.getType().getRank() != result.getRank())
    return {};
  ArrayRef<int64_t> shape = result.getShape();
  ArrayRef<int64_t> inputShape = input.getType().getShape();
  for (auto [size, inputSize] : llvm::zip(shape, inputShape))
    if (inputSize == 0 ? size != 0 : size % inputSize != 0)
      return {};
  SmallVector<int64_t> resultStrides = strides(shape);
  SmallVector<int64_t> inputStrides = strides(inputShape);
  return mapElements(input, result, [&](int64_t i) {
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      at += (i / resultStrides[d]) % shape[d] % inputShape[d] * inputStrides[d];
    return at;
  });
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  DenseElementsAttr updates = smallConstant(adaptor.getUpdates());
  std::optional<SmallVector<int64_t>> indices = intValues(adaptor.getIndices());
  auto indexType = dyn_cast<RankedTensorType>(getIndices().getType());
  // A reduction needs arithmetic per element type; torch writes "none".
  if (!data || !updates || !indices || !indexType ||
      !indexType.hasStaticShape() || indexType.getRank() < 1 ||
      getReduction() != "none" || data.getType() != getType() ||
      updates.getElementType() != data.getElementType())
    return {};
  ArrayRef<int64_t> shape = data.getType().getShape();
  size_t k = indexType.getShape().back();
  if (k == 0 || k > shape.size())
    return {};
  int64_t tuples = indices->size() / k;
  int64_t slice = product(shape, k, shape.size());
  if (tuples * slice != updates.getNumElements())
    return {};
  SmallVector<int64_t> stride = strides(shape);
  SmallVector<Attribute> values(data.getValues<Attribute>());
  auto fresh = updates.getValues<Attribute>();
  for (int64_t t = 0; t < tuples; ++t) {
    std::optional<int64_t> offset =
        tupleOffset(ArrayRef(*indices).slice(t * k, k), shape.take_front(k),
                    ArrayRef(stride).take_front(k));
    if (!offset)
      return {};
    for (int64_t i = 0; i < slice; ++i)
      values[*offset + i] = fresh[t * slice + i];
  }
  return DenseElementsAttr::get(data.getType(), values);
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = smallConstant(adaptor.getData());
  RankedTensorType result = staticType(getType());
  if (!data || !result || data.getElementType() != result.getElementType() ||
      !data.getElementType().isInteger())
    return {};
  ArrayRef<int64_t> shape = data.getType().getShape();
  int64_t rank = shape.size();
  SmallVector<bool> reduced(rank, false);
  if (isa<NoneType>(getAxes().getType())) {
    if (getNoopWithEmptyAxes())
      return getType() == data.getType() ? data : DenseElementsAttr();
    reduced.assign(rank, true);
  } else {
    std::optional<SmallVector<int64_t>> axes = intValues(adaptor.getAxes());
    if (!axes)
      return {};
    if (axes->empty() && !getNoopWithEmptyAxes())
      reduced.assign(rank, true);
    for (int64_t axis : *axes) {
      if (axis < 0)
        axis += rank;
      if (axis < 0 || axis >= rank)
        return {};
      reduced[axis] = true;
    }
  }
  // The kept dims, in order: the result's elements without the keepdims 1s.
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d])
      kept.push_back(shape[d]);
  if (product(kept, 0, kept.size()) != result.getNumElements())
    return {};
  SmallVector<int64_t> dataStrides = strides(shape);
  SmallVector<int64_t> keptStrides = strides(kept);
  unsigned width = data.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> sums(result.getNumElements(), APInt::getZero(width));
  int64_t i = 0;
  for (const APInt &value : data.getValues<APInt>()) {
    int64_t at = 0;
    for (int64_t d = 0, k = 0; d < rank; ++d)
      if (!reduced[d])
        at += (i / dataStrides[d]) % shape[d] * keptStrides[k++];
    sums[at] += value;
    ++i;
  }
  return DenseElementsAttr::get(result, sums);
}

DenseElementsAttr mlir::onnxir::nonZeroIndices(DenseElementsAttr input) {
  auto type = input.getType();
  if (type.getRank() == 0 || input.getNumElements() > kMaxFoldElements)
    return nullptr;
  Type element = type.getElementType();
  SmallVector<bool> nonzero;
  if (element.isInteger()) {
    for (const APInt &value : input.getValues<APInt>())
      nonzero.push_back(!value.isZero());
  } else if (isa<FloatType>(element)) {
    for (const APFloat &value : input.getValues<APFloat>())
      nonzero.push_back(!value.isZero());
  } else {
    return nullptr;
  }
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> at = strides(shape);
  int64_t count = llvm::count(nonzero, true);
  int64_t rank = shape.size();
  SmallVector<int64_t> coords(rank * count);
  for (int64_t i = 0, n = 0; i < static_cast<int64_t>(nonzero.size()); ++i) {
    if (!nonzero[i])
      continue;
    for (int64_t d = 0; d < rank; ++d)
      coords[d * count + n] = i / at[d] % shape[d];
    ++n;
  }
  auto result = RankedTensorType::get({rank, count},
                                      IntegerType::get(type.getContext(), 64));
  return DenseElementsAttr::get(result, ArrayRef<int64_t>(coords));
}
