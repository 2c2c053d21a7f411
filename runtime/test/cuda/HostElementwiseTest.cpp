//===- HostElementwiseTest.cpp - ONNX's unary and binary functions --------===//
//
// cuda-host: the elementwise bodies added for ONNX's activations, rounding,
// trigonometric and hyperbolic functions (with their attributes), is_inf
// and isnan, int64 sign, the broadcasting mod, max, min and prelu, the
// integer arithmetic of i32, i16, i8 and u8 and int64 pow, run
// on the host against the CPU backend's kernels: random inputs with the
// values that matter placed among them (signed zeros, infinities, NaN,
// halves for round, the thresholds of the piecewise functions), sizes of 1,
// not multiples of a block and long, broadcasts of up to 10 dims. Then the
// same ops through the backend on "fake-cuda:strict" (own kernels only),
// fp32, bf16 and f16 (widened), bit for bit with the CPU, and the CPU's
// refusals (celu's alpha 0, a float mod with fmod 0) named as it names them.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/elementwise.h"
#include "../../backends/cuda/kernels/logic.h"

#include "../../src/half.h"

#include <limits>

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Values every function is checked at, placed at the front of an input.
const std::vector<float> kSpecial = {0.0f, -0.0f,  kInf,  -kInf, NAN,   0.5f,
                                     1.5f, 2.5f,   -0.5f, -2.5f, 1.0f,  -1.0f,
                                     3.0f, -3.0f,  0.4f,  -0.4f, 6.0f,  -6.0f,
                                     1e-7f, 88.0f, -88.0f};

/// One unary function: its op, attributes and the body's parameters.
struct UnaryCase {
  cuda::Unary op;
  AttrList attrs;
  cuda::UnaryParams params;
};

/// The functions with attributes at values other than their defaults, and
/// those with defaults at the CPU's defaults.
std::vector<UnaryCase> unaryCases() {
  using U = cuda::Unary;
  std::vector<UnaryCase> cases;
  for (U op : {U::Floor, U::Ceil, U::Round, U::Sign, U::Softsign, U::Softplus,
               U::HardSwish, U::Sin, U::Cos, U::Tan, U::Sinh, U::Cosh, U::Asin,
               U::Acos, U::Atan, U::Asinh, U::Acosh, U::Atanh})
    cases.push_back({op, {}, {}});
  cases.push_back({U::HardSigmoid, {}, {0.2f, 0.5f}});
  cases.push_back(
      {U::HardSigmoid, {{"alpha", 0.3}, {"beta", 0.25}}, {0.3f, 0.25f}});
  cases.push_back({U::Elu, {}, {1.0f}});
  cases.push_back({U::Elu, {{"alpha", 0.7}}, {0.7f}});
  cases.push_back({U::Selu,
                   {},
                   {static_cast<float>(1.6732632), static_cast<float>(1.0507010)}});
  cases.push_back(
      {U::Selu, {{"alpha", 1.5}, {"gamma", 2.0}}, {1.5f, 2.0f}});
  cases.push_back({U::Celu, {}, {1.0f}});
  cases.push_back({U::Celu, {{"alpha", 0.4}}, {0.4f}});
  cases.push_back({U::LeakyRelu, {}, {0.01f}});
  cases.push_back({U::LeakyRelu, {{"alpha", 0.2}}, {0.2f}});
  cases.push_back({U::ThresholdedRelu, {}, {1.0f}});
  cases.push_back({U::ThresholdedRelu, {{"alpha", 0.4}}, {0.4f}});
  cases.push_back({U::Shrink, {}, {0.0f, 0.5f}});
  cases.push_back({U::Shrink, {{"bias", 0.25}, {"lambd", 1.5}}, {0.25f, 1.5f}});
  cases.push_back({U::Clip, {}, {-kInf, kInf}});
  cases.push_back({U::Clip, {{"min", -0.5}, {"max", 1.5}}, {-0.5f, 1.5f}});
  return cases;
}

/// n inputs of `op`: kSpecial first, then normal values (scaled by 3) in
/// the function's domain where it has one.
std::vector<float> inputsOf(cuda::Unary op, int64_t n, unsigned seed) {
  std::vector<float> x = randomFloats(n, seed);
  for (float &v : x) {
    if (op == cuda::Unary::Asin || op == cuda::Unary::Acos ||
        op == cuda::Unary::Atanh)
      v = std::tanh(v);
    else if (op == cuda::Unary::Acosh)
      v = 1 + std::fabs(v) * 3;
    else
      v *= 3;
  }
  for (size_t i = 0; i < kSpecial.size() && i < x.size(); ++i)
    x[i] = kSpecial[i];
  return x;
}

TEST(CudaHost, AttributedUnaryBodiesEqualTheCpuBackend) {
  unsigned seed = 40;
  for (const UnaryCase &c : unaryCases())
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(cuda::unaryName(c.op)) + " n " +
                   std::to_string(n) + " attributes " +
                   std::to_string(c.attrs.size()));
      std::vector<float> x = inputsOf(c.op, n, seed++), y(n);
      cuda::withUnary(c.op, [&](auto f) {
        cuda::hostForEach(
            cuda::UnaryBody<decltype(f)::value>{x.data(), y.data(), c.params},
            n);
      });
      std::vector<float> want =
          cpu(cuda::unaryName(c.op), {f32({n}, x)}, {n}, c.attrs);
      expectClose(y, want, 1e-6);
      // Signed zeros and infinities kept as the CPU keeps them.
      for (size_t i = 0; i < kSpecial.size() && i < y.size(); ++i)
        EXPECT_TRUE(std::isnan(want[i]) ||
                    std::signbit(y[i]) == std::signbit(want[i]))
            << "at " << i;
    }
}

TEST(CudaHost, IsInfAndIsNanEqualTheCpuBackend) {
  for (int64_t n : kSizes)
    for (int detect = 0; detect < 5; ++detect) {
      // detect 0-3: is_inf's two flags; 4: isnan.
      bool nan = detect == 4, negative = detect & 1, positive = detect & 2;
      SCOPED_TRACE("n " + std::to_string(n) + " case " +
                   std::to_string(detect));
      std::vector<float> x = inputsOf(cuda::Unary::Exp, n, 70 + detect);
      for (size_t i = 0; i < x.size(); i += 7) // infinities among the rest
        x[i] = i % 2 ? kInf : -kInf;
      std::vector<uint8_t> y(n, 7);
      cuda::hostForEach(
          cuda::FloatClassBody{x.data(), y.data(), nan, negative, positive},
          n);
      AttrList attrs;
      if (!nan)
        attrs = {{"detect_negative", int64_t(negative)},
                 {"detect_positive", int64_t(positive)}};
      Result r = runOp(nan ? "isnan" : "is_inf", {f32({n}, x)},
                       {{plan::DType::Bool, {n}}}, attrs);
      ASSERT_EQ(r.error, "");
      EXPECT_EQ(y, r.outputs[0].as<uint8_t>());
    }
}

TEST(CudaHost, Int64SignNegAndAbsEqualTheCpuBackend) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  for (int64_t n : kSizes) {
    std::mt19937_64 gen(n);
    std::vector<int64_t> x(n), y(n);
    for (int64_t &v : x)
      v = static_cast<int64_t>(gen()) >> (gen() % 64);
    std::vector<int64_t> special = {0, 1, -1, lo, hi};
    for (size_t i = 0; i < special.size() && i < x.size(); ++i)
      x[i] = special[i];
    for (cuda::Unary op : {cuda::Unary::Sign, cuda::Unary::Neg,
                           cuda::Unary::Abs}) {
      SCOPED_TRACE(std::string(cuda::unaryName(op)) + " n " +
                   std::to_string(n));
      cuda::hostForEach(cuda::Unary64{op, x.data(), y.data()}, n);
      Result r = runOp(cuda::unaryName(op), {i64({n}, x)},
                       {{plan::DType::I64, {n}}});
      ASSERT_EQ(r.error, "");
      EXPECT_EQ(y, r.outputs[0].as<int64_t>());
    }
  }
}

struct BinaryCase {
  Shape a, b, out;
};

const std::vector<BinaryCase> kBroadcasts = {
    {{1}, {1}, {1}},
    {{257}, {257}, {257}},
    {{100003}, {}, {100003}},
    {{64, 1025}, {1025}, {64, 1025}},
    {{2, 1, 4}, {3, 1}, {2, 3, 4}},
    {{1, 1, 1, 1, 1, 1, 1, 1, 1, 7},
     {2, 1, 3, 1, 2, 1, 2, 1, 2, 1},
     {2, 1, 3, 1, 2, 1, 2, 1, 2, 7}}, // 10 dims, 6 after collapsing
};

/// A binary body on T against the CPU's op, bit for bit (its operands'
/// values given by `draw(n, seed)`).
template <cuda::Binary Op, typename T, typename Draw>
void checkBinary(plan::DType dtype, const AttrList &attrs, Draw draw) {
  SCOPED_TRACE(std::string(cuda::binaryName(Op)) + " of " +
               fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  unsigned seed = 900 + 10 * static_cast<unsigned>(Op);
  for (const BinaryCase &c : kBroadcasts) {
    std::vector<T> a = draw(numel(c.a), seed++), b = draw(numel(c.b), seed++);
    std::vector<T> y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.a, c.b});
    cuda::hostForEach(cuda::BinaryBody<Op, T>{plan, a.data(), b.data(), y.data()},
                      numel(c.out));
    Result r = runOp(cuda::binaryName(Op),
                     {valueOf(dtype, c.a, a), valueOf(dtype, c.b, b)},
                     {{dtype, c.out}}, attrs);
    ASSERT_EQ(r.error, "");
    std::vector<T> want = r.outputs[0].as<T>();
    ASSERT_EQ(y.size(), want.size());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(T)), 0)
        << "shape " << c.out.size() << " dims, " << y.size() << " elements";
  }
}

/// Normal floats with NaN, infinities and zeros among them.
std::vector<float> floatsWithSpecials(int64_t n, unsigned seed) {
  std::vector<float> v = randomFloats(n, seed);
  for (float &x : v)
    x *= 4;
  for (size_t i = seed % 3; i < v.size(); i += 5)
    v[i] = kSpecial[(i / 5 + seed) % kSpecial.size()];
  return v;
}

/// Small int64s of both signs (zero divisors among them), and the extremes.
std::vector<int64_t> smallInts(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> v(n);
  for (int64_t &x : v)
    x = static_cast<int64_t>(gen() % 41) - 20;
  if (n > 3) {
    v[1] = std::numeric_limits<int64_t>::min();
    v[2] = std::numeric_limits<int64_t>::max();
    v[3] = -1;
  }
  return v;
}

TEST(CudaHost, ModMaxMinAndPreluBodiesEqualTheCpuBackendBitForBit) {
  using B = cuda::Binary;
  const auto F32T = plan::DType::F32, I64T = plan::DType::I64;
  AttrList fmod = {{"fmod", int64_t(1)}};
  checkBinary<B::Mod, float>(F32T, fmod, floatsWithSpecials);
  checkBinary<B::Mod, int64_t>(I64T, fmod, smallInts);
  checkBinary<B::FloorMod, int64_t>(I64T, {}, smallInts);
  checkBinary<B::Max, float>(F32T, {}, floatsWithSpecials);
  checkBinary<B::Min, float>(F32T, {}, floatsWithSpecials);
  checkBinary<B::Max, int64_t>(I64T, {}, smallInts);
  checkBinary<B::Min, int64_t>(I64T, {}, smallInts);
  checkBinary<B::PRelu, float>(F32T, {}, floatsWithSpecials);
}

/// Small integers of T (both signs where T has them; zero divisors among
/// them) and T's extremes and -1.
template <typename T> std::vector<T> narrowInts(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (T &x : v)
    x = static_cast<T>(static_cast<int>(gen() % 41) - 20);
  if (n > 3) {
    v[1] = std::numeric_limits<T>::min();
    v[2] = std::numeric_limits<T>::max();
    v[3] = static_cast<T>(-1);
  }
  return v;
}

/// Every arithmetic body a narrow integer T has, against the CPU.
template <typename T> void checkNarrowArithmetic(plan::DType dtype) {
  using B = cuda::Binary;
  AttrList fmod = {{"fmod", int64_t(1)}};
  checkBinary<B::Add, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Sub, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Mul, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Div, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Mod, T>(dtype, fmod, narrowInts<T>);
  checkBinary<B::FloorMod, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Max, T>(dtype, {}, narrowInts<T>);
  checkBinary<B::Min, T>(dtype, {}, narrowInts<T>);
}

TEST(CudaHost, NarrowIntegerArithmeticWrapsAndTruncatesAsTheCpu) {
  // In int64, wrapped back: INT32_MIN / -1 and 127 + 1 wrap, x / 0 = 0.
  checkNarrowArithmetic<int32_t>(plan::DType::I32);
  checkNarrowArithmetic<int16_t>(plan::DType::I16);
  checkNarrowArithmetic<int8_t>(plan::DType::I8);
  checkNarrowArithmetic<uint8_t>(plan::DType::U8);
}

/// pow of int64 bases by exponents of E (`exponents(n, seed)`) against
/// the CPU's, bit for bit, over the broadcasts.
template <typename E, typename Draw>
void checkPowInt64(plan::DType exponentType, Draw exponents) {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(exponentType)));
  unsigned seed = 1700;
  for (const BinaryCase &c : kBroadcasts) {
    // Bases in [-20, 20] but 0 ([1, 20] for a floating exponent): no
    // power leaves int64's range or is NaN or infinite (undefined).
    std::vector<int64_t> a(numel(c.a));
    std::mt19937 gen(seed++);
    for (int64_t &x : a) {
      x = static_cast<int64_t>(gen() % 20) + 1;
      if (std::is_integral_v<E> && gen() % 2)
        x = -x;
    }
    std::vector<E> b = exponents(numel(c.b), seed++);
    std::vector<int64_t> y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.a, c.b});
    cuda::hostForEach(cuda::PowInt64Body<E>{plan, a.data(), b.data(), y.data()},
                      numel(c.out));
    Result r = runOp(
        "pow",
        {valueOf(plan::DType::I64, c.a, a), valueOf(exponentType, c.b, b)},
        {{plan::DType::I64, c.out}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<int64_t>())
        << "shape " << c.out.size() << " dims";
  }
}

TEST(CudaHost, Int64PowEqualsTheCpuBackend) {
  // Exponents -2 .. 12 (negatives: 1/x truncated toward zero), fractional
  // ones in floating point.
  auto ints = [](int64_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::vector<int64_t> v(n);
    for (int64_t &x : v)
      x = static_cast<int64_t>(gen() % 15) - 2;
    return v;
  };
  checkPowInt64<int64_t>(plan::DType::I64, ints);
  checkPowInt64<int32_t>(plan::DType::I32, [&](int64_t n, unsigned seed) {
    std::vector<int64_t> w = ints(n, seed);
    return std::vector<int32_t>(w.begin(), w.end());
  });
  checkPowInt64<float>(plan::DType::F32, [](int64_t n, unsigned seed) {
    std::vector<float> v = randomFloats(n, seed);
    for (float &x : v)
      x = x * 4 + 2; // around [-2, 6]: fractional and negative powers
    return v;
  });
  checkPowInt64<double>(plan::DType::F64, [&](int64_t n, unsigned seed) {
    std::vector<int64_t> w = ints(n, seed);
    std::vector<double> v(w.begin(), w.end());
    for (size_t i = 0; i < v.size(); i += 3)
      v[i] += 0.5;
    return v;
  });
}

TEST(CudaHost, IntegerArithmeticRunsOnTheStrictFakeDevice) {
  auto expectAlike = [](const std::string &op, const std::vector<Value> &ins,
                        plan::DType out, const Shape &shape,
                        const AttrList &attrs = {}) {
    SCOPED_TRACE(op + " to " +
                 fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(out)));
    Result cpu = runOp(op, ins, {{out, shape}}, attrs);
    Result fake = runOp(op, ins, {{out, shape}}, attrs, 2, "fake-cuda:strict");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
  };
  const std::pair<plan::DType, std::vector<int64_t>> narrow[] = {
      {plan::DType::I32, {7, -7, INT32_MAX, INT32_MIN, 0, 100000}},
      {plan::DType::I16, {7, -7, INT16_MAX, INT16_MIN, 0, 300}},
      {plan::DType::I8, {7, -7, 127, -128, 0, 100}},
      {plan::DType::U8, {7, 249, 255, 128, 0, 100}}};
  for (const auto &[dtype, values] : narrow) {
    // The values in dtype, made by the CPU's cast; a row against a column.
    Result a = runOp("cast", {i64({6, 1}, values)}, {{dtype, {6, 1}}});
    Result b = runOp("cast", {i64({4}, {2, -1, 0, 3})}, {{dtype, {4}}});
    ASSERT_EQ(a.error, "");
    ASSERT_EQ(b.error, "");
    for (const char *op : {"add", "sub", "mul", "div", "max", "min"})
      expectAlike(op, {a.outputs[0], b.outputs[0]}, dtype, {6, 4});
    expectAlike("mod", {a.outputs[0], b.outputs[0]}, dtype, {6, 4});
    expectAlike("mod", {a.outputs[0], b.outputs[0]}, dtype, {6, 4},
                {{"fmod", int64_t(1)}});
  }
  // Powers int64 holds (a negative one of 0, or a fractional one of a
  // negative base, is undefined).
  Value base = i64({5, 1}, {3, -2, 4, 7, -1});
  expectAlike("pow", {base, i64({3}, {0, 2, 5})}, plan::DType::I64, {5, 3});
  expectAlike("pow", {base, i32({3}, {1, 3, -1})}, plan::DType::I64, {5, 3});
  Value positive = i64({5, 1}, {3, 2, 0, 7, 1});
  expectAlike("pow", {positive, f32({3}, {0.5f, 2.0f, 1.5f})}, plan::DType::I64,
              {5, 3});
  expectAlike("pow", {positive, f64({3}, {3.0, 2.0, 0.25})}, plan::DType::I64,
              {5, 3});
}

/// Bytes 0 and 1, as Bool tensors hold them.
std::vector<uint8_t> bits(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t &x : v)
    x = gen() % 2;
  return v;
}

template <cuda::Logic Op, typename T, typename Draw>
void checkLogic(plan::DType dtype, Draw draw) {
  SCOPED_TRACE(std::string(cuda::logicName(Op)) + " of " +
               fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  unsigned seed = 700 + 10 * static_cast<unsigned>(Op);
  for (const BinaryCase &c : kBroadcasts) {
    std::vector<T> a = draw(numel(c.a), seed++), b = draw(numel(c.b), seed++);
    if constexpr (std::is_same_v<T, float>)
      for (size_t i = 0; i < b.size(); i += 3)
        b[i] = a[i % a.size()]; // equal pairs
    std::vector<uint8_t> y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.a, c.b});
    cuda::hostForEach(cuda::LogicBody<Op, T>{plan, a.data(), b.data(), y.data()},
                      numel(c.out));
    Result r = runOp(cuda::logicName(Op),
                     {valueOf(dtype, c.a, a), valueOf(dtype, c.b, b)},
                     {{plan::DType::Bool, c.out}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<uint8_t>());
  }
}

TEST(CudaHost, XorAndTheNonStrictComparisonsEqualTheCpuBackend) {
  using L = cuda::Logic;
  const auto F32T = plan::DType::F32, I64T = plan::DType::I64,
             BoolT = plan::DType::Bool;
  checkLogic<L::Xor, uint8_t>(BoolT, bits);
  checkLogic<L::GreaterOrEqual, float>(F32T, floatsWithSpecials);
  checkLogic<L::GreaterOrEqual, int64_t>(I64T, smallInts);
  checkLogic<L::GreaterOrEqual, uint8_t>(BoolT, bits);
  checkLogic<L::LessOrEqual, float>(F32T, floatsWithSpecials);
  checkLogic<L::LessOrEqual, int64_t>(I64T, smallInts);
  checkLogic<L::LessOrEqual, uint8_t>(BoolT, bits);
}

//===----------------------------------------------------------------------===//
// Through the backend on the strict fake device
//===----------------------------------------------------------------------===//

constexpr const char *kStrict = "fake-cuda:strict";
using Outputs = std::vector<std::pair<plan::DType, Shape>>;

/// `v` stored as `dtype` (F32, BF16 or F16; halves rounded as the CPU
/// rounds).
Value floats(plan::DType dtype, const Shape &shape, const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

/// `op` on the CPU and on the strict fake device: the same bytes.
void expectSameBytes(const std::string &op, const std::vector<Value> &ins,
                     const Outputs &outs, const AttrList &attrs = {}) {
  Result cpu = runOp(op, ins, outs, attrs);
  Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_EQ(fake.outputs[i].bytes, cpu.outputs[i].bytes) << "output " << i;
}

const plan::DType kFloatTypes[] = {plan::DType::F32, plan::DType::BF16,
                                   plan::DType::F16};

TEST(CudaHost, UnaryFunctionsRunOnTheStrictFakeDeviceInEveryFloatType) {
  unsigned seed = 1500;
  for (const UnaryCase &c : unaryCases())
    for (plan::DType dtype : kFloatTypes) {
      SCOPED_TRACE(std::string(cuda::unaryName(c.op)) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      Shape shape = {3, 257};
      std::vector<float> x = inputsOf(c.op, numel(shape), seed++);
      expectSameBytes(cuda::unaryName(c.op), {floats(dtype, shape, x)},
                      {{dtype, shape}}, c.attrs);
    }
  Shape shape = {5, 7};
  for (plan::DType dtype : kFloatTypes) {
    Value x = floats(dtype, shape, inputsOf(cuda::Unary::Exp, 35, 1600));
    expectSameBytes("is_inf", {x}, {{plan::DType::Bool, shape}},
                    {{"detect_negative", int64_t(0)}});
    expectSameBytes("isnan", {x}, {{plan::DType::Bool, shape}});
  }
  expectSameBytes("sign", {i64({4}, {5, 0, -3, std::numeric_limits<int64_t>::min()})},
                  {{plan::DType::I64, {4}}});
}

TEST(CudaHost, BinaryFunctionsRunOnTheStrictFakeDeviceInEveryFloatType) {
  Shape as = {6, 1, 5}, bs = {4, 1}, out = {6, 4, 5};
  std::vector<float> a = floatsWithSpecials(30, 1), b = floatsWithSpecials(4, 2);
  for (plan::DType dtype : kFloatTypes) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    Value va = floats(dtype, as, a), vb = floats(dtype, bs, b);
    for (const char *op : {"max", "min", "prelu"})
      expectSameBytes(op, {va, vb}, {{dtype, out}});
    expectSameBytes("mod", {va, vb}, {{dtype, out}}, {{"fmod", int64_t(1)}});
    for (const char *op : {"greater_or_equal", "less_or_equal"})
      expectSameBytes(op, {va, vb}, {{plan::DType::Bool, out}});
  }
  Value ia = i64({6, 1}, {7, -7, 0, 9, -1, std::numeric_limits<int64_t>::min()});
  Value ib = i64({4}, {3, -3, 0, -1});
  for (int64_t fmod : {0, 1})
    expectSameBytes("mod", {ia, ib}, {{plan::DType::I64, {6, 4}}},
                    {{"fmod", fmod}});
  for (const char *op : {"max", "min"})
    expectSameBytes(op, {ia, ib}, {{plan::DType::I64, {6, 4}}});
  expectSameBytes("xor", {boolean({3, 1}, {1, 0, 1}), boolean({2}, {1, 0})},
                  {{plan::DType::Bool, {3, 2}}});
}

TEST(CudaHost, TheStrictFakeDeviceRefusesWhatTheCpuRefuses) {
  auto expectRefusedAlike = [](const std::string &op, const std::vector<Value> &ins,
                               const Outputs &outs, const AttrList &attrs,
                               const std::string &says) {
    Result cpu = runOp(op, ins, outs, attrs);
    Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
    EXPECT_NE(cpu.error.find(says), std::string::npos) << cpu.error;
    EXPECT_EQ(fake.error, cpu.error);
  };
  Value x = f32({4}, {1, -2, 3, -4});
  expectRefusedAlike("celu", {x}, {{F32, {4}}}, {{"alpha", 0.0}},
                     "alpha must not be 0");
  expectRefusedAlike("mod", {x, x}, {{F32, {4}}}, {},
                     "takes floats only with fmod = 1");
}

} // namespace
