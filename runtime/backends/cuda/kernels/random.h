//===- random.h - Kernel bodies that draw random numbers ---------*- C++ -*-===//
//
// Training-mode dropout (docs/training.md, "Randomness") as an elementwise
// body (hd.h) over Philox blocks: one call of the generator (runtime/src/
// philox.h, compiled for the device too) serves the four elements of a
// block, so the body's index is a block and it writes the block's elements
// that lie in the tensor. The draws, the threshold and the f32 scale are
// the CPU kernel's (backends/cpu/random.cpp), so the masks and outputs are
// its bits.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H

#include "hd.h"

#include "../../../src/philox.h"

namespace fsdprt::cuda {

/// y = keep ? x * scale : 0 and mask = keep (when given) for the n
/// elements of x, element i being global element `base + i` of `stream`.
struct DropoutBody {
  RandomStream stream;
  uint64_t base;     // the global index of x[0]
  uint64_t threshold; // keepThreshold(1 - ratio)
  float scale;        // 1 / (1 - ratio) in f32
  const float *x;
  float *y;
  uint8_t *mask; // or null
  int64_t n;

  /// The Philox blocks that hold elements of x.
  FSDP_HD int64_t blocks() const {
    return n == 0 ? 0
                  : static_cast<int64_t>((base + n - 1) / 4 - base / 4 + 1);
  }
  FSDP_HD void operator()(int64_t b) const {
    uint64_t block = base / 4 + static_cast<uint64_t>(b);
    Philox4x32 words = stream.block(block);
    for (int w = 0; w < 4; ++w) {
      uint64_t element = 4 * block + w;
      if (element < base || element >= base + static_cast<uint64_t>(n))
        continue;
      int64_t i = static_cast<int64_t>(element - base);
      bool keep = words.v[w] < threshold;
      y[i] = keep ? x[i] * scale : 0.0f;
      if (mask)
        mask[i] = keep;
    }
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H
