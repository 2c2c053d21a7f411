//===- scatter.h - gather's gradient, deterministic -------------*- C++ -*-===//
//
// gather_grad (the embedding gradient) as kernel bodies (hd.h): y [outer,
// dim, inner] is zero but for each slice g[o, k, :] added at row
// indices[k]. Indices repeat (a token occurs many times), and atomic adds
// would sum the repeats in whatever order the threads come: different
// bits from run to run. So the positions k are first sorted by their row
// (a stable merge sort, each pass an elementwise body: an element finds
// its place in the merged run by a binary search in the other run), and
// then each output element sums its row's slices in increasing k, from
// 0: the CPU backend's order, so the same bits as the CPU, on any device,
// every run, whatever the lanes.
//
// Kernels: SortKeys (each k's row, checked: an index outside [-dim, dim)
// is recorded as kBadIndex and sorts after every row), ceil(log2 count)
// MergeRuns passes, BucketStarts (where each row's positions begin in the
// sorted order), GatherGradSum. O(count log^2 count) to sort.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_SCATTER_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_SCATTER_H

#include "data.h"

#include <utility>

namespace fsdprt::cuda {

/// gather_grad's operands: g [outer, count, inner], `count` indices of
/// type I (int64_t or int32_t), y [outer, dim, inner].
template <typename I> struct GatherGradArgs {
  const float *g;
  const I *indices;
  float *y;
  int64_t outer, dim, count, inner;
  ErrorSlot *error;
};

/// The int64s of scratch gatherGrad needs: keys, two orders, row starts.
inline int64_t gatherGradScratch(int64_t count, int64_t dim) {
  return 3 * count + dim + 1;
}

/// keys[k] = the row of indices[k] (dim when out of range); order[k] = k.
template <typename I> struct SortKeys {
  const I *indices;
  int64_t *keys, *order;
  int64_t dim;
  ErrorSlot *error;
  FSDP_HD void operator()(int64_t k) const {
    int64_t index = static_cast<int64_t>(indices[k]);
    if (index < -dim || index >= dim) {
      reportError(error, kBadIndex, index);
      index = dim;
    }
    keys[k] = index < 0 ? index + dim : index;
    order[k] = k;
  }
};

/// The first position in order[begin, end) whose key is at least `key`
/// (with `after`: greater than `key`); keys ascend over the range.
FSDP_HD inline int64_t searchKeys(const int64_t *keys, const int64_t *order,
                                  int64_t begin, int64_t end, int64_t key,
                                  bool after) {
  while (begin < end) {
    int64_t mid = begin + (end - begin) / 2;
    int64_t k = keys[order[mid]];
    if (k < key || (after && k == key))
      begin = mid + 1;
    else
      end = mid;
  }
  return begin;
}

/// One pass of the merge sort: runs of `width` sorted positions in `in`,
/// merged in pairs into `out`, stably (ties: the left run's first).
struct MergeRuns {
  const int64_t *keys, *in;
  int64_t *out;
  int64_t count, width;
  FSDP_HD void operator()(int64_t p) const {
    int64_t left = p / (2 * width) * (2 * width);
    int64_t right = left + width < count ? left + width : count;
    int64_t end = right + width < count ? right + width : count;
    int64_t key = keys[in[p]];
    int64_t at =
        p < right
            ? p - left + searchKeys(keys, in, right, end, key, false) - right
            : p - right + searchKeys(keys, in, left, right, key, true) - left;
    out[left + at] = in[p];
  }
};

/// starts[d] = the first sorted position of row d, d in [0, dim].
struct BucketStarts {
  const int64_t *keys, *order;
  int64_t *starts;
  int64_t count;
  FSDP_HD void operator()(int64_t d) const {
    starts[d] = searchKeys(keys, order, 0, count, d, false);
  }
};

/// y[o, d, j] = the sum, in increasing k, of g[o, k, j] over the k of row
/// d (sorted: order[starts[d] .. starts[d + 1])).
struct GatherGradSum {
  const float *g;
  const int64_t *order, *starts;
  float *y;
  int64_t dim, count, inner;
  FSDP_HD void operator()(int64_t i) const {
    int64_t j = i % inner, d = i / inner % dim, o = i / inner / dim;
    float sum = 0;
    for (int64_t s = starts[d]; s < starts[d + 1]; ++s)
      sum += g[(o * count + order[s]) * inner + j];
    y[i] = sum;
  }
};

/// gather_grad's kernels in order, through `launch` (a launcher, as
/// losses.h's sequences take); `scratch` holds gatherGradScratch(count,
/// dim) int64s.
template <typename I, class Launcher>
auto gatherGrad(Launcher &launch, const GatherGradArgs<I> &a,
                int64_t *scratch) {
  int64_t *keys = scratch, *order = keys + a.count, *other = order + a.count;
  int64_t *starts = other + a.count;
  if (auto e = launch.elementwise(
          SortKeys<I>{a.indices, keys, order, a.dim, a.error}, a.count))
    return e;
  for (int64_t width = 1; width < a.count; width *= 2) {
    if (auto e = launch.elementwise(
            MergeRuns{keys, order, other, a.count, width}, a.count))
      return e;
    std::swap(order, other);
  }
  if (auto e = launch.elementwise(BucketStarts{keys, order, starts, a.count},
                                  a.dim + 1))
    return e;
  return launch.elementwise(
      GatherGradSum{a.g, order, starts, a.y, a.dim, a.count, a.inner},
      a.outer * a.dim * a.inner);
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_SCATTER_H
