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
#include <type_traits>
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
  Abs,
  Floor,
  Ceil,
  Round,
  Sign,
  Softsign,
  Softplus,
  HardSigmoid,
  HardSwish,
  Elu,
  Selu,
  Celu,
  LeakyRelu,
  ThresholdedRelu,
  Shrink,
  Clip,
  Sin,
  Cos,
  Tan,
  Sinh,
  Cosh,
  Asin,
  Acos,
  Atan,
  Asinh,
  Acosh,
  Atanh
};

/// The plan op (docs/plan-format.md) each Unary computes.
inline const char *unaryName(Unary op) {
  static const char *const names[] = {
      "exp",      "log",          "sqrt",  "reciprocal",   "erf",
      "tanh",     "sigmoid",      "relu",  "silu",         "gelu",
      "gelu",     "neg",          "abs",   "floor",        "ceil",
      "round",    "sign",         "softsign", "softplus",  "hard_sigmoid",
      "hard_swish", "elu",        "selu",  "celu",         "leaky_relu",
      "thresholded_relu", "shrink", "clip", "sin",         "cos",
      "tan",      "sinh",         "cosh",  "asin",         "acos",
      "atan",     "asinh",        "acosh", "atanh"};
  return names[static_cast<int>(op)];
}

/// Calls f(std::integral_constant<Unary, op>{}): the launchers' one switch
/// from a Unary to its body's instantiation.
template <class F> decltype(auto) withUnary(Unary op, F &&f) {
  switch (op) {
  case Unary::Exp: return f(std::integral_constant<Unary, Unary::Exp>{});
  case Unary::Log: return f(std::integral_constant<Unary, Unary::Log>{});
  case Unary::Sqrt: return f(std::integral_constant<Unary, Unary::Sqrt>{});
  case Unary::Reciprocal: return f(std::integral_constant<Unary, Unary::Reciprocal>{});
  case Unary::Erf: return f(std::integral_constant<Unary, Unary::Erf>{});
  case Unary::Tanh: return f(std::integral_constant<Unary, Unary::Tanh>{});
  case Unary::Sigmoid: return f(std::integral_constant<Unary, Unary::Sigmoid>{});
  case Unary::Relu: return f(std::integral_constant<Unary, Unary::Relu>{});
  case Unary::Silu: return f(std::integral_constant<Unary, Unary::Silu>{});
  case Unary::Gelu: return f(std::integral_constant<Unary, Unary::Gelu>{});
  case Unary::GeluTanh: return f(std::integral_constant<Unary, Unary::GeluTanh>{});
  case Unary::Neg: return f(std::integral_constant<Unary, Unary::Neg>{});
  case Unary::Abs: return f(std::integral_constant<Unary, Unary::Abs>{});
  case Unary::Floor: return f(std::integral_constant<Unary, Unary::Floor>{});
  case Unary::Ceil: return f(std::integral_constant<Unary, Unary::Ceil>{});
  case Unary::Round: return f(std::integral_constant<Unary, Unary::Round>{});
  case Unary::Sign: return f(std::integral_constant<Unary, Unary::Sign>{});
  case Unary::Softsign: return f(std::integral_constant<Unary, Unary::Softsign>{});
  case Unary::Softplus: return f(std::integral_constant<Unary, Unary::Softplus>{});
  case Unary::HardSigmoid: return f(std::integral_constant<Unary, Unary::HardSigmoid>{});
  case Unary::HardSwish: return f(std::integral_constant<Unary, Unary::HardSwish>{});
  case Unary::Elu: return f(std::integral_constant<Unary, Unary::Elu>{});
  case Unary::Selu: return f(std::integral_constant<Unary, Unary::Selu>{});
  case Unary::Celu: return f(std::integral_constant<Unary, Unary::Celu>{});
  case Unary::LeakyRelu: return f(std::integral_constant<Unary, Unary::LeakyRelu>{});
  case Unary::ThresholdedRelu: return f(std::integral_constant<Unary, Unary::ThresholdedRelu>{});
  case Unary::Shrink: return f(std::integral_constant<Unary, Unary::Shrink>{});
  case Unary::Clip: return f(std::integral_constant<Unary, Unary::Clip>{});
  case Unary::Sin: return f(std::integral_constant<Unary, Unary::Sin>{});
  case Unary::Cos: return f(std::integral_constant<Unary, Unary::Cos>{});
  case Unary::Tan: return f(std::integral_constant<Unary, Unary::Tan>{});
  case Unary::Sinh: return f(std::integral_constant<Unary, Unary::Sinh>{});
  case Unary::Cosh: return f(std::integral_constant<Unary, Unary::Cosh>{});
  case Unary::Asin: return f(std::integral_constant<Unary, Unary::Asin>{});
  case Unary::Acos: return f(std::integral_constant<Unary, Unary::Acos>{});
  case Unary::Atan: return f(std::integral_constant<Unary, Unary::Atan>{});
  case Unary::Asinh: return f(std::integral_constant<Unary, Unary::Asinh>{});
  case Unary::Acosh: return f(std::integral_constant<Unary, Unary::Acosh>{});
  case Unary::Atanh: break;
  }
  return f(std::integral_constant<Unary, Unary::Atanh>{});
}

/// The attributes of the unary functions that have them, as the CPU
/// backend reads them (runtime/backends/cpu/elementwise.cpp): a is alpha
/// (hard_sigmoid, elu, selu, celu, leaky_relu, thresholded_relu), shrink's
/// bias and clip's lower bound; b is hard_sigmoid's beta, selu's gamma,
/// shrink's lambd and clip's upper bound.
struct UnaryParams {
  float a = 0, b = 0;
};

/// std::min and std::max, which the CPU's kernels use: the first operand
/// when the two are unordered (a NaN), unlike fminf and fmaxf.
FSDP_HD inline float stdMin(float a, float b) { return b < a ? b : a; }
FSDP_HD inline float stdMax(float a, float b) { return a < b ? b : a; }

template <Unary Op>
FSDP_HD inline float unary(float x, UnaryParams p = {}) {
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
  else if constexpr (Op == Unary::Abs)
    return fabsf(x);
  else if constexpr (Op == Unary::Floor)
    return floorf(x);
  else if constexpr (Op == Unary::Ceil)
    return ceilf(x);
  else if constexpr (Op == Unary::Round) // halves to even (numpy.round)
    return rintf(x);
  else if constexpr (Op == Unary::Sign) // NaN and -0 as they are
    return x > 0 ? 1.0f : x < 0 ? -1.0f : x;
  else if constexpr (Op == Unary::Softsign)
    return x / (1.0f + fabsf(x));
  else if constexpr (Op == Unary::Softplus) // exp never overflows
    return stdMax(x, 0.0f) + log1pf(expf(-fabsf(x)));
  else if constexpr (Op == Unary::HardSigmoid)
    return stdMin(1.0f, stdMax(0.0f, p.a * x + p.b));
  else if constexpr (Op == Unary::HardSwish)
    return x * stdMin(1.0f, stdMax(0.0f, x / 6.0f + 0.5f));
  else if constexpr (Op == Unary::Elu)
    return x < 0 ? p.a * expm1f(x) : x;
  else if constexpr (Op == Unary::Selu)
    return p.b * (x <= 0 ? p.a * expm1f(x) : x);
  else if constexpr (Op == Unary::Celu)
    return stdMax(0.0f, x) + stdMin(0.0f, p.a * expm1f(x / p.a));
  else if constexpr (Op == Unary::LeakyRelu)
    return x < 0 ? p.a * x : x;
  else if constexpr (Op == Unary::ThresholdedRelu)
    return x > p.a ? x : 0.0f;
  else if constexpr (Op == Unary::Shrink)
    return x < -p.b ? x + p.a : x > p.b ? x - p.a : 0.0f;
  else if constexpr (Op == Unary::Clip) // NaN stays NaN
    return x != x ? x : stdMin(stdMax(x, p.a), p.b);
  else if constexpr (Op == Unary::Sin)
    return sinf(x);
  else if constexpr (Op == Unary::Cos)
    return cosf(x);
  else if constexpr (Op == Unary::Tan)
    return tanf(x);
  else if constexpr (Op == Unary::Sinh)
    return sinhf(x);
  else if constexpr (Op == Unary::Cosh)
    return coshf(x);
  else if constexpr (Op == Unary::Asin)
    return asinf(x);
  else if constexpr (Op == Unary::Acos)
    return acosf(x);
  else if constexpr (Op == Unary::Atan)
    return atanf(x);
  else if constexpr (Op == Unary::Asinh)
    return asinhf(x);
  else if constexpr (Op == Unary::Acosh)
    return acoshf(x);
  else
    return atanhf(x);
}

/// y[i] = f(x[i]).
template <Unary Op> struct UnaryBody {
  const float *x;
  float *y;
  UnaryParams p = {};
  FSDP_HD void operator()(int64_t i) const { y[i] = unary<Op>(x[i], p); }
};

/// is_inf (with the infinities of the signs asked for) or isnan of fp32
/// elements: Bool outputs.
struct FloatClassBody {
  const float *x;
  uint8_t *y;
  bool nan, negative, positive; // nan: isnan, else is_inf
  FSDP_HD void operator()(int64_t i) const {
    float v = x[i];
    bool infinite = v == INFINITY || v == -INFINITY;
    y[i] = nan ? v != v : infinite && (v < 0 ? negative : positive);
  }
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

/// ONNX Cast between any two of f64, f32, f16, bf16, i64, i32, i16, i8, u8
/// and bool, as the CPU backend's: to bool is `x != 0`; floats to integers
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
    case FSDPRT_I64:
    case FSDPRT_I32:
    case FSDPRT_I16:
    case FSDPRT_I8:
    case FSDPRT_U8:
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
    case FSDPRT_I16:
      n = static_cast<const int16_t *>(x)[i];
      break;
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
    case FSDPRT_I16:
      static_cast<int16_t *>(y)[i] = static_cast<int16_t>(whole);
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

/// int64 neg, abs and sign (op), as the CPU's: neg and abs wrap, so
/// -INT64_MIN and abs(INT64_MIN) are INT64_MIN.
struct Unary64 {
  Unary op;
  const int64_t *x;
  int64_t *y;
  FSDP_HD void operator()(int64_t i) const {
    int64_t v = x[i];
    if (op == Unary::Sign)
      y[i] = int64_t(v > 0) - int64_t(v < 0);
    else
      y[i] = op == Unary::Neg || v < 0
                 ? static_cast<int64_t>(0 - static_cast<uint64_t>(v))
                 : v;
  }
};

/// Mod is ONNX Mod with fmod = 1 (the dividend's sign, C's fmod); FloorMod
/// with fmod = 0 (the divisor's sign, Python's %: integers only in ONNX).
/// Max and Min propagate NaN; PRelu is x < 0 ? slope * x : x.
enum class Binary { Add, Sub, Mul, Div, Pow, Mod, FloorMod, Max, Min, PRelu };

inline const char *binaryName(Binary op) {
  static const char *const names[] = {"add", "sub", "mul", "div", "pow",
                                      "mod", "mod", "max", "min", "prelu"};
  return names[static_cast<int>(op)];
}

/// Calls f(std::integral_constant<Binary, op>{}): the launchers' one
/// switch from a Binary to its body's instantiation.
template <class F> decltype(auto) withBinary(Binary op, F &&f) {
  switch (op) {
  case Binary::Add: return f(std::integral_constant<Binary, Binary::Add>{});
  case Binary::Sub: return f(std::integral_constant<Binary, Binary::Sub>{});
  case Binary::Mul: return f(std::integral_constant<Binary, Binary::Mul>{});
  case Binary::Div: return f(std::integral_constant<Binary, Binary::Div>{});
  case Binary::Pow: return f(std::integral_constant<Binary, Binary::Pow>{});
  case Binary::Mod: return f(std::integral_constant<Binary, Binary::Mod>{});
  case Binary::FloorMod: return f(std::integral_constant<Binary, Binary::FloorMod>{});
  case Binary::Max: return f(std::integral_constant<Binary, Binary::Max>{});
  case Binary::Min: return f(std::integral_constant<Binary, Binary::Min>{});
  case Binary::PRelu: break;
  }
  return f(std::integral_constant<Binary, Binary::PRelu>{});
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
  else if constexpr (Op == Binary::Mod)
    return fmodf(a, b);
  else if constexpr (Op == Binary::FloorMod) {
    float rem = fmodf(a, b);
    return rem != 0 && (rem < 0) != (b < 0) ? rem + b : rem;
  } else if constexpr (Op == Binary::Max)
    return a >= b || a != a ? a : b;
  else if constexpr (Op == Binary::Min)
    return a <= b || a != a ? a : b;
  else if constexpr (Op == Binary::PRelu)
    return a < 0 ? b * a : a;
  else // a square is exact, as the CPU backend computes it
    return b == 2.0f ? a * a : powf(a, b);
}

/// int64 arithmetic as the CPU backend's: wrapping on overflow (through
/// uint64), division truncating toward zero, x / 0 = 0 and INT64_MIN / -1
/// wrapping, x mod 0 = x mod -1 = 0, never a trap. Pow and PRelu have no
/// int64 kernel.
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
  else if constexpr (Op == Binary::Mod || Op == Binary::FloorMod) {
    if (b == 0 || b == -1) // INT64_MIN % -1 traps
      return 0;
    int64_t rem = a % b;
    bool floor = Op == Binary::FloorMod;
    return floor && rem != 0 && (rem < 0) != (b < 0) ? rem + b : rem;
  } else if constexpr (Op == Binary::Max)
    return a < b ? b : a;
  else if constexpr (Op == Binary::Min)
    return b < a ? b : a;
  else
    return 0;
}

/// How an output of `rank` collapsed dims reads up to 3 operands.
/// `narrow`: the output has at most 2^32 - 1 elements (finishNarrow), so
/// offset() divides in 32 bits: a GPU divides 64-bit integers in a long
/// routine. (On an H100 an add of GPT-2's activations took about 3 times
/// the time its bytes need; this is the suspected cause, to be measured.)
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};
  bool narrow = false;

  /// The element offset in operand `k` of output element `i`.
  FSDP_HD int64_t offset(int k, int64_t i) const {
    if (rank == 1) // i < shape[0]
      return i * strides[k][0];
    int64_t at = 0;
    if (narrow) {
      auto j = static_cast<uint32_t>(i);
      for (int d = rank - 1; d >= 0; --d) {
        auto n = static_cast<uint32_t>(shape[d]);
        at += static_cast<int64_t>(j % n) * strides[k][d];
        j /= n;
      }
      return at;
    }
    for (int d = rank - 1; d >= 0; --d) {
      at += (i % shape[d]) * strides[k][d];
      i /= shape[d];
    }
    return at;
  }

  /// Sets `narrow` from the shape.
  void finishNarrow() {
    uint64_t elements = 1;
    narrow = true;
    for (int d = 0; d < rank && narrow && elements; ++d) {
      narrow = static_cast<uint64_t>(shape[d]) <= UINT32_MAX / elements;
      elements *= static_cast<uint64_t>(shape[d]);
    }
  }
};

/// Plans the broadcast of `operands` (at most 3) to `out`, NumPy's rules;
/// throws std::invalid_argument when a shape does not broadcast or the
/// collapsed output has more than kMaxDims dims.
Broadcast planBroadcast(const std::vector<int64_t> &out,
                        const std::vector<std::vector<int64_t>> &operands);

/// y[i] = a[.] op b[.], broadcasting; T is float, int64_t or a narrower
/// integer (int32_t, int16_t, int8_t, uint8_t), which is computed in int64
/// and wrapped back to T, as the CPU backend computes it.
template <Binary Op, typename T = float> struct BinaryBody {
  Broadcast plan;
  const T *a, *b;
  T *y;
  FSDP_HD void operator()(int64_t i) const {
    using Wide = std::conditional_t<std::is_same_v<T, float>, float, int64_t>;
    y[i] = static_cast<T>(binary<Op>(static_cast<Wide>(a[plan.offset(0, i)]),
                                     static_cast<Wide>(b[plan.offset(1, i)])));
  }
};

/// Calls f(T{}) for the narrow integer dtypes a BinaryBody takes (I32,
/// I16, I8, U8); `otherwise()` for another.
template <class F, class G>
decltype(auto) withNarrowInteger(fsdprt_dtype_t dtype, F &&f, G &&otherwise) {
  switch (dtype) {
  case FSDPRT_I32:
    return f(int32_t{});
  case FSDPRT_I16:
    return f(int16_t{});
  case FSDPRT_I8:
    return f(int8_t{});
  case FSDPRT_U8:
    return f(uint8_t{});
  default:
    return otherwise();
  }
}

/// base^e in double; an integral exponent up to 64 in magnitude by
/// repeated squaring, exact while the power fits in 53 bits, as the
/// host's correctly rounded pow is. A GPU's pow is within 2 ulps, so it
/// may give 242.99999999999997 for 3^5, which truncation makes 242 (seen
/// on an H200).
FSDP_HD inline double integralPow(double base, double e) {
  if (!(e == floor(e)) || fabs(e) > 64)
    return pow(base, e);
  double power = 1, square = base;
  for (int64_t n = static_cast<int64_t>(fabs(e)); n; n >>= 1) {
    if (n & 1)
      power *= square;
    square *= square;
  }
  return e < 0 ? 1 / power : power;
}

/// ONNX Pow of an int64 base by an exponent of E (int64_t, int32_t, float
/// or double), broadcasting: in double (integralPow), truncated toward
/// zero, as the CPU computes it. A power outside int64's range, infinite
/// or NaN (0 to a negative power, a negative base to a fractional one)
/// has no defined conversion: x86's gives INT64_MIN, a GPU's saturates.
template <typename E> struct PowInt64Body {
  Broadcast plan;
  const int64_t *a;
  const E *b;
  int64_t *y;
  FSDP_HD void operator()(int64_t i) const {
    y[i] = static_cast<int64_t>(
        integralPow(static_cast<double>(a[plan.offset(0, i)]),
                    static_cast<double>(b[plan.offset(1, i)])));
  }
};

/// Calls f(E{}) for the exponent dtypes PowInt64Body takes; `otherwise()`
/// for another.
template <class F, class G>
decltype(auto) withPowExponent(fsdprt_dtype_t dtype, F &&f, G &&otherwise) {
  switch (dtype) {
  case FSDPRT_I64:
    return f(int64_t{});
  case FSDPRT_I32:
    return f(int32_t{});
  case FSDPRT_F32:
    return f(float{});
  case FSDPRT_F64:
    return f(double{});
  default:
    return otherwise();
  }
}

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
  plan.finishNarrow();
  return plan;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_ELEMENTWISE_H
