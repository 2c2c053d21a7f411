//===- Autodiff.cpp - Reverse-mode gradients of the loss ------------------===//
//
/// The classic reverse sweep on SSA: values that depend on a trainable
/// parameter are "active"; walking the forward ops backwards, each active
/// op turns the cotangent of its results into cotangents of its active
/// operands (summed when a value has several uses). Backward ops are built
/// from the same onnx ops as the forward, so every later pass (fuse,
/// lowering, memory planning) and the runtime treat them like any other.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"
#include "OnnxBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/Support/JSON.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <numeric>
#include <type_traits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_AUTODIFF
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::onnxir;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::typeOf;

namespace {

/// The value of a one-element constant, if `value` is one.
std::optional<double> constantScalar(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != 1)
    return std::nullopt;
  if (auto floats = dyn_cast<DenseFPElementsAttr>(dense))
    return (*floats.getValues<APFloat>().begin()).convertToDouble();
  auto ints = cast<DenseIntElementsAttr>(dense);
  APInt v = *ints.getValues<APInt>().begin();
  return v.getBitWidth() == 1 ? double(v.getBoolValue())
                              : double(v.getSExtValue());
}

class Autodiff {
public:
  Autodiff(func::FuncOp func, ModuleOp module,
           mlir::fsdp::AutodiffOptions options)
      : func(func), module(module), options(std::move(options)) {}

  LogicalResult run();

private:
  /// Adds `g` to the cotangent of `value`.
  void accumulate(Value value, Value g) {
    auto [it, inserted] = cotangents.try_emplace(value, g);
    if (!inserted) {
      OnnxBuilder bb(*builder, value.getLoc());
      it->second = bb.add(it->second, g);
    }
  }
  bool active(Value value) const { return activeValues.contains(value); }
  LogicalResult attachLoss();
  LogicalResult prepare();
  FailureOr<llvm::StringSet<>> checkpointedUnits();
  LogicalResult decomposeBatchNorm(BatchNormalizationOp norm);
  void fuseAttention();
  void countBatch(BatchNormalizationOp norm, OnnxBuilder &bb);
  LogicalResult backward(Operation *op, Value g);
  FailureOr<Value> withoutPaddingRow(GatherOp gather, Value grad);

  func::FuncOp func;
  ModuleOp module;
  mlir::fsdp::AutodiffOptions options;
  OpBuilder *builder = nullptr;
  DenseSet<Value> activeValues;
  DenseMap<Value, Value> cotangents;
  /// New values of buffers (BatchNorm's running statistics), in op order.
  SmallVector<std::pair<FlatSymbolRefAttr, Value>> updates;
  /// nn.Embedding(padding_idx) from the frontend's metadata: weight FQN ->
  /// (embedding module FQN, padding row); read on the first Gather.
  std::optional<llvm::StringMap<std::pair<std::string, int64_t>>> paddingRows;
};

/// `--loss=cross-entropy`: the model returns logits [..., classes]; the
/// step takes labels [...] as a new input and returns the mean softmax
/// cross-entropy over every position (leading dimensions flattened, as
/// `F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))`).
LogicalResult Autodiff::attachLoss() {
  if (options.loss.empty())
    return success();
  if (options.loss != "cross-entropy")
    return func.emitError("fsdp-autodiff: unknown loss '")
           << options.loss << "' (supported: cross-entropy)";
  auto resultName = [&](unsigned i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, "fsdp.name");
    return name ? name.getValue().str() : "output" + std::to_string(i);
  };
  std::string names;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    names += (i ? ", " : "") + resultName(i);
  std::optional<unsigned> index;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (options.logits.empty() ? func.getNumResults() == 1
                               : resultName(i) == options.logits)
      index = i;
  if (!index)
    return func.emitError("fsdp-autodiff: ")
           << (options.logits.empty()
                   ? "the model returns " +
                         std::to_string(func.getNumResults()) + " values (" +
                         names + "); name the logits with logits=NAME"
                   : "no result is named '" + options.logits +
                         "' (results: " + names + ")");
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttrOfType<StringAttr>(i, "fsdp.name"))
      if (name.getValue() == options.labels)
        return func.emitError("fsdp-autodiff: the model already has an input "
                              "named '")
               << options.labels << "'; choose another with labels=NAME";
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value logits = ret.getOperand(*index);
  auto type = dyn_cast<RankedTensorType>(logits.getType());
  if (!type || type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
    return func.emitError("fsdp-autodiff: cross-entropy needs floating-point "
                          "logits [..., classes], not ")
           << logits.getType() << " ('" << resultName(*index) << "')";

  OpBuilder b(ret);
  MLIRContext *ctx = func.getContext();
  auto labelType =
      RankedTensorType::get(type.getShape().drop_back(), b.getI64Type());
  unsigned argIndex = func.getNumArguments();
  func.insertArgument(argIndex, labelType,
                      b.getDictionaryAttr({b.getNamedAttr(
                          "fsdp.name", b.getStringAttr(options.labels))}),
                      func.getLoc());
  Value labels = func.getArgument(argIndex);
  OnnxBuilder bb(b, NameLoc::get(b.getStringAttr("loss"), logits.getLoc()));
  int64_t rows = labelType.getNumElements(), classes = type.getShape().back();
  Value scores = bb.reshape(
      logits, RankedTensorType::get({rows, classes}, type.getElementType()));
  Value flat =
      bb.reshape(labels, RankedTensorType::get({rows}, b.getI64Type()));
  auto lossType = RankedTensorType::get({}, type.getElementType());
  auto loss = b.create<SoftmaxCrossEntropyLossOp>(
      bb.loc, TypeRange{lossType, b.getNoneType()}, scores, flat,
      b.create<NoValueOp>(bb.loc), b.getI64IntegerAttr(options.ignoreIndex),
      b.getStringAttr("mean"));
  b.create<func::ReturnOp>(ret.getLoc(), ValueRange{loss.getResult(0)});
  ret.erase();
  func.setFunctionType(
      FunctionType::get(ctx, func.getArgumentTypes(), {lossType}));
  func.setResultAttr(0, "fsdp.name", b.getStringAttr("loss"));
  return success();
}

/// BatchNorm as the ops it computes, so the reverse sweep differentiates
/// it like anything else. In training: the batch's statistics, and the
/// running statistics' updates as PyTorch makes them (the variance
/// unbiased; `momentum` as exported, ONNX's convention: running * momentum +
/// batch * (1 - momentum)). In eval: the running statistics.
LogicalResult Autodiff::decomposeBatchNorm(BatchNormalizationOp norm) {
  Value x = norm.getX();
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 2)
    return norm.emitOpError("fsdp-autodiff: BatchNormalization input must be "
                            "[N, C, ...]");
  OpBuilder b(norm);
  OnnxBuilder bb(b, norm.getLoc());
  Type element = xt.getElementType();
  SmallVector<int64_t> axes = {0};
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  bool training = norm.getTrainingMode() != 0;
  Value mean, centered, var;
  if (training) {
    mean = bb.reduce<ReduceMeanOp>(x, axes);
    centered = bb.op<SubOp>(xt, {x, mean});
    var = bb.reduce<ReduceMeanOp>(bb.mul(centered, centered, xt), axes);
  } else {
    mean = bb.channels(norm.getInputMean(), rank);
    centered = bb.op<SubOp>(xt, {x, mean});
    var = bb.channels(norm.getInputVar(), rank);
  }
  Type statType = var.getType();
  Value eps = bb.scalar(norm.getEpsilon().convertToDouble(), element);
  Value rstd = bb.op<ReciprocalOp>(
      statType,
      {bb.op<SqrtOp>(statType, {bb.op<AddOp>(statType, {var, eps})})});
  Value xhat = bb.mul(centered, rstd, xt);
  Value y =
      bb.op<AddOp>(xt, {bb.mul(xhat, bb.channels(norm.getScale(), rank), xt),
                        bb.channels(norm.getB(), rank)});
  norm.getY().replaceAllUsesWith(y);

  if (training) {
    double momentum = norm.getMomentum().convertToDouble();
    int64_t count = xt.getNumElements() / xt.getDimSize(1);
    double unbias = count > 1 ? double(count) / double(count - 1) : 1.0;
    auto update = [&](Value running, Value batch, double factor, Value result) {
      auto type = typeOf(running);
      Value fresh = bb.mul(bb.reshape(batch, type),
                           bb.scalar((1 - momentum) * factor, element), type);
      Value next =
          bb.add(bb.mul(running, bb.scalar(momentum, element), type), fresh);
      if (!isa<NoneType>(result.getType()))
        result.replaceAllUsesWith(next);
      if (auto get = running.getDefiningOp<mlir::fsdp::GetBufferOp>())
        updates.emplace_back(get.getBufferAttr(), next);
    };
    update(norm.getInputMean(), mean, 1.0, norm.getRunningMean());
    update(norm.getInputVar(), var, unbias, norm.getRunningVar());
    countBatch(norm, bb);
  }
  norm.erase();
  return success();
}

/// A training-mode BatchNorm adds 1 to its module's num_batches_tracked, as
/// torch's forward does. No node reads the counter (the exporter keeps it
/// only as an initializer), so it is found as the buffer beside the running
/// mean: `<module>.num_batches_tracked`.
void Autodiff::countBatch(BatchNormalizationOp norm, OnnxBuilder &bb) {
  auto mean = norm.getInputMean().getDefiningOp<mlir::fsdp::GetBufferOp>();
  if (!mean)
    return;
  StringRef owner = mlir::fsdp::parentOf(mean.getBuffer());
  std::string name = owner.empty() ? std::string("num_batches_tracked")
                                   : (owner + ".num_batches_tracked").str();
  auto counter = module.lookupSymbol<mlir::fsdp::BufferOp>(name);
  auto type = counter ? dyn_cast<RankedTensorType>(counter.getType())
                      : RankedTensorType();
  if (!type || type.getNumElements() != 1 ||
      !type.getElementType().isInteger(64))
    return;
  auto symbol = FlatSymbolRefAttr::get(counter.getSymNameAttr());
  Value now = bb.b.create<mlir::fsdp::GetBufferOp>(norm.getLoc(), type, symbol);
  Value one = bb.b.create<ConstantOp>(
      norm.getLoc(), DenseElementsAttr::get(type, static_cast<int64_t>(1)));
  updates.emplace_back(symbol, bb.add(now, one));
}

/// Rewrites what trains differently from how it runs: BatchNorm (always
/// decomposed; see above) and Dropout (only without dropping: ratio 0 or
/// not in training).
LogicalResult Autodiff::prepare() {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto norm = dyn_cast<BatchNormalizationOp>(op)) {
      // The ops replacing it belong to its module and FSDP unit (so that
      // activation checkpointing recomputes them with the unit).
      Operation *before = norm->getPrevNode(), *after = norm->getNextNode();
      SmallVector<NamedAttribute> marks;
      for (StringRef name : {"fsdp.module", "fsdp.unit"})
        if (Attribute mark = norm->getAttr(name))
          marks.push_back(
              NamedAttribute(StringAttr::get(norm.getContext(), name), mark));
      if (failed(decomposeBatchNorm(norm)))
        return failure();
      for (Operation *added = before ? before->getNextNode()
                                     : &func.getBody().front().front();
           added != after; added = added->getNextNode())
        for (NamedAttribute mark : marks)
          added->setAttr(mark.getName(), mark.getValue());
    } else if (auto dropout = dyn_cast<DropoutOp>(op)) {
      std::optional<double> training =
          isa<NoneType>(dropout.getTrainingMode().getType())
              ? 0.0
              : constantScalar(dropout.getTrainingMode());
      std::optional<double> ratio = isa<NoneType>(dropout.getRatio().getType())
                                        ? 0.5
                                        : constantScalar(dropout.getRatio());
      if (!training || (*training != 0 && (!ratio || *ratio != 0)))
        return op->emitOpError("fsdp-autodiff: Dropout that drops in "
                               "training needs random masks, which the "
                               "runtime does not generate yet; export with "
                               "p=0 (ratio ")
               << (ratio ? std::to_string(*ratio) : std::string("unknown"))
               << ")";
      Value mask = dropout.getMask();
      if (!isa<NoneType>(mask.getType()) && !mask.use_empty()) {
        OpBuilder b(dropout);
        mask.replaceAllUsesWith(b.create<ConstantOp>(
            dropout.getLoc(), DenseElementsAttr::get(typeOf(mask), true)));
      }
      dropout.getOutput().replaceAllUsesWith(dropout.getData());
      dropout.erase();
    }
  }
  return success();
}

/// Differentiated attention chains become fsdp.attention with its lse
/// result (differentiated by fsdp.attention_grad), so that the backward keeps
/// one f32 per query row instead of the scores and probabilities. Runs after
/// the activity analysis: a chain nothing trainable reaches is left to
/// fsdp-fuse, and one whose mask is active stays decomposed (the fused
/// gradient gives the mask none).
void Autodiff::fuseAttention() {
  SmallVector<MatMulOp> roots;
  for (Operation &op : func.getBody().front())
    if (auto matmul = dyn_cast<MatMulOp>(op);
        matmul && active(matmul.getResult()))
      roots.push_back(matmul);
  for (MatMulOp root : roots) {
    std::string why;
    FailureOr<mlir::fsdp::detail::AttentionChain> chain =
        mlir::fsdp::detail::matchAttention(root, why);
    if (failed(chain) || (chain->mask && active(chain->mask)))
      continue;
    Value oldMask = chain->mask;
    mlir::fsdp::detail::makeCausal(*chain);
    OpBuilder b(root);
    auto attention =
        mlir::fsdp::detail::buildAttention(b, *chain, /*withLse=*/true);
    // The fused op belongs to the chain's module and FSDP unit (activation
    // checkpointing recomputes it with the unit).
    for (StringRef name : {"fsdp.module", "fsdp.unit"})
      if (Attribute mark = root->getAttr(name))
        attention->setAttr(name, mark);
    root.getResult().replaceAllUsesWith(attention.getOutput());
    activeValues.insert(attention.getOutput());
    for (Operation *op : chain->ops) {
      for (Value result : op->getResults())
        activeValues.erase(result);
      op->erase();
    }
    // A causal mask's constant computation has no reader left.
    SmallVector<Value> dead;
    if (oldMask && !chain->mask)
      dead.push_back(oldMask);
    while (!dead.empty()) {
      Value value = dead.pop_back_val();
      Operation *def = value.getDefiningOp();
      if (!def || !value.use_empty() || !isMemoryEffectFree(def) ||
          !llvm::all_of(def->getResults(),
                        [](Value r) { return r.use_empty(); }))
        continue;
      SmallVector<Value> operands(def->getOperands());
      def->erase();
      dead.append(operands.begin(), operands.end());
    }
  }
}

LogicalResult Autodiff::backward(Operation *op, Value g) {
  OnnxBuilder bb(*builder, op->getLoc());
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto give = [&](unsigned i, Value grad) {
    if (active(operand(i)))
      accumulate(operand(i), bb.sumTo(grad, typeOf(operand(i))));
  };
  Value y = op->getResult(0);
  Type yt = y.getType();
  Type element = typeOf(y).getElementType();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<AddOp>([&](auto) {
        give(0, g);
        give(1, g);
        return success();
      })
      .Case<SubOp>([&](auto) {
        give(0, g);
        if (active(operand(1)))
          give(1, bb.op<NegOp>(yt, {g}));
        return success();
      })
      .Case<MulOp>([&](auto) {
        if (active(operand(0)))
          give(0, bb.mul(g, operand(1), yt));
        if (active(operand(1)))
          give(1, bb.mul(g, operand(0), yt));
        return success();
      })
      .Case<DivOp>([&](auto) {
        if (active(operand(0)))
          give(0, bb.op<DivOp>(yt, {g, operand(1)}));
        if (active(operand(1))) // -g * y / b
          give(1, bb.op<NegOp>(
                      yt, {bb.op<DivOp>(yt, {bb.mul(g, y, yt), operand(1)})}));
        return success();
      })
      .Case<NegOp>([&](auto) {
        give(0, bb.op<NegOp>(yt, {g}));
        return success();
      })
      .Case<ReluOp>([&](auto) {
        auto mask =
            RankedTensorType::get(typeOf(y).getShape(), bb.b.getI1Type());
        Value positive =
            bb.op<GreaterOp>(mask, {operand(0), bb.scalar(0, element)});
        give(0, bb.op<WhereOp>(yt, {positive, g, bb.scalar(0, element)}));
        return success();
      })
      .Case<TanhOp>([&](auto) { // g * (1 - y^2)
        Value oneMinus =
            bb.op<SubOp>(yt, {bb.scalar(1, element), bb.mul(y, y, yt)});
        give(0, bb.mul(g, oneMinus, yt));
        return success();
      })
      .Case<SigmoidOp>([&](auto) { // g * y * (1 - y)
        Value oneMinus = bb.op<SubOp>(yt, {bb.scalar(1, element), y});
        give(0, bb.mul(bb.mul(g, y, yt), oneMinus, yt));
        return success();
      })
      .Case<LogOp>([&](auto) {
        give(0, bb.op<DivOp>(yt, {g, operand(0)}));
        return success();
      })
      .Case<AbsOp>([&](auto) { // g * sign(x), 0 at 0 (as torch)
        Value x = operand(0), zero = bb.scalar(0, element);
        auto mask =
            RankedTensorType::get(typeOf(y).getShape(), bb.b.getI1Type());
        Value negative = bb.op<WhereOp>(
            yt, {bb.op<LessOp>(mask, {x, zero}), bb.op<NegOp>(yt, {g}), zero});
        give(0, bb.op<WhereOp>(
                    yt, {bb.op<GreaterOp>(mask, {x, zero}), g, negative}));
        return success();
      })
      .Case<CastOp>([&](CastOp) -> LogicalResult {
        // Between float types: the cotangent cast back (ONNX's type codes).
        Type from = typeOf(operand(0)).getElementType();
        if (from == element) {
          give(0, g);
          return success();
        }
        int64_t code = from.isF32()    ? 1
                       : from.isF16()  ? 10
                       : from.isF64()  ? 11
                       : from.isBF16() ? 16
                                       : 0;
        if (!code || !isa<FloatType>(element))
          return op->emitOpError("fsdp-autodiff: only casts between float "
                                 "types have a gradient rule");
        give(0, bb.op<CastOp>(
                    operand(0).getType(), {g},
                    {bb.b.getNamedAttr("to", bb.b.getI64IntegerAttr(code))}));
        return success();
      })
      .Case<SumOp>([&](auto) {
        for (unsigned i = 0; i < op->getNumOperands(); ++i)
          give(i, g);
        return success();
      })
      .Case<ExpOp>([&](auto) {
        give(0, bb.mul(g, y, yt));
        return success();
      })
      .Case<ViewLikeOpInterface>([&](auto) {
        give(0, bb.reshape(g, typeOf(operand(0))));
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp t) {
        int64_t rank = typeOf(operand(0)).getRank();
        SmallVector<int64_t> perm = t.getPermOrDefault();
        SmallVector<int64_t> inverse(rank);
        for (int64_t i = 0; i < rank; ++i)
          inverse[perm[i]] = i;
        give(0, bb.transpose(g, inverse));
        return success();
      })
      .Case<MatMulOp>([&](MatMulOp) {
        // dA = g @ B^T, dB = A^T @ g, summed over broadcast batch dims. A
        // 1-D A is a [1, K] matrix and a 1-D B a [K, 1] one, as in numpy;
        // the product drops those dims, so g gets them back first.
        Value a = operand(0), b = operand(1);
        auto aType = typeOf(a), bType = typeOf(b);
        SmallVector<int64_t> gShape(typeOf(g).getShape());
        if (bType.getRank() == 1)
          gShape.push_back(1);
        if (aType.getRank() == 1)
          gShape.insert(gShape.end() - 1, 1);
        auto promote = [&](Value v, ArrayRef<int64_t> shape) {
          return bb.reshape(v, RankedTensorType::get(shape, element));
        };
        Value a2 =
            aType.getRank() == 1 ? promote(a, {1, aType.getDimSize(0)}) : a;
        Value b2 =
            bType.getRank() == 1 ? promote(b, {bType.getDimSize(0), 1}) : b;
        Value g2 = promote(g, gShape);
        if (active(a)) {
          SmallVector<int64_t> shape(gShape);
          shape.back() = typeOf(a2).getShape().back();
          Value d = bb.op<MatMulOp>(RankedTensorType::get(shape, element),
                                    {g2, bb.swapLast(b2)});
          give(0, bb.reshape(bb.sumTo(d, typeOf(a2)), aType));
        }
        if (active(b) && typeOf(b2).getRank() == 2 &&
            typeOf(a2).getRank() > 2) {
          // One B for every batch element (a Linear's weight): the batch
          // folds into the contraction, dB = A'^T g' with A' = [rows, K],
          // never a per-element [.., K, N] product summed afterwards.
          int64_t k = typeOf(a2).getShape().back(), n = gShape.back();
          int64_t rows = typeOf(a2).getNumElements() / std::max<int64_t>(k, 1);
          Value aRows = promote(a2, {rows, k});
          Value gRows = promote(g2, {rows, n});
          Value d = bb.op<MatMulOp>(RankedTensorType::get({k, n}, element),
                                    {bb.transpose(aRows, {1, 0}), gRows});
          give(1, bb.reshape(d, bType));
        } else if (active(b)) {
          SmallVector<int64_t> shape(gShape);
          shape[shape.size() - 2] = typeOf(b2).getShape().drop_back().back();
          Value d = bb.op<MatMulOp>(RankedTensorType::get(shape, element),
                                    {bb.swapLast(a2), g2});
          give(1, bb.reshape(bb.sumTo(d, typeOf(b2)), bType));
        }
        return success();
      })
      .Case<GemmOp>([&](GemmOp gemm) -> LogicalResult {
        // Y = alpha * op(A) op(B) + beta * C.
        double alpha = gemm.getAlpha().convertToDouble();
        Value ga = g;
        if (alpha != 1.0)
          ga = bb.mul(g, bb.scalar(alpha, element), yt);
        Value a = operand(0), b = operand(1);
        Value opA = gemm.getTransA() ? bb.transpose(a, {1, 0}) : a;
        Value opB = gemm.getTransB() ? bb.transpose(b, {1, 0}) : b;
        if (active(a)) { // d op(A) = g op(B)^T
          Value d =
              bb.op<MatMulOp>(typeOf(opA), {ga, bb.transpose(opB, {1, 0})});
          give(0, gemm.getTransA() ? bb.transpose(d, {1, 0}) : d);
        }
        if (active(b)) { // d op(B) = op(A)^T g
          Value d =
              bb.op<MatMulOp>(typeOf(opB), {bb.transpose(opA, {1, 0}), ga});
          give(1, gemm.getTransB() ? bb.transpose(d, {1, 0}) : d);
        }
        if (!isa<NoneType>(operand(2).getType()) && active(operand(2))) {
          double beta = gemm.getBeta().convertToDouble();
          give(2, beta == 1.0 ? g : bb.mul(g, bb.scalar(beta, element), yt));
        }
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](Operation *)
                                                        -> LogicalResult {
        // Broadcast g back over the reduced axes (divided by the count for
        // a mean; for a max, shared evenly by the maximal elements, as
        // torch's amax).
        auto in = typeOf(operand(0));
        SmallVector<int64_t> axes;
        if (auto mean = dyn_cast<ReduceMeanOp>(op)) {
          if (mean.getAxes())
            axes.assign(mean.getAxes()->begin(), mean.getAxes()->end());
        } else if (auto max = dyn_cast<ReduceMaxOp>(op)) {
          if (max.getAxes())
            axes.assign(max.getAxes()->begin(), max.getAxes()->end());
        } else {
          auto sum = cast<ReduceSumOp>(op);
          DenseIntElementsAttr attr;
          if (!isa<NoneType>(sum.getAxes().getType())) {
            auto constant = sum.getAxes().getDefiningOp<ConstantOp>();
            auto dense =
                constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue())
                         : nullptr;
            if (!dense)
              return op->emitOpError(
                  "fsdp-autodiff: ReduceSum axes must be constant");
            for (const APInt &v : dense.getValues<APInt>())
              axes.push_back(v.getSExtValue());
          }
        }
        if (axes.empty())
          for (int64_t i = 0; i < in.getRank(); ++i)
            axes.push_back(i);
        SmallVector<int64_t> kept(in.getShape());
        int64_t count = 1;
        for (int64_t &axis : axes) {
          if (axis < 0)
            axis += in.getRank();
          count *= in.getDimSize(axis);
          kept[axis] = 1;
        }
        auto keptType = RankedTensorType::get(kept, element);
        Value gk = bb.reshape(g, keptType);
        if (isa<ReduceMeanOp>(op))
          gk = bb.mul(gk, bb.scalar(1.0 / count, element), gk.getType());
        if (isa<ReduceMaxOp>(op)) {
          Value zero = bb.scalar(0, element);
          Value isMax = bb.op<EqualOp>(
              RankedTensorType::get(in.getShape(), bb.b.getI1Type()),
              {operand(0), bb.reshape(y, keptType)});
          Value ties = bb.reduce<ReduceSumOp>(
              bb.op<WhereOp>(in, {isMax, bb.scalar(1, element), zero}), axes);
          give(0, bb.op<WhereOp>(
                      in, {isMax, bb.op<DivOp>(keptType, {gk, ties}), zero}));
          return success();
        }
        give(0, bb.op<ExpandOp>(in, {gk, bb.ints(in.getShape())}));
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp softmax) {
        // dx = y * (g - sum(g * y, axis))
        int64_t axis = softmax.getAxis();
        if (axis < 0)
          axis += typeOf(y).getRank();
        SmallVector<int64_t> kept(typeOf(y).getShape());
        kept[axis] = 1;
        Value gy = bb.mul(g, y, yt);
        Value sum = bb.op<ReduceSumOp>(
            RankedTensorType::get(kept, element), {gy, bb.ints({axis})},
            {bb.b.getNamedAttr("keepdims", bb.b.getI64IntegerAttr(1))});
        give(0, bb.mul(y, bb.op<SubOp>(yt, {g, sum}), yt));
        return success();
      })
      .Case<SoftmaxCrossEntropyLossOp>([&](SoftmaxCrossEntropyLossOp loss)
                                           -> LogicalResult {
        if (active(loss.getLabels()))
          return op->emitOpError(
              "fsdp-autodiff: labels cannot be differentiated");
        if (active(loss.getWeights()))
          return op->emitOpError(
              "fsdp-autodiff: class weights cannot be differentiated");
        if (op->getNumResults() > 1 && !op->getResult(1).use_empty())
          return op->emitOpError(
              "fsdp-autodiff: SoftmaxCrossEntropyLoss's log_prob "
              "output has no gradient rule");
        SmallVector<NamedAttribute> attrs = {bb.b.getNamedAttr(
            "reduction", bb.b.getStringAttr(loss.getReduction()))};
        if (loss.getIgnoreIndex())
          attrs.push_back(bb.b.getNamedAttr(
              "ignore_index", bb.b.getI64IntegerAttr(*loss.getIgnoreIndex())));
        SmallVector<Value> operands = {loss.getScores(), loss.getLabels(), g};
        if (!isa<NoneType>(loss.getWeights().getType()))
          operands.push_back(loss.getWeights());
        give(0, bb.op<mlir::fsdp::SoftmaxCrossEntropyGradOp>(
                    loss.getScores().getType(), operands, attrs));
        return success();
      })
      .Case<GatherOp>([&](GatherOp gather) -> LogicalResult {
        if (active(gather.getIndices()))
          return op->emitOpError(
              "fsdp-autodiff: indices cannot be differentiated");
        int64_t axis = gather.getAxis();
        if (axis < 0)
          axis += typeOf(gather.getData()).getRank();
        FailureOr<Value> grad = withoutPaddingRow(
            gather,
            bb.op<mlir::fsdp::GatherGradOp>(
                gather.getData().getType(), {g, gather.getIndices()},
                {bb.b.getNamedAttr("axis", bb.b.getI64IntegerAttr(axis))}));
        if (failed(grad))
          return failure();
        give(0, *grad);
        return success();
      })
      .Case<LayerNormalizationOp>([&](LayerNormalizationOp norm) {
        // Recompute the statistics, then
        // dx = rstd * (gs - mean(gs) - xhat * mean(gs * xhat)), gs = g * scale.
        Value x = norm.getX(), scale = norm.getScale();
        int64_t rank = typeOf(x).getRank(), axis = norm.getAxis();
        if (axis < 0)
          axis += rank;
        SmallVector<int64_t> axes;
        for (int64_t i = axis; i < rank; ++i)
          axes.push_back(i);
        Type xt = x.getType();
        Value mean = bb.reduce<ReduceMeanOp>(x, axes);
        Value centered = bb.op<SubOp>(xt, {x, mean});
        Value var =
            bb.reduce<ReduceMeanOp>(bb.mul(centered, centered, xt), axes);
        Value eps = bb.scalar(norm.getEpsilon().convertToDouble(), element);
        Value rstd = bb.op<ReciprocalOp>(
            var.getType(),
            {bb.op<SqrtOp>(var.getType(),
                           {bb.op<AddOp>(var.getType(), {var, eps})})});
        Value xhat = bb.mul(centered, rstd, xt);
        if (active(x)) {
          Value gs = bb.mul(g, scale, xt);
          Value a = bb.reduce<ReduceMeanOp>(gs, axes);
          Value c = bb.reduce<ReduceMeanOp>(bb.mul(gs, xhat, xt), axes);
          Value inner = bb.op<SubOp>(
              xt, {bb.op<SubOp>(xt, {gs, a}), bb.mul(xhat, c, xt)});
          give(0, bb.mul(rstd, inner, xt));
        }
        if (active(scale))
          give(1, bb.mul(g, xhat, xt));
        if (!isa<NoneType>(norm.getB().getType()) && active(norm.getB()))
          give(2, g);
        return success();
      })
      .Case<WhereOp>([&](WhereOp where) {
        Value zero = bb.scalar(0, element);
        if (active(operand(1)))
          give(1, bb.op<WhereOp>(yt, {where.getCondition(), g, zero}));
        if (active(operand(2)))
          give(2, bb.op<WhereOp>(yt, {where.getCondition(), zero, g}));
        return success();
      })
      .Case<ConcatOp>([&](ConcatOp concat) {
        int64_t axis = concat.getAxis();
        int64_t rank = typeOf(y).getRank();
        if (axis < 0)
          axis += rank;
        int64_t offset = 0;
        for (auto [i, input] : llvm::enumerate(concat.getInputs())) {
          int64_t size = typeOf(input).getDimSize(axis);
          if (active(input))
            give(i,
                 bb.op<SliceOp>(input.getType(),
                                {g, bb.ints({offset}), bb.ints({offset + size}),
                                 bb.ints({axis}), bb.ints({1})}));
          offset += size;
        }
        return success();
      })
      .Case<SliceOp>([&](SliceOp slice) -> LogicalResult {
        // Per sliced axis, g goes back to the positions it was read from:
        // padded with zeros for step 1, scattered (fsdp.gather_grad with
        // the constant positions) for any other step.
        auto constants = [&](Value v) -> std::optional<SmallVector<int64_t>> {
          auto constant = v.getDefiningOp<ConstantOp>();
          auto dense = constant
                           ? dyn_cast<DenseIntElementsAttr>(constant.getValue())
                           : nullptr;
          if (!dense)
            return std::nullopt;
          SmallVector<int64_t> values;
          for (const APInt &value : dense.getValues<APInt>())
            values.push_back(value.getSExtValue());
          return values;
        };
        auto starts = constants(slice.getStarts());
        auto in = typeOf(slice.getData());
        int64_t rank = in.getRank();
        std::optional<SmallVector<int64_t>> axes = SmallVector<int64_t>();
        if (isa<NoneType>(slice.getAxes().getType()))
          for (int64_t i = 0;
               starts && i < static_cast<int64_t>(starts->size()); ++i)
            axes->push_back(i);
        else
          axes = constants(slice.getAxes());
        std::optional<SmallVector<int64_t>> steps;
        if (isa<NoneType>(slice.getSteps().getType()))
          steps = SmallVector<int64_t>(axes ? axes->size() : 0, 1);
        else
          steps = constants(slice.getSteps());
        if (!starts || !axes || !steps || axes->size() != starts->size() ||
            steps->size() != starts->size() || llvm::is_contained(*steps, 0))
          return op->emitOpError("fsdp-autodiff: only Slices with constant "
                                 "starts, axes and steps have a gradient rule");
        Value grad = g;
        for (auto [axisValue, startValue, step] :
             llvm::zip(*axes, *starts, *steps)) {
          int64_t axis = axisValue < 0 ? axisValue + rank : axisValue;
          int64_t dim = in.getDimSize(axis);
          int64_t size = typeOf(y).getDimSize(axis);
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
              RankedTensorType::get(shape, element), {grad, bb.ints(positions)},
              {bb.b.getNamedAttr("axis", bb.b.getI64IntegerAttr(axis))});
        }
        give(0, grad);
        return success();
      })
      .Case<ErfOp>([&](auto) { // g * 2/sqrt(pi) * exp(-x^2)
        Value x = operand(0);
        Value e = bb.op<ExpOp>(yt, {bb.op<NegOp>(yt, {bb.mul(x, x, yt)})});
        give(0, bb.mul(g, bb.mul(e, bb.scalar(1.1283791670955126, element), yt),
                       yt));
        return success();
      })
      .Case<PowOp>([&](PowOp pow) -> LogicalResult {
        auto constant = pow.getB().getDefiningOp<ConstantOp>();
        auto dense = constant
                         ? dyn_cast<DenseFPElementsAttr>(constant.getValue())
                         : nullptr;
        if (!dense || dense.getNumElements() != 1 || active(pow.getB()))
          return op->emitOpError("fsdp-autodiff: only Pow by a constant scalar "
                                 "has a gradient rule yet");
        double c = (*dense.getValues<APFloat>().begin()).convertToDouble();
        Value x = operand(0);
        Value d = c == 2.0
                      ? x
                      : bb.op<PowOp>(typeOf(x), {x, bb.scalar(c - 1, element)});
        give(0, bb.mul(g, bb.mul(d, bb.scalar(c, element), typeOf(x)), yt));
        return success();
      })
      .Case<SqrtOp>([&](auto) { // g / (2 y)
        give(0, bb.op<DivOp>(yt, {g, bb.mul(y, bb.scalar(2, element), yt)}));
        return success();
      })
      .Case<ReciprocalOp>([&](auto) { // -g y^2
        give(0, bb.op<NegOp>(yt, {bb.mul(g, bb.mul(y, y, yt), yt)}));
        return success();
      })
      .Case<ExpandOp>([&](auto) {
        give(0, g);
        return success();
      })
      .Case<LogSoftmaxOp>([&](LogSoftmaxOp softmax) { // g - exp(y) sum(g)
        int64_t axis = softmax.getAxis();
        if (axis < 0)
          axis += typeOf(y).getRank();
        Value sum = bb.reduce<ReduceSumOp>(g, {axis});
        give(0, bb.op<SubOp>(yt, {g, bb.mul(bb.op<ExpOp>(yt, {y}), sum, yt)}));
        return success();
      })
      .Case<ConvOp>([&](ConvOp conv) -> LogicalResult {
        if (conv.getAutoPad() != "NOTSET")
          return op->emitOpError("fsdp-autodiff: Conv with auto_pad has no "
                                 "gradient rule; export with explicit pads");
        SmallVector<NamedAttribute> window = {
            bb.b.getNamedAttr("strides", bb.b.getDenseI64ArrayAttr(
                                             conv.getStridesOrDefault())),
            bb.b.getNamedAttr(
                "pads", bb.b.getDenseI64ArrayAttr(conv.getPadsOrDefault())),
            bb.b.getNamedAttr("dilations", bb.b.getDenseI64ArrayAttr(
                                               conv.getDilationsOrDefault())),
            bb.b.getNamedAttr("group",
                              bb.b.getI64IntegerAttr(conv.getGroup()))};
        if (active(conv.getX()))
          give(0, bb.op<mlir::fsdp::ConvGradInputOp>(conv.getX().getType(),
                                                     {g, conv.getW()}, window));
        if (active(conv.getW()))
          give(1, bb.op<mlir::fsdp::ConvGradWeightOp>(
                      conv.getW().getType(), {conv.getX(), g}, window));
        if (!isa<NoneType>(conv.getB().getType()) && active(conv.getB())) {
          SmallVector<int64_t> axes = {0};
          for (int64_t i = 0; i < conv.getSpatialRank(); ++i)
            axes.push_back(2 + i);
          give(2, bb.reshape(bb.reduce<ReduceSumOp>(g, axes),
                             typeOf(conv.getB())));
        }
        return success();
      })
      .Case<MaxPoolOp, AveragePoolOp>([&](auto pool) -> LogicalResult {
        Value x = operand(0);
        if (typeOf(x).getRank() != 4 || pool.getAutoPad() != "NOTSET")
          return op->emitOpError("fsdp-autodiff: only 2-D pooling with "
                                 "explicit pads has a gradient rule");
        bool max = isa<MaxPoolOp>(op);
        if (max && pool.getStorageOrder() != 0)
          return op->emitOpError("fsdp-autodiff: MaxPool storage_order 1 has "
                                 "no gradient rule");
        auto b = bb.b;
        give(
            0,
            bb.op<mlir::fsdp::PoolGradOp>(
                x.getType(), {x, g},
                {b.getNamedAttr("mode",
                                b.getStringAttr(max ? "max" : "average")),
                 b.getNamedAttr("kernel_shape",
                                b.getDenseI64ArrayAttr(pool.getKernelShape())),
                 b.getNamedAttr("strides", b.getDenseI64ArrayAttr(
                                               pool.getStridesOrDefault())),
                 b.getNamedAttr(
                     "pads", b.getDenseI64ArrayAttr(pool.getPadsOrDefault())),
                 b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(
                                                 pool.getDilationsOrDefault())),
                 b.getNamedAttr("ceil_mode",
                                b.getI64IntegerAttr(pool.getCeilMode())),
                 b.getNamedAttr(
                     "count_include_pad",
                     b.getI64IntegerAttr(pool.getCountIncludePad()))}));
        return success();
      })
      .Case<GlobalAveragePoolOp>([&](auto) { // g / |spatial|, spread out
        auto in = typeOf(operand(0));
        int64_t count =
            in.getNumElements() / (in.getDimSize(0) * in.getDimSize(1));
        Value scaled = bb.mul(g, bb.scalar(1.0 / count, element), yt);
        give(0, bb.op<ExpandOp>(in, {scaled, bb.ints(in.getShape())}));
        return success();
      })
      .Case<mlir::fsdp::AttentionOp>(
          [&](mlir::fsdp::AttentionOp attention) -> LogicalResult {
            if (!attention.getLse())
              return op->emitOpError(
                  "fsdp-autodiff: fsdp.attention needs its lse result to be "
                  "differentiated");
            if (attention.getMask() && active(attention.getMask()))
              return op->emitOpError("fsdp-autodiff: fsdp.attention gives "
                                     "its mask no gradient, but the mask "
                                     "depends on a trainable parameter");
            auto grad = bb.b.create<mlir::fsdp::AttentionGradOp>(
                op->getLoc(),
                TypeRange{attention.getQuery().getType(),
                          attention.getKeyT().getType(),
                          attention.getValue().getType()},
                attention.getQuery(), attention.getKeyT(), attention.getValue(),
                attention.getMask(), attention.getOutput(), attention.getLse(),
                g, attention.getScaleAttr(), attention.getMaskKindAttr(),
                attention.getFillValueAttr());
            give(0, grad.getGradQuery());
            give(1, grad.getGradKeyT());
            give(2, grad.getGradValue());
            return success();
          })
      .Default([&](Operation *) {
        return op->emitOpError()
               << "fsdp-autodiff: no gradient rule for '"
               << op->getName().getStringRef()
               << "' on the path from a trainable parameter to the loss";
      });
}

LogicalResult Autodiff::run() {
  if (failed(attachLoss()))
    return failure();
  if (func.getNumResults() != 1)
    return func.emitError("fsdp-autodiff: @")
           << func.getSymName() << " must return one scalar loss, not "
           << func.getNumResults() << " values (export with a loss_fn)";
  auto lossType = dyn_cast<RankedTensorType>(func.getResultTypes()[0]);
  if (!lossType || lossType.getNumElements() != 1 ||
      !isa<FloatType>(lossType.getElementType()))
    return func.emitError("fsdp-autodiff: the loss must be a floating-point "
                          "scalar, not ")
           << func.getResultTypes()[0];
  if (failed(prepare()))
    return failure();

  // Trainable parameters, in declaration order, and their reads.
  SmallVector<mlir::fsdp::ParamOp> params;
  for (auto param : module.getOps<mlir::fsdp::ParamOp>())
    if (!param.getFrozen())
      params.push_back(param);
  llvm::StringMap<SmallVector<Value>> reads;
  Block &body = func.getBody().front();
  for (Operation &op : body) {
    if (auto get = dyn_cast<mlir::fsdp::GetParamOp>(op)) {
      auto param = module.lookupSymbol<mlir::fsdp::ParamOp>(get.getParamAttr());
      if (param && !param.getFrozen()) {
        activeValues.insert(get.getResult());
        reads[get.getParam()].push_back(get.getResult());
      }
      continue;
    }
    if (llvm::any_of(op.getOperands(), [&](Value v) { return active(v); }))
      for (Value result : op.getResults())
        if (auto type = dyn_cast<RankedTensorType>(result.getType());
            type && isa<FloatType>(type.getElementType()))
          activeValues.insert(result); // integers and masks carry none
  }

  if (options.fuseAttention)
    fuseAttention();

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  OpBuilder b(ret);
  builder = &b;
  OnnxBuilder bb(b, func.getLoc());
  if (active(loss))
    cotangents[loss] =
        bb.reshape(bb.scalar(1.0, lossType.getElementType()), lossType);
  // The reverse sweep over the forward ops (not the ones it adds).
  SmallVector<Operation *> forward;
  for (Operation &op : body)
    if (&op != ret.getOperation())
      forward.push_back(&op);
  // Activation checkpointing: each non-root FSDP unit's forward ops, run
  // again at the start of the unit's backward, which then reads the copies;
  // the originals' activations die with the forward.
  llvm::StringMap<SmallVector<Operation *>> unitOps;
  auto unitOf = [&](Operation *op) -> StringRef {
    auto unit = op->getAttrOfType<StringAttr>("fsdp.unit");
    return unit ? unit.getValue() : StringRef();
  };
  FailureOr<llvm::StringSet<>> checkpointed = checkpointedUnits();
  if (failed(checkpointed))
    return failure();
  for (Operation *op : forward)
    if (checkpointed->contains(unitOf(op)))
      unitOps[unitOf(op)].push_back(op);
  llvm::StringMap<IRMapping> recomputed;
  SmallVector<Operation *> copies;

  for (Operation *op : llvm::reverse(forward)) {
    if (isa<mlir::fsdp::GetParamOp>(op) || op->getNumResults() == 0)
      continue;
    if (auto split = dyn_cast<SplitOp>(op)) {
      // The pieces' cotangents (zeros where a piece has none), concatenated.
      if (!active(split.getInput()) ||
          llvm::none_of(split.getResults(),
                        [&](Value r) { return cotangents.count(r); }))
        continue;
      OnnxBuilder sb(b, op->getLoc());
      SmallVector<Value> pieces;
      for (Value piece : split.getResults()) {
        Value c = cotangents.lookup(piece);
        pieces.push_back(c ? c : sb.zeros(typeOf(piece)));
      }
      int64_t axis = split.getAxis();
      if (axis < 0)
        axis += typeOf(split.getInput()).getRank();
      accumulate(
          split.getInput(),
          sb.op<ConcatOp>(split.getInput().getType(), pieces,
                          {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))}));
      continue;
    }
    Value y = op->getResult(0);
    auto it = cotangents.find(y);
    if (it == cotangents.end() || !active(y))
      continue;
    for (Value other : op->getResults().drop_front())
      if (!isa<NoneType>(other.getType()) && !other.use_empty() &&
          active(other))
        return op->emitOpError("fsdp-autodiff: ops whose secondary results are "
                               "used have no gradient rule yet");
    IRMapping *copy = nullptr;
    if (unitOps.count(unitOf(op))) {
      auto [entry, fresh] = recomputed.try_emplace(unitOf(op));
      copy = &entry->second;
      if (fresh)
        for (Operation *original : unitOps[unitOf(op)])
          copies.push_back(b.clone(*original, *copy));
    }
    Operation *last = ret->getPrevNode();
    if (failed(backward(op, it->second)))
      return failure();
    if (copy) // the rule's ops read the recomputed values
      for (Operation *n = last->getNextNode(); n != ret.getOperation();
           n = n->getNextNode())
        for (OpOperand &use : n->getOpOperands())
          if (Value again = copy->lookupOrNull(use.get()))
            use.set(again);
  }
  // Recomputed ops no backward rule reads.
  for (Operation *again : llvm::reverse(copies))
    if (again->use_empty())
      again->erase();

  // One gradient per trainable parameter: the sum over its reads.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Type> types(func.getResultTypes());
  for (mlir::fsdp::ParamOp param : params) {
    Value grad;
    for (Value read : reads.lookup(param.getSymName()))
      if (Value g = cotangents.lookup(read))
        grad = grad ? bb.add(grad, g) : g;
    auto type = cast<RankedTensorType>(param.getType());
    if (!grad)
      grad = bb.zeros(type);
    results.push_back(grad);
    types.push_back(type);
  }
  SmallVector<DictionaryAttr> resultAttrs = {func.getResultAttrDict(0)};
  if (!resultAttrs[0])
    resultAttrs[0] = b.getDictionaryAttr({});
  for (mlir::fsdp::ParamOp param : params)
    resultAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("fsdp.grad_of",
                        FlatSymbolRefAttr::get(param.getSymNameAttr())),
         b.getNamedAttr("fsdp.name",
                        b.getStringAttr("grad." + param.getSymName()))}));
  // Then the buffers' new values (BatchNorm's running statistics).
  for (auto [buffer, value] : updates) {
    results.push_back(value);
    types.push_back(value.getType());
    resultAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("fsdp.update_of", buffer),
         b.getNamedAttr("fsdp.name",
                        b.getStringAttr("update." + buffer.getValue()))}));
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  func.setFunctionType(
      FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

/// torch's embedding backward skips the positions whose index is the
/// module's padding_idx, so the lookup never updates that row (a tied LM
/// head still does). ONNX's Gather has no such attribute: the frontend
/// records every nn.Embedding's padding_idx in its metadata ("embeddings"),
/// and the gradient an embedding's own lookup gives its weight is multiplied
/// by a mask that is 0 on that row. A Gather of the same weight from another
/// module's scope (`self.emb.weight[ids]`) keeps its whole gradient, as in
/// torch.
FailureOr<Value> Autodiff::withoutPaddingRow(GatherOp gather, Value grad) {
  if (!paddingRows) {
    paddingRows.emplace();
    auto json = module->getAttrOfType<StringAttr>("fsdp.torch_metadata");
    if (json) {
      if (std::string why = mlir::fsdp::checkJSONBounds(json.getValue());
          !why.empty())
        return module.emitError("fsdp-autodiff: fsdp.torch_metadata ") << why;
      llvm::Expected<llvm::json::Value> parsed =
          llvm::json::parse(json.getValue());
      if (!parsed)
        return module.emitError("fsdp-autodiff: fsdp.torch_metadata is not "
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
              "fsdp-autodiff: fsdp.torch_metadata: an 'embeddings' entry "
              "needs 'module', 'weight' and an integer 'padding_idx'");
        (*paddingRows)[*weight] = {name->str(), *row};
      }
    }
  }
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
    return gather.emitOpError("fsdp-autodiff: padding_idx ")
           << row << " of embedding '" << embedding << "' is outside its "
           << rows << " rows";
  SmallVector<int64_t> maskShape(type.getRank(), 1);
  maskShape[0] = rows;
  auto maskType = RankedTensorType::get(maskShape, type.getElementType());
  SmallVector<APFloat> values(
      rows, APFloat::getOne(
                cast<FloatType>(type.getElementType()).getFloatSemantics()));
  values[row] = APFloat::getZero(values[row].getSemantics());
  OnnxBuilder bb(*builder, gather.getLoc());
  Value mask = builder->create<ConstantOp>(
      gather.getLoc(), DenseElementsAttr::get(maskType, values));
  return bb.mul(grad, mask, type);
}

/// The non-root FSDP units whose forward is recomputed in their backward:
/// all of them for checkpoint-units, else those the checkpoint-* selectors
/// pick (or-composed, as auto-wrap's policies): the unit module's class, its
/// parameter count, or its FQN.
FailureOr<llvm::StringSet<>> Autodiff::checkpointedUnits() {
  llvm::StringSet<> chosen;
  bool select = !options.checkpointClasses.empty() ||
                options.checkpointMinNumParams > 0 ||
                !options.checkpointPattern.empty();
  if (!options.checkpointUnits && !select)
    return chosen;
  auto units = module->getAttrOfType<ArrayAttr>("fsdp.units");
  if (!units || units.size() < 2)
    return func.emitError("fsdp-autodiff: activation checkpointing needs "
                          "non-root FSDP units; run --fsdp-auto-wrap first");
  std::optional<llvm::Regex> regex;
  if (!options.checkpointPattern.empty()) {
    regex.emplace("^(" + options.checkpointPattern + ")$");
    std::string error;
    if (!regex->isValid(error))
      return func.emitError("fsdp-autodiff: checkpoint-pattern '")
             << options.checkpointPattern << "' is not a regex: " << error;
  }
  FailureOr<SmallVector<mlir::fsdp::ModuleAttr>> tree =
      mlir::fsdp::getModuleTree(module);
  if (failed(tree))
    return failure();
  llvm::StringMap<StringRef> classOf;
  for (mlir::fsdp::ModuleAttr m : *tree)
    classOf[m.getFqn()] = m.getClassName();
  SmallVector<std::string> seen;
  for (auto unit : units.getAsRange<mlir::fsdp::WrapUnitAttr>()) {
    StringRef fqn = unit.getModule();
    if (fqn.empty())
      continue; // the root's activations are the step's own
    StringRef className = classOf.lookup(fqn);
    int64_t numel = 0;
    for (auto ref : unit.getParams().getAsRange<FlatSymbolRefAttr>())
      if (auto param = module.lookupSymbol<mlir::fsdp::ParamOp>(ref))
        numel += param.getTensorType().getNumElements();
    seen.push_back((fqn + " (" + className + ", " + Twine(numel) + ")").str());
    if (options.checkpointUnits ||
        llvm::is_contained(options.checkpointClasses, className) ||
        (options.checkpointMinNumParams > 0 &&
         numel >= options.checkpointMinNumParams) ||
        (regex && regex->match(fqn)))
      chosen.insert(fqn);
  }
  if (chosen.empty())
    return func.emitError("fsdp-autodiff: the checkpoint selectors match no "
                          "non-root FSDP unit; units (class, parameters): ")
           << llvm::join(seen, ", ");
  return chosen;
}

struct AutodiffPass : mlir::fsdp::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("fsdp-autodiff: the module has no @forward function");
      return signalPassFailure();
    }
    mlir::fsdp::AutodiffOptions options;
    options.loss = loss;
    options.labels = labels;
    options.logits = logits;
    options.ignoreIndex = ignoreIndex;
    options.checkpointUnits = checkpointUnits;
    options.checkpointClasses = checkpointClasses;
    options.checkpointMinNumParams = checkpointMinNumParams;
    options.checkpointPattern = checkpointPattern;
    options.fuseAttention = fuseAttention;
    if (failed(Autodiff(func, module, std::move(options)).run()))
      signalPassFailure();
  }
};

} // namespace
