//===- Types.h - Byte sizes and dtype names of tensor types -----*- C++ -*-===//
//
// The one place where the compiler derives a byte size from a type, or a type
// from a dtype option's name. Passes, the importer and the plan writer all
// size tensors through these, so they agree with each other and with the
// runtime (one byte per i1, as plans store them).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_TYPES_H
#define FSDP_SUPPORT_TYPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace mlir::fsdp {

/// The bytes of one element of an integer or float type, rounded up to whole
/// bytes (an i1 takes one).
inline int64_t elementBytes(Type element) {
  return std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8);
}

/// The element count of a static shape, or nothing if it overflows int64.
inline std::optional<int64_t> checkedNumElements(ShapedType type) {
  int64_t count = 1;
  for (int64_t dim : type.getShape()) {
    std::optional<int64_t> product = llvm::checkedMul(count, dim);
    if (!product)
      return std::nullopt;
    count = *product;
  }
  return count;
}

/// The bytes of a static tensor of integer or float elements, or nothing if
/// the count overflows int64. Every size the compiler derives from a type
/// starts here, so a huge batch size is an error rather than a wrapped,
/// small plan.
inline std::optional<int64_t> checkedByteSize(ShapedType type) {
  std::optional<int64_t> numel = checkedNumElements(type);
  if (!numel || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  return llvm::checkedMul(*numel, elementBytes(type.getElementType()));
}

/// The bytes of `type` for the cost and memory models, which skip what they
/// cannot size: 0 for anything but a static ranked tensor of integer or float
/// elements, and for a size that overflows.
inline int64_t modelledBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return checkedByteSize(tensor).value_or(0);
}

/// The float type a dtype option names (`f32` or `float32`, `bf16` or
/// `bfloat16`, `f16` or `float16`); a null type for "" (no dtype asked);
/// failure for any other name.
inline FailureOr<Type> parseFloatDtype(MLIRContext *context,
                                       llvm::StringRef name) {
  if (name.empty())
    return Type();
  if (name == "f32" || name == "float32")
    return Type(Float32Type::get(context));
  if (name == "bf16" || name == "bfloat16")
    return Type(BFloat16Type::get(context));
  if (name == "f16" || name == "float16")
    return Type(Float16Type::get(context));
  return failure();
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_TYPES_H
