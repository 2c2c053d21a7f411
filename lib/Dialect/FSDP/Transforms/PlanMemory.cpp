//===- PlanMemory.cpp - Static activation arena from liveness -------------===//
//
/// Each activation (function argument or kernel result) lives from the step
/// that defines it to the last step that reads it or a view of it; the
/// function's arguments and results live for the whole run. Activations are
/// then placed greedily, largest first (by size, and by size times
/// lifetime), each in the first or the tightest aligned gap that no
/// activation with an overlapping lifetime occupies; the smallest of the
/// four arenas wins. Greedy by size is TFLite's arena planner; it needs no
/// knowledge of the kernels beyond which values they read and write.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_PLANMEMORY
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using mlir::fsdp::FSDPDialect;
using mlir::fsdp::KernelOp;
using mlir::fsdp::ViewOp;

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();

/// One activation to place.
struct Interval {
  Value value;
  int64_t bytes;
  int64_t first, last; // steps, inclusive
  int64_t offset = -1;
};

/// The bytes of a tensor (or of the tensor a future holds), or nothing when
/// they overflow int64.
std::optional<int64_t> checkedByteSize(Type type) {
  if (auto future = dyn_cast<mlir::fsdp::FutureType>(type))
    type = future.getValueType();
  return mlir::fsdp::checkedByteSize(cast<RankedTensorType>(type));
}

/// Follows views (and waits, which name their collective's bytes) back to
/// the value that owns the bytes.
Value ownerOf(Value value) {
  while (true) {
    if (auto view = value.getDefiningOp<ViewOp>())
      value = view.getInput();
    else if (auto wait = value.getDefiningOp<mlir::fsdp::WaitOp>())
      value = wait.getFuture();
    else
      return value;
  }
}

/// Kernels and collectives write new activations; every other op reads
/// state or constants, or views bytes that already exist.
bool producesActivations(Operation *op) {
  return isa<KernelOp, mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
             mlir::fsdp::AllReduceOp>(op);
}

/// The symbol a state read (a parameter, buffer, flat parameter or shard)
/// names, or null for any other value.
FlatSymbolRefAttr stateReadOf(Operation *op) {
  if (auto get = dyn_cast_or_null<mlir::fsdp::GetParamOp>(op))
    return get.getParamAttr();
  if (auto get = dyn_cast_or_null<mlir::fsdp::GetBufferOp>(op))
    return get.getBufferAttr();
  if (auto get = dyn_cast_or_null<mlir::fsdp::GetFlatParamOp>(op))
    return get.getUnitAttr();
  if (auto get = dyn_cast_or_null<mlir::fsdp::GetShardOp>(op))
    return get.getUnitAttr();
  return nullptr;
}

/// Whether `op` or anything reading its bytes (views, collectives and
/// their waits, kernels) runs after `step` in the block, or is returned.
bool readAfter(Operation *op, Operation *step) {
  SmallVector<Operation *> work = {op};
  while (!work.empty()) {
    Operation *current = work.pop_back_val();
    for (Operation *user : current->getUsers()) {
      if (user == step)
        continue;
      if (isa<func::ReturnOp>(user) || step->isBeforeInBlock(user))
        return true;
      // A view, a wait or a collective names or copies the bytes later.
      if (isa<ViewOp, mlir::fsdp::WaitOp, mlir::fsdp::AllGatherOp,
              mlir::fsdp::ReduceScatterOp, mlir::fsdp::AllReduceOp>(user))
        work.push_back(user);
    }
  }
  return false;
}

/// Marks the optimizer kernels that may write their new state over the old
/// (kInPlaceAttrName) and returns their in-place results, which then need
/// no activation. A result qualifies when
///   - it is returned once, as the update (`fsdp.update_of`) of the symbol
///     its input of the same role reads (a parameter, shard or state buffer
///     read directly by a get op), and used nowhere else;
///   - no read of that symbol, by any op, is used after the kernel (nor
///     returned): the old value is dead once the kernel starts.
/// The kernel itself reads element i before writing it, in the same thread,
/// so overwriting its own inputs is safe; reads on the communication stream
/// that come earlier in the plan are ordered before it by the events
/// mlir-to-plan derives from the bytes kernels share.
DenseSet<Value> markInPlace(func::FuncOp func) {
  DenseSet<Value> inPlace;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  // Every read op of each symbol in the function.
  llvm::StringMap<SmallVector<Operation *>> reads;
  for (Operation &op : func.getBody().front())
    if (FlatSymbolRefAttr symbol = stateReadOf(&op))
      reads[symbol.getValue()].push_back(&op);
  Builder b(func.getContext());
  func.walk([&](KernelOp kernel) {
    // The input each result would replace: adamw's (param, exp_avg,
    // exp_avg_sq), sgd's (param, momentum_buffer).
    SmallVector<int64_t> roles;
    if (kernel.getKernel() == "adamw")
      roles = {0, 2, 3};
    else if (kernel.getKernel() == "sgd")
      roles = {0, 4};
    else
      return;
    SmallVector<int64_t> chosen(kernel.getNumResults(), -1);
    bool any = false;
    for (auto [result, input] : llvm::zip(kernel.getResults(), roles)) {
      if (input >= static_cast<int64_t>(kernel.getInputs().size()) ||
          !result.hasOneUse() || result.use_begin()->getOwner() != ret)
        continue;
      auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
          result.use_begin()->getOperandNumber(), "fsdp.update_of");
      Operation *read = kernel.getInputs()[input].getDefiningOp();
      FlatSymbolRefAttr symbol = stateReadOf(read);
      if (!of || !symbol || of.getValue() != symbol.getValue())
        continue;
      if (llvm::any_of(reads[symbol.getValue()], [&](Operation *other) {
            return readAfter(other, kernel);
          }))
        continue;
      chosen[result.getResultNumber()] = input;
      inPlace.insert(result);
      any = true;
    }
    if (any)
      kernel->setAttr(mlir::fsdp::kInPlaceAttrName,
                      b.getDenseI64ArrayAttr(chosen));
  });
  return inPlace;
}

/// `total` + `bytes` rounded up to `alignment`, or nothing on overflow.
std::optional<int64_t> addAligned(int64_t total, int64_t bytes,
                                  int64_t alignment) {
  std::optional<int64_t> end = llvm::checkedAdd(total, bytes);
  if (!end || *end > std::numeric_limits<int64_t>::max() - alignment)
    return std::nullopt;
  return ::fsdp::layout::alignTo(*end, alignment);
}

/// One greedy placement: `intervals` in `order`, each in the gap between
/// the live activations already placed that fits it best (the smallest;
/// the lowest with `firstFit`), or above them all. Returns the arena size.
int64_t placeInOrder(ArrayRef<Interval *> order, int64_t alignment,
                     bool firstFit) {
  SmallVector<Interval *> placed;
  int64_t arena = 0;
  for (Interval *interval : order) {
    SmallVector<Interval *> live;
    for (Interval *other : placed)
      if (other->first <= interval->last && interval->first <= other->last)
        live.push_back(other);
    llvm::sort(live, [](const Interval *a, const Interval *b) {
      return a->offset < b->offset;
    });
    int64_t offset = 0, best = -1;
    int64_t bestGap = std::numeric_limits<int64_t>::max();
    for (Interval *other : live) {
      int64_t gap = other->offset - offset;
      if (gap >= interval->bytes && gap < bestGap) {
        best = offset;
        bestGap = gap;
        if (firstFit)
          break;
      }
      offset = std::max(offset, ::fsdp::layout::alignTo(
                                    other->offset + other->bytes, alignment));
    }
    interval->offset = best >= 0 ? best : offset;
    arena = std::max(arena, interval->offset + interval->bytes);
    placed.push_back(interval);
  }
  return ::fsdp::layout::alignTo(arena, alignment);
}

/// Greedy by size (TFLite's arena planner), and by size x lifetime, each
/// first- and best-fit: the smallest arena of the four. Each is a
/// heuristic; none is best on every step (FULL_SHARD's re-gathers make
/// more, shorter lifetimes than SHARD_GRAD_OP's). Returns the arena size.
int64_t place(MutableArrayRef<Interval> intervals, int64_t alignment) {
  SmallVector<Interval *> bySize, byArea;
  for (Interval &interval : intervals)
    bySize.push_back(&interval);
  byArea = bySize;
  llvm::stable_sort(bySize, [](const Interval *a, const Interval *b) {
    return a->bytes > b->bytes;
  });
  auto area = [](const Interval *i) {
    // Saturating: arguments and results live "forever".
    int64_t steps = i->last == kForever ? kForever / 2 : i->last - i->first + 1;
    return steps > kForever / std::max<int64_t>(i->bytes, 1)
               ? kForever
               : steps * i->bytes;
  };
  llvm::stable_sort(byArea, [&](const Interval *a, const Interval *b) {
    return area(a) > area(b);
  });
  int64_t best = std::numeric_limits<int64_t>::max();
  int bestChoice = 0;
  for (int choice = 0; choice < 4; ++choice) {
    int64_t arena = placeInOrder(choice < 2 ? bySize : byArea, alignment,
                                 choice % 2 == 0);
    if (arena < best) {
      best = arena;
      bestChoice = choice;
    }
  }
  return placeInOrder(bestChoice < 2 ? bySize : byArea, alignment,
                      bestChoice % 2 == 0);
}

/// What an activation holds, for the memory timeline.
enum class Kind { Gathered, FlatGrads, Reduced, Activations };

Kind kindOf(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<mlir::fsdp::AllGatherOp>(def))
    return Kind::Gathered;
  if (isa_and_nonnull<mlir::fsdp::ReduceScatterOp, mlir::fsdp::AllReduceOp>(
          def))
    return Kind::Reduced;
  if (auto kernel = dyn_cast_or_null<KernelOp>(def))
    if (kernel.getKernel() == "pack")
      return Kind::FlatGrads;
  return Kind::Activations;
}

/// Bytes that live the whole step in the weights and constants arenas, as
/// the plan writer lays them out (each tensor-aligned): the rank's shards,
/// replicated parameters, buffers and optimizer state; the constants
/// kernels read. Fails, with an error naming the tensor, when a size or the
/// sum overflows int64.
FailureOr<std::pair<int64_t, int64_t>> staticBytes(func::FuncOp func) {
  auto module = func->getParentOfType<ModuleOp>();
  SymbolTableCollection symbols;
  llvm::DenseSet<Operation *> members;
  int64_t state = 0, constants = 0;
  // Adds `type`'s bytes (divided over `ranks`) to `total`.
  auto add = [](Operation *op, Type type, int64_t ranks,
                int64_t &total) -> LogicalResult {
    std::optional<int64_t> bytes = checkedByteSize(type);
    std::optional<int64_t> sum =
        bytes ? addAligned(total, *bytes / ranks,
                           ::fsdp::layout::kTensorAlignmentBytes)
              : std::nullopt;
    if (!sum)
      return op->emitError() << type
                             << (bytes ? ": the state and constants up to it "
                                         "have more bytes per rank than"
                                       : " has more bytes than")
                             << " int64 can count";
    total = *sum;
    return success();
  };
  for (auto unit : module.getOps<mlir::fsdp::FlatParamOp>()) {
    FailureOr<int64_t> ranks = mlir::fsdp::resolveWorldSize(unit, symbols);
    if (failed(add(unit, unit.getTensorType(), succeeded(ranks) ? *ranks : 1,
                   state)))
      return failure();
    if (auto params = mlir::fsdp::resolveParams(unit, symbols);
        succeeded(params))
      for (mlir::fsdp::ParamOp param : *params)
        members.insert(param);
  }
  for (Operation &op : module.getBody()->getOperations()) {
    auto param = dyn_cast<mlir::fsdp::ParamOp>(op);
    auto buffer = dyn_cast<mlir::fsdp::BufferOp>(op);
    if ((param && !members.contains(&op)) || buffer)
      if (failed(
              add(&op, param ? param.getType() : buffer.getType(), 1, state)))
        return failure();
  }
  llvm::DenseSet<Operation *> seen;
  WalkResult walk = func.walk([&](KernelOp kernel) {
    for (Value input : kernel.getInputs())
      if (auto constant = input.getDefiningOp<onnxir::ConstantOp>())
        if (seen.insert(constant).second &&
            failed(add(constant, constant.getType(), 1, constants)))
          return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return std::make_pair(state, constants);
}

/// One rank's memory over the step: a row at each collective, wait and
/// release and at the peak of live activations.
void printTimeline(func::FuncOp func, ArrayRef<Interval> intervals,
                   int64_t arena) {
  SmallVector<Operation *> steps = {nullptr}; // step 0: the arguments
  for (Operation &op : func.getBody().getOps())
    steps.push_back(&op);
  int64_t count = steps.size();
  // Live bytes per kind at each step, by a sweep over interval ends.
  SmallVector<std::array<int64_t, 4>> live(count + 1, {0, 0, 0, 0});
  for (const Interval &interval : intervals) {
    int64_t last = std::min<int64_t>(interval.last, count - 1);
    size_t kind = static_cast<size_t>(kindOf(interval.value));
    live[interval.first][kind] += interval.bytes;
    live[last + 1][kind] -= interval.bytes;
  }
  for (int64_t step = 1; step <= count; ++step)
    for (size_t kind = 0; kind < 4; ++kind)
      live[step][kind] += live[step - 1][kind];
  auto total = [&](int64_t step) {
    return live[step][0] + live[step][1] + live[step][2] + live[step][3];
  };
  int64_t peakStep = 0;
  for (int64_t step = 0; step < count; ++step)
    if (total(step) > total(peakStep))
      peakStep = step;
  auto [state, constants] = *staticBytes(func);
  llvm::raw_ostream &os = llvm::outs();
  os << llvm::formatv("fsdp-memory-timeline: @{0}: state {1} B and "
                      "constants {2} B live all step\n",
                      func.getSymName(), state, constants);
  os << llvm::formatv("{0,6} {1,-34} {2,12} {3,12} {4,12} {5,12} {6,12}\n",
                      "step", "op", "gathered", "flat grads", "reduced",
                      "activations", "total");
  for (int64_t step = 0; step < count; ++step) {
    Operation *op = steps[step];
    bool event =
        !op || isa<mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
                   mlir::fsdp::AllReduceOp, mlir::fsdp::WaitOp,
                   mlir::fsdp::ReleaseOp, func::ReturnOp>(op);
    if (!event && step != peakStep)
      continue;
    std::string name = op ? op->getName().getStringRef().str() : "(inputs)";
    if (auto kernel = dyn_cast_or_null<KernelOp>(op))
      name = kernel.getKernel().str();
    if (op && isa<mlir::fsdp::ReleaseOp>(op))
      name += " (frees after)";
    if (step == peakStep)
      name += " <- peak";
    os << llvm::formatv("{0,6} {1,-34} {2,12} {3,12} {4,12} {5,12} {6,12}\n",
                        step, name, live[step][0], live[step][1], live[step][2],
                        live[step][3], total(step) + state + constants);
  }
  os << llvm::formatv("fsdp-memory-timeline: @{0}: peak live activations "
                      "{1} B at step {2}; activation arena {3} B; per rank "
                      "{4} B (arena + state + constants)\n",
                      func.getSymName(), total(peakStep), peakStep, arena,
                      arena + state + constants);
}

struct PlanMemoryPass : mlir::fsdp::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      getOperation().emitError() << "alignment must be a "
                                    "power of two, not "
                                 << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp func) {
      if (failed(planFunction(func)))
        signalPassFailure();
    });
  }

  /// The memory budget fsdp-auto-wrap policy=auto chose for is a promise:
  /// a plan over it is an error, not a surprise at run time.
  LogicalResult checkBudget(func::FuncOp func, int64_t arena) {
    auto module = func->getParentOfType<ModuleOp>();
    mlir::fsdp::AutoWrapRecordAttr chosen =
        FSDPDialect::AutoWrapAttrHelper(module.getContext()).getAttr(module);
    int64_t budget = chosen ? chosen.getMemoryBudget() : 0;
    if (budget <= 0)
      return success();
    FailureOr<std::pair<int64_t, int64_t>> fixed = staticBytes(func);
    if (failed(fixed))
      return failure();
    auto [state, constants] = *fixed;
    int64_t perRank = arena + state + constants;
    if (perRank <= budget)
      return success();
    int64_t modelled = chosen.getChosen().getPeakBytes();
    return func.emitError() << llvm::formatv(
               "@{0} needs {1} bytes per rank (activation "
               "arena {2}, state {3}, constants {4}), over the memory budget "
               "of {5} bytes that fsdp-auto-wrap policy=auto chose the units "
               "for (its model estimated {6}); give fsdp-auto-wrap a budget "
               "at least {7} bytes smaller",
               func.getSymName(), perRank, arena, state, constants,
               budget, modelled, perRank - budget);
  }

  LogicalResult planFunction(func::FuncOp func) {
    if (func.isExternal())
      return success();
    SmallVector<Interval> intervals;
    DenseMap<Value, unsigned> index;
    // Every activation's bytes, and their sum without reuse (aligned; no
    // placement ends past it), must fit in int64: a batch size of 2^62
    // would otherwise wrap to a small arena.
    int64_t bound = 0;
    auto add = [&](Value value, int64_t step) -> LogicalResult {
      std::optional<int64_t> bytes = checkedByteSize(value.getType());
      std::optional<int64_t> sum =
          bytes ? addAligned(bound, *bytes, alignment) : std::nullopt;
      if (!sum) {
        InFlightDiagnostic diag = emitError(value.getLoc());
        if (auto arg = dyn_cast<BlockArgument>(value))
          diag << "argument " << arg.getArgNumber();
        else
          diag << "a result of '" << value.getDefiningOp()->getName() << "'";
        return diag << " of type " << value.getType()
                    << (bytes ? ": the activations up to it have more bytes "
                                "than"
                              : " has more bytes than")
                    << " int64 can count";
      }
      bound = *sum;
      index[value] = intervals.size();
      intervals.push_back({value, *bytes, step, step});
      return success();
    };
    for (BlockArgument arg : func.getArguments()) {
      if (!isa<RankedTensorType>(arg.getType()))
        return emitError(arg.getLoc())
               << "argument " << arg.getArgNumber() << " is not a tensor";
      if (failed(add(arg, 0)))
        return failure();
      intervals.back().last = kForever;
    }
    DenseSet<Value> inPlace = markInPlace(func);
    int64_t step = 0;
    for (Operation &op : func.getBody().getOps()) {
      ++step;
      // A started collective reads its input until it is waited for.
      SmallVector<Value> reads(op.getOperands());
      if (auto wait = dyn_cast<mlir::fsdp::WaitOp>(op))
        reads.push_back(wait.getFuture().getDefiningOp()->getOperand(0));
      for (Value operand : reads) {
        auto it = index.find(ownerOf(operand));
        if (it == index.end())
          continue; // a parameter, buffer or constant: not an activation
        Interval &interval = intervals[it->second];
        interval.last =
            isa<func::ReturnOp>(op) ? kForever : std::max(interval.last, step);
      }
      if (producesActivations(&op))
        for (Value result : op.getResults()) {
          if (inPlace.contains(result))
            continue; // written over the state it replaces
          if (failed(add(result, step)))
            return failure();
        }
    }
    int64_t arena = place(intervals, alignment);

    Builder b(func.getContext());
    int64_t total = 0;
    DenseMap<Operation *, SmallVector<int64_t>> offsets;
    for (const Interval &interval : intervals) {
      total += interval.bytes;
      if (auto arg = dyn_cast<BlockArgument>(interval.value))
        func.setArgAttr(arg.getArgNumber(), "fsdp.offset",
                        b.getI64IntegerAttr(interval.offset));
      else
        offsets[interval.value.getDefiningOp()].push_back(interval.offset);
    }
    // In-place results have no offset of their own (-1).
    for (Value value : inPlace)
      offsets[value.getDefiningOp()];
    for (auto &[op, values] : offsets) {
      SmallVector<int64_t> all;
      auto placed = values.begin();
      for (Value result : op->getResults())
        all.push_back(inPlace.contains(result) ? -1 : *placed++);
      op->setAttr("fsdp.offsets", b.getDenseI64ArrayAttr(all));
    }
    func->setAttr("fsdp.activation_bytes", b.getI64IntegerAttr(arena));
    FailureOr<std::pair<int64_t, int64_t>> fixed = staticBytes(func);
    if (failed(fixed))
      return failure();
    std::optional<int64_t> perRank = llvm::checkedAdd(arena, fixed->first);
    if (perRank)
      perRank = llvm::checkedAdd(*perRank, fixed->second);
    if (!perRank)
      return func.emitError()
             << "@" << func.getSymName()
             << " needs more bytes per rank than int64 can count";
    if (failed(checkBudget(func, arena)))
      return failure();
    if (timeline)
      printTimeline(func, intervals, arena);
    if (report)
      llvm::errs() << llvm::formatv(
          "fsdp-plan-memory: @{0}: {1} activations, {2} bytes without reuse, "
          "peak {3} bytes ({4:f2}x)\n",
          func.getSymName(), intervals.size(), total, arena,
          total ? static_cast<double>(arena) / total : 0.0);
    return success();
  }
};

} // namespace
