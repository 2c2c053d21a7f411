//===- elementwise.cpp - Elementwise CPU kernels with broadcasting --------===//
//
// Binary and ternary kernels read their inputs through NumPy broadcasting.
// The output's dims are collapsed first (size-1 dims dropped, neighbours
// every operand reads contiguously merged), so same-shape operands make one
// flat loop, a scalar operand a stride of 0, and a row vector a 2-D loop;
// the innermost run is split into chunks spread over the threads.
//
//===----------------------------------------------------------------------===//

#include "kernels.h"
#include "vmath.h"

#include "../../src/half.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

namespace fsdprt::cpu {
namespace {

/// Elements per chunk of the innermost run handed to one thread.
constexpr int64_t kChunk = 1 << 14;

/// How an elementwise output reads its inputs, with collapsed dims.
class Broadcast {
public:
  Broadcast(const Tensor &out, const std::vector<Tensor> &ins)
      : numel(out.numel), strides(ins.size()) {
    std::vector<std::vector<int64_t>> full;
    for (size_t i = 0; i < ins.size(); ++i)
      full.push_back(broadcastStrides(ins[i].shape, out.shape,
                                      ("input " + std::to_string(i)).c_str()));
    std::vector<int64_t> shape;
    for (size_t d = 0; d < out.shape.size(); ++d) {
      if (out.shape[d] == 1)
        continue;
      bool merge = !shape.empty();
      for (size_t i = 0; i < ins.size() && merge; ++i)
        merge = strides[i].back() == full[i][d] * out.shape[d];
      if (merge)
        shape.back() *= out.shape[d];
      else
        shape.push_back(out.shape[d]);
      for (size_t i = 0; i < ins.size(); ++i) {
        if (merge)
          strides[i].back() = full[i][d];
        else
          strides[i].push_back(full[i][d]);
      }
    }
    if (shape.empty()) {
      shape.push_back(1);
      for (std::vector<int64_t> &s : strides)
        s.push_back(0);
    }
    inner = shape.back();
    outer.assign(shape.begin(), shape.end() - 1);
  }

  /// Input `i`'s stride along the innermost run.
  int64_t step(size_t i) const { return strides[i].back(); }

  /// Calls body(inputOffsets, outputOffset, count) for every chunk of every
  /// innermost run, in parallel when the tensor is large.
  template <size_t N, typename Body> void forEach(Body body) const {
    if (numel == 0)
      return;
    int64_t chunk = std::min(inner, kChunk);
    int64_t pieces = (inner + chunk - 1) / chunk, rows = numel / inner;
    parallelFor(rows * pieces, chunk, [&](int64_t item) {
      int64_t row = item / pieces, begin = item % pieces * chunk;
      int64_t offsets[N];
      for (size_t i = 0; i < N; ++i)
        offsets[i] = offsetOf(row, outer, strides[i]) + begin * step(i);
      body(offsets, row * inner + begin, std::min(chunk, inner - begin));
    });
  }

private:
  int64_t numel, inner;
  std::vector<int64_t> outer;
  std::vector<std::vector<int64_t>> strides;
};

/// Checks that `y` has exactly the broadcast shape of the inputs.
void requireBroadcastOutput(const KernelArgs &args) {
  std::vector<int64_t> shape;
  for (const Tensor &t : args.in)
    shape = broadcastShapes(shape, t.shape);
  require(args.out[0].shape == shape,
          "output " + shapeString(args.out[0].shape) +
              " is not the broadcast shape " + shapeString(shape));
}

/// y = op(a, b) with a of type In, b of type In2 (In unless given) and y of
/// type Out.
template <typename In, typename Out, typename In2 = In, typename Op>
KernelFn binary(KernelArgs &args, Op op) {
  requireBroadcastOutput(args);
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  auto plan = std::make_shared<const Broadcast>(y, args.in);
  return [=]() {
    const In *pa = a.as<In>();
    const In2 *pb = b.as<In2>();
    Out *py = y.as<Out>();
    int64_t sa = plan->step(0), sb = plan->step(1);
    plan->forEach<2>([&](const int64_t *off, int64_t at, int64_t n) {
      const In *ra = pa + off[0];
      const In2 *rb = pb + off[1];
      Out *ry = py + at;
      // The common layouts get loops the compiler can vectorise.
      if (sa == 1 && sb == 1) {
        for (int64_t j = 0; j < n; ++j)
          ry[j] = op(ra[j], rb[j]);
      } else if (sa == 1 && sb == 0) {
        const In2 vb = *rb;
        for (int64_t j = 0; j < n; ++j)
          ry[j] = op(ra[j], vb);
      } else if (sa == 0 && sb == 1) {
        const In va = *ra;
        for (int64_t j = 0; j < n; ++j)
          ry[j] = op(va, rb[j]);
      } else {
        for (int64_t j = 0; j < n; ++j)
          ry[j] = op(ra[j * sa], rb[j * sb]);
      }
    });
    return std::string();
  };
}

/// Calls `body` with a value of the C++ type of a numeric dtype (F32, F64,
/// I64, I32, I16, I8, U8); throws KernelError naming another.
template <typename Body> KernelFn withNumeric(fsdprt_dtype_t t, Body body) {
  switch (t) {
  case FSDPRT_F32:
    return body(float());
  case FSDPRT_F64:
    return body(double());
  case FSDPRT_I64:
    return body(int64_t());
  case FSDPRT_I32:
    return body(int32_t());
  case FSDPRT_I16:
    return body(int16_t());
  case FSDPRT_I8:
    return body(int8_t());
  case FSDPRT_U8:
    return body(uint8_t());
  default:
    throw KernelError(std::string("does not support ") +
                      fsdprt_dtype_name(t));
  }
}

/// Arithmetic on F32 and F64 through `opf` (generic over the float type)
/// and, when `integers`, on the integer dtypes through `opi` in int64,
/// wrapped to the narrower type (as NumPy's fixed-width integers wrap).
template <typename OpF, typename OpI>
KernelFn arithmetic(KernelArgs &args, OpF opf, OpI opi, bool integers) {
  requireArity(args, 2, 2, 1);
  fsdprt_dtype_t t = args.in[0].dtype;
  require(args.in[1].dtype == t && args.out[0].dtype == t,
          "inputs and output must have one dtype");
  return withNumeric(t, [&](auto type) -> KernelFn {
    using T = decltype(type);
    if constexpr (std::is_floating_point_v<T>) {
      return binary<T, T>(args, opf);
    } else {
      require(integers,
              std::string("does not support ") + fsdprt_dtype_name(t));
      return binary<T, T>(args, [opi](T x, T y) {
        return static_cast<T>(opi(int64_t(x), int64_t(y)));
      });
    }
  });
}

/// ONNX Pow: the base's dtype is the output's, the exponent's may differ
/// (F32, F64, I64, I32 each); computed in double unless both are F32, an
/// integer result truncated toward zero (as NumPy's cast does).
KernelFn pow(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  fsdprt_dtype_t t = args.in[0].dtype, e = args.in[1].dtype;
  require(args.out[0].dtype == t, "the base and the output must have one dtype");
  if (t == FSDPRT_F32 && e == FSDPRT_F32)
    return binary<float, float>(args, [](float x, float y) {
      return y == 2.0f ? x * x : std::pow(x, y);
    });
  auto powered = [&](auto base) {
    using T = decltype(base);
    return withNumeric(e, [&](auto exponent) -> KernelFn {
      using E = decltype(exponent);
      return binary<T, T, E>(args, [](T x, E y) {
        return static_cast<T>(std::pow(double(x), double(y)));
      });
    });
  };
  switch (t) {
  case FSDPRT_F32:
    return powered(float());
  case FSDPRT_F64:
    return powered(double());
  case FSDPRT_I64:
    return powered(int64_t());
  case FSDPRT_I32:
    return powered(int32_t());
  default:
    throw KernelError(std::string("does not support ") +
                      fsdprt_dtype_name(t));
  }
}

/// Signed integer arithmetic that wraps on overflow instead of being
/// undefined.
template <typename Op> int64_t wrapping(int64_t x, int64_t y, Op op) {
  return static_cast<int64_t>(
      op(static_cast<uint64_t>(x), static_cast<uint64_t>(y)));
}

template <typename Op> KernelFn compare(KernelArgs &args, Op op) {
  requireArity(args, 2, 2, 1);
  requireDtype(args.out[0], FSDPRT_BOOL, "the output");
  fsdprt_dtype_t t = args.in[0].dtype;
  require(args.in[1].dtype == t, "inputs must have one dtype");
  if (t == FSDPRT_BOOL)
    return binary<uint8_t, uint8_t>(args, op);
  return withNumeric(t, [&](auto type) {
    return binary<decltype(type), uint8_t>(args, op);
  });
}

template <typename Op> KernelFn logical(KernelArgs &args, Op op) {
  requireArity(args, 2, 2, 1);
  for (const Tensor &t : {args.in[0], args.in[1], args.out[0]})
    requireDtype(t, FSDPRT_BOOL, "every operand");
  return binary<uint8_t, uint8_t>(args, op);
}

/// cond ? a : b for elements of type T (only their bytes matter).
template <typename T> KernelFn whereOf(KernelArgs &args) {
  Tensor c = args.in[0], a = args.in[1], b = args.in[2], y = args.out[0];
  auto plan = std::make_shared<const Broadcast>(y, args.in);
  return [=]() {
    int64_t sc = plan->step(0), sa = plan->step(1), sb = plan->step(2);
    plan->forEach<3>([&](const int64_t *off, int64_t at, int64_t n) {
      const uint8_t *rc = c.as<uint8_t>() + off[0];
      const T *ra = a.as<T>() + off[1], *rb = b.as<T>() + off[2];
      T *ry = y.as<T>() + at;
      for (int64_t j = 0; j < n; ++j)
        ry[j] = rc[j * sc] ? ra[j * sa] : rb[j * sb];
    });
    return std::string();
  };
}

KernelFn where(KernelArgs &args) {
  requireArity(args, 3, 3, 1);
  requireDtype(args.in[0], FSDPRT_BOOL, "the condition");
  fsdprt_dtype_t t = args.out[0].dtype;
  require(args.in[1].dtype == t && args.in[2].dtype == t,
          "both branches and the output must have one dtype");
  requireBroadcastOutput(args);
  switch (fsdprt_dtype_size(t)) {
  case 1:
    return whereOf<uint8_t>(args);
  case 2:
    return whereOf<uint16_t>(args);
  case 4:
    return whereOf<uint32_t>(args);
  default:
    return whereOf<uint64_t>(args);
  }
}

template <typename T, typename Out = T, typename Op>
KernelFn unaryOf(KernelArgs &args, Op op) {
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape == y.shape, "input " + shapeString(x.shape) + " and output " +
                                  shapeString(y.shape) + " differ in shape");
  return [=]() {
    const T *px = x.as<T>();
    Out *py = y.as<Out>();
    parallelFor(x.numel, 8, [&](int64_t i) { py[i] = op(px[i]); });
    return std::string();
  };
}

/// A unary kernel on F32.
template <typename Op> KernelFn unary(KernelArgs &args, Op op) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  return unaryOf<float>(args, op);
}

/// A unary F32 kernel computed by `fn` (a vmath array function) on chunks
/// spread over the threads.
KernelFn vectorUnary(KernelArgs &args,
                     void (*fn)(const float *, float *, int64_t)) {
  requireArity(args, 1, 1, 1);
  requireF32(args);
  Tensor x = args.in[0], y = args.out[0];
  require(x.shape == y.shape, "input " + shapeString(x.shape) + " and output " +
                                  shapeString(y.shape) + " differ in shape");
  return [=]() {
    int64_t n = x.numel, chunks = (n + kChunk - 1) / kChunk;
    parallelFor(chunks, kChunk * 8, [&](int64_t c) {
      int64_t begin = c * kChunk;
      fn(x.as<float>() + begin, y.as<float>() + begin,
         std::min(kChunk, n - begin));
    });
    return std::string();
  };
}

/// The unary kernel of an activation.
KernelFn activation(KernelArgs &args, Activation kind) {
  switch (kind) {
  case Activation::Gelu:
    return vectorUnary(args, vmath::geluErf);
  case Activation::GeluTanh:
    return vectorUnary(args, vmath::geluTanh);
  case Activation::Silu:
    return vectorUnary(args, vmath::silu);
  case Activation::Tanh:
    return vectorUnary(args, vmath::tanh);
  case Activation::Sigmoid:
    return vectorUnary(args, vmath::sigmoid);
  default:
    return withActivation(kind, [&](auto f) { return unary(args, f); });
  }
}

/// activation_grad: dx = dy * f'(x) for `gelu` (erf), `gelu_tanh` and
/// `silu`, the derivatives torch's gelu_backward and silu_backward take,
/// on chunks through the vmath functions.
KernelFn activationGrad(KernelArgs &args) {
  constexpr int64_t kBlock = 1024;
  requireArity(args, 2, 2, 1);
  requireF32(args);
  Tensor dy = args.in[0], x = args.in[1], dx = args.out[0];
  require(dy.shape == x.shape && dx.shape == x.shape,
          "dy " + shapeString(dy.shape) + ", x " + shapeString(x.shape) +
              " and dx " + shapeString(dx.shape) + " differ in shape");
  Activation kind = parseActivation(args.attrs.getString("activation", ""));
  require(kind == Activation::Gelu || kind == Activation::GeluTanh ||
              kind == Activation::Silu,
          "activation must be gelu, gelu_tanh or silu");
  // One block of at most kBlock elements from `begin`.
  auto block = [=](int64_t begin, int64_t len) {
      const float *px = x.as<float>() + begin, *pg = dy.as<float>() + begin;
      float *pd = dx.as<float>() + begin;
      float a[kBlock], b[kBlock];
      if (kind == Activation::GeluTanh) {
        // u = β(x + κx³); d = ½(1 + tanh u) + ½x(1 - tanh² u)β(1 + 3κx²).
        const float beta = 0.7978845608028654f, kappa = 0.044715f;
        for (int64_t i = 0; i < len; ++i)
          a[i] = beta * (px[i] + kappa * px[i] * px[i] * px[i]);
        vmath::tanh(a, a, len);
        for (int64_t i = 0; i < len; ++i) {
          float t = a[i], x2 = px[i] * px[i];
          float right = 0.5f * px[i] * (1.0f - t * t) * beta *
                        (1.0f + 3.0f * kappa * x2);
          pd[i] = pg[i] * (0.5f * (1.0f + t) + right);
        }
      } else if (kind == Activation::Gelu) {
        // d = Φ(x) + x φ(x): ½(1 + erf(x/√2)) + x exp(-x²/2) / √(2π).
        for (int64_t i = 0; i < len; ++i) {
          a[i] = px[i] * static_cast<float>(M_SQRT1_2);
          b[i] = -0.5f * px[i] * px[i];
        }
        vmath::erf(a, a, len);
        vmath::exp(b, b, len);
        const float invSqrt2Pi = 0.3989422804014327f;
        for (int64_t i = 0; i < len; ++i)
          pd[i] = pg[i] * (0.5f * (1.0f + a[i]) + px[i] * b[i] * invSqrt2Pi);
      } else {
        // d = s(1 + x(1 - s)), s = sigmoid(x).
        vmath::sigmoid(px, a, len);
        for (int64_t i = 0; i < len; ++i)
          pd[i] = pg[i] * (a[i] * (1.0f + px[i] * (1.0f - a[i])));
      }
  };
  return [=]() {
    int64_t n = x.numel, chunks = (n + kChunk - 1) / kChunk;
    parallelFor(chunks, kChunk * 16, [&](int64_t c) {
      int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t begin = c * kChunk; begin < end; begin += kBlock)
        block(begin, std::min(kBlock, end - begin));
    });
    return std::string();
  };
}

/// A unary kernel on F32 or, with `opi`, on I64.
template <typename OpF, typename OpI>
KernelFn signedUnary(KernelArgs &args, OpF opf, OpI opi) {
  requireArity(args, 1, 1, 1);
  if (args.in[0].dtype == FSDPRT_I64) {
    requireDtype(args.out[0], FSDPRT_I64, "the output");
    return unaryOf<int64_t>(args, opi);
  }
  return unary(args, opf);
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

template <fsdprt_dtype_t D> struct Storage;
template <> struct Storage<FSDPRT_F32> { using type = float; };
template <> struct Storage<FSDPRT_F64> { using type = double; };
template <> struct Storage<FSDPRT_I64> { using type = int64_t; };
template <> struct Storage<FSDPRT_I32> { using type = int32_t; };
template <> struct Storage<FSDPRT_I16> { using type = int16_t; };
template <> struct Storage<FSDPRT_I8> { using type = int8_t; };
template <> struct Storage<FSDPRT_U8> { using type = uint8_t; };
template <> struct Storage<FSDPRT_BOOL> { using type = uint8_t; };
template <> struct Storage<FSDPRT_F16> { using type = uint16_t; };
template <> struct Storage<FSDPRT_BF16> { using type = uint16_t; };

constexpr bool isHalfType(fsdprt_dtype_t d) {
  return d == FSDPRT_F16 || d == FSDPRT_BF16;
}

/// ONNX Cast of one element: to Bool is `x != 0`; floats to integers
/// truncate toward zero and then wrap to the narrower type. bf16 and f16
/// go through fp32 (as torch's conversions do), rounded to nearest-even.
template <fsdprt_dtype_t From, fsdprt_dtype_t To>
typename Storage<To>::type convert(typename Storage<From>::type x) {
  using Out = typename Storage<To>::type;
  if constexpr (isHalfType(From))
    return convert<FSDPRT_F32, To>(halfToFloat(x, From));
  else if constexpr (isHalfType(To))
    return floatToHalf(static_cast<float>(x), To);
  else if constexpr (To == FSDPRT_BOOL)
    return x != 0;
  else if constexpr ((From == FSDPRT_F32 || From == FSDPRT_F64) &&
                     !(To == FSDPRT_F32 || To == FSDPRT_F64))
    return static_cast<Out>(static_cast<int64_t>(x));
  else
    return static_cast<Out>(x);
}

template <fsdprt_dtype_t From, fsdprt_dtype_t To>
KernelFn castOf(const Tensor &x, const Tensor &y) {
  return [x, y]() {
    const auto *px = x.as<typename Storage<From>::type>();
    auto *py = y.as<typename Storage<To>::type>();
    parallelFor(x.numel, 2,
                [&](int64_t i) { py[i] = convert<From, To>(px[i]); });
    return std::string();
  };
}

template <fsdprt_dtype_t From>
KernelFn castFrom(const Tensor &x, const Tensor &y) {
  switch (y.dtype) {
  case FSDPRT_F32:
    return castOf<From, FSDPRT_F32>(x, y);
  case FSDPRT_F64:
    return castOf<From, FSDPRT_F64>(x, y);
  case FSDPRT_I64:
    return castOf<From, FSDPRT_I64>(x, y);
  case FSDPRT_I32:
    return castOf<From, FSDPRT_I32>(x, y);
  case FSDPRT_I16:
    return castOf<From, FSDPRT_I16>(x, y);
  case FSDPRT_I8:
    return castOf<From, FSDPRT_I8>(x, y);
  case FSDPRT_U8:
    return castOf<From, FSDPRT_U8>(x, y);
  case FSDPRT_BOOL:
    return castOf<From, FSDPRT_BOOL>(x, y);
  case FSDPRT_F16:
    return castOf<From, FSDPRT_F16>(x, y);
  case FSDPRT_BF16:
    return castOf<From, FSDPRT_BF16>(x, y);
  default:
    break;
  }
  throw KernelError(std::string("cannot convert to ") +
                    fsdprt_dtype_name(y.dtype));
}

KernelFn cast(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  const Tensor &x = args.in[0], &y = args.out[0];
  require(x.shape == y.shape, "input " + shapeString(x.shape) + " and output " +
                                  shapeString(y.shape) + " differ in shape");
  switch (x.dtype) {
  case FSDPRT_F32:
    return castFrom<FSDPRT_F32>(x, y);
  case FSDPRT_F64:
    return castFrom<FSDPRT_F64>(x, y);
  case FSDPRT_I64:
    return castFrom<FSDPRT_I64>(x, y);
  case FSDPRT_I32:
    return castFrom<FSDPRT_I32>(x, y);
  case FSDPRT_I16:
    return castFrom<FSDPRT_I16>(x, y);
  case FSDPRT_I8:
    return castFrom<FSDPRT_I8>(x, y);
  case FSDPRT_U8:
    return castFrom<FSDPRT_U8>(x, y);
  case FSDPRT_BOOL:
    return castFrom<FSDPRT_BOOL>(x, y);
  case FSDPRT_F16:
    return castFrom<FSDPRT_F16>(x, y);
  case FSDPRT_BF16:
    return castFrom<FSDPRT_BF16>(x, y);
  default:
    break;
  }
  throw KernelError(std::string("cannot convert from ") +
                    fsdprt_dtype_name(x.dtype));
}

} // namespace

void applyActivation(Activation kind, float *row, int64_t n) {
  switch (kind) {
  case Activation::None:
    return;
  case Activation::Relu:
    for (int64_t i = 0; i < n; ++i)
      row[i] = row[i] > 0 ? row[i] : 0.0f;
    return;
  case Activation::Gelu:
    return vmath::geluErf(row, row, n);
  case Activation::GeluTanh:
    return vmath::geluTanh(row, row, n);
  case Activation::Silu:
    return vmath::silu(row, row, n);
  case Activation::Tanh:
    return vmath::tanh(row, row, n);
  case Activation::Sigmoid:
    return vmath::sigmoid(row, row, n);
  }
}

void registerElementwise(Registry &r) {
  r["add"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](auto x, auto y) { return x + y; },
        [](int64_t x, int64_t y) {
          return wrapping(x, y, [](uint64_t p, uint64_t q) { return p + q; });
        },
        true);
  };
  r["sub"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](auto x, auto y) { return x - y; },
        [](int64_t x, int64_t y) {
          return wrapping(x, y, [](uint64_t p, uint64_t q) { return p - q; });
        },
        true);
  };
  r["mul"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](auto x, auto y) { return x * y; },
        [](int64_t x, int64_t y) {
          return wrapping(x, y, [](uint64_t p, uint64_t q) { return p * q; });
        },
        true);
  };
  r["div"] = [](KernelArgs &a) {
    // Integer division truncates toward zero (ONNX); dividing by zero gives
    // 0 and INT64_MIN / -1 wraps, rather than trapping.
    return arithmetic(
        a, [](auto x, auto y) { return x / y; },
        [](int64_t x, int64_t y) {
          if (y == 0)
            return int64_t(0);
          if (y == -1)
            return wrapping(x, 0, [](uint64_t p, uint64_t) { return 0 - p; });
          return x / y;
        },
        true);
  };
  r["pow"] = pow;
  // ONNX Mod: fmod = 1 takes the dividend's sign (C's fmod, any dtype);
  // fmod = 0 (integers only) the divisor's, as Python's %. x mod 0 is 0
  // for integers, as numpy's (without trapping).
  r["mod"] = [](KernelArgs &a) {
    bool fmod = a.attrs.getInt("fmod", 0) != 0;
    fsdprt_dtype_t t = a.in[0].dtype;
    require(fmod || (t != FSDPRT_F32 && t != FSDPRT_F64),
            "takes floats only with fmod = 1 (ONNX)");
    return arithmetic(
        a, [](auto x, auto y) { return std::fmod(x, y); },
        [fmod](int64_t x, int64_t y) -> int64_t {
          if (y == 0 || y == -1) // x mod -1 is 0, and INT64_MIN % -1 traps
            return 0;
          int64_t rem = x % y;
          return !fmod && rem != 0 && (rem < 0) != (y < 0) ? rem + y : rem;
        },
        true);
  };
  r["equal"] = [](KernelArgs &a) {
    return compare(a, [](auto x, auto y) -> uint8_t { return x == y; });
  };
  r["less"] = [](KernelArgs &a) {
    return compare(a, [](auto x, auto y) -> uint8_t { return x < y; });
  };
  r["greater"] = [](KernelArgs &a) {
    return compare(a, [](auto x, auto y) -> uint8_t { return x > y; });
  };
  r["greater_or_equal"] = [](KernelArgs &a) {
    return compare(a, [](auto x, auto y) -> uint8_t { return x >= y; });
  };
  r["less_or_equal"] = [](KernelArgs &a) {
    return compare(a, [](auto x, auto y) -> uint8_t { return x <= y; });
  };
  // ONNX Max and Min propagate NaN, as numpy's maximum and minimum do.
  r["max"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](auto x, auto y) { return x >= y || x != x ? x : y; },
        [](int64_t x, int64_t y) { return std::max(x, y); }, true);
  };
  r["min"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](auto x, auto y) { return x <= y || x != x ? x : y; },
        [](int64_t x, int64_t y) { return std::min(x, y); }, true);
  };
  r["and"] = [](KernelArgs &a) {
    return logical(a, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
  };
  r["or"] = [](KernelArgs &a) {
    return logical(a, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
  };
  r["xor"] = [](KernelArgs &a) {
    return logical(a, [](uint8_t x, uint8_t y) -> uint8_t { return x != y; });
  };
  // The slope broadcasts to x (the compiler checks it does one way).
  r["prelu"] = [](KernelArgs &a) {
    return arithmetic(
        a, [](float x, float slope) { return x < 0 ? slope * x : x; },
        [](int64_t, int64_t) { return int64_t(0); }, false);
  };
  r["where"] = where;
  r["exp"] = [](KernelArgs &a) { return vectorUnary(a, vmath::exp); };
  r["log"] = [](KernelArgs &a) { return vectorUnary(a, vmath::log); };
  r["sqrt"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::sqrt(x); });
  };
  r["reciprocal"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return 1.0f / x; });
  };
  r["erf"] = [](KernelArgs &a) { return vectorUnary(a, vmath::erf); };
  r["sin"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::sin(x); });
  };
  r["cos"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::cos(x); });
  };
  r["floor"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::floor(x); });
  };
  r["ceil"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::ceil(x); });
  };
  // log(1 + exp(x)) without overflowing exp for large x.
  r["softplus"] = [](KernelArgs &a) {
    return unary(a, [](float x) {
      return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x)));
    });
  };
  r["hard_sigmoid"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 0.2));
    float beta = static_cast<float>(a.attrs.getFloat("beta", 0.5));
    return unary(a, [alpha, beta](float x) {
      return std::min(1.0f, std::max(0.0f, alpha * x + beta));
    });
  };
  r["hard_swish"] = [](KernelArgs &a) {
    return unary(a, [](float x) {
      return x * std::min(1.0f, std::max(0.0f, x / 6.0f + 0.5f));
    });
  };
  r["sign"] = [](KernelArgs &a) {
    return signedUnary(
        a, [](float x) { return x > 0   ? 1.0f
                                : x < 0 ? -1.0f
                                        : x; },
        [](int64_t x) { return int64_t(x > 0) - int64_t(x < 0); });
  };
  // Halves to even, as ONNX's Round (numpy.round) does.
  r["round"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::nearbyint(x); });
  };
  r["tan"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::tan(x); });
  };
  r["sinh"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::sinh(x); });
  };
  r["cosh"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::cosh(x); });
  };
  r["asin"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::asin(x); });
  };
  r["acos"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::acos(x); });
  };
  r["atan"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::atan(x); });
  };
  r["asinh"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::asinh(x); });
  };
  r["acosh"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::acosh(x); });
  };
  r["atanh"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return std::atanh(x); });
  };
  r["is_inf"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    requireDtype(a.in[0], FSDPRT_F32, "the input");
    requireDtype(a.out[0], FSDPRT_BOOL, "the output");
    bool negative = a.attrs.getInt("detect_negative", 1) != 0;
    bool positive = a.attrs.getInt("detect_positive", 1) != 0;
    Tensor x = a.in[0], y = a.out[0];
    require(x.shape == y.shape, "input " + shapeString(x.shape) +
                                    " and output " + shapeString(y.shape) +
                                    " differ in shape");
    return KernelFn([=]() {
      parallelFor(x.numel, 1, [&](int64_t i) {
        float v = x.as<float>()[i];
        y.as<uint8_t>()[i] = std::isinf(v) && (v < 0 ? negative : positive);
      });
      return std::string();
    });
  };
  r["softsign"] = [](KernelArgs &a) {
    return unary(a, [](float x) { return x / (1.0f + std::fabs(x)); });
  };
  r["elu"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 1.0));
    return unary(
        a, [alpha](float x) { return x < 0 ? alpha * std::expm1(x) : x; });
  };
  r["selu"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 1.6732632));
    float gamma = static_cast<float>(a.attrs.getFloat("gamma", 1.0507010));
    return unary(a, [alpha, gamma](float x) {
      return gamma * (x <= 0 ? alpha * std::expm1(x) : x);
    });
  };
  r["celu"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 1.0));
    require(alpha != 0, "alpha must not be 0");
    return unary(a, [alpha](float x) {
      return std::max(0.0f, x) + std::min(0.0f, alpha * std::expm1(x / alpha));
    });
  };
  r["thresholded_relu"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 1.0));
    return unary(a, [alpha](float x) { return x > alpha ? x : 0.0f; });
  };
  r["shrink"] = [](KernelArgs &a) {
    float bias = static_cast<float>(a.attrs.getFloat("bias", 0.0));
    float lambd = static_cast<float>(a.attrs.getFloat("lambd", 0.5));
    return unary(a, [bias, lambd](float x) {
      return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0f;
    });
  };
  r["leaky_relu"] = [](KernelArgs &a) {
    float alpha = static_cast<float>(a.attrs.getFloat("alpha", 0.01));
    return unary(a, [alpha](float x) { return x < 0 ? alpha * x : x; });
  };
  // Bounds as attributes (the compiler reads Clip's constant inputs); a
  // lower bound above the upper one gives the upper, as ONNX says.
  r["clip"] = [](KernelArgs &a) {
    float lo = static_cast<float>(
        a.attrs.getFloat("min", -std::numeric_limits<float>::infinity()));
    float hi = static_cast<float>(
        a.attrs.getFloat("max", std::numeric_limits<float>::infinity()));
    return unary(a, [lo, hi](float x) {
      return x != x ? x : std::min(std::max(x, lo), hi);
    });
  };
  // The activations share their definitions with linear's epilogue.
  r["tanh"] = [](KernelArgs &a) { return activation(a, Activation::Tanh); };
  r["sigmoid"] = [](KernelArgs &a) {
    return activation(a, Activation::Sigmoid);
  };
  r["relu"] = [](KernelArgs &a) { return activation(a, Activation::Relu); };
  r["silu"] = [](KernelArgs &a) { return activation(a, Activation::Silu); };
  r["activation_grad"] = activationGrad;
  r["gelu"] = [](KernelArgs &a) {
    std::string approximate = a.attrs.getString("approximate", "none");
    require(approximate == "none" || approximate == "tanh",
            "approximate must be none or tanh, not " + approximate);
    return activation(a, approximate == "tanh" ? Activation::GeluTanh
                                               : Activation::Gelu);
  };
  r["neg"] = [](KernelArgs &a) {
    return signedUnary(
        a, [](float x) { return -x; },
        [](int64_t x) {
          return wrapping(x, 0, [](uint64_t p, uint64_t) { return 0 - p; });
        });
  };
  r["abs"] = [](KernelArgs &a) {
    return signedUnary(
        a, [](float x) { return std::fabs(x); },
        [](int64_t x) {
          return x < 0 ? wrapping(x, 0,
                                  [](uint64_t p, uint64_t) { return 0 - p; })
                       : x;
        });
  };
  r["not"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    requireDtype(a.in[0], FSDPRT_BOOL, "the input");
    requireDtype(a.out[0], FSDPRT_BOOL, "the output");
    return unaryOf<uint8_t>(a, [](uint8_t x) -> uint8_t { return !x; });
  };
  // torch's exported scaled_dot_product_attention zeroes the NaN rows of
  // its softmax (a fully masked row) with Where(IsNaN(p), 0, p).
  r["isnan"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    requireDtype(a.in[0], FSDPRT_F32, "the input");
    requireDtype(a.out[0], FSDPRT_BOOL, "the output");
    return unaryOf<float, uint8_t>(
        a, [](float x) -> uint8_t { return std::isnan(x) ? 1 : 0; });
  };
  r["cast"] = cast;
}

} // namespace fsdprt::cpu
