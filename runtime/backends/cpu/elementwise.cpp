//===- elementwise.cpp - Elementwise CPU kernels with broadcasting --------===//

#include "kernels.h"

#include <cmath>
#include <cstring>

namespace fsdprt::cpu {
namespace {

/// Iterates an output of `shape` row by row (rows along the last dim),
/// giving each input's element offset at the row's start and its stride
/// along the row.
struct Broadcast {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;
  int64_t inner = 1, rows = 1;

  Broadcast(const std::vector<int64_t> &out, const std::vector<Tensor> &ins,
            size_t count)
      : shape(out) {
    for (size_t i = 0; i < count; ++i)
      strides.push_back(broadcastStrides(
          ins[i].shape, out, ("input " + std::to_string(i)).c_str()));
    inner = shape.empty() ? 1 : shape.back();
    rows = inner ? product(shape, 0, shape.size()) / inner : 0;
  }

  /// Offsets of each input at the start of `row`.
  void offsets(int64_t row, int64_t *out) const {
    for (size_t i = 0; i < strides.size(); ++i)
      out[i] = 0;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
      int64_t index = row % shape[d];
      row /= shape[d];
      for (size_t i = 0; i < strides.size(); ++i)
        out[i] += index * strides[i][d];
    }
  }

  int64_t step(size_t input) const {
    return shape.empty() ? 0 : strides[input].back();
  }
};

template <typename In, typename Out, typename Op>
KernelFn binary(KernelArgs &args, Op op) {
  Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  auto plan = std::make_shared<Broadcast>(y.shape, args.in, 2);
  return [=]() {
    const In *pa = a.as<In>(), *pb = b.as<In>();
    Out *py = y.as<Out>();
    int64_t inner = plan->inner, sa = plan->step(0), sb = plan->step(1);
    parallelFor(plan->rows, inner, [&](int64_t row) {
      int64_t off[2];
      plan->offsets(row, off);
      const In *ra = pa + off[0], *rb = pb + off[1];
      Out *ry = py + row * inner;
      for (int64_t j = 0; j < inner; ++j)
        ry[j] = op(ra[j * sa], rb[j * sb]);
    });
    return std::string();
  };
}

/// Arithmetic on F32, or I64 when `integers`.
template <typename OpF, typename OpI>
KernelFn arithmetic(KernelArgs &args, OpF opf, OpI opi, bool integers) {
  requireArity(args, 2, 2, 1);
  fsdprt_dtype_t t = args.in[0].dtype;
  require(args.in[1].dtype == t && args.out[0].dtype == t,
          "inputs and output must have one dtype");
  if (t == FSDPRT_F32)
    return binary<float, float>(args, opf);
  require(integers && t == FSDPRT_I64,
          std::string("does not support ") + fsdprt_dtype_name(t));
  return binary<int64_t, int64_t>(args, opi);
}

template <typename Op> KernelFn compare(KernelArgs &args, Op op) {
  requireArity(args, 2, 2, 1);
  requireDtype(args.out[0], FSDPRT_BOOL, "the output");
  fsdprt_dtype_t t = args.in[0].dtype;
  require(args.in[1].dtype == t, "inputs must have one dtype");
  switch (t) {
  case FSDPRT_F32:
    return binary<float, uint8_t>(args, op);
  case FSDPRT_I64:
    return binary<int64_t, uint8_t>(args, op);
  case FSDPRT_BOOL:
    return binary<uint8_t, uint8_t>(args, op);
  default:
    throw KernelError(std::string("does not compare ") + fsdprt_dtype_name(t));
  }
}

template <typename Op> KernelFn logical(KernelArgs &args, Op op) {
  requireArity(args, 2, 2, 1);
  for (const Tensor &t : {args.in[0], args.in[1], args.out[0]})
    requireDtype(t, FSDPRT_BOOL, "every operand");
  return binary<uint8_t, uint8_t>(args, op);
}

template <typename T, typename Op> KernelFn unaryOf(KernelArgs &args, Op op) {
  Tensor x = args.in[0], y = args.out[0];
  require(x.numel == y.numel, "input and output differ in size");
  return [=]() {
    const T *px = x.as<T>();
    T *py = y.as<T>();
    parallelFor(x.numel, 8, [&](int64_t i) { py[i] = op(px[i]); });
    return std::string();
  };
}

template <typename Op> KernelFn unary(KernelArgs &args, Op op) {
  requireArity(args, 1, 1, 1);
  requireDtype(args.in[0], FSDPRT_F32, "the input");
  requireDtype(args.out[0], FSDPRT_F32, "the output");
  return unaryOf<float>(args, op);
}

float geluErf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
}

float geluTanh(float x) {
  // 0.5 (1 + tanh(u)) = sigmoid(2u), u = sqrt(2 / pi) (x + 0.044715 x^3):
  // one exp instead of libm's slow tanh.
  const float k2 = 2 * 0.7978845608028654f;
  return x / (1.0f + std::exp(-k2 * (x + 0.044715f * x * x * x)));
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

KernelFn where(KernelArgs &args) {
  requireArity(args, 3, 3, 1);
  requireDtype(args.in[0], FSDPRT_BOOL, "the condition");
  fsdprt_dtype_t t = args.out[0].dtype;
  require(args.in[1].dtype == t && args.in[2].dtype == t,
          "both branches and the output must have one dtype");
  size_t size = fsdprt_dtype_size(t);
  Tensor c = args.in[0], a = args.in[1], b = args.in[2], y = args.out[0];
  auto plan = std::make_shared<Broadcast>(y.shape, args.in, 3);
  return [=]() {
    int64_t inner = plan->inner;
    int64_t sc = plan->step(0), sa = plan->step(1), sb = plan->step(2);
    parallelFor(plan->rows, inner, [&](int64_t row) {
      int64_t off[3];
      plan->offsets(row, off);
      const uint8_t *rc = c.as<uint8_t>() + off[0];
      const char *ra = a.as<char>() + off[1] * size;
      const char *rb = b.as<char>() + off[2] * size;
      char *ry = y.as<char>() + row * inner * size;
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(ry + j * size,
                    rc[j * sc] ? ra + j * sa * size : rb + j * sb * size, size);
    });
    return std::string();
  };
}

/// Reads element i of `t` as a double.
double load(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case FSDPRT_F32: return t.as<float>()[i];
  case FSDPRT_F64: return t.as<double>()[i];
  case FSDPRT_I64: return static_cast<double>(t.as<int64_t>()[i]);
  case FSDPRT_I32: return t.as<int32_t>()[i];
  case FSDPRT_I16: return t.as<int16_t>()[i];
  case FSDPRT_I8: return t.as<int8_t>()[i];
  case FSDPRT_U8: case FSDPRT_BOOL: return t.as<uint8_t>()[i];
  default: return 0;
  }
}

KernelFn cast(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  Tensor x = args.in[0], y = args.out[0];
  require(x.numel == y.numel, "input and output differ in size");
  for (const Tensor &t : {x, y})
    require(t.dtype != FSDPRT_F16 && t.dtype != FSDPRT_BF16,
            "does not convert 16-bit floats yet");
  return [=]() {
    parallelFor(x.numel, 4, [&](int64_t i) {
      // Integer sources convert exactly through int64, floats through double.
      bool integral = x.dtype != FSDPRT_F32 && x.dtype != FSDPRT_F64;
      int64_t iv = integral ? (x.dtype == FSDPRT_I64 ? x.as<int64_t>()[i]
                                                     : static_cast<int64_t>(load(x, i)))
                            : 0;
      double dv = integral ? static_cast<double>(iv) : load(x, i);
      switch (y.dtype) {
      case FSDPRT_F32: y.as<float>()[i] = static_cast<float>(dv); break;
      case FSDPRT_F64: y.as<double>()[i] = dv; break;
      case FSDPRT_I64: y.as<int64_t>()[i] = integral ? iv : static_cast<int64_t>(dv); break;
      case FSDPRT_I32: y.as<int32_t>()[i] = static_cast<int32_t>(integral ? iv : static_cast<int64_t>(dv)); break;
      case FSDPRT_I16: y.as<int16_t>()[i] = static_cast<int16_t>(integral ? iv : static_cast<int64_t>(dv)); break;
      case FSDPRT_I8: y.as<int8_t>()[i] = static_cast<int8_t>(integral ? iv : static_cast<int64_t>(dv)); break;
      case FSDPRT_U8: y.as<uint8_t>()[i] = static_cast<uint8_t>(integral ? iv : static_cast<int64_t>(dv)); break;
      case FSDPRT_BOOL: y.as<uint8_t>()[i] = dv != 0; break;
      default: break;
      }
    });
    return std::string();
  };
}

} // namespace

void registerElementwise(Registry &r) {
  r["add"] = [](KernelArgs &a) {
    return arithmetic(a, [](float x, float y) { return x + y; },
                      [](int64_t x, int64_t y) { return x + y; }, true);
  };
  r["sub"] = [](KernelArgs &a) {
    return arithmetic(a, [](float x, float y) { return x - y; },
                      [](int64_t x, int64_t y) { return x - y; }, true);
  };
  r["mul"] = [](KernelArgs &a) {
    return arithmetic(a, [](float x, float y) { return x * y; },
                      [](int64_t x, int64_t y) { return x * y; }, true);
  };
  r["div"] = [](KernelArgs &a) {
    // Integer division truncates toward zero (ONNX); division by zero is 0
    // rather than a trap.
    return arithmetic(a, [](float x, float y) { return x / y; },
                      [](int64_t x, int64_t y) { return y ? x / y : 0; }, true);
  };
  r["pow"] = [](KernelArgs &a) {
    return arithmetic(
        a,
        [](float x, float y) {
          return y == 2.0f ? x * x : std::pow(x, y);
        },
        [](int64_t, int64_t) { return int64_t(0); }, false);
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
  r["and"] = [](KernelArgs &a) {
    return logical(a, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
  };
  r["or"] = [](KernelArgs &a) {
    return logical(a, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
  };
  r["where"] = where;
  r["exp"] = [](KernelArgs &a) { return unary(a, [](float x) { return std::exp(x); }); };
  r["log"] = [](KernelArgs &a) { return unary(a, [](float x) { return std::log(x); }); };
  r["sqrt"] = [](KernelArgs &a) { return unary(a, [](float x) { return std::sqrt(x); }); };
  r["reciprocal"] = [](KernelArgs &a) { return unary(a, [](float x) { return 1.0f / x; }); };
  r["tanh"] = [](KernelArgs &a) { return unary(a, [](float x) { return std::tanh(x); }); };
  r["sigmoid"] = [](KernelArgs &a) { return unary(a, sigmoid); };
  r["relu"] = [](KernelArgs &a) { return unary(a, [](float x) { return x > 0 ? x : 0.0f; }); };
  r["erf"] = [](KernelArgs &a) { return unary(a, [](float x) { return std::erf(x); }); };
  r["silu"] = [](KernelArgs &a) { return unary(a, [](float x) { return x * sigmoid(x); }); };
  r["gelu"] = [](KernelArgs &a) {
    std::string approximate = a.attrs.getString("approximate", "none");
    require(approximate == "none" || approximate == "tanh",
            "approximate must be none or tanh, not " + approximate);
    return approximate == "tanh" ? unary(a, geluTanh) : unary(a, geluErf);
  };
  r["neg"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    if (a.in[0].dtype == FSDPRT_I64)
      return unaryOf<int64_t>(a, [](int64_t x) { return -x; });
    return unary(a, [](float x) { return -x; });
  };
  r["abs"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    if (a.in[0].dtype == FSDPRT_I64)
      return unaryOf<int64_t>(a, [](int64_t x) { return x < 0 ? -x : x; });
    return unary(a, [](float x) { return std::fabs(x); });
  };
  r["not"] = [](KernelArgs &a) {
    requireArity(a, 1, 1, 1);
    requireDtype(a.in[0], FSDPRT_BOOL, "the input");
    requireDtype(a.out[0], FSDPRT_BOOL, "the output");
    return unaryOf<uint8_t>(a, [](uint8_t x) -> uint8_t { return !x; });
  };
  r["cast"] = cast;
}

} // namespace fsdprt::cpu
