//===- vmath_avx512.cpp - vmath on AVX-512F -------------------------------===//
//
// The only file compiled with -mavx512f (CMakeLists.txt); its table is used
// only when cpuid says the CPU has it (vmath.cpp).
//
//===----------------------------------------------------------------------===//

#include "vmath.h"

#include <immintrin.h>
#include <sleef.h>

namespace fsdprt::cpu::vmath {
namespace avx512 {

struct V {
  using R = __m512;
  static constexpr int W = 16;
  static R load(const float *p) { return _mm512_loadu_ps(p); }
  static void store(float *p, R r) { _mm512_storeu_ps(p, r); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  // The NaN mask in a register's lanes (all ones where a lane saw a NaN).
  static R unord(R acc, R x) {
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(acc, nan,
                              _mm512_castsi512_ps(_mm512_set1_epi32(-1)));
  }
  static bool anyNan(R m) {
    return _mm512_test_epi32_mask(_mm512_castps_si512(m),
                                  _mm512_castps_si512(m)) != 0;
  }
  static R exp(R x) { return Sleef_expf16_u10avx512f(x); }
  static R log(R x) { return Sleef_logf16_u10avx512f(x); }
  static R tanh(R x) { return Sleef_tanhf16_u10avx512f(x); }
  static R erf(R x) { return Sleef_erff16_u10avx512f(x); }
};

constexpr const char *kName = "avx512";

#include "vmath_impl.inc"

} // namespace avx512

const Table &avx512Table() { return avx512::kTable; }

} // namespace fsdprt::cpu::vmath
