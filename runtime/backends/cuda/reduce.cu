//===- reduce.cu - Reductions over any axes on the device -----------------===//
//
// The device launcher (launch.h) of kernels/reduce.h's body.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchReduce(Reduce kind, const ReducePlan &plan, const float *x,
                         float *y, float *scratch, cudaStream_t s) {
  DeviceLauncher launch{s};
  return reduce(launch, kind, plan, x, y, scratch);
}

cudaError_t launchIntegerReduce(const IntegerReduceBody &body, cudaStream_t s) {
  return elementwise(body, body.plan.rows, s);
}

} // namespace fsdprt::cuda
