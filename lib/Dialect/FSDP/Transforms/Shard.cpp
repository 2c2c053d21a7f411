//===- Shard.cpp - Each rank's program: collectives on flat shards --------===//
//
/// After fsdp-flatten (and, for training, fsdp-autodiff and fsdp-optimizer),
/// every unit's parameters are read as a full flat buffer. This pass turns
/// the step into what one rank runs, as PyTorch FSDP does at run time:
///
///   - each read of a unit's full buffer becomes this rank's shard
///     (`fsdp.get_shard`) all-gathered (`fsdp.all_gather`) before the first
///     use, and `fsdp.release`d after the last; FULL_SHARD gathers again for
///     the backward, SHARD_GRAD_OP keeps the forward's gather;
///   - a unit's flat gradient is reduce-scattered (averaged) right after it
///     is complete; NO_SHARD units and ignored parameters all-reduce theirs
///     (DDP), HYBRID_SHARD reduce-scatters within a group and all-reduces the
///     shard across groups;
///   - the optimizer, elementwise, runs on the shard: its reads of a unit's
///     flat buffer, flat gradient and state become shard-sized, and a sum
///     of squares over a shard (global-norm clipping) is all-reduced.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/Phases.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_SHARD
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// How one unit is sharded.
struct UnitInfo {
  mutable FlatParamOp op;
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  int64_t shardRanks = 1; // the group its flat buffer is sharded over
  RankedTensorType shardType;
  bool sharded() const { return shardRanks > 1; }
};

class Sharder {
public:
  Sharder(ModuleOp module, func::FuncOp func) : module(module), func(func) {}
  LogicalResult run();

private:
  LogicalResult collectUnits();
  void findForward();
  LogicalResult gatherReads(UnflattenOp views);
  LogicalResult reduceGradient(Value grad, FlatSymbolRefAttr of, bool flat);
  LogicalResult retargetOptimizer();
  Value allReduce(OpBuilder &b, Location loc, Value value, StringRef reduction,
                  ArrayRef<int16_t> axes);

  ModuleOp module;
  func::FuncOp func;
  SymbolTableCollection symbols;
  mesh::MeshOp mesh;
  SmallVector<int16_t> allAxes;
  llvm::DenseMap<Operation *, UnitInfo> units;
  llvm::DenseSet<Operation *> forward;
  bool training = false;
  /// Values that now hold a unit's shard rather than its full flat buffer.
  llvm::DenseMap<Value, const UnitInfo *> local;
};

LogicalResult Sharder::collectUnits() {
  for (auto unit : module.getOps<FlatParamOp>()) {
    UnitInfo info;
    info.op = unit;
    info.strategy = UnitConfigAttr::strategyOf(
        FSDPDialect::ConfigAttrHelper(module.getContext()).getAttr(unit));
    FailureOr<int64_t> ranks = resolveWorldSize(unit, symbols);
    if (failed(ranks))
      return failure();
    info.shardRanks = *ranks;
    RankedTensorType flat = unit.getTensorType();
    info.shardType = RankedTensorType::get({flat.getNumElements() / *ranks},
                                           flat.getElementType());
    units[unit] = info;
  }
  for (auto meshOp : module.getOps<mesh::MeshOp>()) {
    if (mesh)
      return meshOp.emitError("the module has several "
                              "mesh.mesh; expected the one fsdp-flatten "
                              "creates");
    mesh = meshOp;
  }
  if (mesh)
    for (int64_t i = 0, e = mesh.getShape().size(); i < e; ++i)
      allAxes.push_back(static_cast<int16_t>(i));
  return success();
}

void Sharder::findForward() { forward = forwardOps(func, symbols, training); }

/// Replaces a unit's full-buffer read (`views`, fsdp-flatten's unflatten of
/// get_flat_param) by gathers of the shard: one per run of uses that the
/// strategy keeps gathered, each released after its run.
LogicalResult Sharder::gatherReads(UnflattenOp views) {
  auto it =
      units.find(symbols.lookupNearestSymbolFrom(module, views.getUnitAttr()));
  if (it == units.end())
    return views.emitOpError()
           << views.getUnitAttr() << " is not an fsdp.flat_param";
  const UnitInfo &unit = it->second;
  auto read = views.getFlat().getDefiningOp<GetFlatParamOp>();
  if (!read || !read->hasOneUse())
    return views.emitOpError("expected the unit's buffer read "
                             "once, by fsdp.get_flat_param");

  // The ops that use the parameters, in order. What is computed from the
  // parameters alone (reshapes, transposes, casts, slices) is no use of its
  // own: it is made again, from the gather, for each phase that needs it.
  DerivedValues derived;
  derived.collect(views.getResults());
  SmallVector<OpOperand *> uses = derived.uses;
  llvm::sort(uses, [](OpOperand *a, OpOperand *b) {
    return a->getOwner() != b->getOwner() &&
           a->getOwner()->isBeforeInBlock(b->getOwner());
  });

  // Runs of uses that share one gather: FULL_SHARD and HYBRID_SHARD free
  // the parameters after each forward and gather them again for the
  // backward; SHARD_GRAD_OP keeps them until the backward is done (a new
  // gather only for another forward, e.g. the next micro-batch).
  // The root's backward starts as its forward ends, so PyTorch keeps the
  // root's parameters gathered in between.
  bool root = unit.op.getModule() && unit.op.getModule()->empty();
  bool reshardAfterForward =
      !root && (unit.strategy == ShardingStrategy::FULL_SHARD ||
                unit.strategy == ShardingStrategy::HYBRID_SHARD);
  SmallVector<SmallVector<OpOperand *>> runs;
  std::optional<bool> lastForward;
  for (OpOperand *use : uses) {
    bool isForward = !training || forward.contains(use->getOwner());
    bool split =
        !lastForward || (isForward != *lastForward &&
                         (reshardAfterForward || (isForward && !*lastForward)));
    if (split)
      runs.emplace_back();
    runs.back().push_back(use);
    lastForward = isForward;
  }

  OpBuilder b(read);
  Location loc = read.getLoc();
  auto unitRef = FlatSymbolRefAttr::get(unit.op.getSymNameAttr());
  auto gather = [&](Location at) -> Value {
    Value shard = b.create<GetShardOp>(at, unit.shardType, unitRef);
    if (!unit.sharded())
      return shard;
    return b.create<AllGatherOp>(
        at, unit.op.getTensorType(), shard,
        FlatSymbolRefAttr::get(unit.op.getMeshAttr().getAttr()),
        b.getDenseI16ArrayAttr(unit.op.getMeshAxes()));
  };

  // Each run gets its own gather and views, placed right before the run's
  // first use. Each phase of a run (SHARD_GRAD_OP's forward and backward
  // share one gather) makes the derived values it reads again, right
  // before their first user there: a transpose of a weight never lives
  // from the forward to the backward beside the buffer it came from.
  SmallVector<Value> gathered;
  for (auto &run : runs) {
    b.setInsertionPoint(run.front()->getOwner());
    Value full = gather(loc);
    auto copy = b.create<UnflattenOp>(loc, views.getResultTypes(), full,
                                      views.getUnitAttr());
    IRMapping map;
    std::function<Value(Value)> remat = [&](Value value) -> Value {
      if (Value mapped = map.lookupOrNull(value))
        return mapped;
      Operation *def = value.getDefiningOp();
      for (Value operand : def->getOperands())
        if (derived.values.contains(operand))
          remat(operand);
      b.clone(*def, map);
      return map.lookup(value);
    };
    std::optional<bool> phase;
    for (OpOperand *use : run) {
      bool isForward = !training || forward.contains(use->getOwner());
      if (phase != isForward) {
        map.clear();
        map.map(views.getResults(), copy.getResults());
        phase = isForward;
      }
      b.setInsertionPoint(use->getOwner());
      use->set(remat(use->get()));
    }
    gathered.push_back(full);
  }
  for (Operation *op : llvm::reverse(derived.ops))
    op->erase();
  views.erase();
  read.erase();

  // Release each gather after its run's last use.
  if (unit.sharded())
    for (auto [run, value] : llvm::zip(runs, gathered)) {
      Operation *last = run.back()->getOwner();
      b.setInsertionPointAfter(last);
      b.create<ReleaseOp>(loc, value);
    }
  return success();
}

Value Sharder::allReduce(OpBuilder &b, Location loc, Value value,
                         StringRef reduction, ArrayRef<int16_t> axes) {
  return b.create<AllReduceOp>(loc, value.getType(), value,
                               FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                               b.getDenseI16ArrayAttr(axes),
                               b.getStringAttr(reduction));
}

/// Averages a gradient over the ranks as soon as it is complete: a unit's
/// flat gradient is reduce-scattered to this rank's shard (HYBRID_SHARD:
/// then all-reduced across groups); a replicated one is all-reduced.
LogicalResult Sharder::reduceGradient(Value grad, FlatSymbolRefAttr of,
                                      bool flat) {
  if (!mesh) { // one rank: nothing to reduce; the gradient is the shard's
    if (flat)
      if (auto it = units.find(symbols.lookupNearestSymbolFrom(module, of));
          it != units.end())
        local[grad] = &it->second;
    return success();
  }
  Operation *def = grad.getDefiningOp();
  // A flat gradient's pack (and fsdp-optimizer's marker of it) moves up to
  // its last contribution, so the reduce-scatter can overlap the rest of
  // the backward.
  auto marker = dyn_cast_or_null<onnxir::IdentityOp>(def);
  if (auto pack = dyn_cast_or_null<PackOp>(
          marker ? marker->getOperand(0).getDefiningOp() : def)) {
    Operation *latest = nullptr;
    for (Value member : pack.getValues())
      if (Operation *memberDef = member.getDefiningOp())
        if (!latest || latest->isBeforeInBlock(memberDef))
          latest = memberDef;
    if (latest)
      pack->moveAfter(latest);
    else
      pack->moveBefore(&func.getBody().front().front());
    if (marker)
      marker->moveAfter(pack);
  }
  OpBuilder b(func.getContext());
  if (def)
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(&func.getBody().front());
  Location loc = def ? def->getLoc() : func.getLoc();

  const UnitInfo *unit = nullptr;
  if (flat) {
    auto it = units.find(symbols.lookupNearestSymbolFrom(module, of));
    if (it == units.end())
      return func.emitError() << of << " is not an fsdp.flat_param";
    unit = &it->second;
  }
  Value reduced;
  if (unit && unit->sharded()) {
    reduced = b.create<ReduceScatterOp>(
        loc, unit->shardType, grad,
        FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
        b.getDenseI16ArrayAttr(unit->op.getMeshAxes()), b.getStringAttr("avg"));
  } else {
    reduced = allReduce(b, loc, grad, "avg", allAxes);
  }
  Operation *first = reduced.getDefiningOp();
  if (unit && unit->sharded()) {
    // HYBRID_SHARD: the shard is replicated over the other axes.
    SmallVector<int16_t> rest;
    for (int16_t axis : allAxes)
      if (!llvm::is_contained(unit->op.getMeshAxes(), axis))
        rest.push_back(axis);
    if (!rest.empty())
      reduced = allReduce(b, loc, reduced, "avg", rest);
  }
  if (unit) // the averaged gradient of the rank's shard (NO_SHARD: whole)
    local[reduced] = unit;
  grad.replaceAllUsesExcept(reduced, first);
  return success();
}

/// Runs the optimizer on shards: from each unit's shard values (its
/// reduce-scattered gradient, its read by the optimizer, its state), every
/// elementwise op that computes a full flat buffer's worth computes the
/// shard's instead.
LogicalResult Sharder::retargetOptimizer() {
  Block &body = func.getBody().front();
  // The optimizer's own reads of a unit's flat buffer (not fsdp-flatten's,
  // which unflatten feeds): the shard.
  for (auto read : llvm::make_early_inc_range(body.getOps<GetFlatParamOp>())) {
    auto it =
        units.find(symbols.lookupNearestSymbolFrom(module, read.getUnitAttr()));
    if (it == units.end())
      return read.emitOpError()
             << read.getUnitAttr() << " is not an fsdp.flat_param";
    OpBuilder b(read);
    Value shard = b.create<GetShardOp>(read.getLoc(), it->second.shardType,
                                       read.getUnitAttr());
    read.replaceAllUsesWith(shard);
    read.erase();
    local[shard] = &it->second;
  }
  // Optimizer state of a unit: one shard per rank.
  for (auto get : body.getOps<GetBufferOp>()) {
    auto buffer =
        symbols.lookupNearestSymbolFrom<BufferOp>(module, get.getBufferAttr());
    auto of = buffer ? buffer->getAttrOfType<FlatSymbolRefAttr>(
                           FSDPDialect::StateOfAttrHelper::getNameStr())
                     : nullptr;
    auto it = of ? units.find(symbols.lookupNearestSymbolFrom(module, of))
                 : units.end();
    if (it == units.end())
      continue;
    buffer.setTypeAttr(TypeAttr::get(it->second.shardType));
    get.getResult().setType(it->second.shardType);
    local[get.getResult()] = &it->second;
  }

  // In program order, so every operand's status is known at its user.
  for (Operation &op : llvm::make_early_inc_range(body)) {
    const UnitInfo *unit = nullptr;
    for (Value operand : op.getOperands())
      if (const UnitInfo *of = local.lookup(operand))
        unit = of;
    if (!unit || isa<func::ReturnOp, ReduceScatterOp, AllReduceOp>(op))
      continue;
    if (auto sum = dyn_cast<onnxir::ReduceSumOp>(op)) {
      // A sum over the shard (squares for clipping): each rank's part.
      if (unit->sharded()) {
        OpBuilder b(op.getContext());
        b.setInsertionPointAfter(&op);
        Value total = allReduce(b, op.getLoc(), sum.getResult(), "sum",
                                unit->op.getMeshAxes());
        sum.getResult().replaceAllUsesExcept(total, total.getDefiningOp());
      }
      continue;
    }
    auto unitRef = FlatSymbolRefAttr::get(unit->op.getSymNameAttr());
    // The fused steps are elementwise too, with one result per buffer.
    bool fusedStep = isa<AdamWOp, SGDOp>(op);
    bool elementwise = op.hasTrait<OpTrait::ResultsBroadcastableShape>() ||
                       op.hasTrait<OpTrait::SameOperandsAndResultShape>() ||
                       fusedStep;
    if (!elementwise || (op.getNumResults() != 1 && !fusedStep))
      return op.emitOpError("uses the flat gradient, parameters "
                            "or state of ")
             << unitRef
             << " in a way that is not elementwise; the optimizer must be "
                "elementwise to run on shards";
    for (Value operand : op.getOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (local.lookup(operand) == unit || (type && type.getNumElements() == 1))
        continue;
      return op.emitOpError("mixes a shard of ")
             << unitRef << " with " << operand.getType()
             << ", which is not a shard of the same unit";
    }
    for (Value value : op.getResults()) {
      auto result = cast<RankedTensorType>(value.getType());
      if (result.getShape() != unit->op.getTensorType().getShape())
        return op.emitOpError("expected a result of ")
               << unit->op.getTensorType() << " from an elementwise op on "
               << unitRef;
      value.setType(RankedTensorType::get(unit->shardType.getShape(),
                                          result.getElementType()));
      local[value] = unit;
    }
  }
  return success();
}

LogicalResult Sharder::run() {
  if (failed(collectUnits()))
    return failure();
  if (func.getBlocks().size() != 1)
    return func.emitError("@") << func.getName() << " must have one block";
  findForward();
  Block &body = func.getBody().front();
  // One read per unflatten (gradient accumulation clones the forward's
  // views, not the read), so each gets its own gathers.
  for (auto read : llvm::to_vector(body.getOps<GetFlatParamOp>()))
    for (OpOperand &use :
         llvm::make_early_inc_range(llvm::drop_begin(read->getUses())))
      if (isa<UnflattenOp>(use.getOwner())) {
        OpBuilder b(read);
        use.set(b.clone(*read)->getResult(0));
      }
  for (auto views : llvm::to_vector(body.getOps<UnflattenOp>()))
    if (failed(gatherReads(views)))
      return failure();

  // Gradients: results of fsdp-autodiff/fsdp-flatten, or what
  // fsdp-optimizer consumed (marked by an Identity).
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<std::tuple<Value, FlatSymbolRefAttr, bool>> grads;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    if (auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
            i, FSDPDialect::GradOfAttrHelper::getNameStr()))
      grads.emplace_back(ret.getOperand(i), of, false);
    if (auto of = func.getResultAttrOfType<FlatSymbolRefAttr>(
            i, FSDPDialect::FlatGradOfAttrHelper::getNameStr()))
      grads.emplace_back(ret.getOperand(i), of, true);
  }
  for (auto marker : body.getOps<onnxir::IdentityOp>()) {
    if (auto of = marker->getAttrOfType<FlatSymbolRefAttr>(
            FSDPDialect::GradOfAttrHelper::getNameStr()))
      grads.emplace_back(marker.getResult(), of, false);
    if (auto of = marker->getAttrOfType<FlatSymbolRefAttr>(
            FSDPDialect::FlatGradOfAttrHelper::getNameStr()))
      grads.emplace_back(marker.getResult(), of, true);
  }
  for (auto &[grad, of, flat] : grads)
    if (failed(reduceGradient(grad, of, flat)))
      return failure();
  if (failed(retargetOptimizer()))
    return failure();

  SmallVector<Type> types(ret.getOperandTypes());
  func.setFunctionType(
      FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
  return success();
}

struct ShardPass : mlir::fsdp::impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (module.getOps<FlatParamOp>().empty()) {
      module.emitError("the module has no flat parameters; run "
                       "--fsdp-flatten first");
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(Sharder(module, func).run()))
        return signalPassFailure();
  }
};

} // namespace
