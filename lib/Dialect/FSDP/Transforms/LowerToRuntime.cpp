//===- LowerToRuntime.cpp - ONNX and fused ops to runtime kernels ---------===//
//
/// Every compute op becomes one `fsdp.kernel` whose name and parameters are
/// the runtime's contract (docs/plan-format.md), or an `fsdp.view` when it
/// only reinterprets a shape. Parameters are normalised here, once, so the
/// runtime never re-derives ONNX defaults: axes are non-negative, defaults
/// explicit, constant operands (Slice bounds, ReduceSum axes) are
/// parameters, and absent optional operands are dropped from the end.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/Target/Plan/RuntimeDType.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

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

  LogicalResult fail(const Twine &why) { return op->emitOpError() << why; }

  NamedAttribute i64(StringRef name, int64_t value) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(value));
  }
  NamedAttribute f32(StringRef name, double value) {
    return b.getNamedAttr(name, b.getF32FloatAttr(value));
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

  /// The integer values of a constant operand.
  FailureOr<SmallVector<int64_t>> constantInts(Value value, StringRef what) {
    DenseIntElementsAttr attr;
    if (!matchPattern(value, m_Constant(&attr)))
      return fail(Twine(what) + " must be a constant to run on the runtime");
    return llvm::to_vector(
        llvm::map_range(attr.getValues<APInt>(),
                        [](const APInt &v) { return v.getSExtValue(); }));
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

LogicalResult lowerOp(Operation *op, RewriterBase &rewriter) {
  Lowering l(op, rewriter);
  rewriter.setInsertionPoint(op);
  auto elementwise = [&](StringRef name) {
    return l.kernel(name, op->getOperands());
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // Elementwise.
      .Case<AddOp>([&](auto) { return elementwise("add"); })
      .Case<SubOp>([&](auto) { return elementwise("sub"); })
      .Case<MulOp>([&](auto) { return elementwise("mul"); })
      .Case<DivOp>([&](auto) { return elementwise("div"); })
      .Case<PowOp>([&](auto) { return elementwise("pow"); })
      .Case<EqualOp>([&](auto) { return elementwise("equal"); })
      .Case<LessOp>([&](auto) { return elementwise("less"); })
      .Case<GreaterOp>([&](auto) { return elementwise("greater"); })
      .Case<AndOp>([&](auto) { return elementwise("and"); })
      .Case<OrOp>([&](auto) { return elementwise("or"); })
      .Case<WhereOp>([&](auto) { return elementwise("where"); })
      .Case<NegOp>([&](auto) { return elementwise("neg"); })
      .Case<ExpOp>([&](auto) { return elementwise("exp"); })
      .Case<LogOp>([&](auto) { return elementwise("log"); })
      .Case<SqrtOp>([&](auto) { return elementwise("sqrt"); })
      .Case<ReciprocalOp>([&](auto) { return elementwise("reciprocal"); })
      .Case<AbsOp>([&](auto) { return elementwise("abs"); })
      .Case<TanhOp>([&](auto) { return elementwise("tanh"); })
      .Case<SigmoidOp>([&](auto) { return elementwise("sigmoid"); })
      .Case<ReluOp>([&](auto) { return elementwise("relu"); })
      .Case<ErfOp>([&](auto) { return elementwise("erf"); })
      .Case<NotOp>([&](auto) { return elementwise("not"); })
      .Case<CastOp>([&](auto) { return l.kernel("cast", op->getOperand(0)); })
      .Case<SumOp>([&](SumOp sum) {
        if (sum.getNumOperands() == 1)
          return l.view(sum.getOperand(0));
        if (sum.getNumOperands() != 2)
          return l.fail("with more than two inputs is not supported");
        return elementwise("add");
      })
      .Case<mlir::fsdp::GeluOp>([&](mlir::fsdp::GeluOp gelu) {
        return l.kernel("gelu", gelu.getInput(),
                        {l.str("approximate", gelu.getApproximate())});
      })
      .Case<mlir::fsdp::SiluOp>([&](auto) { return elementwise("silu"); })
      // Linear algebra and normalisation.
      .Case<MatMulOp>([&](auto) {
        return l.kernel("matmul", op->getOperands(), {l.i64("trans_b", 0)});
      })
      .Case<GemmOp>([&](GemmOp gemm) {
        return l.kernel("gemm", op->getOperands(),
                        {l.f32("alpha", gemm.getAlpha().convertToDouble()),
                         l.f32("beta", gemm.getBeta().convertToDouble()),
                         l.i64("trans_a", gemm.getTransA()),
                         l.i64("trans_b", gemm.getTransB())});
      })
      .Case<mlir::fsdp::LinearOp>([&](mlir::fsdp::LinearOp linear) {
        return l.kernel("linear", op->getOperands(),
                        {l.i64("trans_w", linear.getTransposeWeight()),
                         l.str("activation", linear.getActivation())});
      })
      .Case<mlir::fsdp::AttentionOp, mlir::fsdp::AttentionGradOp>(
          [&](auto attention) {
            // Both kernels take the forward's operands in op order (the
            // mask only for add and fill); attention's lse is its second
            // output when asked for.
            return l.kernel(
                isa<mlir::fsdp::AttentionOp>(op) ? "attention"
                                                 : "attention_grad",
                op->getOperands(),
                {l.f32("scale", attention.getScale().convertToDouble()),
                 l.str("mask_kind", attention.getMaskKind()),
                 l.f32("fill_value",
                       attention.getFillValue().convertToDouble())});
          })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto softmax) {
        FailureOr<int64_t> axis =
            l.axis(softmax.getAxis(), rankOf(softmax.getInput()));
        if (failed(axis))
          return failure();
        return l.kernel(isa<SoftmaxOp>(op) ? "softmax" : "log_softmax",
                        softmax.getInput(), {l.i64("axis", *axis)});
      })
      .Case<LayerNormalizationOp>([&](LayerNormalizationOp norm) {
        if (!norm.getMean().use_empty() || !norm.getInvStdDev().use_empty())
          return l.fail("Mean and InvStdDev outputs are not supported");
        FailureOr<int64_t> axis = l.axis(norm.getAxis(), rankOf(norm.getX()));
        if (failed(axis))
          return failure();
        return l.kernel(
            "layer_norm", {norm.getX(), norm.getScale(), norm.getB()},
            {l.i64("axis", *axis),
             l.f32("epsilon", norm.getEpsilon().convertToDouble())});
      })
      .Case<mlir::fsdp::RMSNormOp>([&](mlir::fsdp::RMSNormOp norm) {
        return l.kernel(
            "rms_norm", op->getOperands(),
            {l.f32("epsilon", norm.getEpsilon().convertToDouble())});
      })
      .Case<BatchNormalizationOp>([&](BatchNormalizationOp norm) {
        if (norm.getTrainingMode() != 0)
          return l.fail("in training mode cannot run as inference; run "
                        "--fsdp-inference first");
        return l.kernel(
            "batch_norm",
            {norm.getX(), norm.getScale(), norm.getB(), norm.getInputMean(),
             norm.getInputVar()},
            {l.f32("epsilon", norm.getEpsilon().convertToDouble())});
      })
      .Case<DropoutOp>([&](auto) {
        return l.fail("is a training-mode Dropout; run --fsdp-inference first");
      })
      // Convolution and pooling.
      .Case<ConvOp>([&](ConvOp conv) -> LogicalResult {
        ArrayRef<int64_t> w = shapeOf(conv.getW());
        FailureOr<Window> win = window(l, conv, w.drop_front(2));
        if (failed(win))
          return failure();
        if (rankOf(conv.getX()) != 3 && rankOf(conv.getX()) != 4)
          return l.fail("only 1-D and 2-D convolutions are supported");
        return l.kernel("conv", op->getOperands(),
                        {l.ints("strides", win->strides),
                         l.ints("pads", win->pads),
                         l.ints("dilations", win->dilations),
                         l.i64("group", conv.getGroup())});
      })
      .Case<MaxPoolOp>([&](MaxPoolOp pool) -> LogicalResult {
        if (!pool.getIndices().use_empty())
          return l.fail("Indices output is not supported");
        FailureOr<Window> win = window(l, pool, pool.getKernelShape());
        if (failed(win))
          return failure();
        return l.kernel("max_pool", pool.getX(),
                        {l.ints("kernel_shape", win->kernel),
                         l.ints("strides", win->strides),
                         l.ints("pads", win->pads),
                         l.ints("dilations", win->dilations),
                         l.i64("ceil_mode", pool.getCeilMode())});
      })
      .Case<AveragePoolOp>([&](AveragePoolOp pool) -> LogicalResult {
        FailureOr<Window> win = window(l, pool, pool.getKernelShape());
        if (failed(win))
          return failure();
        if (llvm::any_of(win->dilations, [](int64_t d) { return d != 1; }))
          return l.fail("dilations are not supported");
        return l.kernel("average_pool", pool.getX(),
                        {l.ints("kernel_shape", win->kernel),
                         l.ints("strides", win->strides),
                         l.ints("pads", win->pads),
                         l.i64("count_include_pad", pool.getCountIncludePad()),
                         l.i64("ceil_mode", pool.getCeilMode())});
      })
      .Case<GlobalAveragePoolOp>(
          [&](auto) { return elementwise("global_average_pool"); })
      // Reductions.
      .Case<ReduceMeanOp, ReduceMaxOp>([&](auto reduce) -> LogicalResult {
        SmallVector<int64_t> axes;
        int64_t rank = rankOf(reduce.getData());
        for (int64_t axis : reduce.getAxes().value_or(ArrayRef<int64_t>{})) {
          FailureOr<int64_t> normal = l.axis(axis, rank);
          if (failed(normal))
            return failure();
          axes.push_back(*normal);
        }
        return l.kernel(
            isa<ReduceMeanOp>(op) ? "reduce_mean" : "reduce_max",
            reduce.getData(),
            {l.ints("axes", axes), l.i64("keepdims", reduce.getKeepdims())});
      })
      .Case<ReduceSumOp>([&](ReduceSumOp reduce) -> LogicalResult {
        SmallVector<int64_t> axes;
        int64_t rank = rankOf(reduce.getData());
        if (!isa<NoneType>(reduce.getAxes().getType())) {
          FailureOr<SmallVector<int64_t>> values =
              l.constantInts(reduce.getAxes(), "axes");
          if (failed(values))
            return failure();
          for (int64_t axis : *values) {
            FailureOr<int64_t> normal = l.axis(axis, rank);
            if (failed(normal))
              return failure();
            axes.push_back(*normal);
          }
        }
        if (axes.empty() && reduce.getNoopWithEmptyAxes())
          return l.view(reduce.getData());
        return l.kernel(
            "reduce_sum", reduce.getData(),
            {l.ints("axes", axes), l.i64("keepdims", reduce.getKeepdims())});
      })
      // Shapes and data movement.
      .Case<ViewLikeOpInterface>(
          [&](ViewLikeOpInterface v) { return l.view(v.getViewSource()); })
      .Case<TransposeOp>([&](TransposeOp t) {
        return l.kernel("transpose", t.getData(),
                        {l.ints("perm", t.getPermOrDefault())});
      })
      .Case<ConcatOp>([&](ConcatOp concat) -> LogicalResult {
        FailureOr<int64_t> axis =
            l.axis(concat.getAxis(), rankOf(concat.getResult()));
        if (failed(axis))
          return failure();
        return l.kernel("concat", concat.getInputs(), {l.i64("axis", *axis)});
      })
      .Case<SplitOp>([&](SplitOp split) -> LogicalResult {
        FailureOr<int64_t> axis =
            l.axis(split.getAxis(), rankOf(split.getInput()));
        if (failed(axis))
          return failure();
        return l.kernel("split", split.getInput(), {l.i64("axis", *axis)});
      })
      .Case<SliceOp>([&](SliceOp slice) -> LogicalResult {
        ArrayRef<int64_t> shape = shapeOf(slice.getData());
        int64_t rank = shape.size();
        FailureOr<SmallVector<int64_t>> starts =
            l.constantInts(slice.getStarts(), "starts");
        if (failed(starts))
          return failure();
        SmallVector<int64_t> axes, steps;
        if (!isa<NoneType>(slice.getAxes().getType())) {
          FailureOr<SmallVector<int64_t>> values =
              l.constantInts(slice.getAxes(), "axes");
          if (failed(values))
            return failure();
          axes = *values;
        } else {
          for (int64_t i = 0, e = starts->size(); i < e; ++i)
            axes.push_back(i);
        }
        if (!isa<NoneType>(slice.getSteps().getType())) {
          FailureOr<SmallVector<int64_t>> values =
              l.constantInts(slice.getSteps(), "steps");
          if (failed(values))
            return failure();
          steps = *values;
        } else {
          steps.assign(starts->size(), 1);
        }
        if (axes.size() != starts->size() || steps.size() != starts->size())
          return l.fail("starts, axes and steps differ in length");
        SmallVector<int64_t> allStarts(rank, 0), allSteps(rank, 1);
        for (auto [axisValue, start, step] : llvm::zip(axes, *starts, steps)) {
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
        return l.kernel(
            "slice", slice.getData(),
            {l.ints("starts", allStarts), l.ints("steps", allSteps)});
      })
      .Case<GatherOp>([&](GatherOp gather) -> LogicalResult {
        FailureOr<int64_t> axis =
            l.axis(gather.getAxis(), rankOf(gather.getData()));
        if (failed(axis))
          return failure();
        return l.kernel("gather", {gather.getData(), gather.getIndices()},
                        {l.i64("axis", *axis)});
      })
      .Case<ExpandOp>([&](ExpandOp expand) {
        return l.kernel("expand", expand.getInput());
      })
      // Losses.
      .Case<SoftmaxCrossEntropyLossOp>(
          [&](SoftmaxCrossEntropyLossOp loss) -> LogicalResult {
            if (!loss.getLogProb().use_empty())
              return l.fail("log_prob output is not supported");
            SmallVector<NamedAttribute> params = {
                l.str("reduction", loss.getReduction())};
            if (loss.getIgnoreIndex())
              params.push_back(l.i64("ignore_index", *loss.getIgnoreIndex()));
            return l.kernel(
                "softmax_cross_entropy",
                {loss.getScores(), loss.getLabels(), loss.getWeights()},
                params);
          })
      .Case<mlir::fsdp::GatherGradOp>([&](mlir::fsdp::GatherGradOp grad) {
        return l.kernel("gather_grad", op->getOperands(),
                        {l.i64("axis", grad.getAxis())});
      })
      .Case<mlir::fsdp::SoftmaxCrossEntropyGradOp>(
          [&](mlir::fsdp::SoftmaxCrossEntropyGradOp grad) {
            SmallVector<NamedAttribute> params = {
                l.str("reduction", grad.getReduction())};
            if (grad.getIgnoreIndex())
              params.push_back(l.i64("ignore_index", *grad.getIgnoreIndex()));
            return l.kernel("softmax_cross_entropy_grad", op->getOperands(),
                            params);
          })
      .Case<mlir::fsdp::ConvGradInputOp, mlir::fsdp::ConvGradWeightOp>(
          [&](auto grad) {
            return l.kernel(isa<mlir::fsdp::ConvGradInputOp>(op)
                                ? "conv_grad_input"
                                : "conv_grad_weight",
                            op->getOperands(),
                            {l.ints("strides", grad.getStrides()),
                             l.ints("pads", grad.getPads()),
                             l.ints("dilations", grad.getDilations()),
                             l.i64("group", grad.getGroup())});
          })
      .Case<mlir::fsdp::PoolGradOp>([&](mlir::fsdp::PoolGradOp grad) {
        return l.kernel(
            "pool_grad", op->getOperands(),
            {l.str("mode", grad.getMode()),
             l.ints("kernel_shape", grad.getKernelShape()),
             l.ints("strides", grad.getStrides()),
             l.ints("pads", grad.getPads()),
             l.ints("dilations", grad.getDilations()),
             l.i64("ceil_mode", grad.getCeilMode()),
             l.i64("count_include_pad", grad.getCountIncludePad())});
      })
      .Default([&](Operation *) {
        return l.fail("has no runtime kernel (docs/plan-format.md lists the "
                      "supported ops)");
      });
}

/// Ops the plan writer takes as they are: state reads, the collectives
/// (they keep their memory effects, so nothing merges or drops them) and
/// the ends of gathered buffers' lives.
bool isKept(Operation *op) {
  return isa<ConstantOp, NoValueOp, func::ReturnOp, KernelOp, ViewOp,
             mlir::fsdp::GetParamOp, mlir::fsdp::GetBufferOp,
             mlir::fsdp::GetShardOp, mlir::fsdp::GetFlatParamOp,
             mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
             mlir::fsdp::AllReduceOp, mlir::fsdp::WaitOp,
             mlir::fsdp::ReleaseOp>(op);
}

/// A unit's flat buffer as its parameters: one view per member at its
/// offset in the layout; and the inverse, a `pack` kernel that writes each
/// member at its offset and zeros elsewhere.
LogicalResult lowerFlatViews(Operation *op, RewriterBase &rewriter,
                             SymbolTableCollection &symbols) {
  auto unflatten = dyn_cast<mlir::fsdp::UnflattenOp>(op);
  auto pack = dyn_cast<mlir::fsdp::PackOp>(op);
  auto unitRef = unflatten ? unflatten.getUnitAttr() : pack.getUnitAttr();
  auto unit =
      symbols.lookupNearestSymbolFrom<mlir::fsdp::FlatParamOp>(op, unitRef);
  if (!unit)
    return op->emitOpError() << unitRef << " is not an fsdp.flat_param";
  FailureOr<::fsdp::layout::FlatLayout> layout =
      mlir::fsdp::computeLayout(unit, symbols);
  if (failed(layout))
    return failure();
  rewriter.setInsertionPoint(op);
  if (unflatten) {
    SmallVector<Value> views;
    for (auto [index, result] : llvm::enumerate(unflatten.getResults()))
      views.push_back(rewriter.create<ViewOp>(op->getLoc(), result.getType(),
                                              unflatten.getFlat(),
                                              layout->paramRange(index).begin));
    rewriter.replaceOp(op, views);
    return success();
  }
  SmallVector<int64_t> offsets;
  for (size_t index = 0; index < layout->numParams(); ++index)
    offsets.push_back(layout->paramRange(index).begin);
  Builder b(op->getContext());
  auto kernel = rewriter.create<KernelOp>(
      op->getLoc(), pack.getFlat().getType(), b.getStringAttr("pack"),
      pack.getValues(),
      b.getDictionaryAttr(
          b.getNamedAttr("offsets", b.getDenseI64ArrayAttr(offsets))));
  rewriter.replaceOp(op, kernel.getResults());
  return success();
}

/// Element types the runtime has (plan.fbs's DType).
bool isRuntimeType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return isa<NoneType>(type);
  return mlir::fsdp::runtimeDType(tensor.getElementType()).has_value();
}

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

struct LowerToRuntimePass
    : mlir::fsdp::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SymbolTableCollection symbols;
    bool failed = false;
    getOperation().walk([&](func::FuncOp func) {
      for (BlockArgument arg : func.getArguments())
        if (auto tensor = dyn_cast<RankedTensorType>(arg.getType());
            !tensor || !tensor.hasStaticShape() || !isRuntimeType(tensor)) {
          func.emitError() << "input " << arg.getArgNumber() << " of @"
                           << func.getSymName() << " has type " << arg.getType()
                           << "; the runtime needs static shapes of a "
                              "supported element type";
          failed = true;
        }
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().getOps())
        ops.push_back(&op);
      for (Operation *op : ops) {
        if (isKept(op))
          continue;
        if (isa<mlir::fsdp::UnflattenOp, mlir::fsdp::PackOp>(op)) {
          if (mlir::failed(lowerFlatViews(op, rewriter, symbols)))
            failed = true;
          continue;
        }
        if (mlir::failed(checkTypes(op)) || mlir::failed(lowerOp(op, rewriter)))
          failed = true;
      }
      // Fusion may have moved a use of gathered parameters past their
      // release (a fused op sits where its pattern ended): each release
      // follows the last use of its buffer, views included.
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
      // Shape operands and other constants the kernels no longer read.
      for (Operation &op :
           llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
        if (op.use_empty() && isMemoryEffectFree(&op) &&
            !isa<func::ReturnOp>(op))
          rewriter.eraseOp(&op);
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
