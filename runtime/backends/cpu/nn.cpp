//===- nn.cpp - Normalisation, softmax, pooling, reductions, losses -------===//
//
// Statistics (means, variances, sums of exponentials) accumulate in double:
// the results then match PyTorch's fp32 kernels to round-off.
//
//===----------------------------------------------------------------------===//

#include "kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fsdprt::cpu {
namespace {

void requireF32(const KernelArgs &args, size_t inputs) {
  for (size_t i = 0; i < inputs && i < args.in.size(); ++i)
    requireDtype(args.in[i], FSDPRT_F32, "the input");
  for (const Tensor &t : args.out)
    requireDtype(t, FSDPRT_F32, "the output");
}

int64_t axisOf(const KernelArgs &args, const Tensor &x) {
  int64_t axis = args.attrs.getInt("axis", -1);
  int64_t rank = x.shape.size();
  require(axis >= 0 && axis < std::max<int64_t>(rank, 1),
          "axis " + std::to_string(axis) + " is out of range");
  return axis;
}

KernelFn softmax(KernelArgs &args, bool log) {
  requireArity(args, 1, 1, 1);
  requireF32(args, 1);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape == y.shape, "input and output shapes differ");
  int64_t axis = axisOf(args, x);
  int64_t n = x.shape.empty() ? 1 : x.shape[axis];
  int64_t inner = product(x.shape, axis + 1, x.shape.size());
  int64_t outer = x.numel / std::max<int64_t>(n * inner, 1);
  return [=]() {
    parallelFor(outer * inner, n * 4, [&](int64_t idx) {
      int64_t o = idx / inner, i = idx % inner;
      const float *px = x.as<float>() + o * n * inner + i;
      float *py = y.as<float>() + o * n * inner + i;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j)
        max = std::max(max, px[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(static_cast<double>(px[j * inner] - max));
      for (int64_t j = 0; j < n; ++j) {
        double shifted = px[j * inner] - max;
        py[j * inner] = log ? static_cast<float>(shifted - std::log(sum))
                            : static_cast<float>(std::exp(shifted) / sum);
      }
    });
    return std::string();
  };
}

/// Normalises rows of `cols` elements: (x - mean) / sqrt(var + eps) * scale
/// + bias, or for RMS x / sqrt(mean(x^2) + eps) * scale.
KernelFn rowNorm(Tensor x, Tensor y, const Tensor *scale, const Tensor *bias,
                 int64_t cols, double eps, bool rms) {
  int64_t rows = cols ? x.numel / cols : 0;
  const float *ps = scale ? scale->as<float>() : nullptr;
  const float *pb = bias ? bias->as<float>() : nullptr;
  int64_t scaleStep = scale && scale->numel == cols ? 1 : 0;
  int64_t biasStep = bias && bias->numel == cols ? 1 : 0;
  return [=]() {
    parallelFor(rows, cols * 4, [&](int64_t r) {
      const float *px = x.as<float>() + r * cols;
      float *py = y.as<float>() + r * cols;
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
      var /= cols;
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < cols; ++j) {
        double v = (px[j] - mean) * inv;
        if (ps)
          v *= ps[j * scaleStep];
        if (pb)
          v += pb[j * biasStep];
        py[j] = static_cast<float>(v);
      }
    });
    return std::string();
  };
}

KernelFn layerNorm(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args, 3);
  const Tensor &x = args.in[0];
  require(x.shape == args.out[0].shape, "input and output shapes differ");
  int64_t axis = axisOf(args, x);
  int64_t cols = product(x.shape, axis, x.shape.size());
  for (size_t i = 1; i < args.in.size(); ++i)
    require(args.in[i].numel == cols || args.in[i].numel == 1,
            "scale and bias must cover the normalised dims");
  return rowNorm(x, args.out[0], &args.in[1],
                 args.in.size() == 3 ? &args.in[2] : nullptr, cols,
                 args.attrs.getFloat("epsilon", 1e-5), false);
}

KernelFn rmsNorm(KernelArgs &args) {
  requireArity(args, 1, 2, 1);
  requireF32(args, 2);
  const Tensor &x = args.in[0];
  require(!x.shape.empty() && x.shape == args.out[0].shape,
          "input and output shapes differ");
  int64_t cols = x.shape.back();
  require(args.in.size() == 1 || args.in[1].numel == cols,
          "scale must have the last dimension's size");
  return rowNorm(x, args.out[0], args.in.size() == 2 ? &args.in[1] : nullptr,
                 nullptr, cols, args.attrs.getFloat("epsilon", 1e-6), true);
}

KernelFn batchNorm(KernelArgs &args) {
  requireArity(args, 5, 5, 1);
  requireF32(args, 5);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() >= 2 && x.shape == y.shape,
          "input must be [N, C, ...] and equal the output's shape");
  int64_t c = x.shape[1];
  for (size_t i = 1; i < 5; ++i)
    require(args.in[i].numel == c, "scale, bias, mean and var need C values");
  int64_t inner = product(x.shape, 2, x.shape.size());
  double eps = args.attrs.getFloat("epsilon", 1e-5);
  Tensor s = args.in[1], b = args.in[2], mean = args.in[3], var = args.in[4];
  return [=]() {
    parallelFor(x.numel / inner, inner, [&](int64_t r) {
      int64_t ch = r % c;
      double k = s.as<float>()[ch] / std::sqrt(var.as<float>()[ch] + eps);
      double m = mean.as<float>()[ch], sh = b.as<float>()[ch];
      const float *px = x.as<float>() + r * inner;
      float *py = y.as<float>() + r * inner;
      for (int64_t j = 0; j < inner; ++j)
        py[j] = static_cast<float>((px[j] - m) * k + sh);
    });
    return std::string();
  };
}

KernelFn pool(KernelArgs &args, bool max) {
  requireArity(args, 1, 1, 1);
  requireF32(args, 1);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() == 4 && y.shape.size() == 4,
          "only 2-D pooling (NCHW) is supported");
  std::vector<int64_t> k = args.attrs.getInts("kernel_shape", {});
  std::vector<int64_t> st = args.attrs.getInts("strides", {1, 1});
  std::vector<int64_t> pads = args.attrs.getInts("pads", {0, 0, 0, 0});
  std::vector<int64_t> dil = args.attrs.getInts("dilations", {1, 1});
  bool includePad = args.attrs.getInt("count_include_pad", 0) != 0;
  require(k.size() == 2 && st.size() == 2 && pads.size() == 4 && dil.size() == 2,
          "kernel_shape, strides, dilations (2) and pads (4) are required");
  require(y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1],
          "input and output differ in batch or channels");
  int64_t h = x.shape[2], w = x.shape[3], oh = y.shape[2], ow = y.shape[3];
  return [=]() {
    parallelFor(x.shape[0] * x.shape[1], oh * ow * k[0] * k[1], [&](int64_t p) {
      const float *px = x.as<float>() + p * h * w;
      float *py = y.as<float>() + p * oh * ow;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0;
          int64_t count = 0;
          for (int64_t a = 0; a < k[0]; ++a)
            for (int64_t b = 0; b < k[1]; ++b) {
              int64_t ih = i * st[0] - pads[0] + a * dil[0];
              int64_t iw = j * st[1] - pads[1] + b * dil[1];
              bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
              // Padding never wins a max; it counts for an average only
              // with count_include_pad (and only up to the padded edge).
              if (!inside) {
                if (!max && includePad && ih < h + pads[2] && iw < w + pads[3])
                  ++count;
                continue;
              }
              double v = px[ih * w + iw];
              acc = max ? std::max(acc, v) : acc + v;
              ++count;
            }
          py[i * ow + j] = static_cast<float>(max ? acc : acc / std::max<int64_t>(count, 1));
        }
    });
    return std::string();
  };
}

KernelFn globalAveragePool(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireF32(args, 1);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape.size() >= 3, "input must be [N, C, spatial...]");
  int64_t inner = product(x.shape, 2, x.shape.size());
  require(y.numel * inner == x.numel, "output must be [N, C, 1...]");
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

enum class Reduce { Sum, Mean, Max };

KernelFn reduce(KernelArgs &args, Reduce kind) {
  requireArity(args, 1, 1, 1);
  requireF32(args, 1);
  Tensor x = args.in[0], y = args.out[0];
  size_t rank = x.shape.size();
  std::vector<int64_t> axes = args.attrs.getInts("axes", {});
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    require(a >= 0 && a < static_cast<int64_t>(rank), "axis out of range");
    reduced[a] = true;
  }
  // Output strides over the input's index space (0 along reduced dims).
  std::vector<int64_t> kept;
  for (size_t d = 0; d < rank; ++d)
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
  auto strides = std::make_shared<std::vector<int64_t>>(stridesOf(kept));
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d])
      (*strides)[d] = 0;
  require(product(kept, 0, kept.size()) == y.numel,
          "output " + shapeString(y.shape) + " does not match the reduction");
  int64_t count = y.numel ? x.numel / y.numel : 0;
  std::vector<int64_t> shape = x.shape;
  return [=]() {
    std::vector<double> acc(y.numel, kind == Reduce::Max
                                         ? -std::numeric_limits<double>::infinity()
                                         : 0.0);
    std::vector<int64_t> index(rank, 0);
    const float *px = x.as<float>();
    for (int64_t i = 0; i < x.numel; ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < rank; ++d)
        o += index[d] * (*strides)[d];
      acc[o] = kind == Reduce::Max ? std::max(acc[o], double(px[i])) : acc[o] + px[i];
      for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        if (++index[d] < shape[d])
          break;
        index[d] = 0;
      }
    }
    for (int64_t o = 0; o < y.numel; ++o)
      y.as<float>()[o] =
          static_cast<float>(kind == Reduce::Mean ? acc[o] / count : acc[o]);
    return std::string();
  };
}

KernelFn softmaxCrossEntropy(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  Tensor scores = args.in[0], labels = args.in[1], y = args.out[0];
  requireDtype(scores, FSDPRT_F32, "scores");
  requireDtype(labels, FSDPRT_I64, "labels");
  requireDtype(y, FSDPRT_F32, "the loss");
  require(scores.shape.size() >= 2, "scores must be [N, C, ...]");
  int64_t n = scores.shape[0], c = scores.shape[1];
  int64_t inner = product(scores.shape, 2, scores.shape.size());
  require(labels.numel == n * inner, "labels must be [N, ...] matching scores");
  bool hasWeights = args.in.size() == 3;
  Tensor weights = hasWeights ? args.in[2] : Tensor();
  require(!hasWeights || weights.numel == c, "weights must have C values");
  std::string reduction = args.attrs.getString("reduction", "mean");
  require(reduction == "mean" || reduction == "sum" || reduction == "none",
          "reduction must be mean, sum or none");
  require(reduction == "none" ? y.numel == labels.numel : y.numel == 1,
          "the loss's shape does not match the reduction");
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  return [=]() -> std::string {
    double total = 0, weightSum = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t label = labels.as<int64_t>()[b * inner + i];
        double loss = 0, w = 0;
        if (!(hasIgnore && label == ignore)) {
          if (label < 0 || label >= c)
            return "label " + std::to_string(label) + " is outside [0, " +
                   std::to_string(c) + ")";
          const float *row = scores.as<float>() + b * c * inner + i;
          double max = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < c; ++j)
            max = std::max(max, double(row[j * inner]));
          double sum = 0;
          for (int64_t j = 0; j < c; ++j)
            sum += std::exp(row[j * inner] - max);
          w = hasWeights ? weights.as<float>()[label] : 1.0;
          loss = w * (std::log(sum) + max - row[label * inner]);
        }
        if (reduction == "none")
          y.as<float>()[b * inner + i] = static_cast<float>(loss);
        total += loss;
        weightSum += w;
      }
    if (reduction == "sum")
      y.as<float>()[0] = static_cast<float>(total);
    else if (reduction == "mean")
      y.as<float>()[0] = static_cast<float>(total / weightSum);
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
  r["max_pool"] = [](KernelArgs &a) { return pool(a, true); };
  r["average_pool"] = [](KernelArgs &a) { return pool(a, false); };
  r["global_average_pool"] = globalAveragePool;
  r["reduce_sum"] = [](KernelArgs &a) { return reduce(a, Reduce::Sum); };
  r["reduce_mean"] = [](KernelArgs &a) { return reduce(a, Reduce::Mean); };
  r["reduce_max"] = [](KernelArgs &a) { return reduce(a, Reduce::Max); };
  r["softmax_cross_entropy"] = softmaxCrossEntropy;
}

} // namespace fsdprt::cpu
