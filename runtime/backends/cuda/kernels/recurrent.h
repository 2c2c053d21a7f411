//===- recurrent.h - LSTM, GRU and RNN steps' pointwise bodies --*- C++ -*-===//
//
// lstm, gru, rnn and their gradients run as the CPU backend runs them
// (runtime/backends/cpu/recurrent.cpp): the input projection of every
// time step as one GEMM, then per step one GEMM of the previous hidden
// state by R^T (the backend's Gemm: cuBLASLt on a GPU) and one kernel for
// the gates; the gradient recomputes the forward, keeping each step's
// states and gates in the workspace, then runs back through time with one
// gate kernel and the GEMMs by R per step. A GRU without
// linear_before_reset needs r before h's candidate: its step is a reset
// gate kernel, a GEMM of r * h, then the gate kernel (and two kernels back).
//
// Every pointwise piece is one RecurrentBody, an elementwise body (hd.h)
// whose `step` says which piece it runs; each computes its elements with
// the CPU's expressions, in the CPU's order of additions.
//
// Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h; B is W's biases
// then R's. Layout 0 is [seq, batch, ...], layout 1 [batch, seq, ...].
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_RECURRENT_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_RECURRENT_H

#include "hd.h"

namespace fsdprt::cuda {

enum class RecurrentCell : int32_t { Lstm, Gru, Rnn };

/// A recurrence's sizes and attributes, as the CPU's checks give them.
struct RecurrentShape {
  RecurrentCell cell;
  int64_t seq, batch, input, hidden, dirs, gates;
  bool batchFirst, reverse, linearBeforeReset;

  FSDP_HD int64_t gh() const { return gates * hidden; }
  /// The row of x (and of the input projection) at time t, batch entry n.
  FSDP_HD int64_t row(int64_t t, int64_t n) const {
    return batchFirst ? n * seq + t : t * batch + n;
  }
  /// y's offset at time t, direction d, batch entry n.
  FSDP_HD int64_t yAt(int64_t t, int64_t d, int64_t n) const {
    return (batchFirst ? (n * seq + t) * dirs + d
                       : (t * dirs + d) * batch + n) *
           hidden;
  }
  /// y_h's (and y_c's, the initial states') offset.
  FSDP_HD int64_t stateAt(int64_t d, int64_t n) const {
    return (batchFirst ? n * dirs + d : d * batch + n) * hidden;
  }
  /// The time index of step s in direction d.
  FSDP_HD int64_t timeOf(int64_t s, int64_t d) const {
    return (reverse || d == 1) ? seq - 1 - s : s;
  }
  /// A GRU whose reset gate multiplies h before R (linear_before_reset 0).
  FSDP_HD bool resetFirst() const {
    return cell == RecurrentCell::Gru && !linearBeforeReset;
  }
};

/// Which piece a RecurrentBody runs, and over how many elements.
enum class RecurrentStep : int32_t {
  Bias,       // seq * batch * gh: proj += W's and R's biases
  Start,      // batch * hidden: h, c = initial_h, initial_c (or 0)
  ResetGate,  // batch * hidden (GRU): z, r activated in q; m = r * h
  Gates,      // batch * hidden: the step's h, c (hOut, cOut), y, act, qh
  Finish,     // batch * hidden: y_h, y_c = h, c
  GradStart,  // batch * hidden: dh, dc = dy_h, dy_c (or 0)
  GradGates,  // batch * hidden: the step's dproj, dq, dprev; dc back a step
  GradReset,  // batch * hidden (GRU, resetFirst): r's gradient through r * h
  GradBias,   // gh: dwb, drb += the step's dproj, dq over the batch
  GradFinish, // batch * hidden: d initial_h, d initial_c = dh, dc
  Zero,       // count: h = 0
};

inline FSDP_HD float recurrentSigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// One piece of direction d's step at time t (RecurrentStep says which
/// fields it reads and writes; the others may be null). Forward: proj is
/// the input projection [rows, gh], q the step's products h R^T [batch,
/// gh], h and c the states before the step, hOut and cOut after (the same
/// buffers in a plain forward, the next saved slot in a gradient's), act
/// the activated gates [batch, gh] and qh GRU's linear-before-reset
/// product [batch, hidden] when saved. Backward: proj and q are their
/// gradients, dh and dc the states' gradients after the step (dc becomes
/// the one before), dprev the previous h's, h and c the saved states
/// before the step, hOut and cOut after it, m GRU's r * h and dm its
/// gradient.
struct RecurrentBody {
  RecurrentStep step;
  RecurrentShape rc;
  int64_t d = 0, t = 0;
  float *proj = nullptr, *q = nullptr, *h = nullptr, *c = nullptr,
        *hOut = nullptr, *cOut = nullptr, *act = nullptr, *qh = nullptr,
        *m = nullptr, *dm = nullptr, *dh = nullptr, *dc = nullptr,
        *dprev = nullptr;
  /// Biases (W's, R's) or their gradients (dwb, drb), this direction's.
  float *wb = nullptr, *rb = nullptr;
  /// y, y_h, y_c, initial_h, initial_c, or their gradients: whole tensors.
  float *y = nullptr, *yh = nullptr, *yc = nullptr, *h0 = nullptr,
        *c0 = nullptr;

  FSDP_HD void operator()(int64_t i) const {
    const int64_t H = rc.hidden, GH = rc.gh();
    switch (step) {
    case RecurrentStep::Bias: {
      int64_t j = i % GH;
      // linear_before_reset keeps R's bias of h inside the reset.
      bool inside =
          rc.cell == RecurrentCell::Gru && rc.linearBeforeReset && j >= 2 * H;
      proj[i] += wb[j] + (inside ? 0.0f : rb[j]);
      return;
    }
    case RecurrentStep::Start:
    case RecurrentStep::Finish:
    case RecurrentStep::GradStart:
    case RecurrentStep::GradFinish:
      states(i / H, i % H);
      return;
    case RecurrentStep::ResetGate: {
      int64_t n = i / H, j = i % H;
      const float *p = proj + rc.row(t, n) * GH;
      float *qn = q + n * GH;
      qn[j] = recurrentSigmoid(p[j] + qn[j]);
      qn[H + j] = recurrentSigmoid(p[H + j] + qn[H + j]);
      m[i] = qn[H + j] * h[i];
      return;
    }
    case RecurrentStep::Gates:
      gates(i / H, i % H);
      return;
    case RecurrentStep::GradGates:
      gradGates(i / H, i % H);
      return;
    case RecurrentStep::GradReset: {
      int64_t n = i / H, j = i % H;
      float hp = h[i], rr = act[n * GH + H + j];
      float da = dm[i] * hp * rr * (1 - rr);
      proj[rc.row(t, n) * GH + H + j] = da;
      q[n * GH + H + j] = da;
      dprev[i] += dm[i] * rr;
      m[i] = rr * hp;
      return;
    }
    case RecurrentStep::GradBias:
      // The CPU's order: each batch entry added in turn, step after step.
      for (int64_t n = 0; n < rc.batch; ++n) {
        wb[i] += proj[rc.row(t, n) * GH + i];
        rb[i] += q[n * GH + i];
      }
      return;
    case RecurrentStep::Zero:
      h[i] = 0.0f;
      return;
    }
  }

private:
  /// Start, Finish, GradStart, GradFinish: between the whole tensors' state
  /// slots and the direction's [batch, hidden] buffers.
  FSDP_HD void states(int64_t n, int64_t j) const {
    int64_t at = rc.stateAt(d, n) + j, i = n * rc.hidden + j;
    switch (step) {
    case RecurrentStep::Start:
      h[i] = h0 ? h0[at] : 0.0f;
      c[i] = c0 ? c0[at] : 0.0f;
      return;
    case RecurrentStep::Finish:
      if (yh)
        yh[at] = h[i];
      if (yc)
        yc[at] = c[i];
      return;
    case RecurrentStep::GradStart:
      dh[i] = yh[at];
      dc[i] = yc ? yc[at] : 0.0f;
      return;
    default: // GradFinish
      h0[at] = dh[i];
      if (c0)
        c0[at] = dc[i];
      return;
    }
  }

  FSDP_HD void gates(int64_t n, int64_t j) const {
    const int64_t H = rc.hidden, GH = rc.gh(), i = n * H + j;
    const float *p = proj + rc.row(t, n) * GH, *qn = q + n * GH;
    float *a = act ? act + n * GH : nullptr;
    float hv = h[i], cv = c[i];
    if (rc.cell == RecurrentCell::Lstm) {
      float ig = recurrentSigmoid(p[j] + qn[j]),
            o = recurrentSigmoid(p[H + j] + qn[H + j]),
            f = recurrentSigmoid(p[2 * H + j] + qn[2 * H + j]),
            g = tanhf(p[3 * H + j] + qn[3 * H + j]);
      cv = f * cv + ig * g;
      hv = o * tanhf(cv);
      if (a)
        a[j] = ig, a[H + j] = o, a[2 * H + j] = f, a[3 * H + j] = g;
    } else if (rc.cell == RecurrentCell::Gru) {
      float z = qn[j], rr = qn[H + j], recurrent = qn[2 * H + j];
      if (rc.linearBeforeReset) {
        recurrent += rb ? rb[2 * H + j] : 0.0f;
        if (qh)
          qh[i] = recurrent;
        recurrent *= rr;
      }
      float g = tanhf(p[2 * H + j] + recurrent);
      hv = (1 - z) * g + z * hv;
      if (a)
        a[j] = z, a[H + j] = rr, a[2 * H + j] = g;
    } else {
      hv = tanhf(p[j] + qn[j]);
    }
    hOut[i] = hv;
    cOut[i] = cv;
    if (y)
      y[rc.yAt(t, d, n) + j] = hv;
  }

  FSDP_HD void gradGates(int64_t n, int64_t j) const {
    const int64_t H = rc.hidden, GH = rc.gh(), i = n * H + j;
    float dhj = dh[i] + y[rc.yAt(t, d, n) + j];
    const float *a = act + n * GH;
    float *dp = proj + rc.row(t, n) * GH, *dq = q + n * GH;
    if (rc.cell == RecurrentCell::Lstm) {
      float ig = a[j], o = a[H + j], f = a[2 * H + j], g = a[3 * H + j];
      float tc = tanhf(cOut[i]);
      float dcj = dc[i] + dhj * o * (1 - tc * tc);
      dp[j] = dcj * g * ig * (1 - ig);
      dp[H + j] = dhj * tc * o * (1 - o);
      dp[2 * H + j] = dcj * c[i] * f * (1 - f);
      dp[3 * H + j] = dcj * ig * (1 - g * g);
      for (int k = 0; k < 4; ++k)
        dq[k * H + j] = dp[k * H + j];
      dc[i] = dcj * f;
      dprev[i] = 0.0f;
    } else if (rc.cell == RecurrentCell::Gru) {
      float z = a[j], rr = a[H + j], g = a[2 * H + j];
      float dg = dhj * (1 - z) * (1 - g * g);
      dp[j] = dhj * (h[i] - g) * z * (1 - z);
      dp[2 * H + j] = dg;
      dq[j] = dp[j];
      dprev[i] = dhj * z;
      if (rc.linearBeforeReset) {
        dp[H + j] = dg * qh[i] * rr * (1 - rr);
        dq[H + j] = dp[H + j];
        dq[2 * H + j] = dg * rr;
      } else {
        dq[2 * H + j] = dg; // r's part: GradReset, after the GEMM by R_h
      }
    } else {
      float hNow = hOut[i];
      dp[j] = dhj * (1 - hNow * hNow);
      dq[j] = dp[j];
      dprev[i] = 0.0f;
    }
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_RECURRENT_H
