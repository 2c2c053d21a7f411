//===- attention.cu - Fused attention on the device -----------------------===//
//
// The device launchers (launch.h) of kernels/attention.h's tile bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchAttention(const AttentionArgs &args, cudaStream_t s) {
  AttentionTiles tiles = planAttentionTiles(args.shape.d, args.shape.dv);
  if (!tiles.fits)
    return cudaErrorInvalidValue;
  DeviceLauncher launch{s};
  return attentionForward(launch, args, tiles);
}

cudaError_t launchAttentionGrad(const AttentionArgs &args, cudaStream_t s) {
  AttentionTiles tiles = planAttentionTiles(args.shape.d, args.shape.dv);
  if (!tiles.fits)
    return cudaErrorInvalidValue;
  DeviceLauncher launch{s};
  return attentionGrad(launch, args, tiles);
}

} // namespace fsdprt::cuda
