//===- vmath.cpp - Choosing vmath's instruction set at run time -----------===//

#include "vmath.h"

#include <cstdlib>
#include <cstring>

namespace fsdprt::cpu::vmath {
namespace {

/// The best table this CPU runs, capped by FSDPRT_CPU_ISA ("baseline",
/// "avx2"; anything else, or unset, caps nothing).
const Table &choose() {
  const char *cap = std::getenv("FSDPRT_CPU_ISA");
  bool noAvx512 =
      cap && (!std::strcmp(cap, "baseline") || !std::strcmp(cap, "avx2"));
  bool noAvx2 = cap && !std::strcmp(cap, "baseline");
  __builtin_cpu_init();
  // The OS must save the wide registers too: GCC's checks read cpuid's
  // feature bits only after checking OSXSAVE/XCR0 for AVX and AVX-512.
  if (!noAvx512 && __builtin_cpu_supports("avx512f"))
    return avx512Table();
  if (!noAvx2 && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return avx2Table();
  return baselineTable();
}

} // namespace

const Table &table() {
  static const Table &chosen = choose();
  return chosen;
}

} // namespace fsdprt::cpu::vmath
