//===- recurrent.cpp - LSTM, GRU and RNN over whole sequences (CPU) -------===//
//
// lstm, gru and rnn run ONNX's recurrences over every time step and
// direction in one kernel: the input projection of all steps is one GEMM
// (X W^T), each step one GEMM of the previous hidden state by R^T, then the
// gates elementwise. Their gradients (lstm_grad, gru_grad, rnn_grad)
// recompute that forward, keeping each step's gates and states in the
// workspace, then run back through time: per step the gates' gradients and
// one GEMM by R for the previous state's; dW and dX are two GEMMs over all
// steps at the end, dR one accumulating GEMM per step.
//
// Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h; B is W's biases
// then R's. Layout 0 is [seq, batch, ...], layout 1 [batch, seq, ...].
//
//===----------------------------------------------------------------------===//

#include "kernels.h"

#include <cstring>

namespace fsdprt::cpu {
namespace {

enum class Cell { Lstm, Gru, Rnn };

/// A recurrent kernel's shapes and operands, checked when it is prepared.
struct Recurrence {
  Cell cell;
  int64_t seq, batch, input, hidden, dirs, gates;
  bool batchFirst, reverse, linearBeforeReset;
  Tensor x, w, r, b, h0, c0;
  bool hasB, hasH0, hasC0;

  int64_t gh() const { return gates * hidden; }
  /// The row of X (and of the input projection) at time t, batch entry n.
  int64_t row(int64_t t, int64_t n) const {
    return batchFirst ? n * seq + t : t * batch + n;
  }
  /// Y's offset at time t, direction d, batch entry n.
  int64_t yAt(int64_t t, int64_t d, int64_t n) const {
    return (batchFirst ? (n * seq + t) * dirs + d
                       : (t * dirs + d) * batch + n) *
           hidden;
  }
  /// Y_h's (and Y_c's, initial_h's, initial_c's) offset.
  int64_t stateAt(int64_t d, int64_t n) const {
    return (batchFirst ? n * dirs + d : d * batch + n) * hidden;
  }
  /// The time index of step s in direction d.
  int64_t timeOf(int64_t s, int64_t d) const {
    return (reverse || d == 1) ? seq - 1 - s : s;
  }
  std::vector<int64_t> yShape() const {
    return batchFirst ? std::vector<int64_t>{batch, seq, dirs, hidden}
                      : std::vector<int64_t>{seq, dirs, batch, hidden};
  }
  std::vector<int64_t> stateShape() const {
    return batchFirst ? std::vector<int64_t>{batch, dirs, hidden}
                      : std::vector<int64_t>{dirs, batch, hidden};
  }
  /// Floats a forward over one direction needs: the projection, h, c, the
  /// recurrent product and GRU's r * h.
  int64_t forwardScratch() const {
    return seq * batch * gh() + batch * (gh() + 3 * hidden);
  }
  /// Floats the saved steps of one direction take (hidden and cell states
  /// before each step and after the last, activated gates, GRU's
  /// linear-before-reset product).
  int64_t savedFloats() const {
    return 2 * (seq + 1) * batch * hidden + seq * batch * gh() +
           seq * batch * hidden;
  }
};

/// Where the forward keeps one direction's steps for the gradient.
struct Saved {
  float *h, *c, *act, *qh;
};

/// Reads x, w, r and the optional b, initial_h, initial_c (the `bias`,
/// `initial_h`, `initial_c` attributes say which follow) and checks them.
Recurrence parseRecurrence(const KernelArgs &args, Cell cell, size_t &next) {
  Recurrence rc;
  rc.cell = cell;
  rc.gates = cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1;
  rc.hidden = args.attrs.getInt("hidden_size", 0);
  require(rc.hidden > 0, "hidden_size must be positive");
  std::string direction = args.attrs.getString("direction", "forward");
  require(direction == "forward" || direction == "reverse" ||
              direction == "bidirectional",
          "direction must be forward, reverse or bidirectional, not '" +
              direction + "'");
  rc.dirs = direction == "bidirectional" ? 2 : 1;
  rc.reverse = direction == "reverse";
  int64_t layout = args.attrs.getInt("layout", 0);
  require(layout == 0 || layout == 1, "layout must be 0 or 1");
  rc.batchFirst = layout == 1;
  rc.linearBeforeReset = args.attrs.getInt("linear_before_reset", 0) != 0;
  rc.hasB = args.attrs.getInt("bias", 0) != 0;
  rc.hasH0 = args.attrs.getInt("initial_h", 0) != 0;
  rc.hasC0 = cell == Cell::Lstm && args.attrs.getInt("initial_c", 0) != 0;
  size_t inputs = 3 + rc.hasB + rc.hasH0 + rc.hasC0;
  require(args.in.size() >= inputs,
          "takes x, w, r and the inputs its bias/initial_h/initial_c "
          "attributes announce (" +
              std::to_string(inputs) + "), given " +
              std::to_string(args.in.size()));
  rc.x = args.in[0];
  rc.w = args.in[1];
  rc.r = args.in[2];
  next = 3;
  if (rc.hasB)
    rc.b = args.in[next++];
  if (rc.hasH0)
    rc.h0 = args.in[next++];
  if (rc.hasC0)
    rc.c0 = args.in[next++];
  require(rc.x.shape.size() == 3,
          "x must be rank 3, not " + shapeString(rc.x.shape));
  rc.seq = rc.x.shape[rc.batchFirst ? 1 : 0];
  rc.batch = rc.x.shape[rc.batchFirst ? 0 : 1];
  rc.input = rc.x.shape[2];
  auto expect = [](const Tensor &t, const std::vector<int64_t> &shape,
                   const char *what) {
    require(t.shape == shape, std::string(what) + " " + shapeString(t.shape) +
                                  " should be " + shapeString(shape));
  };
  expect(rc.w, {rc.dirs, rc.gh(), rc.input}, "w");
  expect(rc.r, {rc.dirs, rc.gh(), rc.hidden}, "r");
  if (rc.hasB)
    expect(rc.b, {rc.dirs, 2 * rc.gh()}, "b");
  if (rc.hasH0)
    expect(rc.h0, rc.stateShape(), "initial_h");
  if (rc.hasC0)
    expect(rc.c0, rc.stateShape(), "initial_c");
  return rc;
}

/// Runs direction d forward, writing Y, Y_h, Y_c when given and the steps
/// into `saved` when given.
void forwardDirection(const Recurrence &rc, int64_t d, float *scratch, float *y,
                      float *yh, float *yc, const Saved *saved) {
  const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch;
  const float *x = rc.x.as<float>();
  const float *w = rc.w.as<float>() + d * GH * rc.input;
  const float *r = rc.r.as<float>() + d * GH * H;
  const float *wb = rc.hasB ? rc.b.as<float>() + d * 2 * GH : nullptr;
  const float *rb = wb ? wb + GH : nullptr;
  float *proj = scratch, *h = proj + rc.seq * N * GH, *c = h + N * H,
        *q = c + N * H, *m = q + N * GH;

  // The input projection of every step, with the biases that add to it.
  sgemm(false, true, rc.seq * N, GH, rc.input, 1.0f, x, rc.input, w, rc.input,
        0.0f, proj, GH);
  if (wb)
    parallelFor(rc.seq * N, GH, [&](int64_t i) {
      float *p = proj + i * GH;
      for (int64_t j = 0; j < GH; ++j) {
        // linear_before_reset keeps R's bias of h inside the reset.
        bool inside =
            rc.cell == Cell::Gru && rc.linearBeforeReset && j >= 2 * H;
        p[j] += wb[j] + (inside ? 0.0f : rb[j]);
      }
    });
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t j = 0; j < H; ++j) {
      h[n * H + j] = rc.hasH0 ? rc.h0.as<float>()[rc.stateAt(d, n) + j] : 0.0f;
      c[n * H + j] = rc.hasC0 ? rc.c0.as<float>()[rc.stateAt(d, n) + j] : 0.0f;
    }
  }

  for (int64_t s = 0; s < rc.seq; ++s) {
    int64_t t = rc.timeOf(s, d);
    if (saved) {
      std::memcpy(saved->h + s * N * H, h, N * H * sizeof(float));
      std::memcpy(saved->c + s * N * H, c, N * H * sizeof(float));
    }
    bool resetFirst = rc.cell == Cell::Gru && !rc.linearBeforeReset;
    // h R^T (for GRU without linear_before_reset, only z's and r's part).
    sgemm(false, true, N, resetFirst ? 2 * H : GH, H, 1.0f, h, H, r, H, 0.0f, q,
          GH);
    float *act = saved ? saved->act + s * N * GH : nullptr;
    float *qh = saved ? saved->qh + s * N * H : nullptr;
    if (rc.cell == Cell::Gru) {
      // z and r first: h's candidate needs r.
      for (int64_t n = 0; n < N; ++n) {
        const float *p = proj + rc.row(t, n) * GH;
        for (int64_t j = 0; j < 2 * H; ++j)
          q[n * GH + j] = sigmoid(p[j] + q[n * GH + j]);
        for (int64_t j = 0; j < H; ++j)
          m[n * H + j] = q[n * GH + H + j] * h[n * H + j];
      }
      if (resetFirst)
        sgemm(false, true, N, H, H, 1.0f, m, H, r + 2 * H * H, H, 0.0f,
              q + 2 * H, GH);
    }
    for (int64_t n = 0; n < N; ++n) {
      const float *p = proj + rc.row(t, n) * GH;
      float *qn = q + n * GH, *hn = h + n * H, *cn = c + n * H;
      for (int64_t j = 0; j < H; ++j) {
        if (rc.cell == Cell::Lstm) {
          float i = sigmoid(p[j] + qn[j]), o = sigmoid(p[H + j] + qn[H + j]),
                f = sigmoid(p[2 * H + j] + qn[2 * H + j]),
                g = std::tanh(p[3 * H + j] + qn[3 * H + j]);
          cn[j] = f * cn[j] + i * g;
          hn[j] = o * std::tanh(cn[j]);
          if (act) {
            float *a = act + n * GH;
            a[j] = i, a[H + j] = o, a[2 * H + j] = f, a[3 * H + j] = g;
          }
        } else if (rc.cell == Cell::Gru) {
          float z = qn[j], rr = qn[H + j];
          float recurrent = qn[2 * H + j];
          if (rc.linearBeforeReset) {
            recurrent += rb ? rb[2 * H + j] : 0.0f;
            if (qh)
              qh[n * H + j] = recurrent;
            recurrent *= rr;
          }
          float g = std::tanh(p[2 * H + j] + recurrent);
          hn[j] = (1 - z) * g + z * hn[j];
          if (act) {
            float *a = act + n * GH;
            a[j] = z, a[H + j] = rr, a[2 * H + j] = g;
          }
        } else {
          hn[j] = std::tanh(p[j] + qn[j]);
        }
      }
      if (y)
        std::memcpy(y + rc.yAt(t, d, n), hn, H * sizeof(float));
    }
  }
  if (saved) {
    std::memcpy(saved->h + rc.seq * N * H, h, N * H * sizeof(float));
    std::memcpy(saved->c + rc.seq * N * H, c, N * H * sizeof(float));
  }
  for (int64_t n = 0; n < N; ++n) {
    if (yh)
      std::memcpy(yh + rc.stateAt(d, n), h + n * H, H * sizeof(float));
    if (yc)
      std::memcpy(yc + rc.stateAt(d, n), c + n * H, H * sizeof(float));
  }
}

KernelFn recurrentForward(KernelArgs &args, Cell cell) {
  size_t next = 0;
  Recurrence rc = parseRecurrence(args, cell, next);
  require(args.in.size() == next, "has more inputs than its attributes say");
  size_t outs = cell == Cell::Lstm ? 3 : 2;
  require(args.out.size() == outs,
          cell == Cell::Lstm ? "gives y, y_h and y_c" : "gives y and y_h");
  requireF32(args);
  require(args.out[0].shape == rc.yShape(),
          "y " + shapeString(args.out[0].shape) + " should be " +
              shapeString(rc.yShape()));
  for (size_t i = 1; i < outs; ++i)
    require(args.out[i].shape == rc.stateShape(),
            "y_h and y_c should be " + shapeString(rc.stateShape()));
  Workspace *workspace = args.workspace;
  workspace->reserve(rc.forwardScratch() * sizeof(float));
  std::vector<Tensor> out = args.out;
  return [=]() {
    for (int64_t d = 0; d < rc.dirs; ++d)
      forwardDirection(rc, d, workspace->as<float>(), out[0].as<float>(),
                       out[1].as<float>(),
                       out.size() == 3 ? out[2].as<float>() : nullptr, nullptr);
    return std::string();
  };
}

/// Back through time for direction d, given its saved steps: adds dX,
/// writes dW, dR, dB and the initial states' gradients of direction d.
struct Gradients {
  float *dx, *dw, *dr, *db, *dh0, *dc0;
  const float *dy, *dyh, *dyc;
};

void backwardDirection(const Recurrence &rc, int64_t d, const Saved &saved,
                       float *scratch, const Gradients &g) {
  const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch;
  const float *w = rc.w.as<float>() + d * GH * rc.input;
  const float *r = rc.r.as<float>() + d * GH * H;
  float *dw = g.dw + d * GH * rc.input, *dr = g.dr + d * GH * H,
        *dwb = g.db + d * 2 * GH, *drb = dwb + GH;
  float *dproj = scratch, *dq = dproj + rc.seq * N * GH, *dh = dq + N * GH,
        *dc = dh + N * H, *dprev = dc + N * H, *dm = dprev + N * H,
        *m = dm + N * H;
  std::fill(dr, dr + GH * H, 0.0f);
  std::fill(dwb, dwb + 2 * GH, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < H; ++j) {
      dh[n * H + j] = g.dyh[rc.stateAt(d, n) + j];
      dc[n * H + j] = g.dyc ? g.dyc[rc.stateAt(d, n) + j] : 0.0f;
    }
  bool resetFirst = rc.cell == Cell::Gru && !rc.linearBeforeReset;

  for (int64_t s = rc.seq - 1; s >= 0; --s) {
    int64_t t = rc.timeOf(s, d);
    const float *hPrev = saved.h + s * N * H;
    const float *act = saved.act + s * N * GH;
    for (int64_t n = 0; n < N; ++n) {
      const float *dyn = g.dy + rc.yAt(t, d, n);
      float *dhn = dh + n * H, *dcn = dc + n * H,
            *dpn = dproj + rc.row(t, n) * GH, *dqn = dq + n * GH,
            *dprevn = dprev + n * H;
      const float *a = act + n * GH, *hp = hPrev + n * H;
      for (int64_t j = 0; j < H; ++j) {
        float dhj = dhn[j] + dyn[j];
        if (rc.cell == Cell::Lstm) {
          float i = a[j], o = a[H + j], f = a[2 * H + j], gg = a[3 * H + j];
          float cNow = saved.c[(s + 1) * N * H + n * H + j];
          float cPrev = saved.c[s * N * H + n * H + j];
          float tc = std::tanh(cNow);
          float dcj = dcn[j] + dhj * o * (1 - tc * tc);
          dpn[j] = dcj * gg * i * (1 - i);
          dpn[H + j] = dhj * tc * o * (1 - o);
          dpn[2 * H + j] = dcj * cPrev * f * (1 - f);
          dpn[3 * H + j] = dcj * i * (1 - gg * gg);
          dcn[j] = dcj * f;
          dprevn[j] = 0.0f;
        } else if (rc.cell == Cell::Gru) {
          float z = a[j], rr = a[H + j], gg = a[2 * H + j];
          float dg = dhj * (1 - z) * (1 - gg * gg);
          dpn[j] = dhj * (hp[j] - gg) * z * (1 - z);
          dpn[2 * H + j] = dg;
          dprevn[j] = dhj * z;
          if (rc.linearBeforeReset) {
            float qh = saved.qh[s * N * H + n * H + j];
            dpn[H + j] = dg * qh * rr * (1 - rr);
            dqn[2 * H + j] = dg * rr;
          } else {
            dqn[2 * H + j] = dg;
          }
        } else {
          float hNow = saved.h[(s + 1) * N * H + n * H + j];
          dpn[j] = dhj * (1 - hNow * hNow);
          dprevn[j] = 0.0f;
        }
      }
      if (rc.cell != Cell::Gru)
        std::memcpy(dqn, dpn, GH * sizeof(float));
      else
        for (int64_t j = 0; j < 2 * H; ++j)
          dqn[j] = dpn[j];
    }
    if (resetFirst) {
      // d(r * h) through h's candidate: r's gradient and a part of h's.
      sgemm(false, false, N, H, H, 1.0f, dq + 2 * H, GH, r + 2 * H * H, H, 0.0f,
            dm, H);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < H; ++j) {
          float rr = act[n * GH + H + j];
          float da = dm[n * H + j] * hPrev[n * H + j] * rr * (1 - rr);
          dproj[rc.row(t, n) * GH + H + j] = da;
          dq[n * GH + H + j] = da;
          dprev[n * H + j] += dm[n * H + j] * rr;
          m[n * H + j] = rr * hPrev[n * H + j];
        }
      sgemm(true, false, 2 * H, H, N, 1.0f, dq, GH, hPrev, H, 1.0f, dr, H);
      sgemm(true, false, H, H, N, 1.0f, dq + 2 * H, GH, m, H, 1.0f,
            dr + 2 * H * H, H);
      sgemm(false, false, N, H, 2 * H, 1.0f, dq, GH, r, H, 1.0f, dprev, H);
    } else {
      if (rc.cell == Cell::Gru)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < H; ++j)
            dq[n * GH + H + j] = dproj[rc.row(t, n) * GH + H + j];
      sgemm(true, false, GH, H, N, 1.0f, dq, GH, hPrev, H, 1.0f, dr, H);
      sgemm(false, false, N, H, GH, 1.0f, dq, GH, r, H, 1.0f, dprev, H);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < GH; ++j) {
        dwb[j] += dproj[rc.row(t, n) * GH + j];
        drb[j] += dq[n * GH + j];
      }
    std::swap(dh, dprev);
  }
  // dX += dP W, dW = dP^T X over every step at once.
  sgemm(false, false, rc.seq * N, rc.input, GH, 1.0f, dproj, GH, w, rc.input,
        d == 0 ? 0.0f : 1.0f, g.dx, rc.input);
  sgemm(true, false, GH, rc.input, rc.seq * N, 1.0f, dproj, GH,
        rc.x.as<float>(), rc.input, 0.0f, dw, rc.input);
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(g.dh0 + rc.stateAt(d, n), dh + n * H, H * sizeof(float));
    if (g.dc0)
      std::memcpy(g.dc0 + rc.stateAt(d, n), dc + n * H, H * sizeof(float));
  }
}

/// lstm_grad, gru_grad, rnn_grad: the forward's inputs, then dy, dy_h (and
/// dy_c); gives dx, dw, dr, db, d initial_h (and d initial_c).
KernelFn recurrentBackward(KernelArgs &args, Cell cell) {
  size_t next = 0;
  Recurrence rc = parseRecurrence(args, cell, next);
  bool lstm = cell == Cell::Lstm;
  require(args.in.size() == next + (lstm ? 3 : 2),
          lstm ? "takes the forward's inputs, then dy, dy_h and dy_c"
               : "takes the forward's inputs, then dy and dy_h");
  require(args.out.size() == (lstm ? 6u : 5u),
          lstm ? "gives dx, dw, dr, db, d initial_h and d initial_c"
               : "gives dx, dw, dr, db and d initial_h");
  requireF32(args);
  require(args.in[next].shape == rc.yShape(),
          "dy should be " + shapeString(rc.yShape()));
  for (size_t i = next + 1; i < args.in.size(); ++i)
    require(args.in[i].shape == rc.stateShape(),
            "dy_h and dy_c should be " + shapeString(rc.stateShape()));
  require(args.out[0].shape == rc.x.shape, "dx should be x's shape");
  require(args.out[1].shape == rc.w.shape, "dw should be w's shape");
  require(args.out[2].shape == rc.r.shape, "dr should be r's shape");
  require(args.out[3].shape == (std::vector<int64_t>{rc.dirs, 2 * rc.gh()}),
          "db should be [dirs, 2 * gates * hidden]");
  for (size_t i = 4; i < args.out.size(); ++i)
    require(args.out[i].shape == rc.stateShape(),
            "the initial states' gradients should be " +
                shapeString(rc.stateShape()));
  const int64_t N = rc.batch, H = rc.hidden;
  int64_t backwardScratch = rc.seq * N * rc.gh() + N * (rc.gh() + 5 * H);
  int64_t total = rc.forwardScratch() + rc.savedFloats() + backwardScratch;
  Workspace *workspace = args.workspace;
  workspace->reserve(total * sizeof(float));
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    float *base = workspace->as<float>();
    float *forward = base, *savedBase = forward + rc.forwardScratch(),
          *backward = savedBase + rc.savedFloats();
    Saved saved{savedBase, savedBase + (rc.seq + 1) * N * H,
                savedBase + 2 * (rc.seq + 1) * N * H,
                savedBase + 2 * (rc.seq + 1) * N * H + rc.seq * N * rc.gh()};
    Gradients g{out[0].as<float>(),
                out[1].as<float>(),
                out[2].as<float>(),
                out[3].as<float>(),
                out[4].as<float>(),
                lstm ? out[5].as<float>() : nullptr,
                in[next].as<float>(),
                in[next + 1].as<float>(),
                lstm ? in[next + 2].as<float>() : nullptr};
    for (int64_t d = 0; d < rc.dirs; ++d) {
      forwardDirection(rc, d, forward, nullptr, nullptr, nullptr, &saved);
      backwardDirection(rc, d, saved, backward, g);
    }
    return std::string();
  };
}

} // namespace

void registerRecurrent(Registry &r) {
  r["lstm"] = [](KernelArgs &a) { return recurrentForward(a, Cell::Lstm); };
  r["gru"] = [](KernelArgs &a) { return recurrentForward(a, Cell::Gru); };
  r["rnn"] = [](KernelArgs &a) { return recurrentForward(a, Cell::Rnn); };
  r["lstm_grad"] = [](KernelArgs &a) {
    return recurrentBackward(a, Cell::Lstm);
  };
  r["gru_grad"] = [](KernelArgs &a) { return recurrentBackward(a, Cell::Gru); };
  r["rnn_grad"] = [](KernelArgs &a) { return recurrentBackward(a, Cell::Rnn); };
}

} // namespace fsdprt::cpu
