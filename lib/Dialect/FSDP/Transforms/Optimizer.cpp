//===- Optimizer.cpp - The optimizer step as elementwise IR ---------------===//
//
/// After fsdp-autodiff, @forward returns the loss, one gradient per
/// trainable parameter and buffer updates. This pass appends PyTorch's SGD
/// or AdamW step (optionally after global-norm clipping and gradient
/// accumulation over micro-batches) and returns new parameter and state
/// values marked `fsdp.update_of`, which the runtime writes back. Each
/// update is one fsdp.sgd / fsdp.adamw op (the runtime's one-pass, in-place
/// kernels), or with fused=false the same arithmetic as elementwise ONNX ops.
//
//===----------------------------------------------------------------------===//

#include "OnnxBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <utility>

namespace mlir::fsdp {
#define GEN_PASS_DEF_OPTIMIZER
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using mlir::fsdp::FSDPDialect;
using namespace mlir::onnxir;
using mlir::fsdp::detail::OnnxBuilder;
using mlir::fsdp::detail::typeOf;

namespace {

/// What the optimizer updates: a parameter (`fsdp.param`) or, after
/// fsdp-flatten, a unit's flat parameter (`fsdp.flat_param`), whose flat
/// gradient and state then share its layout.
struct Target {
  Operation *symbol;
  StringRef name;
  RankedTensorType type;
  bool flat;
};

/// What @forward returns after fsdp-autodiff (and fsdp-flatten).
struct StepResults {
  Value loss;
  /// (parameter or flat parameter, gradient) in result order.
  SmallVector<std::pair<Target, Value>> grads;
  /// (buffer, new value) in result order.
  SmallVector<std::pair<FlatSymbolRefAttr, Value>> updates;
};

class OptimizerStep {
public:
  OptimizerStep(func::FuncOp func, ModuleOp module,
                mlir::fsdp::OptimizerOptions options)
      : func(func), module(module), options(std::move(options)) {}

  LogicalResult run();

private:
  LogicalResult readResults(StepResults &step);
  LogicalResult accumulate(StepResults &step);
  /// The clipping coefficient; the gradients are scaled by it unless the
  /// step is fused (the fused ops take it as an operand).
  Value clip(OnnxBuilder &bb, StepResults &step);
  /// A zero-initialised fp32 state buffer for `param`, and its value.
  FailureOr<Value> state(OnnxBuilder &bb, const Target &param, StringRef name);
  Value sgd(OnnxBuilder &bb, const Target &param, Value p, Value g);
  Value adamw(OnnxBuilder &bb, const Target &param, Value p, Value g);
  /// The same steps as one fsdp.sgd / fsdp.adamw op each.
  Value fusedSgd(OnnxBuilder &bb, const Target &param, Value p, Value g);
  Value fusedAdamw(OnnxBuilder &bb, const Target &param, Value p, Value g);

  func::FuncOp func;
  ModuleOp module;
  mlir::fsdp::OptimizerOptions options;
  Value lr, step;
  /// The clipping coefficient when gradients are clipped.
  Value clipCoef;
  /// AdamW's scalars, built once.
  Value keep, stepSize, root2;
  /// New state values (symbol, value), appended after each parameter's.
  SmallVector<std::pair<FlatSymbolRefAttr, Value>> stateUpdates;
  bool failedState = false;
};

LogicalResult OptimizerStep::readResults(StepResults &step) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (func.getNumResults() == 0)
    return func.emitError("@forward returns nothing; run "
                          "--fsdp-autodiff first");
  step.loss = ret.getOperand(0);
  for (unsigned i = 1; i < func.getNumResults(); ++i) {
    Value value = ret.getOperand(i);
    auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
        i, FSDPDialect::GradOfAttrHelper::getNameStr());
    auto flatOf = func.getResultAttrOfType<FlatSymbolRefAttr>(
        i, FSDPDialect::FlatGradOfAttrHelper::getNameStr());
    if (of || flatOf) {
      Target target;
      if (of) {
        auto param = module.lookupSymbol<mlir::fsdp::ParamOp>(of);
        if (!param)
          return func.emitError("result ") << i << " is the gradient of " << of
                                           << ", which is not an fsdp.param";
        target = {param, param.getSymName(), param.getTensorType(), false};
      } else {
        auto unit = module.lookupSymbol<mlir::fsdp::FlatParamOp>(flatOf);
        if (!unit)
          return func.emitError("result ")
                 << i << " is the flat gradient of " << flatOf
                 << ", which is not an fsdp.flat_param";
        target = {unit, unit.getSymName(), unit.getTensorType(), true};
      }
      if (!target.type.getElementType().isF32())
        return func.emitError("@")
               << target.name << " is " << target.type
               << "; only f32 parameters have an optimizer step yet";
      step.grads.emplace_back(target, value);
    } else if (auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
                   i, FSDPDialect::UpdateOfAttrHelper::getNameStr())) {
      if (module.lookupSymbol<mlir::fsdp::ParamOp>(of))
        return func.emitError("result ")
               << i << " already updates the parameter " << of
               << "; the step has an optimizer already";
      step.updates.emplace_back(of, value);
    } else {
      return func.emitError("result ")
             << i
             << " is neither a gradient nor a buffer update; @forward must "
                "be what --fsdp-autodiff returns";
    }
  }
  if (step.grads.empty())
    return func.emitError("@forward returns no gradients; "
                          "run --fsdp-autodiff first (or nothing is "
                          "trainable)");
  return success();
}

/// Replaces the step on one batch by N steps on its slices: micro-batch 0
/// is the original ops on the first slice, the others clones after it.
LogicalResult OptimizerStep::accumulate(StepResults &step) {
  int64_t n = options.accumulate;
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder b(func.getContext());
  b.setInsertionPointToStart(&body);
  OnnxBuilder bb(b, func.getLoc());

  // Inputs n times larger along their first dimension, sliced.
  SmallVector<SmallVector<Value>> slices(n);
  DenseSet<Operation *> sliceOps;
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    BlockArgument arg = func.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0)
      return emitError(arg.getLoc())
             << "accumulate=" << n
             << " slices every input along its first (batch) "
             << "dimension, but input " << i << " is " << arg.getType();
    SmallVector<int64_t> shape(type.getShape());
    int64_t micro = shape[0];
    shape[0] *= n;
    arg.setType(RankedTensorType::get(shape, type.getElementType()));
    for (int64_t k = 0; k < n; ++k) {
      slices[k].push_back(bb.op<SliceOp>(type, {arg, bb.ints({k * micro}),
                                                bb.ints({(k + 1) * micro}),
                                                bb.ints({0}), bb.ints({1})}));
      sliceOps.insert(slices[k].back().getDefiningOp());
    }
    arg.replaceUsesWithIf(slices[0].back(), [&](OpOperand &use) {
      return !sliceOps.contains(use.getOwner());
    });
  }
  func.setFunctionType(FunctionType::get(
      func.getContext(), body.getArgumentTypes(), func.getResultTypes()));

  // The ops of micro-batch 0; constants and parameter reads are shared.
  SmallVector<Operation *> forward;
  for (Operation &op : body) {
    if (&op == ret.getOperation())
      break;
    if (!sliceOps.contains(&op) &&
        !isa<ConstantOp, NoValueOp, mlir::fsdp::GetParamOp,
             mlir::fsdp::GetFlatParamOp>(op))
      forward.push_back(&op);
  }

  b.setInsertionPoint(ret);
  OnnxBuilder tail(b, func.getLoc());
  SmallVector<Value> gradSums;
  for (auto &[param, grad] : step.grads)
    gradSums.push_back(grad);
  Value lossSum = step.loss;
  SmallVector<Value> latest;
  for (auto &[buffer, value] : step.updates)
    latest.push_back(value);
  // Each micro-batch's random ops draw for its own slice of the batch.
  FSDPDialect::MicroBatchAttrHelper microBatch(func.getContext());
  for (Operation *op : forward)
    if (drawsRandom(op))
      microBatch.setAttr(op, b.getDenseI64ArrayAttr({0, n}));
  for (int64_t k = 1; k < n; ++k) {
    IRMapping map;
    for (auto [first, mine] : llvm::zip(slices[0], slices[k]))
      map.map(first, mine);
    for (Operation *op : forward) {
      // Buffers read the previous micro-batch's updates (BatchNorm's
      // running statistics advance once per forward, as in PyTorch).
      if (auto get = dyn_cast<mlir::fsdp::GetBufferOp>(op)) {
        for (auto [index, update] : llvm::enumerate(step.updates))
          if (update.first.getAttr() == get.getBufferAttr().getAttr())
            map.map(get.getResult(), latest[index]);
        continue;
      }
      Operation *clone = b.clone(*op, map);
      if (drawsRandom(clone))
        microBatch.setAttr(clone, b.getDenseI64ArrayAttr({k, n}));
    }
    lossSum = tail.add(lossSum, map.lookupOrDefault(step.loss));
    for (auto [index, grad] : llvm::enumerate(step.grads))
      gradSums[index] =
          tail.add(gradSums[index], map.lookupOrDefault(grad.second));
    for (auto [index, update] : llvm::enumerate(step.updates))
      latest[index] = map.lookupOrDefault(update.second);
  }
  Type element = typeOf(step.loss).getElementType();
  Value scale = tail.scalar(1.0 / n, element);
  step.loss = tail.mul(lossSum, scale, lossSum.getType());
  for (auto [index, grad] : llvm::enumerate(step.grads))
    grad.second = tail.mul(gradSums[index], scale, gradSums[index].getType());
  for (auto [index, update] : llvm::enumerate(step.updates))
    update.second = latest[index];
  return success();
}

/// Scales every gradient by min(1, max / (norm + 1e-6)); returns nothing.
Value OptimizerStep::clip(OnnxBuilder &bb, StepResults &step) {
  auto scalarType = RankedTensorType::get({}, bb.b.getF32Type());
  Value none = bb.b.create<NoValueOp>(bb.loc);
  Value total;
  for (auto &[param, grad] : step.grads) {
    Value squares = bb.op<ReduceSumOp>(
        scalarType, {bb.mul(grad, grad, grad.getType()), none},
        {bb.b.getNamedAttr("keepdims", bb.b.getI64IntegerAttr(0))});
    total = total ? bb.add(total, squares) : squares;
  }
  Value norm = bb.op<SqrtOp>(scalarType, {total});
  Value coef = bb.op<DivOp>(scalarType,
                            {bb.scalar(options.maxGradNorm, bb.b.getF32Type()),
                             bb.add(norm, bb.scalar(1e-6, bb.b.getF32Type()))});
  Value one = bb.scalar(1.0, bb.b.getF32Type());
  Value below =
      bb.op<LessOp>(RankedTensorType::get({}, bb.b.getI1Type()), {coef, one});
  coef = bb.op<WhereOp>(scalarType, {below, coef, one});
  if (!options.fused)
    for (auto &[param, grad] : step.grads)
      grad = bb.mul(grad, coef, grad.getType());
  return coef;
}

FailureOr<Value> OptimizerStep::state(OnnxBuilder &bb, const Target &param,
                                      StringRef name) {
  std::string symbol = ("optim." + name + "." + param.name).str();
  if (module.lookupSymbol(symbol))
    return func.emitError("the module already has a symbol "
                          "named '")
           << symbol << "'";
  OpBuilder top(func);
  auto type = RankedTensorType::get(param.type.getShape(), top.getF32Type());
  auto buffer = top.create<mlir::fsdp::BufferOp>(
      param.symbol->getLoc(), top.getStringAttr(symbol), TypeAttr::get(type),
      mlir::fsdp::DataRefAttr());
  buffer->setAttr(FSDPDialect::StateOfAttrHelper::getNameStr(),
                  FlatSymbolRefAttr::get(top.getContext(), param.name));
  auto ref = FlatSymbolRefAttr::get(buffer.getSymNameAttr());
  Value value = bb.b.create<mlir::fsdp::GetBufferOp>(bb.loc, type, ref);
  stateUpdates.emplace_back(ref, Value());
  return value;
}

Value OptimizerStep::sgd(OnnxBuilder &bb, const Target &param, Value p,
                         Value g) {
  Type type = p.getType();
  Type f32 = bb.b.getF32Type();
  double decay = options.weightDecay < 0 ? 0.0 : options.weightDecay;
  if (decay != 0)
    g = bb.add(g, bb.mul(p, bb.scalar(decay, f32), type));
  Value d = g;
  if (options.momentum != 0) {
    FailureOr<Value> buf = state(bb, param, "momentum_buffer");
    if (failed(buf)) {
      failedState = true;
      return p;
    }
    Value next =
        bb.add(bb.mul(*buf, bb.scalar(options.momentum, f32), type),
               options.dampening == 0
                   ? g
                   : bb.mul(g, bb.scalar(1 - options.dampening, f32), type));
    if (options.dampening != 0) { // the first step's buffer is g itself
      Value first = bb.op<EqualOp>(RankedTensorType::get({}, bb.b.getI1Type()),
                                   {step, bb.scalar(1.0, f32)});
      next = bb.op<WhereOp>(type, {first, g, next});
    }
    stateUpdates.back().second = next;
    d = options.nesterov
            ? bb.add(g, bb.mul(next, bb.scalar(options.momentum, f32), type))
            : next;
  }
  return bb.op<SubOp>(type, {p, bb.mul(d, lr, type)});
}

Value OptimizerStep::adamw(OnnxBuilder &bb, const Target &param, Value p,
                           Value g) {
  Type type = p.getType();
  Type f32 = bb.b.getF32Type();
  auto scalarType = RankedTensorType::get({}, f32);
  double decay = options.weightDecay < 0 ? 0.01 : options.weightDecay;
  double b1 = options.beta1, b2 = options.beta2;
  FailureOr<Value> m = state(bb, param, "exp_avg");
  if (failed(m)) {
    failedState = true;
    return p;
  }
  Value mNext = bb.add(bb.mul(*m, bb.scalar(b1, f32), type),
                       bb.mul(g, bb.scalar(1 - b1, f32), type));
  stateUpdates.back().second = mNext;
  FailureOr<Value> v = state(bb, param, "exp_avg_sq");
  if (failed(v)) {
    failedState = true;
    return p;
  }
  Value vNext =
      bb.add(bb.mul(*v, bb.scalar(b2, f32), type),
             bb.mul(bb.mul(g, g, type), bb.scalar(1 - b2, f32), type));
  stateUpdates.back().second = vNext;
  // Scalars shared by every parameter: 1 - lr * decay, lr / (1 - b1^t) and
  // sqrt(1 - b2^t).
  if (!stepSize) {
    auto correction = [&](double beta) { // 1 - beta^step
      return bb.op<SubOp>(
          scalarType, {bb.scalar(1.0, f32),
                       bb.op<PowOp>(scalarType, {bb.scalar(beta, f32), step})});
    };
    keep = bb.op<SubOp>(
        scalarType,
        {bb.scalar(1.0, f32), bb.mul(lr, bb.scalar(decay, f32), scalarType)});
    stepSize = bb.op<DivOp>(scalarType, {lr, correction(b1)});
    root2 = bb.op<SqrtOp>(scalarType, {correction(b2)});
  }
  if (decay != 0) // decoupled weight decay
    p = bb.mul(p, keep, type);
  Value denom =
      bb.add(bb.op<DivOp>(type, {bb.op<SqrtOp>(type, {vNext}), root2}),
             bb.scalar(options.eps, f32));
  Value delta = bb.mul(bb.op<DivOp>(type, {mNext, denom}), stepSize, type);
  return bb.op<SubOp>(type, {p, delta});
}

Value OptimizerStep::fusedSgd(OnnxBuilder &bb, const Target &param, Value p,
                              Value g) {
  double decay = options.weightDecay < 0 ? 0.0 : options.weightDecay;
  Value buf;
  if (options.momentum != 0) {
    FailureOr<Value> state = this->state(bb, param, "momentum_buffer");
    if (failed(state)) {
      failedState = true;
      return p;
    }
    buf = *state;
  }
  SmallVector<Type> types = {p.getType()};
  if (buf)
    types.push_back(buf.getType());
  auto op = bb.b.create<mlir::fsdp::SGDOp>(
      bb.loc, types, p, g, lr, step, buf, clipCoef,
      bb.b.getF64FloatAttr(options.momentum),
      bb.b.getF64FloatAttr(options.dampening),
      // Without momentum, Nesterov changes nothing (the decomposed form
      // ignores it too).
      bb.b.getBoolAttr(options.nesterov && buf), bb.b.getF64FloatAttr(decay));
  if (buf)
    stateUpdates.back().second = op.getNewMomentumBuffer();
  return op.getNewParam();
}

Value OptimizerStep::fusedAdamw(OnnxBuilder &bb, const Target &param, Value p,
                                Value g) {
  double decay = options.weightDecay < 0 ? 0.01 : options.weightDecay;
  FailureOr<Value> m = state(bb, param, "exp_avg");
  FailureOr<Value> v =
      succeeded(m) ? state(bb, param, "exp_avg_sq") : FailureOr<Value>();
  if (failed(m) || failed(v)) {
    failedState = true;
    return p;
  }
  Type type = p.getType();
  auto op = bb.b.create<mlir::fsdp::AdamWOp>(
      bb.loc, type, type, type, p, g, *m, *v, lr, step, clipCoef,
      bb.b.getF64FloatAttr(options.beta1), bb.b.getF64FloatAttr(options.beta2),
      bb.b.getF64FloatAttr(options.eps), bb.b.getF64FloatAttr(decay));
  stateUpdates[0].second = op.getNewExpAvg();
  stateUpdates[1].second = op.getNewExpAvgSq();
  return op.getNewParam();
}

LogicalResult OptimizerStep::run() {
  if (options.optimizer != "sgd" && options.optimizer != "adamw")
    return func.emitError("unknown optimizer '")
           << options.optimizer << "' (supported: sgd, adamw)";
  if (options.accumulate < 1)
    return func.emitError("accumulate must be at least 1, not ")
           << options.accumulate;
  // NaN passes every `< 0` check below and trains into NaN; an infinite
  // weight decay or eps is no step either.
  for (auto [name, value] :
       {std::pair<const char *, double>{"momentum", options.momentum},
        {"dampening", options.dampening},
        {"weight-decay", options.weightDecay},
        {"beta1", options.beta1},
        {"beta2", options.beta2},
        {"eps", options.eps},
        {"max-grad-norm", options.maxGradNorm}})
    if (!std::isfinite(value))
      return func.emitError(name) << " must be a finite number, not " << value;
  if (options.maxGradNorm < 0)
    return func.emitError("max-grad-norm must be positive "
                          "(0 turns clipping off), not ")
           << options.maxGradNorm;
  if (options.optimizer == "adamw" &&
      (options.momentum != 0 || options.dampening != 0 || options.nesterov))
    return func.emitError("momentum, dampening and nesterov "
                          "are SGD options");
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttrOfType<StringAttr>(
            i, FSDPDialect::NameAttrHelper::getNameStr()))
      if (name.getValue() == "lr" || name.getValue() == "step")
        return emitError(func.getArgument(i).getLoc())
               << "the step already has an input named '" << name.getValue()
               << "'";
  StepResults results;
  if (failed(readResults(results)))
    return failure();
  if (options.accumulate > 1 && failed(accumulate(results)))
    return failure();

  // The learning rate and the step count (from 1), as inputs.
  OpBuilder b(func.getContext());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  for (StringRef name : {"lr", "step"})
    func.insertArgument(
        func.getNumArguments(), scalar,
        b.getDictionaryAttr({b.getNamedAttr(
            FSDPDialect::NameAttrHelper::getNameStr(), b.getStringAttr(name))}),
        func.getLoc());
  lr = func.getArgument(func.getNumArguments() - 2);
  step = func.getArgument(func.getNumArguments() - 1);

  // Each gradient the step consumes is marked (an Identity naming its
  // parameter), so fsdp-shard can reduce it across ranks where it is made.
  for (auto &[param, grad] : results.grads) {
    if (Operation *def = grad.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func.getBody().front());
    auto marker = b.create<IdentityOp>(grad.getLoc(), grad.getType(), grad);
    marker->setAttr(param.flat ? FSDPDialect::FlatGradOfAttrHelper::getNameStr()
                               : FSDPDialect::GradOfAttrHelper::getNameStr(),
                    FlatSymbolRefAttr::get(b.getContext(), param.name));
    grad = marker.getResult();
  }

  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  b.setInsertionPoint(ret);
  OnnxBuilder bb(b, NameLoc::get(b.getStringAttr("optimizer"), func.getLoc()));
  if (options.maxGradNorm > 0)
    clipCoef = clip(bb, results);

  SmallVector<Value> values = {results.loss};
  SmallVector<DictionaryAttr> attrs = {func.getResultAttrDict(0)
                                           ? func.getResultAttrDict(0)
                                           : b.getDictionaryAttr({})};
  auto updateAttrs = [&](FlatSymbolRefAttr of) {
    return b.getDictionaryAttr(
        {b.getNamedAttr(FSDPDialect::UpdateOfAttrHelper::getNameStr(), of),
         b.getNamedAttr(FSDPDialect::NameAttrHelper::getNameStr(),
                        b.getStringAttr("update." + of.getValue()))});
  };
  for (auto &[param, grad] : results.grads) {
    auto ref = FlatSymbolRefAttr::get(b.getContext(), param.name);
    Value p =
        param.flat
            ? b.create<mlir::fsdp::GetFlatParamOp>(bb.loc, param.type, ref)
                  .getResult()
            : b.create<mlir::fsdp::GetParamOp>(bb.loc, param.type, ref)
                  .getResult();
    stateUpdates.clear();
    bool sgd = options.optimizer == "sgd";
    Value next = options.fused ? (sgd ? fusedSgd(bb, param, p, grad)
                                      : fusedAdamw(bb, param, p, grad))
                               : (sgd ? this->sgd(bb, param, p, grad)
                                      : adamw(bb, param, p, grad));
    if (failedState)
      return failure();
    values.push_back(next);
    attrs.push_back(updateAttrs(ref));
    for (auto &[symbol, value] : stateUpdates) {
      values.push_back(value);
      attrs.push_back(updateAttrs(symbol));
    }
  }
  for (auto &[buffer, value] : results.updates) {
    values.push_back(value);
    attrs.push_back(updateAttrs(buffer));
  }
  b.create<func::ReturnOp>(ret.getLoc(), values);
  ret.erase();
  SmallVector<Type> types;
  for (Value value : values)
    types.push_back(value.getType());
  func.setFunctionType(
      FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
  func.setAllResultAttrs(attrs);
  return success();
}

struct OptimizerPass : mlir::fsdp::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("the module has no @forward function");
      return signalPassFailure();
    }
    if (failed(OptimizerStep(func, module, currentOptions()).run()))
      signalPassFailure();
  }

  /// The options as parsed from the command line or a pipeline.
  mlir::fsdp::OptimizerOptions currentOptions() const {
    mlir::fsdp::OptimizerOptions options;
    options.optimizer = optimizer;
    options.momentum = momentum;
    options.dampening = dampening;
    options.nesterov = nesterov;
    options.weightDecay = weightDecay;
    options.beta1 = beta1;
    options.beta2 = beta2;
    options.eps = eps;
    options.maxGradNorm = maxGradNorm;
    options.accumulate = accumulate;
    options.fused = fused;
    return options;
  }
};

} // namespace

FailureOr<mlir::fsdp::OptimizerOptions> mlir::fsdp::parseOptimizerOptions(
    StringRef text, function_ref<LogicalResult(const Twine &)> errorHandler) {
  // The pass parses its own options, so the text means what it means after
  // --fsdp-optimizer=.
  OptimizerPass pass;
  if (failed(pass.initializeOptions(text, errorHandler)))
    return failure();
  return pass.currentOptions();
}

int64_t mlir::fsdp::optimizerStateCount(const OptimizerOptions &options) {
  if (options.optimizer == "adamw")
    return 2;                           // exp_avg and exp_avg_sq
  return options.momentum != 0 ? 1 : 0; // momentum_buffer
}
