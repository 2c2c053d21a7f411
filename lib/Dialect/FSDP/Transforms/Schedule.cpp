//===- Schedule.cpp - Async collectives, prefetch, rate limit, buckets ----===//
//
/// fsdp-schedule turns each rank's program (fsdp-shard's) into a schedule
/// for two streams. Every collective is started (its result a
/// `!fsdp.future`) and waited for right before its first use, so the
/// communication stream runs it while the compute stream goes on:
///
///   - all-gathers start early. A gather may start once the gather before
///     it is waited for (forward prefetch: unit i+1's gather runs while
///     unit i computes; in the backward, BACKWARD_PRE: before the current
///     unit's gradients are computed) or, with backward-prefetch=post, once
///     the previous unit's gradients are done; and only once the gather
///     `limit-all-gathers` places earlier has been released (PyTorch's rate
///     limiter: at most that many gathered units in memory or in flight).
///     Within that window it starts as late as the cost model says still
///     hides it behind the compute before its use, so memory is held no
///     longer than needed;
///   - reduce-scatters and all-reduces start where fsdp-shard put them,
///     right after the last contribution, and are waited for at their first
///     use (the optimizer step) or where the next reduction starts,
///     whichever is first, so each overlaps the backward of the next unit
///     and a unit's full gradient is freed as soon as it is reduced;
///   - with bucket-bytes > 0, consecutive small collectives of one kind
///     (each and together at most that many bytes) start together and are
///     marked `fsdp.bucket` so a runtime can issue them as one group.
///
/// fsdp-timeline writes the modelled schedule as Chrome-trace JSON and
/// fsdp-unit-summary prints a table per unit.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/CostModel.h"
#include "fsdp/Dialect/FSDP/Analysis/Phases.h"
#include "fsdp/Dialect/FSDP/Analysis/WrapSearch.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Support/Files.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_SCHEDULE
#define GEN_PASS_DEF_TIMELINE
#define GEN_PASS_DEF_UNITSUMMARY
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// One started collective and its wait.
struct Started {
  Operation *start;
  WaitOp wait;
  /// What computes a gather's input from its shard (the read, a cast),
  /// moved with it, in order.
  SmallVector<Operation *> inputs;
  ReleaseOp release; // where a gather's buffer is freed
  bool forward = false;

  Operation *first() const { return inputs.empty() ? start : inputs.front(); }
  void moveBefore(Operation *at) const {
    for (Operation *op : inputs)
      op->moveBefore(at);
    start->moveBefore(at);
  }
};

/// The ops that make a gather's input from the shard alone: the shard's
/// read and single-operand conversions of it, used by nothing else.
SmallVector<Operation *> inputChain(Operation *start) {
  SmallVector<Operation *> chain;
  Value value = start->getOperand(0);
  while (Operation *def = value.getDefiningOp()) {
    if (!def->hasOneUse() || def->getNumOperands() > 1 ||
        def->getNumRegions() != 0)
      break;
    chain.insert(chain.begin(), def);
    if (isa<GetShardOp>(def) || def->getNumOperands() == 0)
      break;
    value = def->getOperand(0);
  }
  if (chain.empty() || !isa<GetShardOp>(chain.front()))
    return {};
  return chain;
}

/// The first op after `a` and `b` in the block, as an insertion point
/// (nullptr: the block's start).
Operation *later(Operation *a, Operation *b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return a->isBeforeInBlock(b) ? b : a;
}

int64_t bytesOf(Value value) {
  return modelledBytes(collectiveValueType(value));
}

struct SchedulePass : mlir::fsdp::impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;

  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    // The options, or for those not given, the settings and cost model
    // fsdp-auto-wrap policy=auto recorded (the options stay as given: this
    // pass may run on several modules).
    knobs = {forwardPrefetch, backwardPrefetch, limitAllGathers, bucketBytes};
    if (AutoWrapRecordAttr chosen =
            FSDPDialect::AutoWrapAttrHelper(&getContext()).getAttr(module)) {
      if (!forwardPrefetch.hasValue())
        knobs.forwardPrefetch = chosen.getForwardPrefetch().getValue();
      if (!backwardPrefetch.hasValue())
        knobs.backwardPrefetch = chosen.getBackwardPrefetch().str();
      if (!limitAllGathers.hasValue())
        knobs.limitAllGathers = chosen.getLimitAllGathers();
      if (!bucketBytes.hasValue())
        knobs.bucketBytes = chosen.getBucketBytes();
    }
    if (knobs.backwardPrefetch != "pre" && knobs.backwardPrefetch != "post" &&
        knobs.backwardPrefetch != "none") {
      module.emitError() << "backward-prefetch must be pre, "
                            "post or none, not '"
                         << knobs.backwardPrefetch << "'";
      return signalPassFailure();
    }
    if (knobs.limitAllGathers < 0 || knobs.bucketBytes < 0) {
      module.emitError("limit-all-gathers and bucket-bytes "
                       "must be >= 0");
      return signalPassFailure();
    }
    bool costGiven = peakFlops.hasValue() || memoryBandwidth.hasValue() ||
                     intraBandwidth.hasValue() || intraLatency.hasValue() ||
                     interBandwidth.hasValue() || interLatency.hasValue() ||
                     ranksPerNode.hasValue() || cpuRuntime.hasValue();
    if (!costGiven &&
        FSDPDialect::CostModelAttrHelper(&getContext()).isAttrPresent(module))
      model = CostModel::of(module);
    else
      model = {peakFlops,      memoryBandwidth, intraBandwidth, intraLatency,
               interBandwidth, interLatency,    ranksPerNode,   cpuRuntime};
    if (model.peakFlops <= 0 || model.memoryBandwidth <= 0 ||
        model.intraBandwidth <= 0 || model.interBandwidth <= 0 ||
        model.intraLatency < 0 || model.interLatency < 0 ||
        model.ranksPerNode < 1) {
      module.emitError("the cost model needs positive peaks "
                       "and bandwidths, non-negative latencies and "
                       "ranks-per-node >= 1");
      return signalPassFailure();
    }
    model.store(module);
    SymbolTableCollection symbols;
    symbolsPtr = &symbols;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        if (failed(schedule(func)))
          return signalPassFailure();
  }

  LogicalResult schedule(func::FuncOp func);
  void placeGathers(ArrayRef<Started> gathers);
  void bucket(ArrayRef<Started> started, bool gathers);

  CostModel model;
  ScheduleKnobs knobs; // the settings in effect for the current module
  SymbolTableCollection *symbolsPtr = nullptr;
  int64_t nextBucket = 0; // bucket ids, unique within a function
};

LogicalResult SchedulePass::schedule(func::FuncOp func) {
  if (func.getBlocks().size() != 1)
    return func.emitError("@") << func.getName() << " must have one block";
  Block &body = func.getBody().front();
  for (Operation &op : body)
    if (isa<WaitOp>(op))
      return op.emitOpError("the function is already "
                            "scheduled");
  nextBucket = 0;
  bool training = false;
  llvm::DenseSet<Operation *> forward = forwardOps(func, *symbolsPtr, training);

  // Every collective becomes a start and a wait before its first use.
  SmallVector<Started> gathers, reductions;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isCollective(&op))
      continue;
    Value result = op.getResult(0);
    if (isa<FutureType>(result.getType()))
      continue;
    Operation *first = nullptr;
    for (Operation *user : result.getUsers())
      if (!first || user->isBeforeInBlock(first))
        first = user;
    OpBuilder b(&op);
    Operation *start = b.clone(op);
    start->getResult(0).setType(
        FutureType::get(result.getContext(), result.getType()));
    if (first)
      b.setInsertionPoint(first);
    else
      b.setInsertionPointAfter(start);
    auto wait = b.create<WaitOp>(op.getLoc(), start->getResult(0));
    result.replaceAllUsesWith(wait.getResult());
    if (forward.erase(&op))
      forward.insert(start);
    op.erase();
    Started s{start, wait, inputChain(start), nullptr,
              !training || forward.contains(start)};
    if (isa<AllGatherOp>(start)) {
      for (Operation *user : wait->getUsers())
        if (auto release = dyn_cast<ReleaseOp>(user))
          s.release = release;
      gathers.push_back(s);
    } else {
      reductions.push_back(s);
    }
  }
  llvm::sort(gathers, [](const Started &a, const Started &b) {
    return a.wait->isBeforeInBlock(b.wait);
  });
  placeGathers(gathers);
  if (knobs.bucketBytes > 0) {
    bucket(gathers, /*gathers=*/true);
    bucket(reductions, /*gathers=*/false);
  }
  // One reduction (or bucket of them) in flight at a time: each is waited
  // for, at the latest, where the next one starts (the communication
  // stream runs them in turn anyway), so a unit's full flat gradient is
  // freed once its reduce-scatter is done rather than at the optimizer.
  llvm::sort(reductions, [](const Started &a, const Started &b) {
    return a.start->isBeforeInBlock(b.start);
  });
  auto bucketOf = [](const Started &s) {
    return s.start->getAttrOfType<IntegerAttr>("fsdp.bucket");
  };
  for (size_t k = 0; k < reductions.size(); ++k) {
    size_t next = k + 1;
    while (next < reductions.size() && bucketOf(reductions[k]) &&
           bucketOf(reductions[next]) == bucketOf(reductions[k]))
      ++next;
    if (next < reductions.size() &&
        reductions[next].start->isBeforeInBlock(reductions[k].wait))
      reductions[k].wait->moveBefore(reductions[next].start);
  }
  return success();
}

/// Moves each gather's start (and its shard read) to the latest point of
/// its window that hides it behind modelled compute, or the window's start.
void SchedulePass::placeGathers(ArrayRef<Started> gathers) {
  for (size_t k = 0; k < gathers.size(); ++k) {
    const Started &g = gathers[k];
    bool isForward = g.forward;
    // The earliest op the start may follow (nullptr: the block's start).
    Operation *after = nullptr;
    bool prefetch = isForward ? knobs.forwardPrefetch
                              : knobs.backwardPrefetch != "none";
    if (!prefetch) {
      after = g.wait->getPrevNode();
    } else if (k > 0) {
      const Started &prev = gathers[k - 1];
      bool post = !isForward && knobs.backwardPrefetch == "post";
      after = post && prev.release ? prev.release
                                   : static_cast<Operation *>(prev.wait);
    }
    if (knobs.limitAllGathers > 0 &&
        k >= static_cast<size_t>(knobs.limitAllGathers))
      if (ReleaseOp limiter = gathers[k - knobs.limitAllGathers].release)
        after = later(after, limiter);
    // Walk back from the start while the compute passed hides less than
    // the gather takes, never past `after`.
    Operation *first = g.first();
    if (after && first->isBeforeInBlock(after))
      continue; // the window is empty: start where the gather is used
    double need = model.collectiveSeconds(g.start, *symbolsPtr), hidden = 0;
    Operation *at = first; // the start goes right before `at`
    while (hidden < need) {
      Operation *prev = at->getPrevNode();
      if (!prev || prev == after)
        break;
      hidden += model.computeSeconds(prev);
      at = prev;
    }
    if (at != first)
      g.moveBefore(at);
  }
}

/// Groups consecutive small collectives of one kind and phase (forward or
/// backward) so they start together: gathers at the first one's start,
/// reductions at the last one's.
void SchedulePass::bucket(ArrayRef<Started> started, bool gathers) {
  SmallVector<Started> ordered(started);
  llvm::sort(ordered, [](const Started &a, const Started &b) {
    return a.start->isBeforeInBlock(b.start);
  });
  MLIRContext *context = &getContext();
  for (size_t i = 0; i < ordered.size();) {
    size_t j = i;
    int64_t total = 0;
    while (j < ordered.size() &&
           ordered[j].start->getName() == ordered[i].start->getName() &&
           ordered[j].forward == ordered[i].forward) {
      int64_t size = bytesOf(ordered[j].start->getResult(0));
      size = std::max<int64_t>(size, bytesOf(ordered[j].start->getOperand(0)));
      if (total + size > knobs.bucketBytes)
        break;
      // Reductions start with the bucket's last one: a member already
      // waited for before that point (a clipping sum added up before the
      // next unit's is computed) ends the bucket.
      if (!gathers && llvm::any_of(llvm::seq(i, j), [&](size_t m) {
            return ordered[m].wait->isBeforeInBlock(ordered[j].start);
          }))
        break;
      total += size;
      ++j;
    }
    if (j - i < 2) {
      i = std::max(j, i + 1);
      continue;
    }
    auto id = IntegerAttr::get(IntegerType::get(context, 64), nextBucket++);
    if (gathers) {
      Operation *first = ordered[i].first();
      for (size_t m = i + 1; m < j; ++m)
        ordered[m].moveBefore(first);
    } else {
      Operation *last = ordered[j - 1].start;
      for (size_t m = j - 1; m-- > i;)
        ordered[m].start->moveAfter(last);
    }
    for (size_t m = i; m < j; ++m)
      ordered[m].start->setAttr("fsdp.bucket", id);
    i = j;
  }
}

//===----------------------------------------------------------------------===//
// fsdp-timeline and fsdp-unit-summary
//===----------------------------------------------------------------------===//

/// The unit a collective serves: the unit whose shard a gather reads, or
/// whose flat gradient (a pack) a reduction reads, through conversions.
StringRef unitOf(Operation *collective) {
  Value value = collective->getOperand(0);
  while (Operation *def = value.getDefiningOp()) {
    if (auto shard = dyn_cast<GetShardOp>(def))
      return shard.getUnit();
    if (auto pack = dyn_cast<PackOp>(def))
      return pack.getUnit();
    if (def->getNumOperands() != 1)
      break;
    value = def->getOperand(0);
  }
  return "";
}

/// A short label: the op's ONNX node name if the importer kept one.
std::string labelOf(Operation *op) {
  std::string name = op->getName().getStringRef().str();
  if (auto kernel = dyn_cast<KernelOp>(op))
    name = kernel.getKernel().str();
  if (isCollective(op) && !unitOf(op).empty())
    name += " " + unitOf(op).str();
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    loc = fused.getLocations().front();
  if (auto named = dyn_cast<NameLoc>(loc))
    return name + " (" + named.getName().str() + ")";
  return name;
}

struct TimelinePass : mlir::fsdp::impl::TimelineBase<TimelinePass> {
  using TimelineBase::TimelineBase;
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    CostModel model = CostModel::of(module);
    SymbolTableCollection symbols;
    llvm::json::Array events;
    auto thread = [&](int tid, StringRef name) {
      events.push_back(
          llvm::json::Object{{"name", "thread_name"},
                             {"ph", "M"},
                             {"pid", 0},
                             {"tid", tid},
                             {"args", llvm::json::Object{{"name", name}}}});
    };
    thread(0, "compute");
    thread(1, "communication");
    double offset = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Timeline t = simulate(func, model, symbols);
      for (const Timeline::Event &e : t.events) {
        llvm::json::Object args{{"function", func.getSymName()},
                                {"model_us", (e.end - e.start) * 1e6}};
        if (e.stream == 0) {
          args["flops"] = model.flops(e.op);
          args["bytes"] = model.bytes(e.op);
        } else {
          args["exposed_us"] = t.exposed.lookup(e.op) * 1e6;
          if (auto bucket = e.op->getAttrOfType<IntegerAttr>("fsdp.bucket"))
            args["bucket"] = bucket.getInt();
        }
        events.push_back(llvm::json::Object{
            {"name", labelOf(e.op)},
            {"cat", e.stream == 0 ? "compute" : "communication"},
            {"ph", "X"},
            {"pid", 0},
            {"tid", e.stream},
            {"ts", (offset + e.start) * 1e6},
            {"dur", (e.end - e.start) * 1e6},
            {"args", std::move(args)}});
      }
      offset += t.total;
    }
    std::string text = llvm::formatv(
        "{0:2}\n",
        llvm::json::Value(llvm::json::Object{{"traceEvents", std::move(events)},
                                             {"displayTimeUnit", "ms"}}));
    if (failed(writeReport(module, file, text)))
      return signalPassFailure();
  }
};

struct UnitSummaryPass : mlir::fsdp::impl::UnitSummaryBase<UnitSummaryPass> {
  using UnitSummaryBase::UnitSummaryBase;
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    CostModel model = CostModel::of(module);
    SymbolTableCollection symbols;
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Timeline t = simulate(func, model, symbols);
      struct Row {
        int64_t params = 0, numel = 0, gatheredBytes = 0;
        std::string gathered, freed;
        double exposed = 0, comm = 0;
      };
      llvm::MapVector<StringRef, Row> rows;
      for (auto unit : module.getOps<FlatParamOp>()) {
        Row &row = rows[unit.getSymName()];
        row.params = unit.getParams().size();
        row.numel = unit.getTensorType().getNumElements();
      }
      auto ms = [](double seconds) {
        return llvm::formatv("{0:f3}", seconds * 1e3).str();
      };
      auto append = [](std::string &list, const std::string &item) {
        list += (list.empty() ? "" : ",") + item;
      };
      for (Operation &op : func.getBody().front()) {
        if (!isCollective(&op))
          continue;
        // The unit a collective serves: a gather's shard, or the flat
        // gradient's pack.
        StringRef unit = unitOf(&op);
        if (unit.empty() || !rows.count(unit))
          continue;
        Row &row = rows[unit];
        row.comm += model.collectiveSeconds(&op, symbols);
        row.exposed += t.exposed.lookup(&op);
        if (!isa<AllGatherOp>(op))
          continue;
        row.gatheredBytes =
            std::max(row.gatheredBytes, bytesOf(op.getResult(0)));
        append(row.gathered, ms(t.reached.lookup(&op)));
        Value value = op.getResult(0);
        for (Operation *user : value.getUsers())
          if (auto wait = dyn_cast<WaitOp>(user))
            value = wait.getResult();
        for (Operation *user : value.getUsers())
          if (isa<ReleaseOp>(user))
            append(row.freed, ms(t.reached.lookup(user)));
      }
      os << llvm::formatv("fsdp-unit-summary: @{0}: modelled step {1} ms "
                          "(compute {2} ms, communication {3} ms, exposed "
                          "{4} ms)\n",
                          func.getSymName(), ms(t.total), ms(t.compute),
                          ms(t.communication), ms(t.exposedTotal));
      os << llvm::formatv("{0,-28} {1,6} {2,12} {3,12} {4,-22} {5,-22} "
                          "{6,10} {7,10}\n",
                          "unit", "params", "numel", "gathered B",
                          "gathered at (ms)", "freed at (ms)", "comm ms",
                          "exposed ms");
      for (auto &[name, row] : rows)
        os << llvm::formatv("{0,-28} {1,6} {2,12} {3,12} {4,-22} {5,-22} "
                            "{6,10} {7,10}\n",
                            name, row.params, row.numel, row.gatheredBytes,
                            row.gathered.empty() ? "-" : row.gathered,
                            row.freed.empty() ? "-" : row.freed, ms(row.comm),
                            ms(row.exposed));
    }
  }
};

} // namespace
