//===- device.cuh - Running kernel bodies on the device --------*- CUDA -*-===//
//
// What every translation unit of the device launchers shares: elementwise
// bodies in a grid-stride loop, row bodies one row per block (a block is
// the body's group: lanes are its threads, reductions go through warp
// shuffles and shared memory). Everything here has internal linkage:
// each .cu file instantiates its own kernels, so no kernel is registered
// by two of them.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_DEVICE_CUH
#define FSDPRT_BACKENDS_CUDA_DEVICE_CUH

#include "kernels/hd.h"

#include <cuda_runtime_api.h>

#include <algorithm>

namespace fsdprt::cuda {
namespace {


constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

template <class Body> __global__ void forEach(Body body, int64_t n) {
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += step)
    body(i);
}

/// The threads of a block as a row body's group (blockDim.x: a multiple
/// of 32).
class BlockGroup {
public:
  __device__ explicit BlockGroup(float *scratch) : scratch(scratch) {}
  __device__ int lane() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ float sum(float v) { return combine(v, false); }
  __device__ float max(float v) { return combine(v, true); }

private:
  __device__ float combine(float v, bool isMax) {
    for (int offset = 16; offset > 0; offset >>= 1) {
      float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = isMax ? fmaxf(v, other) : v + other;
    }
    __syncthreads(); // the previous reduction has read the scratch
    if (threadIdx.x % 32 == 0)
      scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
      v = isMax ? fmaxf(v, scratch[w]) : v + scratch[w];
    return v;
  }

  float *scratch;
};

template <class Body> __global__ void forEachRow(Body body, int64_t rows) {
  __shared__ float scratch[kThreads / 32];
  BlockGroup group(scratch);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
    body(group, row);
}

/// The threads of a block as a tile body's block (kernels/attention.h):
/// a barrier and the block's dynamic shared memory.
class TileBlock {
public:
  __device__ explicit TileBlock(float *memory) : memory(memory) {}
  __device__ int lane() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ float *shared() const { return memory; }

private:
  float *memory;
};

template <class Body> __global__ void forEachTile(Body body, int64_t tiles) {
  extern __shared__ float tileMemory[];
  TileBlock block(tileMemory);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x)
    body(block, tile);
}

/// Threads of a tile body's block: fewer than a row body's, as a tile's
/// loops have a few thousand iterations and the bodies sync often.
constexpr int kTileThreads = 128;

template <class Body>
cudaError_t elementwise(const Body &body, int64_t n, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  forEach<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(body, n);
  return cudaGetLastError();
}

template <class Body>
cudaError_t rowwise(const Body &body, int64_t rows, cudaStream_t stream) {
  if (rows == 0)
    return cudaSuccess;
  int64_t blocks = std::min<int64_t>(rows, kMaxBlocks);
  forEachRow<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(body,
                                                                    rows);
  return cudaGetLastError();
}

/// A tile body over its tiles, with its sharedFloats() of shared memory
/// (within the 48 KiB a block gets without opting in).
template <class Body> cudaError_t tiled(const Body &body, cudaStream_t stream) {
  int64_t tiles = body.tiles();
  if (tiles == 0)
    return cudaSuccess;
  int64_t blocks = std::min<int64_t>(tiles, kMaxBlocks);
  size_t bytes = static_cast<size_t>(body.sharedFloats()) * sizeof(float);
  forEachTile<<<static_cast<unsigned>(blocks), kTileThreads, bytes, stream>>>(
      body, tiles);
  return cudaGetLastError();
}

/// The device launchers as a launcher object (kernels/losses.h's
/// sequences), on one stream.
struct DeviceLauncher {
  cudaStream_t stream;
  template <class Body> cudaError_t elementwise(const Body &body, int64_t n) {
    return cuda::elementwise(body, n, stream);
  }
  template <class Body> cudaError_t rowwise(const Body &body, int64_t rows) {
    return cuda::rowwise(body, rows, stream);
  }
  template <class Body> cudaError_t tiled(const Body &body) {
    return cuda::tiled(body, stream);
  }
};

/// f(T{}) with T the unsigned integer of `elementSize` bytes.
template <class F> cudaError_t bySize(size_t elementSize, F f) {
  switch (elementSize) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  }
  return cudaErrorInvalidValue;
}

} // namespace
} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_DEVICE_CUH
