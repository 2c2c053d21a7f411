//===- InitAll.cpp - Register everything the fsdp tools use ---------------===//

#include "fsdp/InitAll.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"

namespace {

using mlir::LogicalResult;
using mlir::OpPassManager;
using ErrorHandler = llvm::function_ref<LogicalResult(const llvm::Twine &)>;

/// What every sharded compile states: the ranks once, then each stage's own
/// options as that pass spells them (--fsdp-auto-wrap=..., --fsdp-schedule=).
template <typename Derived>
struct ShardedOptionsBase : mlir::PassPipelineOptions<Derived> {
  using Base = mlir::PassPipelineOptions<Derived>;
  typename Base::template Option<int64_t> worldSize{
      *this, "world-size",
      llvm::cl::desc("Ranks to shard over (give this or mesh-shape); passed "
                     "to fsdp-auto-wrap and fsdp-flatten"),
      llvm::cl::init(0)};
  typename Base::template ListOption<int64_t> meshShape{
      *this, "mesh-shape",
      llvm::cl::desc("HYBRID_SHARD's mesh, GROUPS,RANKS_PER_GROUP (instead of "
                     "world-size)")};
  typename Base::template Option<bool> useOrigParams{
      *this, "use-orig-params",
      llvm::cl::desc("torch's use_orig_params=True, for fsdp-auto-wrap and "
                     "fsdp-flatten"),
      llvm::cl::init(false)};
  typename Base::template Option<std::string> autoWrap{
      *this, "auto-wrap",
      llvm::cl::desc("fsdp-auto-wrap's options in braces (policy, strategy, "
                     "dtypes, ...), without the ones stated here"),
      llvm::cl::init("")};
  typename Base::template Option<bool> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("Run fsdp-mixed-precision (the dtypes are auto-wrap's)"),
      llvm::cl::init(false)};
  typename Base::template Option<bool> unitSummary{
      *this, "unit-summary",
      llvm::cl::desc("Print fsdp-unit-summary once the step is scheduled"),
      llvm::cl::init(false)};
  typename Base::template Option<std::string> timeline{
      *this, "timeline",
      llvm::cl::desc("Write fsdp-timeline's trace of the scheduled step to "
                     "this file"),
      llvm::cl::init("")};
  typename Base::template Option<std::string> schedule{
      *this, "schedule", llvm::cl::desc("fsdp-schedule's options in braces"),
      llvm::cl::init("")};
};

struct ShardedPipelineOptions : ShardedOptionsBase<ShardedPipelineOptions> {};

struct TrainPipelineOptions : ShardedOptionsBase<TrainPipelineOptions> {
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("fsdp-optimizer's options in braces (default: plain "
                     "SGD)"),
      llvm::cl::init("")};
  Option<std::string> autodiff{
      *this, "autodiff",
      llvm::cl::desc("fsdp-autodiff's options in braces (loss, logits, "
                     "checkpointing)"),
      llvm::cl::init("")};
};

/// `text` without the braces that keep a nested pass's options together.
llvm::StringRef unbraced(llvm::StringRef text) {
  text = text.trim();
  if (text.size() >= 2 && text.front() == '{' && text.back() == '}')
    return text.drop_front().drop_back().trim();
  return text;
}

/// Adds pass `pass` configured from `text` (its command-line options).
LogicalResult addPass(OpPassManager &pm, std::unique_ptr<mlir::Pass> pass,
                      llvm::StringRef text, ErrorHandler errorHandler) {
  if (failed(pass->initializeOptions(text, errorHandler)))
    return mlir::failure();
  pm.addPass(std::move(pass));
  return mlir::success();
}

/// The tail every plan shares: the graph as the runtime runs it, then its
/// buffers placed (fsdp-translate --mlir-to-plan writes the plan).
void buildLowerPipeline(OpPassManager &pm) {
  pm.addPass(mlir::fsdp::createFuse());
  pm.addPass(mlir::fsdp::createLowerToRuntime());
  pm.addPass(mlir::fsdp::createPlanMemory());
}

/// The sharded compile; with `optimizer`, the training step (autodiff after
/// wrapping, the optimizer once parameters are flat).
template <typename Options>
LogicalResult
buildShardedPipeline(OpPassManager &pm, const Options &options,
                     const mlir::fsdp::OptimizerOptions *optimizer,
                     llvm::StringRef optimizerText, llvm::StringRef autodiff,
                     llvm::StringRef name, ErrorHandler errorHandler) {
  auto fail = [&](const llvm::Twine &message) {
    return errorHandler(name + ": " + message);
  };
  // The ranks and the step are the pipeline's to state: a second spelling in
  // auto-wrap's options could disagree with flatten's or the optimizer's.
  llvm::StringRef autoWrap = unbraced(options.autoWrap);
  llvm::SmallVector<llvm::StringRef> words;
  autoWrap.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef word : words) {
    llvm::StringRef key = word.split('=').first;
    if (llvm::is_contained({"world-size", "mesh-shape", "use-orig-params",
                            "training", "optimizer-states", "clipping"},
                           key))
      return fail("auto-wrap sets " + key +
                  ", which the pipeline derives from its own options "
                  "(world-size or mesh-shape, use-orig-params, optimizer)");
  }
  std::string ranks;
  if (!options.meshShape.empty()) {
    if (options.meshShape.size() != 2)
      return fail("mesh-shape takes two sizes, <groups>,<ranks per group>");
    int64_t world = options.meshShape[0] * options.meshShape[1];
    if (options.worldSize != 0 && options.worldSize != world)
      return fail("world-size=" + llvm::Twine(options.worldSize) +
                  " differs from the " + llvm::Twine(world) +
                  " ranks of mesh-shape");
    ranks = "mesh-shape=" + std::to_string(options.meshShape[0]) + "," +
            std::to_string(options.meshShape[1]);
  } else {
    if (options.worldSize < 1)
      return fail("give the ranks: world-size=N (or mesh-shape=G,R)");
    ranks = "world-size=" + std::to_string(options.worldSize);
  }
  std::string origParams = options.useOrigParams ? " use-orig-params=true" : "";

  // What auto-wrap's search models: the mesh and the step.
  std::string step = " training=false";
  if (optimizer)
    step = " optimizer-states=" +
           std::to_string(mlir::fsdp::optimizerStateCount(*optimizer)) +
           (optimizer->maxGradNorm > 0 ? " clipping=true" : "");
  if (failed(addPass(pm, mlir::fsdp::createAutoWrap(),
                     (autoWrap + " " + ranks + origParams + step).str(),
                     errorHandler)))
    return mlir::failure();
  if (optimizer &&
      failed(addPass(pm, mlir::fsdp::createAutodiff(), autodiff, errorHandler)))
    return mlir::failure();
  if (failed(addPass(pm, mlir::fsdp::createFlatten(), ranks + origParams,
                     errorHandler)))
    return mlir::failure();
  if (optimizer && failed(addPass(pm, mlir::fsdp::createOptimizer(),
                                  optimizerText, errorHandler)))
    return mlir::failure();
  pm.addPass(mlir::fsdp::createShard());
  if (options.mixedPrecision)
    pm.addPass(mlir::fsdp::createMixedPrecision());
  if (failed(addPass(pm, mlir::fsdp::createSchedule(),
                     unbraced(options.schedule), errorHandler)))
    return mlir::failure();
  // The reports read the scheduled step, before lowering rewrites it.
  if (options.unitSummary)
    pm.addPass(mlir::fsdp::createUnitSummary());
  if (!options.timeline.empty()) {
    mlir::fsdp::TimelineOptions timeline;
    timeline.file = options.timeline;
    pm.addPass(mlir::fsdp::createTimeline(timeline));
  }
  // The exported graph is in training mode; the plan never drops out.
  pm.addPass(mlir::fsdp::createInference());
  buildLowerPipeline(pm);
  return mlir::success();
}

} // namespace

void fsdp::registerAllPasses() {
  mlir::fsdp::registerFSDPPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();

  // The whole single-rank inference compile in one flag.
  mlir::PassPipelineRegistration<>(
      "fsdp-inference-pipeline",
      "Compile an imported model for single-rank inference: fsdp-inference, "
      "then fsdp-lower-pipeline (then fsdp-translate --mlir-to-plan writes "
      "the plan)",
      [](OpPassManager &pm) {
        pm.addPass(mlir::fsdp::createInference());
        buildLowerPipeline(pm);
      });

  mlir::PassPipelineRegistration<>(
      "fsdp-lower-pipeline",
      "The tail of every compile: fsdp-fuse, fsdp-lower-to-runtime, "
      "fsdp-plan-memory",
      buildLowerPipeline);

  // Registered through registerPassPipeline, not PassPipelineRegistration,
  // so that a nested pass's bad option fails the pipeline instead of being
  // dropped.
  mlir::registerPassPipeline(
      "fsdp-sharded-pipeline",
      "Compile an imported model into a forward plan over ranks: "
      "fsdp-auto-wrap, fsdp-flatten, fsdp-shard, [fsdp-mixed-precision], "
      "fsdp-schedule, fsdp-inference, fsdp-lower-pipeline",
      [](OpPassManager &pm, llvm::StringRef text, ErrorHandler errorHandler) {
        ShardedPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return mlir::failure();
        return buildShardedPipeline(pm, options, nullptr, "", "",
                                    "fsdp-sharded-pipeline", errorHandler);
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> print) {
        print(ShardedPipelineOptions());
      });

  mlir::registerPassPipeline(
      "fsdp-train-pipeline",
      "Compile an imported model into a training step over ranks: "
      "fsdp-auto-wrap, fsdp-autodiff, fsdp-flatten, fsdp-optimizer, "
      "fsdp-shard, [fsdp-mixed-precision], fsdp-schedule, fsdp-inference, "
      "fsdp-lower-pipeline",
      [](OpPassManager &pm, llvm::StringRef text, ErrorHandler errorHandler) {
        TrainPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return mlir::failure();
        llvm::StringRef optimizerText = unbraced(options.optimizer);
        mlir::FailureOr<mlir::fsdp::OptimizerOptions> optimizer =
            mlir::fsdp::parseOptimizerOptions(optimizerText, errorHandler);
        if (failed(optimizer))
          return mlir::failure();
        return buildShardedPipeline(pm, options, &*optimizer, optimizerText,
                                    unbraced(options.autodiff),
                                    "fsdp-train-pipeline", errorHandler);
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> print) {
        print(TrainPipelineOptions());
      });

  // The memory plan printed over the step (plans again: same offsets).
  mlir::PassPipelineRegistration<>(
      "fsdp-memory-timeline",
      "Print one rank's memory over the step (fsdp-plan-memory=timeline): "
      "gathered parameters, flat and reduced gradients, activations, the "
      "rank's state and constants, and the peak per rank",
      [](mlir::OpPassManager &pm) {
        mlir::fsdp::PlanMemoryOptions options;
        options.timeline = true;
        pm.addPass(mlir::fsdp::createPlanMemory(options));
      });
}
