//===- LowerToRuntime.cpp - ONNX and fused ops to runtime kernels ---------===//
//
/// Every compute op becomes one `fsdp.kernel` whose name and parameters are
/// the runtime's contract (docs/plan-format.md), or an `fsdp.view` when it
/// only reinterprets a shape. Parameters are normalised here, once, so the
/// runtime never re-derives ONNX defaults: axes are non-negative, defaults
/// explicit, constant operands (Slice bounds, ReduceSum axes) are
/// parameters, and absent optional operands are dropped from the end.
///
/// A dialect conversion: one pattern per op (or per family of ops that lower
/// alike), registered with its kernel's name in populateLoweringPatterns;
/// the target says what a lowered function body holds.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/Target/Plan/RuntimeDType.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <map>
#include <set>
#include <type_traits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::KernelOp;
using mlir::fsdp::ViewOp;

namespace {

/// Builds the kernels that replace one op.
class Lowering {
public:
  Lowering(Operation *op, RewriterBase &rewriter)
      : op(op), rewriter(rewriter), b(rewriter) {}

  /// Replaces the op with kernel `name` on `inputs` (trailing `none` values
  /// dropped) producing the op's non-`none` results.
  LogicalResult kernel(StringRef name, ValueRange inputs,
                       ArrayRef<NamedAttribute> params = {}) {
    SmallVector<Value> operands(inputs.begin(), inputs.end());
    while (!operands.empty() && isa<NoneType>(operands.back().getType()))
      operands.pop_back();
    for (Value operand : operands)
      if (isa<NoneType>(operand.getType()))
        return fail("has an absent operand before a present one");
    SmallVector<Type> types;
    SmallVector<unsigned> kept;
    for (OpResult result : op->getResults()) {
      if (isa<NoneType>(result.getType()))
        continue;
      types.push_back(result.getType());
      kept.push_back(result.getResultNumber());
    }
    auto kernelOp = rewriter.create<KernelOp>(
        op->getLoc(), types, rewriter.getStringAttr(name), operands,
        params.empty() ? DictionaryAttr() : b.getDictionaryAttr(params));
    SmallVector<Value> replacements(op->getNumResults());
    for (auto [index, number] : llvm::enumerate(kept))
      replacements[number] = kernelOp.getResult(index);
    for (OpResult result : op->getResults())
      if (isa<NoneType>(result.getType()))
        replacements[result.getResultNumber()] =
            rewriter.create<NoValueOp>(op->getLoc());
    rewriter.replaceOp(op, replacements);
    return success();
  }

  /// Replaces the op's single result with a view of `input`.
  LogicalResult view(Value input) {
    Value result = op->getResult(0);
    if (input.getType() == result.getType()) {
      rewriter.replaceOp(op, input);
      return success();
    }
    rewriter.replaceOpWithNewOp<ViewOp>(op, result.getType(), input);
    return success();
  }

  /// The user's error, not a pattern that merely did not apply: a model the
  /// runtime cannot run must say which node and why.
  LogicalResult fail(const Twine &why) { return op->emitOpError() << why; }

  NamedAttribute i64(StringRef name, int64_t value) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(value));
  }
  NamedAttribute f32(StringRef name, double value) {
    return b.getNamedAttr(name, b.getF32FloatAttr(value));
  }
  NamedAttribute f32(StringRef name, const APFloat &value) {
    return f32(name, value.convertToDouble());
  }
  NamedAttribute f64(StringRef name, const APFloat &value) {
    return b.getNamedAttr(name, b.getF64FloatAttr(value.convertToDouble()));
  }
  NamedAttribute str(StringRef name, StringRef value) {
    return b.getNamedAttr(name, b.getStringAttr(value));
  }
  NamedAttribute ints(StringRef name, ArrayRef<int64_t> values) {
    return b.getNamedAttr(name, b.getDenseI64ArrayAttr(values));
  }

  /// `axis` made non-negative for a tensor of `rank`; fails when out of range.
  FailureOr<int64_t> axis(int64_t axis, int64_t rank) {
    if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
      return fail("axis " + Twine(axis) + " is out of range for rank " +
                  Twine(rank));
    return axis < 0 ? axis + rank : axis;
  }

  /// Every entry of `axes` made non-negative for a tensor of `rank`.
  FailureOr<SmallVector<int64_t>> axes(ArrayRef<int64_t> axes, int64_t rank) {
    SmallVector<int64_t> normal;
    for (int64_t value : axes) {
      FailureOr<int64_t> a = axis(value, rank);
      if (failed(a))
        return failure();
      normal.push_back(*a);
    }
    return normal;
  }

  /// The integer values of a constant operand.
  FailureOr<SmallVector<int64_t>> constantInts(Value value, StringRef what) {
    DenseIntElementsAttr attr;
    if (!matchPattern(value, m_Constant(&attr)))
      return fail(Twine(what) + " must be a constant to run on the runtime");
    return llvm::to_vector(
        llvm::map_range(attr.getValues<APInt>(),
                        [](const APInt &v) { return v.getSExtValue(); }));
  }

  /// The values of an optional constant operand, or `fallback` when absent.
  FailureOr<SmallVector<int64_t>>
  optionalConstantInts(Value value, StringRef what,
                       ArrayRef<int64_t> fallback) {
    if (isa<NoneType>(value.getType()))
      return SmallVector<int64_t>(fallback);
    return constantInts(value, what);
  }

  Operation *op;
  RewriterBase &rewriter;
  Builder b;
};

int64_t rankOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Element types the runtime has (plan.fbs's DType).
bool isRuntimeType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return isa<NoneType>(type);
  return mlir::fsdp::runtimeDType(tensor.getElementType()).has_value();
}

/// Every value of an op the runtime runs has a runtime dtype and a static
/// shape.
LogicalResult checkTypes(Operation *op) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type type : types) {
    if (!isRuntimeType(type))
      return op->emitOpError() << "has a value of type " << type
                               << ", which the runtime does not support";
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && !tensor.hasStaticShape())
      return op->emitOpError()
             << "has a dynamic shape " << type
             << "; import with --batch-size (and --dim) to make it static";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// The lowering of one op kind to the runtime kernel `kernel`: checks the
/// runtime can hold the op's values, then `lower` builds the replacement
/// from the converted operands.
template <typename SourceOp>
class KernelPattern : public OpConversionPattern<SourceOp> {
public:
  using OpAdaptor = typename OpConversionPattern<SourceOp>::OpAdaptor;

  KernelPattern(MLIRContext *context, StringRef kernel = "")
      : OpConversionPattern<SourceOp>(context), kernel(kernel) {}

  LogicalResult
  matchAndRewrite(SourceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const final {
    if (failed(checkTypes(op)))
      return failure();
    Lowering l(op, rewriter);
    return lower(op, adaptor, l);
  }

protected:
  virtual LogicalResult lower(SourceOp op, OpAdaptor adaptor,
                              Lowering &l) const = 0;

  StringRef kernel;
};

/// Ops whose kernel reads their operands as they are, with no parameters
/// (elementwise ops, GlobalAveragePool).
template <typename SourceOp> struct PlainKernel : KernelPattern<SourceOp> {
  using KernelPattern<SourceOp>::KernelPattern;
  LogicalResult lower(SourceOp, typename SourceOp::Adaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(this->kernel, adaptor.getOperands());
  }
};

/// Sum, Max or Min of one input is that input; of more, a chain of the
/// binary kernel (`add`, `max`, `min`) from the left, each partial result
/// of its operands' broadcast shape.
template <typename SourceOp> struct LowerVariadic : KernelPattern<SourceOp> {
  using KernelPattern<SourceOp>::KernelPattern;
  LogicalResult lower(SourceOp op, typename SourceOp::Adaptor adaptor,
                      Lowering &l) const override {
    ValueRange inputs = adaptor.getOperands();
    if (inputs.size() == 1)
      return l.view(inputs[0]);
    Value acc = inputs[0];
    Type element = cast<RankedTensorType>(op->getResult(0).getType())
                       .getElementType();
    for (Value next : inputs.drop_front().drop_back()) {
      SmallVector<int64_t> shape;
      if (!OpTrait::util::getBroadcastedShape(shapeOf(acc), shapeOf(next),
                                              shape))
        return l.fail("has inputs that do not broadcast");
      acc = l.rewriter
                .create<KernelOp>(op->getLoc(),
                                  TypeRange{RankedTensorType::get(shape, element)},
                                  l.rewriter.getStringAttr(this->kernel),
                                  ValueRange{acc, next}, DictionaryAttr())
                .getResult(0);
    }
    return l.kernel(this->kernel, {acc, inputs.back()});
  }
};

/// Mean of one input is that input; of more, each broadcast to the
/// output's shape (`expand`), stacked along a new leading dim (views and a
/// `concat`) and averaged over it (`reduce_mean`).
struct LowerMean : KernelPattern<MeanOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(MeanOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    ValueRange inputs = adaptor.getOperands();
    if (inputs.size() == 1)
      return l.view(inputs[0]);
    auto type = cast<RankedTensorType>(op.getResult().getType());
    SmallVector<int64_t> one = {1};
    llvm::append_range(one, type.getShape());
    auto slice = RankedTensorType::get(one, type.getElementType());
    SmallVector<Value> pieces;
    for (Value input : inputs) {
      Value full = input;
      if (shapeOf(input) != type.getShape())
        full = l.rewriter
                   .create<KernelOp>(op.getLoc(), TypeRange{type},
                                     l.rewriter.getStringAttr("expand"),
                                     ValueRange{input}, DictionaryAttr())
                   .getResult(0);
      pieces.push_back(l.rewriter.create<ViewOp>(op.getLoc(), slice, full));
    }
    one[0] = inputs.size();
    Value stacked =
        l.rewriter
            .create<KernelOp>(
                op.getLoc(),
                TypeRange{RankedTensorType::get(one, type.getElementType())},
                l.rewriter.getStringAttr("concat"), pieces,
                l.b.getDictionaryAttr({l.i64("axis", 0)}))
            .getResult(0);
    return l.kernel("reduce_mean", stacked,
                    {l.ints("axes", {0}), l.i64("keepdims", 0)});
  }
};

/// LeakyRelu is `leaky_relu` with its slope.
struct LowerLeakyRelu : KernelPattern<LeakyReluOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(LeakyReluOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getX(), {l.f32("alpha", op.getAlpha())});
  }
};

/// An activation whose kernel takes the op's constants (alpha, beta, ...)
/// as parameters, defaults made explicit by `params`.
template <typename SourceOp> struct LowerActivation : KernelPattern<SourceOp> {
  using Params = SmallVector<NamedAttribute> (*)(SourceOp, Lowering &);
  LowerActivation(MLIRContext *context, StringRef kernel, Params params)
      : KernelPattern<SourceOp>(context, kernel), params(params) {}
  LogicalResult lower(SourceOp op, typename SourceOp::Adaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(this->kernel, adaptor.getOperands(), params(op, l));
  }
  Params params;
};

/// Pad with constant, non-negative pads; a constant fill value (0 when
/// absent) becomes the `value` parameter.
struct LowerPad : KernelPattern<PadOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(PadOp pad, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<SmallVector<int64_t>> pads =
        l.constantInts(adaptor.getPads(), "pads");
    if (failed(pads))
      return failure();
    ArrayRef<int64_t> shape = shapeOf(pad.getData());
    int64_t rank = shape.size();
    for (int64_t d = 0; d < rank; ++d) {
      int64_t before = (*pads)[d], after = (*pads)[d + rank];
      if (before < 0 || after < 0)
        return l.fail("negative pads (cropping) are not supported");
      if (pad.getMode() == "reflect" && (before || after) &&
          (before >= shape[d] || after >= shape[d]))
        return l.fail("reflect pads of axis " + Twine(d) +
                      " must be smaller than its size " + Twine(shape[d]));
      if (pad.getMode() == "edge" && (before || after) && shape[d] == 0)
        return l.fail("edge pads an empty axis " + Twine(d));
    }
    double value = 0;
    if (!isa<NoneType>(adaptor.getConstantValue().getType())) {
      DenseElementsAttr attr;
      if (!matchPattern(adaptor.getConstantValue(), m_Constant(&attr)) ||
          attr.getNumElements() != 1)
        return l.fail("constant_value must be a constant scalar to run on "
                      "the runtime");
      if (auto floats = dyn_cast<DenseFPElementsAttr>(attr))
        value = (*floats.getValues<APFloat>().begin()).convertToDouble();
      else if (auto ints = dyn_cast<DenseIntElementsAttr>(attr))
        value = (*ints.getValues<APInt>().begin()).getSExtValue();
    }
    return l.kernel(kernel, adaptor.getData(),
                    {l.ints("pads", *pads), l.str("mode", pad.getMode()),
                     l.b.getNamedAttr("value", l.b.getF64FloatAttr(value))});
  }
};

/// Resize, nearest, linear or cubic, with one scale per axis: constant
/// scales (or sizes, constant or at run time, which the shapes turn into
/// scales) are a parameter; f32 scales given at run time are the kernel's
/// second input, which it checks against the planned shape.
struct LowerResize : KernelPattern<ResizeOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ResizeOp resize, OpAdaptor adaptor,
                      Lowering &l) const override {
    if (resize.getCoordinateTransformationMode() == "tf_crop_and_resize")
      return l.fail("coordinate_transformation_mode tf_crop_and_resize is "
                    "not supported");
    SmallVector<NamedAttribute> params = {
        l.str("mode", resize.getMode()),
        l.str("coordinate_transformation_mode",
              resize.getCoordinateTransformationMode()),
        l.str("nearest_mode", resize.getNearestMode())};
    if (resize.getMode() == "cubic") {
      params.push_back(l.f64("cubic_coeff_a", resize.getCubicCoeffA()));
      params.push_back(l.i64("exclude_outside", resize.getExcludeOutside()));
    }
    if (std::optional<SmallVector<double>> scales =
            resize.getConstantScales()) {
      params.push_back(
          l.b.getNamedAttr("scales", l.b.getDenseF64ArrayAttr(*scales)));
      return l.kernel(kernel, adaptor.getX(), params);
    }
    auto scalesType = dyn_cast<RankedTensorType>(resize.getScales().getType());
    if (!scalesType || !scalesType.getElementType().isF32() ||
        scalesType.getNumElements() != rankOf(resize.getX()))
      return l.fail("scales or sizes must be a constant, or f32 scales with "
                    "one entry per axis, to run on the runtime");
    return l.kernel(kernel, {adaptor.getX(), adaptor.getScales()}, params);
  }
};

/// GridSample's and its gradient's kernel parameters, every one explicit;
/// fails unless X and grid are floats of one type (the kernels read both
/// as that type).
FailureOr<SmallVector<NamedAttribute>>
gridSampleParams(Lowering &l, Value x, Value grid, StringRef mode,
                 StringRef padding, int64_t alignCorners) {
  Type element = cast<RankedTensorType>(x.getType()).getElementType();
  Type gridElement = cast<RankedTensorType>(grid.getType()).getElementType();
  if (!isa<FloatType>(element) || element != gridElement) {
    std::string types;
    llvm::raw_string_ostream(types)
        << "X of " << element << " and grid of " << gridElement;
    return l.fail("needs X and grid of one float type to run on the "
                  "runtime, not " +
                  types);
  }
  return SmallVector<NamedAttribute>{l.str("mode", mode),
                                     l.str("padding_mode", padding),
                                     l.i64("align_corners", alignCorners)};
}

/// GridSample (4-D: the verifier holds opset 16's rank) is one
/// `grid_sample` kernel.
struct LowerGridSample : KernelPattern<GridSampleOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(GridSampleOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<SmallVector<NamedAttribute>> params =
        gridSampleParams(l, op.getX(), op.getGrid(), op.getMode(),
                         op.getPaddingMode(), op.getAlignCorners());
    if (failed(params))
      return failure();
    return l.kernel(kernel, {adaptor.getX(), adaptor.getGrid()}, *params);
  }
};

/// Clip is `clip` with its (constant, scalar) bounds as attributes; an
/// absent bound is none. Bounds known only at run time (graph inputs, or
/// integer ones) make it `min(max(input, min), max)` on the broadcasting
/// kernels, which is Clip's definition (a min above the max gives the max).
struct LowerClip : KernelPattern<ClipOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ClipOp clip, OpAdaptor adaptor,
                      Lowering &l) const override {
    SmallVector<NamedAttribute> bounds;
    bool constant = true;
    for (auto [name, value] : {std::pair<StringRef, Value>{"min", adaptor.getMin()},
                               {"max", adaptor.getMax()}}) {
      if (isa<NoneType>(value.getType()))
        continue;
      DenseFPElementsAttr attr;
      if (!matchPattern(value, m_Constant(&attr)) ||
          attr.getNumElements() != 1) {
        constant = false;
        break;
      }
      bounds.push_back(l.f32(name, *attr.getValues<APFloat>().begin()));
    }
    if (constant)
      return l.kernel(kernel, adaptor.getInput(), bounds);
    for (Value bound : {adaptor.getMin(), adaptor.getMax()})
      if (!isa<NoneType>(bound.getType()) && rankOf(bound) != 0 &&
          cast<RankedTensorType>(bound.getType()).getNumElements() != 1)
        return l.fail("min and max must be scalars");
    Value result = adaptor.getInput();
    for (auto [name, bound] :
         {std::pair<StringRef, Value>{"max", adaptor.getMin()},
          {"min", adaptor.getMax()}}) {
      if (isa<NoneType>(bound.getType()))
        continue;
      result =
          l.rewriter
              .create<KernelOp>(clip.getLoc(), TypeRange{clip.getType()},
                                l.b.getStringAttr(name),
                                ValueRange{result, bound}, DictionaryAttr())
              .getResult(0);
    }
    l.rewriter.replaceOp(clip, result);
    return success();
  }
};

/// Expand reads only its input: the result type carries the shape.
struct LowerExpand : KernelPattern<ExpandOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ExpandOp, OpAdaptor adaptor, Lowering &l) const override {
    return l.kernel(kernel, adaptor.getInput());
  }
};

/// Tile is `expand` between views: X [d0, d1, ...] viewed as
/// [1, d0, 1, d1, ...], expanded to [r0, d0, r1, d1, ...] and viewed as the
/// result [r0*d0, r1*d1, ...]. The repeats are the static shapes' quotient,
/// so they may be given at run time.
struct LowerTile : KernelPattern<TileOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(TileOp tile, OpAdaptor adaptor,
                      Lowering &l) const override {
    ArrayRef<int64_t> in = shapeOf(tile.getInput()),
                      out = shapeOf(tile.getOutput());
    if (in.size() != out.size())
      return l.fail("result rank " + Twine(out.size()) +
                    " differs from the input's " + Twine(in.size()));
    SmallVector<int64_t> split, expanded;
    for (auto [d, size] : llvm::enumerate(in)) {
      if (size == 0 ? out[d] != 0 : out[d] % size != 0)
        return l.fail("result dimension " + Twine(d) + " (" + Twine(out[d]) +
                      ") is not a multiple of the input's (" + Twine(size) +
                      ")");
      split.append({1, size});
      expanded.append({size == 0 ? 1 : out[d] / size, size});
    }
    Type element = cast<RankedTensorType>(tile.getType()).getElementType();
    Location loc = tile.getLoc();
    Value viewed = l.rewriter.create<ViewOp>(
        loc, RankedTensorType::get(split, element), adaptor.getInput());
    Value repeated =
        l.rewriter
            .create<KernelOp>(
                loc, TypeRange{RankedTensorType::get(expanded, element)},
                l.b.getStringAttr(kernel), ValueRange{viewed}, DictionaryAttr())
            .getResult(0);
    return l.view(repeated);
  }
};

struct LowerGelu : KernelPattern<mlir::fsdp::GeluOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::GeluOp gelu, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getInput(),
                    {l.str("approximate", gelu.getApproximate())});
  }
};

/// GELU's and SiLU's gradient: kernel `activation_grad` on (dy, x).
struct LowerActivationGrad : KernelPattern<mlir::fsdp::ActivationGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::ActivationGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.str("activation", grad.getActivation())});
  }
};

// Linear algebra and normalisation.

/// MatMul is the matmul kernel with an untransposed right operand.
struct LowerMatMul : KernelPattern<MatMulOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(MatMulOp, OpAdaptor adaptor, Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(), {l.i64("trans_b", 0)});
  }
};

struct LowerGemm : KernelPattern<GemmOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(GemmOp gemm, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.f32("alpha", gemm.getAlpha()),
                     l.f32("beta", gemm.getBeta()),
                     l.i64("trans_a", gemm.getTransA()),
                     l.i64("trans_b", gemm.getTransB())});
  }
};

struct LowerLinear : KernelPattern<mlir::fsdp::LinearOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::LinearOp linear, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.i64("trans_w", linear.getTransposeWeight()),
                     l.str("activation", linear.getActivation())});
  }
};

/// Attention and its gradient: both kernels take the forward's operands in
/// op order (the mask only for add and fill); attention's lse is its second
/// output when asked for. The layout attribute is written only when it is
/// not the kernels' default, bhsd.
template <typename AttentionOp>
struct LowerAttention : KernelPattern<AttentionOp> {
  using KernelPattern<AttentionOp>::KernelPattern;
  LogicalResult lower(AttentionOp attention,
                      typename AttentionOp::Adaptor adaptor,
                      Lowering &l) const override {
    SmallVector<NamedAttribute> attrs = {
        l.f32("scale", attention.getScale()),
        l.str("mask_kind", attention.getMaskKind()),
        l.f32("fill_value", attention.getFillValue())};
    if (attention.getLayout() != "bhsd")
      attrs.push_back(l.str("layout", attention.getLayout()));
    return l.kernel(this->kernel, adaptor.getOperands(), attrs);
  }
};

/// Softmax, LogSoftmax and Hardmax along one normalised axis.
template <typename SoftmaxLikeOp>
struct LowerSoftmax : KernelPattern<SoftmaxLikeOp> {
  using KernelPattern<SoftmaxLikeOp>::KernelPattern;
  LogicalResult lower(SoftmaxLikeOp softmax,
                      typename SoftmaxLikeOp::Adaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis =
        l.axis(softmax.getAxis(), rankOf(softmax.getInput()));
    if (failed(axis))
      return failure();
    return l.kernel(this->kernel, adaptor.getInput(), {l.i64("axis", *axis)});
  }
};

struct LowerLayerNorm : KernelPattern<LayerNormalizationOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(LayerNormalizationOp norm, OpAdaptor adaptor,
                      Lowering &l) const override {
    // The kernel gives both statistics or neither.
    if (isa<NoneType>(norm.getMean().getType()) !=
        isa<NoneType>(norm.getInvStdDev().getType()))
      return l.fail("gives one of Mean and InvStdDev; the runtime gives both "
                    "or neither");
    FailureOr<int64_t> axis = l.axis(norm.getAxis(), rankOf(norm.getX()));
    if (failed(axis))
      return failure();
    return l.kernel(
        kernel, {adaptor.getX(), adaptor.getScale(), adaptor.getB()},
        {l.i64("axis", *axis), l.f32("epsilon", norm.getEpsilon())});
  }
};

struct LowerRMSNorm : KernelPattern<mlir::fsdp::RMSNormOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::RMSNormOp norm, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.f32("epsilon", norm.getEpsilon())});
  }
};

/// A layer or RMS norm's gradients: kernel `layer_norm_grad` or
/// `rms_norm_grad` on (dy, x, scale?).
struct LowerNormGrad : KernelPattern<mlir::fsdp::NormGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::NormGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(grad.getKind() == "rms" ? "rms_norm_grad"
                                            : "layer_norm_grad",
                    adaptor.getOperands(),
                    {l.i64("axis", grad.getAxis()),
                     l.f32("epsilon", grad.getEpsilon())});
  }
};

/// BatchNormalization in inference form (running statistics).
struct LowerBatchNorm : KernelPattern<BatchNormalizationOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(BatchNormalizationOp norm, OpAdaptor adaptor,
                      Lowering &l) const override {
    if (norm.getTrainingMode() != 0)
      return l.fail("in training mode cannot run as inference; run "
                    "--fsdp-inference first");
    return l.kernel(kernel,
                    {adaptor.getX(), adaptor.getScale(), adaptor.getB(),
                     adaptor.getInputMean(), adaptor.getInputVar()},
                    {l.f32("epsilon", norm.getEpsilon())});
  }
};

/// Training batch norm and its gradient: the op's operands in order.
struct LowerBatchNormTrain : KernelPattern<mlir::fsdp::BatchNormTrainOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::BatchNormTrainOp norm, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.f32("epsilon", norm.getEpsilon()),
                     l.f32("momentum", norm.getMomentum())});
  }
};
struct LowerBatchNormGrad : KernelPattern<mlir::fsdp::BatchNormGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::BatchNormGradOp, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(), {});
  }
};

/// A random op's draw attributes: `op` (its fsdp.random_op id) and its
/// micro-batch `slot` of `slots` (0 of 1 without gradient accumulation).
FailureOr<SmallVector<NamedAttribute>> drawParams(Operation *op, Lowering &l) {
  auto id =
      mlir::fsdp::FSDPDialect::RandomOpAttrHelper(op->getContext()).getAttr(op);
  DenseI64ArrayAttr slot =
      mlir::fsdp::FSDPDialect::MicroBatchAttrHelper(op->getContext())
          .getAttr(op);
  if (!id)
    return l.fail("has no fsdp.random_op id");
  return SmallVector<NamedAttribute>{l.i64("op", id.getInt()),
                                     l.i64("slot", slot ? slot[0] : 0),
                                     l.i64("slots", slot ? slot[1] : 1)};
}

/// A training Dropout that drops: kernel `dropout` on the data (its mask
/// too where the op has one), with its ratio, its id (fsdp.random_op) and
/// its micro-batch slot. One that drops nothing is fsdp-inference's (or
/// fsdp-autodiff's) to remove.
struct LowerDropout : KernelPattern<DropoutOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(DropoutOp dropout, OpAdaptor adaptor,
                      Lowering &l) const override {
    APFloat ratio(0.5);
    DenseElementsAttr training;
    if (isa<NoneType>(dropout.getTrainingMode().getType()) ||
        !matchPattern(dropout.getTrainingMode(), m_Constant(&training)) ||
        training.getNumElements() != 1 ||
        !training.getElementType().isInteger(1) ||
        !*training.getValues<bool>().begin())
      return l.fail("is not in training mode (or its mode is not a "
                    "constant); run --fsdp-inference first");
    DenseFPElementsAttr ratios;
    if (!isa<NoneType>(dropout.getRatio().getType())) {
      if (!matchPattern(dropout.getRatio(), m_Constant(&ratios)) ||
          ratios.getNumElements() != 1)
        return l.fail("needs a constant ratio");
      ratio = *ratios.getValues<APFloat>().begin();
    }
    double p = ratio.convertToDouble();
    if (!(p > 0 && p < 1))
      return l.fail("ratio " + Twine(std::to_string(p)) +
                    " is not in (0, 1); a ratio of 0 is fsdp-inference's to "
                    "remove");
    FailureOr<SmallVector<NamedAttribute>> params = drawParams(dropout, l);
    if (failed(params))
      return failure();
    params->push_back(l.f64("ratio", ratio));
    return l.kernel(kernel, {adaptor.getData()}, *params);
  }
};

/// The generators: kernel `random_uniform` (RandomUniform(Like): low,
/// high), `random_normal` (RandomNormal(Like): mean, scale) or `bernoulli`
/// (its probabilities the input), with the op's draw attributes. A -Like
/// op's input gives only the shape, which the result has: the kernel takes
/// no input. The result's dtype is the kernel's (float32 or float64): a
/// half would round uniform numbers up to high.
template <typename GeneratorOp>
struct LowerGenerator : KernelPattern<GeneratorOp> {
  using KernelPattern<GeneratorOp>::KernelPattern;
  LogicalResult lower(GeneratorOp generator,
                      typename GeneratorOp::Adaptor adaptor,
                      Lowering &l) const override {
    auto floating = [](Type type) {
      Type element = cast<RankedTensorType>(type).getElementType();
      return element.isF32() || element.isF64();
    };
    Type result = generator.getOutput().getType();
    if (!floating(result))
      return generator.emitOpError()
             << "gives " << cast<RankedTensorType>(result).getElementType()
             << "; the runtime draws float32 and float64 numbers";
    FailureOr<SmallVector<NamedAttribute>> params = drawParams(generator, l);
    if (failed(params))
      return failure();
    SmallVector<Value> inputs;
    if constexpr (std::is_same_v<GeneratorOp, BernoulliOp>) {
      if (!floating(generator.getInput().getType()))
        return l.fail("needs float32 or float64 probabilities");
      inputs.push_back(adaptor.getInput());
    } else if constexpr (std::is_same_v<GeneratorOp, RandomNormalOp> ||
                         std::is_same_v<GeneratorOp, RandomNormalLikeOp>) {
      params->push_back(l.f64("mean", generator.getMean()));
      params->push_back(l.f64("scale", generator.getScale()));
    } else {
      if (!(generator.getLow().convertToDouble() <
            generator.getHigh().convertToDouble()))
        return l.fail("needs low < high");
      params->push_back(l.f64("low", generator.getLow()));
      params->push_back(l.f64("high", generator.getHigh()));
    }
    return l.kernel(this->kernel, inputs, *params);
  }
};

// Convolution and pooling.

/// Spatial attributes of Conv and the pools with ONNX's defaults filled in.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// The window of `op` over X (`input` is X's shape), auto_pad resolved to
/// explicit pads (onnxir::windowPads).
template <typename WindowOp>
FailureOr<Window> window(Lowering &l, WindowOp op, ArrayRef<int64_t> input,
                         ArrayRef<int64_t> kernelShape) {
  Window w;
  w.kernel.assign(kernelShape.begin(), kernelShape.end());
  w.strides = op.getStridesOrDefault();
  w.dilations = op.getDilationsOrDefault();
  std::string why;
  FailureOr<SmallVector<int64_t>> pads =
      windowPads(op.getAutoPad(), op.getPadsOrDefault(), w.strides, w.dilations,
                 input, w.kernel, why);
  if (failed(pads))
    return l.fail(why);
  w.pads = std::move(*pads);
  return w;
}

struct LowerConv : KernelPattern<ConvOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ConvOp conv, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<Window> win = window(l, conv, shapeOf(conv.getX()),
                                   shapeOf(conv.getW()).drop_front(2));
    if (failed(win))
      return failure();
    if (rankOf(conv.getX()) != 3 && rankOf(conv.getX()) != 4)
      return l.fail("only 1-D and 2-D convolutions are supported");
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.ints("strides", win->strides), l.ints("pads", win->pads),
                     l.ints("dilations", win->dilations),
                     l.i64("group", conv.getGroup())});
  }
};

/// ConvTranspose is conv_grad_input (the transposed convolution) of X by W
/// under the window of the convolution it transposes, plus the bias per
/// channel.
struct LowerConvTranspose : KernelPattern<ConvTransposeOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ConvTransposeOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    if (rankOf(op.getX()) != 3 && rankOf(op.getX()) != 4)
      return l.fail("only 1-D and 2-D transposed convolutions are supported");
    std::string why;
    FailureOr<SmallVector<int64_t>> pads = convolutionPads(op, why);
    if (failed(pads))
      return l.fail(why);
    SmallVector<NamedAttribute> params = {
        l.ints("strides", op.getStridesOrDefault()), l.ints("pads", *pads),
        l.ints("dilations", op.getDilationsOrDefault()),
        l.i64("group", op.getGroup())};
    if (isa<NoneType>(adaptor.getB().getType()))
      return l.kernel(kernel, {adaptor.getX(), adaptor.getW()}, params);
    auto transposed = l.rewriter.create<KernelOp>(
        op.getLoc(), TypeRange{op.getY().getType()}, l.b.getStringAttr(kernel),
        ValueRange{adaptor.getX(), adaptor.getW()},
        l.b.getDictionaryAttr(params));
    SmallVector<int64_t> perChannel(rankOf(op.getX()) - 1, 1);
    perChannel[0] = shapeOf(op.getB())[0];
    Value bias = l.rewriter.create<ViewOp>(
        op.getLoc(),
        RankedTensorType::get(
            perChannel,
            cast<RankedTensorType>(op.getB().getType()).getElementType()),
        adaptor.getB());
    return l.kernel("add", {transposed->getResult(0), bias});
  }
};

/// A 1-D window as the 2-D window one row high that pools X viewed as
/// [N, C, 1, L]: a plane's flat indices are the same in both.
Window rowWindow(Window w) {
  w.kernel.insert(w.kernel.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.dilations.insert(w.dilations.begin(), 1);
  w.pads = {0, w.pads[0], 0, w.pads[1]};
  return w;
}

/// A 3-D window as two 2-D ones: a box window's maximum is the maximum
/// over its depth of the (H, W) windows' maxima, and its average the
/// average of theirs (the count of elements a window takes, padding or
/// not, is the product of the counts along each axis). The first pools
/// (H, W) over X viewed as [N, C*D, H, W], the second D over that viewed
/// as [N, C, D, Ho*Wo].
std::pair<Window, Window> planeAndDepthWindows(const Window &w) {
  Window plane{{w.kernel[1], w.kernel[2]},
               {w.strides[1], w.strides[2]},
               {w.pads[1], w.pads[2], w.pads[4], w.pads[5]},
               {w.dilations[1], w.dilations[2]}};
  Window depth{{w.kernel[0], 1},
               {w.strides[0], 1},
               {w.pads[0], 0, w.pads[3], 0},
               {w.dilations[0], 1}};
  return {plane, depth};
}

/// `value` viewed as `shape` (same elements, same order).
Value viewAs(Lowering &l, Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  return l.rewriter.create<ViewOp>(
      l.op->getLoc(), RankedTensorType::get(shape, type.getElementType()),
      value);
}

/// A pooling kernel's parameters: window `w` (its dilations only
/// `withDilations`) and the op's `extra` ones.
SmallVector<NamedAttribute> windowParams(Lowering &l, const Window &w,
                                         bool withDilations,
                                         ArrayRef<NamedAttribute> extra) {
  SmallVector<NamedAttribute> params = {l.ints("kernel_shape", w.kernel),
                                        l.ints("strides", w.strides),
                                        l.ints("pads", w.pads)};
  if (withDilations)
    params.push_back(l.ints("dilations", w.dilations));
  llvm::append_range(params, extra);
  return params;
}

/// One 2-D pooling kernel `name` of `inputs` with window `w` (its
/// dilations only `withDilations`) and the op's other parameters, giving
/// a tensor of `shape`.
Value windowKernel(Lowering &l, StringRef name, ValueRange inputs,
                   ArrayRef<int64_t> shape, const Window &w, bool withDilations,
                   ArrayRef<NamedAttribute> extra) {
  SmallVector<NamedAttribute> params = windowParams(l, w, withDilations, extra);
  auto element =
      cast<RankedTensorType>(inputs.front().getType()).getElementType();
  return l.rewriter
      .create<KernelOp>(
          l.op->getLoc(), TypeRange{RankedTensorType::get(shape, element)},
          l.b.getStringAttr(name), inputs, l.b.getDictionaryAttr(params))
      .getResult(0);
}

/// A 3-D pool as two 2-D ones (planeAndDepthWindows).
LogicalResult pool3d(Lowering &l, StringRef name, Value x, const Window &w,
                     bool withDilations, ArrayRef<NamedAttribute> extra) {
  if (l.op->getNumResults() > 1 && !isa<NoneType>(l.op->getResult(1).getType()))
    return l.fail("gives Indices, which 3-D pooling does not support");
  ArrayRef<int64_t> in = shapeOf(x), out = shapeOf(l.op->getResult(0));
  auto [plane, depth] = planeAndDepthWindows(w);
  Value rows = windowKernel(
      l, name, viewAs(l, x, {in[0], in[1] * in[2], in[3], in[4]}),
      {in[0], in[1] * in[2], out[3], out[4]}, plane, withDilations, extra);
  Value pooled = windowKernel(
      l, name, viewAs(l, rows, {in[0], in[1], in[2], out[3] * out[4]}),
      {in[0], in[1], out[2], out[3] * out[4]}, depth, withDilations, extra);
  SmallVector<Value> replacements = {viewAs(l, pooled, out)};
  if (l.op->getNumResults() > 1)
    replacements.push_back(l.rewriter.create<NoValueOp>(l.op->getLoc()));
  l.rewriter.replaceOp(l.op, replacements);
  return success();
}

/// A pooling kernel (2-D) on `x` with window `w` and the op's other
/// parameters. A 1-D window pools X viewed one row high (rowWindow), and
/// the results are viewed back.
LogicalResult poolKernel(Lowering &l, StringRef name, Value x, Window w,
                         bool withDilations, ArrayRef<NamedAttribute> extra) {
  if (w.kernel.size() == 3)
    return pool3d(l, name, x, w, withDilations, extra);
  bool oneD = w.kernel.size() == 1;
  if (oneD)
    w = rowWindow(std::move(w));
  SmallVector<NamedAttribute> params = windowParams(l, w, withDilations, extra);
  if (!oneD)
    return l.kernel(name, x, params);
  auto unitRow = [](Type type) -> Type {
    auto tensor = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(tensor.getShape());
    shape.insert(shape.begin() + 2, 1);
    return RankedTensorType::get(shape, tensor.getElementType());
  };
  Location loc = l.op->getLoc();
  Value x2 = l.rewriter.create<ViewOp>(loc, unitRow(x.getType()), x);
  SmallVector<Type> types;
  for (Type type : l.op->getResultTypes())
    if (!isa<NoneType>(type))
      types.push_back(unitRow(type));
  auto pooled = l.rewriter.create<KernelOp>(loc, types, l.b.getStringAttr(name),
                                            x2, l.b.getDictionaryAttr(params));
  SmallVector<Value> replacements;
  unsigned next = 0;
  for (Type type : l.op->getResultTypes())
    replacements.push_back(isa<NoneType>(type)
                               ? Value(l.rewriter.create<NoValueOp>(loc))
                               : Value(l.rewriter.create<ViewOp>(
                                     loc, type, pooled.getResult(next++))));
  l.rewriter.replaceOp(l.op, replacements);
  return success();
}

struct LowerMaxPool : KernelPattern<MaxPoolOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(MaxPoolOp pool, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<Window> win =
        window(l, pool, shapeOf(pool.getX()), pool.getKernelShape());
    if (failed(win))
      return failure();
    SmallVector<NamedAttribute> params = {
        l.i64("ceil_mode", pool.getCeilMode())};
    if (!isa<NoneType>(pool.getIndices().getType()))
      params.push_back(l.i64("storage_order", pool.getStorageOrder()));
    return poolKernel(l, kernel, adaptor.getX(), *win, /*withDilations=*/true,
                      params);
  }
};

struct LowerAveragePool : KernelPattern<AveragePoolOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(AveragePoolOp pool, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<Window> win =
        window(l, pool, shapeOf(pool.getX()), pool.getKernelShape());
    if (failed(win))
      return failure();
    if (llvm::any_of(win->dilations, [](int64_t d) { return d != 1; }))
      return l.fail("dilations are not supported");
    return poolKernel(l, kernel, adaptor.getX(), *win, /*withDilations=*/false,
                      {l.i64("count_include_pad", pool.getCountIncludePad()),
                       l.i64("ceil_mode", pool.getCeilMode())});
  }
};

// Reductions.

/// ArgMax and ArgMin: the axis made non-negative, the flags as they are.
template <typename ArgOp> struct LowerArg : KernelPattern<ArgOp> {
  using KernelPattern<ArgOp>::KernelPattern;
  LogicalResult lower(ArgOp op, typename ArgOp::Adaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis = l.axis(op.getAxis(), rankOf(op.getData()));
    if (failed(axis))
      return failure();
    return l.kernel(this->kernel, adaptor.getData(),
                    {l.i64("axis", *axis), l.i64("keepdims", op.getKeepdims()),
                     l.i64("select_last_index", op.getSelectLastIndex())});
  }
};

/// ReduceMean and ReduceMax: axes are an attribute.
template <typename ReduceOp>
struct LowerReduceByAttr : KernelPattern<ReduceOp> {
  using KernelPattern<ReduceOp>::KernelPattern;
  LogicalResult lower(ReduceOp reduce, typename ReduceOp::Adaptor adaptor,
                      Lowering &l) const override {
    FailureOr<SmallVector<int64_t>> axes =
        l.axes(reduce.getAxes().value_or(ArrayRef<int64_t>{}),
               rankOf(reduce.getData()));
    if (failed(axes))
      return failure();
    return l.kernel(
        this->kernel, adaptor.getData(),
        {l.ints("axes", *axes), l.i64("keepdims", reduce.getKeepdims())});
  }
};

/// ReduceSum: axes are a constant operand; none and noop_with_empty_axes
/// make it a view. Axes given at run time with keepdims 1 are the static
/// shapes' to say: an axis whose size changes is reduced, one whose size
/// stays is not or has size 1, where reducing changes nothing.
struct LowerReduceSum : KernelPattern<ReduceSumOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ReduceSumOp reduce, OpAdaptor adaptor,
                      Lowering &l) const override {
    DenseIntElementsAttr constantAxes;
    if (!isa<NoneType>(adaptor.getAxes().getType()) &&
        !matchPattern(adaptor.getAxes(), m_Constant(&constantAxes)) &&
        reduce.getKeepdims()) {
      ArrayRef<int64_t> in = shapeOf(reduce.getData()),
                        out = shapeOf(reduce.getReduced());
      if (in.size() != out.size())
        return l.fail("keeps its dimensions but changes the rank");
      SmallVector<int64_t> changed;
      for (int64_t d = 0, e = in.size(); d < e; ++d) {
        if (in[d] != out[d] && out[d] != 1)
          return l.fail("result dimension " + Twine(d) + " is neither " +
                        Twine(in[d]) + " nor 1");
        if (in[d] != out[d])
          changed.push_back(d);
      }
      if (changed.empty())
        return l.view(adaptor.getData());
      return l.kernel(kernel, adaptor.getData(),
                      {l.ints("axes", changed), l.i64("keepdims", 1)});
    }
    FailureOr<SmallVector<int64_t>> values =
        l.optionalConstantInts(adaptor.getAxes(), "axes", {});
    if (failed(values))
      return failure();
    FailureOr<SmallVector<int64_t>> axes =
        l.axes(*values, rankOf(reduce.getData()));
    if (failed(axes))
      return failure();
    if (axes->empty() && reduce.getNoopWithEmptyAxes())
      return l.view(adaptor.getData());
    return l.kernel(
        kernel, adaptor.getData(),
        {l.ints("axes", *axes), l.i64("keepdims", reduce.getKeepdims())});
  }
};

// Shapes and data movement.

/// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the same bytes.
struct LowerViewLike : OpInterfaceConversionPattern<ViewLikeOpInterface> {
  using OpInterfaceConversionPattern::OpInterfaceConversionPattern;
  LogicalResult
  matchAndRewrite(ViewLikeOpInterface op, ArrayRef<Value>,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(checkTypes(op)))
      return failure();
    return Lowering(op, rewriter)
        .view(rewriter.getRemappedValue(op.getViewSource()));
  }
};

struct LowerTranspose : KernelPattern<TransposeOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(TransposeOp transpose, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getData(),
                    {l.ints("perm", transpose.getPermOrDefault())});
  }
};

/// DepthToSpace and SpaceToDepth: a transpose between views. The input
/// viewed with its channels (DepthToSpace) or spatial dims (SpaceToDepth)
/// split into blocks, the blocks moved, and the result viewed flat.
LogicalResult blockTranspose(Lowering &l, StringRef kernel, Value input,
                             ArrayRef<int64_t> split, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(input.getType());
  Location loc = l.op->getLoc();
  Type element = type.getElementType();
  Value blocks = l.rewriter.create<ViewOp>(
      loc, RankedTensorType::get(split, element), input);
  SmallVector<int64_t> moved;
  for (int64_t p : perm)
    moved.push_back(split[p]);
  Value transposed =
      l.rewriter
          .create<KernelOp>(loc,
                            TypeRange{RankedTensorType::get(moved, element)},
                            l.b.getStringAttr(kernel), ValueRange{blocks},
                            l.b.getDictionaryAttr({l.ints("perm", perm)}))
          .getResult(0);
  return l.view(transposed);
}

struct LowerDepthToSpace : KernelPattern<DepthToSpaceOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(DepthToSpaceOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    ArrayRef<int64_t> in = shapeOf(op.getInput());
    int64_t b = op.getBlocksize();
    if (in.size() != 4 || b < 1 || in[1] % (b * b) != 0)
      return l.fail("needs NCHW input whose channels are a multiple of "
                    "blocksize² (blocksize " +
                    Twine(b) + ")");
    int64_t c = in[1] / (b * b);
    if (op.getMode() == "DCR")
      return blockTranspose(l, kernel, adaptor.getInput(),
                            {in[0], b, b, c, in[2], in[3]}, {0, 3, 4, 1, 5, 2});
    if (op.getMode() == "CRD")
      return blockTranspose(l, kernel, adaptor.getInput(),
                            {in[0], c, b, b, in[2], in[3]}, {0, 1, 4, 2, 5, 3});
    return l.fail("mode must be DCR or CRD, not \"" + op.getMode() + "\"");
  }
};

struct LowerSpaceToDepth : KernelPattern<SpaceToDepthOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(SpaceToDepthOp op, OpAdaptor adaptor,
                      Lowering &l) const override {
    ArrayRef<int64_t> in = shapeOf(op.getInput());
    int64_t b = op.getBlocksize();
    if (in.size() != 4 || b < 1 || in[2] % b != 0 || in[3] % b != 0)
      return l.fail("needs NCHW input whose height and width are multiples "
                    "of blocksize " +
                    Twine(b));
    return blockTranspose(l, kernel, adaptor.getInput(),
                          {in[0], in[1], in[2] / b, b, in[3] / b, b},
                          {0, 3, 5, 1, 2, 4});
  }
};

/// Trilu's diagonal offset `k`: a parameter when it is a constant (0 when
/// absent), else the kernel's second input.
struct LowerTrilu : KernelPattern<TriluOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(TriluOp trilu, OpAdaptor adaptor,
                      Lowering &l) const override {
    NamedAttribute upper = l.i64("upper", trilu.getUpper());
    DenseIntElementsAttr k;
    if (isa<NoneType>(trilu.getK().getType()))
      return l.kernel(kernel, adaptor.getInput(), {l.i64("k", 0), upper});
    if (!matchPattern(trilu.getK(), m_Constant(&k)))
      return l.kernel(kernel, {adaptor.getInput(), adaptor.getK()}, {upper});
    if (k.getNumElements() != 1)
      return l.fail("k must hold one value");
    return l.kernel(kernel, adaptor.getInput(),
                    {l.i64("k", (*k.getValues<APInt>().begin()).getSExtValue()),
                     upper});
  }
};

/// CumSum's axis: a non-negative parameter when it is a constant, else
/// the kernel's second input (checked when it runs).
struct LowerCumSum : KernelPattern<CumSumOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(CumSumOp cumsum, OpAdaptor adaptor,
                      Lowering &l) const override {
    SmallVector<NamedAttribute> params = {
        l.i64("exclusive", cumsum.getExclusive()),
        l.i64("reverse", cumsum.getReverse())};
    DenseIntElementsAttr axis;
    if (!matchPattern(cumsum.getAxis(), m_Constant(&axis)))
      return l.kernel(kernel, {adaptor.getX(), adaptor.getAxis()}, params);
    if (axis.getNumElements() != 1)
      return l.fail("axis must hold one value");
    FailureOr<int64_t> a = l.axis(
        (*axis.getValues<APInt>().begin()).getSExtValue(), rankOf(cumsum.getX()));
    if (failed(a))
      return failure();
    params.push_back(l.i64("axis", *a));
    return l.kernel(kernel, adaptor.getX(), params);
  }
};

struct LowerConcat : KernelPattern<ConcatOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ConcatOp concat, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis =
        l.axis(concat.getAxis(), rankOf(concat.getResult()));
    if (failed(axis))
      return failure();
    return l.kernel(kernel, adaptor.getInputs(), {l.i64("axis", *axis)});
  }
};

struct LowerSplit : KernelPattern<SplitOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(SplitOp split, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis = l.axis(split.getAxis(), rankOf(split.getInput()));
    if (failed(axis))
      return failure();
    return l.kernel(kernel, adaptor.getInput(), {l.i64("axis", *axis)});
  }
};

/// Slice with constant bounds: a start and a step for every axis, starts
/// clamped as ONNX does; the result type carries the sizes.
struct LowerSlice : KernelPattern<SliceOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(SliceOp slice, OpAdaptor adaptor,
                      Lowering &l) const override {
    ArrayRef<int64_t> shape = shapeOf(slice.getData());
    int64_t rank = shape.size();
    FailureOr<SmallVector<int64_t>> starts =
        l.constantInts(adaptor.getStarts(), "starts");
    if (failed(starts))
      return failure();
    SmallVector<int64_t> allAxes = llvm::to_vector(
        llvm::seq<int64_t>(0, static_cast<int64_t>(starts->size())));
    FailureOr<SmallVector<int64_t>> axes =
        l.optionalConstantInts(adaptor.getAxes(), "axes", allAxes);
    if (failed(axes))
      return failure();
    FailureOr<SmallVector<int64_t>> steps = l.optionalConstantInts(
        adaptor.getSteps(), "steps", SmallVector<int64_t>(starts->size(), 1));
    if (failed(steps))
      return failure();
    if (axes->size() != starts->size() || steps->size() != starts->size())
      return l.fail("starts, axes and steps differ in length");
    SmallVector<int64_t> allStarts(rank, 0), allSteps(rank, 1);
    for (auto [axisValue, start, step] : llvm::zip(*axes, *starts, *steps)) {
      FailureOr<int64_t> axis = l.axis(axisValue, rank);
      if (failed(axis))
        return failure();
      if (step == 0)
        return l.fail("has a zero step");
      int64_t dim = shape[*axis];
      int64_t s = start < 0 ? start + dim : start;
      // ONNX clamps starts to [0, dim] (forward) or [0, dim - 1] (back).
      s = step > 0 ? std::clamp<int64_t>(s, 0, dim)
                   : std::clamp<int64_t>(s, 0, dim - 1);
      allStarts[*axis] = s;
      allSteps[*axis] = step;
    }
    return l.kernel(kernel, adaptor.getData(),
                    {l.ints("starts", allStarts), l.ints("steps", allSteps)});
  }
};

struct LowerGather : KernelPattern<GatherOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(GatherOp gather, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis =
        l.axis(gather.getAxis(), rankOf(gather.getData()));
    if (failed(axis))
      return failure();
    return l.kernel(kernel, {adaptor.getData(), adaptor.getIndices()},
                    {l.i64("axis", *axis)});
  }
};

/// GatherElements and ScatterElements: the axis made non-negative, and
/// ScatterElements's reduction (none, add or mul).
struct LowerGatherElements : KernelPattern<GatherElementsOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(GatherElementsOp gather, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis =
        l.axis(gather.getAxis(), rankOf(gather.getData()));
    if (failed(axis))
      return failure();
    return l.kernel(kernel, adaptor.getOperands(), {l.i64("axis", *axis)});
  }
};

struct LowerScatterElements : KernelPattern<ScatterElementsOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ScatterElementsOp scatter, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<int64_t> axis =
        l.axis(scatter.getAxis(), rankOf(scatter.getData()));
    if (failed(axis))
      return failure();
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.i64("axis", *axis),
                     l.str("reduction", scatter.getReduction())});
  }
};

struct LowerScatterND : KernelPattern<ScatterNDOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ScatterNDOp scatter, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.str("reduction", scatter.getReduction())});
  }
};

// Einsum.

/// A value whose dims carry the letters of `term`, one letter each.
struct Lettered {
  Value value;
  std::string term;

  bool has(char c) const { return term.find(c) != std::string::npos; }
  int64_t size(char c) const { return shapeOf(value)[term.find(c)]; }
  SmallVector<int64_t> sizes(StringRef letters) const {
    return llvm::to_vector(
        llvm::map_range(letters, [&](char c) { return size(c); }));
  }
};

int64_t product(ArrayRef<int64_t> sizes) {
  int64_t n = 1;
  for (int64_t size : sizes)
    n *= size;
  return n;
}

/// The letters of `from` that `keep` holds, in `from`'s order.
std::string lettersOf(StringRef from, llvm::function_ref<bool(char)> keep) {
  std::string letters;
  for (char c : from)
    if (keep(c))
      letters.push_back(c);
  return letters;
}

/// perm such that permuting `from` by it gives `to` (same letters).
SmallVector<int64_t> permutationTo(StringRef from, StringRef to) {
  SmallVector<int64_t> perm;
  for (char c : to)
    perm.push_back(from.find(c));
  return perm;
}

/// Two operands as one batched matmul: their letters in groups, each group
/// in one order, and how many elements that order moves through
/// transposes.
struct ProductLayout {
  std::string batch, freeA, freeB, contracted;
  int64_t cost = 0;
};

/// The layout of a @ b, kept letters `keep`, that moves the fewest
/// elements: each group ordered as the result, a or b orders it, an
/// operand transposed unless it already reads [batch, free, contracted]
/// (b also [batch, contracted, free]), the result unless it comes out in
/// `keep`'s order or not `ordered`.
ProductLayout layoutProduct(const Lettered &a, const Lettered &b,
                            StringRef keep, bool ordered) {
  auto inA = [&](char c) { return a.has(c); };
  auto inB = [&](char c) { return b.has(c); };
  int64_t result = 1;
  for (char c : keep)
    result *= inA(c) && inB(c) ? std::max(a.size(c), b.size(c))
                               : (inA(c) ? a.size(c) : b.size(c));
  ProductLayout best;
  best.cost = -1;
  StringRef ta = a.term, tb = b.term;
  for (StringRef batchOrder : {keep, ta, tb})
    for (StringRef freeAOrder : {keep, ta})
      for (StringRef freeBOrder : {keep, tb})
        for (StringRef contractedOrder : {ta, tb}) {
          ProductLayout p;
          p.batch = lettersOf(batchOrder, [&](char c) {
            return inA(c) && inB(c) && keep.contains(c);
          });
          p.freeA =
              lettersOf(freeAOrder, [&](char c) { return inA(c) && !inB(c); });
          p.freeB =
              lettersOf(freeBOrder, [&](char c) { return inB(c) && !inA(c); });
          p.contracted = lettersOf(contractedOrder, [&](char c) {
            return inA(c) && inB(c) && !keep.contains(c);
          });
          if (a.term != p.batch + p.freeA + p.contracted)
            p.cost += product(shapeOf(a.value));
          if (b.term != p.batch + p.contracted + p.freeB &&
              b.term != p.batch + p.freeB + p.contracted)
            p.cost += product(shapeOf(b.value));
          if (ordered && keep != StringRef(p.batch + p.freeA + p.freeB))
            p.cost += result;
          if (best.cost < 0 || p.cost < best.cost)
            best = p;
        }
  return best;
}

/// An Einsum as the runtime's kernels: sums (`reduce_sum`), permutations
/// (`transpose`), views, and the product of two operands as one batched
/// `matmul` over [batch..., free..., contracted...] seen as [batch..., M,
/// K] (or, with no contracted letter, a broadcasting `mul`).
class EinsumBuilder {
public:
  explicit EinsumBuilder(Lowering &l) : l(l) {}

  /// `x` summed over the letters `keep` lacks.
  Lettered sumAway(const Lettered &x, StringRef keep) {
    SmallVector<int64_t> axes;
    for (auto [d, c] : llvm::enumerate(x.term))
      if (!keep.contains(c))
        axes.push_back(d);
    if (axes.empty())
      return x;
    std::string kept =
        lettersOf(x.term, [&](char c) { return keep.contains(c); });
    return {make("reduce_sum", x.sizes(kept), x.value,
                 {l.ints("axes", axes), l.i64("keepdims", 0)}),
            kept};
  }

  /// `x` with its letters in the order `to`.
  Lettered permute(const Lettered &x, StringRef to) {
    if (x.term == to)
      return x;
    return {make("transpose", x.sizes(to), x.value,
                 {l.ints("perm", permutationTo(x.term, to))}),
            to.str()};
  }

  /// The product of `a` and `b` summed over the letters `keep` lacks, its
  /// letters in the order [batch (in both), one's free, the other's free],
  /// operands and orders chosen by layoutProduct (the caller permutes the
  /// result into `keep`'s order when `ordered`).
  Lettered contract(Lettered a, Lettered b, StringRef keep, bool ordered) {
    // A letter only one operand has and the result drops: summed first.
    a = sumAway(a, b.term + keep.str());
    b = sumAway(b, a.term + keep.str());
    // A contracted letter of size 1 on one side: the other side's sum.
    for (char c : a.term) {
      if (!b.has(c) || keep.contains(c) || a.size(c) == b.size(c))
        continue;
      Lettered &wide = a.size(c) == 1 ? b : a;
      SmallVector<int64_t> shape(shapeOf(wide.value));
      int64_t axis = wide.term.find(c);
      shape[axis] = 1;
      wide.value = make("reduce_sum", shape, wide.value,
                        {l.ints("axes", {axis}), l.i64("keepdims", 1)});
    }
    // The cheaper of a @ b and b @ a (b @ a reads b's free letters first).
    ProductLayout layout = layoutProduct(a, b, keep, ordered);
    if (ProductLayout swapped = layoutProduct(b, a, keep, ordered);
        swapped.cost < layout.cost) {
      std::swap(a, b);
      layout = swapped;
    }
    const std::string &batch = layout.batch, &freeA = layout.freeA,
                      &freeB = layout.freeB, &k = layout.contracted;
    SmallVector<int64_t> batchSizes;
    for (char c : batch)
      batchSizes.push_back(std::max(a.size(c), b.size(c)));
    SmallVector<int64_t> shape(batchSizes);
    llvm::append_range(shape, a.sizes(freeA));
    llvm::append_range(shape, b.sizes(freeB));
    std::string natural = batch + freeA + freeB;
    Type element = cast<RankedTensorType>(a.value.getType()).getElementType();
    if (k.empty()) {
      // An outer product over the batch: a as [batch, freeA, 1...] times b
      // as [batch, 1..., freeB].
      Lettered lhs = permute(a, batch + freeA), rhs = permute(b, batch + freeB);
      SmallVector<int64_t> lhsShape = lhs.sizes(lhs.term),
                           rhsShape = rhs.sizes(batch);
      lhsShape.append(freeB.size(), 1);
      rhsShape.append(freeA.size(), 1);
      llvm::append_range(rhsShape, rhs.sizes(freeB));
      return {make("mul", shape,
                   {reshape(lhs.value, lhsShape), reshape(rhs.value, rhsShape)},
                   {}, element),
              natural};
    }
    Lettered lhs = permute(a, batch + freeA + k);
    bool transB = b.term == batch + freeB + k && b.term != batch + k + freeB;
    Lettered rhs = transB ? b : permute(b, batch + k + freeB);
    int64_t m = product(a.sizes(freeA)), n = product(b.sizes(freeB)),
            depth = product(a.sizes(k));
    SmallVector<int64_t> lhsShape = lhs.sizes(batch),
                         rhsShape = rhs.sizes(batch), productShape(batchSizes);
    lhsShape.append({m, depth});
    rhsShape.append(transB ? std::initializer_list<int64_t>{n, depth}
                           : std::initializer_list<int64_t>{depth, n});
    productShape.append({m, n});
    Value products =
        make("matmul", productShape,
             {reshape(lhs.value, lhsShape), reshape(rhs.value, rhsShape)},
             {l.i64("trans_b", transB)}, element);
    return {reshape(products, shape), natural};
  }

private:
  /// Kernel `name` on `inputs` giving a tensor of `shape` (of `element`,
  /// or of the first input's element type).
  Value make(StringRef name, ArrayRef<int64_t> shape, ValueRange inputs,
             ArrayRef<NamedAttribute> params, Type element = {}) {
    if (!element)
      element = cast<RankedTensorType>(inputs[0].getType()).getElementType();
    return l.rewriter
        .create<KernelOp>(
            l.op->getLoc(), TypeRange{RankedTensorType::get(shape, element)},
            l.rewriter.getStringAttr(name), inputs,
            params.empty() ? DictionaryAttr() : l.b.getDictionaryAttr(params))
        .getResult(0);
  }

  /// `x` viewed as `shape` (same elements).
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (shapeOf(x) == shape)
      return x;
    auto type = RankedTensorType::get(
        shape, cast<RankedTensorType>(x.getType()).getElementType());
    return l.rewriter.create<ViewOp>(l.op->getLoc(), type, x);
  }

  Lowering &l;
};

/// Why the runtime cannot run an Einsum of `terms` over operands of
/// `shapes`, or "" when it can: every term one distinct letter per dim of
/// its operand (a repeated letter, a diagonal, is not run), a letter's
/// sizes equal or 1 (broadcast), each output letter distinct and in an
/// input.
std::string einsumProblem(const EinsumTerms &terms,
                          ArrayRef<ArrayRef<int64_t>> shapes) {
  if (terms.inputs.size() != shapes.size())
    return "has " + std::to_string(terms.inputs.size()) +
           (terms.inputs.size() == 1 ? " term" : " terms") + " for " +
           std::to_string(shapes.size()) + " operands";
  std::map<char, int64_t> sizes;
  for (auto [term, shape] : llvm::zip(terms.inputs, shapes)) {
    if (term.size() != shape.size())
      return "has the term \"" + term + "\" for an operand of rank " +
             std::to_string(shape.size());
    for (auto [d, c] : llvm::enumerate(term)) {
      if (!llvm::isAlpha(c))
        return "has '" + std::string(1, c) + "', which is not a letter";
      if (term.find(c) != d)
        return "repeats the letter '" + std::string(1, c) +
               "' within one operand's term (a diagonal), which the runtime "
               "does not take";
      auto [it, fresh] = sizes.try_emplace(c, shape[d]);
      if (!fresh && it->second != shape[d] && it->second != 1 && shape[d] != 1)
        return "gives the letter '" + std::string(1, c) + "' sizes " +
               std::to_string(it->second) + " and " + std::to_string(shape[d]);
      if (it->second == 1)
        it->second = shape[d];
    }
  }
  for (auto [d, c] : llvm::enumerate(terms.output))
    if (!sizes.count(c) || terms.output.find(c) != d)
      return "has the output letter '" + std::string(1, c) +
             "' twice or in no input";
  return "";
}

/// Any Einsum of distinct letters: operands multiplied in from the left,
/// each product keeping the letters the output or a later operand reads.
struct LowerEinsum : KernelPattern<EinsumOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(EinsumOp einsum, OpAdaptor adaptor,
                      Lowering &l) const override {
    ValueRange inputs = adaptor.getInputs();
    SmallVector<int64_t> ranks;
    SmallVector<ArrayRef<int64_t>> shapes;
    for (Value input : inputs) {
      ranks.push_back(rankOf(input));
      shapes.push_back(shapeOf(input));
    }
    auto refuse = [&](const Twine &why) {
      return l.fail("equation \"" + einsum.getEquation() + "\" " + why);
    };
    FailureOr<EinsumTerms> terms = einsumTerms(einsum.getEquation(), ranks);
    if (failed(terms))
      return refuse("has an ellipsis its operands' ranks do not fit");
    if (std::string problem = einsumProblem(*terms, shapes); !problem.empty())
      return refuse(problem);
    StringRef out = terms->output;
    EinsumBuilder e(l);
    Lettered acc{inputs[0], terms->inputs[0]};
    for (size_t i = 1; i < inputs.size(); ++i) {
      bool last = i + 1 == inputs.size();
      std::string later = out.str();
      for (size_t j = i + 1; j < inputs.size(); ++j)
        later += terms->inputs[j];
      std::string keep;
      for (char c : acc.term + terms->inputs[i])
        if (StringRef(later).contains(c) && !StringRef(keep).contains(c))
          keep.push_back(c);
      acc = e.contract(acc, {inputs[i], terms->inputs[i]}, last ? out : keep,
                       last);
    }
    acc = e.permute(e.sumAway(acc, out), out);
    if (shapeOf(acc.value) != shapeOf(einsum.getResult()))
      return refuse("gives a result of another shape than its type's");
    return l.view(acc.value);
  }
};

// Losses and gradients.

/// The parameters of the cross-entropy and the negative log-likelihood,
/// shared by the losses and their gradients:
/// `reduction`, and `ignore_index` when set.
template <typename LossOp>
SmallVector<NamedAttribute> crossEntropyParams(LossOp loss, Lowering &l) {
  SmallVector<NamedAttribute> params = {
      l.str("reduction", loss.getReduction())};
  if (loss.getIgnoreIndex())
    params.push_back(l.i64("ignore_index", *loss.getIgnoreIndex()));
  return params;
}

struct LowerCrossEntropy : KernelPattern<SoftmaxCrossEntropyLossOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(SoftmaxCrossEntropyLossOp loss, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(
        kernel,
        {adaptor.getScores(), adaptor.getLabels(), adaptor.getWeights()},
        crossEntropyParams(loss, l));
  }
};

/// fsdp.softmax_cross_entropy: the loss kernel with its log-sum-exp as the
/// last output (`lse` = 1).
struct LowerCrossEntropyWithLse
    : KernelPattern<mlir::fsdp::SoftmaxCrossEntropyOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::SoftmaxCrossEntropyOp loss, OpAdaptor adaptor,
                      Lowering &l) const override {
    SmallVector<NamedAttribute> params = crossEntropyParams(loss, l);
    params.push_back(l.i64("lse", 1));
    return l.kernel(kernel, adaptor.getOperands(), params);
  }
};

/// The gradient, with `lse` = 1 when it reads the forward's log-sum-exp
/// (its last input).
struct LowerCrossEntropyGrad
    : KernelPattern<mlir::fsdp::SoftmaxCrossEntropyGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::SoftmaxCrossEntropyGradOp grad,
                      OpAdaptor adaptor, Lowering &l) const override {
    SmallVector<NamedAttribute> params = crossEntropyParams(grad, l);
    if (grad.getLse())
      params.push_back(l.i64("lse", 1));
    return l.kernel(kernel, adaptor.getOperands(), params);
  }
};

struct LowerNllLoss : KernelPattern<NegativeLogLikelihoodLossOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(NegativeLogLikelihoodLossOp loss, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(
        kernel,
        {adaptor.getInput(), adaptor.getTarget(), adaptor.getWeight()},
        crossEntropyParams(loss, l));
  }
};

/// The present ones of a recurrent op's optional inputs B, initial_h and
/// initial_c, appended to X, W, R, with a 0/1 parameter saying which are
/// there; the shared parameters (plan-format.md's `lstm`).
LogicalResult recurrentOperands(Operation *op, Value x, Value w, Value r,
                                ArrayRef<std::pair<StringRef, Value>> optional,
                                Lowering &l, SmallVector<Value> &operands,
                                SmallVector<NamedAttribute> &params) {
  std::string why = recurrentUnsupported(op);
  if (!why.empty())
    return l.fail(why);
  operands = {x, w, r};
  for (auto [name, value] : optional) {
    bool present = value && !isa<NoneType>(value.getType());
    params.push_back(l.i64(name, present));
    if (present)
      operands.push_back(value);
  }
  return success();
}

template <typename RecurrentOp>
struct LowerRecurrent : KernelPattern<RecurrentOp> {
  using KernelPattern<RecurrentOp>::KernelPattern;
  LogicalResult lower(RecurrentOp op, typename RecurrentOp::Adaptor adaptor,
                      Lowering &l) const override {
    SmallVector<std::pair<StringRef, Value>> optional = {
        {"bias", adaptor.getB()}, {"initial_h", adaptor.getInitialH()}};
    SmallVector<NamedAttribute> params = {
        l.i64("hidden_size", op.getHiddenSize()),
        l.str("direction", op.getDirection()), l.i64("layout", op.getLayout())};
    if constexpr (std::is_same_v<RecurrentOp, LSTMOp>)
      optional.push_back({"initial_c", adaptor.getInitialC()});
    if constexpr (std::is_same_v<RecurrentOp, GRUOp>)
      params.push_back(
          l.i64("linear_before_reset", op.getLinearBeforeReset() != 0));
    SmallVector<Value> operands;
    if (failed(recurrentOperands(op, adaptor.getX(), adaptor.getW(),
                                 adaptor.getR(), optional, l, operands,
                                 params)))
      return failure();
    auto kernelOp = l.rewriter.create<KernelOp>(
        op.getLoc(), recurrentResultTypes(op.getOperation()),
        l.rewriter.getStringAttr(this->kernel), operands,
        l.b.getDictionaryAttr(params));
    SmallVector<Value> replacements;
    for (OpResult result : op->getResults())
      replacements.push_back(
          isa<NoneType>(result.getType())
              ? Value(l.rewriter.create<NoValueOp>(op.getLoc()))
              : kernelOp.getResult(result.getResultNumber()));
    l.rewriter.replaceOp(op, replacements);
    return success();
  }
};

/// fsdp.recurrent_grad's operands and attributes are its kernel's.
struct LowerRecurrentGrad : KernelPattern<mlir::fsdp::RecurrentGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::RecurrentGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    StringRef cell = grad.getCell();
    if (cell != "lstm" && cell != "gru" && cell != "rnn")
      return l.fail("cell must be lstm, gru or rnn, not '" + cell + "'");
    return l.kernel((cell + "_grad").str(), adaptor.getOperands(),
                    {l.i64("hidden_size", grad.getHiddenSize()),
                     l.str("direction", grad.getDirection()),
                     l.i64("layout", grad.getLayout()),
                     l.i64("linear_before_reset", grad.getLinearBeforeReset()),
                     l.i64("bias", grad.getBias()),
                     l.i64("initial_h", grad.getInitialH()),
                     l.i64("initial_c", grad.getInitialC())});
  }
};

struct LowerNllLossGrad : KernelPattern<mlir::fsdp::NllLossGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::NllLossGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(), crossEntropyParams(grad, l));
  }
};

struct LowerGatherGrad : KernelPattern<mlir::fsdp::GatherGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::GatherGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.i64("axis", grad.getAxis())});
  }
};

/// The fused optimizer steps. Their hyperparameters stay f64 so the kernel
/// rounds them to f32 as the decomposed form's constants are rounded.
struct LowerAdamW : KernelPattern<mlir::fsdp::AdamWOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::AdamWOp step, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.f64("beta1", step.getBeta1()),
                     l.f64("beta2", step.getBeta2()),
                     l.f64("eps", step.getEps()),
                     l.f64("weight_decay", step.getWeightDecay())});
  }
};

struct LowerSGD : KernelPattern<mlir::fsdp::SGDOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::SGDOp step, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.f64("momentum", step.getMomentum()),
                     l.f64("dampening", step.getDampening()),
                     l.i64("nesterov", step.getNesterov()),
                     l.f64("weight_decay", step.getWeightDecay())});
  }
};

/// The gradients of Conv with respect to its input and its weight.
template <typename ConvGradOp>
struct LowerConvGrad : KernelPattern<ConvGradOp> {
  using KernelPattern<ConvGradOp>::KernelPattern;
  LogicalResult lower(ConvGradOp grad, typename ConvGradOp::Adaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(this->kernel, adaptor.getOperands(),
                    {l.ints("strides", grad.getStrides()),
                     l.ints("pads", grad.getPads()),
                     l.ints("dilations", grad.getDilations()),
                     l.i64("group", grad.getGroup())});
  }
};

/// fsdp.grid_sample_grad is one `grid_sample_grad` kernel giving d(x) and
/// d(grid).
struct LowerGridSampleGrad : KernelPattern<mlir::fsdp::GridSampleGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::GridSampleGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    if (rankOf(grad.getX()) != 4 || rankOf(grad.getGrid()) != 4)
      return l.fail("samples [N, C, H, W] at a grid [N, Ho, Wo, 2], not "
                    "ranks " +
                    Twine(rankOf(grad.getX())) + " and " +
                    Twine(rankOf(grad.getGrid())));
    FailureOr<SmallVector<NamedAttribute>> params =
        gridSampleParams(l, grad.getX(), grad.getGrid(), grad.getMode(),
                         grad.getPaddingMode(), grad.getAlignCorners());
    if (failed(params))
      return failure();
    return l.kernel(kernel, adaptor.getOperands(), *params);
  }
};

/// fsdp.pool_grad as the forward pools (poolKernel): 2-D as one pool_grad
/// kernel; 1-D on x and the gradient viewed one row high; 3-D as the
/// gradients of its two 2-D pools in reverse order, the depth pool's first
/// (over the (H, W) pool's results, computed again: a max routes to the
/// first maximal plane, then within it to the first maximal element, which
/// is the first maximum of the box in (D, H, W) order, as PyTorch's).
struct LowerPoolGrad : KernelPattern<mlir::fsdp::PoolGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::PoolGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    int64_t rank = rankOf(grad.getX());
    Window w{llvm::to_vector(grad.getKernelShape()),
             llvm::to_vector(grad.getStrides()),
             llvm::to_vector(grad.getPads()),
             llvm::to_vector(grad.getDilations())};
    if (rank < 3 || rank > 5 || rankOf(grad.getGrad()) != rank ||
        static_cast<int64_t>(w.kernel.size()) != rank - 2)
      return l.fail("pools 1-D, 2-D or 3-D windows of [N, C, spatial...], "
                    "not a kernel_shape of " +
                    Twine(w.kernel.size()) + " over rank " + Twine(rank));
    SmallVector<NamedAttribute> flags = {
        l.str("mode", grad.getMode()), l.i64("ceil_mode", grad.getCeilMode()),
        l.i64("count_include_pad", grad.getCountIncludePad())};
    Value x = adaptor.getX(), g = adaptor.getGrad();
    ArrayRef<int64_t> in = shapeOf(x), out = shapeOf(g);
    if (rank == 4)
      return l.view(windowKernel(l, kernel, {x, g}, in, w, true, flags));
    if (rank == 3) {
      Value dx =
          windowKernel(l, kernel,
                       {viewAs(l, x, {in[0], in[1], 1, in[2]}),
                        viewAs(l, g, {out[0], out[1], 1, out[2]})},
                       {in[0], in[1], 1, in[2]}, rowWindow(w), true, flags);
      return l.view(dx);
    }
    auto [plane, depth] = planeAndDepthWindows(w);
    bool max = grad.getMode() == "max";
    Value planes = viewAs(l, x, {in[0], in[1] * in[2], in[3], in[4]});
    SmallVector<int64_t> rowsShape = {in[0], in[1] * in[2], out[3], out[4]};
    SmallVector<int64_t> depthShape = {in[0], in[1], in[2], out[3] * out[4]};
    SmallVector<NamedAttribute> forward = {
        l.i64("ceil_mode", grad.getCeilMode())};
    if (!max)
      forward.push_back(l.i64("count_include_pad", grad.getCountIncludePad()));
    Value rows = windowKernel(l, max ? "max_pool" : "average_pool", planes,
                              rowsShape, plane, max, forward);
    Value dRows =
        windowKernel(l, kernel,
                     {viewAs(l, rows, depthShape),
                      viewAs(l, g, {out[0], out[1], out[2], out[3] * out[4]})},
                     depthShape, depth, true, flags);
    Value dPlanes =
        windowKernel(l, kernel, {planes, viewAs(l, dRows, rowsShape)},
                     {in[0], in[1] * in[2], in[3], in[4]}, plane, true, flags);
    return l.view(dPlanes);
  }
};

// Flat parameters.

/// The flat parameter a fsdp.unflatten or fsdp.pack names, as its layout.
FailureOr<::fsdp::layout::FlatLayout>
flatLayoutOf(Operation *op, FlatSymbolRefAttr unitRef,
             SymbolTableCollection &symbols) {
  auto unit =
      symbols.lookupNearestSymbolFrom<mlir::fsdp::FlatParamOp>(op, unitRef);
  if (!unit)
    return op->emitOpError() << unitRef << " is not an fsdp.flat_param";
  return mlir::fsdp::computeLayout(unit, symbols);
}

/// A unit's flat buffer as its parameters: one view per member at its
/// offset in the layout.
struct LowerUnflatten : OpConversionPattern<mlir::fsdp::UnflattenOp> {
  LowerUnflatten(MLIRContext *context, SymbolTableCollection &symbols)
      : OpConversionPattern(context), symbols(symbols) {}

  LogicalResult
  matchAndRewrite(mlir::fsdp::UnflattenOp unflatten, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<::fsdp::layout::FlatLayout> layout =
        flatLayoutOf(unflatten, unflatten.getUnitAttr(), symbols);
    if (failed(layout))
      return failure();
    SmallVector<Value> views;
    for (auto [index, result] : llvm::enumerate(unflatten.getResults()))
      views.push_back(rewriter.create<ViewOp>(
          unflatten.getLoc(), result.getType(), adaptor.getFlat(),
          layout->paramRange(index).begin));
    rewriter.replaceOp(unflatten, views);
    return success();
  }

  SymbolTableCollection &symbols;
};

/// The inverse of unflatten: a `pack` kernel that writes each member at its
/// offset and zeros elsewhere.
struct LowerPack : OpConversionPattern<mlir::fsdp::PackOp> {
  LowerPack(MLIRContext *context, SymbolTableCollection &symbols)
      : OpConversionPattern(context), symbols(symbols) {}

  LogicalResult
  matchAndRewrite(mlir::fsdp::PackOp pack, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<::fsdp::layout::FlatLayout> layout =
        flatLayoutOf(pack, pack.getUnitAttr(), symbols);
    if (failed(layout))
      return failure();
    SmallVector<int64_t> offsets;
    for (size_t index = 0; index < layout->numParams(); ++index)
      offsets.push_back(layout->paramRange(index).begin);
    rewriter.replaceOpWithNewOp<KernelOp>(
        pack, pack.getFlat().getType(), rewriter.getStringAttr("pack"),
        adaptor.getValues(),
        rewriter.getDictionaryAttr(rewriter.getNamedAttr(
            "offsets", rewriter.getDenseI64ArrayAttr(offsets))));
    return success();
  }

  SymbolTableCollection &symbols;
};

/// Every lowering, each with the runtime kernel it emits.
void populateLoweringPatterns(RewritePatternSet &patterns,
                              SymbolTableCollection &symbols) {
  MLIRContext *context = patterns.getContext();
  // Elementwise.
  patterns.add<PlainKernel<AddOp>>(context, "add");
  patterns.add<PlainKernel<SubOp>>(context, "sub");
  patterns.add<PlainKernel<MulOp>>(context, "mul");
  patterns.add<PlainKernel<DivOp>>(context, "div");
  patterns.add<PlainKernel<PowOp>>(context, "pow");
  patterns.add<PlainKernel<EqualOp>>(context, "equal");
  patterns.add<PlainKernel<LessOp>>(context, "less");
  patterns.add<PlainKernel<GreaterOp>>(context, "greater");
  patterns.add<PlainKernel<AndOp>>(context, "and");
  patterns.add<PlainKernel<OrOp>>(context, "or");
  patterns.add<PlainKernel<WhereOp>>(context, "where");
  patterns.add<PlainKernel<NegOp>>(context, "neg");
  patterns.add<PlainKernel<ExpOp>>(context, "exp");
  patterns.add<PlainKernel<LogOp>>(context, "log");
  patterns.add<PlainKernel<SqrtOp>>(context, "sqrt");
  patterns.add<PlainKernel<ReciprocalOp>>(context, "reciprocal");
  patterns.add<PlainKernel<AbsOp>>(context, "abs");
  patterns.add<PlainKernel<TanhOp>>(context, "tanh");
  patterns.add<PlainKernel<SigmoidOp>>(context, "sigmoid");
  patterns.add<PlainKernel<ReluOp>>(context, "relu");
  patterns.add<PlainKernel<ErfOp>>(context, "erf");
  patterns.add<PlainKernel<NotOp>>(context, "not");
  patterns.add<PlainKernel<IsNaNOp>>(context, "isnan");
  patterns.add<PlainKernel<CastOp>>(context, "cast");
  patterns.add<PlainKernel<mlir::fsdp::SiluOp>>(context, "silu");
  patterns.add<PlainKernel<GreaterOrEqualOp>>(context, "greater_or_equal");
  patterns.add<PlainKernel<LessOrEqualOp>>(context, "less_or_equal");
  patterns.add<PlainKernel<SinOp>>(context, "sin");
  patterns.add<PlainKernel<CosOp>>(context, "cos");
  patterns.add<PlainKernel<FloorOp>>(context, "floor");
  patterns.add<PlainKernel<CeilOp>>(context, "ceil");
  patterns.add<PlainKernel<SoftplusOp>>(context, "softplus");
  patterns.add<LowerLeakyRelu>(context, "leaky_relu");
  patterns.add<PlainKernel<XorOp>>(context, "xor");
  patterns.add<PlainKernel<PReluOp>>(context, "prelu");
  patterns.add<PlainKernel<HardSwishOp>>(context, "hard_swish");
  patterns.add<PlainKernel<SignOp>>(context, "sign");
  patterns.add<PlainKernel<SoftsignOp>>(context, "softsign");
  patterns.add<PlainKernel<RoundOp>>(context, "round");
  patterns.add<PlainKernel<TanOp>>(context, "tan");
  patterns.add<PlainKernel<SinhOp>>(context, "sinh");
  patterns.add<PlainKernel<CoshOp>>(context, "cosh");
  patterns.add<PlainKernel<AsinOp>>(context, "asin");
  patterns.add<PlainKernel<AcosOp>>(context, "acos");
  patterns.add<PlainKernel<AtanOp>>(context, "atan");
  patterns.add<PlainKernel<AsinhOp>>(context, "asinh");
  patterns.add<PlainKernel<AcoshOp>>(context, "acosh");
  patterns.add<PlainKernel<AtanhOp>>(context, "atanh");
  patterns.add<PlainKernel<GlobalMaxPoolOp>>(context, "global_max_pool");
  patterns.add<LowerActivation<ModOp>>(
      context, "mod", +[](ModOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.i64("fmod", op.getFmod())};
      });
  patterns.add<LowerActivation<IsInfOp>>(
      context, "is_inf", +[](IsInfOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{
            l.i64("detect_negative", op.getDetectNegative()),
            l.i64("detect_positive", op.getDetectPositive())};
      });
  patterns.add<LowerActivation<HardSigmoidOp>>(
      context, "hard_sigmoid", +[](HardSigmoidOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("alpha", op.getAlpha()),
                                           l.f32("beta", op.getBeta())};
      });
  patterns.add<LowerActivation<EluOp>>(
      context, "elu", +[](EluOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("alpha", op.getAlpha())};
      });
  patterns.add<LowerActivation<SeluOp>>(
      context, "selu", +[](SeluOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("alpha", op.getAlpha()),
                                           l.f32("gamma", op.getGamma())};
      });
  patterns.add<LowerActivation<CeluOp>>(
      context, "celu", +[](CeluOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("alpha", op.getAlpha())};
      });
  patterns.add<LowerActivation<ThresholdedReluOp>>(
      context, "thresholded_relu", +[](ThresholdedReluOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("alpha", op.getAlpha())};
      });
  patterns.add<LowerActivation<ShrinkOp>>(
      context, "shrink", +[](ShrinkOp op, Lowering &l) {
        return SmallVector<NamedAttribute>{l.f32("bias", op.getBias()),
                                           l.f32("lambd", op.getLambd())};
      });
  patterns.add<LowerClip>(context, "clip");
  patterns.add<LowerVariadic<SumOp>>(context, "add");
  patterns.add<LowerVariadic<MaxOp>>(context, "max");
  patterns.add<LowerVariadic<MinOp>>(context, "min");
  patterns.add<LowerMean>(context);
  patterns.add<LowerGelu>(context, "gelu");
  // Linear algebra and normalisation.
  patterns.add<LowerMatMul>(context, "matmul");
  patterns.add<LowerGemm>(context, "gemm");
  patterns.add<LowerLinear>(context, "linear");
  patterns.add<LowerAttention<mlir::fsdp::AttentionOp>>(context, "attention");
  patterns.add<LowerAttention<mlir::fsdp::AttentionGradOp>>(context,
                                                            "attention_grad");
  patterns.add<LowerSoftmax<SoftmaxOp>>(context, "softmax");
  patterns.add<LowerSoftmax<LogSoftmaxOp>>(context, "log_softmax");
  patterns.add<LowerSoftmax<HardmaxOp>>(context, "hardmax");
  patterns.add<LowerLayerNorm>(context, "layer_norm");
  patterns.add<LowerRMSNorm>(context, "rms_norm");
  patterns.add<LowerBatchNorm>(context, "batch_norm");
  patterns.add<LowerBatchNormTrain>(context, "batch_norm_train");
  patterns.add<LowerBatchNormGrad>(context, "batch_norm_grad");
  patterns.add<LowerNormGrad>(context, "layer_norm_grad");
  patterns.add<LowerActivationGrad>(context, "activation_grad");
  patterns.add<LowerDropout>(context, "dropout");
  patterns.add<LowerGenerator<RandomUniformOp>,
               LowerGenerator<RandomUniformLikeOp>>(context, "random_uniform");
  patterns
      .add<LowerGenerator<RandomNormalOp>, LowerGenerator<RandomNormalLikeOp>>(
          context, "random_normal");
  patterns.add<LowerGenerator<BernoulliOp>>(context, "bernoulli");
  // Convolution and pooling.
  patterns.add<LowerConv>(context, "conv");
  patterns.add<LowerConvTranspose>(context, "conv_grad_input");
  // Recurrent layers, whole sequences.
  patterns.add<LowerRecurrent<LSTMOp>>(context, "lstm");
  patterns.add<LowerRecurrent<GRUOp>>(context, "gru");
  patterns.add<LowerRecurrent<RNNOp>>(context, "rnn");
  patterns.add<LowerRecurrentGrad>(context);
  patterns.add<LowerMaxPool>(context, "max_pool");
  patterns.add<LowerAveragePool>(context, "average_pool");
  patterns.add<PlainKernel<GlobalAveragePoolOp>>(context,
                                                 "global_average_pool");
  // Reductions.
  patterns.add<LowerReduceByAttr<ReduceMeanOp>>(context, "reduce_mean");
  patterns.add<LowerReduceByAttr<ReduceMaxOp>>(context, "reduce_max");
  patterns.add<LowerReduceByAttr<ReduceMinOp>>(context, "reduce_min");
  patterns.add<LowerArg<ArgMaxOp>>(context, "arg_max");
  patterns.add<LowerArg<ArgMinOp>>(context, "arg_min");
  patterns.add<LowerReduceByAttr<ReduceProdOp>>(context, "reduce_prod");
  patterns.add<LowerReduceByAttr<ReduceSumSquareOp>>(context,
                                                     "reduce_sum_square");
  patterns.add<LowerReduceByAttr<ReduceL1Op>>(context, "reduce_l1");
  patterns.add<LowerReduceByAttr<ReduceL2Op>>(context, "reduce_l2");
  patterns.add<LowerReduceByAttr<ReduceLogSumOp>>(context, "reduce_log_sum");
  patterns.add<LowerReduceByAttr<ReduceLogSumExpOp>>(context,
                                                     "reduce_log_sum_exp");
  patterns.add<LowerReduceSum>(context, "reduce_sum");
  // Shapes and data movement.
  patterns.add<LowerViewLike>(context);
  patterns.add<LowerTranspose>(context, "transpose");
  patterns.add<LowerConcat>(context, "concat");
  patterns.add<LowerSplit>(context, "split");
  patterns.add<LowerSlice>(context, "slice");
  patterns.add<LowerPad>(context, "pad");
  patterns.add<LowerResize>(context, "resize");
  patterns.add<LowerGridSample>(context, "grid_sample");
  patterns.add<LowerGather>(context, "gather");
  patterns.add<LowerExpand>(context, "expand");
  patterns.add<LowerTile>(context, "expand");
  patterns.add<LowerDepthToSpace>(context, "transpose");
  patterns.add<LowerSpaceToDepth>(context, "transpose");
  patterns.add<LowerTrilu>(context, "trilu");
  patterns.add<LowerGatherElements>(context, "gather_elements");
  patterns.add<LowerEinsum>(context);
  patterns.add<LowerScatterElements>(context, "scatter_elements");
  patterns.add<LowerScatterND>(context, "scatter_nd");
  patterns.add<LowerCumSum>(context, "cumsum");
  // Losses and gradients.
  patterns.add<LowerCrossEntropy>(context, "softmax_cross_entropy");
  patterns.add<LowerCrossEntropyWithLse>(context, "softmax_cross_entropy");
  patterns.add<LowerCrossEntropyGrad>(context, "softmax_cross_entropy_grad");
  patterns.add<LowerNllLoss>(context, "nll_loss");
  patterns.add<LowerNllLossGrad>(context, "nll_loss_grad");
  patterns.add<LowerGatherGrad>(context, "gather_grad");
  patterns.add<LowerConvGrad<mlir::fsdp::ConvGradInputOp>>(context,
                                                           "conv_grad_input");
  patterns.add<LowerConvGrad<mlir::fsdp::ConvGradWeightOp>>(context,
                                                            "conv_grad_weight");
  patterns.add<LowerPoolGrad>(context, "pool_grad");
  patterns.add<LowerGridSampleGrad>(context, "grid_sample_grad");
  // Optimizer steps.
  patterns.add<LowerAdamW>(context, "adamw");
  patterns.add<LowerSGD>(context, "sgd");
  // Flat parameters.
  patterns.add<LowerUnflatten, LowerPack>(context, symbols);
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

/// What a lowered function body holds: kernels and views, state reads, the
/// collectives (they keep their memory effects, so nothing merges or drops
/// them), the ends of gathered buffers' lives, constants and the return.
/// Ops outside function bodies are the plan's declarations and stay.
///
/// Nothing is marked illegal: an op that does not lower is left in place
/// and reported with its own error (below), rather than the conversion
/// stopping at the first one with a generic message.
///
/// Only the constants the module already has (`inputConstants`) are legal.
/// MLIR 19's conversion folds every op before trying its pattern; a
/// constant a fold creates is then illegal, so the driver undoes the fold
/// and applies the pattern: the lowering emits the kernels the model has,
/// never values computed at compile time.
void addLoweredLegality(ConversionTarget &target,
                        const DenseSet<Operation *> &inputConstants) {
  target.addDynamicallyLegalOp<ConstantOp>(
      [&](ConstantOp op) { return inputConstants.contains(op); });
  target.addLegalOp<NoValueOp, func::ReturnOp, KernelOp, ViewOp,
                    mlir::fsdp::GetParamOp, mlir::fsdp::GetBufferOp,
                    mlir::fsdp::GetShardOp, mlir::fsdp::GetFlatParamOp,
                    mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
                    mlir::fsdp::AllReduceOp, mlir::fsdp::WaitOp,
                    mlir::fsdp::ReleaseOp>();
  target.markUnknownOpDynamicallyLegal(
      [](Operation *op) -> std::optional<bool> {
        if (!isa_and_nonnull<func::FuncOp>(op->getParentOp()))
          return true;
        return std::nullopt;
      });
}

/// A function's inputs are the plan's inputs: static shapes of runtime
/// dtypes.
LogicalResult checkArguments(func::FuncOp func) {
  LogicalResult result = success();
  for (BlockArgument arg : func.getArguments())
    if (auto tensor = dyn_cast<RankedTensorType>(arg.getType());
        !tensor || !tensor.hasStaticShape() || !isRuntimeType(tensor)) {
      emitError(arg.getLoc())
          << "input " << arg.getArgNumber() << " of @" << func.getSymName()
          << " has type " << arg.getType()
          << "; the runtime needs static shapes of a "
             "supported element type";
      result = failure();
    }
  return result;
}

/// Fusion may have moved a use of gathered parameters past their release (a
/// fused op sits where its pattern ended): each release follows the last use
/// of its buffer, views included.
void sinkReleases(func::FuncOp func) {
  for (auto release :
       llvm::to_vector(func.getBody().getOps<mlir::fsdp::ReleaseOp>())) {
    Operation *last = release;
    SmallVector<Value> work = {release.getInput()};
    while (!work.empty())
      for (Operation *user : work.pop_back_val().getUsers()) {
        if (last->isBeforeInBlock(user))
          last = user;
        if (isa<ViewOp>(user))
          work.push_back(user->getResult(0));
      }
    if (last != release)
      release->moveAfter(last);
  }
}

/// Shape operands and other constants the kernels no longer read.
void eraseDeadOps(func::FuncOp func, RewriterBase &rewriter) {
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
    if (op.use_empty() && isMemoryEffectFree(&op) && !isa<func::ReturnOp>(op))
      rewriter.eraseOp(&op);
}

struct LowerToRuntimePass
    : mlir::fsdp::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    bool failed = false;
    module.walk([&](func::FuncOp func) {
      failed |= mlir::failed(checkArguments(func));
    });

    module.walk([](func::FuncOp func) { mlir::fsdp::numberRandomOps(func); });
    SymbolTableCollection symbols;
    RewritePatternSet patterns(&getContext());
    populateLoweringPatterns(patterns, symbols);
    FrozenRewritePatternSet frozen(std::move(patterns));
    DenseSet<Operation *> inputConstants;
    module.walk([&](ConstantOp op) { inputConstants.insert(op); });
    ConversionTarget target(getContext());
    addLoweredLegality(target, inputConstants);
    DenseSet<Operation *> unlowered;
    ConversionConfig config;
    config.unlegalizedOps = &unlowered;
    if (mlir::failed(applyPartialConversion(module, target, frozen, config)))
      return signalPassFailure();

    // An op whose pattern failed said why; one with no pattern has no
    // kernel (unless its types already rule it out).
    const auto &lowerable = frozen.getOpSpecificNativePatterns();
    module.walk([&](Operation *op) {
      if (!unlowered.contains(op))
        return;
      failed = true;
      if (!lowerable.count(op->getName()) && mlir::succeeded(checkTypes(op)))
        op->emitOpError("has no runtime kernel (docs/ops.md lists the "
                        "operators and their kernels)");
    });

    IRRewriter rewriter(&getContext());
    module.walk([&](func::FuncOp func) {
      if (func.isExternal()) // a declaration: no body to tidy
        return;
      sinkReleases(func);
      eraseDeadOps(func, rewriter);
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace

DenseSet<OperationName> mlir::fsdp::getLoweredOps(MLIRContext *context) {
  SymbolTableCollection symbols;
  RewritePatternSet patterns(context);
  populateLoweringPatterns(patterns, symbols);
  DenseSet<OperationName> ops;
  for (const auto &entry : patterns.getNativePatterns())
    if (std::optional<OperationName> root = entry->getRootKind())
      ops.insert(*root);
  return ops;
}
