//===- attention.h - Fused attention kernel bodies --------------*- C++ -*-===//
//
// attention and attention_grad (docs/plan-format.md) as tile bodies,
// flash-style: no body ever holds a head's [L, S] scores, only one tile of
// them in its block's shared memory, so memory stays linear in the
// sequence lengths.
//
//  - forward, one tile of query rows per block: for each tile of keys, the
//    masked scores, then each row's running maximum and sum (the online
//    softmax: the sum and the output accumulated so far are rescaled by
//    exp(old max - new max)), then the output rows accumulate P v. At the
//    end y = acc / sum and lse = max + log(sum).
//  - backward, two passes that each recompute P = exp(z - lse) from the
//    forward's lse, with delta_i = rowsum(dy_i * y_i) computed per tile (a
//    Dv-long dot per row, against the Bc * Dv of the tile's dP):
//      per tile of query rows:  dq   = scale * dS k
//      per tile of key columns: dv   = P^T dy, dk_t = scale * (dS^T q)^T
//    where dS = P * (dy v^T - delta), zero where the mask replaced the
//    score. Each output element is summed by one lane in a fixed order: no
//    atomics, the same bits every run.
//
// A tile body's block: `lane()`, `size()`, `sync()` (every lane of the block
// waits for the others, as __syncthreads) and `shared()`, the block's
// `sharedFloats()` floats. The device launcher (device.cuh) runs a block of
// threads on dynamic shared memory, the host launcher (host_launch.h) lanes
// of host threads at a barrier. The bodies keep nothing per lane but
// scalars, whatever the head dims, so they never spill registers.
//
// A fully masked row: its maximum stays -inf and its sum 0, so y = 0 / 0 =
// NaN and lse = -inf, as the CPU backend (and torch's softmax) give.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_ATTENTION_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_ATTENTION_H

#include "hd.h"

namespace fsdprt::cuda {

/// attention's mask_kind attribute.
enum class MaskKind : int { None, Add, Fill, Causal };

/// The shapes and attributes attention and attention_grad share: `batch`
/// heads of q [L, D], k_t [D, S] and v [S, Dv] (contiguous), and how the
/// mask (f32 for Add, bool for Fill) is read at score (b, i, j): batch
/// index b split over the `batchDims` dims of `batchSize`, each with its
/// stride into the mask (0 where the mask broadcasts), then i and j.
/// With `headsInRows` (layout "bshd") q, k, v, y, dy and the gradients stay
/// [B, rows, H, cols] as the head split found them (H = `heads`), the keys
/// untransposed; lse is [B, H, L] in either layout.
struct AttentionShape {
  int64_t batch = 0, l = 0, s = 0, d = 0, dv = 0;
  float scale = 1, fill = 0;
  MaskKind mask = MaskKind::None;
  int batchDims = 0;
  int64_t batchSize[kMaxDims] = {}, maskStride[kMaxDims] = {};
  int64_t maskStrideL = 0, maskStrideS = 0;
  bool headsInRows = false;
  int64_t heads = 1;

  /// The offset of row i of head b's [rows, cols] matrix.
  FSDP_HD int64_t rowAt(int64_t b, int64_t i, int64_t rows,
                        int64_t cols) const {
    if (!headsInRows)
      return (b * rows + i) * cols;
    return ((b / heads * rows + i) * heads + b % heads) * cols;
  }
  /// Floats from one row of such a matrix to the next.
  FSDP_HD int64_t ld(int64_t cols) const {
    return headsInRows ? heads * cols : cols;
  }
  /// The offset of key j's first head-dim entry: k_t's column j or k's
  /// row j.
  FSDP_HD int64_t keyAt(int64_t b, int64_t j) const {
    return headsInRows ? rowAt(b, j, s, d) : rowAt(b, 0, d, s) + j;
  }
  /// Floats from one head-dim entry of a key to the next.
  FSDP_HD int64_t keyDimStride() const { return headsInRows ? 1 : s; }

  /// The mask's offset of head b's score (0, 0).
  FSDP_HD int64_t maskBase(int64_t b) const {
    int64_t at = 0;
    for (int k = batchDims - 1; k >= 0; --k) {
      at += (b % batchSize[k]) * maskStride[k];
      b /= batchSize[k];
    }
    return at;
  }
};

/// The tensors of attention (q, k_t, v, mask; y, lse: lse may be null) and
/// of attention_grad (the same inputs, then y, lse and dy; dq, dk_t, dv).
struct AttentionArgs {
  AttentionShape shape;
  const float *q = nullptr, *kt = nullptr, *v = nullptr;
  const void *mask = nullptr;
  float *y = nullptr, *lse = nullptr;
  const float *dy = nullptr;
  float *dq = nullptr, *dkt = nullptr, *dv = nullptr;

  /// The masked score z of head b's row i and key j (mask base `base`):
  /// scale * q_i . k_j, with the mask added, or replaced by fill_value
  /// (fill) or -inf (causal, j > i).
  FSDP_HD float score(int64_t b, int64_t i, int64_t j, int64_t base) const {
    const AttentionShape &g = shape;
    if (g.mask == MaskKind::Causal && j > i)
      return -INFINITY;
    const float *qi = q + g.rowAt(b, i, g.l, g.d);
    const float *kj = kt + g.keyAt(b, j);
    int64_t step = g.keyDimStride();
    float dot = 0;
    for (int64_t c = 0; c < g.d; ++c)
      dot += qi[c] * kj[c * step];
    float z = g.scale * dot;
    int64_t at = base + i * g.maskStrideL + j * g.maskStrideS;
    if (g.mask == MaskKind::Add)
      z += static_cast<const float *>(mask)[at];
    else if (g.mask == MaskKind::Fill && static_cast<const uint8_t *>(mask)[at])
      z = g.fill;
    return z;
  }

  /// Whether the mask replaced score (i, j) by a constant: no gradient
  /// flows through it (a finite fill still has a probability there).
  FSDP_HD bool replaced(int64_t i, int64_t j, int64_t base) const {
    const AttentionShape &g = shape;
    if (g.mask == MaskKind::Causal)
      return j > i;
    return g.mask == MaskKind::Fill &&
           static_cast<const uint8_t *>(
               mask)[base + i * g.maskStrideL + j * g.maskStrideS];
  }

  /// delta_i = rowsum(dy_i * y_i) of head b's row i.
  FSDP_HD float delta(int64_t b, int64_t i) const {
    const float *dyi = dy + shape.rowAt(b, i, shape.l, shape.dv);
    const float *yi = y + shape.rowAt(b, i, shape.l, shape.dv);
    float sum = 0;
    for (int64_t c = 0; c < shape.dv; ++c)
      sum += dyi[c] * yi[c];
    return sum;
  }

  /// dS of head b's score (i, j), its probability P in `p`.
  FSDP_HD float scoreGrad(int64_t b, int64_t i, int64_t j, int64_t base,
                          float rowLse, float rowDelta, float &p) const {
    const AttentionShape &g = shape;
    p = expf(score(b, i, j, base) - rowLse);
    const float *dyi = dy + g.rowAt(b, i, g.l, g.dv);
    const float *vj = v + g.rowAt(b, j, g.s, g.dv);
    float dp = 0;
    for (int64_t c = 0; c < g.dv; ++c)
      dp += dyi[c] * vj[c];
    return replaced(i, j, base) ? 0.0f : p * (dp - rowDelta);
  }

  /// Causal attention's keys for query rows [r0, r0 + rows): [0, end).
  FSDP_HD int64_t keysEnd(int64_t r0, int64_t rows) const {
    if (shape.mask != MaskKind::Causal)
      return shape.s;
    return r0 + rows < shape.s ? r0 + rows : shape.s;
  }
};

FSDP_HD inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
FSDP_HD inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

/// The forward over tiles of `rows` query rows by `keys` keys: y and lse.
struct AttentionForwardBody {
  AttentionArgs a;
  int64_t rows, keys;

  FSDP_HD int64_t tiles() const {
    return a.shape.batch * ceilDiv(a.shape.l, rows);
  }
  /// The scores and probabilities [rows, keys], the output accumulator
  /// [rows, dv], each row's maximum, sum and rescaling.
  FSDP_HD int64_t sharedFloats() const {
    return rows * (keys + a.shape.dv + 3);
  }

  FSDP_GROUP_BODY
  template <class Block> FSDP_HD void operator()(Block &g, int64_t tile) const {
    const AttentionShape &sh = a.shape;
    int64_t perHead = ceilDiv(sh.l, rows);
    int64_t b = tile / perHead, r0 = tile % perHead * rows;
    int64_t nr = smaller(rows, sh.l - r0), dv = sh.dv;
    int64_t base = sh.maskBase(b);
    float *z = g.shared(), *acc = z + rows * keys;
    float *max = acc + rows * dv, *sum = max + rows, *rescale = sum + rows;
    for (int64_t k = g.lane(); k < nr * dv; k += g.size())
      acc[k] = 0;
    for (int64_t r = g.lane(); r < nr; r += g.size()) {
      max[r] = -INFINITY;
      sum[r] = 0;
    }
    g.sync();
    int64_t end = a.keysEnd(r0, nr);
    for (int64_t c0 = 0; c0 < end; c0 += keys) {
      int64_t n = smaller(keys, end - c0);
      // Consecutive lanes take consecutive keys: coalesced reads of k_t.
      for (int64_t k = g.lane(); k < nr * n; k += g.size())
        z[k / n * keys + k % n] = a.score(b, r0 + k / n, c0 + k % n, base);
      g.sync();
      for (int64_t r = g.lane(); r < nr; r += g.size()) {
        float *zr = z + r * keys, m = max[r];
        for (int64_t j = 0; j < n; ++j)
          m = fmaxf(m, zr[j]);
        // Every score so far -inf: nothing to rescale, no probability yet
        // (exp(-inf - -inf) would be NaN).
        float old = 1, add = 0;
        if (m == -INFINITY) {
          for (int64_t j = 0; j < n; ++j)
            zr[j] = 0;
        } else {
          old = expf(max[r] - m);
          for (int64_t j = 0; j < n; ++j) {
            zr[j] = expf(zr[j] - m);
            add += zr[j];
          }
        }
        sum[r] = sum[r] * old + add;
        max[r] = m;
        rescale[r] = old;
      }
      g.sync();
      int64_t ldv = sh.ld(dv);
      for (int64_t k = g.lane(); k < nr * dv; k += g.size()) {
        int64_t r = k / dv;
        const float *vc = a.v + sh.rowAt(b, c0, sh.s, dv) + k % dv;
        const float *pr = z + r * keys;
        float t = acc[k] * rescale[r];
        for (int64_t j = 0; j < n; ++j)
          t += pr[j] * vc[j * ldv];
        acc[k] = t;
      }
      g.sync();
    }
    float *y = a.y + sh.rowAt(b, r0, sh.l, dv);
    for (int64_t k = g.lane(); k < nr * dv; k += g.size()) // no keys: zeros
      y[k / dv * sh.ld(dv) + k % dv] = sh.s ? acc[k] / sum[k / dv] : 0.0f;
    if (a.lse)
      for (int64_t r = g.lane(); r < nr; r += g.size())
        a.lse[b * sh.l + r0 + r] =
            max[r] == -INFINITY ? -INFINITY : max[r] + logf(sum[r]);
    g.sync(); // the next tile reuses the shared memory
  }
};

/// attention_grad's dq over tiles of `rows` query rows by `keys` keys.
struct AttentionGradQBody {
  AttentionArgs a;
  int64_t rows, keys;

  FSDP_HD int64_t tiles() const {
    return a.shape.batch * ceilDiv(a.shape.l, rows);
  }
  /// dS [rows, keys], the dq accumulator [rows, d], each row's delta and
  /// lse.
  FSDP_HD int64_t sharedFloats() const { return rows * (keys + a.shape.d + 2); }

  FSDP_GROUP_BODY
  template <class Block> FSDP_HD void operator()(Block &g, int64_t tile) const {
    const AttentionShape &sh = a.shape;
    int64_t perHead = ceilDiv(sh.l, rows);
    int64_t b = tile / perHead, r0 = tile % perHead * rows;
    int64_t nr = smaller(rows, sh.l - r0), d = sh.d;
    int64_t base = sh.maskBase(b);
    float *ds = g.shared(), *acc = ds + rows * keys;
    float *delta = acc + rows * d, *lse = delta + rows;
    for (int64_t k = g.lane(); k < nr * d; k += g.size())
      acc[k] = 0;
    for (int64_t r = g.lane(); r < nr; r += g.size()) {
      delta[r] = a.delta(b, r0 + r);
      lse[r] = a.lse[b * sh.l + r0 + r];
    }
    g.sync();
    int64_t end = a.keysEnd(r0, nr);
    for (int64_t c0 = 0; c0 < end; c0 += keys) {
      int64_t n = smaller(keys, end - c0);
      for (int64_t k = g.lane(); k < nr * n; k += g.size()) {
        int64_t r = k / n;
        float p;
        ds[r * keys + k % n] =
            a.scoreGrad(b, r0 + r, c0 + k % n, base, lse[r], delta[r], p);
      }
      g.sync();
      // Key j + 1's entry: the next of k_t's row, or k's next row.
      int64_t next = sh.headsInRows ? sh.ld(d) : 1;
      for (int64_t k = g.lane(); k < nr * d; k += g.size()) {
        const float *kc = a.kt + sh.keyAt(b, c0) + k % d * sh.keyDimStride();
        const float *dsr = ds + k / d * keys;
        float t = acc[k];
        for (int64_t j = 0; j < n; ++j)
          t += dsr[j] * kc[j * next];
        acc[k] = t;
      }
      g.sync();
    }
    float *dq = a.dq + sh.rowAt(b, r0, sh.l, d);
    for (int64_t k = g.lane(); k < nr * d; k += g.size())
      dq[k / d * sh.ld(d) + k % d] = sh.scale * acc[k];
    g.sync();
  }
};

/// attention_grad's dk_t and dv over tiles of `keys` key columns, taking
/// `rows` query rows at a time.
struct AttentionGradKVBody {
  AttentionArgs a;
  int64_t rows, keys;

  FSDP_HD int64_t tiles() const {
    return a.shape.batch * ceilDiv(a.shape.s, keys);
  }
  /// P and dS [rows, keys], the dv and dk accumulators [keys, dv] and
  /// [keys, d], each row's delta and lse.
  FSDP_HD int64_t sharedFloats() const {
    return 2 * rows * keys + keys * (a.shape.d + a.shape.dv) + 2 * rows;
  }

  FSDP_GROUP_BODY
  template <class Block> FSDP_HD void operator()(Block &g, int64_t tile) const {
    const AttentionShape &sh = a.shape;
    int64_t perHead = ceilDiv(sh.s, keys);
    int64_t b = tile / perHead, c0 = tile % perHead * keys;
    int64_t n = smaller(keys, sh.s - c0), d = sh.d, dv = sh.dv;
    int64_t base = sh.maskBase(b);
    float *p = g.shared(), *ds = p + rows * keys;
    float *accV = ds + rows * keys, *accK = accV + keys * dv;
    float *delta = accK + keys * d, *lse = delta + rows;
    for (int64_t k = g.lane(); k < n * dv; k += g.size())
      accV[k] = 0;
    for (int64_t k = g.lane(); k < n * d; k += g.size())
      accK[k] = 0;
    g.sync(); // another lane may write out what this one zeroed
    // Causal: rows above c0 see none of these keys.
    int64_t first = sh.mask == MaskKind::Causal ? smaller(c0, sh.l) : 0;
    for (int64_t r0 = first; r0 < sh.l; r0 += rows) {
      int64_t nr = smaller(rows, sh.l - r0);
      for (int64_t r = g.lane(); r < nr; r += g.size()) {
        delta[r] = a.delta(b, r0 + r);
        lse[r] = a.lse[b * sh.l + r0 + r];
      }
      g.sync();
      for (int64_t k = g.lane(); k < nr * n; k += g.size()) {
        int64_t r = k / n, at = r * keys + k % n;
        ds[at] =
            a.scoreGrad(b, r0 + r, c0 + k % n, base, lse[r], delta[r], p[at]);
      }
      g.sync();
      const float *dy = a.dy + sh.rowAt(b, r0, sh.l, dv);
      int64_t ldy = sh.ld(dv), ldq = sh.ld(d);
      for (int64_t k = g.lane(); k < n * dv; k += g.size()) {
        int64_t j = k / dv, c = k % dv;
        float t = accV[k];
        for (int64_t r = 0; r < nr; ++r)
          t += p[r * keys + j] * dy[r * ldy + c];
        accV[k] = t;
      }
      const float *q = a.q + sh.rowAt(b, r0, sh.l, d);
      for (int64_t k = g.lane(); k < n * d; k += g.size()) {
        int64_t j = k / d, c = k % d;
        float t = accK[k];
        for (int64_t r = 0; r < nr; ++r)
          t += ds[r * keys + j] * q[r * ldq + c];
        accK[k] = t;
      }
      g.sync();
    }
    float *dvOut = a.dv + sh.rowAt(b, c0, sh.s, dv);
    for (int64_t k = g.lane(); k < n * dv; k += g.size())
      dvOut[k / dv * sh.ld(dv) + k % dv] = accV[k];
    // Lanes write consecutive floats: k_t's rows are S apart, so they take
    // consecutive keys of one row; k's keys are rows, so one key's dims.
    for (int64_t k = g.lane(); k < n * d; k += g.size()) {
      int64_t j = sh.headsInRows ? k / d : k % n;
      int64_t c = sh.headsInRows ? k % d : k / n;
      a.dkt[sh.keyAt(b, c0 + j) + c * sh.keyDimStride()] =
          sh.scale * accK[j * d + c];
    }
    g.sync();
  }
};

/// Shared memory a tile body may take: the 48 KiB a block gets without
/// opting in, in floats.
constexpr int64_t kAttentionSharedFloats = 48 * 1024 / 4;

/// The tiles of the three bodies for head dims d and dv: as large as
/// 32 x 32 while their shared memory fits; `fits` is false when not even
/// one row by one key does (head dims in the thousands).
struct AttentionTiles {
  int64_t forwardRows = 32, forwardKeys = 32;
  int64_t gradQRows = 32, gradQKeys = 32;
  int64_t gradKVRows = 32, gradKVKeys = 32;
  bool fits = true;
};

inline AttentionTiles planAttentionTiles(int64_t d, int64_t dv) {
  AttentionTiles t;
  // Halves the larger of rows and keys until `floats` fits.
  auto shrink = [&](int64_t &rows, int64_t &keys, auto floats) {
    while (floats(rows, keys) > kAttentionSharedFloats &&
           (rows > 1 || keys > 1))
      (rows >= keys ? rows : keys) /= 2;
    if (floats(rows, keys) > kAttentionSharedFloats)
      t.fits = false;
  };
  shrink(t.forwardRows, t.forwardKeys,
         [&](int64_t r, int64_t k) { return r * (k + dv + 3); });
  shrink(t.gradQRows, t.gradQKeys,
         [&](int64_t r, int64_t k) { return r * (k + d + 2); });
  shrink(t.gradKVRows, t.gradKVKeys, [&](int64_t r, int64_t k) {
    return 2 * r * k + k * (d + dv) + 2 * r;
  });
  return t;
}

/// The forward (y and, when a.lse is set, lse), then nothing else: the
/// launcher object's `tiled(body)` runs a tile body (device.cuh,
/// host_launch.h). Returns the first launch error.
template <class Launcher>
auto attentionForward(Launcher &launch, const AttentionArgs &a,
                      const AttentionTiles &t) {
  return launch.tiled(AttentionForwardBody{a, t.forwardRows, t.forwardKeys});
}

/// The gradient: dq, then dk_t and dv (two kernels that only read the
/// same inputs).
template <class Launcher>
auto attentionGrad(Launcher &launch, const AttentionArgs &a,
                   const AttentionTiles &t) {
  auto error = launch.tiled(AttentionGradQBody{a, t.gradQRows, t.gradQKeys});
  if (error)
    return error;
  return launch.tiled(AttentionGradKVBody{a, t.gradKVRows, t.gradKVKeys});
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_ATTENTION_H
