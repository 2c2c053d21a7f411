//===- logic.h - Comparison, logic and where kernel bodies ------*- C++ -*-===//
//
// The CPU backend's comparisons (equal, less, greater, greater_or_equal,
// less_or_equal: F32, I64 or Bool operands, a Bool output), its logic
// (and, or, xor, not: Bool throughout; xor compares the bytes, as the
// CPU's does) and
// where (a Bool condition picking between two operands of any element
// size) as kernel bodies (hd.h), broadcasting as elementwise.h plans it.
// Bool is one byte; any nonzero byte is true, and results are 0 or 1.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_LOGIC_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_LOGIC_H

#include "elementwise.h"

namespace fsdprt::cuda {

enum class Logic {
  Equal,
  Less,
  Greater,
  GreaterOrEqual,
  LessOrEqual,
  And,
  Or,
  Xor
};

inline const char *logicName(Logic op) {
  static const char *const names[] = {"equal", "less",          "greater",
                                      "greater_or_equal", "less_or_equal",
                                      "and",   "or",            "xor"};
  return names[static_cast<int>(op)];
}

/// Whether `op` takes Bool operands only.
inline bool logical(Logic op) {
  return op == Logic::And || op == Logic::Or || op == Logic::Xor;
}

template <Logic Op, typename T> FSDP_HD inline uint8_t logic(T a, T b) {
  if constexpr (Op == Logic::Equal)
    return a == b;
  else if constexpr (Op == Logic::Less)
    return a < b;
  else if constexpr (Op == Logic::Greater)
    return a > b;
  else if constexpr (Op == Logic::GreaterOrEqual)
    return a >= b;
  else if constexpr (Op == Logic::LessOrEqual)
    return a <= b;
  else if constexpr (Op == Logic::And)
    return a && b;
  else if constexpr (Op == Logic::Or)
    return a || b;
  else
    return a != b;
}

/// y[i] = a[.] op b[.], broadcasting; T is float, int64_t or uint8_t
/// (Bool) for the comparisons, uint8_t for and, or and xor.
template <Logic Op, typename T> struct LogicBody {
  Broadcast plan;
  const T *a, *b;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const {
    y[i] = logic<Op>(a[plan.offset(0, i)], b[plan.offset(1, i)]);
  }
};

/// y[i] = !x[i] (not).
struct NotBody {
  const uint8_t *x;
  uint8_t *y;
  FSDP_HD void operator()(int64_t i) const { y[i] = !x[i]; }
};

/// y[i] = cond[.] ? a[.] : b[.], broadcasting the three operands (in that
/// order in the plan); T an unsigned integer of the element's size.
template <typename T> struct WhereBody {
  Broadcast plan;
  const uint8_t *cond;
  const T *a, *b;
  T *y;
  FSDP_HD void operator()(int64_t i) const {
    y[i] =
        cond[plan.offset(0, i)] ? a[plan.offset(1, i)] : b[plan.offset(2, i)];
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_LOGIC_H
