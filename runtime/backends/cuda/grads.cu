//===- grads.cu - Fused training gradients on the device ------------------===//
//
// The device launchers (launch.h) of kernels/grads.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchActivationGrad(const ActivationGradBody &body, int64_t n,
                                 cudaStream_t s) {
  return elementwise(body, n, s);
}

cudaError_t launchNormGrad(bool rms, const float *dy, const float *x,
                           const float *scale, float *dx, float *dscale,
                           float *dbias, float *stats, int64_t rows, int64_t n,
                           float eps, cudaStream_t s) {
  cudaError_t status =
      rms ? rowwise(NormGradRows<true>{dy, x, scale, dx, stats, n, eps}, rows, s)
          : rowwise(NormGradRows<false>{dy, x, scale, dx, stats, n, eps}, rows,
                    s);
  if (status != cudaSuccess)
    return status;
  return elementwise(NormGradColumns{dy, x, stats, dscale, dbias, rows, n}, n,
                     s);
}

} // namespace fsdprt::cuda
