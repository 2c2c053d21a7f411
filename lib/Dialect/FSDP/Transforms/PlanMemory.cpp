//===- PlanMemory.cpp - Static activation arena from liveness -------------===//
//
/// Each activation (function argument or kernel result) lives from the step
/// that defines it to the last step that reads it or a view of it; the
/// function's arguments and results live for the whole run. Activations are
/// then placed greedily by size, largest first, each at the lowest aligned
/// offset that no activation with an overlapping lifetime occupies. This is
/// the greedy-by-size strategy of TFLite's arena planner; it needs no
/// knowledge of the kernels beyond which values they read and write.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_PLANMEMORY
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
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

int64_t byteSize(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * std::max<int64_t>(1, (bits + 7) / 8);
}

/// Follows views back to the value that owns the bytes.
Value ownerOf(Value value) {
  while (auto view = value.getDefiningOp<ViewOp>())
    value = view.getInput();
  return value;
}

/// Kernels and collectives write new activations; every other op reads
/// state or constants, or views bytes that already exist.
bool producesActivations(Operation *op) {
  return isa<KernelOp, mlir::fsdp::AllGatherOp, mlir::fsdp::ReduceScatterOp,
             mlir::fsdp::AllReduceOp>(op);
}

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Greedy by size: returns the arena size.
int64_t place(MutableArrayRef<Interval> intervals, int64_t alignment) {
  SmallVector<Interval *> order;
  for (Interval &interval : intervals)
    order.push_back(&interval);
  llvm::stable_sort(order, [](const Interval *a, const Interval *b) {
    return a->bytes > b->bytes;
  });
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
    int64_t offset = 0;
    for (Interval *other : live) {
      if (offset + interval->bytes <= other->offset)
        break;
      offset =
          std::max(offset, alignTo(other->offset + other->bytes, alignment));
    }
    interval->offset = offset;
    arena = std::max(arena, offset + interval->bytes);
    placed.push_back(interval);
  }
  return alignTo(arena, alignment);
}

struct PlanMemoryPass : mlir::fsdp::impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      getOperation().emitError() << "fsdp-plan-memory: alignment must be a "
                                    "power of two, not "
                                 << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp func) {
      if (failed(planFunction(func)))
        signalPassFailure();
    });
  }

  LogicalResult planFunction(func::FuncOp func) {
    if (func.isExternal())
      return success();
    SmallVector<Interval> intervals;
    DenseMap<Value, unsigned> index;
    auto add = [&](Value value, int64_t step) {
      index[value] = intervals.size();
      intervals.push_back({value, byteSize(value.getType()), step, step});
    };
    for (BlockArgument arg : func.getArguments()) {
      if (!isa<RankedTensorType>(arg.getType()))
        return func.emitError() << "fsdp-plan-memory: argument "
                                << arg.getArgNumber() << " is not a tensor";
      add(arg, 0);
      intervals.back().last = kForever;
    }
    int64_t step = 0;
    for (Operation &op : func.getBody().getOps()) {
      ++step;
      for (Value operand : op.getOperands()) {
        auto it = index.find(ownerOf(operand));
        if (it == index.end())
          continue; // a parameter, buffer or constant: not an activation
        Interval &interval = intervals[it->second];
        interval.last =
            isa<func::ReturnOp>(op) ? kForever : std::max(interval.last, step);
      }
      if (producesActivations(&op))
        for (Value result : op.getResults())
          add(result, step);
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
    for (auto &[op, values] : offsets)
      op->setAttr("fsdp.offsets", b.getDenseI64ArrayAttr(values));
    func->setAttr("fsdp.activation_bytes", b.getI64IntegerAttr(arena));
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
