//===- MixedPrecision.cpp - Each unit's param, reduce and buffer dtypes ---===//
//
/// PyTorch FSDP's MixedPrecision on each rank's program (after fsdp-shard).
/// The master shard, the optimizer and its state keep the flat buffer's
/// dtype; everything else takes the dtype its unit's config names:
///
///   - a unit's shard is cast to `param_dtype` before its all-gather (or,
///     ungathered, before its unflatten), and the gathered buffer and its
///     views are retyped;
///   - the function's forward inputs are cast to the root's `param_dtype`;
///     then, in program order, each op picks one dtype (its unit's, a
///     parameter operand's unit's, its operands' common one, or the widest
///     of them) and its float operands are cast to it (constants re-emitted);
///   - model buffers are read in `buffer_dtype`;
///   - a flat gradient is packed in `param_dtype`, reduced in
///     `reduce_dtype` and cast back to the master dtype after the last
///     collective;
///   - results are cast back to their declared types.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/Phases.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// One unit's dtypes. `param` is the compute dtype: the master dtype for a
/// unit without mixed precision.
struct Precision {
  Type master;
  Type param;
  Type reduce;
  Type buffer; // null: buffers as stored
};

/// ONNX's TensorProto code for a float type (onnx.Cast's `to`), 0 if none.
int64_t onnxTypeCode(Type type) {
  if (type.isF32())
    return 1;
  if (type.isF16())
    return 10;
  if (type.isF64())
    return 11;
  if (type.isBF16())
    return 16;
  return 0;
}

RankedTensorType floatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType()) ? tensor : nullptr;
}

Type elementOf(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

/// PyTorch's promotion of float dtypes: the widest; f16 with bf16 is f32.
Type promote(Type a, Type b) {
  if (!a || a == b)
    return b;
  unsigned wa = a.getIntOrFloatBitWidth(), wb = b.getIntOrFloatBitWidth();
  if (wa != wb)
    return wa > wb ? a : b;
  return wa == 16 ? Float32Type::get(a.getContext()) : a;
}

/// Ops that only reinterpret (or transpose) a value: a parameter read
/// through them is still that parameter.
bool keepsParameter(Operation *op) {
  return isa<ViewLikeOpInterface, onnxir::TransposeOp>(op);
}

bool isGradientMarker(Operation *op) {
  return isa<onnxir::IdentityOp>(op) &&
         (op->hasAttr(FSDPDialect::GradOfAttrHelper::getNameStr()) ||
          op->hasAttr(FSDPDialect::FlatGradOfAttrHelper::getNameStr()));
}

/// fsdp-shard reduces gradients with `avg`; `sum` is clipping's norm.
bool isGradientCollective(Operation *op) {
  if (isa<ReduceScatterOp>(op))
    return true;
  auto reduce = dyn_cast<AllReduceOp>(op);
  return reduce && reduce.getReduction() == "avg";
}

/// Every unit's dtypes, by module FQN and by flat parameter.
struct UnitTable {
  llvm::StringMap<Precision> byModule;
  llvm::DenseMap<Operation *, Precision *> byFlat;
  /// Whether some unit casts anything.
  bool active = false;

  void build(ModuleOp module);
  const Precision *lookup(StringRef fqn) const {
    auto it = byModule.find(fqn);
    return it == byModule.end() ? nullptr : &it->second;
  }
  /// The unit wrapping the module that holds `fqn` (a buffer's name).
  const Precision *owner(StringRef fqn) const {
    for (StringRef module = parentOf(fqn);; module = parentOf(module)) {
      if (const Precision *unit = lookup(module))
        return unit;
      if (module.empty())
        return nullptr;
    }
  }
};

/// A unit's config as dtypes (the dialect has checked that each is one
/// onnx.Cast takes).
Precision precisionOf(UnitConfigAttr config, Type master) {
  if (!config || config.isFullPrecision())
    return Precision{master, master, master, Type()};
  Precision p{master, master, config.getReduceDtype(), config.getBufferDtype()};
  if (Type param = config.getParamDtype())
    p.param = param;
  if (!p.reduce)
    p.reduce = p.param; // PyTorch reduces in param_dtype by default
  return p;
}

void UnitTable::build(ModuleOp module) {
  for (auto flat : module.getOps<FlatParamOp>()) {
    StringRef fqn = flat.getModule() ? *flat.getModule() : flat.getSymName();
    byModule[fqn] = precisionOf(
        FSDPDialect::ConfigAttrHelper(module.getContext()).getAttr(flat),
        flat.getTensorType().getElementType());
  }
  for (auto flat : module.getOps<FlatParamOp>())
    byFlat[flat] =
        &byModule[flat.getModule() ? *flat.getModule() : flat.getSymName()];
  // Units without a flat buffer (their parameters all went to descendants)
  // still own their modules' ops and buffers.
  if (auto units = module->getAttrOfType<ArrayAttr>(
          FSDPDialect::UnitsAttrHelper::getNameStr()))
    for (Attribute entry : units)
      if (auto unit = dyn_cast<WrapUnitAttr>(entry))
        if (!byModule.count(unit.getModule()))
          byModule[unit.getModule()] = precisionOf(
              unit.getConfig(), Float32Type::get(module.getContext()));
  for (auto &entry : byModule) {
    const Precision &p = entry.second;
    active |= p.param != p.master || p.reduce != p.master || p.buffer;
  }
}

class Caster {
public:
  Caster(ModuleOp module, func::FuncOp func, const UnitTable &units)
      : module(module), func(func), units(units) {}
  LogicalResult run();

private:
  void findModelInputs(SmallVectorImpl<BlockArgument> &inputs);
  void castParameterReads();
  void castBufferReads();
  void collectGradientChains();
  LogicalResult castGradientChain(ArrayRef<Operation *> chain);
  LogicalResult retype(Operation *op);
  Type computeType(Operation *op, ArrayRef<Type> strong);
  FailureOr<Value> castTo(Value value, Type element);

  ModuleOp module;
  func::FuncOp func;
  const UnitTable &units;
  SymbolTableCollection symbols;
  /// Values computed from constants only: they adapt to their users.
  llvm::DenseSet<Value> weak;
  /// Parameters (views of a unit's gathered buffer and their reshapes).
  llvm::DenseMap<Value, const Precision *> parameterOf;
  /// Ops handled by a structural rule, skipped by the per-op walk.
  llvm::DenseSet<Operation *> handled;
  /// Gradient chains (pack, marker, collectives), by their first op.
  llvm::DenseMap<Operation *, SmallVector<Operation *>> chains;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
  /// Constants re-emitted in another dtype.
  llvm::SetVector<Operation *> recast;
};

/// `value` as `element` (same shape): a constant re-emitted, else one
/// onnx.Cast right after its definition, shared by every user.
FailureOr<Value> Caster::castTo(Value value, Type element) {
  if (elementOf(value) == element)
    return value;
  auto key = std::make_pair(value, element);
  if (Value cached = casts.lookup(key))
    return cached;
  auto type = cast<RankedTensorType>(value.getType()).clone(element);
  OpBuilder b(func.getContext());
  if (Operation *def = value.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(value.getParentBlock());
  Location loc = value.getLoc();
  Value result;
  auto constant = value.getDefiningOp<onnxir::ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseFPElementsAttr>(constant.getValue()) : nullptr;
  if (dense) {
    const llvm::fltSemantics &semantics =
        cast<FloatType>(element).getFloatSemantics();
    DenseElementsAttr converted =
        dense.mapValues(element, [&](const APFloat &x) {
          APFloat y = x;
          bool lost;
          y.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
          return y.bitcastToAPInt();
        });
    result = b.create<onnxir::ConstantOp>(loc, converted);
    recast.insert(constant);
  } else {
    int64_t code = onnxTypeCode(element);
    if (!code)
      return emitError(loc, "cannot cast to ") << element;
    result =
        b.create<onnxir::CastOp>(loc, type, value, b.getI64IntegerAttr(code));
  }
  handled.insert(result.getDefiningOp());
  if (weak.contains(value))
    weak.insert(result);
  casts[key] = result;
  return result;
}

/// The float arguments the forward reads (PyTorch casts the root's forward
/// inputs); arguments only the optimizer reads (lr, step) are not inputs.
void Caster::findModelInputs(SmallVectorImpl<BlockArgument> &inputs) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  SmallVector<Value> work;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    if (!isBackwardResult(func, i, symbols))
      work.push_back(ret.getOperand(i));
  }
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      if (floatTensor(arg.getType()))
        inputs.push_back(arg);
      continue;
    }
    for (Value operand : value.getDefiningOp()->getOperands())
      work.push_back(operand);
  }
  llvm::sort(inputs, [](BlockArgument a, BlockArgument b) {
    return a.getArgNumber() < b.getArgNumber();
  });
}

/// Shard -> Cast -> all_gather -> unflatten in param_dtype (or Cast ->
/// unflatten for a unit that is not gathered). The optimizer's reads of the
/// shard are left in the master dtype.
void Caster::castParameterReads() {
  Block &body = func.getBody().front();
  for (auto shard : llvm::to_vector(body.getOps<GetShardOp>())) {
    handled.insert(shard);
    auto flat = symbols.lookupNearestSymbolFrom<FlatParamOp>(
        module, shard.getUnitAttr());
    const Precision *unit = flat ? units.byFlat.lookup(flat) : nullptr;
    if (!unit)
      continue;
    SmallVector<OpOperand *> uses = llvm::to_vector(
        llvm::map_range(shard->getUses(), [](OpOperand &use) { return &use; }));
    for (OpOperand *use : uses) {
      Operation *user = use->getOwner();
      SmallVector<Operation *> views;
      if (auto gather = dyn_cast<AllGatherOp>(user)) {
        handled.insert(gather);
        for (Operation *gatherUser : gather->getUsers())
          if (isa<UnflattenOp>(gatherUser))
            views.push_back(gatherUser);
      } else if (isa<UnflattenOp>(user)) {
        views.push_back(user);
      } else {
        continue; // the optimizer's read: the master copy
      }
      if (unit->param != unit->master) {
        use->set(*castTo(shard, unit->param)); // a float cast cannot fail
        if (isa<AllGatherOp>(user))
          user->getResult(0).setType(
              cast<RankedTensorType>(user->getResult(0).getType())
                  .clone(unit->param));
        for (Operation *view : views)
          for (Value result : view->getResults())
            result.setType(
                cast<RankedTensorType>(result.getType()).clone(unit->param));
      }
      for (Operation *view : views) {
        handled.insert(view);
        for (Value result : view->getResults())
          parameterOf[result] = unit;
      }
    }
  }
}

/// Model buffers read in their unit's buffer_dtype.
void Caster::castBufferReads() {
  Block &body = func.getBody().front();
  for (auto read : llvm::to_vector(body.getOps<GetBufferOp>())) {
    handled.insert(read);
    auto buffer =
        symbols.lookupNearestSymbolFrom<BufferOp>(module, read.getBufferAttr());
    if (!buffer ||
        buffer->hasAttr(FSDPDialect::StateOfAttrHelper::getNameStr()) ||
        !floatTensor(read.getType()))
      continue;
    const Precision *unit = units.owner(buffer.getSymName());
    if (!unit || !unit->buffer)
      continue;
    Value cast = *castTo(read.getResult(), unit->buffer);
    read.getResult().replaceAllUsesExcept(cast, cast.getDefiningOp());
  }
}

/// A gradient's way from its pack to where it is used: the pack, then
/// fsdp-optimizer's marker, then fsdp-shard's collectives (reduce-scatter
/// and HYBRID_SHARD's all-reduce, or a NO_SHARD all-reduce). A marker or a
/// collective without a pack (an ignored parameter's gradient) starts a
/// chain too.
void Caster::collectGradientChains() {
  Block &body = func.getBody().front();
  for (Operation &op : body) {
    bool pack = isa<PackOp>(op), marker = isGradientMarker(&op);
    if (handled.contains(&op) || !(pack || marker || isGradientCollective(&op)))
      continue;
    // Stages in order: 0 the pack, 1 the marker, 2 the collectives.
    int stage = pack ? 0 : marker ? 1 : 2;
    SmallVector<Operation *> chain = {&op};
    handled.insert(&op);
    while (chain.back()->getResult(0).hasOneUse()) {
      Operation *next = *chain.back()->getResult(0).getUsers().begin();
      if (stage < 1 && isGradientMarker(next))
        stage = 1;
      else if (isGradientCollective(next))
        stage = 2;
      else
        break;
      chain.push_back(next);
      handled.insert(next);
    }
    chains[&op] = std::move(chain);
  }
}

/// A flat gradient in param_dtype, reduced in reduce_dtype, then the master
/// dtype for what follows (the optimizer, or the function's result).
LogicalResult Caster::castGradientChain(ArrayRef<Operation *> chain) {
  Value end = chain.back()->getResult(0);
  Type master = elementOf(end);
  Type carry = master, reduce = master;
  if (auto pack = dyn_cast<PackOp>(chain.front())) {
    auto flat = symbols.lookupNearestSymbolFrom<FlatParamOp>(
        module, pack.getUnitAttr());
    if (const Precision *unit = flat ? units.byFlat.lookup(flat) : nullptr) {
      master = unit->master;
      carry = unit->param;
      reduce = unit->reduce;
    }
  }
  for (Operation *op : chain) {
    bool collective = isGradientCollective(op);
    Type element = collective ? reduce : carry;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!floatTensor(operand.get().getType()))
        continue;
      FailureOr<Value> cast = castTo(operand.get(), element);
      if (failed(cast))
        return failure();
      operand.set(*cast);
    }
    Value result = op->getResult(0);
    result.setType(cast<RankedTensorType>(result.getType()).clone(element));
  }
  FailureOr<Value> back = castTo(end, master);
  if (failed(back))
    return failure();
  end.replaceAllUsesExcept(*back, back->getDefiningOp());
  return success();
}

/// The dtype `op` computes in, given its non-constant float operand types.
Type Caster::computeType(Operation *op, ArrayRef<Type> strong) {
  if (auto unit = op->getAttrOfType<StringAttr>("fsdp.unit"))
    if (const Precision *p = units.lookup(unit.getValue()))
      return p->param;
  Type anchored;
  for (Value operand : op->getOperands())
    if (const Precision *p = parameterOf.lookup(operand))
      anchored = promote(anchored, p->param);
  if (anchored)
    return anchored;
  Type widest;
  for (Type type : strong)
    widest = promote(widest, type);
  return widest;
}

/// Attention's row log-sum-exp stays f32 whatever dtype attention computes
/// in (the precision its gradient recomputes the probabilities from), and
/// so does an additive mask (the runtime's attention contract). So do the
/// cross-entropy's log-sum-exp, for the same reason, and a training batch
/// norm's saved mean and inverse std (as cuDNN keeps them).
static bool isF32Only(Value result) {
  if (auto attention = result.getDefiningOp<AttentionOp>())
    return result == attention.getLse();
  if (auto loss = result.getDefiningOp<SoftmaxCrossEntropyOp>())
    return result == loss.getLse();
  if (auto norm = result.getDefiningOp<BatchNormTrainOp>())
    return result == norm.getSavedMean() || result == norm.getSavedInvstd();
  return false;
}
static bool isF32Only(OpOperand &operand) {
  Value value = operand.get();
  if (auto attention = dyn_cast<AttentionOp>(operand.getOwner()))
    return value == attention.getMask();
  if (auto grad = dyn_cast<AttentionGradOp>(operand.getOwner()))
    return value == grad.getLse() || value == grad.getMask();
  if (auto grad = dyn_cast<SoftmaxCrossEntropyGradOp>(operand.getOwner()))
    return value == grad.getLse();
  if (auto grad = dyn_cast<BatchNormGradOp>(operand.getOwner()))
    return value == grad.getSavedMean() || value == grad.getSavedInvstd();
  return false;
}

/// One op of the compute: its float operands cast to the dtype it computes
/// in, its float results retyped.
LogicalResult Caster::retype(Operation *op) {
  bool constant = op->hasTrait<OpTrait::ConstantLike>() ||
                  (isPure(op) && llvm::all_of(op->getOperands(), [&](Value v) {
                     return weak.contains(v);
                   }));
  if (constant || isa<onnxir::CastOp>(op)) {
    if (constant)
      weak.insert(op->result_begin(), op->result_end());
    return success(); // the model's own casts keep their `to`
  }
  SmallVector<Type> strong;
  for (OpOperand &operand : op->getOpOperands())
    if (floatTensor(operand.get().getType()) && !weak.contains(operand.get()) &&
        !isF32Only(operand))
      strong.push_back(elementOf(operand.get()));
  if (strong.empty()) {
    // Floats from constants only (or a constant fill): nothing to adapt
    // to. Other ops without float operands (reads of state) are sources.
    bool fromConstants = isa<onnxir::ConstantOfShapeOp>(op) ||
                         llvm::any_of(op->getOperands(), [](Value v) {
                           return floatTensor(v.getType());
                         });
    if (fromConstants)
      for (Value result : op->getResults())
        if (floatTensor(result.getType()))
          weak.insert(result);
    return success();
  }
  Type element = computeType(op, strong);
  bool changes = llvm::any_of(op->getOpOperands(),
                              [&](OpOperand &o) {
                                return floatTensor(o.get().getType()) &&
                                       !isF32Only(o) &&
                                       elementOf(o.get()) != element;
                              }) ||
                 llvm::any_of(op->getResults(), [&](Value v) {
                   return floatTensor(v.getType()) && !isF32Only(v) &&
                          elementOf(v) != element;
                 });
  if (changes && op->getNumRegions())
    return op->emitOpError("cannot recast an op with "
                           "regions to ")
           << element;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!floatTensor(operand.get().getType()))
      continue;
    FailureOr<Value> cast = castTo(
        operand.get(),
        isF32Only(operand) ? Float32Type::get(op->getContext()) : element);
    if (failed(cast))
      return failure();
    operand.set(*cast);
  }
  for (Value result : op->getResults())
    if (auto type = floatTensor(result.getType()); type && !isF32Only(result))
      result.setType(type.clone(element));
  if (keepsParameter(op))
    if (const Precision *p = parameterOf.lookup(op->getOperand(0)))
      parameterOf[op->getResult(0)] = p;
  return success();
}

LogicalResult Caster::run() {
  if (func.getBlocks().size() != 1)
    return func.emitError("@") << func.getName() << " must have one block";
  Block &body = func.getBody().front();
  auto reads = body.getOps<GetFlatParamOp>();
  if (!reads.empty())
    return (*reads.begin()).emitOpError("@")
           << func.getName() << " reads the full flat buffer of "
           << (*reads.begin()).getUnitAttr() << "; run --fsdp-shard first";

  // The root's forward inputs, cast once at the start.
  SmallVector<BlockArgument> inputs;
  findModelInputs(inputs);
  if (const Precision *root = units.lookup(""))
    for (BlockArgument arg : inputs) {
      FailureOr<Value> cast = castTo(arg, root->param);
      if (failed(cast))
        return failure();
      if (*cast != arg)
        arg.replaceAllUsesExcept(*cast, cast->getDefiningOp());
    }

  castParameterReads();
  castBufferReads();
  collectGradientChains();

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (Operation *op : llvm::to_vector(llvm::make_pointer_range(body))) {
    if (op == ret.getOperation())
      break;
    auto chain = chains.find(op);
    if (chain != chains.end()) {
      if (failed(castGradientChain(chain->second)))
        return failure();
      continue;
    }
    if (handled.contains(op) || isa<ReleaseOp>(op))
      continue;
    if (failed(retype(op)))
      return failure();
  }

  // Results keep their declared types (fp32 loss, outputs, updates).
  for (auto [operand, type] :
       llvm::zip(ret->getOpOperands(), func.getResultTypes())) {
    auto declared = floatTensor(type);
    if (!declared || operand.get().getType() == declared)
      continue;
    FailureOr<Value> cast = castTo(operand.get(), declared.getElementType());
    if (failed(cast))
      return failure();
    operand.set(*cast);
  }

  // Constants re-emitted in another dtype may leave their originals unused.
  for (Operation *op : recast)
    if (op->use_empty())
      op->erase();
  return success();
}

struct MixedPrecisionPass
    : mlir::fsdp::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    UnitTable units;
    units.build(module);
    if (!units.active)
      return markAllAnalysesPreserved(); // no unit sets a dtype
    if (module.getOps<FlatParamOp>().empty()) {
      module.emitError("the module has no flat "
                       "parameters; run --fsdp-flatten and --fsdp-shard "
                       "first");
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(Caster(module, func, units).run()))
        return signalPassFailure();
  }
};

} // namespace
