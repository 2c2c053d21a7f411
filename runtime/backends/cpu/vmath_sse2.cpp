//===- vmath_sse2.cpp - vmath on baseline x86-64 (SSE2) -------------------===//
//
// Compiled like the rest of the library: SSE2 is part of x86-64, so this
// table runs on any x86-64 CPU.
//
//===----------------------------------------------------------------------===//

#include "vmath.h"

#include <immintrin.h>
#include <sleef.h>

namespace fsdprt::cpu::vmath {
namespace sse2 {

struct V {
  using R = __m128;
  static constexpr int W = 4;
  static R load(const float *p) { return _mm_loadu_ps(p); }
  static void store(float *p, R r) { _mm_storeu_ps(p, r); }
  static R set1(float v) { return _mm_set1_ps(v); }
  static R add(R a, R b) { return _mm_add_ps(a, b); }
  static R sub(R a, R b) { return _mm_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm_mul_ps(a, b); }
  static R div(R a, R b) { return _mm_div_ps(a, b); }
  static R max(R a, R b) { return _mm_max_ps(a, b); }
  static R unord(R acc, R x) { return _mm_or_ps(acc, _mm_cmpunord_ps(x, x)); }
  static bool anyNan(R m) { return _mm_movemask_ps(m) != 0; }
  static R exp(R x) { return Sleef_expf4_u10sse2(x); }
  static R log(R x) { return Sleef_logf4_u10sse2(x); }
  static R tanh(R x) { return Sleef_tanhf4_u10sse2(x); }
  static R erf(R x) { return Sleef_erff4_u10sse2(x); }
};

constexpr const char *kName = "baseline";

#include "vmath_impl.inc"

} // namespace sse2

const Table &baselineTable() { return sse2::kTable; }

} // namespace fsdprt::cpu::vmath
