//===- Movement.cpp - Gradients of shape and data-movement ops ------------===//
//
/// Ops that move values without computing new ones: each sends the
/// cotangent back to the positions its values were read from (a reshape,
/// an inverse transpose, a slice, padding, a scatter).
//
//===----------------------------------------------------------------------===//

#include "Gradients.h"

#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Support/JSON.h"
// The runtime's Resize tap arithmetic (header-only, host and device).
#include "backends/cuda/kernels/resize.h"

#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::GradientContext;
using mlir::fsdp::GradientOpInterface;
using mlir::fsdp::detail::attachGradient;
using mlir::fsdp::detail::constantInts;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::Rule;
using mlir::fsdp::detail::typeOf;

namespace {

/// A view's cotangent is the cotangent reshaped to its source's shape; one
/// model for every ViewLikeOpInterface op, so that view-ness stays declared
/// in ODS alone.
struct ViewGradient : GradientOpInterface::FallbackModel<ViewGradient> {
  LogicalResult backward(Operation *op, GradientContext &ctx) const {
    Rule r(op, ctx);
    r.give(0, r.bb.reshape(r.g, typeOf(r.operand(0))));
    return success();
  }
  bool differentiatesEveryResult(Operation *) const { return false; }
};

LogicalResult backward(TransposeOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  int64_t rank = typeOf(op.getData()).getRank();
  SmallVector<int64_t> perm = op.getPermOrDefault();
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  r.give(0, r.bb.transpose(r.g, inverse));
  return success();
}

/// Trilu is linear and keeps what it keeps: the gradient is the same
/// triangle of the cotangent.
LogicalResult backward(TriluOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OpBuilder &b = ctx.getBuilder();
  auto upper = b.getNamedAttr("upper", b.getI64IntegerAttr(op.getUpper()));
  r.give(0, r.bb.op<TriluOp>(r.yt, {r.g, op.getK()}, {upper}));
  return success();
}

/// Each x_j adds to the sums that come after it (before it, reversed):
/// the gradient is the cotangent summed the other way, exclusive alike.
LogicalResult backward(CumSumOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OpBuilder &b = ctx.getBuilder();
  NamedAttribute attrs[] = {
      b.getNamedAttr("exclusive", b.getI64IntegerAttr(op.getExclusive())),
      b.getNamedAttr("reverse", b.getI64IntegerAttr(!op.getReverse()))};
  r.give(0, r.bb.op<CumSumOp>(r.yt, {r.g, op.getAxis()}, attrs));
  return success();
}

LogicalResult backward(ExpandOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  r.give(0, r.g);
  return success();
}

/// Tile's output along each axis is r copies of the input's d elements:
/// the cotangent seen as [r0, d0, r1, d1, ...] summed over the copies.
LogicalResult backward(TileOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  auto in = typeOf(op.getInput());
  auto out = typeOf(r.y);
  if (!in.hasStaticShape() || !out.hasStaticShape() ||
      in.getRank() != out.getRank())
    return op->emitOpError("gradient needs static shapes");
  SmallVector<int64_t> split, copies;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    int64_t d = in.getDimSize(i);
    if (d == 0 || out.getDimSize(i) % d != 0)
      return op->emitOpError("gradient needs an output dimension that is a "
                             "multiple of the input's");
    copies.push_back(2 * i);
    split.push_back(out.getDimSize(i) / d);
    split.push_back(d);
  }
  Value g =
      r.bb.reshape(r.g, RankedTensorType::get(split, in.getElementType()));
  r.give(0, r.bb.reshape(r.bb.reduce<ReduceSumOp>(g, copies), in));
  return success();
}

LogicalResult backward(ConcatOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  int64_t axis = op.getAxis();
  int64_t rank = typeOf(r.y).getRank();
  if (axis < 0)
    axis += rank;
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    int64_t size = typeOf(input).getDimSize(axis);
    if (r.active(input))
      r.give(i,
             bb.op<SliceOp>(input.getType(),
                            {r.g, bb.ints({offset}), bb.ints({offset + size}),
                             bb.ints({axis}), bb.ints({1})}));
    offset += size;
  }
  return success();
}

/// The pieces' cotangents (zeros where a piece has none), concatenated.
LogicalResult backward(SplitOp op, GradientContext &ctx) {
  OnnxBuilder bb(ctx.getBuilder(), op->getLoc());
  SmallVector<Value> pieces;
  for (Value piece : op.getResults()) {
    Value c = ctx.getCotangent(piece);
    pieces.push_back(c ? c : bb.zeros(typeOf(piece)));
  }
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += typeOf(op.getInput()).getRank();
  ctx.accumulate(op.getInput(),
                 bb.op<ConcatOp>(op.getInput().getType(), pieces,
                                 {bb.b.getNamedAttr(
                                     "axis", bb.b.getI64IntegerAttr(axis))}));
  return success();
}

LogicalResult backward(SliceOp op, GradientContext &ctx) {
  // Per sliced axis, g goes back to the positions it was read from: padded
  // with zeros for step 1, scattered (fsdp.gather_grad with the constant
  // positions) for any other step.
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto starts = constantInts(op.getStarts());
  auto in = typeOf(op.getData());
  int64_t rank = in.getRank();
  std::optional<SmallVector<int64_t>> axes = SmallVector<int64_t>();
  if (isa<NoneType>(op.getAxes().getType()))
    for (int64_t i = 0; starts && i < static_cast<int64_t>(starts->size()); ++i)
      axes->push_back(i);
  else
    axes = constantInts(op.getAxes());
  std::optional<SmallVector<int64_t>> steps;
  if (isa<NoneType>(op.getSteps().getType()))
    steps = SmallVector<int64_t>(axes ? axes->size() : 0, 1);
  else
    steps = constantInts(op.getSteps());
  if (!starts || !axes || !steps || axes->size() != starts->size() ||
      steps->size() != starts->size() || llvm::is_contained(*steps, 0))
    return op->emitOpError("only Slices with constant "
                           "starts, axes and steps have a gradient rule");
  Value grad = r.g;
  for (auto [axisValue, startValue, step] : llvm::zip(*axes, *starts, *steps)) {
    int64_t axis = axisValue < 0 ? axisValue + rank : axisValue;
    int64_t dim = in.getDimSize(axis);
    int64_t size = typeOf(r.y).getDimSize(axis);
    // ONNX clamps starts to [0, dim] ([0, dim - 1] going backwards).
    int64_t start = startValue < 0 ? startValue + dim : startValue;
    start = std::clamp<int64_t>(start, 0, step > 0 ? dim : dim - 1);
    if (step == 1) {
      grad = bb.padAxis(grad, axis, start, dim - start - size);
      continue;
    }
    SmallVector<int64_t> positions, shape(typeOf(grad).getShape());
    for (int64_t k = 0; k < size; ++k)
      positions.push_back(start + k * step);
    shape[axis] = dim;
    grad = bb.op<mlir::fsdp::GatherGradOp>(
        RankedTensorType::get(shape, r.element), {grad, bb.ints(positions)},
        {bb.b.getNamedAttr("axis", bb.b.getI64IntegerAttr(axis))});
  }
  r.give(0, grad);
  return success();
}

/// Pad: the constant mode's gradient is g's interior (a Slice); reflect
/// and edge read some inputs several times, so per padded axis g is
/// scattered back to the positions each output read (fsdp.gather_grad
/// with those constant positions), which accumulates the repeats.
LogicalResult backward(PadOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto pads = constantInts(op.getPads());
  auto in = typeOf(op.getData());
  int64_t rank = in.getRank();
  if (!pads || static_cast<int64_t>(pads->size()) != 2 * rank ||
      llvm::any_of(*pads, [](int64_t p) { return p < 0; }))
    return op->emitOpError("only Pads with constant, non-negative pads have "
                           "a gradient rule");
  if (op.getMode() == "constant") {
    SmallVector<int64_t> starts, ends, axes;
    for (int64_t d = 0; d < rank; ++d) {
      starts.push_back((*pads)[d]);
      ends.push_back((*pads)[d] + in.getDimSize(d));
      axes.push_back(d);
    }
    r.give(0, bb.op<SliceOp>(in, {r.g, bb.ints(starts), bb.ints(ends),
                                  bb.ints(axes),
                                  bb.ints(SmallVector<int64_t>(rank, 1))}));
    return success();
  }
  bool edge = op.getMode() == "edge";
  Value grad = r.g;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t before = (*pads)[d], n = in.getDimSize(d);
    int64_t size = typeOf(grad).getDimSize(d);
    if (size == n)
      continue;
    SmallVector<int64_t> positions, shape(typeOf(grad).getShape());
    for (int64_t j = 0; j < size; ++j) {
      int64_t i = j - before;
      if (i < 0)
        i = edge ? 0 : -i;
      else if (i >= n)
        i = edge ? n - 1 : 2 * (n - 1) - i;
      positions.push_back(i);
    }
    shape[d] = n;
    grad = bb.op<mlir::fsdp::GatherGradOp>(
        RankedTensorType::get(shape, r.element), {grad, bb.ints(positions)},
        {bb.b.getNamedAttr("axis", bb.b.getI64IntegerAttr(d))});
  }
  r.give(0, grad);
  return success();
}

/// Resize's plan for the runtime's tap arithmetic (backends/cuda/kernels/
/// resize.h, which the resize kernels of both backends use), axis by axis;
/// fails on an attribute the kernels do not run.
FailureOr<fsdprt::cuda::ResizePlan> resizePlan(ResizeOp op) {
  fsdprt::cuda::ResizePlan plan{};
  if (!fsdprt::cuda::resizeModeOf(op.getMode().str().c_str(), plan.mode) ||
      !fsdprt::cuda::resizeTransformOf(
          op.getCoordinateTransformationMode().str().c_str(), plan.transform) ||
      !fsdprt::cuda::nearestModeOf(op.getNearestMode().str().c_str(),
                                   plan.nearest))
    return failure();
  plan.a = op.getCubicCoeffA().convertToDouble();
  plan.exclude = op.getExcludeOutside() != 0;
  return plan;
}

/// Resize is separable and linear in X: per resized axis, g goes back to
/// the input positions each output read (fsdp.gather_grad), times that
/// tap's weight: 1 tap for nearest, 2 for linear, 4 for cubic.
LogicalResult backward(ResizeOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OnnxBuilder &bb = r.bb;
  auto in = typeOf(op.getX());
  std::optional<SmallVector<double>> scales = op.getConstantScales();
  if (!scales)
    return op->emitOpError("only Resizes with constant scales or sizes have "
                           "a gradient rule");
  FailureOr<fsdprt::cuda::ResizePlan> plan = resizePlan(op);
  if (failed(plan))
    return op->emitOpError("no gradient rule for this Resize's mode, "
                           "coordinate_transformation_mode or nearest_mode");
  Value grad = r.g;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t n = in.getDimSize(d), m = typeOf(grad).getDimSize(d);
    plan->in[0] = n;
    plan->out[0] = m;
    SmallVector<fsdprt::cuda::ResizeTap> taps;
    for (int64_t j = 0; j < m; ++j)
      taps.push_back(fsdprt::cuda::resizeTap(*plan, 0, j, (*scales)[d]));
    auto unresized = [&] {
      if (n != m)
        return false;
      for (auto [j, tap] : llvm::enumerate(taps)) {
        double own = 0, other = 0;
        for (int k = 0; k < tap.count; ++k)
          (tap.at[k] == static_cast<int64_t>(j) ? own : other) +=
              std::abs(tap.weight[k]);
        if (own != 1 || other != 0)
          return false;
      }
      return true;
    };
    if (unresized())
      continue;
    SmallVector<int64_t> shape(typeOf(grad).getShape());
    shape[d] = n;
    SmallVector<int64_t> along(in.getRank(), 1);
    along[d] = m;
    Value sum;
    for (int k = 0; k < taps.front().count; ++k) {
      SmallVector<int64_t> positions;
      SmallVector<Attribute> weights;
      for (const fsdprt::cuda::ResizeTap &tap : taps) {
        positions.push_back(tap.at[k]);
        weights.push_back(bb.b.getFloatAttr(r.element, tap.weight[k]));
      }
      Value g = grad;
      bool ones = llvm::all_of(taps, [k](const fsdprt::cuda::ResizeTap &t) {
        return t.weight[k] == 1;
      });
      if (!ones) // nearest's weights are all 1
        g = bb.mul(grad,
                   bb.b.create<ConstantOp>(
                       op.getLoc(),
                       DenseElementsAttr::get(
                           RankedTensorType::get(along, r.element), weights)),
                   grad.getType());
      Value back = bb.op<mlir::fsdp::GatherGradOp>(
          RankedTensorType::get(shape, r.element), {g, bb.ints(positions)},
          {bb.b.getNamedAttr("axis", bb.b.getI64IntegerAttr(d))});
      sum = sum ? bb.add(sum, back) : back;
    }
    grad = sum;
  }
  r.give(0, grad);
  return success();
}

/// GridSample: one fsdp.grid_sample_grad gives X its gradient (g spread
/// back over the taps each point read) and grid its own (the taps' weights
/// differentiated; zeros in nearest mode, as torch gives).
LogicalResult backward(GridSampleOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  OpBuilder &b = r.bb.b;
  auto grad = b.create<mlir::fsdp::GridSampleGradOp>(
      op->getLoc(), TypeRange{op.getX().getType(), op.getGrid().getType()},
      op.getX(), op.getGrid(), r.g, b.getStringAttr(op.getMode()),
      b.getStringAttr(op.getPaddingMode()),
      b.getI64IntegerAttr(op.getAlignCorners()));
  r.give(0, grad.getGradX());
  r.give(1, grad.getGradGrid());
  return success();
}

/// nn.Embedding(padding_idx) from the frontend's metadata ("embeddings"):
/// weight FQN -> (embedding module FQN, padding row).
FailureOr<llvm::StringMap<std::pair<std::string, int64_t>>>
paddingRowsOf(ModuleOp module) {
  llvm::StringMap<std::pair<std::string, int64_t>> rows;
  auto json = module->getAttrOfType<StringAttr>("fsdp.torch_metadata");
  if (!json)
    return rows;
  if (std::string why = mlir::fsdp::checkJSONBounds(json.getValue());
      !why.empty())
    return module.emitError("fsdp.torch_metadata ") << why;
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json.getValue());
  if (!parsed)
    return module.emitError("fsdp.torch_metadata is not "
                            "valid JSON: ")
           << llvm::toString(parsed.takeError());
  llvm::json::Object *root = parsed->getAsObject();
  llvm::json::Array none;
  llvm::json::Array *list = root ? root->getArray("embeddings") : nullptr;
  for (llvm::json::Value &item : list ? *list : none) {
    llvm::json::Object *entry = item.getAsObject();
    std::optional<StringRef> name =
        entry ? entry->getString("module") : std::nullopt;
    std::optional<StringRef> weight =
        entry ? entry->getString("weight") : std::nullopt;
    std::optional<int64_t> row =
        entry ? entry->getInteger("padding_idx") : std::nullopt;
    if (!name || !weight || !row)
      return module.emitError(
          "fsdp.torch_metadata: an 'embeddings' entry "
          "needs 'module', 'weight' and an integer 'padding_idx'");
    rows[*weight] = {name->str(), *row};
  }
  return rows;
}

/// torch's embedding backward skips the positions whose index is the
/// module's padding_idx, so the lookup never updates that row (a tied LM
/// head still does). ONNX's Gather has no such attribute: the frontend
/// records every nn.Embedding's padding_idx in its metadata, and the
/// gradient an embedding's own lookup gives its weight is multiplied by a
/// mask that is 0 on that row. A Gather of the same weight from another
/// module's scope (`self.emb.weight[ids]`) keeps its whole gradient, as in
/// torch.
FailureOr<Value> withoutPaddingRow(GatherOp gather, Value grad,
                                   OnnxBuilder &bb) {
  auto module = gather->getParentOfType<ModuleOp>();
  auto paddingRows = paddingRowsOf(module);
  if (failed(paddingRows))
    return failure();
  auto get = gather.getData().getDefiningOp<mlir::fsdp::GetParamOp>();
  auto param =
      get ? module.lookupSymbol<mlir::fsdp::ParamOp>(get.getParamAttr())
          : nullptr;
  if (!param || paddingRows->empty() || gather.getAxis() != 0)
    return grad;
  SmallVector<StringRef> names = {param.getSymName()};
  if (std::optional<ArrayAttr> aliases = param.getAliases())
    llvm::append_range(names, mlir::fsdp::stringsOf(*aliases));
  const std::pair<std::string, int64_t> *found = nullptr;
  for (StringRef name : names)
    if (auto it = paddingRows->find(name); it != paddingRows->end())
      found = &it->second;
  if (!found)
    return grad;
  auto [embedding, row] = *found;
  FailureOr<SmallVector<mlir::fsdp::ModuleAttr>> tree =
      mlir::fsdp::getModuleTree(module);
  if (failed(tree))
    return failure();
  std::optional<std::string> scope =
      mlir::fsdp::ScopeResolver(module, *tree).moduleOf(gather);
  if (scope && *scope != embedding)
    return grad;
  auto type = cast<RankedTensorType>(grad.getType());
  int64_t rows = type.getDimSize(0);
  if (row < 0 || row >= rows)
    return gather.emitOpError("padding_idx ")
           << row << " of embedding '" << embedding << "' is outside its "
           << rows << " rows";
  SmallVector<int64_t> maskShape(type.getRank(), 1);
  maskShape[0] = rows;
  auto maskType = RankedTensorType::get(maskShape, type.getElementType());
  SmallVector<APFloat> values(
      rows, APFloat::getOne(
                cast<FloatType>(type.getElementType()).getFloatSemantics()));
  values[row] = APFloat::getZero(values[row].getSemantics());
  Value mask = bb.b.create<ConstantOp>(
      gather.getLoc(), DenseElementsAttr::get(maskType, values));
  return bb.mul(grad, mask, type);
}

LogicalResult backward(GatherOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  if (r.active(op.getIndices()))
    return op->emitOpError("indices cannot be differentiated");
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += typeOf(op.getData()).getRank();
  FailureOr<Value> grad = withoutPaddingRow(
      op,
      r.bb.op<mlir::fsdp::GatherGradOp>(
          op.getData().getType(), {r.g, op.getIndices()},
          {r.bb.b.getNamedAttr("axis", r.bb.b.getI64IntegerAttr(axis))}),
      r.bb);
  if (failed(grad))
    return failure();
  r.give(0, *grad);
  return success();
}

/// The gradient of GatherElements: its cotangent added into zeros of the
/// data's type where each element was read (ScatterElements with add:
/// repeated indices accumulate).
LogicalResult backward(GatherElementsOp op, GradientContext &ctx) {
  Rule r(op, ctx);
  if (r.active(op.getIndices()))
    return op->emitOpError("indices cannot be differentiated");
  auto type = cast<RankedTensorType>(op.getData().getType());
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += type.getRank();
  OpBuilder &b = r.bb.b;
  r.give(0, r.bb.op<ScatterElementsOp>(
                type, {r.bb.zeros(type), op.getIndices(), r.g},
                {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
                 b.getNamedAttr("reduction", b.getStringAttr("add"))}));
  return success();
}

/// A scatter's data is read where no update lands (reduction none), or
/// everywhere (add, mul); each update is read once. So data's cotangent is g
/// with the written positions zeroed (the same scatter of zeros), g itself
/// (add), or g times the product of the updates that land on each element
/// (mul: the same scatter into ones). An update's cotangent is g read back
/// at its position (`gatherBack`) for none and add. With an index repeated
/// under reduction none (ONNX leaves the result undefined; torch's last
/// write wins), every update written there gets that position's cotangent,
/// the overwritten ones too, as torch's scatter and index_put backward
/// give; exporters write unique indices. mul's update cotangent needs the
/// other factors landing on the same element, and is refused.
template <typename ScatterOp>
LogicalResult
scatterBackward(ScatterOp op, GradientContext &ctx,
                llvm::function_ref<FailureOr<Value>(Rule &)> gatherBack,
                ArrayRef<NamedAttribute> attrs) {
  Rule r(op, ctx);
  if (r.active(op.getIndices()))
    return op->emitOpError("indices cannot be differentiated");
  StringRef reduction = op.getReduction();
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    return op->emitOpError("no gradient rule for reduction '")
           << reduction << "'";
  if (reduction == "mul" && r.active(op.getUpdates()))
    return op->emitOpError("no gradient rule for reduction 'mul' to its "
                           "updates (only to its data)");
  OpBuilder &b = r.bb.b;
  auto updates = typeOf(op.getUpdates());
  auto with = [&](StringRef how) {
    SmallVector<NamedAttribute> all(attrs);
    all.push_back(b.getNamedAttr("reduction", b.getStringAttr(how)));
    return all;
  };
  if (r.active(op.getData())) {
    Value grad = r.g;
    if (reduction == "none")
      grad = r.bb.op<ScatterOp>(
          r.yt, {r.g, op.getIndices(), r.bb.zeros(updates)}, with("none"));
    else if (reduction == "mul")
      grad = r.bb.mul(r.g,
                      r.bb.op<ScatterOp>(r.yt,
                                         {r.bb.splat(r.yt, 1), op.getIndices(),
                                          op.getUpdates()},
                                         with("mul")),
                      r.yt);
    r.give(0, grad);
  }
  if (r.active(op.getUpdates())) {
    FailureOr<Value> grad = gatherBack(r);
    if (failed(grad))
      return failure();
    r.give(2, *grad);
  }
  return success();
}

LogicalResult backward(ScatterElementsOp op, GradientContext &ctx) {
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += typeOf(op.getData()).getRank();
  OpBuilder &b = ctx.getBuilder();
  NamedAttribute attrs[] = {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))};
  return scatterBackward(
      op, ctx,
      [&](Rule &r) -> FailureOr<Value> {
        return r.bb.op<GatherElementsOp>(op.getUpdates().getType(),
                                         {r.g, op.getIndices()}, attrs);
      },
      attrs);
}

/// GatherND of `g` at ScatterND's index tuples, which has no kernel: a
/// Gather along axis 0 of g flattened over the k indexed axes, of each
/// tuple's row there (buildTupleRows: the forward's kernel has checked
/// their range). For k = 1 the Gather takes the indices as they are.
FailureOr<Value> gatherTuples(ScatterNDOp op, Rule &r) {
  auto indexType = typeOf(op.getIndices());
  auto dataType = typeOf(op.getData());
  int64_t k = indexType.getRank() ? indexType.getShape().back() : 0;
  ArrayRef<int64_t> shape = dataType.getShape();
  if (!indexType.hasStaticShape() || k < 1 || k > dataType.getRank() ||
      (k > 1 && llvm::any_of(shape.take_front(k), ShapedType::isDynamic)))
    return op->emitOpError("gradient to updates needs indices of static "
                           "shape whose tuples index 1 or more static axes");
  OnnxBuilder &bb = r.bb;
  OpBuilder &b = bb.b;
  Type index = indexType.getElementType();
  auto tuples = RankedTensorType::get(indexType.getShape().drop_back(), index);
  Value rows, g = r.g;
  if (k == 1) {
    rows = bb.reshape(op.getIndices(), tuples);
  } else {
    rows = buildTupleRows(b, bb.loc, op.getIndices(), shape.take_front(k));
    int64_t flatRows = 1;
    for (int64_t size : shape.take_front(k))
      flatRows *= size;
    SmallVector<int64_t> flat{flatRows};
    flat.append(shape.begin() + k, shape.end());
    g = bb.reshape(g, RankedTensorType::get(flat, r.element));
  }
  return bb.op<GatherOp>(op.getUpdates().getType(), {g, rows},
                         {b.getNamedAttr("axis", b.getI64IntegerAttr(0))});
}

LogicalResult backward(ScatterNDOp op, GradientContext &ctx) {
  return scatterBackward(op, ctx, [&](Rule &r) { return gatherTuples(op, r); },
                         {});
}

} // namespace

void mlir::fsdp::detail::attachViewGradients(Dialect &dialect) {
  for (RegisteredOperationName name :
       dialect.getContext()->getRegisteredOperations())
    if (&name.getDialect() == &dialect &&
        name.hasInterface<ViewLikeOpInterface>())
      name.attachInterface<ViewGradient>();
}

void mlir::fsdp::detail::attachMovementGradients(MLIRContext &ctx) {
  attachGradient<TransposeOp, backward>(ctx);
  attachGradient<ExpandOp, backward>(ctx);
  attachGradient<TileOp, backward>(ctx);
  attachGradient<TriluOp, backward>(ctx);
  attachGradient<CumSumOp, backward>(ctx);
  attachGradient<ConcatOp, backward>(ctx);
  attachGradient<SplitOp, backward, /*everyResult=*/true>(ctx);
  attachGradient<SliceOp, backward>(ctx);
  attachGradient<PadOp, backward>(ctx);
  attachGradient<ResizeOp, backward>(ctx);
  attachGradient<GridSampleOp, backward>(ctx);
  attachGradient<GatherOp, backward>(ctx);
  attachGradient<GatherElementsOp, backward>(ctx);
  attachGradient<ScatterElementsOp, backward>(ctx);
  attachGradient<ScatterNDOp, backward>(ctx);
}
