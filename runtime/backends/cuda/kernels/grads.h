//===- grads.h - Fused gradient kernel bodies -------------------*- C++ -*-===//
//
// Bodies (hd.h) of the CPU backend's fused training gradients
// (runtime/backends/cpu): activation_grad (GELU, its tanh form, SiLU) and
// layer_norm_grad / rms_norm_grad. A norm's gradient is three launches
// (normGrad): one group per row recomputes the row's statistics (kept in
// scratch) and writes dx; one item per column and chunk of rows sums
// dy * xhat and dy over the chunk; one item per column adds the chunks'
// sums, in fp32 (the CPU backend sums in double).
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_GRADS_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_GRADS_H

#include "hd.h"

namespace fsdprt::cuda {

/// The activations activation_grad differentiates.
enum class ActivationGrad { Gelu, GeluTanh, Silu };

/// dx[i] = dy[i] * f'(x[i]), the derivatives of torch's gelu_backward and
/// silu_backward.
struct ActivationGradBody {
  const float *dy, *x;
  float *dx;
  ActivationGrad kind;

  FSDP_HD void operator()(int64_t i) const {
    float v = x[i], d;
    if (kind == ActivationGrad::GeluTanh) {
      const float beta = 0.7978845608028654f, kappa = 0.044715f;
      float t = tanhf(beta * (v + kappa * v * v * v));
      d = 0.5f * (1.0f + t) +
          0.5f * v * (1.0f - t * t) * beta * (1.0f + 3.0f * kappa * v * v);
    } else if (kind == ActivationGrad::Gelu) {
      d = 0.5f * (1.0f + erff(v * 0.70710678118654752f)) +
          v * expf(-0.5f * v * v) * 0.3989422804014327f;
    } else {
      float s = 1.0f / (1.0f + expf(-v));
      d = s * (1.0f + v * (1.0f - s));
    }
    dx[i] = dy[i] * d;
  }
};

/// The rows of a layer norm's (or, with Rms, an RMS norm's) gradient:
/// contiguous rows of n elements; scale per column or absent (null).
/// Writes dx and each row's mean and inverse std into stats[2 * row].
template <bool Rms> struct NormGradRows {
  const float *dy, *x, *scale;
  float *dx, *stats;
  int64_t n;
  float eps;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t row) const {
    const float *px = x + row * n, *pg = dy + row * n;
    float *pdx = dx + row * n;
    float count = static_cast<float>(n), mean = 0;
    if (!Rms) {
      float sum = 0;
      for (int64_t j = g.lane(); j < n; j += g.size())
        sum += px[j];
      mean = g.sum(sum) / count;
    }
    float squares = 0;
    for (int64_t j = g.lane(); j < n; j += g.size()) {
      float d = px[j] - mean;
      squares += d * d;
    }
    float inv = 1.0f / sqrtf(g.sum(squares) / count + eps);
    float sumGs = 0, sumGsXhat = 0;
    for (int64_t j = g.lane(); j < n; j += g.size()) {
      float gs = scale ? pg[j] * scale[j] : pg[j];
      sumGs += gs;
      sumGsXhat += gs * (px[j] - mean) * inv;
    }
    float meanGs = Rms ? 0.0f : g.sum(sumGs) / count;
    float meanGsXhat = g.sum(sumGsXhat) / count;
    for (int64_t j = g.lane(); j < n; j += g.size()) {
      float gs = scale ? pg[j] * scale[j] : pg[j];
      pdx[j] = inv * (gs - meanGs - (px[j] - mean) * inv * meanGsXhat);
    }
    if (g.lane() == 0) {
      stats[2 * row] = mean;
      stats[2 * row + 1] = inv;
    }
  }
};

/// The rows one NormGradPartials item sums. One item per column alone
/// (768 for GPT-2) left most of an H100 idle while each summed thousands
/// of rows: a step's layer norm gradients took 38% of its kernel time.
constexpr int64_t kNormGradChunkRows = 64;

FSDP_HD inline int64_t normGradChunks(int64_t rows) {
  return (rows + kNormGradChunkRows - 1) / kNormGradChunkRows;
}

/// The floats of a norm gradient's scratch: each row's mean and inverse
/// std, then each chunk's sums of dy * xhat and of dy per column.
inline int64_t normGradScratchFloats(int64_t rows, int64_t n) {
  return 2 * rows + 2 * normGradChunks(rows) * n;
}

/// The column sums of one chunk of rows, after NormGradRows: item
/// chunk * n + j sums dy * xhat and dy of column j over the chunk's rows
/// into partials[item] and partials[chunks * n + item].
struct NormGradPartials {
  const float *dy, *x, *stats;
  float *partials;
  int64_t rows, n;

  FSDP_HD void operator()(int64_t item) const {
    int64_t chunk = item / n, j = item % n;
    int64_t first = chunk * kNormGradChunkRows,
            end = first + kNormGradChunkRows < rows ? first + kNormGradChunkRows
                                                    : rows;
    float s = 0, b = 0;
    for (int64_t r = first; r < end; ++r) {
      float g = dy[r * n + j];
      s += g * (x[r * n + j] - stats[2 * r]) * stats[2 * r + 1];
      b += g;
    }
    partials[item] = s;
    partials[normGradChunks(rows) * n + item] = b;
  }
};

/// The columns of a norm's gradient: dscale[j] and dbias[j], the sums of
/// the chunks' partial sums in chunk order.
struct NormGradColumns {
  const float *partials;
  float *dscale, *dbias;
  int64_t chunks, n;

  FSDP_HD void operator()(int64_t j) const {
    float s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partials[c * n + j];
      b += partials[(chunks + c) * n + j];
    }
    dscale[j] = s;
    dbias[j] = b;
  }
};

/// A layer norm's (rms: an RMS norm's) gradient over `rows` contiguous
/// rows of n elements.
struct NormGradArgs {
  const float *dy, *x, *scale; // scale: per column, or null
  float *dx, *dscale, *dbias;
  float *scratch; // normGradScratchFloats(rows, n)
  int64_t rows, n;
  float eps;
  bool rms;
};

/// A norm's gradient's kernels in order, through `launch` (a launcher:
/// `elementwise(body, n)` and `rowwise(body, rows)` return an error, false
/// when there is none).
template <class Launcher>
auto normGrad(Launcher &launch, const NormGradArgs &a) {
  float *stats = a.scratch, *partials = a.scratch + 2 * a.rows;
  auto e = a.rms ? launch.rowwise(NormGradRows<true>{a.dy, a.x, a.scale, a.dx,
                                                     stats, a.n, a.eps},
                                  a.rows)
                 : launch.rowwise(NormGradRows<false>{a.dy, a.x, a.scale, a.dx,
                                                      stats, a.n, a.eps},
                                  a.rows);
  if (e)
    return e;
  int64_t chunks = normGradChunks(a.rows);
  if (auto e2 = launch.elementwise(
          NormGradPartials{a.dy, a.x, stats, partials, a.rows, a.n},
          chunks * a.n))
    return e2;
  return launch.elementwise(
      NormGradColumns{partials, a.dscale, a.dbias, chunks, a.n}, a.n);
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_GRADS_H
