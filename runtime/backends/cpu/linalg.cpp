//===- linalg.cpp - GEMM-based CPU kernels (OpenBLAS) ---------------------===//
//
// matmul, gemm, linear (GEMM + bias + activation epilogue), attention
// (per batch-head: scores by GEMM into a per-thread tile, scale, mask,
// softmax in place, GEMM with the values) and conv (im2col + GEMM).
//
//===----------------------------------------------------------------------===//

#include "kernels.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace fsdprt::cpu {

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
  auto call = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (m1 <= m0 || n1 <= n0)
      return;
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, m1 - m0, n1 - n0, k, alpha,
                a + (transA ? m0 : m0 * lda), lda,
                b + (transB ? n0 * ldb : n0), ldb, beta, c + m0 * ldc + n0,
                ldc);
  };
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || m * n * k < (1 << 16)) {
    call(0, m, 0, n);
    return;
  }
  // Split the larger of M and N into one block per thread.
  bool byRows = m >= n;
  int64_t extent = byRows ? m : n;
  int64_t block = (extent + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    int64_t lo = t * block, hi = std::min(extent, lo + block);
    if (byRows)
      call(lo, hi, 0, n);
    else
      call(0, m, lo, hi);
  }
}

namespace {

void requireF32(const KernelArgs &args) {
  for (const Tensor &t : args.in)
    requireDtype(t, FSDPRT_F32, "every input");
  for (const Tensor &t : args.out)
    requireDtype(t, FSDPRT_F32, "the output");
}

/// Element offsets of each batch of an operand whose batch dims broadcast to
/// `batch`.
std::vector<int64_t> batchOffsets(const std::vector<int64_t> &shape,
                                  size_t matrixDims,
                                  const std::vector<int64_t> &batch,
                                  int64_t matrixSize, const char *what) {
  std::vector<int64_t> own(shape.begin(), shape.end() - matrixDims);
  std::vector<int64_t> strides = broadcastStrides(own, batch, what);
  int64_t count = product(batch, 0, batch.size());
  std::vector<int64_t> offsets(count);
  for (int64_t b = 0; b < count; ++b) {
    int64_t rest = b, offset = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      offset += (rest % batch[d]) * strides[d];
      rest /= batch[d];
    }
    offsets[b] = offset * matrixSize;
  }
  return offsets;
}

KernelFn matmul(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  requireF32(args);
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  bool transB = args.attrs.getInt("trans_b", 0) != 0;
  // Promote 1-D operands as NumPy does.
  std::vector<int64_t> as = a.shape, bs = b.shape;
  require(!as.empty() && !bs.empty(), "operands must have rank >= 1");
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back();
  int64_t bk = transB ? bs.back() : bs[bs.size() - 2];
  int64_t n = transB ? bs[bs.size() - 2] : bs.back();
  require(k == bk, "inner dimensions differ: " + shapeString(a.shape) +
                       " and " + shapeString(b.shape));
  std::vector<int64_t> batch(y.shape.begin(),
                             y.shape.end() - std::min<size_t>(
                                 y.shape.size(),
                                 (a.shape.size() > 1) + (b.shape.size() > 1)));
  require(product(batch, 0, batch.size()) * m * n == y.numel,
          "output " + shapeString(y.shape) + " does not fit " +
              shapeString(a.shape) + " x " + shapeString(b.shape));
  auto aOff = std::make_shared<std::vector<int64_t>>(
      batchOffsets(as, 2, batch, m * k, "a's batch"));
  auto bOff = std::make_shared<std::vector<int64_t>>(
      batchOffsets(bs, 2, batch, k * n, "b's batch"));
  // A shared right operand and a contiguous left one make one GEMM with
  // the batch folded into the rows.
  int64_t count = aOff->size();
  bool fold = count > 1;
  for (int64_t i = 0; i < count && fold; ++i)
    fold = (*bOff)[i] == (*bOff)[0] && (*aOff)[i] == i * m * k;
  int64_t rows = fold ? count * m : m, gemms = fold ? 1 : count;
  return [=]() {
    auto one = [&](int64_t i) {
      sgemm(false, transB, rows, n, k, 1.0f, a.as<float>() + (*aOff)[i], k,
            b.as<float>() + (*bOff)[i], transB ? k : n, 0.0f,
            y.as<float>() + i * rows * n, n);
    };
    // Many small products run side by side; a few large ones split inside.
    if (gemms > 1 && rows * n * k < (1 << 18)) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < gemms; ++i)
        one(i);
    } else {
      for (int64_t i = 0; i < gemms; ++i)
        one(i);
    }
    return std::string();
  };
}

KernelFn gemm(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  bool ta = args.attrs.getInt("trans_a", 0), tb = args.attrs.getInt("trans_b", 0);
  float alpha = args.attrs.getFloat("alpha", 1.0);
  float beta = args.attrs.getFloat("beta", 1.0);
  require(a.shape.size() == 2 && b.shape.size() == 2 && y.shape.size() == 2,
          "operands must be 2-D");
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t n = tb ? b.shape[0] : b.shape[1];
  require((tb ? b.shape[1] : b.shape[0]) == k && y.shape[0] == m &&
              y.shape[1] == n,
          "shapes do not chain: " + shapeString(a.shape) + " x " +
              shapeString(b.shape) + " -> " + shapeString(y.shape));
  bool hasC = args.in.size() == 3;
  Tensor c = hasC ? args.in[2] : Tensor();
  auto cStrides = std::make_shared<std::vector<int64_t>>(
      hasC ? broadcastStrides(c.shape, y.shape, "C") : std::vector<int64_t>());
  return [=]() {
    float *py = y.as<float>();
    if (hasC)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          py[i * n + j] =
              beta * c.as<float>()[i * (*cStrides)[0] + j * (*cStrides)[1]];
    sgemm(ta, tb, m, n, k, alpha, a.as<float>(), ta ? m : k, b.as<float>(),
          tb ? k : n, hasC ? 1.0f : 0.0f, py, n);
    return std::string();
  };
}

float activate(int kind, float x) {
  switch (kind) {
  case 1: return x > 0 ? x : 0.0f;
  case 2: return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
  case 3: {
    // 0.5 (1 + tanh(u)) = sigmoid(2u): one exp instead of libm's slow tanh.
    const float k2 = 2 * 0.7978845608028654f;
    return x / (1.0f + std::exp(-k2 * (x + 0.044715f * x * x * x)));
  }
  case 4: return x / (1.0f + std::exp(-x));
  case 5: return std::tanh(x);
  case 6: return 1.0f / (1.0f + std::exp(-x));
  default: return x;
  }
}

KernelFn linear(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  bool transW = args.attrs.getInt("trans_w", 0) != 0;
  static const char *kActivations[] = {"none", "relu", "gelu", "gelu_tanh",
                                       "silu", "tanh", "sigmoid"};
  std::string name = args.attrs.getString("activation", "none");
  int act = -1;
  for (int i = 0; i < 7; ++i)
    if (name == kActivations[i])
      act = i;
  require(act >= 0, "unknown activation " + name);
  require(w.shape.size() == 2 && !x.shape.empty(), "w must be 2-D");
  int64_t k = x.shape.back(), n = transW ? w.shape[0] : w.shape[1];
  require((transW ? w.shape[1] : w.shape[0]) == k && !y.shape.empty() &&
              y.shape.back() == n && y.numel / n == x.numel / k,
          "shapes do not chain: " + shapeString(x.shape) + " x " +
              shapeString(w.shape) + " -> " + shapeString(y.shape));
  bool hasBias = args.in.size() == 3;
  Tensor bias = hasBias ? args.in[2] : Tensor();
  require(!hasBias || bias.numel == n, "bias must have " + std::to_string(n) +
                                           " elements");
  int64_t rows = x.numel / k;
  return [=]() {
    float *py = y.as<float>();
    if (hasBias)
      parallelFor(rows, n, [&](int64_t r) {
        std::memcpy(py + r * n, bias.as<float>(), n * sizeof(float));
      });
    sgemm(false, transW, rows, n, k, 1.0f, x.as<float>(), k, w.as<float>(),
          transW ? k : n, hasBias ? 1.0f : 0.0f, py, n);
    if (act != 0)
      parallelFor(rows, n * 8, [&](int64_t r) {
        for (int64_t j = 0; j < n; ++j)
          py[r * n + j] = activate(act, py[r * n + j]);
      });
    return std::string();
  };
}

KernelFn attention(KernelArgs &args) {
  requireArity(args, 3, 4, 1);
  Tensor q = args.in[0], kt = args.in[1], v = args.in[2], y = args.out[0];
  for (const Tensor &t : {q, kt, v, y})
    requireDtype(t, FSDPRT_F32, "q, k_t, v and the output");
  size_t rank = q.shape.size();
  require(rank >= 2 && kt.shape.size() == rank && v.shape.size() == rank &&
              y.shape.size() == rank,
          "q, k_t, v and the output must have one rank >= 2");
  int64_t l = q.shape[rank - 2], d = q.shape[rank - 1];
  int64_t s = kt.shape[rank - 1], dv = v.shape[rank - 1];
  require(kt.shape[rank - 2] == d && v.shape[rank - 2] == s &&
              y.shape[rank - 2] == l && y.shape[rank - 1] == dv,
          "shapes do not chain: q " + shapeString(q.shape) + ", k_t " +
              shapeString(kt.shape) + ", v " + shapeString(v.shape));
  std::vector<int64_t> batch(q.shape.begin(), q.shape.end() - 2);
  for (const Tensor &t : {kt, v, y})
    require(std::equal(batch.begin(), batch.end(), t.shape.begin()),
            "q, k_t, v and the output must have equal batch dimensions");
  float scale = args.attrs.getFloat("scale", 1.0);
  std::string kind = args.attrs.getString("mask_kind", "none");
  float fill = args.attrs.getFloat("fill_value", 0.0);
  require(kind == "none" || kind == "add" || kind == "fill",
          "mask_kind must be none, add or fill");
  require((kind == "none") == (args.in.size() == 3),
          "mask_kind " + kind + (args.in.size() == 3 ? " needs" : " takes no") +
              " mask");
  Tensor mask = args.in.size() == 4 ? args.in[3] : Tensor();
  auto maskStrides = std::make_shared<std::vector<int64_t>>();
  if (kind != "none") {
    requireDtype(mask, kind == "fill" ? FSDPRT_BOOL : FSDPRT_F32, "the mask");
    *maskStrides = broadcastStrides(mask.shape, y.shape.size() ? [&] {
      std::vector<int64_t> full = batch;
      full.push_back(l);
      full.push_back(s);
      return full;
    }() : std::vector<int64_t>(), "the mask");
  }
  int64_t count = product(batch, 0, batch.size());
  int mode = kind == "none" ? 0 : kind == "add" ? 1 : 2;
  return [=]() {
    const std::vector<int64_t> &ms = *maskStrides;
    auto one = [&](int64_t b, std::vector<float> &scores) {
      float *sc = scores.data();
      sgemm(false, false, l, s, d, scale, q.as<float>() + b * l * d, d,
            kt.as<float>() + b * d * s, s, 0.0f, sc, s);
      int64_t maskBase = 0;
      if (mode) {
        int64_t rest = b;
        for (int64_t dim = static_cast<int64_t>(batch.size()) - 1; dim >= 0;
             --dim) {
          maskBase += (rest % batch[dim]) * ms[dim];
          rest /= batch[dim];
        }
      }
      int64_t sl = mode ? ms[batch.size()] : 0, ss = mode ? ms[batch.size() + 1] : 0;
      for (int64_t i = 0; i < l; ++i) {
        float *row = sc + i * s;
        if (mode == 1)
          for (int64_t j = 0; j < s; ++j)
            row[j] += mask.as<float>()[maskBase + i * sl + j * ss];
        else if (mode == 2)
          for (int64_t j = 0; j < s; ++j)
            if (mask.as<uint8_t>()[maskBase + i * sl + j * ss])
              row[j] = fill;
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < s; ++j)
          max = std::max(max, row[j]);
        float sum = 0;
        for (int64_t j = 0; j < s; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        for (int64_t j = 0; j < s; ++j)
          row[j] /= sum;
      }
      sgemm(false, false, l, dv, s, 1.0f, sc, s, v.as<float>() + b * s * dv, dv,
            0.0f, y.as<float>() + b * l * dv, dv);
    };
    // Heads side by side, each thread with its own score tile; one head's
    // GEMMs split across threads when there are fewer heads than threads.
    if (count > 1) {
#pragma omp parallel
      {
        std::vector<float> scores(l * s);
#pragma omp for schedule(static)
        for (int64_t b = 0; b < count; ++b)
          one(b, scores);
      }
    } else {
      std::vector<float> scores(l * s);
      for (int64_t b = 0; b < count; ++b)
        one(b, scores);
    }
    return std::string();
  };
}

KernelFn conv(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  size_t rank = x.shape.size();
  require((rank == 3 || rank == 4) && w.shape.size() == rank &&
              y.shape.size() == rank,
          "only 1-D and 2-D convolutions (NCW / NCHW) are supported");
  // Treat 1-D as 2-D with height 1.
  auto as2d = [&](std::vector<int64_t> v, int64_t one) {
    if (rank == 3)
      v.insert(v.begin() + 2, one);
    return v;
  };
  std::vector<int64_t> xs = as2d(x.shape, 1), ws = as2d(w.shape, 1),
                       ys = as2d(y.shape, 1);
  std::vector<int64_t> strides = args.attrs.getInts("strides", {}),
                       pads = args.attrs.getInts("pads", {}),
                       dil = args.attrs.getInts("dilations", {});
  int64_t group = args.attrs.getInt("group", 1);
  size_t sp = rank - 2;
  if (strides.empty()) strides.assign(sp, 1);
  if (dil.empty()) dil.assign(sp, 1);
  if (pads.empty()) pads.assign(2 * sp, 0);
  require(strides.size() == sp && dil.size() == sp && pads.size() == 2 * sp,
          "strides, pads and dilations must match the spatial rank");
  if (rank == 3) {
    strides.insert(strides.begin(), 1);
    dil.insert(dil.begin(), 1);
    pads = {0, pads[0], 0, pads[1]};
  }
  int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  int64_t oh = ys[2], ow = ys[3];
  require(group > 0 && c == cg * group && m % group == 0 && ys[0] == n &&
              ys[1] == m,
          "channels do not match: x " + shapeString(x.shape) + ", w " +
              shapeString(w.shape) + ", group " + std::to_string(group));
  require(oh == (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / strides[0] + 1 &&
              ow == (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / strides[1] + 1,
          "output " + shapeString(y.shape) + " does not match the window");
  bool hasBias = args.in.size() == 3;
  Tensor bias = hasBias ? args.in[2] : Tensor();
  require(!hasBias || bias.numel == m, "bias must have one value per channel");
  int64_t mg = m / group, kdim = cg * kh * kw, spatial = oh * ow;
  return [=]() {
    std::vector<float> col(kdim * spatial);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t g = 0; g < group; ++g) {
        const float *xb = x.as<float>() + (b * c + g * cg) * h * wd;
        parallelFor(kdim, spatial, [&](int64_t r) {
          int64_t ci = r / (kh * kw), ki = (r / kw) % kh, kj = r % kw;
          float *dst = col.data() + r * spatial;
          for (int64_t i = 0; i < oh; ++i) {
            int64_t ih = i * strides[0] - pads[0] + ki * dil[0];
            for (int64_t j = 0; j < ow; ++j) {
              int64_t iw = j * strides[1] - pads[1] + kj * dil[1];
              dst[i * ow + j] = ih >= 0 && ih < h && iw >= 0 && iw < wd
                                    ? xb[(ci * h + ih) * wd + iw]
                                    : 0.0f;
            }
          }
        });
        float *yb = y.as<float>() + (b * m + g * mg) * spatial;
        if (hasBias)
          for (int64_t o = 0; o < mg; ++o)
            std::fill(yb + o * spatial, yb + (o + 1) * spatial,
                      bias.as<float>()[g * mg + o]);
        sgemm(false, false, mg, spatial, kdim, 1.0f,
              w.as<float>() + g * mg * kdim, kdim, col.data(), spatial,
              hasBias ? 1.0f : 0.0f, yb, spatial);
      }
    return std::string();
  };
}

} // namespace

void registerLinalg(Registry &r) {
  r["matmul"] = matmul;
  r["gemm"] = gemm;
  r["linear"] = linear;
  r["attention"] = attention;
  r["conv"] = conv;
}

} // namespace fsdprt::cpu
