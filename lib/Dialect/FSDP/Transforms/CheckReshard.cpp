//===- CheckReshard.cpp - Nothing made from a gather outlives its phase ---===//
//
/// FULL_SHARD's memory promise as a check of the sharded step: the values a
/// unit's gathered buffer alone determines are read by one phase only, and
/// a resharded unit is gathered again for the backward.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/Phases.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CHECKRESHARD
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The phases that finally read a value: forward, backward.
struct Readers {
  Operation *forward = nullptr;
  Operation *backward = nullptr;
  void add(const Readers &other) {
    forward = forward ? forward : other.forward;
    backward = backward ? backward : other.backward;
  }
};

/// A gathered buffer of a unit, or an unsharded unit's shard.
struct Source {
  Value value;
  FlatParamOp unit;
};

class Checker {
public:
  Checker(ModuleOp module, func::FuncOp func) : module(module), func(func) {}
  LogicalResult run();

private:
  LogicalResult check(Source source);

  ModuleOp module;
  func::FuncOp func;
  SymbolTableCollection symbols;
  llvm::DenseSet<Operation *> forward;
  DerivedValues derived;
};

LogicalResult Checker::run() {
  bool training = false;
  forward = forwardOps(func, symbols, training);
  if (!training)
    return success(); // one phase: nothing to keep across
  SmallVector<Source> sources;
  auto unitOf = [&](Operation *op, FlatSymbolRefAttr ref) {
    return symbols.lookupNearestSymbolFrom<FlatParamOp>(op, ref);
  };
  // The shard a gather gathers, through fsdp-mixed-precision's cast.
  auto shardOf = [](Value value) -> GetShardOp {
    Operation *def = value.getDefiningOp();
    while (def && !isa<GetShardOp>(def) && def->getNumOperands() == 1)
      def = def->getOperand(0).getDefiningOp();
    return dyn_cast_or_null<GetShardOp>(def);
  };
  func.walk([&](Operation *op) {
    if (auto gather = dyn_cast<AllGatherOp>(op)) {
      GetShardOp shard = shardOf(gather.getInput());
      FlatParamOp unit = shard ? unitOf(op, shard.getUnitAttr()) : nullptr;
      if (!unit)
        return;
      Value full = gather.getResult();
      // fsdp-schedule's started gather: the buffer is its wait's result.
      if (!isa<FutureType>(full.getType()))
        sources.push_back({full, unit});
      for (Operation *user : full.getUsers())
        if (auto wait = dyn_cast<WaitOp>(user))
          sources.push_back({wait.getResult(), unit});
      return;
    }
    // An unsharded unit's shard is its whole buffer.
    if (auto shard = dyn_cast<GetShardOp>(op))
      if (FlatParamOp unit = unitOf(op, shard.getUnitAttr()))
        if (shard.getType().getNumElements() ==
            unit.getTensorType().getNumElements())
          sources.push_back({shard.getResult(), unit});
  });
  for (Source source : sources)
    if (failed(check(source)))
      return failure();
  return success();
}

LogicalResult Checker::check(Source source) {
  derived.collect(source.value);
  // Which phases finally read each derived value: its own non-derived
  // readers, and what reads the derived values made from it.
  llvm::DenseMap<Value, Readers> readers;
  for (OpOperand *use : derived.uses) {
    if (isa<ReleaseOp>(use->getOwner()))
      continue; // frees the buffer, reads nothing
    Readers &r = readers[use->get()];
    (forward.contains(use->getOwner()) ? r.forward : r.backward) =
        use->getOwner();
  }
  for (Operation *op : llvm::reverse(derived.ops)) {
    Readers all;
    for (Value result : op->getResults())
      all.add(readers.lookup(result));
    for (Value operand : op->getOperands())
      if (derived.values.contains(operand))
        readers[operand].add(all);
  }
  StringRef unitName = source.unit.getSymName();
  auto explain = [&](InFlightDiagnostic diag, const Readers &r) {
    diag.attachNote(r.forward->getLoc())
        << "read by this forward op ('" << r.forward->getName() << "')";
    diag.attachNote(r.backward->getLoc())
        << "and by this backward op ('" << r.backward->getName() << "')";
    return diag;
  };
  for (Operation *op : derived.ops) {
    if (isa<ViewLikeOpInterface, UnflattenOp>(op))
      continue; // a view holds no bytes of its own
    for (Value result : op->getResults()) {
      Readers r = readers.lookup(result);
      if (r.forward && r.backward)
        return explain(op->emitOpError("computes a value "
                                       "from unit '")
                           << unitName
                           << "''s gathered parameters alone that is read by "
                              "the forward and by the backward; it would live "
                              "from one to the other",
                       r);
    }
  }
  // The buffer itself: a resharded unit is gathered again for the backward.
  ShardingStrategy kind = UnitConfigAttr::strategyOf(
      FSDPDialect::ConfigAttrHelper(source.unit->getContext())
          .getAttr(source.unit));
  StringRef strategy = stringifyShardingStrategy(kind);
  bool root = source.unit.getModule() && source.unit.getModule()->empty();
  Readers r = readers.lookup(source.value);
  if (!root &&
      (kind == ShardingStrategy::FULL_SHARD ||
       kind == ShardingStrategy::HYBRID_SHARD) &&
      isa<AllGatherOp, WaitOp>(source.value.getDefiningOp()) && r.forward &&
      r.backward)
    return explain(source.value.getDefiningOp()->emitOpError("unit '")
                       << unitName << "' (" << strategy
                       << ") is read by the forward and by the backward from "
                          "one gather; it must be gathered again for the "
                          "backward",
                   r);
  return success();
}

struct CheckReshardPass
    : mlir::fsdp::impl::CheckReshardBase<CheckReshardPass> {
  using CheckReshardBase::CheckReshardBase;
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(Checker(module, func).run()))
        return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
