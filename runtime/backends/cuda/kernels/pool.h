//===- pool.h - Pooling and batch norm kernel bodies ------------*- C++ -*-===//
//
// The convolutional nets' remaining ops as elementwise bodies (hd.h), as
// the CPU backend computes them (runtime/backends/cpu/nn.cpp): 2-D max
// and average pooling over planes [N * C, H, W] (max_pool with ONNX's
// Indices too), their gradient, global max pooling, batch norm with
// given statistics, and ONNX Resize (nearest, linear, cubic; its taps
// computed per output element, in double, by resize.h's resizeTap, which
// the CPU backend computes them with too).
//
// pool_grad gathers instead of scattering: each input element visits the
// outputs whose windows hold it, in row-major order, and adds what they
// route to it from 0 in that order: the CPU backend's sums, bit for bit,
// with no atomics. A max routes to the first maximal element of its
// window (the last NaN, if any), as the CPU's and PyTorch's kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_POOL_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_POOL_H

#include "hd.h"
#include "resize.h"

namespace fsdprt::cuda {

/// A 2-D pooling window (ONNX's attributes) over planes of h x w giving
/// oh x ow: kernel, strides and dilations (rows, columns), pads (top,
/// left, bottom, right); oh and ow as the CPU's windowOutput gives them.
struct PoolWindow {
  int64_t kernel[2], stride[2], dilation[2], pads[4];
  bool includePad;
  int64_t h, w, oh, ow;

  /// Calls inside(at) for each position `at` (= row * w + column) of
  /// output (i, j)'s window inside the plane, row-major; returns the
  /// count an average divides by (padding counts with includePad, up to
  /// the padded edge; at least 1).
  template <class Inside>
  FSDP_HD int64_t visit(int64_t i, int64_t j, Inside inside) const {
    int64_t count = 0;
    for (int64_t a = 0; a < kernel[0]; ++a)
      for (int64_t b = 0; b < kernel[1]; ++b) {
        int64_t r = i * stride[0] - pads[0] + a * dilation[0];
        int64_t c = j * stride[1] - pads[1] + b * dilation[1];
        if (r >= 0 && r < h && c >= 0 && c < w) {
          inside(r * w + c);
          ++count;
        } else if (includePad && r < h + pads[2] && c < w + pads[3]) {
          ++count;
        }
      }
    return count > 0 ? count : 1;
  }

  /// The window's first maximal position in `plane` (NaN: the last NaN);
  /// -1 when the window lies in the padding.
  FSDP_HD int64_t argmax(const float *plane, int64_t i, int64_t j) const {
    int64_t best = -1;
    visit(i, j, [&](int64_t at) {
      float v = plane[at];
      if (best < 0 || v > plane[best] || v != v) // v != v: NaN
        best = at;
    });
    return best;
  }
};

/// y = max_pool (Max) or average_pool of x, over output elements i of
/// planes [planes, oh, ow].
template <bool Max> struct PoolBody {
  PoolWindow win;
  const float *x;
  float *y;

  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = i / (win.oh * win.ow), at = i % (win.oh * win.ow);
    const float *px = x + plane * win.h * win.w;
    if (Max) {
      int64_t best = win.argmax(px, at / win.ow, at % win.ow);
      y[i] = best < 0 ? -INFINITY : px[best];
      return;
    }
    float sum = 0;
    int64_t count =
        win.visit(at / win.ow, at % win.ow, [&](int64_t p) { sum += px[p]; });
    y[i] = sum / static_cast<float>(count);
  }
};

/// max_pool with its Indices output: y as PoolBody<true>, and the flat
/// index in x [N, C, h, w] of each maximum (its plane read row-major, or
/// with `columns` column-major: ONNX's storage_order 1), as the CPU's.
struct MaxPoolIndicesBody {
  PoolWindow win;
  const float *x;
  float *y;
  int64_t *indices;
  bool columns;

  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = i / (win.oh * win.ow), at = i % (win.oh * win.ow);
    const float *px = x + plane * win.h * win.w;
    int64_t best = win.argmax(px, at / win.ow, at % win.ow);
    y[i] = best < 0 ? -INFINITY : px[best];
    indices[i] = plane * win.h * win.w +
                 (columns ? best % win.w * win.h + best / win.w : best);
  }
};

/// global_max_pool over planes of `inner` elements: the largest, the first
/// NaN if there is one (as torch's amax), -inf for an empty plane.
struct GlobalMaxPoolBody {
  const float *x;
  float *y;
  int64_t inner;

  FSDP_HD void operator()(int64_t plane) const {
    float best = -INFINITY;
    for (int64_t j = 0; j < inner; ++j) {
      float v = x[plane * inner + j];
      best = v > best || v != v ? v : best;
      if (v != v)
        break;
    }
    y[plane] = best;
  }
};

/// resize over output elements i: the sum, in double and in the CPU's
/// order (axis 0's tap varying fastest), of each product of the axes'
/// taps times its element of x. With `scales` (rank f32s in device memory,
/// the model's input), each thread reads them in place of p.scale and
/// checks them first (resizeScaleFault; thread 0 reports a fault, and
/// then no thread writes); launched over at least one thread, so that a
/// bad scale of an empty y is reported too.
struct ResizeBody {
  ResizePlan p;
  const float *x;
  float *y;
  const float *scales = nullptr;
  ErrorSlot *error = nullptr;

  FSDP_HD void operator()(int64_t i) const {
    double scale[kMaxDims];
    int64_t total = 1;
    for (int d = 0; d < p.rank; ++d) {
      scale[d] = scales ? static_cast<double>(scales[d]) : p.scale[d];
      total *= p.out[d];
    }
    if (scales) {
      int64_t detail = 0;
      if (int code = resizeScaleFault(p, scale, detail)) {
        if (i == 0)
          reportError(error, code, detail);
        return;
      }
    }
    if (i >= total)
      return;
    ResizeTap taps[kMaxDims];
    int64_t rest = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      taps[d] = resizeTap(p, d, rest % p.out[d], scale[d]);
      rest /= p.out[d];
    }
    int k[kMaxDims] = {};
    double sum = 0;
    for (;;) {
      double weight = 1;
      int64_t from = 0;
      for (int d = 0; d < p.rank && weight != 0; ++d) {
        weight *= taps[d].weight[k[d]];
        from += taps[d].at[k[d]] * p.stride[d];
      }
      if (weight != 0)
        sum += weight * x[from];
      int d = 0;
      for (; d < p.rank; ++d) {
        if (++k[d] < taps[d].count)
          break;
        k[d] = 0;
      }
      if (d == p.rank)
        break;
    }
    y[i] = static_cast<float>(sum);
  }
};

/// dx = pool_grad of x and g [planes, oh, ow], over input elements i of
/// [planes, h, w]: the sum of what the windows holding i route to it.
template <bool Max> struct PoolGradBody {
  PoolWindow win;
  const float *x, *g;
  float *dx;

  /// The outputs [first, last] along one dim whose windows can hold
  /// position p (then (p + pad - o * stride) is a multiple of dilation
  /// below kernel * dilation).
  FSDP_HD static void outputs(int64_t p, int64_t pad, int64_t kernel,
                              int64_t stride, int64_t dilation, int64_t size,
                              int64_t &first, int64_t &last) {
    int64_t low = p + pad - (kernel - 1) * dilation;
    first = low <= 0 ? 0 : (low + stride - 1) / stride;
    last = (p + pad) / stride < size - 1 ? (p + pad) / stride : size - 1;
  }
  FSDP_HD static bool holds(int64_t p, int64_t o, int64_t pad, int64_t stride,
                            int64_t dilation) {
    return (p + pad - o * stride) % dilation == 0;
  }

  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = i / (win.h * win.w), at = i % (win.h * win.w);
    int64_t r = at / win.w, c = at % win.w, i0, i1, j0, j1;
    outputs(r, win.pads[0], win.kernel[0], win.stride[0], win.dilation[0],
            win.oh, i0, i1);
    outputs(c, win.pads[1], win.kernel[1], win.stride[1], win.dilation[1],
            win.ow, j0, j1);
    const float *px = x + plane * win.h * win.w;
    const float *pg = g + plane * win.oh * win.ow;
    float sum = 0;
    for (int64_t oi = i0; oi <= i1; ++oi) {
      if (!holds(r, oi, win.pads[0], win.stride[0], win.dilation[0]))
        continue;
      for (int64_t oj = j0; oj <= j1; ++oj) {
        if (!holds(c, oj, win.pads[1], win.stride[1], win.dilation[1]))
          continue;
        float grad = pg[oi * win.ow + oj];
        if (!Max)
          sum += grad / static_cast<float>(win.visit(oi, oj, [](int64_t) {}));
        else if (win.argmax(px, oi, oj) == at)
          sum += grad;
      }
    }
    dx[i] = sum;
  }
};

/// batch_norm with given statistics, x [N, C, inner...]: y = (x - mean)
/// * scale / sqrt(var + eps) + bias, per channel.
struct BatchNormBody {
  const float *x, *scale, *bias, *mean, *var;
  float *y;
  int64_t channels, inner;
  float eps;

  FSDP_HD void operator()(int64_t i) const {
    int64_t c = i / inner % channels;
    float k = scale[c] / sqrtf(var[c] + eps);
    y[i] = (x[i] - mean[c]) * k + bias[c];
  }
};

/// The inverse standard deviation 1 / sqrt(var + eps) per channel: what
/// cuDNN's inference-phase batch norm reads instead of the variance.
struct InverseStdBody {
  const float *var;
  float *invStd;
  float eps;

  FSDP_HD void operator()(int64_t c) const {
    invStd[c] = 1.0f / sqrtf(var[c] + eps);
  }
};

/// batch_norm_train, one channel per item (so the statistics need no
/// reduction across threads; a channel's n * inner values are summed in
/// double, as the CPU does): the batch's mean and biased variance, y, the
/// saved mean and inverse std, and the running statistics' new values
/// (ONNX's momentum, the variance times `unbias` = count / (count - 1)).
struct BatchNormTrainBody {
  const float *x, *scale, *bias, *runningMean, *runningVar;
  float *y, *mean, *invStd, *nextMean, *nextVar;
  int64_t n, channels, inner;
  double eps, momentum, unbias;

  FSDP_HD void operator()(int64_t c) const {
    double sum = 0, squares = 0, count = double(n * inner);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i)
        sum += x[(b * channels + c) * inner + i];
    double m = sum / count;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        double d = x[(b * channels + c) * inner + i] - m;
        squares += d * d;
      }
    double var = squares / count, inv = 1.0 / sqrt(var + eps);
    double k = scale[c] * inv, shift = bias[c];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * channels + c) * inner + i;
        y[at] = static_cast<float>((x[at] - m) * k + shift);
      }
    mean[c] = static_cast<float>(m);
    invStd[c] = static_cast<float>(inv);
    nextMean[c] = static_cast<float>(runningMean[c] * momentum +
                                     m * (1 - momentum));
    nextVar[c] = static_cast<float>(runningVar[c] * momentum +
                                    var * unbias * (1 - momentum));
  }
};

/// batch_norm_grad, one channel per item: dbias = sum(dy), dscale =
/// sum(dy * xhat) (in double), then dx = scale * invStd * (dy - (dbias +
/// xhat * dscale) / count), xhat = (x - mean) * invStd.
struct BatchNormGradBody {
  const float *dy, *x, *scale, *mean, *invStd;
  float *dx, *dscale, *dbias;
  int64_t n, channels, inner;

  FSDP_HD void operator()(int64_t c) const {
    double m = mean[c], inv = invStd[c], sumDy = 0, sumDyXhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * channels + c) * inner + i;
        sumDy += dy[at];
        sumDyXhat += dy[at] * ((x[at] - m) * inv);
      }
    double k = scale[c] * inv, count = double(n * inner);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * channels + c) * inner + i;
        double xhat = (x[at] - m) * inv;
        dx[at] = static_cast<float>(k * (dy[at] - (sumDy + xhat * sumDyXhat) /
                                                      count));
      }
    dscale[c] = static_cast<float>(sumDyXhat);
    dbias[c] = static_cast<float>(sumDy);
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_POOL_H
