//===- scatter.cu - gather's gradient on the device -----------------------===//
//
// The device launcher (launch.h) of kernels/scatter.h's sequence.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

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

} // namespace fsdprt::cuda
