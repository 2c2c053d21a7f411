//===- logic.cu - Comparisons, logic and where on the device --------------===//
//
// The device launchers (launch.h) of kernels/logic.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"
#include "kernels/logic.h"

namespace fsdprt::cuda {
namespace {

template <Logic Op, typename T>
cudaError_t logicOf(const Broadcast &plan, const void *a, const void *b,
                    uint8_t *y, int64_t n, cudaStream_t s) {
  return elementwise(LogicBody<Op, T>{plan, static_cast<const T *>(a),
                                      static_cast<const T *>(b), y},
                     n, s);
}

template <Logic Op>
cudaError_t compareOf(fsdprt_dtype_t dtype, const Broadcast &plan,
                      const void *a, const void *b, uint8_t *y, int64_t n,
                      cudaStream_t s) {
  switch (dtype) {
  case FSDPRT_F32: return logicOf<Op, float>(plan, a, b, y, n, s);
  case FSDPRT_I64: return logicOf<Op, int64_t>(plan, a, b, y, n, s);
  case FSDPRT_BOOL: return logicOf<Op, uint8_t>(plan, a, b, y, n, s);
  default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t whereOf(const Broadcast &plan, const uint8_t *cond, const void *a,
                    const void *b, void *y, int64_t n, cudaStream_t s) {
  return elementwise(WhereBody<T>{plan, cond, static_cast<const T *>(a),
                                  static_cast<const T *>(b), static_cast<T *>(y)},
                     n, s);
}

} // namespace

cudaError_t launchLogic(Logic op, fsdprt_dtype_t dtype, const Broadcast &plan,
                        const void *a, const void *b, uint8_t *y, int64_t n,
                        cudaStream_t s) {
  if (logical(op) && dtype != FSDPRT_BOOL)
    return cudaErrorInvalidValue;
  switch (op) {
  case Logic::Equal: return compareOf<Logic::Equal>(dtype, plan, a, b, y, n, s);
  case Logic::Less: return compareOf<Logic::Less>(dtype, plan, a, b, y, n, s);
  case Logic::Greater: return compareOf<Logic::Greater>(dtype, plan, a, b, y, n, s);
  case Logic::GreaterOrEqual:
    return compareOf<Logic::GreaterOrEqual>(dtype, plan, a, b, y, n, s);
  case Logic::LessOrEqual:
    return compareOf<Logic::LessOrEqual>(dtype, plan, a, b, y, n, s);
  case Logic::And: return logicOf<Logic::And, uint8_t>(plan, a, b, y, n, s);
  case Logic::Or: return logicOf<Logic::Or, uint8_t>(plan, a, b, y, n, s);
  case Logic::Xor: return logicOf<Logic::Xor, uint8_t>(plan, a, b, y, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launchNot(const uint8_t *x, uint8_t *y, int64_t n, cudaStream_t s) {
  return elementwise(NotBody{x, y}, n, s);
}

cudaError_t launchWhere(size_t elementSize, const Broadcast &plan,
                        const uint8_t *cond, const void *a, const void *b,
                        void *y, int64_t n, cudaStream_t s) {
  switch (elementSize) {
  case 1: return whereOf<uint8_t>(plan, cond, a, b, y, n, s);
  case 2: return whereOf<uint16_t>(plan, cond, a, b, y, n, s);
  case 4: return whereOf<uint32_t>(plan, cond, a, b, y, n, s);
  case 8: return whereOf<uint64_t>(plan, cond, a, b, y, n, s);
  }
  return cudaErrorInvalidValue;
}

} // namespace fsdprt::cuda
