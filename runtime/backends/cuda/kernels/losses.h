//===- losses.h - Cross-entropy kernel bodies --------------------*- C++ -*-===//
//
// softmax_cross_entropy and its gradient (docs/plan-format.md) as kernel
// bodies (hd.h), for scores [N, C, d...] read as positions p of N * d...
// with C classes `inner` apart, I64 labels, optional class weights, an
// optional ignored label. A label outside [0, C) is a fault: the body
// records it in its ErrorSlot (code kBadLabel, detail: the label) and the
// run fails with it once the kernel is done.
//
// The loss is two kernels: CrossEntropyRows (per position: its loss and
// weight) then CrossEntropyTotal (one group: the sum, or the mean over
// the weights). The gradient is CrossEntropyTotal over the weights alone
// (the mean's divisor) then CrossEntropyGradRows.
//
// nll_loss and its gradient (on log-probabilities [N, C, d...], I64 or I32
// targets) are the same sequences with NllRows and NllGradBody; their
// per-position losses and gradients are the CPU's bits, the reductions
// fp32 sums in a group (the CPU's are in double).
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_LOSSES_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_LOSSES_H

#include "hd.h"

namespace fsdprt::cuda {

constexpr int kBadLabel = 1;

/// What the cross-entropy bodies share: the inputs and the label checks.
struct CrossEntropyInputs {
  const float *scores;
  const int64_t *labels;
  const float *weights; // [C] or null
  int64_t classes, inner;
  bool hasIgnore;
  int64_t ignore;
  ErrorSlot *error;
  /// Each position's log-sum-exp of its scores, or null: the loss writes
  /// it, the gradient reads it instead of recomputing it.
  float *lse = nullptr;

  /// Position p's label, or -1 when it is ignored or out of range (then
  /// recorded as a fault).
  FSDP_HD int64_t label(int64_t p) const {
    int64_t l = labels[p];
    if (hasIgnore && l == ignore)
      return -1;
    if (l < 0 || l >= classes) {
      reportError(error, kBadLabel, l);
      return -1;
    }
    return l;
  }
  FSDP_HD const float *row(int64_t p) const {
    return scores + rowStart(p, classes, inner);
  }
  FSDP_HD float weight(int64_t l) const { return weights ? weights[l] : 1.0f; }
};

/// Per position p: loss[p] = w * (logsumexp(row) - row[label]) and
/// weight[p] = w (both 0 for an ignored label); in.lse[p] =
/// logsumexp(row) when in.lse is given (every position, ignored ones
/// included).
struct CrossEntropyRows {
  CrossEntropyInputs in;
  float *loss, *weight;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t p) const {
    int64_t l = in.label(p);
    const float *row = in.row(p);
    bool needed = l >= 0 || in.lse;
    float max = -INFINITY;
    for (int64_t j = g.lane(); j < in.classes && needed; j += g.size())
      max = fmaxf(max, row[j * in.inner]);
    max = g.max(max);
    float sum = 0;
    for (int64_t j = g.lane(); j < in.classes && needed; j += g.size())
      sum += expf(row[j * in.inner] - max);
    sum = g.sum(sum);
    if (g.lane() == 0) {
      float w = l >= 0 ? in.weight(l) : 0.0f;
      float logSum = logf(sum) + max;
      loss[p] = l >= 0 ? w * (logSum - row[l * in.inner]) : 0.0f;
      if (weight)
        weight[p] = w;
      if (in.lse)
        in.lse[p] = logSum;
    }
  }
};

/// Per position p: weight[p] = w of its label (0 when ignored): the
/// summands of a mean's divisor.
struct CrossEntropyWeights {
  CrossEntropyInputs in;
  float *weight;

  FSDP_HD void operator()(int64_t p) const {
    int64_t l = in.label(p);
    weight[p] = l >= 0 ? in.weight(l) : 0.0f;
  }
};

/// One group: y[0] = sum of values[0, count), divided by the sum of
/// divisors[0, count) when divisors is given (a mean; 0 weights: 1).
struct CrossEntropyTotal {
  const float *values, *divisors;
  float *y;
  int64_t count;
  /// A mean over no weight is 0 / 0 = NaN (nll_loss, as torch's), not 0.
  bool nanWithoutWeight = false;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t) const {
    float total = 0, divisor = 0;
    for (int64_t p = g.lane(); p < count; p += g.size()) {
      total += values[p];
      if (divisors)
        divisor += divisors[p];
    }
    total = g.sum(total);
    divisor = divisors ? g.sum(divisor) : 1.0f;
    if (g.lane() == 0)
      y[0] = divisors && (divisor != 0 || nanWithoutWeight) ? total / divisor
                                                            : total;
  }
};

/// Per position p: d scores = g * w * (softmax(row) - onehot(label)) /
/// divisor; 0 for an ignored label. g is one value, or one per position
/// (reduction none); divisor (a device scalar) is the mean's summed
/// weights, or null. With the forward's log-sum-exp per position (in.lse)
/// as the shift, the row is read twice instead of three times.
struct CrossEntropyGradRows {
  CrossEntropyInputs in;
  const float *g, *divisor;
  bool perPosition;
  float *y;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &grp, int64_t p) const {
    int64_t l = in.label(p);
    const float *row = in.row(p);
    float *out = y + rowStart(p, in.classes, in.inner);
    // As the CPU: the forward's log-sum-exp, when given, replaces the
    // row's max as the shift; the exponentials are divided by their sum
    // either way.
    float shift;
    if (in.lse) {
      shift = in.lse[p];
    } else {
      float max = -INFINITY;
      for (int64_t j = grp.lane(); j < in.classes && l >= 0; j += grp.size())
        max = fmaxf(max, row[j * in.inner]);
      shift = grp.max(max);
    }
    float sum = 0;
    for (int64_t j = grp.lane(); j < in.classes && l >= 0; j += grp.size())
      sum += expf(row[j * in.inner] - shift);
    float inverse = 1.0f / grp.sum(sum);
    float scale = 0;
    if (l >= 0) {
      float d = divisor && *divisor != 0 ? *divisor : 1.0f;
      scale = g[perPosition ? p : 0] * in.weight(l) / d;
    }
    for (int64_t j = grp.lane(); j < in.classes; j += grp.size())
      out[j * in.inner] =
          l >= 0 ? scale * (expf(row[j * in.inner] - shift) * inverse -
                            (j == l ? 1.0f : 0.0f))
                 : 0.0f;
  }
};

/// softmax_cross_entropy's kernels in order, through `launch` (a launcher:
/// `elementwise(body, n)` and `rowwise(body, rows)` return an error, false
/// when there is none): y is [positions] for reduction none, else one
/// value; `scratch` holds 2 * positions floats.
template <class Launcher>
auto crossEntropy(Launcher &launch, const CrossEntropyInputs &in,
                  int64_t positions, bool none, bool mean, float *scratch,
                  float *y) {
  if (none)
    return launch.rowwise(CrossEntropyRows{in, y, nullptr}, positions);
  float *loss = scratch, *weight = scratch + positions;
  if (auto e = launch.rowwise(CrossEntropyRows{in, loss, weight}, positions))
    return e;
  return launch.rowwise(
      CrossEntropyTotal{loss, mean ? weight : nullptr, y, positions}, 1);
}

/// softmax_cross_entropy_grad's kernels in order; `scratch` holds
/// positions + 1 floats; g is one value, or one per position for none.
template <class Launcher>
auto crossEntropyGrad(Launcher &launch, const CrossEntropyInputs &in,
                      int64_t positions, const float *g, bool none, bool mean,
                      float *scratch, float *y) {
  float *divisor = nullptr;
  if (mean) {
    float *weight = scratch;
    divisor = scratch + positions;
    if (auto e = launch.elementwise(CrossEntropyWeights{in, weight}, positions))
      return e;
    if (auto e = launch.rowwise(
            CrossEntropyTotal{weight, nullptr, divisor, positions}, 1))
      return e;
  }
  return launch.rowwise(CrossEntropyGradRows{in, g, divisor, none, y},
                        positions);
}

/// What the nll_loss bodies share: log-probabilities [N, C, d...] read as
/// positions p of N * d... with C classes `inner` apart, the targets and
/// the checks of a target (kBadLabel outside [0, C)).
struct NllInputs {
  const float *input;
  const void *target; // int64, or int32 with target32
  bool target32;
  const float *weights; // [C] or null
  int64_t classes, inner;
  bool hasIgnore;
  int64_t ignore;
  ErrorSlot *error;

  /// Position p's class, or -1 when it is ignored or out of range (then
  /// recorded as a fault).
  FSDP_HD int64_t cls(int64_t p) const {
    int64_t t = target32 ? static_cast<const int32_t *>(target)[p]
                         : static_cast<const int64_t *>(target)[p];
    if (hasIgnore && t == ignore)
      return -1;
    if (t < 0 || t >= classes) {
      reportError(error, kBadLabel, t);
      return -1;
    }
    return t;
  }
  FSDP_HD float weight(int64_t c) const { return weights ? weights[c] : 1.0f; }
};

/// Per position p: loss[p] = -w * input[p, class] (when loss is given) and
/// weight[p] = w (when weight is given), both 0 for an ignored class.
struct NllRows {
  NllInputs in;
  float *loss, *weight;
  FSDP_HD void operator()(int64_t p) const {
    int64_t c = in.cls(p);
    float w = c >= 0 ? in.weight(c) : 0.0f;
    if (loss)
      loss[p] = c >= 0 ? -w * in.input[rowStart(p, in.classes, in.inner) +
                                       c * in.inner]
                       : 0.0f;
    if (weight)
      weight[p] = w;
  }
};

/// Per element i of d input [N, C, d...]: -g * w / divisor at each
/// position's class, 0 elsewhere, computed in double as the CPU does. g is
/// one value, or one per position (reduction none); divisor (a device
/// scalar) is the mean's summed weights (0: 1), or null.
struct NllGradBody {
  NllInputs in;
  const float *g, *divisor;
  bool perPosition;
  float *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t r = i % in.inner, rest = i / in.inner;
    int64_t j = rest % in.classes, p = rest / in.classes * in.inner + r;
    int64_t c = in.cls(p);
    if (c != j) {
      y[i] = 0.0f;
      return;
    }
    double d = divisor && *divisor != 0 ? *divisor : 1.0;
    y[i] = static_cast<float>(-static_cast<double>(g[perPosition ? p : 0]) *
                              in.weight(c) / d);
  }
};

/// nll_loss's kernels in order, through `launch` (as crossEntropy): y is
/// [positions] for reduction none, else one value; `scratch` holds 2 *
/// positions floats.
template <class Launcher>
auto nllLoss(Launcher &launch, const NllInputs &in, int64_t positions,
             bool none, bool mean, float *scratch, float *y) {
  if (none)
    return launch.elementwise(NllRows{in, y, nullptr}, positions);
  float *loss = scratch, *weight = scratch + positions;
  if (auto e = launch.elementwise(NllRows{in, loss, weight}, positions))
    return e;
  return launch.rowwise(
      CrossEntropyTotal{loss, mean ? weight : nullptr, y, positions, true}, 1);
}

/// nll_loss_grad's kernels in order; `scratch` holds positions + 1
/// floats; y has `n` elements.
template <class Launcher>
auto nllLossGrad(Launcher &launch, const NllInputs &in, int64_t positions,
                 const float *g, bool none, bool mean, float *scratch, float *y,
                 int64_t n) {
  float *divisor = nullptr;
  if (mean) {
    float *weight = scratch;
    divisor = scratch + positions;
    if (auto e = launch.elementwise(NllRows{in, nullptr, weight}, positions))
      return e;
    if (auto e = launch.rowwise(
            CrossEntropyTotal{weight, nullptr, divisor, positions}, 1))
      return e;
  }
  return launch.elementwise(NllGradBody{in, g, divisor, none, y}, n);
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_LOSSES_H
