//===- FSDPDialect.cpp - The fsdp dialect ---------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.cpp.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.cpp.inc"
      >();
}

LogicalResult DataRefAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  StringRef file, int64_t offset,
                                  int64_t length) {
  if (file.empty())
    return emitError() << "data reference names no file";
  if (offset < 0)
    return emitError() << "data reference into '" << file
                       << "' has a negative offset " << offset;
  if (length < 0)
    return emitError() << "data reference into '" << file
                       << "' has a negative length " << length;
  if (offset > std::numeric_limits<int64_t>::max() - length)
    return emitError() << "data reference into '" << file
                       << "' ends past the largest file offset";
  return success();
}

//===----------------------------------------------------------------------===//
// A unit's configuration
//===----------------------------------------------------------------------===//

LogicalResult
UnitConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ShardingStrategyAttr strategy, Type paramDtype,
                       Type reduceDtype, Type bufferDtype,
                       BoolAttr mixedPrecision) {
  // The dtypes fsdp-mixed-precision can cast to (onnx.Cast's float types).
  for (auto [field, dtype] :
       {std::pair<StringRef, Type>{"param_dtype", paramDtype},
        {"reduce_dtype", reduceDtype},
        {"buffer_dtype", bufferDtype}})
    if (dtype && !dtype.isF32() && !dtype.isF16() && !dtype.isBF16() &&
        !dtype.isF64())
      return emitError() << "unit configuration's " << field << " is " << dtype
                         << ", not f32, f16, bf16 or f64";
  return success();
}

LogicalResult AutoWrapRecordAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t worldSize,
    DenseI64ArrayAttr meshShape, int64_t memoryBudget, FloatAttr memoryReserve,
    BoolAttr training, int64_t optimizerStates, WrapEvaluationAttr chosen,
    StringRef peakAt, ArrayAttr peakParts, BoolAttr forwardPrefetch,
    StringRef backwardPrefetch, int64_t limitAllGathers, int64_t bucketBytes,
    int64_t evaluated, int64_t boundaries, ArrayAttr handPolicies,
    ArrayAttr sameUnits, UnitAttr useOrigParams) {
  if (worldSize < 1)
    return emitError() << "auto-wrap record for " << worldSize << " ranks";
  if (meshShape && meshShape.size() != 2)
    return emitError() << "auto-wrap record's mesh_shape has "
                       << meshShape.size() << " sizes, not 2";
  auto allOf = [&](ArrayAttr list, StringRef field,
                   auto kind) -> LogicalResult {
    for (Attribute element : list)
      if (!llvm::isa<decltype(kind)>(element))
        return emitError() << "auto-wrap record's " << field << " holds "
                           << element << ", not a #fsdp."
                           << decltype(kind)::getMnemonic();
    return success();
  };
  if (failed(allOf(peakParts, "peak_parts", PeakPartAttr())) ||
      failed(allOf(handPolicies, "hand_policies", WrapEvaluationAttr())) ||
      failed(allOf(sameUnits, "same_units", SameUnitsAttr())))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// The discardable attributes' verifiers
//===----------------------------------------------------------------------===//

namespace {

/// Checks that the discardable attribute `attr`, if it is one the dialect
/// declares, holds the declared kind of value. `where` says which argument
/// or result carries it (empty for the op itself); the other `fsdp.`
/// attributes pass unchecked.
LogicalResult verifyDiscardable(Operation *op, NamedAttribute attr,
                                StringRef where, bool onModule) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto mismatch = [&](StringRef kind) -> LogicalResult {
    return op->emitOpError() << "has '" << name << "'" << where
                             << " that is not " << kind << ": " << value;
  };
  if (name == FSDPDialect::GradOfAttrHelper::getNameStr() ||
      name == FSDPDialect::FlatGradOfAttrHelper::getNameStr() ||
      name == FSDPDialect::UpdateOfAttrHelper::getNameStr() ||
      name == FSDPDialect::StateOfAttrHelper::getNameStr())
    return isa<FlatSymbolRefAttr>(value)
               ? success()
               : mismatch("a symbol reference (@name)");
  if (name == FSDPDialect::NameAttrHelper::getNameStr())
    return isa<StringAttr>(value) ? success() : mismatch("a string");
  bool moduleFact = name == FSDPDialect::UnitsAttrHelper::getNameStr() ||
                    name == FSDPDialect::AutoWrapAttrHelper::getNameStr() ||
                    name == FSDPDialect::CostModelAttrHelper::getNameStr();
  if (moduleFact && !onModule)
    return op->emitOpError() << "has '" << name << "'" << where
                             << ", which only a module carries";
  if (name == FSDPDialect::UnitsAttrHelper::getNameStr()) {
    auto units = dyn_cast<ArrayAttr>(value);
    if (!units || !llvm::all_of(units, llvm::IsaPred<WrapUnitAttr>))
      return mismatch("a list of #fsdp.unit");
  }
  if (name == FSDPDialect::AutoWrapAttrHelper::getNameStr() &&
      !isa<AutoWrapRecordAttr>(value))
    return mismatch("an #fsdp.auto_wrap record");
  if (name == FSDPDialect::CostModelAttrHelper::getNameStr() &&
      !isa<CostModelAttr>(value))
    return mismatch("an #fsdp.cost_model");
  if (name == FSDPDialect::ConfigAttrHelper::getNameStr() &&
      !isa<UnitConfigAttr>(value))
    return mismatch("an #fsdp.unit_config");
  if (name == FSDPDialect::RandomOpAttrHelper::getNameStr()) {
    auto id = dyn_cast<IntegerAttr>(value);
    if (!id || id.getValue().isNegative() || id.getValue().getActiveBits() > 32)
      return mismatch("an integer from 0 to 2^32-1");
  }
  if (name == FSDPDialect::MicroBatchAttrHelper::getNameStr()) {
    auto slot = dyn_cast<DenseI64ArrayAttr>(value);
    if (!slot || slot.size() != 2 || slot[0] < 0 || slot[1] <= slot[0])
      return mismatch("array<i64: slot, slots> with 0 <= slot < slots");
  }
  return success();
}

} // namespace

LogicalResult FSDPDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  return verifyDiscardable(op, attr, "", isa<ModuleOp>(op));
}

LogicalResult FSDPDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned index,
                                                    NamedAttribute attr) {
  return verifyDiscardable(op, attr, " on argument #" + std::to_string(index),
                           false);
}

LogicalResult FSDPDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned region,
                                                       unsigned index,
                                                       NamedAttribute attr) {
  return verifyDiscardable(op, attr, " on result #" + std::to_string(index),
                           false);
}
