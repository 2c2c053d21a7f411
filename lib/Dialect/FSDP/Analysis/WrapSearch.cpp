//===- WrapSearch.cpp - fsdp-auto-wrap policy=auto: the searched wrap -----===//
//
/// The step model: the forward is a sequence of S stretches (each starts at
/// an op reading parameters); a training step runs them forward (positions
/// 0..S-1), then backward in reverse at twice the forward's compute
/// (positions S..2S-1, position 2S-1-i being stretch i's backward), then
/// the optimizer (position 2S). A unit needs its parameters from its first
/// to its last use; fsdp-shard's collectives follow from its strategy
/// (FULL_SHARD gathers for the forward and again for the backward, the root
/// and SHARD_GRAD_OP keep the forward's gather through the backward,
/// NO_SHARD holds everything; reductions after the unit's last gradient
/// contribution), fsdp-schedule's placement from the knobs (prefetch
/// windows, the in-flight limit, starts as late as the modelled compute
/// still hides them, one reduction in flight, buckets). Two streams are
/// simulated as fsdp-timeline does; memory is counted per position from
/// intervals.
///
/// The search exploits the repeated structure: boundaries are chosen per
/// module class (every GPT2Block, or every Linear, ...), so a model with 80
/// identical layers has as many boundary choices as one with 2; strategies
/// are improved greedily per group of identical units (all of a class, or
/// its last k in forward order), and the schedule knobs on a grid for the
/// best few boundary sets. Each evaluation is linear in the stretches.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/WrapSearch.h"

#include "fsdp/Dialect/FSDP/Analysis/Phases.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/layout/FlatLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::fsdp;

std::string mlir::fsdp::formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit ? llvm::formatv("{0:F2} {1}", value, units[unit]).str()
              : std::to_string(bytes) + " B";
}

//===----------------------------------------------------------------------===//
// Profile
//===----------------------------------------------------------------------===//

namespace {

/// Every tensor of a plan starts on the layout library's tensor alignment.
int64_t aligned(int64_t bytes) {
  return ::fsdp::layout::alignTo(bytes, ::fsdp::layout::kTensorAlignmentBytes);
}

int64_t tensorBytes(Type type) { return aligned(modelledBytes(type)); }

/// Ops whose derivative needs none of their inputs.
bool derivativeIgnoresInputs(Operation *op) {
  static const llvm::StringSet<> names = {
      "Add",        "Sub",       "Neg",     "Concat",     "Slice",
      "Split",      "Transpose", "Cast",    "Expand",     "ReduceSum",
      "ReduceMean", "Gather",    "Pad",     "Identity",   "Shape",
      "Where",      "Dropout",   "Softmax", "LogSoftmax", "Exp",
      "Sigmoid",    "Tanh",      "Sqrt",    "Reciprocal"};
  return names.contains(op->getName().stripDialect());
}

/// Ops whose derivative is written with their output.
bool derivativeNeedsOutput(Operation *op) {
  static const llvm::StringSet<> names = {
      "Softmax", "LogSoftmax", "Exp", "Sigmoid", "Tanh", "Sqrt", "Reciprocal"};
  return names.contains(op->getName().stripDialect());
}

/// Whether the backward of `op` reads its operand `index`, given which
/// operands carry gradients: a product's operand is needed only for the
/// gradient of another operand that has one (x * constant keeps nothing);
/// a quotient's numerator only when the denominator has a gradient.
bool derivativeNeedsInput(Operation *op, unsigned index,
                          const std::function<bool(Value)> &differentiable) {
  if (derivativeIgnoresInputs(op))
    return false;
  StringRef name = op->getName().stripDialect();
  if (name == "Mul" || name == "MatMul" || name == "Gemm") {
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (i != index && i < 2 && differentiable(operand))
        return true;
    return false;
  }
  if (name == "Div")
    return differentiable(op->getOperand(1));
  return true;
}

/// The parameters (each alias naming its parameter's index in
/// `paramIndex`) and the buffers' bytes.
void profileParams(ModuleOp module,
                   const std::function<bool(StringRef)> &ignoredParam,
                   WrapProfile &profile, llvm::StringMap<int> &paramIndex) {
  for (ParamOp param : module.getOps<ParamOp>()) {
    int index = static_cast<int>(profile.params.size());
    WrapProfile::Param p;
    p.name = param.getSymName().str();
    p.numel = param.getTensorType().getNumElements();
    p.elementBytes = elementBytes(param.getTensorType().getElementType());
    p.trainable = param.requiresGrad();
    p.ignored = ignoredParam(p.name);
    profile.params.push_back(std::move(p));
    paramIndex[param.getSymName()] = index;
    if (std::optional<ArrayAttr> aliases = param.getAliases())
      for (StringAttr alias : aliases->getAsRange<StringAttr>())
        paramIndex[alias.getValue()] = index;
  }
  for (BufferOp buffer : module.getOps<BufferOp>())
    profile.staticBytes += tensorBytes(buffer.getTensorType());
}

/// The module tree: each module's parent, children and parameters (and
/// each parameter's holders); fails when it has no root.
LogicalResult profileModules(ModuleOp module, ArrayRef<ModuleAttr> tree,
                             const llvm::StringMap<int> &paramIndex,
                             WrapProfile &profile) {
  llvm::StringMap<int> moduleIndex;
  for (ModuleAttr attr : tree) {
    WrapProfile::Module m;
    m.fqn = attr.getFqn().str();
    m.className = attr.getClassName().str();
    moduleIndex[attr.getFqn()] = static_cast<int>(profile.modules.size());
    profile.modules.push_back(std::move(m));
  }
  if (profile.modules.empty() || !profile.modules[0].fqn.empty())
    return module.emitError("the module tree has no root");
  for (auto [i, attr] : llvm::enumerate(tree)) {
    WrapProfile::Module &m = profile.modules[i];
    for (StringRef child : stringsOf(attr.getChildren())) {
      int c = moduleIndex.lookup(child);
      m.children.push_back(c);
      profile.modules[c].parent = static_cast<int>(i);
    }
    for (StringRef name : stringsOf(attr.getParams())) {
      auto found = paramIndex.find(name);
      if (found == paramIndex.end())
        continue; // a buffer
      m.params.push_back(found->second);
      std::vector<int> &holders = profile.params[found->second].holders;
      if (!llvm::is_contained(holders, static_cast<int>(i)))
        holders.push_back(static_cast<int>(i));
    }
  }
  return success();
}

/// Each module's subtree size (its parameters not ignored) and whether it
/// may be wrapped.
void markEligible(WrapProfile &profile,
                  const std::function<bool(StringRef)> &ignoredModule,
                  const std::function<bool(StringRef)> &eligibleClass,
                  const std::function<bool(StringRef)> &forceLeafClass) {
  // Subtree sizes, post-order (children follow their parent in the list).
  std::vector<std::set<int>> subtree(profile.modules.size());
  for (size_t i = profile.modules.size(); i-- > 0;) {
    WrapProfile::Module &m = profile.modules[i];
    for (int p : m.params)
      if (!profile.params[p].ignored)
        subtree[i].insert(p);
    for (int c : m.children)
      subtree[i].insert(subtree[c].begin(), subtree[c].end());
    for (int p : subtree[i])
      m.subtreeNumel += profile.params[p].numel;
  }
  for (size_t i = 1; i < profile.modules.size(); ++i) {
    WrapProfile::Module &m = profile.modules[i];
    bool underLeaf = false;
    for (int a = m.parent; a > 0; a = profile.modules[a].parent)
      underLeaf |= forceLeafClass(profile.modules[a].className);
    m.eligible = !underLeaf && m.subtreeNumel > 0 && !ignoredModule(m.fqn) &&
                 eligibleClass(m.className);
  }
}

/// The forward as stretches (a new one at each op reading parameters):
/// their compute and transients, each parameter's first and last use, and
/// each activation's life and whether the backward keeps it.
void profileForward(func::FuncOp func, const llvm::StringMap<int> &paramIndex,
                    const CostModel &model, WrapProfile &profile) {
  for (BlockArgument arg : func.getArguments())
    profile.staticBytes += tensorBytes(arg.getType());

  llvm::DenseMap<Value, int> paramOf, activationOf;
  // Values with a gradient: trainable parameters and what is computed
  // from them.
  llvm::DenseSet<Value> withGradient;
  auto isFloat = [](Value value) {
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    return tensor && isa<FloatType>(tensor.getElementType());
  };
  std::function<bool(Value)> differentiable = [&](Value value) {
    return withGradient.contains(value);
  };
  int stretch = -1;
  for (Operation &op : func.getBody().front()) {
    if (auto read = dyn_cast<GetParamOp>(op)) {
      auto found = paramIndex.find(read.getParam());
      if (found != paramIndex.end()) {
        paramOf[read.getResult()] = found->second;
        if (profile.params[found->second].trainable)
          withGradient.insert(read.getResult());
      }
      continue;
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(&op)) {
      Value source = view.getViewSource();
      if (withGradient.contains(source))
        withGradient.insert(op.getResult(0));
      if (paramOf.count(source)) {
        paramOf[op.getResult(0)] = paramOf.lookup(source);
        continue;
      }
      if (activationOf.count(source)) {
        activationOf[op.getResult(0)] = activationOf.lookup(source);
        continue;
      }
    }
    std::vector<int> used;
    for (Value operand : op.getOperands())
      if (paramOf.count(operand))
        used.push_back(paramOf.lookup(operand));
    if (!used.empty() || stretch < 0) {
      profile.stretches.emplace_back();
      stretch = static_cast<int>(profile.stretches.size()) - 1;
    }
    for (int p : used) {
      WrapProfile::Param &param = profile.params[p];
      if (param.firstUse < 0)
        param.firstUse = stretch;
      param.lastUse = stretch;
    }
    if (isa<func::ReturnOp>(op)) {
      // Results live for the whole run.
      for (Value operand : op.getOperands())
        if (activationOf.count(operand))
          profile.activations[activationOf.lookup(operand)].keptUntil = 0;
      continue;
    }
    WrapProfile::Stretch &s = profile.stretches[stretch];
    s.seconds += model.computeSeconds(&op);
    for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
      auto found = activationOf.find(operand);
      if (found == activationOf.end())
        continue;
      WrapProfile::Activation &a = profile.activations[found->second];
      a.lastUse = std::max(a.lastUse, stretch);
      if (isFloat(operand) && derivativeNeedsInput(&op, index, differentiable))
        a.keptUntil =
            a.keptUntil < 0 ? stretch : std::min(a.keptUntil, stretch);
    }
    if (isa<onnxir::ConstantOp>(op)) {
      profile.staticBytes += tensorBytes(op.getResult(0).getType());
      continue;
    }
    if (llvm::any_of(op.getOperands(), differentiable))
      for (Value result : op.getResults())
        if (isFloat(result))
          withGradient.insert(result);
    for (Value result : op.getResults()) {
      int64_t bytes = tensorBytes(result.getType());
      if (!bytes)
        continue;
      s.transientBytes = std::max(s.transientBytes, bytes);
      WrapProfile::Activation a;
      a.def = a.lastUse = stretch;
      a.bytes = bytes;
      if (derivativeNeedsOutput(&op))
        a.keptUntil = stretch;
      activationOf[result] = static_cast<int>(profile.activations.size());
      profile.activations.push_back(a);
    }
  }
  if (profile.stretches.empty())
    profile.stretches.emplace_back();
}

} // namespace

FailureOr<WrapProfile> mlir::fsdp::buildWrapProfile(
    ModuleOp module, ArrayRef<ModuleAttr> tree,
    const std::function<bool(StringRef)> &ignoredParam,
    const std::function<bool(StringRef)> &ignoredModule,
    const std::function<bool(StringRef)> &eligibleClass,
    const std::function<bool(StringRef)> &forceLeafClass,
    const CostModel &model) {
  WrapProfile profile;
  llvm::StringMap<int> paramIndex;
  profileParams(module, ignoredParam, profile, paramIndex);
  if (failed(profileModules(module, tree, paramIndex, profile)))
    return failure();
  markEligible(profile, ignoredModule, eligibleClass, forceLeafClass);

  // The forward: the function named forward, else the only one.
  func::FuncOp func;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal() && (!func || f.getName() == "forward"))
      func = f;
  if (!func)
    return module.emitError("policy=auto needs a function "
                            "to model");
  profileForward(func, paramIndex, model, profile);
  return profile;
}

//===----------------------------------------------------------------------===//
// Hand policies
//===----------------------------------------------------------------------===//

std::vector<char> mlir::fsdp::recursiveWrap(
    const WrapProfile &profile,
    const std::function<bool(int, bool, int64_t)> &policy) {
  std::vector<char> wrapped(profile.modules.size(), 0);
  std::function<int64_t(int, bool)> visit = [&](int m,
                                                bool onlyChildren) -> int64_t {
    const WrapProfile::Module &module = profile.modules[m];
    int64_t count = module.subtreeNumel;
    if (!policy(m, /*recurse=*/true, count))
      return 0;
    int64_t taken = 0;
    for (int c : module.children)
      taken += visit(c, false);
    if (!onlyChildren && module.eligible &&
        policy(m, /*recurse=*/false, count - taken)) {
      wrapped[m] = 1;
      return count;
    }
    return taken;
  };
  visit(0, true);
  wrapped[0] = 1;
  return wrapped;
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

namespace {

int innermostWrapped(const WrapProfile &profile,
                     const std::vector<char> &wrapped, int m) {
  while (m > 0 && !wrapped[m])
    m = profile.modules[m].parent;
  return std::max(m, 0);
}

int depthOf(const WrapProfile &profile, int m) {
  int depth = 0;
  for (; m > 0; m = profile.modules[m].parent)
    ++depth;
  return depth;
}

int commonAncestor(const WrapProfile &profile, int a, int b) {
  int da = depthOf(profile, a), db = depthOf(profile, b);
  for (; da > db; --da)
    a = profile.modules[a].parent;
  for (; db > da; --db)
    b = profile.modules[b].parent;
  while (a != b) {
    a = profile.modules[a].parent;
    b = profile.modules[b].parent;
  }
  return a;
}

/// Unwraps the modules that would split a tied parameter's holders over two
/// units: every wrapped module between a holder and the holders' common
/// ancestor.
void keepTiesTogether(const WrapProfile &profile, std::vector<char> &wrapped) {
  for (const WrapProfile::Param &param : profile.params) {
    if (param.holders.size() < 2 || param.ignored)
      continue;
    int common = param.holders[0];
    for (int h : param.holders)
      common = commonAncestor(profile, common, h);
    for (int h : param.holders)
      for (int m = h; m != common && m > 0; m = profile.modules[m].parent)
        wrapped[m] = 0;
  }
  wrapped[0] = 1;
}

struct Unit {
  int module = 0;
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  int64_t numel = 0, padded = 0, group = 1;
  int64_t elementBytes = 0; // its parameters' dtype (one per flat buffer)
  int first = INT_MAX, last = -1;
  bool trainable = false, frozen = false;
  std::vector<int> params;
};

/// One collective of the simulated step.
struct Collective {
  int unit;
  int need = 0, release = 0; // positions (gathers)
  int issue = 0;             // position it starts at
  double seconds = 0, bandwidthSeconds = 0;
  int64_t bytes = 0;
  bool forward = true;
  int bucket = -1;
  double done = 0;
};

/// What the steps of one evaluation hand each other.
struct Simulation {
  std::vector<Unit> units;
  int64_t state = 0;                  // bytes held through the whole step
  std::vector<int64_t> mem;           // live bytes per position, as deltas
  std::vector<Collective> gathers;    // in the order they are needed
  std::vector<size_t> order;          // gathers' indices in issue order
  std::vector<Collective> reductions; // in issue order
};

/// The compute and communication streams' clocks.
struct Streams {
  double compute = 0, comm = 0;
};

class Evaluator {
public:
  Evaluator(const WrapProfile &profile, const WrapSearchOptions &options)
      : profile(profile), options(options) {
    int s = static_cast<int>(profile.stretches.size());
    positions = options.training ? 2 * s + 1 : s;
    cost.assign(positions, 0);
    for (int i = 0; i < s; ++i) {
      cost[i] = profile.stretches[i].seconds;
      if (options.training)
        cost[2 * s - 1 - i] = 2 * profile.stretches[i].seconds;
    }
    // Activations and transients do not depend on the wrap.
    base.assign(positions + 1, 0);
    for (const WrapProfile::Activation &a : profile.activations) {
      int end = a.lastUse;
      if (options.training && a.keptUntil >= 0)
        end = std::max(end, mirror(a.keptUntil));
      add(base, a.def, end, a.bytes);
    }
    // The backward of a stretch holds the gradient of its largest value
    // beside what is kept (forward results are activations already).
    if (options.training)
      for (int i = 0; i < s; ++i)
        add(base, mirror(i), mirror(i), profile.stretches[i].transientBytes);
  }

  WrapEvaluation evaluate(const WrapConfig &config) const;

private:
  /// One unit per wrapped module; returns each module's unit (-1: none).
  std::vector<int> makeUnits(const WrapConfig &config, Simulation &sim) const;
  /// Each parameter to its first holder's innermost unit (ignored ones to
  /// the state); why the wrap is invalid, or empty.
  std::string assignParams(const WrapConfig &config, ArrayRef<int> unitOfModule,
                           Simulation &sim) const;
  /// Each unit's shard group and padded size (the layout fsdp-flatten
  /// builds) and the state its shard holds; why invalid, or empty.
  std::string layoutUnits(Simulation &sim) const;
  /// The gathers each unit needs (forward, and backward unless kept), in
  /// the order they are needed.
  void collectGathers(Simulation &sim) const;
  /// Where each gather starts: as late as the compute before its need
  /// still hides it, within the prefetch window and the in-flight limit.
  void placeGathers(const ScheduleKnobs &knobs, Simulation &sim) const;
  /// Gathers in issue order, bucketed, and the memory they hold.
  void bucketGathers(const ScheduleKnobs &knobs, Simulation &sim) const;
  /// Training: each trainable unit's reduction, its gradients' memory and
  /// the optimizer's.
  void collectReductions(Simulation &sim) const;
  /// Training: reductions bucketed, and each flat gradient's memory until
  /// its reduction is waited for.
  void bucketReductions(const ScheduleKnobs &knobs, Simulation &sim) const;
  /// Runs the positions on two streams; the clocks when the backward ends.
  Streams runStreams(Simulation &sim) const;
  /// The step's time: the streams, then the optimizer and clipping.
  double stepSeconds(const Simulation &sim, Streams streams) const;
  /// The peak, where it is and what makes it up.
  void explainPeak(const Simulation &sim, WrapEvaluation &result) const;
  /// "the forward in unit 'h.3'", "the optimizer step", ...
  std::string placeName(const Simulation &sim, int position) const;

  int mirror(int i) const {
    return 2 * static_cast<int>(profile.stretches.size()) - 1 - i;
  }
  int optimizerPosition() const { return positions - 1; } // training only
  static void add(std::vector<int64_t> &diff, int from, int to, int64_t bytes) {
    if (to < from || bytes == 0)
      return;
    diff[from] += bytes;
    diff[to + 1] -= bytes;
  }
  /// `bytes` live from `from` to `to` (at most the last position).
  void addLive(Simulation &sim, int from, int to, int64_t bytes) const {
    add(sim.mem, from, std::min(to, positions - 1), bytes);
  }
  int64_t groupOf(ShardingStrategy strategy) const {
    switch (strategy) {
    case ShardingStrategy::NO_SHARD:
      return 1;
    case ShardingStrategy::HYBRID_SHARD:
      return options.meshShape.size() == 2 ? options.meshShape[1]
                                           : options.worldSize;
    default:
      return options.worldSize;
    }
  }
  bool intra(int64_t ranks, bool innerAxis) const {
    return innerAxis && ranks <= options.cost.ranksPerNode;
  }

  const WrapProfile &profile;
  const WrapSearchOptions &options;
  int positions;
  std::vector<double> cost;
  std::vector<int64_t> base;
};

WrapEvaluation Evaluator::evaluate(const WrapConfig &config) const {
  WrapEvaluation result;
  Simulation sim;
  std::vector<int> unitOfModule = makeUnits(config, sim);
  result.invalid = assignParams(config, unitOfModule, sim);
  if (result.invalid.empty())
    result.invalid = layoutUnits(sim);
  if (!result.invalid.empty())
    return result;
  result.units = static_cast<int>(sim.units.size());

  sim.mem = base;
  collectGathers(sim);
  placeGathers(config.knobs, sim);
  bucketGathers(config.knobs, sim);
  if (options.training) {
    collectReductions(sim);
    bucketReductions(config.knobs, sim);
  }
  result.stepSeconds = stepSeconds(sim, runStreams(sim));
  explainPeak(sim, result);
  result.valid = true;
  return result;
}

std::vector<int> Evaluator::makeUnits(const WrapConfig &config,
                                      Simulation &sim) const {
  std::vector<int> unitOfModule(profile.modules.size(), -1);
  for (size_t m = 0; m < profile.modules.size(); ++m) {
    if (!config.wrapped[m])
      continue;
    unitOfModule[m] = static_cast<int>(sim.units.size());
    Unit u;
    u.module = static_cast<int>(m);
    u.strategy = m == 0 && config.strategy[0] == ShardingStrategy::SHARD_GRAD_OP
                     ? ShardingStrategy::FULL_SHARD // the root keeps its gather anyway
                     : config.strategy[m];
    sim.units.push_back(u);
  }
  return unitOfModule;
}

std::string Evaluator::assignParams(const WrapConfig &config,
                                    ArrayRef<int> unitOfModule,
                                    Simulation &sim) const {
  sim.state = profile.staticBytes;
  const int64_t states = options.optimizerStates;
  for (auto [p, param] : llvm::enumerate(profile.params)) {
    if (param.ignored) {
      sim.state += aligned(param.numel * param.elementBytes) *
                   (1 + (param.trainable ? states : 0));
      continue;
    }
    int holder = param.holders.empty() ? 0 : param.holders[0];
    int unit = unitOfModule[innermostWrapped(profile, config.wrapped, holder)];
    for (int h : param.holders)
      if (unitOfModule[innermostWrapped(profile, config.wrapped, h)] != unit)
        return "the tied parameter '" + param.name + "' would be in two units";
    Unit &u = sim.units[unit];
    if (u.elementBytes && u.elementBytes != param.elementBytes)
      return "unit '" + profile.modules[u.module].fqn +
             "' would mix element types ('" + param.name + "')";
    u.elementBytes = param.elementBytes;
    u.params.push_back(static_cast<int>(p));
    u.numel += param.numel;
    (param.trainable ? u.trainable : u.frozen) = true;
    if (param.firstUse >= 0) {
      u.first = std::min(u.first, param.firstUse);
      u.last = std::max(u.last, param.lastUse);
    }
  }
  return "";
}

std::string Evaluator::layoutUnits(Simulation &sim) const {
  std::vector<int64_t> numels;
  for (Unit &u : sim.units) {
    if (u.trainable && u.frozen)
      return "unit '" + profile.modules[u.module].fqn +
             "' would mix frozen and trainable parameters";
    u.group = groupOf(u.strategy);
    numels.clear();
    for (int p : u.params)
      numels.push_back(profile.params[p].numel);
    // The layout fsdp-flatten will build: its alignment and dtype.
    std::string error;
    std::optional<::fsdp::layout::FlatLayout> layout =
        ::fsdp::layout::FlatLayout::create(
            numels, u.group,
            ::fsdp::layout::paramAlignment(u.elementBytes,
                                           options.useOrigParams),
            error);
    u.padded = layout ? layout->paddedNumel() : u.numel;
    int64_t shard = aligned(u.padded / u.group * u.elementBytes);
    sim.state +=
        shard *
        (1 + (u.trainable && options.training ? options.optimizerStates : 0));
  }
  return "";
}

void Evaluator::collectGathers(Simulation &sim) const {
  for (auto [i, u] : llvm::enumerate(sim.units)) {
    if (u.group <= 1 || u.first > u.last)
      continue;
    Collective g;
    g.unit = static_cast<int>(i);
    g.bytes =
        u.padded * (options.paramBytes ? options.paramBytes : u.elementBytes);
    g.seconds =
        options.cost.ringSeconds(g.bytes, u.group, intra(u.group, true), false);
    g.bandwidthSeconds = options.cost.ringSeconds(
        g.bytes, u.group, intra(u.group, true), false, false);
    bool keep = u.module == 0 || u.strategy == ShardingStrategy::SHARD_GRAD_OP;
    g.need = u.first;
    g.release = options.training && keep ? mirror(u.first) : u.last;
    sim.gathers.push_back(g);
    if (options.training && !keep) {
      g.need = mirror(u.last);
      g.release = mirror(u.first);
      g.forward = false;
      sim.gathers.push_back(g);
    }
  }
  llvm::stable_sort(sim.gathers, [](const Collective &a, const Collective &b) {
    return a.need < b.need;
  });
}

void Evaluator::placeGathers(const ScheduleKnobs &knobs,
                             Simulation &sim) const {
  std::vector<Collective> &gathers = sim.gathers;
  for (size_t k = 0; k < gathers.size(); ++k) {
    Collective &g = gathers[k];
    bool prefetch =
        g.forward ? knobs.forwardPrefetch : knobs.backwardPrefetch != "none";
    int open = 0;
    if (!prefetch)
      open = g.need;
    else if (k > 0)
      open = !g.forward && knobs.backwardPrefetch == "post"
                 ? gathers[k - 1].release + 1
                 : gathers[k - 1].need;
    if (knobs.limitAllGathers > 0 &&
        k >= static_cast<size_t>(knobs.limitAllGathers))
      open = std::max(open, gathers[k - knobs.limitAllGathers].release + 1);
    g.issue = g.need;
    double hidden = 0;
    while (g.issue > open && hidden < g.seconds)
      hidden += cost[--g.issue];
  }
}

void Evaluator::bucketGathers(const ScheduleKnobs &knobs,
                              Simulation &sim) const {
  std::vector<Collective> &gathers = sim.gathers;
  std::vector<size_t> &order = sim.order;
  order.resize(gathers.size());
  for (size_t k = 0; k < order.size(); ++k)
    order[k] = k;
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return gathers[a].issue < gathers[b].issue;
  });
  // Buckets: consecutive gathers of one phase, together at most B bytes,
  // start with the first and pay one latency.
  if (knobs.bucketBytes > 0) {
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      int64_t total = 0;
      while (j < order.size() &&
             gathers[order[j]].forward == gathers[order[i]].forward &&
             total + gathers[order[j]].bytes <= knobs.bucketBytes)
        total += gathers[order[j++]].bytes;
      if (j - i >= 2)
        for (size_t m = i; m < j; ++m) {
          gathers[order[m]].bucket = static_cast<int>(i);
          gathers[order[m]].issue = gathers[order[i]].issue;
        }
      i = std::max(j, i + 1);
    }
  }
  for (const Collective &g : gathers)
    addLive(sim, g.issue, g.release, g.bytes);
}

void Evaluator::collectReductions(Simulation &sim) const {
  // After a unit's last gradient contribution (the backward of its first
  // use), in that order.
  const int optimizer = optimizerPosition();
  const int64_t states = options.optimizerStates;
  int64_t largestShard = 0;
  for (auto [i, u] : llvm::enumerate(sim.units)) {
    if (!u.trainable || u.first > u.last)
      continue;
    Collective r;
    r.unit = static_cast<int>(i);
    r.issue = mirror(u.first);
    r.bytes =
        u.padded * (options.reduceBytes ? options.reduceBytes : u.elementBytes);
    bool allReduce = u.strategy == ShardingStrategy::NO_SHARD;
    int64_t ranks = allReduce ? options.worldSize : u.group;
    bool inner = allReduce ? options.meshShape.size() < 2 : true;
    r.seconds = options.cost.ringSeconds(r.bytes, ranks, intra(ranks, inner),
                                         allReduce);
    r.bandwidthSeconds = options.cost.ringSeconds(
        r.bytes, ranks, intra(ranks, inner), allReduce, false);
    if (u.strategy == ShardingStrategy::HYBRID_SHARD && options.meshShape.size() == 2) {
      double across = options.cost.ringSeconds(
          r.bytes / u.group, options.meshShape[0], false, true);
      r.seconds += across;
      r.bandwidthSeconds += across;
    }
    sim.reductions.push_back(r);
    // Per-parameter gradients from the backward of each one's last use
    // to the pack; the reduced shard (the whole gradient for NO_SHARD)
    // until the optimizer.
    for (int p : u.params) {
      const WrapProfile::Param &param = profile.params[p];
      if (param.lastUse >= 0)
        addLive(sim, mirror(param.lastUse), r.issue,
                param.numel * param.elementBytes);
    }
    const int64_t shardBytes = u.padded / u.group * u.elementBytes;
    addLive(sim, r.issue, optimizer, shardBytes);
    // The optimizer's results (the new shard and state) are new values
    // until the step ends, beside the update's temporaries (about two
    // shard-sized values of the unit being updated).
    addLive(sim, optimizer, optimizer, shardBytes * (1 + states));
    largestShard = std::max(largestShard, shardBytes);
  }
  addLive(sim, optimizer, optimizer, 2 * largestShard);
  llvm::stable_sort(sim.reductions,
                    [](const Collective &a, const Collective &b) {
                      return a.issue < b.issue;
                    });
}

void Evaluator::bucketReductions(const ScheduleKnobs &knobs,
                                 Simulation &sim) const {
  std::vector<Collective> &reductions = sim.reductions;
  if (knobs.bucketBytes > 0) {
    for (size_t i = 0; i < reductions.size();) {
      size_t j = i;
      int64_t total = 0;
      while (j < reductions.size() &&
             total + reductions[j].bytes <= knobs.bucketBytes)
        total += reductions[j++].bytes;
      if (j - i >= 2)
        for (size_t m = i; m < j; ++m) {
          reductions[m].bucket = static_cast<int>(i);
          reductions[m].issue = reductions[j - 1].issue;
        }
      i = std::max(j, i + 1);
    }
  }
  // A flat gradient lives until its reduction is waited for: where the
  // next reduction (bucket) starts, or before the optimizer.
  for (size_t k = 0; k < reductions.size(); ++k) {
    size_t next = k + 1;
    while (next < reductions.size() && reductions[k].bucket >= 0 &&
           reductions[next].bucket == reductions[k].bucket)
      ++next;
    int waited = next < reductions.size() ? reductions[next].issue
                                          : optimizerPosition() - 1;
    addLive(sim, reductions[k].issue, waited, reductions[k].bytes);
  }
}

Streams Evaluator::runStreams(Simulation &sim) const {
  // On the CPU runtime an issued collective runs only once the compute
  // stream waits for it (or for one issued after it).
  std::vector<Collective> &gathers = sim.gathers;
  std::vector<Collective> &reductions = sim.reductions;
  const std::vector<size_t> &order = sim.order;
  Streams clock;
  double &compute = clock.compute, &comm = clock.comm;
  const bool overlap = !options.cost.cpuRuntime;
  std::vector<Collective *> queued; // issued in order; [head, end) not run
  size_t head = 0;
  int lastBucket = -1;
  auto run = [&](Collective &c) {
    bool grouped = c.bucket >= 0 && c.bucket == lastBucket && overlap;
    lastBucket = c.bucket;
    double begin = std::max(comm, compute);
    comm = begin + (grouped ? c.bandwidthSeconds : c.seconds);
    c.done = comm;
  };
  auto issue = [&](Collective &c) {
    c.done = -1;
    if (overlap)
      run(c);
    else
      queued.push_back(&c);
  };
  auto waitFor = [&](Collective &c) {
    while (c.done < 0 && head < queued.size())
      run(*queued[head++]);
    compute = std::max(compute, c.done);
  };
  size_t nextIssue = 0, nextReduction = 0, nextNeed = 0;
  Collective *pendingReduction = nullptr;
  int pendingBucket = -3;
  for (int p = 0; p < positions; ++p) {
    if (options.training && p == optimizerPosition()) {
      if (pendingReduction)
        waitFor(*pendingReduction);
      break;
    }
    while (nextIssue < order.size() && gathers[order[nextIssue]].issue <= p)
      issue(gathers[order[nextIssue++]]);
    while (nextNeed < gathers.size() && gathers[nextNeed].need <= p)
      waitFor(gathers[nextNeed++]);
    compute += cost[p];
    while (nextReduction < reductions.size() &&
           reductions[nextReduction].issue <= p) {
      Collective &r = reductions[nextReduction++];
      int bucket = r.bucket;
      if (pendingReduction && (bucket < 0 || bucket != pendingBucket))
        waitFor(*pendingReduction);
      issue(r);
      pendingReduction = &r;
      pendingBucket = bucket;
    }
  }
  while (head < queued.size()) // never waited for: after the compute
    run(*queued[head++]);
  return clock;
}

double Evaluator::stepSeconds(const Simulation &sim, Streams streams) const {
  double compute = streams.compute, comm = streams.comm;
  if (options.training) {
    // The optimizer: elementwise over each unit's shard (parameter,
    // gradient, states read; parameter and states written).
    int64_t bytes = 0;
    for (const Unit &u : sim.units)
      if (u.trainable)
        bytes += u.padded / u.group * u.elementBytes;
    compute += static_cast<double>(bytes) * (3 + 2 * options.optimizerStates) /
               options.cost.memoryBandwidth;
    // Clipping: each sharded unit's sum of squares, all-reduced at once.
    if (options.clipping)
      for (const Unit &u : sim.units)
        if (u.trainable && u.group > 1)
          compute = std::max(compute, comm) +
                    options.cost.ringSeconds(4, u.group, intra(u.group, true),
                                             /*allReduce=*/true);
  }
  return std::max(compute, comm);
}

std::string Evaluator::placeName(const Simulation &sim, int p) const {
  if (options.training && p == optimizerPosition())
    return "the optimizer step";
  bool backward = p >= static_cast<int>(profile.stretches.size());
  int stretch = backward ? mirror(p) : p;
  // The unit whose parameters the stretch reads.
  std::string where = "(root)";
  for (const Unit &u : sim.units)
    if (u.first <= stretch && stretch <= u.last &&
        (where == "(root)" || u.module != 0))
      where = u.module ? "'" + profile.modules[u.module].fqn + "'" : where;
  return std::string(backward ? "the backward" : "the forward") + " in unit " +
         where;
}

void Evaluator::explainPeak(const Simulation &sim,
                            WrapEvaluation &result) const {
  int64_t live = 0;
  int peakAt = 0;
  for (int p = 0; p < positions; ++p) {
    live += sim.mem[p];
    if (live > result.peakBytes) {
      result.peakBytes = live;
      peakAt = p;
    }
  }
  result.peakBytes += sim.state;
  result.peakAt = placeName(sim, peakAt);
  int64_t activations = 0;
  for (int p = 0; p <= peakAt; ++p)
    activations += base[p];
  result.peakParts.push_back({"activations", activations});
  result.peakParts.push_back({"state (shards, optimizer state, buffers, "
                              "inputs)",
                              sim.state});
  std::map<int, int64_t> perUnit;
  for (const Collective &g : sim.gathers)
    if (g.issue <= peakAt && peakAt <= g.release)
      perUnit[g.unit] += g.bytes;
  for (const Collective &r : sim.reductions)
    if (r.issue <= peakAt)
      perUnit[r.unit] += r.bytes; // approximate: flat gradient or its shard
  std::vector<std::pair<int64_t, int>> ranked;
  for (auto [unit, bytes] : perUnit)
    ranked.push_back({bytes, unit});
  llvm::sort(ranked, std::greater<>());
  for (auto [bytes, unit] : llvm::ArrayRef(ranked).take_front(4)) {
    const std::string &fqn = profile.modules[sim.units[unit].module].fqn;
    result.peakParts.push_back(
        {"unit " + (fqn.empty() ? std::string("(root)") : "'" + fqn + "'") +
             " (gathered parameters, gradients)",
         bytes});
  }
}

} // namespace

WrapEvaluation mlir::fsdp::evaluateWrap(const WrapProfile &profile,
                                        const WrapSearchOptions &options,
                                        const WrapConfig &config) {
  return Evaluator(profile, options).evaluate(config);
}

//===----------------------------------------------------------------------===//
// Search
//===----------------------------------------------------------------------===//

namespace {

struct Scored {
  WrapConfig config;
  WrapEvaluation eval;
};

class Searcher {
public:
  Searcher(const WrapProfile &profile, const WrapSearchOptions &options)
      : profile(profile), options(options), evaluator(profile, options) {}

  WrapSearchResult run(const std::vector<WrapConfig> &hand);

private:
  bool fits(const WrapEvaluation &e) const {
    return e.valid && options.fits(e.peakBytes);
  }
  /// Whether `a` is a better choice than `b`: fitting before not, then
  /// faster (fitting) or smaller (not fitting).
  bool better(const WrapEvaluation &a, const WrapEvaluation &b) const {
    if (!a.valid || !b.valid)
      return a.valid && !b.valid;
    if (fits(a) != fits(b))
      return fits(a);
    if (fits(a))
      return a.stepSeconds < b.stepSeconds * (1 - 1e-9) ||
             (a.stepSeconds <= b.stepSeconds && a.peakBytes < b.peakBytes);
    return a.peakBytes < b.peakBytes;
  }
  WrapEvaluation evaluate(const WrapConfig &config) {
    ++evaluated;
    return evaluator.evaluate(config);
  }
  /// Greedy per-group strategy changes while they help.
  Scored improveStrategies(Scored current);
  Scored tuneKnobs(Scored current);

  const WrapProfile &profile;
  const WrapSearchOptions &options;
  Evaluator evaluator;
  int64_t evaluated = 0;
};

Scored Searcher::improveStrategies(Scored current) {
  if (options.strategies.size() < 2)
    return current;
  // Groups of identical units: same class and size, in forward order.
  std::map<std::pair<std::string, int64_t>, std::vector<int>> groups;
  for (size_t m = 0; m < profile.modules.size(); ++m)
    if (current.config.wrapped[m])
      groups[{m == 0 ? std::string("\x01root") : profile.modules[m].className,
              profile.modules[m].subtreeNumel}]
          .push_back(static_cast<int>(m));
  for (int round = 0; round < 8; ++round) {
    Scored best = current;
    for (auto &[key, members] : groups) {
      int n = static_cast<int>(members.size());
      std::vector<int> counts = {n};
      if (n >= 4)
        counts.insert(counts.end(), {n / 4, n / 2, 3 * n / 4});
      for (ShardingStrategy strategy : options.strategies)
        for (int count : counts) {
          WrapConfig candidate = current.config;
          bool changed = false;
          for (int i = n - count; i < n; ++i) {
            changed |= candidate.strategy[members[i]] != strategy;
            candidate.strategy[members[i]] = strategy;
          }
          if (!changed)
            continue;
          WrapEvaluation e = evaluate(candidate);
          if (better(e, best.eval))
            best = {candidate, e};
        }
    }
    if (!better(best.eval, current.eval))
      break;
    current = best;
  }
  return current;
}

Scored Searcher::tuneKnobs(Scored current) {
  Scored best = current;
  for (bool forward : {true, false})
    for (const char *backward : {"pre", "post", "none"})
      for (int64_t limit : {1, 2, 4, 0})
        for (int64_t bucket :
             {int64_t(0), int64_t(1) << 20, int64_t(25) << 20}) {
          WrapConfig candidate = current.config;
          candidate.knobs = {forward, backward, limit, bucket};
          WrapEvaluation e = evaluate(candidate);
          if (better(e, best.eval))
            best = {candidate, e};
        }
  return best;
}

WrapSearchResult Searcher::run(const std::vector<WrapConfig> &hand) {
  WrapSearchResult result;
  std::set<std::vector<char>> seen;
  std::vector<Scored> pool;
  auto consider = [&](WrapConfig config) {
    keepTiesTogether(profile, config.wrapped);
    if (!seen.insert(config.wrapped).second)
      return;
    Scored s{config, evaluate(config)};
    if (!s.eval.valid)
      return;
    pool.push_back(improveStrategies(s));
  };
  for (const WrapConfig &config : hand) {
    result.hand.push_back({config, evaluate(config)});
    // The hand policy's units with each strategy throughout, as a user
    // would try them, are candidates as they are.
    for (ShardingStrategy strategy : options.strategies) {
      WrapConfig uniform = config;
      keepTiesTogether(profile, uniform.wrapped);
      uniform.strategy.assign(uniform.strategy.size(), strategy);
      WrapEvaluation e = evaluate(uniform);
      if (e.valid)
        pool.push_back({uniform, e});
    }
    consider(config);
  }
  // Boundary sets by class: the classes of eligible modules, at most the
  // 10 covering the most parameters (all 2^k subsets of them).
  std::map<std::string, int64_t> coverage;
  for (const WrapProfile::Module &m : profile.modules)
    if (m.eligible)
      coverage[m.className] += m.subtreeNumel;
  std::vector<std::pair<int64_t, std::string>> classes;
  for (auto &[name, numel] : coverage)
    classes.push_back({numel, name});
  llvm::sort(classes, std::greater<>());
  if (classes.size() > 10)
    classes.resize(10);
  WrapConfig seed;
  seed.name = "auto";
  seed.wrapped.assign(profile.modules.size(), 0);
  seed.strategy.assign(profile.modules.size(), options.strategies.front());
  for (uint32_t subset = 0; subset < (1u << classes.size()); ++subset) {
    WrapConfig config = seed;
    config.wrapped[0] = 1;
    for (size_t m = 1; m < profile.modules.size(); ++m) {
      if (!profile.modules[m].eligible)
        continue;
      for (size_t c = 0; c < classes.size(); ++c)
        if ((subset >> c & 1) &&
            classes[c].second == profile.modules[m].className)
          config.wrapped[m] = 1;
    }
    consider(config);
  }
  result.boundaries = static_cast<int64_t>(seen.size());
  if (pool.empty()) {
    result.evaluated = evaluated;
    return result;
  }
  llvm::stable_sort(pool, [&](const Scored &a, const Scored &b) {
    return better(a.eval, b.eval);
  });
  // The schedule for the best few, then strategies again under it.
  Scored best = pool.front();
  for (size_t i = 0; i < std::min<size_t>(3, pool.size()); ++i) {
    Scored tuned = improveStrategies(tuneKnobs(pool[i]));
    if (better(tuned.eval, best.eval))
      best = tuned;
  }
  best.config.name = "auto";
  result.chosen = best.config;
  result.chosenEvaluation = best.eval;
  result.fits = fits(best.eval);
  result.evaluated = evaluated;
  return result;
}

} // namespace

WrapSearchResult mlir::fsdp::searchWrap(const WrapProfile &profile,
                                        const WrapSearchOptions &options,
                                        const std::vector<WrapConfig> &hand) {
  return Searcher(profile, options).run(hand);
}
