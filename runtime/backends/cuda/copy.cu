//===- copy.cu - concat, split, copy and pack on the device ---------------===//
//
// The device launchers (launch.h) of kernels/copy.h's sequences.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {
namespace {

/// The pointers (void or const void) as T pointers.
template <typename T, typename P>
std::vector<T *> typed(P *const *pointers, size_t n) {
  std::vector<T *> out(n);
  for (size_t k = 0; k < n; ++k)
    out[k] = static_cast<T *>(pointers[k]);
  return out;
}

} // namespace

cudaError_t launchConcat(size_t elementSize, const void *const *pieces,
                         void *whole, const std::vector<Piece> &plan,
                         cudaStream_t s) {
  return bySize(elementSize, [&](auto zero) {
    using T = decltype(zero);
    DeviceLauncher launch{s};
    return concat(launch, typed<const T>(pieces, plan.size()).data(),
                  static_cast<T *>(whole), plan);
  });
}

cudaError_t launchSplit(size_t elementSize, const void *whole,
                        void *const *pieces, const std::vector<Piece> &plan,
                        cudaStream_t s) {
  return bySize(elementSize, [&](auto zero) {
    using T = decltype(zero);
    DeviceLauncher launch{s};
    return split(launch, static_cast<const T *>(whole),
                 typed<T>(pieces, plan.size()).data(), plan);
  });
}

cudaError_t launchCopy(size_t elementSize, const void *x, void *y, int64_t n,
                       cudaStream_t s) {
  return bySize(elementSize, [&](auto zero) {
    using T = decltype(zero);
    return elementwise(CopyRows<T>{static_cast<const T *>(x), static_cast<T *>(y),
                                   n, 0, 0},
                       n, s);
  });
}

cudaError_t launchPack(size_t elementSize, const void *const *members,
                       void *flat, const PackPlan &plan, cudaStream_t s) {
  return bySize(elementSize, [&](auto zero) {
    using T = decltype(zero);
    DeviceLauncher launch{s};
    return pack(launch, typed<const T>(members, plan.members.size()).data(),
                static_cast<T *>(flat), plan);
  });
}

} // namespace fsdprt::cuda
