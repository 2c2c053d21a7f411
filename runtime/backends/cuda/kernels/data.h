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

#include "elementwise.h"

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

/// y[i] = x[offset + plan.offset(0, i)]: transpose, slice (any steps,
/// negative ones too) and expand, planned by planStrided.
template <typename T> struct StridedReadBody {
  Broadcast plan;
  const T *x;
  T *y;
  int64_t offset;
  FSDP_HD void operator()(int64_t i) const { y[i] = x[offset + plan.offset(0, i)]; }
};

/// The read of `shape`'s elements at element `strides` (any sign) as a
/// plan of at most kMaxDims dims: size-1 dims dropped, a dim merged into
/// the one before it where the pair reads evenly. Throws
/// std::invalid_argument when more dims are left.
inline Broadcast planStrided(const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &strides) {
  std::vector<int64_t> dims, steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!dims.empty() && steps.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      steps.back() = strides[d];
      continue;
    }
    dims.push_back(shape[d]);
    steps.push_back(strides[d]);
  }
  if (dims.size() > static_cast<size_t>(kMaxDims))
    throw std::invalid_argument("the read has " + std::to_string(dims.size()) +
                                " dims after collapsing; at most " +
                                std::to_string(kMaxDims) + " are supported");
  Broadcast plan;
  plan.rank = static_cast<int>(dims.size());
  for (int d = 0; d < plan.rank; ++d) {
    plan.shape[d] = dims[d];
    plan.strides[0][d] = steps[d];
  }
  plan.finishNarrow();
  return plan;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_DATA_H
