//===- scatter.cu - Gathers, scatters, trilu and cumsum on the device -----===//
//
// The device launchers (launch.h) of kernels/scatter.h's sequence and of
// kernels/indexing.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

#include <cstring>

namespace fsdprt::cuda {

cudaError_t launchGatherGrad(bool indices32, const float *g,
                             const void *indices, float *y, int64_t outer,
                             int64_t dim, int64_t count, int64_t inner,
                             int64_t *scratch, ErrorSlot *error,
                             cudaStream_t s) {
  DeviceLauncher launch{s};
  if (indices32)
    return gatherGrad(launch,
                      GatherGradArgs<int32_t>{g, static_cast<const int32_t *>(indices),
                                              y, outer, dim, count, inner, error},
                      scratch);
  return gatherGrad(launch,
                    GatherGradArgs<int64_t>{g, static_cast<const int64_t *>(indices),
                                            y, outer, dim, count, inner, error},
                    scratch);
}

cudaError_t launchPad(size_t elementSize, const PadShape &shape, const void *x,
                      void *y, int64_t n, uint64_t fill, cudaStream_t s) {
  return bySize(elementSize, [&](auto t) {
    using T = decltype(t);
    T value;
    std::memcpy(&value, &fill, sizeof value);
    return elementwise(PadBody<T>{shape, static_cast<const T *>(x),
                                  static_cast<T *>(y), value},
                       n, s);
  });
}

cudaError_t launchTrilu(size_t elementSize, const void *x, void *y, int64_t n,
                        int64_t rows, int64_t cols, int64_t k,
                        const int64_t *kInput, bool upper, cudaStream_t s) {
  return bySize(elementSize, [&](auto t) {
    using T = decltype(t);
    return elementwise(TriluBody<T>{static_cast<const T *>(x),
                                    static_cast<T *>(y), rows, cols, k, kInput,
                                    upper},
                       n, s);
  });
}

cudaError_t launchCumsum(fsdprt_dtype_t dtype, const void *x, void *y,
                         int64_t lines, int64_t dim, int64_t inner,
                         bool exclusive, bool reverse, cudaStream_t s,
                         const CumsumAxisInput &axisInput) {
  auto run = [&](auto t) {
    using T = decltype(t);
    return elementwise(CumsumBody<T>{static_cast<const T *>(x),
                                     static_cast<T *>(y), dim, inner,
                                     exclusive, reverse, axisInput},
                       lines, s);
  };
  switch (dtype) {
  case FSDPRT_F32: return run(float{});
  case FSDPRT_F64: return run(double{});
  case FSDPRT_I64: return run(int64_t{});
  case FSDPRT_I32: return run(int32_t{});
  default: return cudaErrorInvalidValue;
  }
}

cudaError_t launchGatherElements(size_t elementSize, bool indices32,
                                 const AxisWalk &walk, const void *data,
                                 const void *indices, void *y, int64_t n,
                                 ErrorSlot *error, cudaStream_t s) {
  return bySize(elementSize, [&](auto t) {
    using T = decltype(t);
    auto run = [&](auto i) {
      using I = decltype(i);
      return elementwise(
          GatherElementsBody<T, I>{walk, static_cast<const T *>(data),
                                   static_cast<const I *>(indices),
                                   static_cast<T *>(y), error},
          n, s);
    };
    return indices32 ? run(int32_t{}) : run(int64_t{});
  });
}

cudaError_t launchScatterElements(const ScatterArgs &args, int64_t lines,
                                  cudaStream_t s) {
  return withScatterTypes(args, [&](auto t, auto i) {
    return elementwise(
        scatterElementsBody<decltype(t), decltype(i)>(args), lines, s);
  });
}

cudaError_t launchScatterND(const ScatterArgs &args, cudaStream_t s) {
  return withScatterTypes(args, [&](auto t, auto i) {
    return elementwise(scatterNDBody<decltype(t), decltype(i)>(args),
                       args.slice, s);
  });
}

} // namespace fsdprt::cuda
