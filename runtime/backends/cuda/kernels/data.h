//===- data.h - Data-movement kernel bodies ----------------------*- C++ -*-===//
//
// gather (docs/plan-format.md) as a kernel body (hd.h): data of any
// element size (T: an unsigned integer of that size), I64 or I32
// indices counted from the end when negative. An index outside
// [-dim, dim) is a fault: recorded in the ErrorSlot (code kBadIndex,
// detail: the index) and its output element left 0.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_DATA_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_DATA_H

#include "hd.h"

namespace fsdprt::cuda {

constexpr int kBadIndex = 2;

/// y[o, k, j] = data[o, indices[k], j] over output elements i, for data
/// [outer, dim, inner] and `count` indices.
template <typename T, typename I> struct GatherBody {
  const T *data;
  const I *indices;
  T *y;
  int64_t dim, count, inner;
  ErrorSlot *error;

  FSDP_HD void operator()(int64_t i) const {
    int64_t j = i % inner, rest = i / inner;
    int64_t k = rest % count, o = rest / count;
    int64_t index = static_cast<int64_t>(indices[k]);
    if (index < -dim || index >= dim) {
      reportError(error, kBadIndex, index);
      y[i] = T(0);
      return;
    }
    if (index < 0)
      index += dim;
    y[i] = data[(o * dim + index) * inner + j];
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_DATA_H
