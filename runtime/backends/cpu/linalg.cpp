//===- linalg.cpp - GEMM-based CPU kernels (OpenBLAS) ---------------------===//
//
// matmul, gemm, linear (the bias accumulated by the GEMM itself, the
// activation applied to each block of the output by the thread that
// computed it, while it is still in cache), attention and its gradient
// (tiles of scores by GEMM into a per-thread scratch tile, masked and
// normalised in place, GEMM with the values; the gradient recomputes the
// probabilities from the forward's log-sum-exp), conv (im2col + GEMM) and its
// gradients (GEMM + col2im; im2col + GEMM) where oneDNN has no primitive
// (conv_dnnl.cpp) or is turned off.
//
//===----------------------------------------------------------------------===//

#include "conv.h"
#include "kernels.h"
#include "vmath.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

namespace fsdprt::cpu {

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc,
           const GemmEpilogue &epilogue) {
  auto block = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (m1 <= m0 || n1 <= n0)
      return;
    if (k == 0) {
      // OpenBLAS rejects K = 0 leading dimensions; the product is empty.
      for (int64_t i = m0; i < m1; ++i)
        for (int64_t j = n0; j < n1; ++j)
          c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    } else {
      cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                  transB ? CblasTrans : CblasNoTrans, m1 - m0, n1 - n0, k,
                  alpha, a + (transA ? m0 : m0 * lda), lda,
                  b + (transB ? n0 * ldb : n0), ldb, beta, c + m0 * ldc + n0,
                  ldc);
    }
    if (epilogue)
      epilogue(m0, m1, n0, n1);
  };
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || m * n * k < (1 << 16)) {
    block(0, m, 0, n);
    return;
  }
  // Split the larger of M and N into one block per thread.
  bool byRows = m >= n;
  int64_t extent = byRows ? m : n;
  int64_t size = (extent + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    int64_t lo = t * size, hi = std::min(extent, lo + size);
    if (byRows)
      block(lo, hi, 0, n);
    else
      block(0, m, lo, hi);
  }
}

namespace {

/// Element offsets of each matrix of an operand whose batch dims
/// broadcast to `batch`.
std::vector<int64_t> batchOffsets(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &batch,
                                  int64_t matrixSize, const char *what) {
  std::vector<int64_t> own(shape.begin(), shape.end() - 2);
  std::vector<int64_t> strides = broadcastStrides(own, batch, what);
  std::vector<int64_t> offsets(product(batch));
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] = offsetOf(i, batch, strides) * matrixSize;
  return offsets;
}

/// The float64 products of matmul: one dgemm per batch entry, on the
/// calling thread (float64 is for exactness, not speed).
KernelFn matmulF64(Tensor a, Tensor b, Tensor y, bool transB, int64_t m,
                   int64_t n, int64_t k,
                   std::shared_ptr<const std::vector<int64_t>> aOff,
                   std::shared_ptr<const std::vector<int64_t>> bOff) {
  return [=]() {
    for (size_t i = 0; i < aOff->size(); ++i) {
      double *c = y.as<double>() + i * m * n;
      if (k == 0) {
        std::fill(c, c + m * n, 0.0);
        continue;
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans,
                  transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0,
                  a.as<double>() + (*aOff)[i], k, b.as<double>() + (*bOff)[i],
                  transB ? k : n, 0.0, c, n);
    }
    return std::string();
  };
}

KernelFn matmul(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  bool f64 = a.dtype == FSDPRT_F64;
  if (!f64)
    requireF32(args);
  require(!f64 || (b.dtype == FSDPRT_F64 && y.dtype == FSDPRT_F64),
          "operands and output must all be float32 or all float64");
  bool transB = args.attrs.getInt("trans_b", 0) != 0;
  require(!a.shape.empty() && !b.shape.empty(), "operands must have rank >= 1");
  require(!transB || b.shape.size() >= 2, "trans_b needs b of rank >= 2");
  // Promote 1-D operands as NumPy does.
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back();
  int64_t bk = transB ? bs.back() : bs[bs.size() - 2];
  int64_t n = transB ? bs[bs.size() - 2] : bs.back();
  require(k == bk, "inner dimensions differ: " + shapeString(a.shape) +
                       " and " + shapeString(b.shape) +
                       (transB ? " (b transposed)" : ""));
  std::vector<int64_t> batch =
      broadcastShapes(std::vector<int64_t>(as.begin(), as.end() - 2),
                      std::vector<int64_t>(bs.begin(), bs.end() - 2));
  std::vector<int64_t> expected = batch;
  if (a.shape.size() > 1)
    expected.push_back(m);
  if (b.shape.size() > 1)
    expected.push_back(n);
  require(y.shape == expected, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  auto aOff = std::make_shared<const std::vector<int64_t>>(
      batchOffsets(as, batch, m * k, "a's batch"));
  auto bOff = std::make_shared<const std::vector<int64_t>>(
      batchOffsets(bs, batch, k * n, "b's batch"));
  if (f64)
    return matmulF64(a, b, y, transB, m, n, k, aOff, bOff);
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
    if (gemms > 1 && rows * n * k < (1 << 18))
      parallelFor(gemms, rows * n * k, one);
    else
      for (int64_t i = 0; i < gemms; ++i)
        one(i);
    return std::string();
  };
}

KernelFn gemm(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  bool ta = args.attrs.getInt("trans_a", 0),
       tb = args.attrs.getInt("trans_b", 0);
  float alpha = args.attrs.getFloat("alpha", 1.0);
  float beta = args.attrs.getFloat("beta", 1.0);
  require(a.shape.size() == 2 && b.shape.size() == 2 && y.shape.size() == 2,
          "a, b and the output must be 2-D");
  int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  int64_t n = tb ? b.shape[0] : b.shape[1];
  require((tb ? b.shape[1] : b.shape[0]) == k && y.shape[0] == m &&
              y.shape[1] == n,
          "shapes do not chain: " + shapeString(a.shape) + " x " +
              shapeString(b.shape) + " -> " + shapeString(y.shape));
  GemmEpilogue epilogue;
  if (args.in.size() == 3 && beta != 0) {
    // y += beta * C, C broadcast to [M, N].
    Tensor c = args.in[2];
    std::vector<int64_t> cs = broadcastStrides(c.shape, y.shape, "c");
    epilogue = [c, y, cs, beta, n](int64_t m0, int64_t m1, int64_t n0,
                                   int64_t n1) {
      for (int64_t i = m0; i < m1; ++i)
        for (int64_t j = n0; j < n1; ++j)
          y.as<float>()[i * n + j] +=
              beta * c.as<float>()[i * cs[0] + j * cs[1]];
    };
  }
  return [=]() {
    sgemm(ta, tb, m, n, k, alpha, a.as<float>(), ta ? m : k, b.as<float>(),
          tb ? k : n, 0.0f, y.as<float>(), n, epilogue);
    return std::string();
  };
}

KernelFn linear(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  bool transW = args.attrs.getInt("trans_w", 0) != 0;
  Activation act = parseActivation(args.attrs.getString("activation", "none"));
  require(w.shape.size() == 2, "w must be 2-D, not " + shapeString(w.shape));
  require(!x.shape.empty(), "x must have rank >= 1");
  int64_t k = x.shape.back(), n = transW ? w.shape[0] : w.shape[1];
  std::vector<int64_t> expected(x.shape.begin(), x.shape.end() - 1);
  expected.push_back(n);
  require((transW ? w.shape[1] : w.shape[0]) == k && y.shape == expected,
          "shapes do not chain: x " + shapeString(x.shape) + ", w " +
              shapeString(w.shape) + (transW ? " (transposed)" : "") +
              ", output " + shapeString(y.shape));
  bool hasBias = args.in.size() == 3;
  Tensor bias = hasBias ? args.in[2] : Tensor();
  require(!hasBias || bias.shape == std::vector<int64_t>{n},
          "bias must be [" + std::to_string(n) + "], not " +
              shapeString(bias.shape));
  int64_t rows = product(expected) / std::max<int64_t>(n, 1);
  GemmEpilogue epilogue;
  if (act != Activation::None)
    epilogue = [y, act, n](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      for (int64_t i = m0; i < m1; ++i)
        applyActivation(act, y.as<float>() + i * n + n0, n1 - n0);
    };
  return [=]() {
    if (hasBias)
      parallelFor(rows, n, [&](int64_t r) {
        std::memcpy(y.as<float>() + r * n, bias.as<float>(), n * sizeof(float));
      });
    sgemm(false, transW, rows, n, k, 1.0f, x.as<float>(), k, w.as<float>(),
          transW ? k : n, hasBias ? 1.0f : 0.0f, y.as<float>(), n, epilogue);
    return std::string();
  };
}

/// Scores one thread holds at a time (floats): a tile of query rows by S
/// (attention's forward and its gradient's dq pass) or all L rows by a tile
/// of key columns (the gradient's dk_t and dv pass). Short sequences make
/// one tile per head; long ones tiles of fewer rows (columns), never fewer
/// than kAttentionMinRows.
constexpr int64_t kAttentionTile = 1 << 16;
constexpr int64_t kAttentionMinRows = 16;
/// A causal mask's tiles: this many rows (columns) at most, so that the
/// scores above the diagonal, which the mask excludes, are mostly skipped.
constexpr int64_t kCausalTile = 64;

/// The shapes, attributes and mask that attention and attention_grad share
/// (plan-format.md), checked once when the kernel is prepared.
struct AttentionGeometry {
  Tensor q, kt, v, mask;
  std::vector<int64_t> batch, maskStrides;
  int64_t count, l, d, s, dv;
  float scale, fill;
  enum Mode { None, Add, Fill, Causal } mode;
  /// layout "bshd": q, k, v and their gradients stay [B, rows, H, cols], as
  /// the projections wrote them (the compiler folded the head split's
  /// transposes), and the keys come untransposed. Head b = (batch, head) of
  /// a per-head [rows, cols] matrix then starts at its batch's block plus
  /// head * cols, each row H * cols floats after the last.
  bool headsInRows = false;

  /// The offset of row `i` of head b's [rows, cols] matrix (q, v, y, dy and
  /// their gradients; the keys are [d, s] by default, [s, d] in bshd).
  int64_t rowAt(int64_t b, int64_t i, int64_t rows, int64_t cols) const {
    if (!headsInRows)
      return (b * rows + i) * cols;
    int64_t heads = batch[1];
    return ((b / heads * rows + i) * heads + b % heads) * cols;
  }
  /// The leading dimension (floats from one row to the next) of such a
  /// matrix.
  int64_t ld(int64_t cols) const {
    return headsInRows ? batch[1] * cols : cols;
  }
  /// Key column `j` of head b: k_t's column (bhsd) or k's row (bshd).
  int64_t keyAt(int64_t b, int64_t j) const {
    return headsInRows ? rowAt(b, j, s, d) : rowAt(b, 0, d, s) + j;
  }
  /// The keys' leading dimension: k_t's row (bhsd) or k's row (bshd).
  int64_t keyLd() const { return headsInRows ? ld(d) : s; }
  /// lse's shape, [..., L] in either layout.
  std::vector<int64_t> lseShape() const {
    std::vector<int64_t> shape = batch;
    shape.push_back(l);
    return shape;
  }
  /// The physical shape of a per-head [rows, cols] tensor.
  std::vector<int64_t> shapeOf(int64_t rows, int64_t cols) const {
    if (headsInRows)
      return {batch[0], rows, batch[1], cols};
    std::vector<int64_t> shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return shape;
  }

  /// Scores of row `i` of head `b`, columns [c0, c0 + n), masked in place:
  /// excluded entries become -inf (causal) or fill_value (fill).
  void maskRow(float *row, int64_t b, int64_t i, int64_t c0, int64_t n) const {
    if (mode == Causal) {
      for (int64_t j = std::max<int64_t>(i + 1 - c0, 0); j < n; ++j)
        row[j] = -std::numeric_limits<float>::infinity();
      return;
    }
    if (mode == None)
      return;
    size_t nb = batch.size();
    int64_t at = offsetOf(b, batch, maskStrides) + i * maskStrides[nb] +
                 c0 * maskStrides[nb + 1];
    int64_t step = maskStrides[nb + 1];
    if (mode == Add)
      for (int64_t j = 0; j < n; ++j)
        row[j] += mask.as<float>()[at + j * step];
    else
      for (int64_t j = 0; j < n; ++j)
        if (mask.as<uint8_t>()[at + j * step])
          row[j] = fill;
  }

  /// Zeroes the score gradients of row `i`, columns [c0, c0 + n), that the
  /// mask replaced by a constant: no gradient flows through them (a fill
  /// with a finite value still has a probability there).
  void clearReplaced(float *row, int64_t b, int64_t i, int64_t c0,
                     int64_t n) const {
    if (mode == Causal) {
      for (int64_t j = std::max<int64_t>(i + 1 - c0, 0); j < n; ++j)
        row[j] = 0.0f;
    } else if (mode == Fill) {
      size_t nb = batch.size();
      int64_t at = offsetOf(b, batch, maskStrides) + i * maskStrides[nb] +
                   c0 * maskStrides[nb + 1];
      int64_t step = maskStrides[nb + 1];
      for (int64_t j = 0; j < n; ++j)
        if (mask.as<uint8_t>()[at + j * step])
          row[j] = 0.0f;
    }
  }
};

/// Checks q, k_t, v, the mask (when `mask` is not null) and the attributes.
AttentionGeometry attentionGeometry(const KernelArgs &args, const Tensor &q,
                                    const Tensor &kt, const Tensor &v,
                                    const Tensor *mask) {
  AttentionGeometry g;
  g.q = q, g.kt = kt, g.v = v;
  for (const Tensor &t : {q, kt, v})
    requireDtype(t, FSDPRT_F32, "q, k_t and v");
  size_t rank = q.shape.size();
  std::string layout = args.attrs.getString("layout", "bhsd");
  require(layout == "bhsd" || layout == "bshd",
          "layout must be bhsd or bshd, not " + layout);
  g.headsInRows = layout == "bshd";
  if (g.headsInRows) {
    require(rank == 4 && kt.shape.size() == 4 && v.shape.size() == 4,
            "layout bshd takes q, k and v of rank 4 ([B, L or S, H, D])");
    g.batch = {q.shape[0], q.shape[2]};
    g.l = q.shape[1], g.d = q.shape[3], g.s = kt.shape[1], g.dv = v.shape[3];
  } else {
    require(rank >= 2 && kt.shape.size() == rank && v.shape.size() == rank,
            "q, k_t and v must have one rank >= 2");
    g.batch.assign(q.shape.begin(), q.shape.end() - 2);
    g.l = q.shape[rank - 2], g.d = q.shape[rank - 1];
    g.s = kt.shape[rank - 1], g.dv = v.shape[rank - 1];
  }
  require(kt.shape == g.shapeOf(g.headsInRows ? g.s : g.d,
                                g.headsInRows ? g.d : g.s) &&
              v.shape == g.shapeOf(g.s, g.dv),
          "shapes do not chain (layout " + layout + "): q " +
              shapeString(q.shape) + ", k" + (g.headsInRows ? " " : "_t ") +
              shapeString(kt.shape) + ", v " + shapeString(v.shape));
  g.count = product(g.batch);
  g.scale = args.attrs.getFloat("scale", 1.0);
  g.fill = args.attrs.getFloat("fill_value", 0.0);
  std::string kind = args.attrs.getString("mask_kind", "none");
  require(kind == "none" || kind == "add" || kind == "fill" || kind == "causal",
          "mask_kind must be none, add, fill or causal, not " + kind);
  g.mode = kind == "none"   ? AttentionGeometry::None
           : kind == "add"  ? AttentionGeometry::Add
           : kind == "fill" ? AttentionGeometry::Fill
                            : AttentionGeometry::Causal;
  bool needsMask =
      g.mode == AttentionGeometry::Add || g.mode == AttentionGeometry::Fill;
  require(needsMask == (mask != nullptr),
          "mask_kind " + kind + (mask ? " takes no" : " needs") + " mask");
  if (needsMask) {
    g.mask = *mask;
    requireDtype(g.mask,
                 g.mode == AttentionGeometry::Fill ? FSDPRT_BOOL : FSDPRT_F32,
                 "the mask");
    std::vector<int64_t> scores = g.batch;
    scores.push_back(g.l);
    scores.push_back(g.s);
    g.maskStrides = broadcastStrides(g.mask.shape, scores, "the mask");
  }
  return g;
}

/// Checks that `t` is F32 of `want`'s shape.
void requireShape(const Tensor &t, const std::vector<int64_t> &want,
                  const char *what) {
  requireDtype(t, FSDPRT_F32, what);
  require(t.shape == want, std::string(what) + " " + shapeString(t.shape) +
                               " should be " + shapeString(want));
}

/// Splits `extent` rows into tiles of at most kAttentionTile / `width`
/// rows (at least kAttentionMinRows; with a causal mask at most
/// kCausalTile), balanced: returns {tile, tiles}.
std::pair<int64_t, int64_t> attentionTiles(int64_t extent, int64_t width,
                                           bool causal) {
  int64_t tile =
      std::min(extent, std::max(kAttentionMinRows,
                                kAttentionTile / std::max<int64_t>(width, 1)));
  if (causal)
    tile = std::min(tile, kCausalTile);
  tile = std::max<int64_t>(tile, 1);
  int64_t tiles = (extent + tile - 1) / tile;
  if (tiles)
    tile = (extent + tiles - 1) / tiles;
  return {tile, tiles};
}

/// Runs `one(item, scratch)` for items [0, items), side by side when there
/// are enough of them (each thread its own `perThread` floats of the
/// workspace), otherwise one after the other, each GEMM split across
/// threads. Each item writes its own outputs: the result does not depend
/// on the thread count.
template <typename One>
void forEachTile(int threads, int64_t items, Workspace *workspace,
                 int64_t perThread, One one) {
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      float *scratch =
          workspace->as<float>() + omp_get_thread_num() * perThread;
#pragma omp for schedule(static)
      for (int64_t item = 0; item < items; ++item)
        one(item, scratch);
    }
  } else {
    for (int64_t item = 0; item < items; ++item)
      one(item, workspace->as<float>());
  }
}

/// attention(q, k_t, v, mask?) -> y, lse?: per tile of query rows, the
/// scores by GEMM into the thread's scratch tile, scale, mask and softmax
/// in place, GEMM with the values. The optional lse output keeps each
/// row's log-sum-exp for attention_grad (-inf for a fully masked row, whose
/// y is NaN, as torch's softmax gives).
KernelFn attention(KernelArgs &args) {
  requireArity(args, 3, 4, args.out.size() == 2 ? 2 : 1);
  AttentionGeometry g =
      attentionGeometry(args, args.in[0], args.in[1], args.in[2],
                        args.in.size() == 4 ? &args.in[3] : nullptr);
  Tensor y = args.out[0];
  bool hasLse = args.out.size() == 2;
  Tensor lse = hasLse ? args.out[1] : Tensor();
  requireShape(y, g.shapeOf(g.l, g.dv), "the output");
  if (hasLse)
    requireShape(lse, g.lseShape(), "lse");
  bool causal = g.mode == AttentionGeometry::Causal;
  auto [tile, tiles] = attentionTiles(g.l, g.s, causal);
  int64_t items = g.count * tiles;
  bool sideBySide = items >= args.threads &&
                    items * tile * g.s * (g.d + g.dv) >= kParallelGrain;
  int threads = sideBySide ? args.threads : 1;
  Workspace *workspace = args.workspace;
  workspace->reserve(threads * tile * g.s * sizeof(float));
  return [=]() {
    int64_t l = g.l, d = g.d, s = g.s, dv = g.dv;
    auto one = [&](int64_t item, float *scores) {
      int64_t b = item / tiles, r0 = item % tiles * tile;
      int64_t rows = std::min(tile, l - r0);
      // A causal mask excludes every column past the tile's last row.
      int64_t n = causal ? std::min(s, r0 + rows) : s;
      sgemm(false, g.headsInRows, rows, n, d, g.scale,
            g.q.as<float>() + g.rowAt(b, r0, l, d), g.ld(d),
            g.kt.as<float>() + g.keyAt(b, 0), g.keyLd(), 0.0f, scores, n);
      for (int64_t i = 0; i < rows; ++i) {
        float *row = scores + i * n;
        g.maskRow(row, b, r0 + i, 0, n);
        float max = vmath::max(row, n);
        float sum = vmath::expSum(row, row, n, max);
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j)
          row[j] *= inv;
        if (hasLse)
          lse.as<float>()[b * l + r0 + i] =
              std::isinf(max) && max < 0 ? max : max + std::log(sum);
      }
      sgemm(false, false, rows, dv, n, 1.0f, scores, n,
            g.v.as<float>() + g.rowAt(b, 0, s, dv), g.ld(dv), 0.0f,
            y.as<float>() + g.rowAt(b, r0, l, dv), g.ld(dv));
    };
    forEachTile(threads, items, workspace, tile * s, one);
    return std::string();
  };
}

/// attention_grad(q, k_t, v, mask?, y, lse, dy) -> dq, dk_t, dv. The
/// probabilities are recomputed from lse (P = exp(z - lse)) a tile at a
/// time, never a whole head's [L, S]; with dP = dy v^T and
/// dS = P * (dP - rowsum(dy * y)):
///   pass 1, per tile of query rows:  dq = scale * dS k
///   pass 2, per tile of key columns: dv = P^T dy, dk_t = scale * q^T dS
/// Each output element is written by one tile, so no tile waits for or adds
/// into another's (deterministic, whatever the thread count); the price is
/// computing the scores and dP twice.
KernelFn attentionGrad(KernelArgs &args) {
  requireArity(args, 6, 7, 3);
  bool hasMask = args.in.size() == 7;
  AttentionGeometry g =
      attentionGeometry(args, args.in[0], args.in[1], args.in[2],
                        hasMask ? &args.in[3] : nullptr);
  size_t at = hasMask ? 4 : 3;
  Tensor y = args.in[at], lse = args.in[at + 1], dy = args.in[at + 2];
  Tensor dq = args.out[0], dkt = args.out[1], dvOut = args.out[2];
  requireShape(y, g.shapeOf(g.l, g.dv), "y");
  requireShape(lse, g.lseShape(), "lse");
  requireShape(dy, g.shapeOf(g.l, g.dv), "dy");
  requireShape(dq, g.shapeOf(g.l, g.d), "dq");
  requireShape(dkt, g.kt.shape, g.headsInRows ? "dk" : "dk_t");
  requireShape(dvOut, g.shapeOf(g.s, g.dv), "dv");
  bool causal = g.mode == AttentionGeometry::Causal;
  auto [rowTile, rowTiles] = attentionTiles(g.l, g.s, causal);
  auto [colTile, colTiles] = attentionTiles(g.s, g.l, causal);
  int64_t rowItems = g.count * rowTiles, colItems = g.count * colTiles;
  int64_t work = g.count * g.l * g.s * (g.d + g.dv);
  auto threadsFor = [&](int64_t items) {
    return items >= args.threads && work >= kParallelGrain ? args.threads : 1;
  };
  int rowThreads = threadsFor(rowItems), colThreads = threadsFor(colItems);
  // Scratch: P and dS (dP first) per tile, and each row's rowsum(dy * y).
  int64_t rowScratch = 2 * rowTile * g.s + rowTile;
  int64_t colScratch = 2 * g.l * colTile + g.l;
  Workspace *workspace = args.workspace;
  workspace->reserve(
      std::max(rowThreads * rowScratch, colThreads * colScratch) *
      sizeof(float));
  return [=]() {
    int64_t l = g.l, d = g.d, s = g.s, dv = g.dv;
    int64_t ldq = g.ld(d), ldv = g.ld(dv), ldk = g.keyLd();
    // P and dS of rows [r0, r0 + rows) by columns [c0, c0 + n) of head b.
    auto probabilities = [&](int64_t b, int64_t r0, int64_t rows, int64_t c0,
                             int64_t n, float *p, float *ds, float *delta) {
      sgemm(false, g.headsInRows, rows, n, d, g.scale,
            g.q.as<float>() + g.rowAt(b, r0, l, d), ldq,
            g.kt.as<float>() + g.keyAt(b, c0), ldk, 0.0f, p, n);
      sgemm(false, true, rows, n, dv, 1.0f,
            dy.as<float>() + g.rowAt(b, r0, l, dv), ldv,
            g.v.as<float>() + g.rowAt(b, c0, s, dv), ldv, 0.0f, ds, n);
      for (int64_t i = 0; i < rows; ++i) {
        const float *dyi = dy.as<float>() + g.rowAt(b, r0 + i, l, dv);
        const float *yi = y.as<float>() + g.rowAt(b, r0 + i, l, dv);
        float dot = 0;
        for (int64_t c = 0; c < dv; ++c)
          dot += dyi[c] * yi[c];
        delta[i] = dot;
        float *pi = p + i * n, *dsi = ds + i * n;
        g.maskRow(pi, b, r0 + i, c0, n);
        vmath::expSum(pi, pi, n, lse.as<float>()[b * l + r0 + i]);
        for (int64_t j = 0; j < n; ++j)
          dsi[j] = pi[j] * (dsi[j] - dot);
        g.clearReplaced(dsi, b, r0 + i, c0, n);
      }
    };
    forEachTile(rowThreads, rowItems, workspace, rowScratch,
                [&](int64_t item, float *scratch) {
                  int64_t b = item / rowTiles, r0 = item % rowTiles * rowTile;
                  int64_t rows = std::min(rowTile, l - r0);
                  // Causal: no column past the tile's last row counts.
                  int64_t n = causal ? std::min(s, r0 + rows) : s;
                  float *p = scratch, *ds = p + rowTile * s;
                  probabilities(b, r0, rows, 0, n, p, ds, ds + rowTile * s);
                  sgemm(false, !g.headsInRows, rows, d, n, g.scale, ds, n,
                        g.kt.as<float>() + g.keyAt(b, 0), ldk, 0.0f,
                        dq.as<float>() + g.rowAt(b, r0, l, d), ldq);
                });
    forEachTile(
        colThreads, colItems, workspace, colScratch,
        [&](int64_t item, float *scratch) {
          int64_t b = item / colTiles, c0 = item % colTiles * colTile;
          int64_t n = std::min(colTile, s - c0);
          // Causal: no row before the tile's first column counts.
          int64_t r0 = causal ? std::min(c0, l) : 0, rows = l - r0;
          float *dvTile = dvOut.as<float>() + g.rowAt(b, c0, s, dv);
          float *dkTile = dkt.as<float>() + g.keyAt(b, c0);
          if (rows == 0) { // keys no query sees: no gradient
            for (int64_t j = 0; j < n; ++j)
              std::fill(dvTile + j * ldv, dvTile + j * ldv + dv, 0.0f);
            // dk_t's [d, n] block (bhsd) or dk's [n, d] block (bshd).
            int64_t lines = g.headsInRows ? n : d, len = g.headsInRows ? d : n;
            for (int64_t c = 0; c < lines; ++c)
              std::fill(dkTile + c * ldk, dkTile + c * ldk + len, 0.0f);
            return;
          }
          float *p = scratch, *ds = p + l * n;
          probabilities(b, r0, rows, c0, n, p, ds, ds + l * n);
          const float *q = g.q.as<float>() + g.rowAt(b, r0, l, d);
          sgemm(true, false, n, dv, rows, 1.0f, p, n,
                dy.as<float>() + g.rowAt(b, r0, l, dv), ldv, 0.0f, dvTile, ldv);
          if (g.headsInRows) // dk = scale * dS^T q
            sgemm(true, false, n, d, rows, g.scale, ds, n, q, ldq, 0.0f, dkTile,
                  ldk);
          else // dk_t = scale * q^T dS
            sgemm(true, false, d, n, rows, g.scale, q, ldq, ds, n, 0.0f, dkTile,
                  ldk);
        });
    return std::string();
  };
}

} // namespace

ConvGeometry convGeometry(KernelArgs &args, const Tensor &x, const Tensor &w,
                          const Tensor &y) {
  size_t rank = x.shape.size();
  require((rank == 3 || rank == 4) && w.shape.size() == rank &&
              y.shape.size() == rank,
          "x, w and the output must be NCW or NCHW (1-D or 2-D convolution)");
  size_t sp = rank - 2;
  ConvGeometry g;
  g.strides = args.attrs.getInts("strides", {});
  g.pads = args.attrs.getInts("pads", {});
  g.dil = args.attrs.getInts("dilations", {});
  g.group = args.attrs.getInt("group", 1);
  if (g.strides.empty())
    g.strides.assign(sp, 1);
  if (g.dil.empty())
    g.dil.assign(sp, 1);
  if (g.pads.empty())
    g.pads.assign(2 * sp, 0);
  require(g.strides.size() == sp && g.dil.size() == sp &&
              g.pads.size() == 2 * sp,
          "strides, pads and dilations must match the spatial rank");
  requireAtLeast(g.strides, 1, "strides");
  requireAtLeast(g.dil, 1, "dilations");
  requireAtLeast(g.pads, 0, "pads");
  std::vector<int64_t> xs = x.shape, ws = w.shape, ys = y.shape;
  if (rank == 3) {
    xs.insert(xs.begin() + 2, 1);
    ws.insert(ws.begin() + 2, 1);
    ys.insert(ys.begin() + 2, 1);
    g.strides.insert(g.strides.begin(), 1);
    g.dil.insert(g.dil.begin(), 1);
    g.pads = {0, g.pads[0], 0, g.pads[1]};
  }
  g.n = xs[0], g.c = xs[1], g.h = xs[2], g.wd = xs[3];
  g.m = ws[0], g.cg = ws[1], g.kh = ws[2], g.kw = ws[3];
  g.oh = ys[2], g.ow = ys[3];
  require(g.group >= 1 && g.c == g.cg * g.group && g.m % g.group == 0 &&
              ys[0] == g.n && ys[1] == g.m,
          "channels do not match: x " + shapeString(x.shape) + ", w " +
              shapeString(w.shape) + ", output " + shapeString(y.shape) +
              ", group " + std::to_string(g.group));
  require(g.kh >= 1 && g.kw >= 1, "w's kernel dims must be >= 1");
  require(g.oh == windowOutput(g.h, g.pads[0], g.pads[2], g.kh, g.strides[0],
                               g.dil[0], false) &&
              g.ow == windowOutput(g.wd, g.pads[1], g.pads[3], g.kw,
                                   g.strides[1], g.dil[1], false),
          "output " + shapeString(y.shape) +
              " does not match the window of x " + shapeString(x.shape) +
              " and w " + shapeString(w.shape));
  g.mg = g.m / g.group;
  g.kdim = g.cg * g.kh * g.kw;
  g.spatial = g.oh * g.ow;
  g.direct = g.kh == 1 && g.kw == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
             g.pads[0] == 0 && g.pads[1] == 0 && g.pads[2] == 0 &&
             g.pads[3] == 0;
  return g;
}

namespace {

/// The input row of window row `i`, kernel row `ki` (and columns alike).
inline int64_t inputRow(const ConvGeometry &g, int64_t i, int64_t ki) {
  return i * g.strides[0] - g.pads[0] + ki * g.dil[0];
}
inline int64_t inputCol(const ConvGeometry &g, int64_t j, int64_t kj) {
  return j * g.strides[1] - g.pads[1] + kj * g.dil[1];
}

/// col [kdim, spatial]: one group's input windows, zero where padded.
void im2col(const ConvGeometry &g, const float *xb, float *col) {
  parallelFor(g.kdim, g.spatial, [&](int64_t r) {
    int64_t ci = r / (g.kh * g.kw), ki = r / g.kw % g.kh, kj = r % g.kw;
    float *dst = col + r * g.spatial;
    for (int64_t i = 0; i < g.oh; ++i) {
      int64_t ih = inputRow(g, i, ki);
      bool rowInside = ih >= 0 && ih < g.h;
      for (int64_t j = 0; j < g.ow; ++j) {
        int64_t iw = inputCol(g, j, kj);
        dst[i * g.ow + j] = rowInside && iw >= 0 && iw < g.wd
                                ? xb[(ci * g.h + ih) * g.wd + iw]
                                : 0.0f;
      }
    }
  });
}

/// The adjoint of im2col: sets one group's channels of xb to the sum of the
/// window entries of col that read each element.
void col2im(const ConvGeometry &g, const float *col, float *xb) {
  parallelFor(g.cg, g.kh * g.kw * g.spatial, [&](int64_t ci) {
    float *channel = xb + ci * g.h * g.wd;
    std::fill(channel, channel + g.h * g.wd, 0.0f);
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float *src = col + ((ci * g.kh + ki) * g.kw + kj) * g.spatial;
        for (int64_t i = 0; i < g.oh; ++i) {
          int64_t ih = inputRow(g, i, ki);
          if (ih < 0 || ih >= g.h)
            continue;
          for (int64_t j = 0; j < g.ow; ++j) {
            int64_t iw = inputCol(g, j, kj);
            if (iw >= 0 && iw < g.wd)
              channel[ih * g.wd + iw] += src[i * g.ow + j];
          }
        }
      }
  });
}

KernelFn conv(KernelArgs &args) {
  requireArity(args, 2, 3, 1);
  requireF32(args);
  Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  ConvGeometry g = convGeometry(args, x, w, y);
  bool hasBias = args.in.size() == 3;
  Tensor bias = hasBias ? args.in[2] : Tensor();
  require(!hasBias || bias.shape == std::vector<int64_t>{g.m},
          "bias must be [" + std::to_string(g.m) + "], not " +
              shapeString(bias.shape));
  Workspace *workspace = args.workspace;
  if (KernelFn fn =
          dnnlConv(ConvPass::Forward, g, x, w, y, hasBias ? &bias : nullptr,
                   args.threads, workspace))
    return fn;
  if (!g.direct)
    workspace->reserve(g.kdim * g.spatial * sizeof(float));
  return [=]() {
    float *col = workspace->as<float>();
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t k = 0; k < g.group; ++k) {
        const float *xb = x.as<float>() + (b * g.c + k * g.cg) * g.h * g.wd;
        if (!g.direct)
          im2col(g, xb, col);
        float *yb = y.as<float>() + (b * g.m + k * g.mg) * g.spatial;
        GemmEpilogue addBias;
        if (hasBias)
          addBias = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
            for (int64_t o = m0; o < m1; ++o) {
              float value = bias.as<float>()[k * g.mg + o];
              for (int64_t j = n0; j < n1; ++j)
                yb[o * g.spatial + j] += value;
            }
          };
        sgemm(false, false, g.mg, g.spatial, g.kdim, 1.0f,
              w.as<float>() + k * g.mg * g.kdim, g.kdim, g.direct ? xb : col,
              g.spatial, 0.0f, yb, g.spatial, addBias);
      }
    return std::string();
  };
}

/// conv_grad_input(g, w) -> dx: per image and group, the window gradients
/// w^T g (one GEMM), folded back onto the input by col2im.
KernelFn convGradInput(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  requireF32(args);
  Tensor dy = args.in[0], w = args.in[1], dx = args.out[0];
  ConvGeometry g = convGeometry(args, dx, w, dy);
  Workspace *workspace = args.workspace;
  if (KernelFn fn = dnnlConv(ConvPass::GradInput, g, dx, w, dy, nullptr,
                             args.threads, workspace))
    return fn;
  if (!g.direct)
    workspace->reserve(g.kdim * g.spatial * sizeof(float));
  return [=]() {
    float *col = workspace->as<float>();
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t k = 0; k < g.group; ++k) {
        float *xb = dx.as<float>() + (b * g.c + k * g.cg) * g.h * g.wd;
        const float *gb = dy.as<float>() + (b * g.m + k * g.mg) * g.spatial;
        sgemm(true, false, g.kdim, g.spatial, g.mg, 1.0f,
              w.as<float>() + k * g.mg * g.kdim, g.kdim, gb, g.spatial, 0.0f,
              g.direct ? xb : col, g.spatial);
        if (!g.direct)
          col2im(g, col, xb);
      }
    return std::string();
  };
}

/// conv_grad_weight(x, g) -> dw: per group, the sum over images of
/// g im2col(x)^T (one GEMM each, accumulating).
KernelFn convGradWeight(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  requireF32(args);
  Tensor x = args.in[0], dy = args.in[1], dw = args.out[0];
  ConvGeometry g = convGeometry(args, x, dw, dy);
  Workspace *workspace = args.workspace;
  if (KernelFn fn = dnnlConv(ConvPass::GradWeight, g, x, dw, dy, nullptr,
                             args.threads, workspace))
    return fn;
  if (!g.direct)
    workspace->reserve(g.kdim * g.spatial * sizeof(float));
  return [=]() {
    float *col = workspace->as<float>();
    if (g.n == 0)
      std::fill(dw.as<float>(), dw.as<float>() + dw.numel, 0.0f);
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t k = 0; k < g.group; ++k) {
        const float *xb = x.as<float>() + (b * g.c + k * g.cg) * g.h * g.wd;
        if (!g.direct)
          im2col(g, xb, col);
        const float *gb = dy.as<float>() + (b * g.m + k * g.mg) * g.spatial;
        sgemm(false, true, g.mg, g.kdim, g.spatial, 1.0f, gb, g.spatial,
              g.direct ? xb : col, g.spatial, b == 0 ? 0.0f : 1.0f,
              dw.as<float>() + k * g.mg * g.kdim, g.kdim);
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
  r["attention_grad"] = attentionGrad;
  r["conv"] = conv;
  r["conv_grad_input"] = convGradInput;
  r["conv_grad_weight"] = convGradWeight;
}

} // namespace fsdprt::cpu
