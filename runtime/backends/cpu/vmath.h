//===- vmath.h - Vectorised float math for the CPU kernels ------*- C++ -*-===//
//
// exp, log, tanh, erf and the activations built on them, over arrays of
// floats, from SLEEF's vector functions (1.0 ULP; the ones torch's CPU
// kernels use), and the float max and sum of a row.
//
// The library is built for baseline x86-64; each instruction set has its
// own translation unit (vmath_sse2.cpp, vmath_avx2.cpp, vmath_avx512.cpp,
// the latter two compiled with -mavx2 -mfma / -mavx512f alone) and one of
// them is chosen once, at run time, from the CPU's cpuid bits. Setting
// FSDPRT_CPU_ISA=baseline (or avx2) in the environment caps the choice.
//
// A value's result depends only on the value and the chosen instruction
// set, never on its position in the array or on the array's length (tails
// go through the same vector code in a padded buffer), so a kernel that
// splits its rows differently (threads, a GEMM epilogue's blocks) gives the
// same bits. Sums and maxima of a row are taken in a fixed order for a
// given length and instruction set, whatever the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CPU_VMATH_H
#define FSDPRT_BACKENDS_CPU_VMATH_H

#include <cstdint>

namespace fsdprt::cpu::vmath {

/// One instruction set's implementation of every function below.
struct Table {
  const char *name;
  void (*exp)(const float *x, float *y, int64_t n);
  void (*log)(const float *x, float *y, int64_t n);
  void (*tanh)(const float *x, float *y, int64_t n);
  void (*erf)(const float *x, float *y, int64_t n);
  void (*sigmoid)(const float *x, float *y, int64_t n);
  void (*silu)(const float *x, float *y, int64_t n);
  void (*geluErf)(const float *x, float *y, int64_t n);
  void (*geluTanh)(const float *x, float *y, int64_t n);
  float (*expSum)(const float *x, float *y, int64_t n, float shift);
  float (*max)(const float *x, int64_t n);
  float (*sum)(const float *x, int64_t n);
};

/// The implementation chosen for this CPU (and FSDPRT_CPU_ISA), picked on
/// the first call.
const Table &table();

/// The chosen instruction set: "avx512", "avx2" or "baseline".
inline const char *isa() { return table().name; }

/// y[i] = f(x[i]) for i in [0, n); y may be x.
inline void exp(const float *x, float *y, int64_t n) { table().exp(x, y, n); }
inline void log(const float *x, float *y, int64_t n) { table().log(x, y, n); }
inline void tanh(const float *x, float *y, int64_t n) { table().tanh(x, y, n); }
inline void erf(const float *x, float *y, int64_t n) { table().erf(x, y, n); }
/// 1 / (1 + exp(-x)).
inline void sigmoid(const float *x, float *y, int64_t n) {
  table().sigmoid(x, y, n);
}
/// x / (1 + exp(-x)), as torch's silu.
inline void silu(const float *x, float *y, int64_t n) { table().silu(x, y, n); }
/// 0.5 x (1 + erf(x / sqrt(2))).
inline void geluErf(const float *x, float *y, int64_t n) {
  table().geluErf(x, y, n);
}
/// x * sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3): the tanh form.
inline void geluTanh(const float *x, float *y, int64_t n) {
  table().geluTanh(x, y, n);
}

/// y[i] = exp(x[i] - shift); returns the float sum of the y[i]. y may be x.
inline float expSum(const float *x, float *y, int64_t n, float shift) {
  return table().expSum(x, y, n, shift);
}

/// The largest of x[0, n) (-inf when n is 0; NaN when any is NaN).
inline float max(const float *x, int64_t n) { return table().max(x, n); }

/// The float sum of x[0, n), blocked (as torch's cascade sum) so that its
/// error grows slowly with n.
inline float sum(const float *x, int64_t n) { return table().sum(x, n); }

/// The tables of each instruction set (the baseline one always runs).
const Table &baselineTable();
const Table &avx2Table();
const Table &avx512Table();

} // namespace fsdprt::cpu::vmath

#endif // FSDPRT_BACKENDS_CPU_VMATH_H
