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

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

#include <algorithm>

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

/// Sum, Max or Min of one input is that input; of two, the binary kernel
/// (`add`, `max`, `min`).
template <typename SourceOp> struct LowerVariadic : KernelPattern<SourceOp> {
  using KernelPattern<SourceOp>::KernelPattern;
  LogicalResult lower(SourceOp op, typename SourceOp::Adaptor adaptor,
                      Lowering &l) const override {
    if (op->getNumOperands() == 1)
      return l.view(adaptor.getOperands()[0]);
    if (op->getNumOperands() != 2)
      return l.fail("with more than two inputs is not supported");
    return l.kernel(this->kernel, adaptor.getOperands());
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

/// Clip is `clip` with its (constant, scalar) bounds as attributes; an
/// absent bound is none.
struct LowerClip : KernelPattern<ClipOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ClipOp, OpAdaptor adaptor, Lowering &l) const override {
    SmallVector<NamedAttribute> bounds;
    for (auto [name, value] : {std::pair<StringRef, Value>{"min", adaptor.getMin()},
                               {"max", adaptor.getMax()}}) {
      if (isa<NoneType>(value.getType()))
        continue;
      DenseFPElementsAttr attr;
      if (!matchPattern(value, m_Constant(&attr)) || attr.getNumElements() != 1)
        return l.fail(Twine(name) +
                      " must be a constant float scalar to run on the runtime");
      bounds.push_back(l.f32(name, *attr.getValues<APFloat>().begin()));
    }
    return l.kernel(kernel, adaptor.getInput(), bounds);
  }
};

/// Expand reads only its input: the result type carries the shape.
struct LowerExpand : KernelPattern<ExpandOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ExpandOp, OpAdaptor adaptor, Lowering &l) const override {
    return l.kernel(kernel, adaptor.getInput());
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
/// output when asked for.
template <typename AttentionOp>
struct LowerAttention : KernelPattern<AttentionOp> {
  using KernelPattern<AttentionOp>::KernelPattern;
  LogicalResult lower(AttentionOp attention,
                      typename AttentionOp::Adaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(this->kernel, adaptor.getOperands(),
                    {l.f32("scale", attention.getScale()),
                     l.str("mask_kind", attention.getMaskKind()),
                     l.f32("fill_value", attention.getFillValue())});
  }
};

/// Softmax and LogSoftmax along one normalised axis.
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
    if (!norm.getMean().use_empty() || !norm.getInvStdDev().use_empty())
      return l.fail("Mean and InvStdDev outputs are not supported");
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

/// Dropout has no kernel: fsdp-inference removes it.
struct RejectDropout : KernelPattern<DropoutOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(DropoutOp, OpAdaptor, Lowering &l) const override {
    return l.fail("is a training-mode Dropout; run --fsdp-inference first");
  }
};

// Convolution and pooling.

/// Spatial attributes of Conv and the pools with ONNX's defaults filled in.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

template <typename WindowOp>
FailureOr<Window> window(Lowering &l, WindowOp op,
                         ArrayRef<int64_t> kernelShape) {
  if (op.getAutoPad() != "NOTSET")
    return l.fail("auto_pad \"" + op.getAutoPad() +
                  "\" is not supported; export with explicit pads");
  size_t n = kernelShape.size();
  Window w;
  w.kernel.assign(kernelShape.begin(), kernelShape.end());
  w.strides = op.getStridesOrDefault();
  w.pads = op.getPadsOrDefault();
  w.dilations = op.getDilationsOrDefault();
  if (w.strides.size() != n || w.pads.size() != 2 * n ||
      w.dilations.size() != n)
    return l.fail("strides, pads or dilations do not match the kernel rank");
  return w;
}

struct LowerConv : KernelPattern<ConvOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ConvOp conv, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<Window> win = window(l, conv, shapeOf(conv.getW()).drop_front(2));
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

struct LowerMaxPool : KernelPattern<MaxPoolOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(MaxPoolOp pool, OpAdaptor adaptor,
                      Lowering &l) const override {
    if (!pool.getIndices().use_empty())
      return l.fail("Indices output is not supported");
    FailureOr<Window> win = window(l, pool, pool.getKernelShape());
    if (failed(win))
      return failure();
    return l.kernel(kernel, adaptor.getX(),
                    {l.ints("kernel_shape", win->kernel),
                     l.ints("strides", win->strides), l.ints("pads", win->pads),
                     l.ints("dilations", win->dilations),
                     l.i64("ceil_mode", pool.getCeilMode())});
  }
};

struct LowerAveragePool : KernelPattern<AveragePoolOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(AveragePoolOp pool, OpAdaptor adaptor,
                      Lowering &l) const override {
    FailureOr<Window> win = window(l, pool, pool.getKernelShape());
    if (failed(win))
      return failure();
    if (llvm::any_of(win->dilations, [](int64_t d) { return d != 1; }))
      return l.fail("dilations are not supported");
    return l.kernel(kernel, adaptor.getX(),
                    {l.ints("kernel_shape", win->kernel),
                     l.ints("strides", win->strides), l.ints("pads", win->pads),
                     l.i64("count_include_pad", pool.getCountIncludePad()),
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
/// make it a view.
struct LowerReduceSum : KernelPattern<ReduceSumOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(ReduceSumOp reduce, OpAdaptor adaptor,
                      Lowering &l) const override {
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

// Losses and gradients.

/// The cross-entropy's parameters, shared by the loss and its gradient:
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
    if (!loss.getLogProb().use_empty())
      return l.fail("log_prob output is not supported");
    return l.kernel(
        kernel,
        {adaptor.getScores(), adaptor.getLabels(), adaptor.getWeights()},
        crossEntropyParams(loss, l));
  }
};

struct LowerCrossEntropyGrad
    : KernelPattern<mlir::fsdp::SoftmaxCrossEntropyGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::SoftmaxCrossEntropyGradOp grad,
                      OpAdaptor adaptor, Lowering &l) const override {
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

struct LowerPoolGrad : KernelPattern<mlir::fsdp::PoolGradOp> {
  using KernelPattern::KernelPattern;
  LogicalResult lower(mlir::fsdp::PoolGradOp grad, OpAdaptor adaptor,
                      Lowering &l) const override {
    return l.kernel(kernel, adaptor.getOperands(),
                    {l.str("mode", grad.getMode()),
                     l.ints("kernel_shape", grad.getKernelShape()),
                     l.ints("strides", grad.getStrides()),
                     l.ints("pads", grad.getPads()),
                     l.ints("dilations", grad.getDilations()),
                     l.i64("ceil_mode", grad.getCeilMode()),
                     l.i64("count_include_pad", grad.getCountIncludePad())});
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
  patterns.add<LowerClip>(context, "clip");
  patterns.add<LowerVariadic<SumOp>>(context, "add");
  patterns.add<LowerVariadic<MaxOp>>(context, "max");
  patterns.add<LowerVariadic<MinOp>>(context, "min");
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
  patterns.add<LowerLayerNorm>(context, "layer_norm");
  patterns.add<LowerRMSNorm>(context, "rms_norm");
  patterns.add<LowerBatchNorm>(context, "batch_norm");
  patterns.add<LowerBatchNormTrain>(context, "batch_norm_train");
  patterns.add<LowerBatchNormGrad>(context, "batch_norm_grad");
  patterns.add<RejectDropout>(context);
  // Convolution and pooling.
  patterns.add<LowerConv>(context, "conv");
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
  patterns.add<LowerGather>(context, "gather");
  patterns.add<LowerExpand>(context, "expand");
  // Losses and gradients.
  patterns.add<LowerCrossEntropy>(context, "softmax_cross_entropy");
  patterns.add<LowerCrossEntropyGrad>(context, "softmax_cross_entropy_grad");
  patterns.add<LowerGatherGrad>(context, "gather_grad");
  patterns.add<LowerConvGrad<mlir::fsdp::ConvGradInputOp>>(context,
                                                           "conv_grad_input");
  patterns.add<LowerConvGrad<mlir::fsdp::ConvGradWeightOp>>(context,
                                                            "conv_grad_weight");
  patterns.add<LowerPoolGrad>(context, "pool_grad");
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
        op->emitOpError("has no runtime kernel (docs/plan-format.md lists "
                        "the supported ops)");
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
