//===- FSDPDialect.h - The fsdp dialect -------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dialect.h"

#include "fsdp/Dialect/FSDP/IR/FSDPEnums.h.inc"

// The attributes come first: the dialect's discardable attribute helpers
// are typed with them.
#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.h.inc"

#endif // FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
