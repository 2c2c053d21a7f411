//===- random.h - Kernel bodies that draw random numbers --------*- C++ -*-===//
//
// Training-mode dropout (docs/training.md, "Randomness") as an elementwise
// body (hd.h) over Philox blocks: one call of the generator (runtime/src/
// philox.h, compiled for the device too) serves the four elements of a
// block, so the body's index is a block and it writes the block's elements
// that lie in the tensor. The draws, the threshold and the f32 scale are
// the CPU kernel's (backends/cpu/random.cpp), so the masks and outputs are
// its bits. The generators' body (random_uniform, random_normal,
// bernoulli) writes drawValue of each element's word (philox.h), as
// backends/cpu/random.cpp's kernels do: bit for bit on the host; on a GPU
// random_normal's log, sin and cos are CUDA's, within an ulp or two of the
// host's in double, so its f32 values can differ from the CPU's in the last
// bit.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H

#include "hd.h"

#include "../../../src/philox.h"

namespace fsdprt::cuda {

/// The Philox blocks that hold global elements [base, base + n).
FSDP_HD inline int64_t randomBlocks(uint64_t base, int64_t n) {
  return n == 0 ? 0 : static_cast<int64_t>((base + n - 1) / 4 - base / 4 + 1);
}

/// Calls f(i, words, w) for each element i of [0, n) whose global index
/// base + i is word w of the b-th Philox block that holds the range.
template <typename F>
FSDP_HD void forBlockElements(const RandomStream &stream, uint64_t base,
                              int64_t n, int64_t b, F &&f) {
  uint64_t block = base / 4 + static_cast<uint64_t>(b);
  Philox4x32 words = stream.block(block);
  for (int w = 0; w < 4; ++w) {
    uint64_t element = 4 * block + w;
    if (element >= base && element < base + static_cast<uint64_t>(n))
      f(static_cast<int64_t>(element - base), words, w);
  }
}

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
  FSDP_HD int64_t blocks() const { return randomBlocks(base, n); }
  FSDP_HD void operator()(int64_t b) const {
    forBlockElements(stream, base, n, b,
                     [&](int64_t i, const Philox4x32 &words, int w) {
                       bool keep = words.v[w] < threshold;
                       y[i] = keep ? x[i] * scale : 0.0f;
                       if (mask)
                         mask[i] = keep;
                     });
  }
};

/// The generators: y[i] = drawValue(kind, ...) of the word of global
/// element base + i, for the n elements of y (f32, or f64 when `wide`);
/// `p` is Bernoulli's probabilities (f64 when `wideP`).
struct DrawBody {
  RandomStream stream;
  uint64_t base; // the global index of y[0]
  Distribution kind;
  double a, b; // low and high, or mean and scale
  const void *p;
  bool wideP;
  void *y;
  bool wide;
  int64_t n;

  FSDP_HD int64_t blocks() const { return randomBlocks(base, n); }
  FSDP_HD void operator()(int64_t index) const {
    forBlockElements(stream, base, n, index,
                     [&](int64_t i, const Philox4x32 &words, int w) {
                       double pi = !p      ? 0.0
                                   : wideP ? static_cast<const double *>(p)[i]
                                           : static_cast<const float *>(p)[i];
                       if (wide)
                         static_cast<double *>(y)[i] =
                             drawValue<double>(kind, words, w, a, b, pi);
                       else
                         static_cast<float *>(y)[i] =
                             drawValue<float>(kind, words, w, a, b, pi);
                     });
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_RANDOM_H
