//===- elementwise.h - Elementwise kernel bodies -----------------*- C++ -*-===//
//
// The unary functions and the broadcasting binary arithmetic of the CPU
// backend's elementwise family (runtime/backends/cpu/elementwise.cpp), as
// kernel bodies (hd.h). A broadcast is planned on the host (Broadcast:
// the output's dims with size-1 dims dropped and neighbours that every
// operand reads contiguously merged, each operand's element strides, 0
// along stretched dims) and passed to the kernel by value.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H

#include "hd.h"

#include "../../../src/half.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace fsdprt::cuda {

enum class Unary {
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Erf,
  Tanh,
  Sigmoid,
  Relu,
  Silu,
  Gelu,
  GeluTanh,
  Neg,
  Abs
};

/// The plan op (docs/plan-format.md) each Unary computes.
inline const char *unaryName(Unary op) {
  static const char *const names[] = {
      "exp",  "log",     "sqrt", "reciprocal", "erf",  "tanh", "sigmoid",
      "relu", "silu",    "gelu", "gelu",       "neg",  "abs"};
  return names[static_cast<int>(op)];
}

template <Unary Op> FSDP_HD inline float unary(float x) {
  if constexpr (Op == Unary::Exp)
    return expf(x);
  else if constexpr (Op == Unary::Log)
    return logf(x);
  else if constexpr (Op == Unary::Sqrt)
    return sqrtf(x);
  else if constexpr (Op == Unary::Reciprocal)
    return 1.0f / x;
  else if constexpr (Op == Unary::Erf)
    return erff(x);
  else if constexpr (Op == Unary::Tanh)
    return tanhf(x);
  else if constexpr (Op == Unary::Sigmoid)
    return 1.0f / (1.0f + expf(-x));
  else if constexpr (Op == Unary::Relu)
    return x > 0 ? x : 0.0f;
  else if constexpr (Op == Unary::Silu)
    return x / (1.0f + expf(-x));
  else if constexpr (Op == Unary::Gelu)
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  else if constexpr (Op == Unary::GeluTanh) // x * sigmoid(2u): one exp
    return x / (1.0f + expf(-2 * 0.7978845608028654f *
                            (x + 0.044715f * x * x * x)));
  else if constexpr (Op == Unary::Neg)
    return -x;
  else
    return fabsf(x);
}

/// y[i] = f(x[i]).
template <Unary Op> struct UnaryBody {
  const float *x;
  float *y;
  FSDP_HD void operator()(int64_t i) const { y[i] = unary<Op>(x[i]); }
};

/// cast between fp32 and bf16 or f16 (`half`): rounded to nearest-even,
/// bit for bit as the CPU backend (and torch) convert.
struct CastToHalf {
  const float *x;
  uint16_t *y;
  fsdprt_dtype_t half;
  FSDP_HD void operator()(int64_t i) const { y[i] = floatToHalf(x[i], half); }
};
struct CastFromHalf {
  const uint16_t *x;
  float *y;
  fsdprt_dtype_t half;
  FSDP_HD void operator()(int64_t i) const { y[i] = halfToFloat(x[i], half); }
};

/// ONNX Cast between any two of f64, f32, f16, bf16, i64, i32, i8, u8 and
/// bool, as the CPU backend's: to bool is `x != 0`; floats to integers
/// truncate toward zero, then wrap to the narrower type; halves go through
/// fp32, rounded to nearest-even. (A float out of an integer's range, or
/// NaN, has no defined result: the GPU saturates where the CPU wraps.)
struct AnyCast {
  const void *x;
  void *y;
  fsdprt_dtype_t from, to;

  /// Whether `d` is one of the dtypes above.
  static bool takes(fsdprt_dtype_t d) {
    switch (d) {
    case FSDPRT_F64: case FSDPRT_F32: case FSDPRT_F16: case FSDPRT_BF16:
    case FSDPRT_I64: case FSDPRT_I32: case FSDPRT_I8: case FSDPRT_U8:
    case FSDPRT_BOOL:
      return true;
    default:
      return false;
    }
  }
  FSDP_HD static bool isFloat(fsdprt_dtype_t d) {
    return d == FSDPRT_F64 || d == FSDPRT_F32 || d == FSDPRT_F16 ||
           d == FSDPRT_BF16;
  }
  FSDP_HD void operator()(int64_t i) const {
    // The element as a double (floats: exact) or an int64 (integers).
    double f = 0;
    int64_t n = 0;
    switch (from) {
    case FSDPRT_F64: f = static_cast<const double *>(x)[i]; break;
    case FSDPRT_F32: f = static_cast<const float *>(x)[i]; break;
    case FSDPRT_F16:
    case FSDPRT_BF16:
      f = halfToFloat(static_cast<const uint16_t *>(x)[i], from);
      break;
    case FSDPRT_I64: n = static_cast<const int64_t *>(x)[i]; break;
    case FSDPRT_I32: n = static_cast<const int32_t *>(x)[i]; break;
    case FSDPRT_I8: n = static_cast<const int8_t *>(x)[i]; break;
    default: n = static_cast<const uint8_t *>(x)[i]; break; // u8, bool
    }
    bool real = isFloat(from);
    int64_t whole = real ? static_cast<int64_t>(f) : n;
    switch (to) {
    case FSDPRT_F64:
      static_cast<double *>(y)[i] = real ? f : static_cast<double>(n);
      break;
    case FSDPRT_F32:
      static_cast<float *>(y)[i] =
          real ? static_cast<float>(f) : static_cast<float>(n);
      break;
    case FSDPRT_F16:
    case FSDPRT_BF16:
      static_cast<uint16_t *>(y)[i] = floatToHalf(
          real ? static_cast<float>(f) : static_cast<float>(n), to);
      break;
    case FSDPRT_I64: static_cast<int64_t *>(y)[i] = whole; break;
    case FSDPRT_I32:
      static_cast<int32_t *>(y)[i] = static_cast<int32_t>(whole);
      break;
    case FSDPRT_I8: static_cast<int8_t *>(y)[i] = static_cast<int8_t>(whole); break;
    case FSDPRT_U8:
      static_cast<uint8_t *>(y)[i] = static_cast<uint8_t>(whole);
      break;
    default: // bool
      static_cast<uint8_t *>(y)[i] = real ? f != 0 : n != 0;
      break;
    }
  }
};

/// int64 neg and abs, wrapping as the CPU's: -INT64_MIN and
/// abs(INT64_MIN) are INT64_MIN.
struct NegAbs64 {
  bool abs;
  const int64_t *x;
  int64_t *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t v = x[i];
    y[i] = !abs || v < 0 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v))
                         : v;
  }
};

enum class Binary { Add, Sub, Mul, Div, Pow };

inline const char *binaryName(Binary op) {
  static const char *const names[] = {"add", "sub", "mul", "div", "pow"};
  return names[static_cast<int>(op)];
}

template <Binary Op> FSDP_HD inline float binary(float a, float b) {
  if constexpr (Op == Binary::Add)
    return a + b;
  else if constexpr (Op == Binary::Sub)
    return a - b;
  else if constexpr (Op == Binary::Mul)
    return a * b;
  else if constexpr (Op == Binary::Div)
    return a / b;
  else // a square is exact, as the CPU backend computes it
    return b == 2.0f ? a * a : powf(a, b);
}

/// int64 arithmetic as the CPU backend's: wrapping on overflow (through
/// uint64), division truncating toward zero, x / 0 = 0 and INT64_MIN / -1
/// wrapping, never a trap. Pow has no int64 kernel.
template <Binary Op> FSDP_HD inline int64_t binary(int64_t a, int64_t b) {
  uint64_t p = static_cast<uint64_t>(a), q = static_cast<uint64_t>(b);
  if constexpr (Op == Binary::Add)
    return static_cast<int64_t>(p + q);
  else if constexpr (Op == Binary::Sub)
    return static_cast<int64_t>(p - q);
  else if constexpr (Op == Binary::Mul)
    return static_cast<int64_t>(p * q);
  else if constexpr (Op == Binary::Div)
    return b == 0 ? 0 : b == -1 ? static_cast<int64_t>(0 - p) : a / b;
  else
    return 0;
}

/// How an output of `rank` collapsed dims reads up to 3 operands.
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};

  /// The element offset in operand `k` of output element `i`.
  FSDP_HD int64_t offset(int k, int64_t i) const {
    int64_t at = 0;
    for (int d = rank - 1; d >= 0; --d) {
      at += (i % shape[d]) * strides[k][d];
      i /= shape[d];
    }
    return at;
  }
};

/// Plans the broadcast of `operands` (at most 3) to `out`, NumPy's rules;
/// throws std::invalid_argument when a shape does not broadcast or the
/// collapsed output has more than kMaxDims dims.
Broadcast planBroadcast(const std::vector<int64_t> &out,
                        const std::vector<std::vector<int64_t>> &operands);

/// y[i] = a[.] op b[.], broadcasting; T is float or int64_t.
template <Binary Op, typename T = float> struct BinaryBody {
  Broadcast plan;
  const T *a, *b;
  T *y;
  FSDP_HD void operator()(int64_t i) const {
    y[i] = binary<Op>(a[plan.offset(0, i)], b[plan.offset(1, i)]);
  }
};

inline Broadcast planBroadcast(const std::vector<int64_t> &out,
                               const std::vector<std::vector<int64_t>> &operands) {
  if (operands.size() > 3)
    throw std::invalid_argument("at most 3 operands broadcast");
  const int n = static_cast<int>(out.size());
  // Full strides of each operand over the output's dims.
  std::vector<std::vector<int64_t>> full(operands.size(),
                                         std::vector<int64_t>(n, 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    const auto &shape = operands[k];
    if (static_cast<int>(shape.size()) > n)
      throw std::invalid_argument("operand " + std::to_string(k) +
                                  " has more dims than the output");
    int64_t stride = 1;
    for (int d = n - 1, s = static_cast<int>(shape.size()) - 1; s >= 0;
         --d, --s) {
      if (shape[s] == out[d])
        full[k][d] = shape[s] == 1 ? 0 : stride;
      else if (shape[s] != 1)
        throw std::invalid_argument("operand " + std::to_string(k) +
                                    " does not broadcast to the output");
      stride *= shape[s];
    }
  }
  // Drop size-1 dims; merge a dim into the previous one when every
  // operand reads the pair contiguously.
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides(operands.size());
  for (int d = 0; d < n; ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < operands.size() && merge; ++k)
      merge = strides[k].back() == full[k][d] * out[d];
    if (merge) {
      shape.back() *= out[d];
      for (size_t k = 0; k < operands.size(); ++k)
        strides[k].back() = full[k][d];
      continue;
    }
    shape.push_back(out[d]);
    for (size_t k = 0; k < operands.size(); ++k)
      strides[k].push_back(full[k][d]);
  }
  if (static_cast<int>(shape.size()) > kMaxDims)
    throw std::invalid_argument("the output has " +
                                std::to_string(shape.size()) +
                                " dims after collapsing; at most " +
                                std::to_string(kMaxDims) + " are supported");
  Broadcast plan;
  plan.rank = static_cast<int>(shape.size());
  for (int d = 0; d < plan.rank; ++d) {
    plan.shape[d] = shape[d];
    for (size_t k = 0; k < operands.size(); ++k)
      plan.strides[k][d] = strides[k][d];
  }
  return plan;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H
