//===- vmath_avx2.cpp - vmath on AVX2 + FMA -------------------------------===//
//
// The only file compiled with -mavx2 -mfma (CMakeLists.txt); its table is
// used only when cpuid says the CPU has both (vmath.cpp).
//
//===----------------------------------------------------------------------===//

#include "vmath.h"

#include <immintrin.h>
#include <sleef.h>

namespace fsdprt::cpu::vmath {
namespace avx2 {

struct V {
  using R = __m256;
  static constexpr int W = 8;
  static R load(const float *p) { return _mm256_loadu_ps(p); }
  static void store(float *p, R r) { _mm256_storeu_ps(p, r); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R unord(R acc, R x) {
    return _mm256_or_ps(acc, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  static bool anyNan(R m) { return _mm256_movemask_ps(m) != 0; }
  static R exp(R x) { return Sleef_expf8_u10avx2(x); }
  static R log(R x) { return Sleef_logf8_u10avx2(x); }
  static R tanh(R x) { return Sleef_tanhf8_u10avx2(x); }
  static R erf(R x) { return Sleef_erff8_u10avx2(x); }
};

constexpr const char *kName = "avx2";

#include "vmath_impl.inc"

} // namespace avx2

const Table &avx2Table() { return avx2::kTable; }

} // namespace fsdprt::cpu::vmath
