//===- kernels.cu - The CUDA backend's own kernels on the device ----------===//
//
// The device launchers (launch.h) of the unary, binary, cast, dropout,
// random generator,
// softmax, norm, sum, gather, strided-read and cross-entropy bodies
// (kernels/),
// run as device.cuh runs bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"
#include "kernels/rows.h"

namespace fsdprt::cuda {
namespace {

template <typename T>
cudaError_t binaryOf(Binary op, const Broadcast &plan, const T *a, const T *b,
                     T *y, int64_t n, cudaStream_t s) {
  return withBinary(op, [&](auto f) {
    return elementwise(BinaryBody<decltype(f)::value, T>{plan, a, b, y}, n, s);
  });
}

} // namespace

cudaError_t launchUnary(Unary op, UnaryParams params, const float *x, float *y,
                        int64_t n, cudaStream_t s) {
  return withUnary(op, [&](auto f) {
    return elementwise(UnaryBody<decltype(f)::value>{x, y, params}, n, s);
  });
}

cudaError_t launchFloatClass(const FloatClassBody &body, int64_t n,
                             cudaStream_t s) {
  return elementwise(body, n, s);
}

cudaError_t launchCast(bool toHalf, fsdprt_dtype_t half, const void *x, void *y,
                       int64_t n, cudaStream_t s) {
  if (toHalf)
    return elementwise(CastToHalf{static_cast<const float *>(x),
                                  static_cast<uint16_t *>(y), half},
                       n, s);
  return elementwise(CastFromHalf{static_cast<const uint16_t *>(x),
                                  static_cast<float *>(y), half},
                     n, s);
}

cudaError_t launchBinary(Binary op, const Broadcast &plan, const float *a,
                         const float *b, float *y, int64_t n, cudaStream_t s) {
  return binaryOf(op, plan, a, b, y, n, s);
}

cudaError_t launchAnyCast(fsdprt_dtype_t from, fsdprt_dtype_t to,
                          const void *x, void *y, int64_t n, cudaStream_t s) {
  return elementwise(AnyCast{x, y, from, to}, n, s);
}

cudaError_t launchUnary64(Unary op, const int64_t *x, int64_t *y, int64_t n,
                          cudaStream_t s) {
  if (op != Unary::Neg && op != Unary::Abs && op != Unary::Sign)
    return cudaErrorInvalidValue;
  return elementwise(Unary64{op, x, y}, n, s);
}

cudaError_t launchBinary(Binary op, const Broadcast &plan, const int64_t *a,
                         const int64_t *b, int64_t *y, int64_t n,
                         cudaStream_t s) {
  if (op == Binary::Pow || op == Binary::PRelu)
    return cudaErrorInvalidValue;
  return binaryOf(op, plan, a, b, y, n, s);
}

cudaError_t launchIntegerBinary(Binary op, fsdprt_dtype_t dtype,
                                const Broadcast &plan, const void *a,
                                const void *b, void *y, int64_t n,
                                cudaStream_t s) {
  if (op == Binary::Pow || op == Binary::PRelu)
    return cudaErrorInvalidValue;
  return withNarrowInteger(
      dtype,
      [&](auto t) {
        using T = decltype(t);
        return binaryOf(op, plan, static_cast<const T *>(a),
                        static_cast<const T *>(b), static_cast<T *>(y), n, s);
      },
      [] { return cudaErrorInvalidValue; });
}

cudaError_t launchPowInt64(fsdprt_dtype_t exponent, const Broadcast &plan,
                           const int64_t *a, const void *b, int64_t *y,
                           int64_t n, cudaStream_t s) {
  return withPowExponent(
      exponent,
      [&](auto e) {
        using E = decltype(e);
        return elementwise(
            PowInt64Body<E>{plan, a, static_cast<const E *>(b), y}, n, s);
      },
      [] { return cudaErrorInvalidValue; });
}

cudaError_t launchDropout(const DropoutBody &body, cudaStream_t s) {
  return elementwise(body, body.blocks(), s);
}

cudaError_t launchDraw(const DrawBody &body, cudaStream_t s) {
  return elementwise(body, body.blocks(), s);
}

cudaError_t launchSoftmax(bool log, const float *x, float *y, int64_t outer,
                          int64_t n, int64_t inner, cudaStream_t s) {
  if (log)
    return rowwise(SoftmaxBody<true>{x, y, n, inner}, outer * inner, s);
  return rowwise(SoftmaxBody<false>{x, y, n, inner}, outer * inner, s);
}

cudaError_t launchArgExtreme(const ArgExtremeBody &body, int64_t rows,
                             cudaStream_t s) {
  return elementwise(body, rows, s);
}

cudaError_t launchHardmax(const float *x, float *y, int64_t outer, int64_t n,
                          int64_t inner, cudaStream_t s) {
  return elementwise(HardmaxBody{x, y, n, inner}, outer * inner, s);
}

cudaError_t launchSum(bool mean, const float *x, float *y, int64_t outer,
                      int64_t n, int64_t inner, cudaStream_t s) {
  if (mean)
    return rowwise(SumRows<true>{x, y, n, inner}, outer * inner, s);
  return rowwise(SumRows<false>{x, y, n, inner}, outer * inner, s);
}

cudaError_t launchNorm(bool rms, const float *x, const float *scale,
                       const float *bias, float *y, int64_t rows, int64_t n,
                       float eps, RowStats stats, cudaStream_t s) {
  if (rms)
    return rowwise(NormBody<true>{x, scale, bias, y, n, eps, stats}, rows, s);
  return rowwise(NormBody<false>{x, scale, bias, y, n, eps, stats}, rows, s);
}

namespace {

template <typename T>
cudaError_t gatherOf(bool indices32, const void *data, const void *indices,
                     void *y, int64_t n, int64_t dim, int64_t count,
                     int64_t inner, ErrorSlot *error, cudaStream_t s) {
  const T *d = static_cast<const T *>(data);
  T *out = static_cast<T *>(y);
  if (indices32)
    return elementwise(GatherBody<T, int32_t>{d, static_cast<const int32_t *>(indices),
                                              out, dim, count, inner, error},
                       n, s);
  return elementwise(GatherBody<T, int64_t>{d, static_cast<const int64_t *>(indices),
                                            out, dim, count, inner, error},
                     n, s);
}

} // namespace

cudaError_t launchGather(size_t elementSize, bool indices32, const void *data,
                         const void *indices, void *y, int64_t outer,
                         int64_t dim, int64_t count, int64_t inner,
                         ErrorSlot *error, cudaStream_t s) {
  int64_t n = outer * count * inner;
  switch (elementSize) {
  case 1: return gatherOf<uint8_t>(indices32, data, indices, y, n, dim, count, inner, error, s);
  case 2: return gatherOf<uint16_t>(indices32, data, indices, y, n, dim, count, inner, error, s);
  case 4: return gatherOf<uint32_t>(indices32, data, indices, y, n, dim, count, inner, error, s);
  case 8: return gatherOf<uint64_t>(indices32, data, indices, y, n, dim, count, inner, error, s);
  }
  return cudaErrorInvalidValue;
}

namespace {

template <typename T>
cudaError_t stridedOf(const Broadcast &plan, const void *x, void *y,
                      int64_t offset, int64_t n, cudaStream_t s) {
  return elementwise(StridedReadBody<T>{plan, static_cast<const T *>(x),
                                        static_cast<T *>(y), offset},
                     n, s);
}

} // namespace

cudaError_t launchStridedRead(size_t elementSize, const Broadcast &plan,
                              const void *x, void *y, int64_t offset, int64_t n,
                              cudaStream_t s) {
  switch (elementSize) {
  case 1: return stridedOf<uint8_t>(plan, x, y, offset, n, s);
  case 2: return stridedOf<uint16_t>(plan, x, y, offset, n, s);
  case 4: return stridedOf<uint32_t>(plan, x, y, offset, n, s);
  case 8: return stridedOf<uint64_t>(plan, x, y, offset, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launchCrossEntropy(const CrossEntropyInputs &in, int64_t positions,
                               bool none, bool mean, float *scratch, float *y,
                               cudaStream_t s) {
  DeviceLauncher launch{s};
  return crossEntropy(launch, in, positions, none, mean, scratch, y);
}

cudaError_t launchCrossEntropyGrad(const CrossEntropyInputs &in,
                                   int64_t positions, const float *g, bool none,
                                   bool mean, float *scratch, float *y,
                                   cudaStream_t s) {
  DeviceLauncher launch{s};
  return crossEntropyGrad(launch, in, positions, g, none, mean, scratch, y);
}

cudaError_t launchNllLoss(const NllInputs &in, int64_t positions, bool none,
                          bool mean, float *scratch, float *y, cudaStream_t s) {
  DeviceLauncher launch{s};
  return nllLoss(launch, in, positions, none, mean, scratch, y);
}

cudaError_t launchNllLossGrad(const NllInputs &in, int64_t positions,
                              const float *g, bool none, bool mean,
                              float *scratch, float *y, int64_t n,
                              cudaStream_t s) {
  DeviceLauncher launch{s};
  return nllLossGrad(launch, in, positions, g, none, mean, scratch, y, n);
}

} // namespace fsdprt::cuda
