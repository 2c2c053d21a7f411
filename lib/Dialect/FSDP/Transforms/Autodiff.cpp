//===- Autodiff.cpp - Reverse-mode gradients of the loss ------------------===//
//
/// The classic reverse sweep on SSA: values that depend on a trainable
/// parameter are "active"; walking the forward ops backwards, each active
/// op turns the cotangent of its results into cotangents of its active
/// operands (summed when a value has several uses). That turn is the op's
/// GradientOpInterface rule (Gradients/, one function per op); this file
/// owns the sweep: activity, order, accumulation and checkpointing.
/// Backward ops are built from the same onnx ops as the forward, so every
/// later pass (fuse, lowering, memory planning) and the runtime treat them
/// like any other.
//
//===----------------------------------------------------------------------===//

#include "AttentionChain.h"
#include "Gradients/Gradients.h"
#include "OnnxBuilder.h"

#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/GradientOpInterface.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOpTable.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_AUTODIFF
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using mlir::fsdp::FSDPDialect;
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

/// One function's differentiation. The sweep is here; each op's rule is
/// its GradientOpInterface (Gradients/), which reaches the sweep's state
/// through this class as its GradientContext.
class Autodiff final : public mlir::fsdp::GradientContext {
public:
  Autodiff(func::FuncOp func, ModuleOp module,
           mlir::fsdp::AutodiffOptions options)
      : func(func), module(module), options(std::move(options)) {}

  LogicalResult run();

  Value getCotangent(Value value) const override {
    return cotangents.lookup(value);
  }
  bool isActive(Value value) const override {
    return activeValues.contains(value);
  }
  void accumulate(Value value, Value g) override {
    auto [it, inserted] = cotangents.try_emplace(value, g);
    if (!inserted) {
      OnnxBuilder bb(*builder, value.getLoc());
      it->second = bb.add(it->second, g);
    }
  }
  OpBuilder &getBuilder() override { return *builder; }
  bool fuseGradients() const override { return options.fuseGradients; }

private:
  bool active(Value value) const { return isActive(value); }
  LogicalResult attachLoss();
  LogicalResult prepare();
  LogicalResult prepareDropout(DropoutOp dropout);
  FailureOr<llvm::StringSet<>> checkpointedUnits();
  LogicalResult decomposeBatchNorm(BatchNormalizationOp norm);
  LogicalResult fuseBatchNorm(BatchNormalizationOp norm);
  void fuseAttention();
  void keepCrossEntropyLse();
  void countBatch(BatchNormalizationOp norm, OnnxBuilder &bb);
  Value current(Value running);
  void recordUpdate(FlatSymbolRefAttr buffer, Value next);
  SmallVector<mlir::fsdp::ParamOp>
  markActive(llvm::StringMap<SmallVector<Value>> &reads);
  LogicalResult differentiate(Operation *op);
  LogicalResult sweep(func::ReturnOp ret);
  void returnGradients(func::ReturnOp ret, ArrayRef<mlir::fsdp::ParamOp> params,
                       const llvm::StringMap<SmallVector<Value>> &reads);

  func::FuncOp func;
  ModuleOp module;
  mlir::fsdp::AutodiffOptions options;
  OpBuilder *builder = nullptr;
  DenseSet<Value> activeValues;
  DenseMap<Value, Value> cotangents;
  /// New values of buffers (BatchNorm's running statistics), one per
  /// buffer (its last), in the order of their first update.
  SmallVector<std::pair<FlatSymbolRefAttr, Value>> updates;
};

/// A buffer's value as the step has it so far: `running` (an
/// fsdp.get_buffer) or, once a BatchNorm updated that buffer, the new
/// value. A module called twice in a forward updates its statistics twice,
/// in order, as torch's does: the second call starts from the first's.
Value Autodiff::current(Value running) {
  if (auto get = running.getDefiningOp<mlir::fsdp::GetBufferOp>())
    for (auto &[buffer, value] : updates)
      if (buffer == get.getBufferAttr())
        return value;
  return running;
}

/// `next` is `buffer`'s new value: it replaces an earlier update's.
void Autodiff::recordUpdate(FlatSymbolRefAttr buffer, Value next) {
  for (auto &[updated, value] : updates)
    if (updated == buffer) {
      value = next;
      return;
    }
  updates.emplace_back(buffer, next);
}

/// `--loss=cross-entropy`: the model returns logits [..., classes]; the
/// step takes labels [...] as a new input and returns the mean softmax
/// cross-entropy over every position (leading dimensions flattened, as
/// `F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))`).
LogicalResult Autodiff::attachLoss() {
  if (options.loss.empty())
    return success();
  if (options.loss != "cross-entropy")
    return func.emitError("unknown loss '")
           << options.loss << "' (supported: cross-entropy)";
  auto resultName = [&](unsigned i) {
    auto name = func.getResultAttrOfType<StringAttr>(
        i, FSDPDialect::NameAttrHelper::getNameStr());
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
    return func.emitError()
           << (options.logits.empty()
                   ? "the model returns " +
                         std::to_string(func.getNumResults()) + " values (" +
                         names + "); name the logits with logits=NAME"
                   : "no result is named '" + options.logits +
                         "' (results: " + names + ")");
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttrOfType<StringAttr>(
            i, FSDPDialect::NameAttrHelper::getNameStr()))
      if (name.getValue() == options.labels)
        return emitError(func.getArgument(i).getLoc())
               << "the model already has an input named '" << options.labels
               << "'; choose another with labels=NAME";
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value logits = ret.getOperand(*index);
  auto type = dyn_cast<RankedTensorType>(logits.getType());
  if (!type || type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
    return func.emitError("cross-entropy needs floating-point "
                          "logits [..., classes], not ")
           << logits.getType() << " ('" << resultName(*index) << "')";

  OpBuilder b(ret);
  MLIRContext *ctx = func.getContext();
  auto labelType =
      RankedTensorType::get(type.getShape().drop_back(), b.getI64Type());
  unsigned argIndex = func.getNumArguments();
  func.insertArgument(argIndex, labelType,
                      b.getDictionaryAttr({b.getNamedAttr(
                          FSDPDialect::NameAttrHelper::getNameStr(),
                          b.getStringAttr(options.labels))}),
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
  func.setResultAttr(0, FSDPDialect::NameAttrHelper::getNameStr(),
                     b.getStringAttr("loss"));
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
    return norm.emitOpError("BatchNormalization input must be "
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
      Value next = bb.add(
          bb.mul(current(running), bb.scalar(momentum, element), type), fresh);
      if (!isa<NoneType>(result.getType()))
        result.replaceAllUsesWith(next);
      if (auto get = running.getDefiningOp<mlir::fsdp::GetBufferOp>())
        recordUpdate(get.getBufferAttr(), next);
    };
    update(norm.getInputMean(), mean, 1.0, norm.getRunningMean());
    update(norm.getInputVar(), var, unbias, norm.getRunningVar());
    countBatch(norm, bb);
  }
  norm.erase();
  return success();
}

/// A training-mode BatchNorm as one fsdp.batch_norm_train (differentiated
/// by fsdp.batch_norm_grad): its output, the batch's saved statistics and
/// the running statistics' new values, the same update as the decomposed
/// form's.
LogicalResult Autodiff::fuseBatchNorm(BatchNormalizationOp norm) {
  Value x = norm.getX();
  if (typeOf(x).getRank() < 2)
    return norm.emitOpError("fsdp-autodiff: BatchNormalization input must be "
                            "[N, C, ...]");
  OpBuilder b(norm);
  OnnxBuilder bb(b, norm.getLoc());
  Type meanType = norm.getInputMean().getType(),
       varType = norm.getInputVar().getType();
  auto fused = b.create<mlir::fsdp::BatchNormTrainOp>(
      norm.getLoc(),
      TypeRange{x.getType(), meanType, varType, meanType, varType}, x,
      norm.getScale(), norm.getB(), current(norm.getInputMean()),
      current(norm.getInputVar()),
      b.getF32FloatAttr(norm.getEpsilon().convertToDouble()),
      b.getF32FloatAttr(norm.getMomentum().convertToDouble()));
  norm.getY().replaceAllUsesWith(fused.getOutput());
  auto update = [&](Value running, Value next, Value result) {
    if (!isa<NoneType>(result.getType()))
      result.replaceAllUsesWith(next);
    if (auto get = running.getDefiningOp<mlir::fsdp::GetBufferOp>())
      recordUpdate(get.getBufferAttr(), next);
  };
  update(norm.getInputMean(), fused.getRunningMeanOut(), norm.getRunningMean());
  update(norm.getInputVar(), fused.getRunningVarOut(), norm.getRunningVar());
  countBatch(norm, bb);
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
  Value now = current(
      bb.b.create<mlir::fsdp::GetBufferOp>(norm.getLoc(), type, symbol));
  Value one = bb.b.create<ConstantOp>(
      norm.getLoc(), DenseElementsAttr::get(type, static_cast<int64_t>(1)));
  recordUpdate(symbol, bb.add(now, one));
}

/// Rewrites what trains differently from how it runs: BatchNorm (fused in
/// training unless fuse-batch-norm=false, else decomposed; see above) and
/// Dropout (removed where it drops nothing; see prepareDropout).
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
      bool fuse = options.fuseBatchNorm && norm.getTrainingMode() != 0;
      if (failed(fuse ? fuseBatchNorm(norm) : decomposeBatchNorm(norm)))
        return failure();
      for (Operation *added = before ? before->getNextNode()
                                     : &func.getBody().front().front();
           added != after; added = added->getNextNode())
        for (NamedAttribute mark : marks)
          added->setAttr(mark.getName(), mark.getValue());
    } else if (auto dropout = dyn_cast<DropoutOp>(op)) {
      if (failed(prepareDropout(dropout)))
        return failure();
    }
  }
  mlir::fsdp::numberRandomOps(func);
  return success();
}

/// A Dropout that drops nothing (ratio 0, or not training) goes; one that
/// drops stays, with its mask as a result: its gradient rule reads it
/// (Gradients/Elementwise.cpp).
LogicalResult Autodiff::prepareDropout(DropoutOp dropout) {
  std::optional<double> training =
      isa<NoneType>(dropout.getTrainingMode().getType())
          ? 0.0
          : constantScalar(dropout.getTrainingMode());
  std::optional<double> ratio = isa<NoneType>(dropout.getRatio().getType())
                                    ? 0.5
                                    : constantScalar(dropout.getRatio());
  if (!training)
    return dropout.emitOpError("training_mode must be a constant (the plan "
                               "runs in one mode)");
  if (*training != 0 && !ratio)
    return dropout.emitOpError("ratio must be a constant");
  OpBuilder b(dropout);
  Value mask = dropout.getMask();
  if (*training == 0 || *ratio == 0) {
    if (!isa<NoneType>(mask.getType()) && !mask.use_empty())
      mask.replaceAllUsesWith(b.create<ConstantOp>(
          dropout.getLoc(), DenseElementsAttr::get(typeOf(mask), true)));
    dropout.getOutput().replaceAllUsesWith(dropout.getData());
    dropout.erase();
    return success();
  }
  if (!isa<NoneType>(mask.getType()))
    return success();
  auto maskType = RankedTensorType::get(typeOf(dropout.getData()).getShape(),
                                        b.getI1Type());
  auto withMask = b.create<DropoutOp>(
      dropout.getLoc(), TypeRange{dropout.getOutput().getType(), maskType},
      dropout->getOperands(), dropout->getAttrs());
  dropout.getOutput().replaceAllUsesWith(withMask.getOutput());
  dropout.erase();
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
    SmallVector<Value> heads = {chain->q, chain->kt, chain->v};
    mlir::fsdp::detail::makeCausal(*chain);
    // The head split's transposes and the merge's go into the fused op (and
    // so never into the backward); without them it stays head-first.
    mlir::fsdp::detail::foldHeadTransposes(*chain, why);
    OpBuilder b(root);
    auto attention =
        mlir::fsdp::detail::buildAttention(b, *chain, /*withLse=*/true);
    // The fused op belongs to the chain's module and FSDP unit (activation
    // checkpointing recomputes it with the unit).
    for (StringRef name : {"fsdp.module", "fsdp.unit"})
      if (Attribute mark = root->getAttr(name))
        attention->setAttr(name, mark);
    SmallVector<Operation *> replaced(chain->ops);
    if (chain->headMerge)
      replaced.insert(replaced.begin(), chain->headMerge);
    replaced.front()->getResult(0).replaceAllUsesWith(attention.getOutput());
    activeValues.insert(attention.getOutput());
    for (Operation *op : replaced) {
      for (Value result : op->getResults())
        activeValues.erase(result);
      op->erase();
    }
    // A causal mask's constant computation and folded head transposes have
    // no reader left. The work list holds ops, each once (an op feeding
    // another through two operands must not be visited after it is
    // erased).
    llvm::SetVector<Operation *> dead;
    if (oldMask && !chain->mask)
      if (Operation *def = oldMask.getDefiningOp())
        dead.insert(def);
    if (chain->headMerge)
      for (Value head : heads)
        if (Operation *def = head.getDefiningOp())
          dead.insert(def);
    while (!dead.empty()) {
      Operation *def = dead.pop_back_val();
      if (!def->use_empty() || !isMemoryEffectFree(def))
        continue;
      for (Value operand : def->getOperands())
        if (Operation *producer = operand.getDefiningOp())
          dead.insert(producer);
      for (Value result : def->getResults())
        activeValues.erase(result);
      def->erase();
    }
  }
}

/// Differentiated cross-entropies become fsdp.softmax_cross_entropy, whose
/// per-position log-sum-exp (one f32 a position, computed by the forward
/// anyway) the gradient reads instead of recomputing each position's
/// maximum and sum of exponentials: one pass over the scores in the
/// backward, which matters for a large vocabulary. Runs after the activity
/// analysis, as fuseAttention; a loss whose log_prob is used stays (its
/// rule refuses it).
void Autodiff::keepCrossEntropyLse() {
  SmallVector<SoftmaxCrossEntropyLossOp> losses;
  for (Operation &op : func.getBody().front())
    if (auto loss = dyn_cast<SoftmaxCrossEntropyLossOp>(op);
        loss && active(loss.getOutput()) && loss.getLogProb().use_empty())
      losses.push_back(loss);
  for (SoftmaxCrossEntropyLossOp loss : losses) {
    OpBuilder b(loss);
    auto lseType = RankedTensorType::get(typeOf(loss.getLabels()).getShape(),
                                         b.getF32Type());
    Value weights = loss.getWeights();
    auto fused = b.create<mlir::fsdp::SoftmaxCrossEntropyOp>(
        loss.getLoc(), TypeRange{loss.getOutput().getType(), lseType},
        loss.getScores(), loss.getLabels(),
        isa<NoneType>(weights.getType()) ? Value() : weights,
        b.getStringAttr(loss.getReduction()), loss.getIgnoreIndexAttr());
    // Its module and FSDP unit, for activation checkpointing.
    for (StringRef name : {"fsdp.module", "fsdp.unit"})
      if (Attribute mark = loss->getAttr(name))
        fused->setAttr(name, mark);
    loss.getOutput().replaceAllUsesWith(fused.getLoss());
    activeValues.erase(loss.getOutput());
    activeValues.insert(fused.getLoss());
    loss.erase();
  }
}

LogicalResult Autodiff::run() {
  if (options.fuseGradients) {
    // GELU, SiLU and RMSNorm as one op each, whose gradient is one kernel;
    // first, while nothing holds on to the forward's values. The chains
    // end in a Mul; the driver starts from those alone (and erases the
    // chains' ops that become dead), leaving the rest of the graph as it
    // is.
    SmallVector<Operation *> muls;
    func.walk([&](MulOp mul) { muls.push_back(mul); });
    RewritePatternSet chains(func.getContext());
    mlir::fsdp::detail::addTrainableChains(chains);
    GreedyRewriteConfig config;
    config.strictMode = GreedyRewriteStrictness::AnyOp;
    if (failed(applyOpPatternsAndFold(muls, std::move(chains), config)))
      return func.emitError("forming the fused activations and norms did "
                            "not converge");
  }
  if (failed(attachLoss()))
    return failure();
  if (func.getNumResults() != 1)
    return func.emitError("@")
           << func.getSymName() << " must return one scalar loss, not "
           << func.getNumResults() << " values (export with a loss_fn)";
  auto lossType = dyn_cast<RankedTensorType>(func.getResultTypes()[0]);
  if (!lossType || lossType.getNumElements() != 1 ||
      !isa<FloatType>(lossType.getElementType()))
    return func.emitError("the loss must be a floating-point "
                          "scalar, not ")
           << func.getResultTypes()[0];
  if (failed(prepare()))
    return failure();
  llvm::StringMap<SmallVector<Value>> reads;
  SmallVector<mlir::fsdp::ParamOp> params = markActive(reads);
  if (options.fuseAttention)
    fuseAttention();
  keepCrossEntropyLse();

  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(ret);
  builder = &b;
  Value loss = ret.getOperand(0);
  if (active(loss)) {
    OnnxBuilder bb(b, func.getLoc());
    cotangents[loss] =
        bb.reshape(bb.scalar(1.0, lossType.getElementType()), lossType);
  }
  if (failed(sweep(ret)))
    return failure();
  returnGradients(ret, params, reads);
  return success();
}

/// Whether the op table says `op`'s results carry no gradient (random
/// numbers, Hardmax; the integer and boolean results are never active).
static bool carriesNoGradient(Operation *op) {
  if (op->getName().getDialectNamespace() != "onnx")
    return false;
  const OpSupport *row = lookupOpSupport(op->getName().stripDialect());
  return row && row->gradient == OpGradient::NotDifferentiable;
}

/// The trainable parameters, in declaration order. Their reads (collected
/// in `reads`) are active, and so is every float value computed from an
/// active one (integers and masks carry no cotangent), unless the op table
/// says the op's results carry none (a RandomUniformLike of an activation
/// is a constant of the step: its numbers do not depend on the values).
SmallVector<mlir::fsdp::ParamOp>
Autodiff::markActive(llvm::StringMap<SmallVector<Value>> &reads) {
  SmallVector<mlir::fsdp::ParamOp> params;
  for (auto param : module.getOps<mlir::fsdp::ParamOp>())
    if (!param.getFrozen())
      params.push_back(param);
  for (Operation &op : func.getBody().front()) {
    if (auto get = dyn_cast<mlir::fsdp::GetParamOp>(op)) {
      auto param = module.lookupSymbol<mlir::fsdp::ParamOp>(get.getParamAttr());
      if (param && !param.getFrozen()) {
        activeValues.insert(get.getResult());
        reads[get.getParam()].push_back(get.getResult());
      }
      continue;
    }
    if (!carriesNoGradient(&op) &&
        llvm::any_of(op.getOperands(), [&](Value v) { return active(v); }))
      for (Value result : op.getResults()) {
        // BatchNorm's running statistics are updated as torch updates them,
        // under no_grad: a second call of the module reads them, no loss.
        auto norm = dyn_cast<mlir::fsdp::BatchNormTrainOp>(op);
        if (norm && (result == norm.getRunningMeanOut() ||
                     result == norm.getRunningVarOut()))
          continue;
        if (auto type = dyn_cast<RankedTensorType>(result.getType());
            type && isa<FloatType>(type.getElementType()))
          activeValues.insert(result);
      }
  }
  return params;
}

/// Whether the sweep runs `op`'s rule: when its first result has a
/// cotangent (or any result, for a rule that differentiates every result).
/// Fails for an op whose other results are active and used, which no such
/// rule reads.
FailureOr<bool> reached(Operation *op, const Autodiff &state) {
  auto rule = dyn_cast<mlir::fsdp::GradientOpInterface>(op);
  if (rule && rule.differentiatesEveryResult())
    return llvm::any_of(op->getResults(),
                        [&](Value r) { return bool(state.getCotangent(r)); });
  Value y = op->getResult(0);
  if (!state.getCotangent(y) || !state.isActive(y))
    return false;
  for (Value other : op->getResults().drop_front())
    if (!isa<NoneType>(other.getType()) && !other.use_empty() &&
        state.isActive(other))
      return op->emitOpError("ops whose secondary results are "
                             "used have no gradient rule yet");
  return true;
}

/// Builds `op`'s rule before the return.
LogicalResult Autodiff::differentiate(Operation *op) {
  auto rule = dyn_cast<mlir::fsdp::GradientOpInterface>(op);
  if (!rule)
    return op->emitOpError()
           << "no gradient rule for '" << op->getName().getStringRef()
           << "' on the path from a trainable parameter to the loss";
  return rule.backward(*this);
}

/// The reverse sweep over the forward ops (not the ones it adds), each op's
/// rule turning its results' cotangents into its operands'.
LogicalResult Autodiff::sweep(func::ReturnOp ret) {
  SmallVector<Operation *> forward;
  for (Operation &op : func.getBody().front())
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
    FailureOr<bool> differentiated = reached(op, *this);
    if (failed(differentiated))
      return failure();
    if (!*differentiated)
      continue;
    IRMapping *copy = nullptr;
    if (unitOps.count(unitOf(op))) {
      auto [entry, fresh] = recomputed.try_emplace(unitOf(op));
      copy = &entry->second;
      if (fresh)
        for (Operation *original : unitOps[unitOf(op)])
          copies.push_back(builder->clone(*original, *copy));
    }
    Operation *last = ret->getPrevNode();
    if (failed(differentiate(op)))
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
  return success();
}

/// The function returns the loss, one gradient per trainable parameter (the
/// sum over its reads) and then the buffers' new values.
void Autodiff::returnGradients(
    func::ReturnOp ret, ArrayRef<mlir::fsdp::ParamOp> params,
    const llvm::StringMap<SmallVector<Value>> &reads) {
  OpBuilder &b = *builder;
  OnnxBuilder bb(b, func.getLoc());
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
        {b.getNamedAttr(FSDPDialect::GradOfAttrHelper::getNameStr(),
                        FlatSymbolRefAttr::get(param.getSymNameAttr())),
         b.getNamedAttr(FSDPDialect::NameAttrHelper::getNameStr(),
                        b.getStringAttr("grad." + param.getSymName()))}));
  for (auto [buffer, value] : updates) {
    results.push_back(value);
    types.push_back(value.getType());
    resultAttrs.push_back(b.getDictionaryAttr(
        {b.getNamedAttr(FSDPDialect::UpdateOfAttrHelper::getNameStr(), buffer),
         b.getNamedAttr(FSDPDialect::NameAttrHelper::getNameStr(),
                        b.getStringAttr("update." + buffer.getValue()))}));
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  func.setFunctionType(
      FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
  func.setAllResultAttrs(resultAttrs);
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
  auto units = module->getAttrOfType<ArrayAttr>(
      FSDPDialect::UnitsAttrHelper::getNameStr());
  if (!units || units.size() < 2)
    return func.emitError("activation checkpointing needs "
                          "non-root FSDP units; run --fsdp-auto-wrap first");
  std::optional<llvm::Regex> regex;
  if (!options.checkpointPattern.empty()) {
    regex.emplace("^(" + options.checkpointPattern + ")$");
    std::string error;
    if (!regex->isValid(error))
      return func.emitError("checkpoint-pattern '")
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
    return func.emitError("the checkpoint selectors match no "
                          "non-root FSDP unit; units (class, parameters): ")
           << llvm::join(seen, ", ");
  return chosen;
}

struct AutodiffPass : mlir::fsdp::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;
  void getDependentDialects(DialectRegistry &registry) const override {
    AutodiffBase::getDependentDialects(registry);
    // The ops' rules (Gradients/), attached when their dialects load.
    mlir::fsdp::detail::registerGradientModels(registry);
  }
  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("the module has no @forward function");
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
    options.fuseBatchNorm = fuseBatchNorm;
    options.fuseGradients = fuseGradients;
    if (failed(Autodiff(func, module, std::move(options)).run()))
      signalPassFailure();
  }
};

} // namespace

void mlir::fsdp::numberRandomOps(func::FuncOp func) {
  using RandomOp = FSDPDialect::RandomOpAttrHelper;
  int64_t next = 0;
  func.walk([&](Operation *op) {
    RandomOp helper(op->getContext());
    if (drawsRandom(op) && helper.isAttrPresent(op))
      next = std::max(next, helper.getAttr(op).getInt() + 1);
  });
  func.walk([&](Operation *op) {
    RandomOp helper(op->getContext());
    if (drawsRandom(op) && !helper.isAttrPresent(op))
      helper.setAttr(
          op, IntegerAttr::get(IntegerType::get(op->getContext(), 64), next++));
  });
}
