//===- rows.h - Row kernel bodies: softmax and the norms ---------*- C++ -*-===//
//
// Bodies (hd.h) that reduce along a row and write it: softmax and
// log-softmax along any axis (rows of `n` elements `inner` apart), layer
// norm and RMS norm over the trailing elements with an optional per-column
// scale and bias. Statistics accumulate in fp32 (the CPU backend uses
// double), in a group's lanes first and then across them.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_ROWS_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_ROWS_H

#include "hd.h"

#include "fsdprt/fsdprt.h"

namespace fsdprt::cuda {

/// Softmax (or, with Log, log-softmax) of rows [outer, n, inner]: row r is
/// the n elements at (r / inner) * n * inner + r % inner, inner apart.
template <bool Log> struct SoftmaxBody {
  const float *x;
  float *y;
  int64_t n, inner;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t row) const {
    int64_t base = rowStart(row, n, inner);
    const float *px = x + base;
    float *py = y + base;
    float max = -INFINITY;
    for (int64_t j = g.lane(); j < n; j += g.size())
      max = fmaxf(max, px[j * inner]);
    max = g.max(max);
    float sum = 0;
    for (int64_t j = g.lane(); j < n; j += g.size())
      sum += expf(px[j * inner] - max);
    sum = g.sum(sum);
    if (Log) {
      float shift = max + logf(sum);
      for (int64_t j = g.lane(); j < n; j += g.size())
        py[j * inner] = px[j * inner] - shift;
    } else {
      float scale = 1.0f / sum;
      for (int64_t j = g.lane(); j < n; j += g.size())
        py[j * inner] = expf(px[j * inner] - max) * scale;
    }
  }
};

/// reduce_sum (or, with Mean, reduce_mean) of rows [outer, n, inner]: row
/// r's n elements `inner` apart into y[r], summed in fp32.
template <bool Mean> struct SumRows {
  const float *x;
  float *y;
  int64_t n, inner;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t row) const {
    const float *px = x + rowStart(row, n, inner);
    float sum = 0;
    for (int64_t j = g.lane(); j < n; j += g.size())
      sum += px[j * inner];
    sum = g.sum(sum);
    if (g.lane() == 0)
      y[row] = Mean ? sum / static_cast<float>(n) : sum;
  }
};

/// Layer norm (or, with Rms, RMS norm) of contiguous rows of n elements:
/// y = (x - mean) / sqrt(var + eps) * scale + bias (RMS: no mean, the mean
/// square for the variance); scale and bias per column, or absent (null).
/// Where a norm also writes each row's mean and 1 / sqrt(var + eps)
/// (layer_norm's optional outputs), or null.
struct RowStats {
  float *mean = nullptr, *invStd = nullptr;
};

template <bool Rms> struct NormBody {
  const float *x, *scale, *bias;
  float *y;
  int64_t n;
  float eps;
  RowStats stats = {};

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t row) const {
    const float *px = x + row * n;
    float *py = y + row * n;
    float mean = 0;
    if (!Rms) {
      float sum = 0;
      for (int64_t j = g.lane(); j < n; j += g.size())
        sum += px[j];
      mean = g.sum(sum) / static_cast<float>(n);
    }
    float squares = 0;
    for (int64_t j = g.lane(); j < n; j += g.size()) {
      float d = px[j] - mean;
      squares += d * d;
    }
    float inv = 1.0f / sqrtf(g.sum(squares) / static_cast<float>(n) + eps);
    if (stats.mean && g.lane() == 0) {
      stats.mean[row] = mean;
      stats.invStd[row] = inv;
    }
    for (int64_t j = g.lane(); j < n; j += g.size()) {
      float v = (px[j] - mean) * inv;
      if (scale)
        v *= scale[j];
      if (bias)
        v += bias[j];
      py[j] = v;
    }
  }
};

/// hardmax of rows [outer, n, inner] (row r as SoftmaxBody's), one row per
/// index: 1 at the row's first largest element (a NaN is never larger),
/// 0 elsewhere.
struct HardmaxBody {
  const float *x;
  float *y;
  int64_t n, inner;

  FSDP_HD void operator()(int64_t row) const {
    int64_t base = rowStart(row, n, inner), best = 0;
    for (int64_t j = 1; j < n; ++j)
      if (x[base + j * inner] > x[base + best * inner])
        best = j;
    for (int64_t j = 0; j < n; ++j)
      y[base + j * inner] = j == best ? 1.0f : 0.0f;
  }
};

/// The index of the first largest (`max`) or smallest element of the n
/// elements at `row`, `inner` apart, or of the last with `last`, compared
/// as the CPU compares them (a NaN is never better, and one at the front
/// is kept).
template <class T>
FSDP_HD int64_t extremeIndex(const T *row, int64_t n, int64_t inner, bool max,
                             bool last) {
  int64_t best = 0;
  T value = row[0];
  for (int64_t j = 1; j < n; ++j) {
    T v = row[j * inner];
    bool better =
        max ? (last ? v >= value : v > value) : (last ? v <= value : v < value);
    if (better) {
      best = j;
      value = v;
    }
  }
  return best;
}

/// arg_max (max) or arg_min of rows [outer, n, inner] of x, F32, F64, I32
/// or I64 as `dtype` says, one row per index: the first extreme element's
/// index, or the last with `last` (select_last_index).
struct ArgExtremeBody {
  const void *x;
  int64_t *y;
  int64_t n, inner;
  bool max, last;
  fsdprt_dtype_t dtype = FSDPRT_F32;

  FSDP_HD void operator()(int64_t row) const {
    int64_t base = rowStart(row, n, inner);
    switch (dtype) {
    case FSDPRT_F64:
      y[row] = extremeIndex(static_cast<const double *>(x) + base, n, inner,
                            max, last);
      break;
    case FSDPRT_I64:
      y[row] = extremeIndex(static_cast<const int64_t *>(x) + base, n, inner,
                            max, last);
      break;
    case FSDPRT_I32:
      y[row] = extremeIndex(static_cast<const int32_t *>(x) + base, n, inner,
                            max, last);
      break;
    default:
      y[row] = extremeIndex(static_cast<const float *>(x) + base, n, inner, max,
                            last);
    }
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_ROWS_H
