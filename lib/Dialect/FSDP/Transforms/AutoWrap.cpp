//===- AutoWrap.cpp - PyTorch FSDP auto-wrap over the module tree ---------===//
//
/// Reproduces torch 1.13's `_recursive_wrap`: for each module (starting at
/// the root's children), ask the policy with `recurse=true` and the module's
/// total parameter count whether to descend; after the children, ask with
/// `recurse=false` and the count the children did not wrap whether to wrap
/// the module itself. The root is always a unit. Parameters then go to the
/// innermost unit whose subtree holds them, visiting units children-first as
/// PyTorch constructs them, so a parent's flat buffer gets what is left.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/CostModel.h"
#include "fsdp/Dialect/FSDP/Analysis/WrapSearch.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Support/Files.h"
#include "fsdp/Support/JSON.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_AUTOWRAP
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The module tree with the parameters resolved to their fsdp.param ops.
struct Model {
  ModuleOp module;
  SmallVector<ModuleAttr> modules; // named_modules() order
  llvm::StringMap<unsigned> index; // FQN -> position in `modules`
  llvm::StringMap<ParamOp> params; // every name (canonical or alias) -> op

  ModuleAttr get(StringRef fqn) const { return modules[index.lookup(fqn)]; }

  SmallVector<StringRef> children(StringRef fqn) const {
    return stringsOf(get(fqn).getChildren());
  }
};

int64_t numel(ParamOp param) { return param.getTensorType().getNumElements(); }

std::string quoted(StringRef fqn) {
  return fqn.empty() ? "(root)" : "'" + fqn.str() + "'";
}

/// A unit's settings as the options or the policy file give them, before
/// they become its `#fsdp.unit_config`; a null field was not given.
struct UnitSettings {
  ShardingStrategyAttr strategy;
  Type paramDtype, reduceDtype, bufferDtype;
  BoolAttr mixedPrecision;

  /// The field of the dtype setting `name`, null if `name` is none.
  Type *dtype(StringRef name) {
    return llvm::StringSwitch<Type *>(name)
        .Case("param_dtype", &paramDtype)
        .Case("reduce_dtype", &reduceDtype)
        .Case("buffer_dtype", &bufferDtype)
        .Default(nullptr);
  }
  /// Takes every setting `other` gives.
  void overrideWith(const UnitSettings &other) {
    strategy = other.strategy ? other.strategy : strategy;
    paramDtype = other.paramDtype ? other.paramDtype : paramDtype;
    reduceDtype = other.reduceDtype ? other.reduceDtype : reduceDtype;
    bufferDtype = other.bufferDtype ? other.bufferDtype : bufferDtype;
    mixedPrecision =
        other.mixedPrecision ? other.mixedPrecision : mixedPrecision;
  }
  /// The configuration, null where nothing is given (PyTorch's defaults).
  UnitConfigAttr get(MLIRContext *context) const {
    if (!strategy && !paramDtype && !reduceDtype && !bufferDtype &&
        !mixedPrecision)
      return UnitConfigAttr();
    return UnitConfigAttr::get(context, strategy, paramDtype, reduceDtype,
                               bufferDtype, mixedPrecision);
  }
};

struct AutoWrapPass : mlir::fsdp::impl::AutoWrapBase<AutoWrapPass> {
  using AutoWrapBase::AutoWrapBase;

  void runOnOperation() override;

private:
  /// Clears what the previous run left (a pass instance may run again).
  void reset();
  LogicalResult loadModel();
  LogicalResult loadPolicy();
  bool policy(StringRef fqn, bool recurse, int64_t unwrapped);
  /// size_based_auto_wrap_policy's answer for a module of `className`.
  bool sizeBased(StringRef className, bool recurse, int64_t unwrapped,
                 int64_t minimum) const;
  /// The subtree's parameters, as PyTorch's `module.parameters()` minus
  /// ignored ones: pre-order, each tensor once.
  llvm::SetVector<Operation *> subtreeParams(StringRef fqn);
  int64_t subtreeNumel(StringRef fqn);
  int64_t recursiveWrap(StringRef fqn, bool onlyWrapChildren);
  void wrapFrozenModules();
  bool isIgnoredModule(StringRef fqn) const;

  LogicalResult loadConfig();
  /// policy=auto: searches the units, strategies and schedule and records
  /// them (`wrapped`, `autoStrategy`, `fsdp.auto_wrap`).
  LogicalResult chooseAuto();
  /// policy=auto's options (the mesh, budget and cost model), checked.
  LogicalResult loadSearchOptions(WrapSearchOptions &options);
  /// The hand policies a PyTorch user would write (no wrapping, the layer
  /// class, sizes from 1e3 to 1e10), for the search to compare against;
  /// those giving the units of one before go to `sameUnits` instead.
  std::vector<WrapConfig>
  handPolicies(const WrapProfile &profile, ShardingStrategy baseStrategy,
               SmallVectorImpl<std::pair<std::string, std::string>> &sameUnits);
  /// The innermost unit holding module `fqn` (the root at worst).
  StringRef unitOf(StringRef fqn) const;
  /// A tied parameter whose holders sit in two units would be flattened
  /// twice (torch 1.13 does so silently): refused at the parameter.
  LogicalResult
  checkTiedParams(const llvm::DenseMap<Operation *, std::string> &owner);
  /// Uniform requires_grad per unit (a warning with use-orig-params).
  LogicalResult
  checkUniformGrad(const llvm::StringMap<SmallVector<ParamOp>> &unitParams);
  /// The configuration of the unit wrapping `fqn` (null: PyTorch's
  /// defaults).
  UnitConfigAttr unitConfig(StringRef fqn);

  Model model;
  llvm::StringSet<> policySet, forceLeaf, excludeWrap, layers, fullPrecision;
  /// Per-module settings from the policy file, by module FQN.
  llvm::StringMap<UnitSettings> overrides;
  /// Every unit's settings, from the pass's options.
  UnitSettings baseConfig;
  bool mixedPrecision = false;
  unsigned fullPrecisionUnits = 0;
  std::shared_ptr<llvm::Regex> regex; // Shared: passes must be copyable.
  llvm::DenseSet<Operation *> ignored;
  llvm::StringSet<> wrapped;
  llvm::StringMap<ShardingStrategy> autoStrategy; // policy=auto's, per unit
};

LogicalResult AutoWrapPass::loadModel() {
  model.module = getOperation();
  FailureOr<SmallVector<ModuleAttr>> tree = getModuleTree(model.module);
  if (failed(tree))
    return failure();
  model.modules = std::move(*tree);
  for (auto [i, module] : llvm::enumerate(model.modules))
    model.index[module.getFqn()] = i;
  for (ParamOp param : model.module.getOps<ParamOp>()) {
    model.params[param.getSymName()] = param;
    if (std::optional<ArrayAttr> aliases = param.getAliases())
      for (StringAttr alias : aliases->getAsRange<StringAttr>())
        model.params[alias.getValue()] = param;
  }
  return success();
}

LogicalResult AutoWrapPass::loadPolicy() {
  ModuleOp module = getOperation();
  if (policies.empty())
    return emitError(module.getLoc())
           << "give a policy (none, size, transformer, regex, "
              "auto)";
  for (const std::string &name : policies) {
    if (name != "none" && name != "size" && name != "transformer" &&
        name != "regex" && name != "auto")
      return emitError(module.getLoc())
             << "unknown policy '" << name
             << "'; known: none, size, transformer, regex, auto";
    policySet.insert(name);
  }
  if (policySet.contains("auto") && policies.size() > 1)
    return emitError(module.getLoc())
           << "policy=auto chooses the units itself; it "
              "cannot be or-composed with other policies";
  if (policySet.contains("transformer") && layerClasses.empty())
    return emitError(module.getLoc()) << "policy 'transformer' needs "
                                         "layer-classes=<module class names>";
  if (policySet.contains("regex")) {
    if (pattern.empty())
      return emitError(module.getLoc())
             << "policy 'regex' needs pattern=<regex>";
    regex = std::make_shared<llvm::Regex>("^(" + pattern + ")$");
    std::string error;
    if (!regex->isValid(error))
      return emitError(module.getLoc())
             << "invalid pattern '" << pattern << "': " << error;
  }
  SmallVector<std::string> leafNames = {"MultiheadAttention"};
  SmallVector<std::string> excludeNames = {"ModuleList", "ModuleDict"};
  if (!forceLeafClasses.empty())
    leafNames.assign(forceLeafClasses.begin(), forceLeafClasses.end());
  if (!excludeWrapClasses.empty())
    excludeNames.assign(excludeWrapClasses.begin(), excludeWrapClasses.end());
  for (const std::string &name : leafNames)
    forceLeaf.insert(name);
  for (const std::string &name : excludeNames)
    excludeWrap.insert(name);
  for (const std::string &name : layerClasses)
    layers.insert(name);
  if (!layers.empty() && llvm::none_of(model.modules, [&](ModuleAttr module) {
        return layers.contains(module.getClassName());
      }))
    emitWarning(module.getLoc())
        << "no module has a class in layer-classes ("
        << llvm::join(layerClasses, ", ")
        << "); was the model exported without class names?";

  for (const std::string &fqn : ignoredModules) {
    if (!model.index.count(fqn) || fqn.empty())
      return emitError(module.getLoc()) << "ignored module '" << fqn
                                        << "' is not a submodule of the model";
  }
  for (const std::string &fqn : ignoredParams) {
    ParamOp param = model.params.lookup(fqn);
    if (!param)
      return emitError(module.getLoc()) << "ignored parameter '" << fqn
                                        << "' is not a parameter of the model";
    ignored.insert(param);
  }
  for (ModuleAttr module : model.modules)
    if (isIgnoredModule(module.getFqn()))
      for (StringRef name : stringsOf(module.getParams()))
        if (ParamOp param = model.params.lookup(name))
          ignored.insert(param);
  return success();
}

bool AutoWrapPass::isIgnoredModule(StringRef fqn) const {
  for (const std::string &ignoredFqn : ignoredModules)
    if (fqn == ignoredFqn ||
        (fqn.starts_with(ignoredFqn) && fqn[ignoredFqn.size()] == '.'))
      return true;
  return false;
}

bool AutoWrapPass::sizeBased(StringRef className, bool recurse,
                             int64_t unwrapped, int64_t minimum) const {
  bool large = unwrapped >= minimum;
  return recurse ? large && !forceLeaf.contains(className)
                 : large && !excludeWrap.contains(className);
}

bool AutoWrapPass::policy(StringRef fqn, bool recurse, int64_t unwrapped) {
  StringRef className = model.get(fqn).getClassName();
  bool result = false;
  if (policySet.contains("size"))
    result |= sizeBased(className, recurse, unwrapped, minNumParams);
  if (policySet.contains("transformer"))
    result |= recurse || layers.contains(className);
  if (policySet.contains("regex"))
    result |= recurse || regex->match(fqn);
  // Modules the policy file lists, and full-precision modules under mixed
  // precision, are wrapped individually (or-composed, as PyTorch does).
  if (!overrides.empty() || (mixedPrecision && !fullPrecision.empty()))
    result |= recurse || overrides.count(fqn) ||
              (mixedPrecision && fullPrecision.contains(className));
  return result;
}

llvm::SetVector<Operation *> AutoWrapPass::subtreeParams(StringRef fqn) {
  llvm::SetVector<Operation *> result;
  SmallVector<StringRef> stack = {fqn};
  while (!stack.empty()) {
    StringRef current = stack.pop_back_val();
    for (StringRef name : stringsOf(model.get(current).getParams()))
      if (ParamOp param = model.params.lookup(name))
        if (!ignored.contains(param))
          result.insert(param);
    SmallVector<StringRef> children = model.children(current);
    for (StringRef child : llvm::reverse(children))
      stack.push_back(child);
  }
  return result;
}

/// `wrap-frozen`: a frozen backbone (or any frozen submodule) next to
/// trainable modules would make its unit mix the two, which one flat buffer
/// cannot hold; the largest frozen subtrees become units of their own.
void AutoWrapPass::wrapFrozenModules() {
  auto allFrozen = [&](StringRef fqn) {
    llvm::SetVector<Operation *> params = subtreeParams(fqn);
    return !params.empty() && llvm::none_of(params, [](Operation *param) {
      return cast<ParamOp>(param).requiresGrad();
    });
  };
  // A frozen subtree's parent holds trainable parameters exactly when the
  // subtree is a largest frozen one.
  for (ModuleAttr moduleAttr : model.modules) {
    StringRef fqn = moduleAttr.getFqn();
    if (!fqn.empty() && !isIgnoredModule(fqn) && allFrozen(fqn) &&
        !allFrozen(parentOf(fqn)))
      wrapped.insert(fqn);
  }
}

int64_t AutoWrapPass::subtreeNumel(StringRef fqn) {
  int64_t total = 0;
  for (Operation *param : subtreeParams(fqn))
    total += numel(cast<ParamOp>(param));
  return total;
}

int64_t AutoWrapPass::recursiveWrap(StringRef fqn, bool onlyWrapChildren) {
  int64_t count = subtreeNumel(fqn);
  if (!policy(fqn, /*recurse=*/true, count))
    return 0;
  int64_t wrappedCount = 0;
  for (StringRef child : model.children(fqn))
    if (!isIgnoredModule(child))
      wrappedCount += recursiveWrap(child, /*onlyWrapChildren=*/false);
  if (!onlyWrapChildren &&
      policy(fqn, /*recurse=*/false, count - wrappedCount)) {
    wrapped.insert(fqn);
    return count;
  }
  return wrappedCount;
}

static bool isStrategy(StringRef name) {
  return symbolizeShardingStrategy(name).has_value();
}

LogicalResult AutoWrapPass::loadConfig() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  if (!isStrategy(strategy))
    return emitError(module.getLoc()) << "unknown strategy '" << strategy
                                      << "'; known: FULL_SHARD, SHARD_GRAD_OP, "
                                         "NO_SHARD, HYBRID_SHARD";
  // Only what differs from PyTorch's defaults is recorded.
  if (strategy != "FULL_SHARD")
    baseConfig.strategy = ShardingStrategyAttr::get(
        context, *symbolizeShardingStrategy(strategy));
  for (auto [key, value, slot] :
       {std::tuple<StringRef, StringRef, Type *>{"param_dtype", paramDtype,
                                                 &baseConfig.paramDtype},
        {"reduce_dtype", reduceDtype, &baseConfig.reduceDtype},
        {"buffer_dtype", bufferDtype, &baseConfig.bufferDtype}}) {
    FailureOr<Type> type = parseFloatDtype(context, value);
    if (failed(type))
      return emitError(module.getLoc())
             << key << " '" << value << "' is not one of f32, f16, bf16";
    if (*type) {
      *slot = *type;
      mixedPrecision = true;
    }
  }
  SmallVector<std::string> classes = {"BatchNorm1d", "BatchNorm2d",
                                      "BatchNorm3d", "SyncBatchNorm"};
  if (!fullPrecisionClasses.empty())
    classes.assign(fullPrecisionClasses.begin(), fullPrecisionClasses.end());
  for (const std::string &name : classes)
    fullPrecision.insert(name);

  if (policyFile.empty())
    return success();
  auto fail = [&](const Twine &message) {
    return emitError(module.getLoc())
           << "policy file '" << policyFile << "': " << message;
  };
  if (std::string why = checkRegularFile(policyFile); !why.empty())
    return fail(why);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(policyFile);
  if (!text)
    return fail(text.getError().message());
  if (std::string why = checkJSONBounds((*text)->getBuffer()); !why.empty())
    return fail(why);
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*text)->getBuffer());
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  llvm::json::Object *root = parsed->getAsObject();
  llvm::json::Object *modules = root ? root->getObject("modules") : nullptr;
  if (!modules || root->size() != 1)
    return fail("expected {\"modules\": {\"<module FQN>\": {settings}}}");
  for (auto &[key, value] : *modules) {
    StringRef fqn = key;
    if (!model.index.count(fqn))
      return fail("module '" + fqn + "' is not a submodule of the model");
    if (isIgnoredModule(fqn))
      return fail("module '" + fqn + "' is ignored and cannot be wrapped");
    llvm::json::Object *settings = value.getAsObject();
    if (!settings)
      return fail("the settings of module '" + fqn + "' are not an object");
    UnitSettings &config = overrides[fqn];
    for (auto &[setting, settingValue] : *settings) {
      std::optional<StringRef> text = settingValue.getAsString();
      if (!text)
        return fail("module '" + fqn + "': '" + StringRef(setting) +
                    "' must be a string");
      if (setting == "strategy") {
        if (!isStrategy(*text))
          return fail("module '" + fqn + "': unknown strategy '" + *text + "'");
        config.strategy = ShardingStrategyAttr::get(
            context, *symbolizeShardingStrategy(*text));
      } else if (Type *slot = config.dtype(setting)) {
        FailureOr<Type> type = parseFloatDtype(context, *text);
        if (failed(type) || !*type)
          return fail("module '" + fqn + "': " + StringRef(setting) + " '" +
                      *text + "' is not one of f32, f16, bf16");
        *slot = *type;
      } else {
        return fail("module '" + fqn + "': unknown setting '" +
                    StringRef(setting) +
                    "' (known: strategy, param_dtype, reduce_dtype, "
                    "buffer_dtype)");
      }
    }
  }
  return success();
}

UnitConfigAttr AutoWrapPass::unitConfig(StringRef fqn) {
  UnitSettings config = baseConfig;
  StringRef className = model.get(fqn).getClassName();
  if (mixedPrecision && fullPrecision.contains(className) && !fqn.empty()) {
    config.paramDtype = config.reduceDtype = config.bufferDtype = Type();
    config.mixedPrecision = BoolAttr::get(&getContext(), false);
    ++fullPrecisionUnits;
  }
  auto found = overrides.find(fqn);
  if (found != overrides.end())
    config.overrideWith(found->second);
  auto chosen = autoStrategy.find(fqn);
  if (chosen != autoStrategy.end())
    config.strategy =
        chosen->second == ShardingStrategy::FULL_SHARD
            ? ShardingStrategyAttr()
            : ShardingStrategyAttr::get(&getContext(), chosen->second);
  return config.get(&getContext());
}

/// Parses a byte count with an optional K, M, G or T suffix (powers of
/// 1024).
static std::optional<int64_t> parseBytes(StringRef text) {
  text = text.trim();
  int64_t scale = 1;
  size_t unit = text.empty()
                    ? StringRef::npos
                    : StringRef("KMGT").find(llvm::toUpper(text.back()));
  if (unit != StringRef::npos) {
    scale = int64_t(1) << (10 * (unit + 1));
    text = text.drop_back();
  }
  double value;
  if (text.empty() || text.getAsDouble(value) || value < 0 ||
      value * scale > 9.2e18)
    return std::nullopt;
  return static_cast<int64_t>(value * scale);
}

LogicalResult AutoWrapPass::loadSearchOptions(WrapSearchOptions &options) {
  auto fail = [&](const Twine &message) {
    return emitError(getOperation().getLoc()) << "policy=auto: " << message;
  };
  if (!policyFile.empty())
    return fail("policy-file cannot be combined with policy=auto");
  if (!meshShape.empty()) {
    if (meshShape.size() != 2 || meshShape[0] < 1 || meshShape[1] < 1)
      return fail("mesh-shape takes two positive sizes, "
                  "<groups>,<ranks per group>");
    options.meshShape.assign(meshShape.begin(), meshShape.end());
    int64_t world = meshShape[0] * meshShape[1];
    if (worldSize != 0 && worldSize != world)
      return fail("world-size=" + Twine(worldSize) + " differs from the " +
                  Twine(world) + " ranks of mesh-shape");
    options.worldSize = world;
  } else {
    if (worldSize < 1)
      return fail("give the ranks to shard over: world-size=N (or "
                  "mesh-shape=<groups>,<ranks per group>)");
    options.worldSize = worldSize;
  }
  if (!memoryBudget.empty()) {
    std::optional<int64_t> budget = parseBytes(memoryBudget);
    if (!budget || *budget == 0)
      return fail("memory-budget '" + memoryBudget +
                  "' is not a positive byte count (e.g. 80G, 512M, 1000000)");
    options.memoryBudget = *budget;
  }
  if (optimizerStates < 0)
    return fail("optimizer-states must be >= 0");
  if (memoryReserve < 0 || memoryReserve >= 10)
    return fail("memory-reserve must be a fraction >= 0 (0.1: 10%)");
  options.memoryReserve = memoryReserve;
  options.training = training;
  options.optimizerStates = optimizerStates;
  options.clipping = clipping;
  options.cost = {peakFlops,      memoryBandwidth, intraBandwidth, intraLatency,
                  interBandwidth, interLatency,    ranksPerNode, cpuRuntime};
  const CostModel &cost = options.cost;
  if (cost.peakFlops <= 0 || cost.memoryBandwidth <= 0 ||
      cost.intraBandwidth <= 0 || cost.interBandwidth <= 0 ||
      cost.intraLatency < 0 || cost.interLatency < 0 || cost.ranksPerNode < 1)
    return fail("the cost model needs positive peaks and bandwidths, "
                "non-negative latencies and ranks-per-node >= 1");
  auto dtypeBytes = [&](StringRef name) -> int64_t {
    FailureOr<Type> type = parseFloatDtype(&getContext(), name);
    return succeeded(type) && *type ? elementBytes(*type) : 0;
  };
  options.useOrigParams = useOrigParams;
  options.paramBytes = dtypeBytes(paramDtype);
  options.reduceBytes =
      dtypeBytes(reduceDtype.empty() ? paramDtype : reduceDtype);
  // loadConfig has checked the name.
  options.baseStrategy = *symbolizeShardingStrategy(strategy);
  if (strategy.hasValue()) {
    options.strategies = {options.baseStrategy};
  } else {
    options.strategies = {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP,
                          ShardingStrategy::NO_SHARD};
    if (options.meshShape.size() == 2)
      options.strategies.insert(options.strategies.begin() + 1,
                                ShardingStrategy::HYBRID_SHARD);
  }
  if (options.baseStrategy == ShardingStrategy::HYBRID_SHARD &&
      options.meshShape.size() != 2)
    return fail("HYBRID_SHARD needs mesh-shape=<groups>,<ranks per group>");
  return success();
}

std::vector<WrapConfig> AutoWrapPass::handPolicies(
    const WrapProfile &profile, ShardingStrategy baseStrategy,
    SmallVectorImpl<std::pair<std::string, std::string>> &sameUnits) {
  std::vector<WrapConfig> hand;
  auto handConfig = [&](std::string name, std::vector<char> units) {
    for (const WrapConfig &known : hand)
      if (known.wrapped == units) {
        sameUnits.push_back({std::move(name), known.name});
        return;
      }
    WrapConfig config;
    config.name = std::move(name);
    config.wrapped = std::move(units);
    config.strategy.assign(config.wrapped.size(), baseStrategy);
    hand.push_back(std::move(config));
  };
  std::vector<char> rootOnly(profile.modules.size(), 0);
  rootOnly[0] = 1;
  handConfig("no wrapping", rootOnly);
  SmallVector<std::string> layerNames(layerClasses.begin(),
                                      layerClasses.end());
  if (layerNames.empty()) {
    // The class repeated in a container (ModuleList): the layer.
    llvm::StringMap<std::pair<int64_t, int64_t>> repeated; // count, numel
    for (const WrapProfile::Module &m : profile.modules)
      if (m.parent >= 0 && m.eligible &&
          excludeWrap.contains(profile.modules[m.parent].className)) {
        repeated[m.className].first += 1;
        repeated[m.className].second += m.subtreeNumel;
      }
    std::pair<int64_t, std::string> best = {0, ""};
    for (auto &entry : repeated)
      if (entry.second.first >= 2 && entry.second.second > best.first)
        best = {entry.second.second, entry.getKey().str()};
    if (!best.second.empty())
      layerNames.push_back(best.second);
  }
  if (!layerNames.empty()) {
    llvm::StringSet<> classes;
    for (const std::string &name : layerNames)
      classes.insert(name);
    handConfig(
        "transformer layer-classes=" + llvm::join(layerNames, ","),
        mlir::fsdp::recursiveWrap(profile, [&](int m, bool recurse, int64_t) {
          return recurse || classes.contains(profile.modules[m].className);
        }));
  }
  for (int exponent = 3; exponent <= 10; ++exponent) {
    int64_t threshold = 1;
    for (int i = 0; i < exponent; ++i)
      threshold *= 10;
    handConfig("size min-num-params=1e" + std::to_string(exponent),
               mlir::fsdp::recursiveWrap(
                   profile, [&](int m, bool recurse, int64_t unwrapped) {
                     return sizeBased(profile.modules[m].className, recurse,
                                      unwrapped, threshold);
                   }));
  }
  return hand;
}

LogicalResult AutoWrapPass::chooseAuto() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    return emitError(module.getLoc()) << "policy=auto: " << message;
  };
  WrapSearchOptions options;
  if (failed(loadSearchOptions(options)))
    return failure();
  const CostModel &cost = options.cost;

  FailureOr<WrapProfile> profile = buildWrapProfile(
      module, model.modules,
      [&](StringRef name) {
        ParamOp param = model.params.lookup(name);
        return param && ignored.contains(param);
      },
      [&](StringRef fqn) { return isIgnoredModule(fqn); },
      [&](StringRef className) { return !excludeWrap.contains(className); },
      [&](StringRef className) { return forceLeaf.contains(className); }, cost);
  if (failed(profile))
    return failure();

  // Policies giving the units of one listed before: (policy, that one).
  SmallVector<std::pair<std::string, std::string>> sameUnits;
  std::vector<WrapConfig> hand =
      handPolicies(*profile, options.baseStrategy, sameUnits);
  WrapSearchResult result = searchWrap(*profile, options, hand);
  if (result.chosen.wrapped.empty())
    return fail("no unit boundaries are possible: without wrapping, " +
                result.hand.front().second.invalid +
                ", and so does or splits a tied parameter every set of "
                "module classes wrapped");
  const WrapEvaluation &chosen = result.chosenEvaluation;
  if (!result.fits) {
    std::string parts;
    for (auto &[name, bytes] : chosen.peakParts)
      parts += (parts.empty() ? "" : ", ") + name + " " + formatBytes(bytes);
    return fail("no configuration fits the memory budget of " +
                Twine(options.memoryBudget) + " bytes (" +
                formatBytes(options.memoryBudget) + ") per rank over " +
                Twine(options.worldSize) + " ranks; the smallest modelled peak "
                "is " + Twine(chosen.peakBytes) + " bytes (" +
                formatBytes(chosen.peakBytes) + ", " + Twine(chosen.units) +
                " units; " +
                Twine(options.reserved(chosen.peakBytes)) +
                " with the memory-reserve of " +
                Twine(static_cast<int>(options.memoryReserve * 100)) +
                "%, at least 16 KiB), reached in " + chosen.peakAt + ": " +
                parts);
  }

  for (size_t m = 0; m < profile->modules.size(); ++m)
    if (result.chosen.wrapped[m]) {
      wrapped.insert(profile->modules[m].fqn);
      autoStrategy[profile->modules[m].fqn] = result.chosen.strategy[m];
    }

  // The decision, for fsdp-schedule, fsdp-flatten and --fsdp-explain-policy.
  Builder b(&getContext());
  auto evaluation = [&](const WrapEvaluation &e, StringRef name) {
    return WrapEvaluationAttr::get(
        b.getContext(), name, e.units, b.getF64FloatAttr(e.stepSeconds),
        e.peakBytes, b.getBoolAttr(e.valid && options.fits(e.peakBytes)),
        e.valid ? StringAttr() : b.getStringAttr(e.invalid));
  };
  SmallVector<Attribute> handAttrs, parts, same;
  for (auto &[name, as] : sameUnits)
    same.push_back(SameUnitsAttr::get(b.getContext(), name, as));
  for (auto &[config, e] : result.hand)
    handAttrs.push_back(evaluation(e, config.name));
  for (auto &[name, bytes] : chosen.peakParts)
    parts.push_back(PeakPartAttr::get(b.getContext(), name, bytes));
  const ScheduleKnobs &knobs = result.chosen.knobs;
  FSDPDialect::AutoWrapAttrHelper(b.getContext())
      .setAttr(module,
               AutoWrapRecordAttr::get(
                   b.getContext(), options.worldSize,
                   options.meshShape.empty()
                       ? DenseI64ArrayAttr()
                       : b.getDenseI64ArrayAttr(options.meshShape),
                   options.memoryBudget,
                   b.getF64FloatAttr(options.memoryReserve),
                   b.getBoolAttr(options.training), options.optimizerStates,
                   evaluation(chosen, "auto"), chosen.peakAt,
                   b.getArrayAttr(parts), b.getBoolAttr(knobs.forwardPrefetch),
                   knobs.backwardPrefetch, knobs.limitAllGathers,
                   knobs.bucketBytes, result.evaluated, result.boundaries,
                   b.getArrayAttr(handAttrs), b.getArrayAttr(same),
                   options.useOrigParams ? b.getUnitAttr() : UnitAttr()));
  cost.store(module);
  return success();
}

void AutoWrapPass::reset() {
  model = Model();
  policySet.clear();
  forceLeaf.clear();
  excludeWrap.clear();
  layers.clear();
  ignored.clear();
  wrapped.clear();
  fullPrecision.clear();
  overrides.clear();
  autoStrategy.clear();
  baseConfig = UnitSettings();
  mixedPrecision = false;
  fullPrecisionUnits = 0;
}

StringRef AutoWrapPass::unitOf(StringRef fqn) const {
  StringRef unit = fqn;
  while (!wrapped.contains(unit))
    unit = parentOf(unit);
  return unit;
}

LogicalResult AutoWrapPass::checkTiedParams(
    const llvm::DenseMap<Operation *, std::string> &owner) {
  for (ModuleAttr moduleAttr : model.modules) {
    if (isIgnoredModule(moduleAttr.getFqn()))
      continue;
    for (StringRef name : stringsOf(moduleAttr.getParams())) {
      ParamOp param = model.params.lookup(name);
      if (!param || ignored.contains(param))
        continue;
      StringRef holderUnit = unitOf(moduleAttr.getFqn());
      std::string ownerUnit = owner.lookup(param);
      if (holderUnit != ownerUnit) {
        SmallVector<std::string> names = {"'" + param.getSymName().str() + "'"};
        if (std::optional<ArrayAttr> aliases = param.getAliases())
          for (StringAttr alias : aliases->getAsRange<StringAttr>())
            names.push_back("'" + alias.getValue().str() + "'");
        emitError(param.getLoc())
            << "tied parameter " << llvm::join(names, " = ")
            << " would be in two units: " << quoted(holderUnit) << " and "
            << quoted(ownerUnit)
            << "; choose a policy that wraps both holders in one unit, or "
               "ignore one of them";
        return failure();
      }
    }
  }
  return success();
}

LogicalResult AutoWrapPass::checkUniformGrad(
    const llvm::StringMap<SmallVector<ParamOp>> &unitParams) {
  for (ModuleAttr moduleAttr : model.modules) {
    auto found = unitParams.find(moduleAttr.getFqn());
    if (found == unitParams.end())
      continue;
    SmallVector<std::string> frozen, trainable;
    ParamOp firstFrozen;
    for (ParamOp param : found->second) {
      (param.requiresGrad() ? trainable : frozen)
          .push_back(param.getSymName().str() + " (" +
                     std::to_string(numel(param)) + ")");
      if (!param.requiresGrad() && !firstFrozen)
        firstFrozen = param;
    }
    if (frozen.empty() || trainable.empty())
      continue;
    // At the first frozen parameter: the one the unit cannot hold with the
    // others.
    Location loc = firstFrozen.getLoc();
    InFlightDiagnostic diag = useOrigParams ? emitWarning(loc) : emitError(loc);
    diag << "unit " << quoted(moduleAttr.getFqn())
         << " mixes frozen and trainable parameters; frozen: ["
         << llvm::join(frozen, ", ") << "], trainable: ["
         << llvm::join(trainable, ", ") << "]";
    if (!useOrigParams) {
      // use-orig-params only turns this into a warning: one flat buffer
      // still cannot hold both (fsdp.flat_param refuses), so point at the
      // way that compiles.
      diag << "; wrap the frozen modules separately (wrap-frozen=true wraps "
              "every frozen submodule)";
      return failure();
    }
  }
  return success();
}

void AutoWrapPass::runOnOperation() {
  PassDiagnosticScope diagnostics(&getContext(), getArgument());
  reset();
  if (failed(loadModel()) || failed(loadPolicy()) || failed(loadConfig()))
    return signalPassFailure();
  ModuleOp module = getOperation();

  // `none` alone wraps nothing below the root, unless the policy file or
  // mixed precision's full-precision classes ask for units.
  if (policySet.contains("auto")) {
    if (failed(chooseAuto()))
      return signalPassFailure();
  } else if (!policySet.contains("none") || policySet.size() > 1 ||
             !overrides.empty() || (mixedPrecision && !fullPrecision.empty()))
    recursiveWrap("", /*onlyWrapChildren=*/true);
  wrapped.insert("");
  if (wrapFrozen)
    wrapFrozenModules();

  // Units take their parameters children-first (post-order), as PyTorch
  // builds the nested FSDP instances.
  llvm::StringMap<SmallVector<ParamOp>> unitParams;
  llvm::DenseMap<Operation *, std::string> owner;
  for (ModuleAttr moduleAttr : llvm::reverse(model.modules)) {
    StringRef fqn = moduleAttr.getFqn();
    if (!wrapped.contains(fqn))
      continue;
    SmallVector<ParamOp> &taken = unitParams[fqn];
    for (Operation *param : subtreeParams(fqn))
      if (owner.try_emplace(param, fqn.str()).second)
        taken.push_back(cast<ParamOp>(param));
  }
  if (failed(checkTiedParams(owner)) || failed(checkUniformGrad(unitParams)))
    return signalPassFailure();

  // Record units root first, then in module pre-order: PyTorch's FSDP tree.
  Builder b(&getContext());
  SmallVector<Attribute> units;
  for (ModuleAttr moduleAttr : model.modules) {
    StringRef fqn = moduleAttr.getFqn();
    if (!wrapped.contains(fqn))
      continue;
    SmallVector<Attribute> refs;
    for (ParamOp param : unitParams[fqn])
      refs.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    units.push_back(WrapUnitAttr::get(&getContext(), fqn, b.getArrayAttr(refs),
                                      unitConfig(fqn)));
  }
  if (fullPrecisionUnits) {
    SmallVector<StringRef> classes = llvm::to_vector(fullPrecision.keys());
    llvm::sort(classes);
    emitWarning(module.getLoc())
        << "mixed precision is off for " << fullPrecisionUnits
        << " modules of the full-precision classes ("
        << llvm::join(classes, ", ") << "), each wrapped as its own unit";
  }
  module->setAttr(FSDPDialect::UnitsAttrHelper::getNameStr(),
                  b.getArrayAttr(units));

  // Mark every op of a managed module with its module and unit, as
  // PyTorch's _is_fsdp_managed_module does, for later passes and readers.
  ScopeResolver scopes(module, model.modules);
  module.walk([&](Operation *op) {
    if (isa<ModuleOp>(op) || op->hasTrait<OpTrait::SymbolTable>())
      return;
    std::optional<std::string> fqn = scopes.moduleOf(op);
    if (!fqn || isIgnoredModule(*fqn))
      return;
    op->setAttr("fsdp.module", b.getStringAttr(*fqn));
    op->setAttr("fsdp.unit", b.getStringAttr(unitOf(*fqn)));
  });
  if (!ignored.empty()) {
    SmallVector<Attribute> refs;
    for (ModuleAttr moduleAttr : model.modules)
      for (StringRef name : stringsOf(moduleAttr.getParams()))
        if (ParamOp param = model.params.lookup(name))
          if (ignored.contains(param) &&
              !llvm::is_contained(refs, FlatSymbolRefAttr::get(param.getSymNameAttr())))
            refs.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
    module->setAttr("fsdp.ignored_params", b.getArrayAttr(refs));
  }
}

} // namespace
