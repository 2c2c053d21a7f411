//===- nn.cpp - Normalisation, softmax, pooling, reductions, losses -------===//
//
// Statistics (means, variances, reductions) accumulate in double: the
// results then match PyTorch's fp32 kernels to round-off, whatever the
// order of the sum, and a mean over a batch equals the mean of its halves'
// means bit for bit (e2e.dropout: world size 2 and micro-batches give world
// size 1's loss). Softmax's and cross-entropy's sums of exponentials
// accumulate in float, as torch's, through vmath's vectorised exp; each
// exponential is computed once and kept.
//
//===----------------------------------------------------------------------===//

#include "kernels.h"
#include "vmath.h"

#include "../cuda/kernels/rows.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>

namespace fsdprt::cpu {
namespace {

/// The `axis` attribute, checked against `x`'s rank (a scalar has axis 0).
int64_t axisOf(const KernelArgs &args, const Tensor &x) {
  int64_t axis = args.attrs.getInt("axis", -1);
  int64_t rank = x.shape.size();
  require(axis >= 0 && axis < std::max<int64_t>(rank, 1),
          "axis " + std::to_string(axis) + " is out of range for rank " +
              std::to_string(rank));
  return axis;
}

void requireSameShape(const Tensor &x, const Tensor &y) {
  require(x.shape == y.shape, "input " + shapeString(x.shape) + " and output " +
                                  shapeString(y.shape) + " differ in shape");
}

/// NaN-propagating max, as PyTorch's.
inline double maxOf(double acc, double v) {
  return v > acc || std::isnan(v) ? v : acc;
}

/// The softmax (or log-softmax) of the `n` contiguous values x into y (y
/// may be x), as torch's vectorised kernels: the max, exp(x - max) once per
/// value with their float sum, then a scale by 1 / sum (or x - max -
/// log(sum)).
void softmaxRow(const float *x, float *y, int64_t n, bool log) {
  float max = vmath::max(x, n);
  if (!log) {
    float inv = 1.0f / vmath::expSum(x, y, n, max);
    for (int64_t j = 0; j < n; ++j)
      y[j] *= inv;
    return;
  }
  static thread_local std::vector<float> scratch;
  scratch.resize(n);
  float logSum = std::log(vmath::expSum(x, scratch.data(), n, max));
  for (int64_t j = 0; j < n; ++j)
    y[j] = x[j] - max - logSum;
}

KernelFn softmax(KernelArgs &args, bool log) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  requireSameShape(x, y);
  int64_t axis = axisOf(args, x);
  int64_t n = x.shape.empty() ? 1 : x.shape[axis];
  int64_t inner = product(x.shape, axis + 1, x.shape.size());
  int64_t outer = n != 0 && inner != 0 ? x.numel / (n * inner) : 0;
  return [=]() {
    parallelFor(outer * inner, n * 8, [&](int64_t idx) {
      int64_t o = idx / inner, i = idx % inner;
      const float *px = x.as<float>() + o * n * inner + i;
      float *py = y.as<float>() + o * n * inner + i;
      if (inner == 1) {
        softmaxRow(px, py, n, log);
        return;
      }
      // Along a strided axis: through a contiguous copy of the row.
      static thread_local std::vector<float> row;
      row.resize(n);
      for (int64_t j = 0; j < n; ++j)
        row[j] = px[j * inner];
      softmaxRow(row.data(), row.data(), n, log);
      for (int64_t j = 0; j < n; ++j)
        py[j * inner] = row[j];
    });
    return std::string();
  };
}

/// ONNX Hardmax: 1 at the first largest value along the axis, 0 elsewhere.
KernelFn hardmax(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  requireSameShape(x, y);
  int64_t axis = axisOf(args, x);
  int64_t n = x.shape.empty() ? 1 : x.shape[axis];
  int64_t inner = product(x.shape, axis + 1, x.shape.size());
  int64_t outer = n != 0 && inner != 0 ? x.numel / (n * inner) : 0;
  return [=]() {
    parallelFor(outer * inner, n, [&](int64_t idx) {
      int64_t o = idx / inner, i = idx % inner;
      const float *px = x.as<float>() + o * n * inner + i;
      float *py = y.as<float>() + o * n * inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j)
        if (px[j * inner] > px[best * inner])
          best = j;
      for (int64_t j = 0; j < n; ++j)
        py[j * inner] = j == best ? 1.0f : 0.0f;
    });
    return std::string();
  };
}

/// How a normalisation reads its scale or bias at each of the `cols`
/// normalised elements of a row: a step of 1 (same shape), 0 (one value)
/// or, for a partial broadcast, an index per element.
struct Affine {
  const float *data = nullptr;
  int64_t step = 0;
  std::shared_ptr<const std::vector<int64_t>> index;

  Affine() = default;
  Affine(const Tensor &t, const std::vector<int64_t> &normalised,
         const char *what) {
    data = t.as<float>();
    // Leading 1s do not change a broadcast onto the normalised dims.
    std::vector<int64_t> shape = t.shape;
    while (!shape.empty() && shape.front() == 1 &&
           shape.size() > normalised.size())
      shape.erase(shape.begin());
    std::vector<int64_t> strides = broadcastStrides(shape, normalised, what);
    if (t.numel == 1) {
      step = 0;
    } else if (strides == stridesOf(normalised)) {
      step = 1;
    } else {
      auto map = std::make_shared<std::vector<int64_t>>(product(normalised));
      for (size_t j = 0; j < map->size(); ++j)
        (*map)[j] = offsetOf(j, normalised, strides);
      index = map;
    }
  }

  double at(int64_t j) const {
    return index ? data[(*index)[j]] : data[j * step];
  }
};

/// Where a normalisation also writes each row's mean and 1 / sqrt(var +
/// eps) (LayerNormalization's optional outputs); absent: null data.
struct RowStats {
  Tensor mean, invStd;
};

/// A row's mean (0 for RMS) and 1 / sqrt(var + eps) (RMS: the mean square
/// for the variance), in double: what rowNorm normalises with and
/// normGrad recomputes.
std::pair<double, double> rowMoments(const float *px, int64_t cols,
                                     double eps, bool rms) {
  double mean = 0, var = 0;
  if (!rms) {
    for (int64_t j = 0; j < cols; ++j)
      mean += px[j];
    mean /= cols;
  }
  for (int64_t j = 0; j < cols; ++j) {
    double d = px[j] - mean;
    var += d * d;
  }
  return {mean, 1.0 / std::sqrt(var / cols + eps)};
}

/// Normalises rows of `cols` elements: (x - mean) / sqrt(var + eps) * scale
/// + bias, or for RMS x / sqrt(mean(x^2) + eps) * scale.
KernelFn rowNorm(Tensor x, Tensor y, const Affine &scale, const Affine &bias,
                 int64_t cols, double eps, bool rms, RowStats stats = {}) {
  int64_t rows = cols ? x.numel / cols : 0;
  return [=]() {
    parallelFor(rows, cols * 8, [&](int64_t r) {
      const float *px = x.as<float>() + r * cols;
      float *py = y.as<float>() + r * cols;
      auto [mean, inv] = rowMoments(px, cols, eps, rms);
      if (stats.mean.data) {
        stats.mean.as<float>()[r] = static_cast<float>(mean);
        stats.invStd.as<float>()[r] = static_cast<float>(inv);
      }
      if (scale.index || bias.index) {
        for (int64_t j = 0; j < cols; ++j) {
          double v = (px[j] - mean) * inv;
          if (scale.data)
            v *= scale.at(j);
          if (bias.data)
            v += bias.at(j);
          py[j] = static_cast<float>(v);
        }
        return;
      }
      // Same-shape or single-value scale and bias: a loop that vectorises.
      const float *ps = scale.data, *pb = bias.data;
      int64_t ss = scale.step, bs = bias.step;
      for (int64_t j = 0; j < cols; ++j) {
        double v = (px[j] - mean) * inv;
        v = ps ? v * ps[j * ss] : v;
        py[j] = static_cast<float>(pb ? v + pb[j * bs] : v);
      }
    });
    return std::string();
  };
}

/// layer_norm's optional mean and inv_std_dev outputs: x's shape with the
/// normalised dims (from `axis` on) of size 1.
RowStats layerNormStats(const KernelArgs &args, const Tensor &x,
                        size_t axis) {
  if (args.out.size() == 1)
    return {};
  std::vector<int64_t> shape = x.shape;
  std::fill(shape.begin() + axis, shape.end(), 1);
  for (size_t i = 1; i < 3; ++i)
    require(args.out[i].shape == shape,
            (i == 1 ? "mean " : "inv_std_dev ") +
                shapeString(args.out[i].shape) + " should be " +
                shapeString(shape));
  return {args.out[1], args.out[2]};
}

KernelFn layerNorm(KernelArgs &args) {
  require(args.in.size() >= 2 && args.in.size() <= 3 &&
              (args.out.size() == 1 || args.out.size() == 3),
          "takes x, scale and an optional bias, and gives y or y, mean "
          "and inv_std_dev");
  requireF32(args);
  const Tensor &x = args.in[0];
  requireSameShape(x, args.out[0]);
  size_t axis = std::min<size_t>(axisOf(args, x), x.shape.size());
  std::vector<int64_t> normalised(x.shape.begin() + axis, x.shape.end());
  Affine scale(args.in[1], normalised, "scale");
  Affine bias =
      args.in.size() == 3 ? Affine(args.in[2], normalised, "bias") : Affine();
  return rowNorm(x, args.out[0], scale, bias, product(normalised),
                 args.attrs.getFloat("epsilon", 1e-5), false,
                 layerNormStats(args, x, axis));
}

KernelFn rmsNorm(KernelArgs &args) {
  requireArity(args, 1, 2, 1);
  requireF32(args);
  const Tensor &x = args.in[0];
  require(!x.shape.empty(), "x must have rank >= 1");
  requireSameShape(x, args.out[0]);
  std::vector<int64_t> normalised = {x.shape.back()};
  Affine scale =
      args.in.size() == 2 ? Affine(args.in[1], normalised, "scale") : Affine();
  return rowNorm(x, args.out[0], scale, Affine(), x.shape.back(),
                 args.attrs.getFloat("epsilon", 1e-6), true);
}

KernelFn batchNorm(KernelArgs &args) {
  requireArity(args, 5, 5, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() >= 2,
          "x must be [N, C, ...], not " + shapeString(x.shape));
  requireSameShape(x, y);
  int64_t c = x.shape[1];
  for (size_t i = 1; i < 5; ++i)
    require(args.in[i].shape == std::vector<int64_t>{c},
            "scale, bias, mean and var must be [" + std::to_string(c) +
                "], not " + shapeString(args.in[i].shape));
  int64_t inner = product(x.shape, 2, x.shape.size());
  int64_t planes = x.shape[0] * c;
  double eps = args.attrs.getFloat("epsilon", 1e-5);
  Tensor s = args.in[1], b = args.in[2], mean = args.in[3], var = args.in[4];
  return [=]() {
    parallelFor(planes, inner * 2, [&](int64_t p) {
      int64_t ch = p % c;
      double k = s.as<float>()[ch] / std::sqrt(var.as<float>()[ch] + eps);
      double m = mean.as<float>()[ch], shift = b.as<float>()[ch];
      const float *px = x.as<float>() + p * inner;
      float *py = y.as<float>() + p * inner;
      for (int64_t j = 0; j < inner; ++j)
        py[j] = static_cast<float>((px[j] - m) * k + shift);
    });
    return std::string();
  };
}

/// x [N, C, ...] and the per-channel tensors after it ([C] each, from
/// `first` on) of batch_norm_train and batch_norm_grad; the elements per
/// channel in a plane (inner) and in the batch (count).
struct ChannelShape {
  int64_t n = 0, c = 0, inner = 0, count = 0;
};
ChannelShape channelShape(const Tensor &x,
                          const std::vector<const Tensor *> &perChannel) {
  require(x.shape.size() >= 2,
          "x must be [N, C, ...], not " + shapeString(x.shape));
  ChannelShape s;
  s.n = x.shape[0], s.c = x.shape[1];
  s.inner = product(x.shape, 2, x.shape.size());
  s.count = s.n * s.inner;
  for (const Tensor *t : perChannel)
    require(t->shape == std::vector<int64_t>{s.c},
            "the per-channel tensors (scale, bias, statistics) must be [" +
                std::to_string(s.c) + "], not " + shapeString(t->shape));
  require(s.count > 0, "batch norm in training needs at least one value per "
                       "channel, x is " + shapeString(x.shape));
  return s;
}

/// batch_norm_train: batch norm in training, as torch's native_batch_norm.
/// In: x [N, C, ...], scale, bias, running_mean, running_var [C]. Out: y,
/// the batch's mean and inverse standard deviation 1 / sqrt(var + eps)
/// (saved for batch_norm_grad) and the running statistics' new values,
/// ONNX's convention: running * momentum + batch * (1 - momentum), the
/// variance unbiased (count / (count - 1), as torch). Statistics in double.
KernelFn batchNormTrain(KernelArgs &args) {
  requireArity(args, 5, 5, 5);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  requireSameShape(x, y);
  ChannelShape s = channelShape(
      x, {&args.in[1], &args.in[2], &args.in[3], &args.in[4], &args.out[1],
       &args.out[2], &args.out[3], &args.out[4]});
  double eps = args.attrs.getFloat("epsilon", 1e-5);
  double momentum = args.attrs.getFloat("momentum", 0.9);
  double unbias =
      s.count > 1 ? double(s.count) / double(s.count - 1) : 1.0;
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    parallelFor(s.c, s.count * 4, [&](int64_t ch) {
      const float *px = in[0].as<float>();
      float *py = out[0].as<float>();
      double sum = 0;
      for (int64_t b = 0; b < s.n; ++b)
        for (int64_t i = 0; i < s.inner; ++i)
          sum += px[(b * s.c + ch) * s.inner + i];
      double mean = sum / double(s.count), squares = 0;
      for (int64_t b = 0; b < s.n; ++b)
        for (int64_t i = 0; i < s.inner; ++i) {
          double d = px[(b * s.c + ch) * s.inner + i] - mean;
          squares += d * d;
        }
      double var = squares / double(s.count);
      double invStd = 1.0 / std::sqrt(var + eps);
      double k = in[1].as<float>()[ch] * invStd, shift = in[2].as<float>()[ch];
      for (int64_t b = 0; b < s.n; ++b)
        for (int64_t i = 0; i < s.inner; ++i) {
          int64_t at = (b * s.c + ch) * s.inner + i;
          py[at] = static_cast<float>((px[at] - mean) * k + shift);
        }
      out[1].as<float>()[ch] = static_cast<float>(mean);
      out[2].as<float>()[ch] = static_cast<float>(invStd);
      out[3].as<float>()[ch] = static_cast<float>(
          in[3].as<float>()[ch] * momentum + mean * (1 - momentum));
      out[4].as<float>()[ch] = static_cast<float>(
          in[4].as<float>()[ch] * momentum + var * unbias * (1 - momentum));
    });
    return std::string();
  };
}

/// batch_norm_grad: the gradient of batch_norm_train's y, as torch's
/// native_batch_norm_backward in training. In: dy, x [N, C, ...], scale,
/// saved mean, saved inverse std [C]. Out: dx, dscale, dbias, with xhat =
/// (x - mean) * invStd: dbias = sum(dy), dscale = sum(dy * xhat), dx =
/// scale * invStd * (dy - (dbias + xhat * dscale) / count). Sums in double.
KernelFn batchNormGrad(KernelArgs &args) {
  requireArity(args, 5, 5, 3);
  requireF32(args);
  Tensor dy = args.in[0], x = args.in[1], dx = args.out[0];
  requireSameShape(x, dy);
  requireSameShape(x, dx);
  ChannelShape s = channelShape(
      x, {&args.in[2], &args.in[3], &args.in[4], &args.out[1],
                &args.out[2]});
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    parallelFor(s.c, s.count * 6, [&](int64_t ch) {
      const float *pdy = in[0].as<float>(), *px = in[1].as<float>();
      double mean = in[3].as<float>()[ch], invStd = in[4].as<float>()[ch];
      double dbias = 0, dscale = 0;
      for (int64_t b = 0; b < s.n; ++b)
        for (int64_t i = 0; i < s.inner; ++i) {
          int64_t at = (b * s.c + ch) * s.inner + i;
          dbias += pdy[at];
          dscale += pdy[at] * ((px[at] - mean) * invStd);
        }
      double k = in[2].as<float>()[ch] * invStd;
      float *pdx = out[0].as<float>();
      for (int64_t b = 0; b < s.n; ++b)
        for (int64_t i = 0; i < s.inner; ++i) {
          int64_t at = (b * s.c + ch) * s.inner + i;
          double xhat = (px[at] - mean) * invStd;
          pdx[at] = static_cast<float>(
              k * (pdy[at] - (dbias + xhat * dscale) / double(s.count)));
        }
      out[1].as<float>()[ch] = static_cast<float>(dscale);
      out[2].as<float>()[ch] = static_cast<float>(dbias);
    });
    return std::string();
  };
}

/// layer_norm_grad and rms_norm_grad: the gradients of layer_norm (over
/// dims [axis, rank)) and rms_norm (the last dim) whose scale has the
/// normalised dims' shape, as torch's native_layer_norm_backward. In: dy,
/// x, scale (optional). Out: dx, and dscale and dbias of the normalised
/// dims' shape. Each row's statistics are recomputed as rowNorm computes
/// them; with xhat the normalised row and gs = dy * scale,
/// dx = invStd * (gs - mean(gs) - xhat * mean(gs * xhat)) (without
/// mean(gs) for RMS). dscale = sum(dy * xhat) and dbias = sum(dy) over the
/// rows are summed in double, per fixed block of rows and then the blocks
/// in order, so that the bits do not depend on the thread count.
KernelFn normGrad(KernelArgs &args, bool rms) {
  requireArity(args, 2, 3, 3);
  requireF32(args);
  Tensor dy = args.in[0], x = args.in[1];
  require(!x.shape.empty(), "x must have rank >= 1");
  requireSameShape(x, dy);
  requireSameShape(x, args.out[0]);
  size_t axis = rms ? x.shape.size() - 1 : axisOf(args, x);
  std::vector<int64_t> normalised(x.shape.begin() + axis, x.shape.end());
  bool scaled = args.in.size() == 3;
  if (scaled)
    require(args.in[2].shape == normalised,
            "scale " + shapeString(args.in[2].shape) + " must be " +
                shapeString(normalised) + " (the normalised dims)");
  for (size_t i = 1; i < 3; ++i)
    require(args.out[i].shape == normalised,
            (i == 1 ? "dscale " : "dbias ") + shapeString(args.out[i].shape) +
                " must be " + shapeString(normalised));
  int64_t cols = product(normalised), rows = cols ? x.numel / cols : 0;
  double eps = args.attrs.getFloat("epsilon", rms ? 1e-6 : 1e-5);
  Tensor scale = scaled ? args.in[2] : Tensor(), dx = args.out[0],
         dscale = args.out[1], dbias = args.out[2];
  return [=]() {
    constexpr int64_t kBlocks = 64;
    int64_t blocks = std::min(rows, kBlocks);
    int64_t per = blocks ? (rows + blocks - 1) / blocks : 0;
    // Each block's dscale then dbias partial sums.
    std::vector<double> partial(2 * blocks * cols, 0.0);
    const float *ps = scaled ? scale.as<float>() : nullptr;
    parallelFor(blocks, per * cols * 12, [&](int64_t block) {
      double *sumScale = partial.data() + 2 * block * cols;
      double *sumBias = sumScale + cols;
      std::vector<double> xhat(cols);
      for (int64_t r = block * per; r < std::min(rows, (block + 1) * per);
           ++r) {
        const float *px = x.as<float>() + r * cols;
        const float *pg = dy.as<float>() + r * cols;
        float *pdx = dx.as<float>() + r * cols;
        auto [mean, inv] = rowMoments(px, cols, eps, rms);
        double meanGs = 0, meanGsXhat = 0;
#pragma omp simd reduction(+ : meanGs, meanGsXhat)
        for (int64_t j = 0; j < cols; ++j) {
          xhat[j] = (px[j] - mean) * inv;
          double gs = ps ? double(pg[j]) * ps[j] : double(pg[j]);
          meanGs += gs;
          meanGsXhat += gs * xhat[j];
          sumScale[j] += pg[j] * xhat[j];
          sumBias[j] += pg[j];
        }
        meanGs = rms ? 0.0 : meanGs / cols;
        meanGsXhat /= cols;
        for (int64_t j = 0; j < cols; ++j) {
          double gs = ps ? double(pg[j]) * ps[j] : double(pg[j]);
          pdx[j] = static_cast<float>(inv * (gs - meanGs - xhat[j] * meanGsXhat));
        }
      }
    });
    float *outScale = dscale.as<float>(), *outBias = dbias.as<float>();
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0, b = 0;
      for (int64_t block = 0; block < blocks; ++block) {
        s += partial[2 * block * cols + j];
        b += partial[(2 * block + 1) * cols + j];
      }
      outScale[j] = static_cast<float>(s);
      outBias[j] = static_cast<float>(b);
    }
    return std::string();
  };
}

} // namespace

PoolWindow poolWindow(KernelArgs &args, const Tensor &x, const Tensor &y) {
  require(x.shape.size() == 4 && y.shape.size() == 4,
          "x and the pooled tensor must be NCHW (2-D pooling)");
  PoolWindow p;
  p.k = args.attrs.getInts("kernel_shape", {});
  p.st = args.attrs.getInts("strides", {1, 1});
  p.pads = args.attrs.getInts("pads", {0, 0, 0, 0});
  p.dil = args.attrs.getInts("dilations", {1, 1});
  p.includePad = args.attrs.getInt("count_include_pad", 0) != 0;
  p.ceil = args.attrs.getInt("ceil_mode", 0) != 0;
  require(p.k.size() == 2 && p.st.size() == 2 && p.pads.size() == 4 &&
              p.dil.size() == 2,
          "kernel_shape, strides, dilations (2 each) and pads (4) must fit "
          "2-D pooling");
  requireAtLeast(p.k, 1, "kernel_shape");
  requireAtLeast(p.st, 1, "strides");
  requireAtLeast(p.dil, 1, "dilations");
  requireAtLeast(p.pads, 0, "pads");
  p.h = x.shape[2], p.w = x.shape[3], p.oh = y.shape[2], p.ow = y.shape[3];
  require(y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1] &&
              p.oh == windowOutput(p.h, p.pads[0], p.pads[2], p.k[0], p.st[0],
                                   p.dil[0], p.ceil) &&
              p.ow == windowOutput(p.w, p.pads[1], p.pads[3], p.k[1], p.st[1],
                                   p.dil[1], p.ceil),
          "pooled shape " + shapeString(y.shape) +
              " does not match the window over " + shapeString(x.shape));
  return p;
}

namespace {

/// max_pool (optionally with ONNX MaxPool's Indices: the flat index of
/// each maximum in x, batch and channel included, its plane read row-major
/// or with `storage_order` 1 column-major) and average_pool.
KernelFn pool(KernelArgs &args, bool max) {
  require(args.in.size() == 1 &&
              (args.out.size() == 1 || (max && args.out.size() == 2)),
          "takes x and gives y (and for max_pool optional indices)");
  Tensor x = args.in[0], y = args.out[0];
  requireDtype(x, FSDPRT_F32, "x");
  requireDtype(y, FSDPRT_F32, "y");
  bool withIndices = args.out.size() == 2;
  Tensor indices = withIndices ? args.out[1] : Tensor();
  if (withIndices) {
    requireDtype(indices, FSDPRT_I64, "indices");
    require(indices.shape == y.shape, "indices " +
                                          shapeString(indices.shape) +
                                          " should be " + shapeString(y.shape));
  }
  bool columns = args.attrs.getInt("storage_order", 0) != 0;
  PoolWindow p = poolWindow(args, x, y);
  return [=]() {
    int64_t cost = p.oh * p.ow * p.k[0] * p.k[1];
    parallelFor(x.shape[0] * x.shape[1], cost, [&](int64_t plane) {
      const float *px = x.as<float>() + plane * p.h * p.w;
      float *py = y.as<float>() + plane * p.oh * p.ow;
      for (int64_t i = 0; i < p.oh; ++i)
        for (int64_t j = 0; j < p.ow; ++j) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0;
          int64_t best = -1;
          int64_t count = p.visit(i, j, max, [&](int64_t at) {
            double v = px[at];
            if (max && (best < 0 || v > acc || std::isnan(v)))
              best = at; // the element maxOf keeps
            acc = max ? maxOf(acc, v) : acc + v;
          });
          py[i * p.ow + j] = static_cast<float>(max ? acc : acc / count);
          if (withIndices)
            indices.as<int64_t>()[plane * p.oh * p.ow + i * p.ow + j] =
                plane * p.h * p.w +
                (columns ? best % p.w * p.h + best / p.w : best);
        }
    });
    return std::string();
  };
}

/// pool_grad(x, g): the gradient of max or average pooling with respect to
/// x. A max routes each output's gradient to the first maximal element of
/// its window (row-major), as PyTorch does; an average spreads it evenly.
KernelFn poolGrad(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  requireF32(args);
  Tensor x = args.in[0], g = args.in[1], dx = args.out[0];
  std::string mode = args.attrs.getString("mode", "");
  require(mode == "max" || mode == "average",
          "mode must be \"max\" or \"average\", not \"" + mode + "\"");
  require(dx.shape == x.shape, "the output must have x's shape " +
                                   shapeString(x.shape) + ", not " +
                                   shapeString(dx.shape));
  PoolWindow p = poolWindow(args, x, g);
  bool max = mode == "max";
  return [=]() {
    int64_t cost = p.oh * p.ow * p.k[0] * p.k[1];
    parallelFor(x.shape[0] * x.shape[1], cost, [&](int64_t plane) {
      const float *px = x.as<float>() + plane * p.h * p.w;
      const float *pg = g.as<float>() + plane * p.oh * p.ow;
      float *pdx = dx.as<float>() + plane * p.h * p.w;
      std::fill(pdx, pdx + p.h * p.w, 0.0f);
      for (int64_t i = 0; i < p.oh; ++i)
        for (int64_t j = 0; j < p.ow; ++j) {
          float grad = pg[i * p.ow + j];
          if (max) {
            int64_t best = -1;
            p.visit(i, j, true, [&](int64_t at) {
              if (best < 0 || px[at] > px[best] || std::isnan(px[at]))
                best = at;
            });
            if (best >= 0)
              pdx[best] += grad;
          } else {
            float share = grad / p.visit(i, j, false, [](int64_t) {});
            p.visit(i, j, false, [&](int64_t at) { pdx[at] += share; });
          }
        }
    });
    return std::string();
  };
}

/// The largest value over all spatial dims (NaN wins, as torch's amax).
KernelFn globalMaxPool(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() >= 3,
          "x must be [N, C, spatial...], not " + shapeString(x.shape));
  std::vector<int64_t> expected(x.shape.size(), 1);
  expected[0] = x.shape[0];
  expected[1] = x.shape[1];
  require(y.shape == expected, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  int64_t inner = product(x.shape, 2, x.shape.size());
  return [=]() {
    parallelFor(y.numel, inner, [&](int64_t r) {
      float best = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < inner; ++j) {
        float v = x.as<float>()[r * inner + j];
        best = v > best || v != v ? v : best;
        if (v != v)
          break;
      }
      y.as<float>()[r] = best;
    });
    return std::string();
  };
}

KernelFn globalAveragePool(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() >= 3,
          "x must be [N, C, spatial...], not " + shapeString(x.shape));
  std::vector<int64_t> expected(x.shape.size(), 1);
  expected[0] = x.shape[0];
  expected[1] = x.shape[1];
  require(y.shape == expected, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  int64_t inner = product(x.shape, 2, x.shape.size());
  return [=]() {
    parallelFor(y.numel, inner, [&](int64_t r) {
      double sum = 0;
      for (int64_t j = 0; j < inner; ++j)
        sum += x.as<float>()[r * inner + j];
      y.as<float>()[r] = static_cast<float>(sum / inner);
    });
    return std::string();
  };
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

/// The taps of axis d resized by `scale`, one per output index
/// (cuda/kernels/resize.h: the arithmetic the CUDA kernels share).
std::vector<cuda::ResizeTap> resizeTaps(const cuda::ResizePlan &plan, int d,
                                        double scale) {
  std::vector<cuda::ResizeTap> taps(plan.out[d]);
  for (int64_t j = 0; j < plan.out[d]; ++j)
    taps[j] = cuda::resizeTap(plan, d, j, scale);
  return taps;
}

} // namespace

cuda::ResizePlan resizePlan(const KernelArgs &args, const Tensor &x,
                            const Tensor &y) {
  std::string mode = args.attrs.getString("mode", "nearest");
  std::string transform =
      args.attrs.getString("coordinate_transformation_mode", "half_pixel");
  std::string nearest =
      args.attrs.getString("nearest_mode", "round_prefer_floor");
  cuda::ResizePlan plan{};
  require(cuda::resizeModeOf(mode.c_str(), plan.mode),
          "mode must be nearest, linear or cubic, not " + mode);
  require(cuda::resizeTransformOf(transform.c_str(), plan.transform),
          "coordinate_transformation_mode " + transform + " is not supported");
  require(cuda::nearestModeOf(nearest.c_str(), plan.nearest),
          "nearest_mode " + nearest + " is not supported");
  size_t rank = x.shape.size();
  require(y.shape.size() == rank,
          "scales needs one entry per dimension of x " + shapeString(x.shape));
  require(rank <= cuda::kMaxDims,
          "resizes at most " + std::to_string(cuda::kMaxDims) +
              " dimensions, not " + std::to_string(rank));
  plan.rank = static_cast<int>(rank);
  std::vector<int64_t> strides = stridesOf(x.shape);
  for (size_t d = 0; d < rank; ++d) {
    plan.in[d] = x.shape[d];
    plan.out[d] = y.shape[d];
    plan.stride[d] = strides[d];
  }
  plan.a = args.attrs.getFloat("cubic_coeff_a", -0.75);
  plan.exclude = args.attrs.getInt("exclude_outside", 0) != 0;
  return plan;
}

std::string resizeScaleError(const cuda::ResizePlan &plan, int code,
                             int64_t detail) {
  if (code == cuda::kNonPositiveScale)
    return "scales must be positive";
  int d = code - cuda::kBadScale;
  double scale;
  std::memcpy(&scale, &detail, sizeof scale);
  return "scale " + std::to_string(scale) + " of dimension " +
         std::to_string(d) + " resizes " + std::to_string(plan.in[d]) + " to " +
         std::to_string(static_cast<int64_t>(std::floor(plan.in[d] * scale))) +
         ", not the plan's " + std::to_string(plan.out[d]);
}

namespace {

/// ONNX Resize, nearest, (multi)linear or (multi)cubic, with one scale per
/// axis (the `scales` parameter, or an f32 input read at run time): each
/// output element blends the product of its axes' taps.
KernelFn resize(KernelArgs &args) {
  requireArity(args, 1, 2, 1);
  Tensor x = args.in[0], y = args.out[0];
  requireDtype(x, FSDPRT_F32, "x");
  requireDtype(y, FSDPRT_F32, "y");
  size_t rank = x.shape.size();
  bool fromRunTime = args.in.size() == 2;
  Tensor scalesIn = fromRunTime ? args.in[1] : Tensor();
  std::vector<double> scales = args.attrs.getFloats("scales", {});
  if (fromRunTime) {
    requireDtype(scalesIn, FSDPRT_F32, "scales");
    require(scalesIn.numel == static_cast<int64_t>(rank) && scales.empty(),
            "the scales input needs one entry per dimension of x " +
                shapeString(x.shape) + " (and no scales parameter)");
    scales.assign(rank, 1.0);
  }
  require(scales.size() == rank,
          "scales needs one entry per dimension of x " + shapeString(x.shape));
  cuda::ResizePlan plan = resizePlan(args, x, y);
  for (size_t d = 0; d < rank; ++d)
    require(x.shape[d] > 0 || y.shape[d] == 0,
            "dimension " + std::to_string(d) + " of x is empty");
  std::vector<std::vector<cuda::ResizeTap>> planned;
  if (!fromRunTime)
    for (int d = 0; d < plan.rank; ++d) {
      require(scales[d] > 0, "scales must be positive");
      planned.push_back(resizeTaps(plan, d, scales[d]));
    }
  return [=]() {
    std::vector<std::vector<cuda::ResizeTap>> read;
    if (fromRunTime) {
      double given[cuda::kMaxDims];
      for (size_t d = 0; d < rank; ++d)
        given[d] = scalesIn.as<float>()[d];
      int64_t detail = 0;
      if (int code = cuda::resizeScaleFault(plan, given, detail))
        return resizeScaleError(plan, code, detail);
      for (int d = 0; d < plan.rank; ++d)
        read.push_back(resizeTaps(plan, d, given[d]));
    }
    const std::vector<std::vector<cuda::ResizeTap>> &taps =
        fromRunTime ? read : planned;
    parallelFor(y.numel, 1 << (2 * rank), [&](int64_t i) {
      const cuda::ResizeTap *at[8];
      for (int64_t d = static_cast<int64_t>(rank) - 1, r = i; d >= 0;
           r /= y.shape[d], --d)
        at[d] = &taps[d][r % y.shape[d]];
      int k[8] = {0};
      double sum = 0;
      for (;;) {
        double weight = 1;
        int64_t from = 0;
        for (size_t d = 0; d < rank && weight != 0; ++d) {
          weight *= at[d]->weight[k[d]];
          from += at[d]->at[k[d]] * plan.stride[d];
        }
        if (weight != 0)
          sum += weight * x.as<float>()[from];
        size_t d = 0;
        for (; d < rank; ++d) {
          if (++k[d] < at[d]->count)
            break;
          k[d] = 0;
        }
        if (d == rank)
          break;
      }
      y.as<float>()[i] = static_cast<float>(sum);
    });
    return std::string();
  };
}

//===----------------------------------------------------------------------===//
// grid_sample
//===----------------------------------------------------------------------===//

} // namespace

cuda::GridSampleBody gridSampleBody(const KernelArgs &args, bool grad) {
  requireArity(args, grad ? 3 : 2, grad ? 3 : 2, grad ? 2 : 1);
  std::string mode = args.attrs.getString("mode", "bilinear");
  std::string padding = args.attrs.getString("padding_mode", "zeros");
  int64_t align = args.attrs.getInt("align_corners", 0);
  cuda::GridSamplePlan plan{};
  require(cuda::gridSampleModeOf(mode.c_str(), plan.mode),
          "mode must be bilinear, nearest or bicubic, not " + mode);
  require(cuda::gridPaddingOf(padding.c_str(), plan.padding),
          "padding_mode must be zeros, border or reflection, not " + padding);
  require(align == 0 || align == 1,
          "align_corners must be 0 or 1, not " + std::to_string(align));
  plan.alignCorners = align == 1;
  const Tensor &x = args.in[0], &grid = args.in[1];
  require(x.dtype == FSDPRT_F32 || x.dtype == FSDPRT_F64,
          std::string("x must be float32 or float64, not ") +
              fsdprt_dtype_name(x.dtype));
  require(x.shape.size() == 4,
          "x must be [N, C, H, W], not " + shapeString(x.shape));
  require(grid.shape.size() == 4 && grid.shape[0] == x.shape[0] &&
              grid.shape[3] == 2,
          "grid " + shapeString(grid.shape) + " must be [N, Ho, Wo, 2] for x " +
              shapeString(x.shape));
  requireDtype(grid, x.dtype, "grid");
  plan.n = x.shape[0], plan.c = x.shape[1], plan.h = x.shape[2],
  plan.w = x.shape[3], plan.ho = grid.shape[1], plan.wo = grid.shape[2];
  std::vector<int64_t> sampled = {plan.n, plan.c, plan.ho, plan.wo};
  const Tensor &y = grad ? args.in[2] : args.out[0];
  requireDtype(y, x.dtype, grad ? "the output gradient" : "y");
  require(y.shape == sampled,
          std::string(grad ? "the output gradient " : "y ") +
              shapeString(y.shape) + " must be " + shapeString(sampled));
  if (grad)
    for (size_t i = 0; i < 2; ++i) {
      requireDtype(args.out[i], x.dtype, i ? "d(grid)" : "d(x)");
      require(args.out[i].shape == args.in[i].shape,
              std::string(i ? "d(grid) " : "d(x) ") +
                  shapeString(args.out[i].shape) + " must be " +
                  shapeString(args.in[i].shape));
    }
  return cuda::GridSampleBody{plan,
                              grad ? cuda::GridSampleStep::InputGrad
                                   : cuda::GridSampleStep::Forward,
                              x.dtype,
                              x.data,
                              grid.data,
                              grad ? y.data : nullptr,
                              args.out[0].data};
}

namespace {

/// The cost of one grid point's taps.
int64_t tapCost(const cuda::GridSamplePlan &plan) {
  return plan.mode == cuda::GridSampleMode::Bicubic ? 64 : 16;
}

/// ONNX GridSample (torch's F.grid_sample) of [N, C, H, W], one output
/// element per index (cuda/kernels/grid_sample.h's body).
KernelFn gridSample(KernelArgs &args) {
  cuda::GridSampleBody body = gridSampleBody(args, false);
  return [=]() {
    parallelFor(body.threads(), tapCost(body.p), body);
    return std::string();
  };
}

/// grid_sample's gradient: d(x) a plane per index, each point's taps added
/// in order (the same bits whatever the threads), then d(grid) a point per
/// index summing over the channels.
KernelFn gridSampleGrad(KernelArgs &args) {
  cuda::GridSampleBody dx = gridSampleBody(args, true), dgrid = dx;
  dgrid.step = cuda::GridSampleStep::GridGrad;
  dgrid.out = args.out[1].data;
  return [=]() {
    const cuda::GridSamplePlan &p = dx.p;
    parallelFor(dx.threads(), tapCost(p) * p.ho * p.wo, dx);
    parallelFor(dgrid.threads(), tapCost(p) * p.c, dgrid);
    return std::string();
  };
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class Reduce { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp };

/// Partial sums of a reduction of everything: a fixed number of them, so
/// the result does not depend on the thread count.
constexpr int64_t kReducePieces = 64;

/// A reduction's layout: `outer` x `n` x `inner` when at most one run of
/// reduced dims is left after merging, else the kept and reduced dims to
/// walk (`reducedRuns` > 1); `count` elements reduce into each output.
struct ReduceShape {
  int64_t outer = 1, n = 1, inner = 1, reducedRuns = 0, count = 1;
  std::vector<int64_t> kept, keptStrides, red, redStrides;
};

/// The loops of a reduction over elements of type T, accumulated in Acc
/// (F32 or F64 in double; I32 or I64 in int64_t): `combine` maps and merges
/// an element, `merge` merges partial results, `finish` makes the result
/// (mean, root, log); `plainSum`: the elements are merged by adding them as
/// they are (sum, mean).
template <typename T, typename Acc, typename Merge, typename Combine,
          typename Finish>
KernelFn reduceLoops(const Tensor &x, const Tensor &y, const ReduceShape &s,
                     Acc init, Merge merge, Combine combine, Finish finish,
                     bool plainSum) {
  const T *px = x.as<T>();
  T *py = y.as<T>();
  int64_t outer = s.outer, n = s.n, inner = s.inner, count = s.count;
  std::vector<int64_t> kept = s.kept, keptStrides = s.keptStrides,
                       red = s.red, redStrides = s.redStrides;

  if (s.reducedRuns > 1) {
    // Interleaved reduced and kept dims: walk each output's elements.
    return [=]() {
      parallelFor(y.numel, count, [&](int64_t o) {
        int64_t base = offsetOf(o, kept, keptStrides);
        Acc acc = init;
        for (int64_t r = 0; r < count; ++r)
          acc = combine(acc, px[base + offsetOf(r, red, redStrides)]);
        py[o] = static_cast<T>(finish(acc));
      });
      return std::string();
    };
  }
  if (inner == 1 && outer == 1) {
    // Everything into one value: partial results in parallel.
    int64_t pieces = std::min(kReducePieces, std::max<int64_t>(n / 4096, 1));
    return [=]() {
      Acc partial[kReducePieces];
      parallelFor(pieces, n / pieces, [&](int64_t p) {
        int64_t begin = n * p / pieces, end = n * (p + 1) / pieces;
        Acc acc = init;
        for (int64_t j = begin; j < end; ++j)
          acc = combine(acc, px[j]);
        partial[p] = acc;
      });
      Acc acc = init;
      for (int64_t p = 0; p < pieces; ++p)
        acc = merge(acc, partial[p]);
      py[0] = static_cast<T>(finish(acc));
      return std::string();
    };
  }
  // y[o, i] = reduce over j of x[o, j, i], a block of i at a time so that
  // the reads run along rows.
  constexpr int64_t kBlock = 64;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  return [=]() {
    parallelFor(outer * blocks, n * std::min(inner, kBlock), [&](int64_t item) {
      int64_t o = item / blocks, i0 = item % blocks * kBlock;
      int64_t width = std::min(kBlock, inner - i0);
      Acc acc[kBlock];
      std::fill(acc, acc + width, init);
      for (int64_t j = 0; j < n; ++j) {
        const T *row = px + (o * n + j) * inner + i0;
        if (plainSum) // a loop that vectorises (bias gradients)
          for (int64_t i = 0; i < width; ++i)
            acc[i] += row[i];
        else
          for (int64_t i = 0; i < width; ++i)
            acc[i] = combine(acc[i], row[i]);
      }
      for (int64_t i = 0; i < width; ++i)
        py[o * inner + i0 + i] = static_cast<T>(finish(acc[i]));
    });
    return std::string();
  };
}

/// A reduction of integers (I32 or I64: sum, product, sum of squares, max
/// or min) in int64_t. Sums and products wrap around as the element type's
/// two's complement does (computed unsigned), so every order of partial
/// results gives the same value, which is the CUDA backend's
/// (IntegerReduceBody adds in order); an empty max (min) is the type's
/// lowest (largest) value.
template <typename T>
KernelFn integerReduce(const Tensor &x, const Tensor &y, const ReduceShape &s,
                       Reduce kind) {
  int64_t init = kind == Reduce::Max    ? std::numeric_limits<T>::lowest()
                 : kind == Reduce::Min  ? std::numeric_limits<T>::max()
                 : kind == Reduce::Prod ? 1
                                        : 0;
  auto merge = [kind](int64_t acc, int64_t v) -> int64_t {
    switch (kind) {
    case Reduce::Max:
      return std::max(acc, v);
    case Reduce::Min:
      return std::min(acc, v);
    case Reduce::Prod:
      return static_cast<int64_t>(uint64_t(acc) * uint64_t(v));
    default:
      return static_cast<int64_t>(uint64_t(acc) + uint64_t(v));
    }
  };
  auto combine = [kind, merge](int64_t acc, int64_t v) {
    return merge(acc, kind == Reduce::SumSquare
                          ? static_cast<int64_t>(uint64_t(v) * uint64_t(v))
                          : v);
  };
  return reduceLoops<T>(
      x, y, s, init, merge, combine, [](int64_t acc) { return acc; }, false);
}

/// The reduce_* kernels over F32 or F64, and reduce_sum, reduce_prod,
/// reduce_sum_square, reduce_max and reduce_min over I32 or I64 too (ONNX's
/// Reduce* with `axes` and `keepdims`; no axes reduces everything).
KernelFn reduce(KernelArgs &args, Reduce kind) {
  requireArity(args, 1, 1, 1);
  Tensor x = args.in[0], y = args.out[0];
  bool integer = x.dtype == FSDPRT_I32 || x.dtype == FSDPRT_I64;
  require((x.dtype == FSDPRT_F32 || x.dtype == FSDPRT_F64 || integer) &&
              y.dtype == x.dtype,
          std::string("x and y must both be float32, float64, int32 or int64, "
                      "not ") +
              fsdprt_dtype_name(x.dtype) + " and " +
              fsdprt_dtype_name(y.dtype));
  require(!integer || kind == Reduce::Sum || kind == Reduce::Prod ||
              kind == Reduce::SumSquare || kind == Reduce::Max ||
              kind == Reduce::Min,
          std::string("reduces ") + fsdprt_dtype_name(x.dtype) +
              " only by reduce_sum, reduce_prod, reduce_sum_square, "
              "reduce_max or reduce_min");
  size_t rank = x.shape.size();
  std::vector<int64_t> axes = args.attrs.getInts("axes", {});
  bool keepdims = args.attrs.getInt("keepdims", 1) != 0;
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    require(a >= 0 && a < static_cast<int64_t>(rank),
            "axis " + std::to_string(a) + " is out of range for rank " +
                std::to_string(rank));
    reduced[a] = true;
  }
  ReduceShape s;
  std::vector<int64_t> expected;
  std::vector<int64_t> strides = stridesOf(x.shape);
  for (size_t d = 0; d < rank; ++d) {
    if (!reduced[d] || keepdims)
      expected.push_back(reduced[d] ? 1 : x.shape[d]);
    (reduced[d] ? s.red : s.kept).push_back(x.shape[d]);
    (reduced[d] ? s.redStrides : s.keptStrides).push_back(strides[d]);
  }
  require(y.shape == expected, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  // Dims of size 1 do not matter; neighbours of one kind merge. At most one
  // reduced run left makes the (outer, n, inner) form.
  std::vector<std::pair<int64_t, bool>> runs;
  for (size_t d = 0; d < rank; ++d) {
    if (x.shape[d] == 1)
      continue;
    if (!runs.empty() && runs.back().second == reduced[d])
      runs.back().first *= x.shape[d];
    else
      runs.push_back({x.shape[d], reduced[d]});
  }
  for (const auto &[size, isReduced] : runs) {
    if (isReduced) {
      ++s.reducedRuns;
      s.n = size;
    } else {
      (s.reducedRuns ? s.inner : s.outer) *= size;
    }
  }
  int64_t count = s.count = product(s.red);
  if (x.dtype == FSDPRT_I64)
    return integerReduce<int64_t>(x, y, s, kind);
  if (x.dtype == FSDPRT_I32)
    return integerReduce<int32_t>(x, y, s, kind);
  // Each element is mapped (squared, ...), the mapped values merged (by sum,
  // product, max or min), the result finished (mean, root, log).
  double inf = std::numeric_limits<double>::infinity();
  double init = kind == Reduce::Max    ? -inf
                : kind == Reduce::Min  ? inf
                : kind == Reduce::Prod ? 1.0
                                       : 0.0;
  auto merge = [kind](double acc, double v) {
    switch (kind) {
    case Reduce::Max:
      return maxOf(acc, v);
    case Reduce::Min:
      return v < acc || v != v ? v : acc;
    case Reduce::Prod:
      return acc * v;
    default:
      return acc + v;
    }
  };
  auto combine = [kind, merge](double acc, double v) {
    switch (kind) {
    case Reduce::SumSquare:
    case Reduce::L2:
      return merge(acc, v * v);
    case Reduce::L1:
      return merge(acc, std::fabs(v));
    case Reduce::LogSumExp:
      return merge(acc, std::exp(v));
    default:
      return merge(acc, v);
    }
  };
  auto finish = [kind, count](double acc) {
    switch (kind) {
    case Reduce::Mean:
      return acc / count;
    case Reduce::L2:
      return std::sqrt(acc);
    case Reduce::LogSum:
    case Reduce::LogSumExp:
      return std::log(acc);
    default:
      return acc;
    }
  };
  bool plainSum = kind == Reduce::Sum || kind == Reduce::Mean;
  if (x.dtype == FSDPRT_F64)
    return reduceLoops<double>(x, y, s, init, merge, combine, finish,
                               plainSum);
  return reduceLoops<float>(x, y, s, init, merge, combine, finish, plainSum);
}

/// ArgMax or ArgMin along `axis` of F32, F64, I32 or I64: the index (int64)
/// of the first extreme value, or of the last with select_last_index.
KernelFn argExtreme(KernelArgs &args, bool max) {
  requireArity(args, 1, 1, 1);
  Tensor x = args.in[0], y = args.out[0];
  require(x.dtype == FSDPRT_F32 || x.dtype == FSDPRT_F64 ||
              x.dtype == FSDPRT_I32 || x.dtype == FSDPRT_I64,
          std::string("the input must be float32, float64, int32 or int64, "
                      "not ") +
              fsdprt_dtype_name(x.dtype));
  requireDtype(args.out[0], FSDPRT_I64, "the output");
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = args.attrs.getInt("axis", 0);
  require(axis >= 0 && axis < rank, "axis " + std::to_string(axis) +
                                        " is out of range for rank " +
                                        std::to_string(rank));
  bool keepdims = args.attrs.getInt("keepdims", 1) != 0;
  bool last = args.attrs.getInt("select_last_index", 0) != 0;
  std::vector<int64_t> expected;
  int64_t outer = 1, inner = 1, n = x.shape[axis];
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis || keepdims)
      expected.push_back(d == axis ? 1 : x.shape[d]);
    if (d < axis)
      outer *= x.shape[d];
    else if (d > axis)
      inner *= x.shape[d];
  }
  require(y.shape == expected, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  require(n > 0 || y.numel == 0, "cannot take the index of an empty axis");
  auto rows = [=](auto zero) -> KernelFn {
    using T = decltype(zero);
    return [=]() {
      const T *px = x.as<T>();
      int64_t *py = y.as<int64_t>();
      parallelFor(outer * inner, n, [&](int64_t o) {
        py[o] = cuda::extremeIndex(px + o / inner * n * inner + o % inner, n,
                                   inner, max, last);
      });
      return std::string();
    };
  };
  switch (x.dtype) {
  case FSDPRT_F64:
    return rows(double{});
  case FSDPRT_I32:
    return rows(int32_t{});
  case FSDPRT_I64:
    return rows(int64_t{});
  default:
    return rows(float{});
  }
}

/// The log-softmax of the `c` class scores of one position, read `stride`
/// apart, into `out` (contiguous; it may be a row of `x` when stride is 1);
/// returns their log-sum-exp. `scratch` holds c floats.
float logSoftmaxOf(const float *x, int64_t c, int64_t stride, float *out,
                   float *scratch) {
  const float *row = x;
  if (stride != 1) {
    for (int64_t j = 0; j < c; ++j)
      scratch[j] = x[j * stride];
    row = scratch;
  }
  float max = vmath::max(row, c);
  float logSum = std::log(vmath::expSum(row, out, c, max));
  for (int64_t j = 0; j < c; ++j)
    out[j] = row[j] - max - logSum;
  return max + logSum;
}

/// A thread's scratch of at least `n` floats.
float *threadScratch(int64_t n) {
  static thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < n)
    scratch.resize(n);
  return scratch.data();
}

/// The first label outside [0, c) (ignore_index aside), as an error.
std::string checkLabels(const int64_t *labels, int64_t count, int64_t c,
                        bool hasIgnore, int64_t ignore) {
  for (int64_t p = 0; p < count; ++p)
    if (!(hasIgnore && labels[p] == ignore) &&
        (labels[p] < 0 || labels[p] >= c))
      return "label " + std::to_string(labels[p]) + " is outside [0, " +
             std::to_string(c) + ")";
  return "";
}

/// Checks the scores [N, C, d...], labels [N, d...] and optional weights [C]
/// of softmax_cross_entropy(_grad); returns the labels' shape.
std::vector<int64_t> checkCrossEntropyInputs(const Tensor &scores,
                                             const Tensor &labels,
                                             const Tensor *weights) {
  requireDtype(scores, FSDPRT_F32, "scores");
  requireDtype(labels, FSDPRT_I64, "labels");
  require(scores.shape.size() >= 2,
          "scores must be [N, C, ...], not " + shapeString(scores.shape));
  std::vector<int64_t> labelShape = scores.shape;
  labelShape.erase(labelShape.begin() + 1);
  require(labels.shape == labelShape, "labels " + shapeString(labels.shape) +
                                          " should be " +
                                          shapeString(labelShape));
  if (weights) {
    requireDtype(*weights, FSDPRT_F32, "weights");
    require(weights->shape == std::vector<int64_t>{scores.shape[1]},
            "weights must be [" + std::to_string(scores.shape[1]) + "], not " +
                shapeString(weights->shape));
  }
  return labelShape;
}

/// The per-position log-sum-exp softmax_cross_entropy gives and its
/// gradient reads: F32, of the labels' shape.
void checkCrossEntropyLse(const Tensor &lse,
                          const std::vector<int64_t> &labelShape) {
  requireDtype(lse, FSDPRT_F32, "the log-sum-exp");
  require(lse.shape == labelShape, "the log-sum-exp " + shapeString(lse.shape) +
                                       " should be " + shapeString(labelShape));
}

/// ONNX SoftmaxCrossEntropyLoss: the loss, with an optional log_prob output
/// (the log-softmax of the scores along the class dimension, every
/// position, ignored ones included) and, with `lse` = 1, a last output
/// holding each position's log-sum-exp of its scores, which the gradient
/// reads instead of recomputing it.
KernelFn softmaxCrossEntropy(KernelArgs &args) {
  bool hasLse = args.attrs.getInt("lse", 0) != 0;
  size_t extra = hasLse ? 1 : 0;
  require(args.in.size() >= 2 && args.in.size() <= 3 &&
              args.out.size() >= 1 + extra && args.out.size() <= 2 + extra,
          "takes scores, labels and optional weights, and gives the loss, "
          "an optional log_prob and, with lse = 1, the log-sum-exp");
  Tensor scores = args.in[0], labels = args.in[1], y = args.out[0];
  bool hasLogProb = args.out.size() == 2 + extra;
  Tensor logProb = hasLogProb ? args.out[1] : Tensor();
  Tensor lse = hasLse ? args.out.back() : Tensor();
  if (hasLogProb) {
    requireDtype(logProb, FSDPRT_F32, "log_prob");
    require(logProb.shape == scores.shape,
            "log_prob " + shapeString(logProb.shape) + " should be " +
                shapeString(scores.shape));
  }
  bool hasWeights = args.in.size() == 3;
  Tensor weights = hasWeights ? args.in[2] : Tensor();
  std::vector<int64_t> labelShape =
      checkCrossEntropyInputs(scores, labels, hasWeights ? &weights : nullptr);
  requireDtype(y, FSDPRT_F32, "the loss");
  if (hasLse)
    checkCrossEntropyLse(lse, labelShape);
  int64_t n = scores.shape[0], c = scores.shape[1];
  int64_t inner = product(scores.shape, 2, scores.shape.size());
  std::string reduction = args.attrs.getString("reduction", "mean");
  require(reduction == "mean" || reduction == "sum" || reduction == "none",
          "reduction must be mean, sum or none, not " + reduction);
  bool none = reduction == "none", mean = reduction == "mean";
  require(none ? y.shape == labelShape : y.numel == 1,
          "the loss " + shapeString(y.shape) + " does not match reduction " +
              reduction);
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  return [=]() -> std::string {
    const int64_t *pl = labels.as<int64_t>();
    if (std::string error = checkLabels(pl, n * inner, c, hasIgnore, ignore);
        !error.empty())
      return error;
    // Each position's loss in parallel, then the losses and weights summed
    // in order: the result does not depend on the thread count.
    std::vector<double> losses(none ? 0 : n * inner);
    parallelFor(n * inner, c * 8, [&](int64_t p) {
      int64_t b = p / inner, i = p % inner, label = pl[p];
      const float *row = scores.as<float>() + b * c * inner + i;
      float *scratch = threadScratch(2 * c);
      float *lp =
          hasLogProb && inner == 1 ? logProb.as<float>() + b * c : scratch + c;
      float logSum = logSoftmaxOf(row, c, inner, lp, scratch);
      if (hasLse)
        lse.as<float>()[p] = logSum;
      if (hasLogProb && inner != 1)
        for (int64_t j = 0; j < c; ++j)
          logProb.as<float>()[(b * c + j) * inner + i] = lp[j];
      double loss = 0;
      if (!(hasIgnore && label == ignore))
        loss = -(hasWeights ? weights.as<float>()[label] : 1.0) * lp[label];
      if (none)
        y.as<float>()[p] = static_cast<float>(loss);
      else
        losses[p] = loss;
    });
    if (none)
      return "";
    double total = 0, weightSum = 0;
    for (int64_t p = 0; p < n * inner; ++p) {
      total += losses[p];
      if (!(hasIgnore && pl[p] == ignore))
        weightSum += hasWeights ? weights.as<float>()[pl[p]] : 1.0;
    }
    y.as<float>()[0] = static_cast<float>(mean ? total / weightSum : total);
    return "";
  };
}

/// d loss / d scores: per position, g * w[label] * (softmax - onehot(label))
/// along the class dimension, divided by the summed weights of the
/// non-ignored labels for a mean; positions of ignored labels are 0. With
/// `lse` = 1 the last input is the forward's log-sum-exp per position:
/// softmax = exp(scores - lse) reads the scores once instead of twice.
KernelFn softmaxCrossEntropyGrad(KernelArgs &args) {
  bool hasLse = args.attrs.getInt("lse", 0) != 0;
  size_t extra = hasLse ? 1 : 0;
  requireArity(args, 3 + extra, 4 + extra, 1);
  Tensor scores = args.in[0], labels = args.in[1], g = args.in[2],
         y = args.out[0];
  bool hasWeights = args.in.size() == 4 + extra;
  Tensor weights = hasWeights ? args.in[3] : Tensor();
  Tensor lse = hasLse ? args.in.back() : Tensor();
  std::vector<int64_t> labelShape =
      checkCrossEntropyInputs(scores, labels, hasWeights ? &weights : nullptr);
  if (hasLse)
    checkCrossEntropyLse(lse, labelShape);
  requireDtype(g, FSDPRT_F32, "the loss gradient");
  requireDtype(y, FSDPRT_F32, "the scores gradient");
  require(y.shape == scores.shape, "the scores gradient " +
                                       shapeString(y.shape) + " should be " +
                                       shapeString(scores.shape));
  int64_t n = scores.shape[0], c = scores.shape[1];
  int64_t inner = product(scores.shape, 2, scores.shape.size());
  std::string reduction = args.attrs.getString("reduction", "mean");
  require(reduction == "mean" || reduction == "sum" || reduction == "none",
          "reduction must be mean, sum or none, not " + reduction);
  bool none = reduction == "none", mean = reduction == "mean";
  require(none ? g.shape == labelShape : g.numel == 1,
          "the loss gradient " + shapeString(g.shape) +
              " does not match reduction " + reduction);
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  return [=]() -> std::string {
    const int64_t *pl = labels.as<int64_t>();
    const float *pw = hasWeights ? weights.as<float>() : nullptr;
    double weightSum = 0;
    for (int64_t p = 0; p < n * inner; ++p) {
      if (hasIgnore && pl[p] == ignore)
        continue;
      if (pl[p] < 0 || pl[p] >= c)
        return "label " + std::to_string(pl[p]) + " is outside [0, " +
               std::to_string(c) + ")";
      weightSum += pw ? pw[pl[p]] : 1.0;
    }
    double divisor = mean && weightSum != 0 ? weightSum : 1.0;
    parallelFor(n * inner, c * 8, [&](int64_t p) {
      int64_t b = p / inner, i = p % inner, label = pl[p];
      const float *row = scores.as<float>() + b * c * inner + i;
      float *out = y.as<float>() + b * c * inner + i;
      if (hasIgnore && label == ignore) {
        for (int64_t j = 0; j < c; ++j)
          out[j * inner] = 0.0f;
        return;
      }
      float scale = static_cast<float>(g.as<float>()[none ? p : 0] *
                                       (pw ? pw[label] : 1.0) / divisor);
      // softmax - onehot, scaled; the exponentials computed once, in place
      // when the classes are contiguous.
      float *scratch = threadScratch(2 * c);
      const float *x = row;
      float *e = inner == 1 ? out : scratch + c;
      if (inner != 1) {
        for (int64_t j = 0; j < c; ++j)
          scratch[j] = row[j * inner];
        x = scratch;
      }
      // The forward's log-sum-exp, when given, is the shift instead of the
      // row's max (one pass fewer). The exponentials are still divided by
      // their sum: exp(x - lse) alone carries lse's rounding into every
      // class alike, and on e2e.model-families' DenseNet that took a
      // BatchNorm weight after three AdamW steps 3.6x further from float64
      // torch than float32 torch is (1.0x divided by the sum).
      float shift = hasLse ? lse.as<float>()[p] : vmath::max(x, c);
      float inv = 1.0f / vmath::expSum(x, e, c, shift);
      for (int64_t j = 0; j < c; ++j)
        e[j] = scale * (e[j] * inv);
      e[label] -= scale;
      if (inner != 1)
        for (int64_t j = 0; j < c; ++j)
          out[j * inner] = e[j];
    });
    return "";
  };
}

/// What nll_loss and nll_loss_grad share: the classes `target` [N, d...]
/// (I64 or I32) of an input [N, C, d...], the optional class `weight` [C],
/// the reduction and ignore_index.
struct NllTerms {
  Tensor target, weight;
  bool hasWeight = false, hasIgnore = false, none = false, mean = false;
  int64_t c = 0, inner = 0, ignore = 0;
  std::string reduction;

  /// Checks the operands against `input`'s shape [N, C, d...].
  NllTerms(const KernelArgs &args, const std::vector<int64_t> &input,
           const Tensor &target, const Tensor *weight)
      : target(target), hasWeight(weight != nullptr) {
    require(input.size() >= 2,
            "input must be [N, C, ...], not " + shapeString(input));
    require(target.dtype == FSDPRT_I64 || target.dtype == FSDPRT_I32,
            "target must be int64 or int32");
    std::vector<int64_t> targetShape = input;
    targetShape.erase(targetShape.begin() + 1);
    require(target.shape == targetShape,
            "target " + shapeString(target.shape) + " should be " +
                shapeString(targetShape));
    c = input[1];
    inner = product(input, 2, input.size());
    if (weight) {
      requireDtype(*weight, FSDPRT_F32, "weight");
      require(weight->shape == std::vector<int64_t>{c},
              "weight must be [" + std::to_string(c) + "], not " +
                  shapeString(weight->shape));
      this->weight = *weight;
    }
    reduction = args.attrs.getString("reduction", "mean");
    require(reduction == "mean" || reduction == "sum" || reduction == "none",
            "reduction must be mean, sum or none, not " + reduction);
    none = reduction == "none";
    mean = reduction == "mean";
    hasIgnore = args.attrs.has("ignore_index");
    ignore = args.attrs.getInt("ignore_index", 0);
  }

  /// The class of position `p` and its weight (0 when ignored, the class
  /// then -1); an error for a class outside [0, C).
  std::string classAt(int64_t p, int64_t &cls, double &w) const {
    cls = indexAt(target, p);
    if (hasIgnore && cls == ignore) {
      cls = -1;
      w = 0;
      return "";
    }
    if (cls < 0 || cls >= c)
      return "target " + std::to_string(cls) + " is outside [0, " +
             std::to_string(c) + ")";
    w = hasWeight ? weight.as<float>()[cls] : 1.0;
    return "";
  }

  /// The summed weight of the positions not ignored, or an error.
  std::string weightSum(double &sum) const {
    sum = 0;
    for (int64_t p = 0; p < target.numel; ++p) {
      int64_t cls;
      double w;
      if (std::string error = classAt(p, cls, w); !error.empty())
        return error;
      sum += w;
    }
    return "";
  }
};

/// ONNX NegativeLogLikelihoodLoss (torch's nll_loss): per position
/// -w[t] * input[n, t, d...] for its class t (0 where t is ignore_index),
/// reduced by sum, by mean over the summed weights, or not at all.
KernelFn nllLoss(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  Tensor input = args.in[0], y = args.out[0];
  requireDtype(input, FSDPRT_F32, "input");
  requireDtype(y, FSDPRT_F32, "the loss");
  NllTerms t(args, input.shape, args.in[1],
             args.in.size() == 3 ? &args.in[2] : nullptr);
  require(t.none ? y.shape == t.target.shape : y.numel == 1,
          "the loss " + shapeString(y.shape) + " does not match reduction " +
              t.reduction);
  return [=]() -> std::string {
    double total = 0, weights = 0;
    for (int64_t p = 0; p < t.target.numel; ++p) {
      int64_t cls;
      double w;
      if (std::string error = t.classAt(p, cls, w); !error.empty())
        return error;
      int64_t b = p / t.inner, i = p % t.inner;
      double loss =
          cls < 0 ? 0.0
                  : -w * input.as<float>()[(b * t.c + cls) * t.inner + i];
      if (t.none)
        y.as<float>()[p] = static_cast<float>(loss);
      total += loss;
      weights += w;
    }
    if (!t.none) // a mean over no weight is 0 / 0: NaN, as in torch
      y.as<float>()[0] = static_cast<float>(t.mean ? total / weights : total);
    return "";
  };
}

/// d loss / d input of nll_loss: zero except -g * w[t] at each position's
/// class t, divided by the summed weights for a mean.
KernelFn nllLossGrad(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  Tensor g = args.in[1], y = args.out[0];
  requireDtype(g, FSDPRT_F32, "the loss gradient");
  requireDtype(y, FSDPRT_F32, "the input gradient");
  NllTerms t(args, y.shape, args.in[0],
             args.in.size() == 3 ? &args.in[2] : nullptr);
  require(t.none ? g.shape == t.target.shape : g.numel == 1,
          "the loss gradient " + shapeString(g.shape) +
              " does not match reduction " + t.reduction);
  return [=]() -> std::string {
    double sum = 1;
    if (t.mean)
      if (std::string error = t.weightSum(sum); !error.empty())
        return error;
    double divisor = sum != 0 ? sum : 1.0;
    float *py = y.as<float>();
    std::fill(py, py + y.numel, 0.0f);
    for (int64_t p = 0; p < t.target.numel; ++p) {
      int64_t cls;
      double w;
      if (std::string error = t.classAt(p, cls, w); !error.empty())
        return error;
      if (cls < 0)
        continue;
      int64_t b = p / t.inner, i = p % t.inner;
      py[(b * t.c + cls) * t.inner + i] =
          static_cast<float>(-g.as<float>()[t.none ? p : 0] * w / divisor);
    }
    return "";
  };
}

} // namespace

void registerNN(Registry &r) {
  r["softmax"] = [](KernelArgs &a) { return softmax(a, false); };
  r["log_softmax"] = [](KernelArgs &a) { return softmax(a, true); };
  r["layer_norm"] = layerNorm;
  r["rms_norm"] = rmsNorm;
  r["batch_norm"] = batchNorm;
  r["batch_norm_train"] = batchNormTrain;
  r["batch_norm_grad"] = batchNormGrad;
  r["layer_norm_grad"] = [](KernelArgs &a) { return normGrad(a, false); };
  r["rms_norm_grad"] = [](KernelArgs &a) { return normGrad(a, true); };
  r["max_pool"] = [](KernelArgs &a) { return pool(a, true); };
  r["average_pool"] = [](KernelArgs &a) { return pool(a, false); };
  r["global_average_pool"] = globalAveragePool;
  r["global_max_pool"] = globalMaxPool;
  r["hardmax"] = hardmax;
  r["resize"] = resize;
  r["grid_sample"] = gridSample;
  r["grid_sample_grad"] = gridSampleGrad;
  r["pool_grad"] = poolGrad;
  r["reduce_sum"] = [](KernelArgs &a) { return reduce(a, Reduce::Sum); };
  r["reduce_mean"] = [](KernelArgs &a) { return reduce(a, Reduce::Mean); };
  r["reduce_max"] = [](KernelArgs &a) { return reduce(a, Reduce::Max); };
  r["reduce_min"] = [](KernelArgs &a) { return reduce(a, Reduce::Min); };
  r["arg_max"] = [](KernelArgs &a) { return argExtreme(a, true); };
  r["arg_min"] = [](KernelArgs &a) { return argExtreme(a, false); };
  r["reduce_prod"] = [](KernelArgs &a) { return reduce(a, Reduce::Prod); };
  r["reduce_sum_square"] = [](KernelArgs &a) {
    return reduce(a, Reduce::SumSquare);
  };
  r["reduce_l1"] = [](KernelArgs &a) { return reduce(a, Reduce::L1); };
  r["reduce_l2"] = [](KernelArgs &a) { return reduce(a, Reduce::L2); };
  r["reduce_log_sum"] = [](KernelArgs &a) {
    return reduce(a, Reduce::LogSum);
  };
  r["reduce_log_sum_exp"] = [](KernelArgs &a) {
    return reduce(a, Reduce::LogSumExp);
  };
  r["softmax_cross_entropy"] = softmaxCrossEntropy;
  r["softmax_cross_entropy_grad"] = softmaxCrossEntropyGrad;
  r["nll_loss"] = nllLoss;
  r["nll_loss_grad"] = nllLossGrad;
}

} // namespace fsdprt::cpu
