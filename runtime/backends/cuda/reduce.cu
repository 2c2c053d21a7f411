//===- reduce.cu - Reductions over any axes on the device -----------------===//
//
// The device launcher (launch.h) of kernels/reduce.h's body.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchReduce(Reduce kind, const ReducePlan &plan, const float *x,
                         float *y, cudaStream_t s) {
  switch (kind) {
  case Reduce::Sum: return rowwise(ReduceBody<Reduce::Sum>{plan, x, y}, plan.rows, s);
  case Reduce::Mean: return rowwise(ReduceBody<Reduce::Mean>{plan, x, y}, plan.rows, s);
  case Reduce::Max: return rowwise(ReduceBody<Reduce::Max>{plan, x, y}, plan.rows, s);
  }
  return cudaErrorInvalidValue;
}

} // namespace fsdprt::cuda
