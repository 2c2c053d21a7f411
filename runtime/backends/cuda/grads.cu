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

cudaError_t launchNormGrad(const NormGradArgs &args, cudaStream_t s) {
  DeviceLauncher launch{s};
  return normGrad(launch, args);
}

} // namespace fsdprt::cuda
