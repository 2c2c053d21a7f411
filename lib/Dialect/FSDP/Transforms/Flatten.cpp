//===- Flatten.cpp - One flat buffer per FSDP unit ------------------------===//
//
/// Turns the units chosen by fsdp-auto-wrap into fsdp.flat_param symbols and
/// routes every parameter read through its unit's flat buffer:
///
///   %w = fsdp.get_param @w        ->  %f = fsdp.get_flat_param @"unit:m"
///                                     %w, %b = fsdp.unflatten %f of @"unit:m"
///
/// so that the later passes see one buffer per unit to gather, free and
/// reduce-scatter. All layout arithmetic is the layout library's.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FLATTEN
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr StringLiteral kMeshName = "fsdp_world";

struct FlattenPass : mlir::fsdp::impl::FlattenBase<FlattenPass> {
  using FlattenBase::FlattenBase;

  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    ModuleOp module = getOperation();
    if (worldSize < 1) {
      emitError(module.getLoc()) << "world-size must be at least 1, got "
                                 << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    auto units = module->getAttrOfType<ArrayAttr>(
        FSDPDialect::UnitsAttrHelper::getNameStr());
    if (!units) {
      emitError(module.getLoc()) << "the module has no FSDP units; run "
                                    "fsdp-auto-wrap first";
      return signalPassFailure();
    }

    SmallVector<int64_t> shape(meshShape.begin(), meshShape.end());
    if (shape.empty())
      shape.push_back(worldSize);
    else if (worldSize != 1 || shape.size() > 2 ||
             llvm::any_of(shape, [](int64_t size) { return size < 1; })) {
      emitError(module.getLoc())
          << "mesh-shape takes one or two positive sizes and "
             "replaces world-size";
      return signalPassFailure();
    }

    // policy=auto chose for a mesh; sharding over another would make its
    // choice (and its memory budget) meaningless.
    if (AutoWrapRecordAttr chosen =
            FSDPDialect::AutoWrapAttrHelper(&getContext()).getAttr(module)) {
      SmallVector<int64_t> chosenShape = {chosen.getWorldSize()};
      if (DenseI64ArrayAttr mesh = chosen.getMeshShape())
        chosenShape.assign(mesh.asArrayRef().begin(), mesh.asArrayRef().end());
      if (chosenShape != shape) {
        emitError(module.getLoc())
            << "fsdp-auto-wrap policy=auto chose the units for "
            << (chosenShape.size() == 1 ? "world-size=" : "mesh-shape=")
            << llvm::join(llvm::map_range(chosenShape,
                                          [](int64_t v) { return std::to_string(v); }),
                          ",")
            << " but this pass shards over "
            << (shape.size() == 1 ? "world-size=" : "mesh-shape=")
            << llvm::join(llvm::map_range(shape,
                                          [](int64_t v) { return std::to_string(v); }),
                          ",")
            << "; give both the same ranks";
        return signalPassFailure();
      }
      // Its memory model laid the units out with this alignment.
      if (static_cast<bool>(chosen.getUseOrigParams()) != useOrigParams) {
        emitError(module.getLoc())
            << "fsdp-auto-wrap policy=auto chose the units "
            << (useOrigParams ? "without" : "with")
            << " use-orig-params but this pass lays them out "
            << (useOrigParams ? "with" : "without")
            << " it; give both the same use-orig-params";
        return signalPassFailure();
      }
    }

    OpBuilder b(module.getBodyRegion());
    FlatSymbolRefAttr mesh;
    if (llvm::any_of(shape, [](int64_t size) { return size > 1; })) {
      if (Operation *existing =
              SymbolTable::lookupSymbolIn(module, kMeshName)) {
        emitError(existing->getLoc())
            << "the module already has a symbol @" << kMeshName
            << "; was it flattened before?";
        return signalPassFailure();
      }
      auto meshOp =
          b.create<mesh::MeshOp>(module.getLoc(), kMeshName, shape);
      mesh = FlatSymbolRefAttr::get(meshOp.getSymNameAttr());
    }

    SymbolTable symbols(module);
    llvm::DenseMap<Operation *, FlatParamOp> unitOf;
    SmallVector<FlatParamOp> flatParams;
    for (Attribute entry : units) {
      auto unit = dyn_cast<WrapUnitAttr>(entry);
      if (!unit) {
        emitError(module.getLoc())
            << "fsdp.units holds " << entry << ", which is not an #fsdp.unit";
        return signalPassFailure();
      }
      if (unit.getParams().empty())
        continue; // A unit whose parameters its descendants all took.
      FailureOr<SmallVector<int16_t>> axes = shardAxes(unit, shape.size());
      if (failed(axes))
        return signalPassFailure();
      FailureOr<FlatParamOp> flat =
          createFlatParam(b, symbols, unit, axes->empty() ? nullptr : mesh, *axes);
      if (failed(flat))
        return signalPassFailure();
      flatParams.push_back(*flat);
      for (FlatSymbolRefAttr ref :
           unit.getParams().getAsRange<FlatSymbolRefAttr>())
        unitOf[symbols.lookup(ref.getValue())] = *flat;
    }

    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      rewriteReads(func, symbols, unitOf);
      if (failed(packGradients(func, symbols, unitOf)))
        return signalPassFailure();
    }
  }

  /// Replaces a function's per-parameter gradient results (result attribute
  /// `fsdp.grad_of = @param`, as fsdp-autodiff returns them) with one flat
  /// gradient per unit (`fsdp.flat_grad_of = @"unit:..."`), packed in the
  /// unit's layout; a unit parameter without a gradient contributes zeros,
  /// as PyTorch's flat gradient does for an unused parameter.
  LogicalResult
  packGradients(func::FuncOp func, SymbolTable &symbols,
                const llvm::DenseMap<Operation *, FlatParamOp> &unitOf) {
    auto ret = dyn_cast<func::ReturnOp>(func.front().getTerminator());
    if (!ret || func.getBlocks().size() != 1)
      return success();
    llvm::MapVector<FlatParamOp, llvm::DenseMap<Operation *, Value>> grads;
    llvm::BitVector packed(func.getNumResults());
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto ref = func.getResultAttrOfType<FlatSymbolRefAttr>(
          i, FSDPDialect::GradOfAttrHelper::getNameStr());
      if (!ref)
        continue;
      Operation *param = symbols.lookup(ref.getValue());
      if (!isa_and_nonnull<ParamOp>(param))
        return emitError(func.getLoc())
               << "result " << i << " of @" << func.getName()
               << " is the gradient of " << ref
               << ", which is not an fsdp.param";
      auto unit = unitOf.find(param);
      if (unit == unitOf.end())
        continue; // An ignored parameter's gradient stays as it is.
      grads[unit->second][param] = ret.getOperand(i);
      packed.set(i);
    }
    if (grads.empty())
      return success();

    OpBuilder b(ret);
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      if (!packed.test(i)) {
        results.push_back(ret.getOperand(i));
        resultAttrs.push_back(func.getResultAttrDict(i));
      }
    for (auto &[unit, byParam] : grads) {
      SmallVector<Value> members;
      for (FlatSymbolRefAttr ref :
           unit.getParams().getAsRange<FlatSymbolRefAttr>()) {
        auto param = symbols.lookup<ParamOp>(ref.getValue());
        Value grad = byParam.lookup(param);
        if (!grad) {
          RankedTensorType type = param.getTensorType();
          grad = b.create<arith::ConstantOp>(
              ret.getLoc(), type,
              DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
        }
        members.push_back(grad);
      }
      auto ref = FlatSymbolRefAttr::get(unit.getSymNameAttr());
      results.push_back(b.create<PackOp>(ret.getLoc(), unit.getTensorType(),
                                         members, ref));
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          FSDPDialect::FlatGradOfAttrHelper::getNameStr(), ref)));
    }
    b.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    func.setFunctionType(b.getFunctionType(
        func.getArgumentTypes(), ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
    return success();
  }

  /// The mesh axes `unit` is sharded over, from its strategy.
  FailureOr<SmallVector<int16_t>> shardAxes(WrapUnitAttr unit, size_t rank) {
    ShardingStrategy strategy = unit.getStrategy();
    if (strategy == ShardingStrategy::NO_SHARD)
      return SmallVector<int16_t>();
    if (strategy == ShardingStrategy::HYBRID_SHARD) {
      if (rank != 2)
        return emitError(getOperation().getLoc())
               << "unit '" << unit.getModule()
               << "' uses HYBRID_SHARD, which needs a 2-D mesh "
                  "(mesh-shape=<groups>,<ranks per group>)";
      return SmallVector<int16_t>{1};
    }
    SmallVector<int16_t> all;
    for (size_t axis = 0; axis < rank; ++axis)
      all.push_back(axis);
    return all;
  }

  FailureOr<FlatParamOp> createFlatParam(OpBuilder &b, SymbolTable &symbols,
                                         WrapUnitAttr unit,
                                         FlatSymbolRefAttr mesh,
                                         ArrayRef<int16_t> axes) {
    ModuleOp module = getOperation();
    Type element;
    for (FlatSymbolRefAttr ref :
         unit.getParams().getAsRange<FlatSymbolRefAttr>()) {
      Operation *symbol = symbols.lookup(ref.getValue());
      auto param = dyn_cast_or_null<ParamOp>(symbol);
      if (!param)
        return emitError(symbol ? symbol->getLoc() : module.getLoc())
               << "unit '" << unit.getModule() << "' lists " << ref
               << ", which is not an fsdp.param";
      Type paramElement = param.getTensorType().getElementType();
      if (element && element != paramElement)
        return emitError(param.getLoc())
               << "unit '" << unit.getModule() << "' mixes element types ("
               << element << " and " << paramElement << " for " << ref
               << "); a flat buffer holds one dtype";
      element = paramElement;
    }
    int64_t alignment =
        ::fsdp::layout::paramAlignment(elementBytes(element), useOrigParams);

    std::string name = "unit:" + unit.getModule().str();
    Location loc = NameLoc::get(b.getStringAttr(name), module.getLoc());
    // The type is computed below from the layout; start with a placeholder.
    auto flat = b.create<FlatParamOp>(
        loc, b.getStringAttr(name), unit.getParams(), mesh,
        mesh ? b.getDenseI16ArrayAttr(axes) : b.getDenseI16ArrayAttr({}),
        b.getI64IntegerAttr(alignment),
        TypeAttr::get(RankedTensorType::get({0}, element)),
        b.getStringAttr(unit.getModule()));
    if (Operation *existing = symbols.lookup(name)) {
      flat.erase();
      return emitError(existing->getLoc())
             << "a symbol named '" << name << "' already exists";
    }
    symbols.insert(flat);
    SymbolTableCollection collection;
    FailureOr<::fsdp::layout::FlatLayout> layout =
        computeLayout(flat, collection);
    if (failed(layout))
      return failure();
    flat.setTypeAttr(TypeAttr::get(
        RankedTensorType::get({layout->paddedNumel()}, element)));
    if (UnitConfigAttr config = unit.getConfig())
      FSDPDialect::ConfigAttrHelper(&getContext()).setAttr(flat, config);
    return flat;
  }

  /// Replaces the reads of flattened parameters in `func` with views of
  /// their unit's flat buffer, read once before the unit's first use.
  void rewriteReads(func::FuncOp func, SymbolTable &symbols,
                    const llvm::DenseMap<Operation *, FlatParamOp> &unitOf) {
    llvm::MapVector<FlatParamOp, SmallVector<GetParamOp>> reads;
    func.walk([&](GetParamOp read) {
      Operation *param = symbols.lookup(read.getParam());
      auto unit = unitOf.find(param);
      if (unit != unitOf.end())
        reads[unit->second].push_back(read);
    });
    for (auto &[unit, unitReads] : reads) {
      GetParamOp first = unitReads.front();
      OpBuilder b(first);
      if (first->getBlock() != &func.front())
        b.setInsertionPointToStart(&func.front());
      Location loc = NameLoc::get(b.getStringAttr(unit.getSymName()), first.getLoc());
      auto flat = b.create<GetFlatParamOp>(loc, unit.getTensorType(),
                                           FlatSymbolRefAttr::get(unit.getSymNameAttr()));
      SmallVector<Type> viewTypes;
      llvm::StringMap<unsigned> position;
      for (auto [i, ref] :
           llvm::enumerate(unit.getParams().getAsRange<FlatSymbolRefAttr>())) {
        viewTypes.push_back(
            symbols.lookup<ParamOp>(ref.getValue()).getType());
        position[ref.getValue()] = i;
      }
      auto views = b.create<UnflattenOp>(loc, viewTypes, flat,
                                         FlatSymbolRefAttr::get(unit.getSymNameAttr()));
      for (GetParamOp read : unitReads) {
        read.replaceAllUsesWith(views.getResult(position.lookup(read.getParam())));
        read.erase();
      }
    }
  }
};

} // namespace
