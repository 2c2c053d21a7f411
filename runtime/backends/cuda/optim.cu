//===- optim.cu - Fused optimizer steps on the device ---------------------===//
//
// The device launchers (launch.h) of kernels/optim.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchAdamW(const AdamWBody &body, int64_t n, cudaStream_t s) {
  return elementwise(body, n, s);
}

cudaError_t launchSGD(const SGDBody &body, int64_t n, cudaStream_t s) {
  return elementwise(body, n, s);
}

} // namespace fsdprt::cuda
