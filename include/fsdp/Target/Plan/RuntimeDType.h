//===- RuntimeDType.h - The element types a plan holds ----------*- C++ -*-===//
//
// The compiler's one list of the element types the runtime has: the MLIR
// type of each value of the C API's fsdprt_dtype_t, which the runtime ties to
// plan.fbs's DType with static_asserts (runtime/src/dtype.cpp).
// fsdp-lower-to-runtime checks types with it and the plan writer writes it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TARGET_PLAN_RUNTIMEDTYPE_H
#define FSDP_TARGET_PLAN_RUNTIMEDTYPE_H

#include "fsdprt/fsdprt.h"

#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace mlir::fsdp {

/// The runtime's dtype for tensors of `element`, or nothing when a plan
/// cannot hold them.
inline std::optional<fsdprt_dtype_t> runtimeDType(Type element) {
  if (element.isF32())
    return FSDPRT_F32;
  if (element.isF16())
    return FSDPRT_F16;
  if (element.isBF16())
    return FSDPRT_BF16;
  if (element.isF64())
    return FSDPRT_F64;
  if (element.isSignlessInteger(64))
    return FSDPRT_I64;
  if (element.isSignlessInteger(32))
    return FSDPRT_I32;
  if (element.isSignlessInteger(16))
    return FSDPRT_I16;
  if (element.isSignlessInteger(8))
    return FSDPRT_I8;
  if (element.isUnsignedInteger(8))
    return FSDPRT_U8;
  if (element.isSignlessInteger(1))
    return FSDPRT_BOOL;
  return std::nullopt;
}

} // namespace mlir::fsdp

#endif // FSDP_TARGET_PLAN_RUNTIMEDTYPE_H
