//===- WrapSearch.h - fsdp-auto-wrap policy=auto: the searched wrap -*- C++
//-*-===//
//
/// The step model and search behind `fsdp-auto-wrap policy=auto`. The pass
/// profiles the imported forward once (WrapProfile: the module tree, each
/// parameter's uses, the modelled compute and activations of each stretch of
/// the forward between parameter uses), then the search evaluates wrap
/// configurations (unit boundaries, per-unit strategy, prefetch, in-flight
/// limit, bucket size) against that profile without touching the IR: a
/// configuration's modelled step time is a two-stream simulation of the
/// sharded step at stretch granularity (the collectives fsdp-shard would
/// insert, placed as fsdp-schedule would place them, timed by the cost
/// model), and its modelled peak is the per-rank memory over that step
/// (state, gathered parameters, gradients, saved activations).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TRANSFORMS_WRAPSEARCH_H
#define FSDP_TRANSFORMS_WRAPSEARCH_H

#include "fsdp/Dialect/FSDP/Analysis/CostModel.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// Bytes in the largest binary unit that keeps them >= 1 ("608.25 KiB").
std::string formatBytes(int64_t bytes);

/// What the search knows of the model, gathered once from the IR.
struct WrapProfile {
  struct Module {
    std::string fqn, className;
    int parent = -1; // -1 for the root
    std::vector<int> children;
    std::vector<int> params;  // held directly (a tied tensor by each holder)
    bool eligible = false;    // may become a unit
    int64_t subtreeNumel = 0; // parameters() of the subtree, each once
  };
  struct Param {
    std::string name;
    int64_t numel = 0;
    int64_t elementBytes = 4;
    bool trainable = true;
    bool ignored = false;
    std::vector<int> holders;        // modules that register it, tree order
    int firstUse = -1, lastUse = -1; // stretches; -1: never read
  };
  /// A stretch of the forward starting at an op that reads parameters.
  struct Stretch {
    double seconds = 0;         // modelled forward compute
    int64_t transientBytes = 0; // its largest result
  };
  /// A forward value: live from `def` to `lastUse`, and, when its
  /// derivative or a consumer's needs it, until the backward reaches the
  /// stretch `keptUntil` (-1: not kept).
  struct Activation {
    int def = 0, lastUse = 0, keptUntil = -1;
    int64_t bytes = 0;
  };
  std::vector<Module> modules; // named_modules() order; 0 is the root
  std::vector<Param> params;
  std::vector<Stretch> stretches;
  std::vector<Activation> activations;
  int64_t staticBytes = 0; // buffers, inputs and results: all step
};

/// Builds the profile of `module`'s forward; `tree` is the module tree and
/// `ignored(param name)` says whether a parameter is left out of units.
FailureOr<WrapProfile>
buildWrapProfile(ModuleOp module, ArrayRef<ModuleAttr> tree,
                 const std::function<bool(StringRef)> &ignoredParam,
                 const std::function<bool(StringRef)> &ignoredModule,
                 const std::function<bool(StringRef)> &eligibleClass,
                 const std::function<bool(StringRef)> &forceLeafClass,
                 const CostModel &model);

/// fsdp-schedule's settings, searched with the units.
struct ScheduleKnobs {
  bool forwardPrefetch = true;
  std::string backwardPrefetch = "pre";
  int64_t limitAllGathers = 2;
  int64_t bucketBytes = 0;
};

/// One configuration: units (wrapped module indices; the root always) and
/// their strategies, and the schedule.
struct WrapConfig {
  std::string name;               // how it came about ("auto", a hand policy)
  std::vector<char> wrapped;      // per module
  std::vector<ShardingStrategy> strategy; // per module (used where wrapped)
  ScheduleKnobs knobs;
};

struct WrapEvaluation {
  bool valid = false;
  std::string invalid; // why not (a tied parameter split, mixed frozen)
  int units = 0;
  double stepSeconds = 0;
  int64_t peakBytes = 0;
  /// Where the peak is and what makes it up.
  std::string peakAt;
  std::vector<std::pair<std::string, int64_t>> peakParts;
};

struct WrapSearchOptions {
  int64_t worldSize = 1;
  std::vector<int64_t> meshShape; // empty, or {replicas, shard group}
  int64_t memoryBudget = 0;       // bytes per rank; 0: none
  /// A configuration fits when its modelled peak plus a reserve for what
  /// the model does not see (the planner's fragmentation, values it
  /// approximates, constants and inputs later passes add) is within the
  /// budget: this fraction of the peak, and at least kMinimumReserve
  /// (none when the fraction is 0).
  double memoryReserve = 0.1;
  static constexpr int64_t kMinimumReserve = 16 << 10;
  int64_t reserved(int64_t peakBytes) const {
    if (memoryReserve <= 0)
      return peakBytes;
    return peakBytes +
           std::max(kMinimumReserve, static_cast<int64_t>(
                                         peakBytes * memoryReserve));
  }
  bool fits(int64_t peakBytes) const {
    return memoryBudget <= 0 || reserved(peakBytes) <= memoryBudget;
  }
  bool training = true;
  int64_t optimizerStates = 2; // per parameter element (AdamW: 2)
  bool clipping = false;       // global-norm clipping: a sum per unit
  /// Mixed precision's element bytes for gathers and reductions; 0: the
  /// parameters' own.
  int64_t paramBytes = 0, reduceBytes = 0;
  /// fsdp-flatten's use-orig-params: units aligned as it will lay them out.
  bool useOrigParams = false;
  std::vector<ShardingStrategy> strategies;            // the ones to try
  ShardingStrategy baseStrategy = ShardingStrategy::FULL_SHARD; // the hand policies'
  CostModel cost;
};

struct WrapSearchResult {
  WrapConfig chosen;
  WrapEvaluation chosenEvaluation;
  /// The hand policies, evaluated with the base strategy and the default
  /// schedule, in the order they were given.
  std::vector<std::pair<WrapConfig, WrapEvaluation>> hand;
  int64_t evaluated = 0;  // configurations the search simulated
  int64_t boundaries = 0; // distinct unit-boundary sets among them
  bool fits = false;      // whether `chosen` fits the budget
};

/// A hand policy's units: PyTorch's `_recursive_wrap` with `policy(module,
/// recurse, unwrapped numel)`.
std::vector<char> recursiveWrap(
    const WrapProfile &profile,
    const std::function<bool(int module, bool recurse, int64_t unwrapped)>
        &policy);

/// Evaluates one configuration.
WrapEvaluation evaluateWrap(const WrapProfile &profile,
                            const WrapSearchOptions &options,
                            const WrapConfig &config);

/// Searches boundaries (sets of module classes, and the hand policies'
/// units), per-class strategies (all or the last k of a repeated class) and
/// schedule knobs. `chosen` is the fastest configuration that fits, or
/// the one with the smallest peak when none does (`fits` false).
WrapSearchResult searchWrap(const WrapProfile &profile,
                            const WrapSearchOptions &options,
                            const std::vector<WrapConfig> &hand);

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_WRAPSEARCH_H
