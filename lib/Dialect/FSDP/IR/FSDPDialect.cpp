//===- FSDPDialect.cpp - The fsdp dialect ---------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.cpp.inc"

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
