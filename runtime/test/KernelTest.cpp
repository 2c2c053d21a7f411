//===- KernelTest.cpp - Every CPU kernel against plain loops --------------===//
//
// Each test runs a one-kernel plan through the public C API (two threads,
// and tensors large enough that the parallel paths run too) and compares
// the output with a reference computed here by naive loops in double, or
// with torch's (attention, training batch norm: files the gen_*_ref.py
// scripts write at build time).
//
//===----------------------------------------------------------------------===//

#include "SessionHarness.h"

#include "../src/half.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

const auto F32 = plan::DType::F32;
const auto I64 = plan::DType::I64;
const auto I32 = plan::DType::I32;
const auto F64 = plan::DType::F64;
const auto BOOL = plan::DType::Bool;

/// Runs `op` and expects success; returns output 0 as floats.
std::vector<float> runF32(const std::string &op, const std::vector<Value> &ins,
                          const Shape &out, const AttrList &attrs = {}) {
  Result r = runOp(op, ins, {{F32, out}}, attrs);
  EXPECT_EQ(r.error, "");
  return r.error.empty() ? r.outputs[0].as<float>() : std::vector<float>();
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

/// A reference for a broadcasting binary op over flat indices of `out`.
std::vector<double> binaryRef(const Shape &out, const Shape &as,
                              const std::vector<float> &a, const Shape &bs,
                              const std::vector<float> &b,
                              const std::function<double(double, double)> &f) {
  std::vector<double> want(numel(out));
  for (int64_t i = 0; i < numel(out); ++i)
    want[i] = f(a[broadcastIndex(i, out, as)], b[broadcastIndex(i, out, bs)]);
  return want;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

struct BinaryCase {
  Shape a, b, out;
};

TEST(Kernels, ArithmeticBroadcastsLikeNumPy) {
  const std::vector<BinaryCase> cases = {
      {{64, 1024}, {64, 1024}, {64, 1024}}, // same shape, parallel
      {{64, 1024}, {1024}, {64, 1024}},     // row vector
      {{}, {3, 5}, {3, 5}},                 // scalar on the left
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},       // both stretched
      {{1, 4}, {3, 1}, {3, 4}},
      {{2, 3, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}},
  };
  const std::vector<
      std::pair<std::string, std::function<double(double, double)>>>
      ops = {{"add", [](double x, double y) { return x + y; }},
             {"sub", [](double x, double y) { return x - y; }},
             {"mul", [](double x, double y) { return x * y; }},
             {"div", [](double x, double y) { return x / y; }},
             {"pow", [](double x, double y) { return std::pow(x, y); }}};
  unsigned seed = 1;
  for (const BinaryCase &c : cases)
    for (const auto &[op, f] : ops) {
      SCOPED_TRACE(op + " " + std::to_string(c.a.size()) + "-D by " +
                   std::to_string(c.b.size()) + "-D");
      auto a = randomFloats(numel(c.a), seed++),
           b = randomFloats(numel(c.b), seed++);
      if (op == "pow")
        for (float &x : a)
          x = std::fabs(x) + 0.5f; // a real power of a positive base
      auto y = runF32(op, {f32(c.a, a), f32(c.b, b)}, c.out);
      expectNear(y, binaryRef(c.out, c.a, a, c.b, b, f));
    }
  // pow's square fast path.
  auto y = runF32("pow", {f32({3}, {-2, 0.5, 3}), f32({}, {2})}, {3});
  expectNear(y, {4, 0.25, 9});
}

TEST(Kernels, IntegerArithmetic) {
  auto a = i64({2, 3}, {7, -7, 9, 0, 5, -9}), b = i64({3}, {2, 2, 0});
  auto run = [&](const std::string &op) {
    Result r = runOp(op, {a, b}, {{I64, {2, 3}}});
    EXPECT_EQ(r.error, "");
    return r.error.empty() ? r.outputs[0].as<int64_t>()
                           : std::vector<int64_t>();
  };
  EXPECT_EQ(run("add"), (std::vector<int64_t>{9, -5, 9, 2, 7, -9}));
  EXPECT_EQ(run("sub"), (std::vector<int64_t>{5, -9, 9, -2, 3, -9}));
  EXPECT_EQ(run("mul"), (std::vector<int64_t>{14, -14, 0, 0, 10, 0}));
  // Truncation toward zero; dividing by zero gives 0 instead of a trap.
  EXPECT_EQ(run("div"), (std::vector<int64_t>{3, -3, 0, 0, 2, 0}));
  EXPECT_EQ(run("pow"), (std::vector<int64_t>{49, 49, 1, 0, 25, 1}));
  Result r = runOp("add", {a, f32({3}, {1, 2, 3})}, {{I64, {2, 3}}});
  EXPECT_NE(r.error.find("one dtype"), std::string::npos) << r.error;
}

TEST(Kernels, NarrowIntegersWrapAndFloat64Computes) {
  // uint8 wraps as NumPy's does: 3 - 5 = 254, 200 + 100 = 44, 16 * 20 = 64.
  auto u8 = [](const std::vector<uint8_t> &v) {
    return valueOf(plan::DType::U8, {static_cast<int64_t>(v.size())}, v);
  };
  auto runU8 = [&](const std::string &op) {
    Result r = runOp(op, {u8({3, 200, 16, 7}), u8({5, 100, 20, 2})},
                     {{plan::DType::U8, {4}}});
    EXPECT_EQ(r.error, "") << op;
    return r.outputs.empty() ? std::vector<uint8_t>() : r.outputs[0].as<uint8_t>();
  };
  EXPECT_EQ(runU8("sub"), (std::vector<uint8_t>{254, 100, 252, 5}));
  EXPECT_EQ(runU8("add"), (std::vector<uint8_t>{8, 44, 36, 9}));
  EXPECT_EQ(runU8("mul"), (std::vector<uint8_t>{15, 32, 64, 14}));
  EXPECT_EQ(runU8("div"), (std::vector<uint8_t>{0, 2, 0, 3}));
  EXPECT_EQ(runU8("max"), (std::vector<uint8_t>{5, 200, 20, 7}));
  // int8 min; int32 comparisons; float64 add and max keep double precision.
  Result r = runOp("min",
                   {valueOf(plan::DType::I8, {3}, std::vector<int8_t>{-128, 5, 7}),
                    valueOf(plan::DType::I8, {3}, std::vector<int8_t>{0, -1, 7})},
                   {{plan::DType::I8, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int8_t>(), (std::vector<int8_t>{-128, -1, 7}));
  r = runOp("equal", {i32({3}, {1, -2, 3}), i32({1}, {3})}, {{BOOL, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{0, 0, 1}));
  r = runOp("add", {f64({2}, {1e-12, 1.0}), f64({}, {1.0})}, {{F64, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<double>(), (std::vector<double>{1.0 + 1e-12, 2.0}));
  r = runOp("and", {i32({1}, {1}), i32({1}, {1})}, {{BOOL, {1}}});
  EXPECT_NE(r.error.find("every operand must be bool"), std::string::npos)
      << r.error;
}

TEST(Kernels, ModTakesTheDivisorsSignOrTheDividends) {
  // Python's % (fmod = 0) and C's fmod (fmod = 1), against hand values;
  // x mod 0 and INT64_MIN mod -1 are 0 rather than a trap.
  const int64_t least = std::numeric_limits<int64_t>::min();
  auto a = i64({6}, {7, -7, 7, -7, 5, least}), b = i64({6}, {3, 3, -3, -3, 0, -1});
  auto run = [&](int64_t fmod) {
    Result r = runOp("mod", {a, b}, {{I64, {6}}}, {{"fmod", fmod}});
    EXPECT_EQ(r.error, "");
    return r.error.empty() ? r.outputs[0].as<int64_t>()
                           : std::vector<int64_t>();
  };
  EXPECT_EQ(run(0), (std::vector<int64_t>{1, 2, -2, -1, 0, 0}));
  EXPECT_EQ(run(1), (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));
  Result r = runOp("mod", {f32({3}, {5.5f, -5.5f, 5.5f}), f32({3}, {2, 2, -2})},
                   {{F32, {3}}}, {{"fmod", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), {1.5, -1.5, 1.5});
  r = runOp("mod", {f32({1}, {1}), f32({1}, {1})}, {{F32, {1}}});
  EXPECT_NE(r.error.find("takes floats only with fmod = 1"), std::string::npos)
      << r.error;
}

TEST(Kernels, PowTakesAnExponentOfAnotherDtype) {
  // The base's dtype is the output's; integer results truncate like
  // NumPy's cast of the double power.
  Result r = runOp("pow", {f32({3}, {1.5f, 2, -3}), i64({3}, {2, -1, 3})},
                   {{F32, {3}}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), {2.25, 0.5, -27});
  r = runOp("pow", {i32({3}, {2, 3, 4}), f32({3}, {0.5f, 2, -1})},
            {{I32, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int32_t>(), (std::vector<int32_t>{1, 9, 0}));
  r = runOp("pow", {f64({2}, {2, 9}), f64({1}, {0.5})}, {{F64, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<double>(),
            (std::vector<double>{std::sqrt(2.0), 3.0}));
  r = runOp("pow", {f32({1}, {2}), f32({1}, {2})}, {{F64, {1}}});
  EXPECT_NE(r.error.find("the base and the output must have one dtype"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, MaxAndMinBroadcastAndKeepNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = f32({2, 2}, {1, -3, nan, 5}), b = f32({2}, {0, 4});
  Result r = runOp("max", {a, b}, {{F32, {2, 2}}});
  ASSERT_EQ(r.error, "");
  std::vector<float> y = r.outputs[0].as<float>();
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], 4);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 5);
  r = runOp("min", {a, b}, {{F32, {2, 2}}});
  ASSERT_EQ(r.error, "");
  y = r.outputs[0].as<float>();
  EXPECT_EQ(y[0], 0);
  EXPECT_EQ(y[1], -3);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 4);
  r = runOp("max", {i64({3}, {-4, 7, 0}), i64({}, {1})}, {{I64, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, 7, 1}));
}

TEST(Kernels, ComparisonsAndLogic) {
  auto a = randomFloats(12, 3), b = randomFloats(4, 4);
  a[5] = b[1]; // one equal pair
  for (const std::string op :
       {"equal", "less", "greater", "less_or_equal", "greater_or_equal"}) {
    Result r = runOp(op, {f32({3, 4}, a), f32({4}, b)}, {{BOOL, {3, 4}}});
    ASSERT_EQ(r.error, "");
    auto y = r.outputs[0].as<uint8_t>();
    for (int i = 0; i < 12; ++i) {
      float x = a[i], z = b[i % 4];
      bool want = op == "equal"     ? x == z
                  : op == "less"    ? x < z
                  : op == "greater" ? x > z
                  : op == "less_or_equal" ? x <= z
                                          : x >= z;
      EXPECT_EQ(y[i], want) << op << " at " << i;
    }
  }
  Result r = runOp("less", {i64({3}, {1, 5, -2}), i64({}, {1})}, {{BOOL, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{0, 0, 1}));
  r = runOp("equal", {boolean({2}, {1, 0}), boolean({2, 1}, {1, 0})},
            {{BOOL, {2, 2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 1}));

  auto p = boolean({4}, {0, 1, 0, 1}), q = boolean({2, 1}, {0, 1});
  r = runOp("and", {p, q}, {{BOOL, {2, 4}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 1}));
  r = runOp("or", {p, q}, {{BOOL, {2, 4}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(),
            (std::vector<uint8_t>{0, 1, 0, 1, 1, 1, 1, 1}));
  r = runOp("not", {p}, {{BOOL, {4}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 0}));
  r = runOp("and", {p, f32({4}, {1, 1, 1, 1})}, {{BOOL, {4}}});
  EXPECT_NE(r.error.find("every operand must be bool"), std::string::npos)
      << r.error;
  r = runOp("isnan", {f32({4}, {1.f, NAN, -INFINITY, -NAN})}, {{BOOL, {4}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 1}));
  r = runOp("isnan", {p}, {{BOOL, {4}}});
  EXPECT_NE(r.error.find("the input"), std::string::npos) << r.error;
}

TEST(Kernels, WhereBroadcastsThreeWays) {
  std::vector<uint8_t> cond = {1, 0, 0, 1, 1, 0};
  auto a = randomFloats(3, 5), b = randomFloats(4, 6);
  auto y =
      runF32("where", {boolean({2, 3, 1}, cond), f32({3, 1}, a), f32({4}, b)},
             {2, 3, 4});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want.push_back(cond[i * 3 + j] ? a[j] : b[k]);
  expectNear(y, want);
  Result r =
      runOp("where", {boolean({2}, {1, 0}), i64({2}, {1, 2}), i64({}, {-1})},
            {{I64, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, -1}));
}

TEST(Kernels, UnaryFunctions) {
  auto x = randomFloats(40000, 7); // large enough to run in parallel
  x[0] = 0;
  const double k = std::sqrt(2.0 / M_PI);
  const std::vector<
      std::tuple<std::string, AttrList, std::function<double(double)>>>
      ops = {
          {"neg", {}, [](double v) { return -v; }},
          {"exp", {}, [](double v) { return std::exp(v); }},
          {"log", {}, [](double v) { return std::log(std::fabs(v) + 0.1); }},
          {"sqrt", {}, [](double v) { return std::sqrt(std::fabs(v) + 0.1); }},
          {"reciprocal", {}, [](double v) { return 1 / (std::fabs(v) + 0.1); }},
          {"abs", {}, [](double v) { return std::fabs(v); }},
          {"tanh", {}, [](double v) { return std::tanh(v); }},
          {"sigmoid", {}, [](double v) { return 1 / (1 + std::exp(-v)); }},
          {"relu", {}, [](double v) { return v > 0 ? v : 0; }},
          {"erf", {}, [](double v) { return std::erf(v); }},
          {"silu", {}, [](double v) { return v / (1 + std::exp(-v)); }},
          {"sin", {}, [](double v) { return std::sin(v); }},
          {"cos", {}, [](double v) { return std::cos(v); }},
          {"floor", {}, [](double v) { return std::floor(v); }},
          {"ceil", {}, [](double v) { return std::ceil(v); }},
          {"softplus", {}, [](double v) { return std::log1p(std::exp(v)); }},
          {"leaky_relu",
           {{"alpha", 0.2}},
           [](double v) { return v < 0 ? 0.2 * v : v; }},
          {"hard_sigmoid",
           {{"alpha", 0.25}, {"beta", 0.4}},
           [](double v) {
             return std::min(1.0, std::max(0.0, 0.25 * v + 0.4));
           }},
          {"hard_swish",
           {},
           [](double v) {
             return v * std::min(1.0, std::max(0.0, (v + 3) / 6));
           }},
          {"sign", {}, [](double v) { return double((v > 0) - (v < 0)); }},
          {"softsign", {}, [](double v) { return v / (1 + std::fabs(v)); }},
          {"round", {}, [](double v) { return std::nearbyint(v); }},
          {"tan", {}, [](double v) { return std::tan(v); }},
          {"sinh", {}, [](double v) { return std::sinh(v); }},
          {"cosh", {}, [](double v) { return std::cosh(v); }},
          {"atan", {}, [](double v) { return std::atan(v); }},
          {"asinh", {}, [](double v) { return std::asinh(v); }},
          {"elu",
           {{"alpha", 0.7}},
           [](double v) { return v < 0 ? 0.7 * (std::exp(v) - 1) : v; }},
          {"selu",
           {{"alpha", 1.5}, {"gamma", 2.0}},
           [](double v) { return 2 * (v <= 0 ? 1.5 * (std::exp(v) - 1) : v); }},
          {"celu",
           {{"alpha", 2.0}},
           [](double v) {
             return std::max(0.0, v) + std::min(0.0, 2 * (std::exp(v / 2) - 1));
           }},
          {"thresholded_relu",
           {{"alpha", 0.3}},
           [](double v) { return v > 0.3 ? v : 0; }},
          {"shrink",
           {{"bias", 0.1}, {"lambd", 0.4}},
           [](double v) {
             return v < -0.4 ? v + 0.1 : v > 0.4 ? v - 0.1 : 0;
           }},
          {"clip",
           {{"min", -0.5}, {"max", 0.25}},
           [](double v) { return std::min(std::max(v, -0.5), 0.25); }},
          {"gelu",
           {},
           [](double v) {
             return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
           }},
          {"gelu",
           {{"approximate", std::string("tanh")}},
           [k](double v) {
             return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
           }},
      };
  for (const auto &[op, attrs, f] : ops) {
    SCOPED_TRACE(op);
    // log, sqrt and reciprocal get |x| + 0.1.
    bool positive = op == "log" || op == "sqrt" || op == "reciprocal";
    std::vector<float> in = x;
    if (positive)
      for (float &v : in)
        v = std::fabs(v) + 0.1f;
    auto y = runF32(op, {f32({200, 200}, in)}, {200, 200}, attrs);
    std::vector<double> want;
    for (float v : x)
      want.push_back(f(v));
    expectNear(y, want, 2e-6);
  }
  for (const std::string op : {"neg", "abs"}) {
    Result r = runOp(op, {i64({3}, {-4, 0, 9})}, {{I64, {3}}});
    ASSERT_EQ(r.error, "");
    std::vector<int64_t> want = {4, 0, op == "neg" ? -9 : 9};
    EXPECT_EQ(r.outputs[0].as<int64_t>(), want);
  }
  Result r = runOp("gelu", {f32({2}, {1, 2})}, {{F32, {2}}},
                   {{"approximate", std::string("fast")}});
  EXPECT_NE(r.error.find("approximate must be none or tanh, not fast"),
            std::string::npos)
      << r.error;
  r = runOp("exp", {f32({2, 2}, {1, 2, 3, 4})}, {{F32, {4}}});
  EXPECT_NE(r.error.find("differ in shape"), std::string::npos) << r.error;
}

TEST(Kernels, CastConvertsLikeOnnx) {
  auto x = f32({5}, {-2.7f, -0.5f, 0.0f, 1.9f, 3.0f});
  Result r = runOp("cast", {x}, {{I64, {5}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 1, 3}));
  r = runOp("cast", {x}, {{BOOL, {5}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  r = runOp("cast", {x}, {{F64, {5}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<double>()[0], static_cast<double>(-2.7f));
  r = runOp("cast", {i64({3}, {-3, 0, int64_t(1) << 40})}, {{F32, {3}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<float>(),
            (std::vector<float>{-3, 0, 1099511627776.0f}));
  r = runOp("cast", {boolean({2}, {1, 0})}, {{F32, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<float>(), (std::vector<float>{1, 0}));
  r = runOp("cast", {i32({2}, {-5, 7})}, {{I64, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{-5, 7}));
  r = runOp("cast", {f64({2}, {1.5, -2.5})}, {{I32, {2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int32_t>(), (std::vector<int32_t>{1, -2}));
  r = runOp("cast", {x}, {{plan::DType::F16, {5}}});
  ASSERT_EQ(r.error, "");
  // Bit patterns from torch's .half() and .bfloat16().
  EXPECT_EQ(r.outputs[0].as<uint16_t>(),
            (std::vector<uint16_t>{0xC166, 0xB800, 0x0000, 0x3F9A, 0x4200}));
  r = runOp("cast", {x}, {{plan::DType::BF16, {5}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint16_t>(),
            (std::vector<uint16_t>{0xC02D, 0xBF00, 0x0000, 0x3FF3, 0x4040}));
}

/// Half-precision kernels compute in fp32: each equals its fp32 kernel on
/// the widened inputs, rounded (nearest-even) to the output's precision.
TEST(Kernels, HalfPrecisionKernelsComputeInFp32AndRound) {
  struct Case {
    std::string op;
    std::vector<Shape> ins;
    Shape out;
    AttrList attrs;
  };
  const std::vector<Case> cases = {
      {"add", {{64, 33}, {33}}, {64, 33}, {}},
      {"matmul", {{3, 17, 40}, {40, 9}}, {3, 17, 9}, {}},
      {"softmax", {{6, 300}}, {6, 300}, {{"axis", int64_t(1)}}},
      {"gelu", {{1000}}, {1000}, {}},
      {"reduce_sum",
       {{8, 512}},
       {8},
       {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}},
  };
  unsigned seed = 40;
  for (plan::DType half : {plan::DType::BF16, plan::DType::F16})
    for (const Case &c : cases) {
      fsdprt_dtype_t dtype =
          half == plan::DType::BF16 ? FSDPRT_BF16 : FSDPRT_F16;
      SCOPED_TRACE(c.op + (dtype == FSDPRT_BF16 ? " bf16" : " f16"));
      std::vector<Value> halves, widened;
      for (const Shape &shape : c.ins) {
        std::vector<float> v = randomFloats(numel(shape), seed++);
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          h[i] = fsdprt::floatToHalf(v[i], dtype);
          v[i] = fsdprt::halfToFloat(h[i], dtype);
        }
        halves.push_back(valueOf(half, shape, h));
        widened.push_back(f32(shape, v));
      }
      Result r = runOp(c.op, halves, {{half, c.out}}, c.attrs);
      ASSERT_EQ(r.error, "");
      std::vector<float> want = runF32(c.op, widened, c.out, c.attrs);
      std::vector<uint16_t> got = r.outputs[0].as<uint16_t>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], fsdprt::floatToHalf(want[i], dtype)) << "at " << i;
    }
}

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// y[b][m][n] = sum_k a[b][m][k] * (transB ? b[b][n][k] : b[b][k][n]) for
/// one batch of plain row-major matrices.
std::vector<double> matmulRef(const float *a, const float *b, int m, int k,
                              int n, bool transB) {
  std::vector<double> y(m * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p)
        s += double(a[i * k + p]) * (transB ? b[j * k + p] : b[p * n + j]);
      y[i * n + j] = s;
    }
  return y;
}

TEST(Kernels, MatMulBroadcastsBatchesAndTransposesB) {
  // a [2, 1, 3, 4] x b [3, 5, 4]^T -> [2, 3, 3, 5]
  auto a = randomFloats(2 * 3 * 4, 3), b = randomFloats(3 * 5 * 4, 4);
  auto y = runF32("matmul", {f32({2, 1, 3, 4}, a), f32({3, 5, 4}, b)},
                  {2, 3, 3, 5}, {{"trans_b", int64_t(1)}});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      auto part = matmulRef(&a[i * 12], &b[j * 20], 3, 4, 5, true);
      want.insert(want.end(), part.begin(), part.end());
    }
  expectNear(y, want);
}

TEST(Kernels, MatMulSharedRightOperandAndLargeProducts) {
  // [2, 3, 4] x [4, 5]: one GEMM with the batch folded into the rows.
  auto a = randomFloats(24, 5), b = randomFloats(20, 6);
  expectNear(runF32("matmul", {f32({2, 3, 4}, a), f32({4, 5}, b)}, {2, 3, 5}),
             matmulRef(a.data(), b.data(), 6, 4, 5, false));
  // Large enough to split across threads.
  auto c = randomFloats(64 * 96, 7), d = randomFloats(96 * 80, 8);
  expectNear(runF32("matmul", {f32({64, 96}, c), f32({96, 80}, d)}, {64, 80}),
             matmulRef(c.data(), d.data(), 64, 96, 80, false), 1e-4);
}

TEST(Kernels, MatMulPromotesVectors) {
  auto v = randomFloats(4, 9), m = randomFloats(12, 10);
  // [4] x [4, 3] -> [3]; [3, 4] x [4] -> [3]; [4] x [4] -> []
  expectNear(runF32("matmul", {f32({4}, v), f32({4, 3}, m)}, {3}),
             matmulRef(v.data(), m.data(), 1, 4, 3, false));
  expectNear(runF32("matmul", {f32({3, 4}, m), f32({4}, v)}, {3}),
             matmulRef(m.data(), v.data(), 3, 4, 1, false));
  expectNear(runF32("matmul", {f32({4}, v), f32({4}, v)}, {}),
             matmulRef(v.data(), v.data(), 1, 4, 1, false));
  Result r = runOp("matmul", {f32({3, 4}, m), f32({4}, v)}, {{F32, {3, 1}}});
  EXPECT_NE(r.error.find("output [3, 1] should be [3]"), std::string::npos)
      << r.error;
}

TEST(Kernels, GemmWithTransposesAndBroadcastC) {
  auto a = randomFloats(4 * 2, 8), b = randomFloats(3 * 4, 9),
       c = randomFloats(3, 10);
  auto y = runF32("gemm", {f32({4, 2}, a), f32({3, 4}, b), f32({3}, c)}, {2, 3},
                  {{"trans_a", int64_t(1)},
                   {"trans_b", int64_t(1)},
                   {"alpha", 0.5},
                   {"beta", 2.0}});
  std::vector<double> want;
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double s = 0;
      for (int k = 0; k < 4; ++k)
        s += a[k * 2 + m] * b[n * 4 + k];
      want.push_back(0.5 * s + 2.0 * c[n]);
    }
  expectNear(y, want);
  // Without C, and a large one split across threads with C per row.
  auto p = randomFloats(80 * 96, 11), q = randomFloats(96 * 70, 12),
       r = randomFloats(80, 13);
  auto big = matmulRef(p.data(), q.data(), 80, 96, 70, false);
  expectNear(runF32("gemm", {f32({80, 96}, p), f32({96, 70}, q)}, {80, 70}),
             big, 1e-4);
  for (int i = 0; i < 80; ++i)
    for (int j = 0; j < 70; ++j)
      big[i * 70 + j] += r[i];
  expectNear(runF32("gemm",
                    {f32({80, 96}, p), f32({96, 70}, q), f32({80, 1}, r)},
                    {80, 70}),
             big, 1e-4);
}

/// `x` [rows, cols] transposed (row-major).
std::vector<float> transposed(const std::vector<float> &x, int rows,
                              int cols) {
  std::vector<float> t(x.size());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      t[j * rows + i] = x[i * cols + j];
  return t;
}

TEST(Kernels, GemmReadsEitherOperandTransposedInPlace) {
  // What fsdp-fuse makes of nn.Linear's weight gradient: gemm with trans_a
  // (and trans_b) on the stored operands equals the untransposed product
  // of the transposes, small and split across threads alike.
  for (auto [m, k, n] : {std::tuple{3, 5, 4}, std::tuple{96, 130, 70}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" +
                 std::to_string(n));
    auto at = randomFloats(k * m, 21), b = randomFloats(k * n, 22),
         bt = randomFloats(n * k, 23);
    auto a = transposed(at, k, m), bPlain = transposed(bt, n, k);
    std::vector<float> plain =
        runF32("gemm", {f32({m, k}, a), f32({k, n}, b)}, {m, n});
    expectNear(runF32("gemm", {f32({k, m}, at), f32({k, n}, b)}, {m, n},
                      {{"trans_a", int64_t(1)}}),
               std::vector<double>(plain.begin(), plain.end()), 1e-4);
    plain = runF32("gemm", {f32({m, k}, a), f32({k, n}, bPlain)}, {m, n});
    expectNear(runF32("gemm", {f32({k, m}, at), f32({n, k}, bt)}, {m, n},
                      {{"trans_a", int64_t(1)}, {"trans_b", int64_t(1)}}),
               std::vector<double>(plain.begin(), plain.end()), 1e-4);
    Result r = runOp("gemm", {f32({k, m}, at), f32({k, n}, b)},
                     {{F32, {k, n}}}, {{"trans_a", int64_t(1)}});
    if (m != k) {
      EXPECT_NE(r.error.find("shapes do not chain"), std::string::npos)
          << r.error;
    }
  }
}

TEST(Kernels, LinearFusesBiasAndEveryActivation) {
  const double k = std::sqrt(2.0 / M_PI);
  const std::vector<std::pair<std::string, std::function<double(double)>>>
      acts = {{"none", [](double v) { return v; }},
              {"relu", [](double v) { return v > 0 ? v : 0; }},
              {"gelu",
               [](double v) {
                 return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
               }},
              {"gelu_tanh",
               [k](double v) {
                 return 0.5 * v *
                        (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
               }},
              {"silu", [](double v) { return v / (1 + std::exp(-v)); }},
              {"tanh", [](double v) { return std::tanh(v); }},
              {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }}};
  // [2, 40, 96] rows against [80, 96] (torch layout): the GEMM splits.
  const int rows = 80, K = 96, N = 80;
  auto x = randomFloats(rows * K, 14), w = randomFloats(N * K, 15),
       bias = randomFloats(N, 16);
  auto plain = matmulRef(x.data(), w.data(), rows, K, N, true);
  for (const auto &[name, f] : acts) {
    SCOPED_TRACE(name);
    auto y =
        runF32("linear", {f32({2, 40, K}, x), f32({N, K}, w), f32({N}, bias)},
               {2, 40, N}, {{"trans_w", int64_t(1)}, {"activation", name}});
    std::vector<double> want(rows * N);
    for (int i = 0; i < rows * N; ++i)
      want[i] = f(plain[i] + bias[i % N]);
    expectNear(y, want, 1e-4);
  }
  // W as [K, N] and no bias.
  auto small = randomFloats(3 * 4, 17), wk = randomFloats(4 * 5, 18);
  expectNear(runF32("linear", {f32({3, 4}, small), f32({4, 5}, wk)}, {3, 5}),
             matmulRef(small.data(), wk.data(), 3, 4, 5, false));
  Result r = runOp("linear", {f32({3, 4}, small), f32({4, 5}, wk)},
                   {{F32, {3, 5}}}, {{"activation", std::string("swish")}});
  EXPECT_NE(r.error.find("unknown activation 'swish'"), std::string::npos)
      << r.error;
  r = runOp("linear", {f32({3, 4}, small), f32({5, 4}, wk)}, {{F32, {3, 5}}});
  EXPECT_NE(r.error.find("shapes do not chain"), std::string::npos) << r.error;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// softmax((q kt) * scale, masked) v for one [L, D] x [D, S] x [S, Dv] head.
std::vector<double>
attentionRef(const float *q, const float *kt, const float *v, int l, int d,
             int s, int dv, double scale,
             const std::function<double(int, int, double)> &mask) {
  std::vector<double> out;
  for (int i = 0; i < l; ++i) {
    std::vector<double> row(s);
    double max = -INFINITY;
    for (int j = 0; j < s; ++j) {
      double acc = 0;
      for (int k = 0; k < d; ++k)
        acc += double(q[i * d + k]) * kt[k * s + j];
      row[j] = mask(i, j, acc * scale);
      max = std::max(max, row[j]);
    }
    double sum = 0;
    for (double &x : row)
      sum += (x = std::exp(x - max));
    for (int c = 0; c < dv; ++c) {
      double acc = 0;
      for (int j = 0; j < s; ++j)
        acc += row[j] / sum * v[j * dv + c];
      out.push_back(acc);
    }
  }
  return out;
}

TEST(Kernels, AttentionWithACausalFillMask) {
  const int B = 3, L = 5, D = 4, S = 5, DV = 2;
  auto q = randomFloats(B * L * D, 11), kt = randomFloats(B * D * S, 12),
       v = randomFloats(B * S * DV, 13);
  std::vector<uint8_t> mask(L * S);
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < S; ++j)
      mask[i * S + j] = j > i; // true = masked
  auto y = runF32("attention",
                  {f32({B, L, D}, q), f32({B, D, S}, kt), f32({B, S, DV}, v),
                   boolean({1, L, S}, mask)},
                  {B, L, DV},
                  {{"scale", 0.5},
                   {"mask_kind", std::string("fill")},
                   {"fill_value", -INFINITY}});
  std::vector<double> want;
  for (int b = 0; b < B; ++b) {
    auto head = attentionRef(&q[b * L * D], &kt[b * D * S], &v[b * S * DV], L,
                             D, S, DV, 0.5, [&](int i, int j, double x) {
                               return mask[i * S + j] ? -INFINITY : x;
                             });
    want.insert(want.end(), head.begin(), head.end());
  }
  expectNear(y, want);
}

TEST(Kernels, AttentionWithAnAdditiveMaskOverManyTiles) {
  // [B, H, L, D] with L = 150: three tiles of query rows per head, and a
  // padding mask [B, 1, 1, S] broadcast over heads and rows.
  const int B = 2, H = 3, L = 150, D = 8, S = 20, DV = 6;
  auto q = randomFloats(B * H * L * D, 14),
       kt = randomFloats(B * H * D * S, 15),
       v = randomFloats(B * H * S * DV, 16), m = randomFloats(B * S, 17);
  auto y = runF32("attention",
                  {f32({B, H, L, D}, q), f32({B, H, D, S}, kt),
                   f32({B, H, S, DV}, v), f32({B, 1, 1, S}, m)},
                  {B, H, L, DV},
                  {{"scale", 0.25}, {"mask_kind", std::string("add")}});
  std::vector<double> want;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      int head = b * H + h;
      auto part = attentionRef(
          &q[head * L * D], &kt[head * D * S], &v[head * S * DV], L, D, S, DV,
          0.25, [&](int, int j, double x) { return x + m[b * S + j]; });
      want.insert(want.end(), part.begin(), part.end());
    }
  expectNear(y, want, 1e-4);
}

TEST(Kernels, AttentionOfOneHeadWithoutMask) {
  const int L = 70, D = 16, S = 33, DV = 8;
  auto q = randomFloats(L * D, 18), kt = randomFloats(D * S, 19),
       v = randomFloats(S * DV, 20);
  auto y =
      runF32("attention", {f32({L, D}, q), f32({D, S}, kt), f32({S, DV}, v)},
             {L, DV}, {{"scale", 0.125}, {"mask_kind", std::string("none")}});
  expectNear(y,
             attentionRef(q.data(), kt.data(), v.data(), L, D, S, DV, 0.125,
                          [](int, int, double x) { return x; }),
             1e-4);
  Result r =
      runOp("attention", {f32({L, D}, q), f32({D, S}, kt), f32({S, DV}, v)},
            {{F32, {L, DV}}}, {{"mask_kind", std::string("add")}});
  EXPECT_NE(r.error.find("mask_kind add needs mask"), std::string::npos)
      << r.error;
}

//===----------------------------------------------------------------------===//
// Attention against torch: forward with lse, and attention_grad
//===----------------------------------------------------------------------===//

/// One case of gen_attention_ref.py's file: the inputs (q, k_t, v, mask?,
/// dy) and torch's y, lse, dq, dk_t and dv.
struct AttentionCase {
  std::string name, kind;
  double scale = 1, fill = 0;
  std::map<std::string, Value> inputs;
  std::map<std::string, std::pair<Shape, std::vector<double>>> refs;
  AttrList attrs() const {
    return {{"scale", scale}, {"mask_kind", kind}, {"fill_value", fill}};
  }
};

std::vector<AttentionCase> readAttentionCases() {
  std::ifstream in(FSDP_ATTENTION_REF);
  EXPECT_TRUE(in) << "cannot read " << FSDP_ATTENTION_REF;
  std::vector<AttentionCase> cases;
  std::string word;
  auto number = [&] {
    in >> word;
    return std::strtod(word.c_str(), nullptr); // also nan, inf, -inf
  };
  while (in >> word) {
    EXPECT_EQ(word, "case");
    AttentionCase c;
    in >> c.name >> c.kind;
    c.scale = number();
    c.fill = number();
    std::string name, dtype;
    while (in >> name && name != "end") {
      int rank;
      in >> dtype >> rank;
      Shape shape(rank);
      for (int64_t &d : shape)
        in >> d;
      std::vector<double> values(numel(shape));
      for (double &x : values)
        x = number();
      bool isRef = name == "y" || name == "lse" || name == "dq" ||
                   name == "dk_t" || name == "dv";
      if (isRef) {
        c.refs[name] = {shape, values};
      } else if (dtype == "bool") {
        c.inputs[name] =
            boolean(shape, std::vector<uint8_t>(values.begin(), values.end()));
      } else {
        c.inputs[name] =
            f32(shape, std::vector<float>(values.begin(), values.end()));
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

/// expectNear, where an infinite reference must be met exactly.
void expectNearTorch(const Value &got, const std::vector<double> &want,
                     double tol) {
  std::vector<float> values = got.as<float>();
  std::vector<double> finite = want;
  for (size_t i = 0; i < want.size() && i < values.size(); ++i)
    if (std::isinf(want[i])) {
      EXPECT_EQ(values[i], want[i]) << "at " << i;
      finite[i] = values[i] = 0;
    }
  expectNear(values, finite, tol);
}

/// The forward's inputs and, for attention_grad, y, lse and dy after them.
std::vector<Value> attentionInputs(const AttentionCase &c) {
  std::vector<Value> ins = {c.inputs.at("q"), c.inputs.at("k_t"),
                            c.inputs.at("v")};
  if (c.inputs.count("mask"))
    ins.push_back(c.inputs.at("mask"));
  return ins;
}

TEST(Kernels, AttentionAndItsGradientEqualTorchAutograd) {
  std::vector<AttentionCase> cases = readAttentionCases();
  ASSERT_GE(cases.size(), 10u);
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Value> ins = attentionInputs(c);
    const Shape &yShape = c.refs.at("y").first,
                &lseShape = c.refs.at("lse").first;
    Result fwd =
        runOp("attention", ins, {{F32, yShape}, {F32, lseShape}}, c.attrs());
    ASSERT_EQ(fwd.error, "");
    expectNearTorch(fwd.outputs[0], c.refs.at("y").second, 1e-5);
    expectNearTorch(fwd.outputs[1], c.refs.at("lse").second, 1e-5);
    // Without the lse output, y is the same.
    Result yOnly = runOp("attention", ins, {{F32, yShape}}, c.attrs());
    ASSERT_EQ(yOnly.error, "");
    EXPECT_EQ(yOnly.outputs[0].bytes, fwd.outputs[0].bytes);

    // The gradient from the kernel's own y and lse, as a training plan runs.
    std::vector<Value> gradIns = ins;
    gradIns.push_back(fwd.outputs[0]);
    gradIns.push_back(fwd.outputs[1]);
    gradIns.push_back(c.inputs.at("dy"));
    std::vector<std::pair<plan::DType, Shape>> gradOuts = {
        {F32, c.refs.at("dq").first},
        {F32, c.refs.at("dk_t").first},
        {F32, c.refs.at("dv").first}};
    Result grad = runOp("attention_grad", gradIns, gradOuts, c.attrs());
    ASSERT_EQ(grad.error, "");
    expectNearTorch(grad.outputs[0], c.refs.at("dq").second, 1e-4);
    expectNearTorch(grad.outputs[1], c.refs.at("dk_t").second, 1e-4);
    expectNearTorch(grad.outputs[2], c.refs.at("dv").second, 1e-4);
    // Every output element is computed by one tile: the same bits on one
    // thread as on two.
    Result serial =
        runOp("attention_grad", gradIns, gradOuts, c.attrs(), /*threads=*/1);
    ASSERT_EQ(serial.error, "");
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(serial.outputs[i].bytes, grad.outputs[i].bytes)
          << "output " << i;
  }
}

/// layout "bshd" reads q [B, L, H, D], k [B, S, H, D] and v [B, S, H, Dv]
/// where the head split left them and writes y, dq, dk and dv the same way:
/// the same numbers as the default layout on the transposed copies, for
/// each mask kind (causal: in tiles of fewer rows and columns than L and S).
TEST(Kernels, AttentionInHeadSplitLayoutEqualsTheTransposedOne) {
  const int64_t B = 2, H = 3, L = 70, S = 90, D = 8, DV = 5;
  const Shape qShape = {B, L, H, D}, kShape = {B, S, H, D},
              vShape = {B, S, H, DV}, yShape = {B, L, H, DV};
  // To the default layout: q, v, y [B, H, rows, cols]; k_t [B, H, D, S].
  const std::vector<size_t> toHeads = {0, 2, 1, 3}, toKt = {0, 2, 3, 1},
                            fromKt = {0, 3, 1, 2};
  std::vector<float> q = randomFloats(numel(qShape), 80),
                     k = randomFloats(numel(kShape), 81),
                     v = randomFloats(numel(vShape), 82),
                     dy = randomFloats(numel(yShape), 83),
                     addMask = randomFloats(B * L * S, 84);
  std::vector<uint8_t> fillMask(B * L * S);
  for (size_t i = 0; i < fillMask.size(); ++i)
    fillMask[i] = addMask[i] > 1.0f;
  for (std::string kind : {"none", "add", "fill", "causal"}) {
    SCOPED_TRACE(kind);
    AttrList attrs = {
        {"scale", 0.3}, {"mask_kind", kind}, {"fill_value", -2.0}};
    AttrList split = attrs;
    split.push_back({"layout", std::string("bshd")});
    std::vector<Value> strided = {f32(qShape, q), f32(kShape, k),
                                  f32(vShape, v)},
                       heads = {
                           f32({B, H, L, D}, permuted(q, qShape, toHeads)),
                           f32({B, H, D, S}, permuted(k, kShape, toKt)),
                           f32({B, H, S, DV}, permuted(v, vShape, toHeads))};
    // One mask per batch element, broadcast over the heads.
    if (kind == "add" || kind == "fill") {
      Value mask = kind == "add" ? f32({B, 1, L, S}, addMask)
                                 : boolean({B, 1, L, S}, fillMask);
      strided.push_back(mask);
      heads.push_back(mask);
    }
    Result got =
        runOp("attention", strided, {{F32, yShape}, {F32, {B, H, L}}}, split);
    Result want = runOp("attention", heads,
                        {{F32, {B, H, L, DV}}, {F32, {B, H, L}}}, attrs);
    ASSERT_EQ(got.error, "");
    ASSERT_EQ(want.error, "");
    std::vector<float> y = got.outputs[0].as<float>();
    expectNear(permuted(y, yShape, toHeads),
               toDouble(want.outputs[0].as<float>()), 1e-5);
    expectNear(got.outputs[1].as<float>(),
               toDouble(want.outputs[1].as<float>()), 1e-5);

    strided.push_back(got.outputs[0]);
    strided.push_back(got.outputs[1]);
    strided.push_back(f32(yShape, dy));
    heads.push_back(want.outputs[0]);
    heads.push_back(want.outputs[1]);
    heads.push_back(f32({B, H, L, DV}, permuted(dy, yShape, toHeads)));
    Result grad = runOp("attention_grad", strided,
                        {{F32, qShape}, {F32, kShape}, {F32, vShape}}, split);
    Result wantGrad =
        runOp("attention_grad", heads,
              {{F32, {B, H, L, D}}, {F32, {B, H, D, S}}, {F32, {B, H, S, DV}}},
              attrs);
    ASSERT_EQ(grad.error, "");
    ASSERT_EQ(wantGrad.error, "");
    expectNear(permuted(grad.outputs[0].as<float>(), qShape, toHeads),
               toDouble(wantGrad.outputs[0].as<float>()), 1e-4);
    expectNear(permuted(grad.outputs[1].as<float>(), kShape, toKt),
               toDouble(wantGrad.outputs[1].as<float>()), 1e-4);
    expectNear(permuted(grad.outputs[2].as<float>(), vShape, toHeads),
               toDouble(wantGrad.outputs[2].as<float>()), 1e-4);
    // The transposed k_t back to k: the round trip the test relies on.
    EXPECT_EQ(permuted(permuted(k, kShape, toKt), {B, H, D, S}, fromKt), k);
  }
}

TEST(Kernels, AttentionLayoutErrorsNameTheLayout) {
  Value q = f32({1, 2, 1, 4}, randomFloats(8, 1));
  Result r = runOp("attention", {q, q, q}, {{F32, {1, 2, 1, 4}}},
                   {{"layout", std::string("bhds")}});
  EXPECT_NE(r.error.find("layout must be bhsd or bshd, not bhds"),
            std::string::npos)
      << r.error;
  Value kt = f32({1, 2, 4, 1}, randomFloats(8, 2));
  r = runOp("attention", {q, kt, q}, {{F32, {1, 2, 1, 4}}},
            {{"layout", std::string("bshd")}});
  EXPECT_NE(r.error.find("shapes do not chain (layout bshd)"),
            std::string::npos)
      << r.error;
}

/// In bf16 and f16 (mixed precision) attention_grad computes in fp32 from
/// the widened tensors, lse stays f32, and each gradient is rounded once.
TEST(Kernels, HalfPrecisionAttentionGradComputesInFp32) {
  const int64_t B = 2, L = 9, D = 4, S = 11, DV = 3;
  std::vector<Shape> shapes = {
      {B, L, D}, {B, D, S}, {B, S, DV}, {B, L, DV}, {B, L, DV}};
  for (plan::DType half : {plan::DType::BF16, plan::DType::F16}) {
    fsdprt_dtype_t dtype = half == plan::DType::BF16 ? FSDPRT_BF16 : FSDPRT_F16;
    SCOPED_TRACE(dtype == FSDPRT_BF16 ? "bf16" : "f16");
    std::vector<Value> halves, widened;
    unsigned seed = 70;
    for (const Shape &shape : shapes) {
      std::vector<float> v = randomFloats(numel(shape), seed++);
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        h[i] = fsdprt::floatToHalf(v[i], dtype);
        v[i] = fsdprt::halfToFloat(h[i], dtype);
      }
      halves.push_back(valueOf(half, shape, h));
      widened.push_back(f32(shape, v));
    }
    AttrList attrs = {{"scale", 0.5}, {"mask_kind", std::string("causal")}};
    // lse from the fp32 forward on the same (rounded) inputs.
    Result fwd = runOp("attention", {widened[0], widened[1], widened[2]},
                       {{F32, {B, L, DV}}, {F32, {B, L}}}, attrs);
    ASSERT_EQ(fwd.error, "");
    Result got = runOp(
        "attention_grad",
        {halves[0], halves[1], halves[2], halves[3], fwd.outputs[1], halves[4]},
        {{half, {B, L, D}}, {half, {B, D, S}}, {half, {B, S, DV}}}, attrs);
    ASSERT_EQ(got.error, "");
    Result want =
        runOp("attention_grad",
              {widened[0], widened[1], widened[2], widened[3], fwd.outputs[1],
               widened[4]},
              {{F32, {B, L, D}}, {F32, {B, D, S}}, {F32, {B, S, DV}}}, attrs);
    ASSERT_EQ(want.error, "");
    for (int k = 0; k < 3; ++k) {
      std::vector<uint16_t> h = got.outputs[k].as<uint16_t>();
      std::vector<float> w = want.outputs[k].as<float>();
      ASSERT_EQ(h.size(), w.size());
      for (size_t i = 0; i < h.size(); ++i)
        ASSERT_EQ(h[i], fsdprt::floatToHalf(w[i], dtype))
            << "output " << k << " at " << i;
    }
  }
}

TEST(Kernels, AttentionGradRejectsBadOperands) {
  const int64_t L = 3, D = 2, S = 4, DV = 2;
  Value q = f32({L, D}, randomFloats(L * D, 1)),
        kt = f32({D, S}, randomFloats(D * S, 2)),
        v = f32({S, DV}, randomFloats(S * DV, 3)),
        y = f32({L, DV}, randomFloats(L * DV, 4)),
        lse = f32({L}, randomFloats(L, 5)),
        mask = boolean({L, S}, std::vector<uint8_t>(L * S, 0));
  std::vector<std::pair<plan::DType, Shape>> outs = {
      {F32, {L, D}}, {F32, {D, S}}, {F32, {S, DV}}};
  auto error = [&](const std::vector<Value> &ins, const std::string &kind,
                   std::vector<std::pair<plan::DType, Shape>> o) {
    return runOp("attention_grad", ins, o, {{"mask_kind", kind}}).error;
  };
  EXPECT_NE(error({q, kt, v, mask, y, lse, y}, "causal", outs)
                .find("mask_kind causal takes no mask"),
            std::string::npos);
  EXPECT_NE(error({q, kt, v, y, lse, y}, "fill", outs)
                .find("mask_kind fill needs mask"),
            std::string::npos);
  EXPECT_NE(error({q, kt, v, y, f32({L, 1}, {0, 0, 0}), y}, "none", outs)
                .find("lse [3, 1] should be [3]"),
            std::string::npos);
  auto badDk = outs;
  badDk[1].second = {S, D};
  EXPECT_NE(error({q, kt, v, y, lse, y}, "none", badDk)
                .find("dk_t [4, 2] should be [2, 4]"),
            std::string::npos);
  EXPECT_NE(error({q, kt, v, y, lse, y}, "tril", outs)
                .find("mask_kind must be none, add, fill or causal, not tril"),
            std::string::npos);
  Result r =
      runOp("attention", {q, kt, v}, {{F32, {L, DV}}, {F32, {L}}, {F32, {L}}},
            {{"mask_kind", std::string("none")}});
  EXPECT_NE(r.error.find("has 3 outputs"), std::string::npos) << r.error;
}

//===----------------------------------------------------------------------===//
// Batch norm in training against torch: batch_norm_train, batch_norm_grad
//===----------------------------------------------------------------------===//

/// One case of gen_batch_norm_ref.py's file: epsilon, ONNX's momentum, the
/// inputs and torch's references, by name.
struct BatchNormCase {
  std::string name;
  double epsilon = 1e-5, momentum = 0.9;
  std::map<std::string, std::pair<Shape, std::vector<double>>> tensors;
  Value f32Of(const std::string &n) const {
    const auto &[shape, values] = tensors.at(n);
    return f32(shape, std::vector<float>(values.begin(), values.end()));
  }
  const Shape &shapeOf(const std::string &n) const {
    return tensors.at(n).first;
  }
  const std::vector<double> &ref(const std::string &n) const {
    return tensors.at(n).second;
  }
  AttrList attrs() const {
    return {{"epsilon", epsilon}, {"momentum", momentum}};
  }
};

std::vector<BatchNormCase> readBatchNormCases() {
  std::ifstream in(FSDP_BATCH_NORM_REF);
  EXPECT_TRUE(in) << "cannot read " << FSDP_BATCH_NORM_REF;
  std::vector<BatchNormCase> cases;
  std::string word;
  while (in >> word) {
    EXPECT_EQ(word, "case");
    BatchNormCase c;
    in >> c.name >> c.epsilon >> c.momentum;
    std::string name, dtype;
    while (in >> name && name != "end") {
      int rank;
      in >> dtype >> rank;
      Shape shape(rank);
      for (int64_t &d : shape)
        in >> d;
      std::vector<double> values(numel(shape));
      for (double &x : values) {
        in >> word;
        x = std::strtod(word.c_str(), nullptr);
      }
      c.tensors[name] = {shape, values};
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// y, the saved mean and inverse std, the running statistics' updates
// (momentum, unbiased variance) and dx, dscale, dbias equal torch's
// native_batch_norm and native_batch_norm_backward (float64): NCHW, [N, C],
// [N, C, L], two values per channel, a constant channel (variance 0) and a
// plane of 2000. The gradient runs on the kernel's own saved statistics, as
// a training plan runs it; one thread gives the same bits as two.
TEST(Kernels, BatchNormTrainAndItsGradientEqualTorch) {
  std::vector<BatchNormCase> cases = readBatchNormCases();
  ASSERT_GE(cases.size(), 6u);
  for (const BatchNormCase &c : cases) {
    SCOPED_TRACE(c.name);
    const Shape &xs = c.shapeOf("x"), cs = {xs[1]};
    std::vector<Value> ins = {c.f32Of("x"), c.f32Of("scale"), c.f32Of("bias"),
                              c.f32Of("running_mean"),
                              c.f32Of("running_var")};
    std::vector<std::pair<plan::DType, Shape>> outs = {
        {F32, xs}, {F32, cs}, {F32, cs}, {F32, cs}, {F32, cs}};
    Result fwd = runOp("batch_norm_train", ins, outs, c.attrs());
    ASSERT_EQ(fwd.error, "");
    const char *names[] = {"y", "saved_mean", "saved_invstd",
                           "next_running_mean", "next_running_var"};
    for (int k = 0; k < 5; ++k) {
      SCOPED_TRACE(names[k]);
      // The constant channel's inverse std is 1 / sqrt(1e-5) ~ 316.
      expectNear(fwd.outputs[k].as<float>(), c.ref(names[k]), 2e-6);
    }
    std::vector<Value> gradIns = {c.f32Of("dy"), c.f32Of("x"),
                                  c.f32Of("scale"), fwd.outputs[1],
                                  fwd.outputs[2]};
    std::vector<std::pair<plan::DType, Shape>> gradOuts = {
        {F32, xs}, {F32, cs}, {F32, cs}};
    Result grad = runOp("batch_norm_grad", gradIns, gradOuts, c.attrs());
    ASSERT_EQ(grad.error, "");
    const char *gradNames[] = {"dx", "dscale", "dbias"};
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(gradNames[k]);
      expectNear(grad.outputs[k].as<float>(), c.ref(gradNames[k]), 1e-5);
    }
    Result serial =
        runOp("batch_norm_grad", gradIns, gradOuts, c.attrs(), /*threads=*/1);
    ASSERT_EQ(serial.error, "");
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(serial.outputs[k].bytes, grad.outputs[k].bytes);
  }
}

// Mixed precision: x, y, dy and dx in bf16 or f16, the statistics, scale
// and bias fp32 (as cuDNN keeps them). The kernels compute in fp32 from
// the widened tensors and round y and dx once: the fp32 kernels' results on
// the same (rounded) inputs, rounded, and the same statistics.
TEST(Kernels, HalfPrecisionBatchNormTrainKeepsFp32Statistics) {
  const Shape xs = {3, 4, 5}, cs = {4};
  for (plan::DType half : {plan::DType::BF16, plan::DType::F16}) {
    fsdprt_dtype_t dtype = half == plan::DType::BF16 ? FSDPRT_BF16 : FSDPRT_F16;
    SCOPED_TRACE(dtype == FSDPRT_BF16 ? "bf16" : "f16");
    Value xHalf, dyHalf, xWide, dyWide;
    unsigned seed = 90;
    for (auto [h, w] : {std::pair{&xHalf, &xWide}, {&dyHalf, &dyWide}}) {
      std::vector<float> v = randomFloats(numel(xs), seed++);
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        bits[i] = fsdprt::floatToHalf(v[i], dtype);
        v[i] = fsdprt::halfToFloat(bits[i], dtype);
      }
      *h = valueOf(half, xs, bits);
      *w = f32(xs, v);
    }
    std::vector<Value> stats = {f32(cs, randomFloats(4, 95)),
                                f32(cs, randomFloats(4, 96)),
                                f32(cs, randomFloats(4, 97)),
                                f32(cs, {0.5f, 1.0f, 2.0f, 0.25f})};
    AttrList attrs = {{"epsilon", 1e-5}, {"momentum", 0.9}};
    auto forward = [&](const Value &x, plan::DType yType) {
      std::vector<Value> ins = {x};
      ins.insert(ins.end(), stats.begin(), stats.end());
      return runOp("batch_norm_train", ins,
                   {{yType, xs}, {F32, cs}, {F32, cs}, {F32, cs}, {F32, cs}},
                   attrs);
    };
    Result got = forward(xHalf, half), want = forward(xWide, F32);
    ASSERT_EQ(got.error, "");
    ASSERT_EQ(want.error, "");
    for (int k = 1; k < 5; ++k)
      EXPECT_EQ(got.outputs[k].bytes, want.outputs[k].bytes) << "output " << k;
    std::vector<uint16_t> y = got.outputs[0].as<uint16_t>();
    std::vector<float> yWant = want.outputs[0].as<float>();
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], fsdprt::floatToHalf(yWant[i], dtype)) << "y at " << i;

    auto backward = [&](const Value &dy, const Value &x, plan::DType type) {
      return runOp("batch_norm_grad",
                   {dy, x, stats[0], want.outputs[1], want.outputs[2]},
                   {{type, xs}, {F32, cs}, {F32, cs}}, attrs);
    };
    Result dGot = backward(dyHalf, xHalf, half),
           dWant = backward(dyWide, xWide, F32);
    ASSERT_EQ(dGot.error, "");
    ASSERT_EQ(dWant.error, "");
    for (int k = 1; k < 3; ++k)
      EXPECT_EQ(dGot.outputs[k].bytes, dWant.outputs[k].bytes)
          << "output " << k;
    std::vector<uint16_t> dx = dGot.outputs[0].as<uint16_t>();
    std::vector<float> dxWant = dWant.outputs[0].as<float>();
    for (size_t i = 0; i < dx.size(); ++i)
      ASSERT_EQ(dx[i], fsdprt::floatToHalf(dxWant[i], dtype)) << "dx at " << i;
  }
}

// Shapes that do not fit are refused when the plan is prepared, naming the
// kernel and what is wrong.
TEST(Kernels, BatchNormTrainRejectsBadOperands) {
  Value x = f32({2, 3, 4}, randomFloats(24, 1)),
        c3 = f32({3}, randomFloats(3, 2)), c2 = f32({2}, randomFloats(2, 3));
  Result r = runOp("batch_norm_train", {x, c3, c3, c2, c3},
                   {{F32, {2, 3, 4}}, {F32, {3}}, {F32, {3}}, {F32, {3}},
                    {F32, {3}}});
  EXPECT_NE(r.error.find("the per-channel tensors (scale, bias, statistics) "
                         "must be [3], not [2]"),
            std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find("batch_norm_train"), std::string::npos) << r.error;
  r = runOp("batch_norm_grad", {f32({3}, randomFloats(3, 4)),
                                f32({3}, randomFloats(3, 4)), c3, c3, c3},
            {{F32, {3}}, {F32, {3}}, {F32, {3}}});
  EXPECT_NE(r.error.find("x must be [N, C, ...], not [3]"), std::string::npos)
      << r.error;
  r = runOp("batch_norm_train", {f32({0, 3}, {}), c3, c3, c3, c3},
            {{F32, {0, 3}}, {F32, {3}}, {F32, {3}}, {F32, {3}}, {F32, {3}}});
  EXPECT_NE(r.error.find("batch norm in training needs at least one value "
                         "per channel, x is [0, 3]"),
            std::string::npos)
      << r.error;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// ONNX Conv, NCHW, by definition.
std::vector<double> convRef(const std::vector<float> &x, const Shape &xs,
                            const std::vector<float> &w, const Shape &ws,
                            const std::vector<float> *bias, const Shape &ys,
                            Shape strides, Shape pads, Shape dil, int group) {
  int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  int64_t oh = ys[2], ow = ys[3], mg = m / group;
  std::vector<double> y;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double s = bias ? (*bias)[o] : 0;
          int64_t g = o / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                int64_t ih = i * strides[0] - pads[0] + a * dil[0];
                int64_t iw = j * strides[1] - pads[1] + e * dil[1];
                if (ih >= 0 && ih < h && iw >= 0 && iw < wd)
                  s += double(x[((b * c + g * cg + ci) * h + ih) * wd + iw]) *
                       w[((o * cg + ci) * kh + a) * kw + e];
              }
          y.push_back(s);
        }
  return y;
}

TEST(Kernels, ConvWithPaddingStrideAndGroups) {
  // x [2, 4, 5, 5], w [6, 2, 3, 3], group 2, stride 2, pad 1 -> [2, 6, 3, 3]
  auto x = randomFloats(2 * 4 * 25, 18), w = randomFloats(6 * 2 * 9, 19),
       b = randomFloats(6, 20);
  auto y =
      runF32("conv", {f32({2, 4, 5, 5}, x), f32({6, 2, 3, 3}, w), f32({6}, b)},
             {2, 6, 3, 3},
             {{"strides", Shape{2, 2}},
              {"pads", Shape{1, 1, 1, 1}},
              {"dilations", Shape{1, 1}},
              {"group", int64_t(2)}});
  expectNear(y, convRef(x, {2, 4, 5, 5}, w, {6, 2, 3, 3}, &b, {2, 6, 3, 3},
                        {2, 2}, {1, 1, 1, 1}, {1, 1}, 2));
}

TEST(Kernels, ConvWithDilationAsymmetricPadsAndOneByOne) {
  // Dilation 2, pads (top 2, left 1, bottom 0, right 3), no bias; large
  // enough for the GEMM to split.
  auto x = randomFloats(1 * 8 * 12 * 12, 21), w = randomFloats(16 * 8 * 9, 22);
  Shape ys = {1, 16, 10, 12};
  auto y = runF32("conv", {f32({1, 8, 12, 12}, x), f32({16, 8, 3, 3}, w)}, ys,
                  {{"strides", Shape{1, 1}},
                   {"pads", Shape{2, 1, 0, 3}},
                   {"dilations", Shape{2, 2}},
                   {"group", int64_t(1)}});
  expectNear(y,
             convRef(x, {1, 8, 12, 12}, w, {16, 8, 3, 3}, nullptr, ys, {1, 1},
                     {2, 1, 0, 3}, {2, 2}, 1),
             1e-4);
  // A 1x1 convolution reads x directly.
  auto w1 = randomFloats(5 * 8, 23), b1 = randomFloats(5, 24);
  auto y1 = runF32(
      "conv", {f32({1, 8, 12, 12}, x), f32({5, 8, 1, 1}, w1), f32({5}, b1)},
      {1, 5, 12, 12});
  expectNear(y1, convRef(x, {1, 8, 12, 12}, w1, {5, 8, 1, 1}, &b1,
                         {1, 5, 12, 12}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1));
  Result r = runOp("conv", {f32({1, 8, 12, 12}, x), f32({5, 8, 1, 1}, w1)},
                   {{F32, {1, 5, 11, 12}}});
  EXPECT_NE(r.error.find("does not match the window"), std::string::npos)
      << r.error;
  r = runOp("conv", {f32({1, 8, 12, 12}, x), f32({5, 8, 1, 1}, w1)},
            {{F32, {1, 5, 12, 12}}}, {{"strides", Shape{0, 1}}});
  EXPECT_NE(r.error.find("strides must be >= 1, not 0"), std::string::npos)
      << r.error;
}

TEST(Kernels, Conv1D) {
  // x [2, 3, 10], w [4, 3, 3], stride 2, pads (1, 2) -> [2, 4, 6]
  auto x = randomFloats(2 * 3 * 10, 25), w = randomFloats(4 * 3 * 3, 26);
  auto y = runF32("conv", {f32({2, 3, 10}, x), f32({4, 3, 3}, w)}, {2, 4, 6},
                  {{"strides", Shape{2}},
                   {"pads", Shape{1, 2}},
                   {"dilations", Shape{1}},
                   {"group", int64_t(1)}});
  expectNear(y, convRef(x, {2, 3, 1, 10}, w, {4, 3, 1, 3}, nullptr,
                        {2, 4, 1, 6}, {1, 2}, {0, 1, 0, 2}, {1, 1}, 1));
}

/// A convolution case: x [N, C, (H,) W], w [M, C/group, (kh,) kw], the
/// output's shape and ONNX's attributes (1-D cases name one spatial dim).
struct ConvCase {
  const char *name;
  Shape x, w, y, strides, pads, dil;
  int64_t group;
};

/// Calls visit(xIndex, wIndex, yIndex) for every product of the
/// convolution `c` (flat NC[H]W / OI[H]W indices), by definition.
template <typename Visit>
void forEachConvProduct(const ConvCase &c, Visit visit) {
  bool oneD = c.x.size() == 3;
  auto at = [&](const Shape &s, size_t d) {
    return oneD && d == 2 ? 1 : s[oneD ? d - 1 : d];
  };
  int64_t n = c.x[0], ch = c.x[1], h = at(c.x, 2), wd = at(c.x, 3);
  int64_t m = c.w[0], cg = c.w[1], kh = at(c.w, 2), kw = at(c.w, 3);
  int64_t oh = at(c.y, 2), ow = at(c.y, 3), mg = m / c.group;
  int64_t sh = oneD ? 1 : c.strides[0], sw = c.strides.back();
  int64_t ph = oneD ? 0 : c.pads[0], pw = oneD ? c.pads[0] : c.pads[1];
  int64_t dh = oneD ? 1 : c.dil[0], dw = c.dil.back();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                int64_t ih = i * sh - ph + a * dh, iw = j * sw - pw + e * dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd)
                  continue;
                int64_t xc = (o / mg) * cg + ci;
                visit(((b * ch + xc) * h + ih) * wd + iw,
                      ((o * cg + ci) * kh + a) * kw + e,
                      ((b * m + o) * oh + i) * ow + j);
              }
}

TEST(Kernels, ConvAndGradientsOnEveryPath) {
  // Each case through oneDNN (the default; a 1x1 weight gradient over at
  // most 64 windows takes im2col + GEMM on two threads) and through im2col +
  // GEMM (FSDPRT_DNNL=off), both against the definition in double.
  // name, x, w, y, strides, pads, dilations, group
  // clang-format off
  const std::vector<ConvCase> cases = {
      {"7x7 stride 2, batch 1", {1, 3, 19, 17}, {8, 3, 7, 7}, {1, 8, 10, 9},
       {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},
      {"1x1", {2, 16, 5, 5}, {24, 16, 1, 1}, {2, 24, 5, 5},
       {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"1x1 stride 2", {2, 8, 7, 7}, {12, 8, 1, 1}, {2, 12, 4, 4},
       {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      {"3x3 stride 2, groups", {2, 4, 9, 9}, {6, 2, 3, 3}, {2, 6, 5, 5},
       {2, 2}, {1, 1, 1, 1}, {1, 1}, 2},
      {"dilation, asymmetric pads", {1, 8, 12, 12}, {16, 8, 3, 3},
       {1, 16, 10, 12}, {1, 1}, {2, 1, 0, 3}, {2, 2}, 1},
      {"depthwise", {2, 6, 8, 8}, {6, 1, 3, 3}, {2, 6, 8, 8},
       {1, 1}, {1, 1, 1, 1}, {1, 1}, 6},
      {"2x2 spatial, more channels", {4, 32, 2, 2}, {64, 32, 3, 3},
       {4, 64, 2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"1x1, 4x4 spatial", {4, 96, 4, 4}, {40, 96, 1, 1}, {4, 40, 4, 4},
       {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"1x1, 8x8 spatial", {2, 24, 8, 8}, {40, 24, 1, 1}, {2, 40, 8, 8},
       {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"1-D", {2, 3, 10}, {4, 3, 3}, {2, 4, 6}, {2}, {1, 2}, {1}, 1},
  };
  // clang-format on
  unsigned seed = 60;
  for (const ConvCase &c : cases) {
    auto x = randomFloats(numel(c.x), seed++),
         w = randomFloats(numel(c.w), seed++),
         dy = randomFloats(numel(c.y), seed++);
    std::vector<double> y(numel(c.y)), dx(numel(c.x)), dw(numel(c.w));
    forEachConvProduct(c, [&](int64_t xi, int64_t wi, int64_t yi) {
      y[yi] += double(x[xi]) * w[wi];
      dx[xi] += double(dy[yi]) * w[wi];
      dw[wi] += double(x[xi]) * dy[yi];
    });
    AttrList attrs = {{"strides", c.strides},
                      {"pads", c.pads},
                      {"dilations", c.dil},
                      {"group", c.group}};
    for (bool dnnl : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + (dnnl ? "" : ", FSDPRT_DNNL=off"));
      if (!dnnl)
        ::setenv("FSDPRT_DNNL", "off", 1);
      expectNear(runF32("conv", {f32(c.x, x), f32(c.w, w)}, c.y, attrs), y,
                 1e-4);
      expectNear(
          runF32("conv_grad_input", {f32(c.y, dy), f32(c.w, w)}, c.x, attrs),
          dx, 1e-4);
      expectNear(
          runF32("conv_grad_weight", {f32(c.x, x), f32(c.y, dy)}, c.w, attrs),
          dw, 1e-4);
      ::unsetenv("FSDPRT_DNNL");
    }
  }
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, pooling, reductions, losses
//===----------------------------------------------------------------------===//

TEST(Kernels, SoftmaxAndLogSoftmaxAlongAnAxis) {
  // [3, 4, 5] along axis 1 (strided) and along the last axis.
  auto x = randomFloats(60, 27);
  x[7] = 80; // large values need the max subtraction
  for (int64_t axis : {1, 2})
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::to_string(axis) + (log ? " log" : ""));
      auto y = runF32(log ? "log_softmax" : "softmax", {f32({3, 4, 5}, x)},
                      {3, 4, 5}, {{"axis", axis}});
      std::vector<double> want(60);
      int64_t n = axis == 1 ? 4 : 5, inner = axis == 1 ? 5 : 1;
      for (int64_t o = 0; o < 60 / (n * inner); ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double max = -INFINITY, sum = 0;
          for (int64_t j = 0; j < n; ++j)
            max = std::max<double>(max, x[(o * n + j) * inner + i]);
          for (int64_t j = 0; j < n; ++j)
            sum += std::exp(x[(o * n + j) * inner + i] - max);
          for (int64_t j = 0; j < n; ++j) {
            double e = x[(o * n + j) * inner + i] - max;
            want[(o * n + j) * inner + i] =
                log ? e - std::log(sum) : std::exp(e) / sum;
          }
        }
      expectNear(y, want);
    }
}

TEST(Kernels, LayerNormOverTrailingDims) {
  // [2, 3, 4] normalised over [3, 4] (axis 1), with and without bias.
  auto x = randomFloats(24, 28), g = randomFloats(12, 29),
       b = randomFloats(12, 30);
  for (bool withBias : {true, false}) {
    std::vector<Value> ins = {f32({2, 3, 4}, x), f32({3, 4}, g)};
    if (withBias)
      ins.push_back(f32({3, 4}, b));
    auto y = runF32("layer_norm", ins, {2, 3, 4},
                    {{"axis", int64_t(1)}, {"epsilon", 1e-5}});
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      double mean = 0, var = 0;
      for (int j = 0; j < 12; ++j)
        mean += x[r * 12 + j] / 12.0;
      for (int j = 0; j < 12; ++j)
        var += (x[r * 12 + j] - mean) * (x[r * 12 + j] - mean) / 12.0;
      for (int j = 0; j < 12; ++j)
        want.push_back((x[r * 12 + j] - mean) / std::sqrt(var + 1e-5) * g[j] +
                       (withBias ? b[j] : 0));
    }
    expectNear(y, want);
  }
  // A scale broadcast over part of the normalised dims: [4] onto [3, 4].
  std::vector<float> g4(g.begin(), g.begin() + 4), g5(g.begin(), g.begin() + 5);
  auto y = runF32("layer_norm", {f32({2, 3, 4}, x), f32({4}, g4)}, {2, 3, 4},
                  {{"axis", int64_t(1)}});
  std::vector<double> want;
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 12; ++j)
      mean += x[r * 12 + j] / 12.0;
    for (int j = 0; j < 12; ++j)
      var += (x[r * 12 + j] - mean) * (x[r * 12 + j] - mean) / 12.0;
    for (int j = 0; j < 12; ++j)
      want.push_back((x[r * 12 + j] - mean) / std::sqrt(var + 1e-5) * g[j % 4]);
  }
  expectNear(y, want);
  Result r = runOp("layer_norm", {f32({2, 3, 4}, x), f32({5}, g5)},
                   {{F32, {2, 3, 4}}}, {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("scale [5] does not broadcast to [3, 4]"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, RmsNormWithAndWithoutScale) {
  auto x = randomFloats(3 * 8, 31), g = randomFloats(8, 32);
  for (bool withScale : {true, false}) {
    std::vector<Value> ins = {f32({3, 8}, x)};
    if (withScale)
      ins.push_back(f32({8}, g));
    auto y = runF32("rms_norm", ins, {3, 8}, {{"epsilon", 1e-6}});
    std::vector<double> want;
    for (int r = 0; r < 3; ++r) {
      double sq = 0;
      for (int j = 0; j < 8; ++j)
        sq += double(x[r * 8 + j]) * x[r * 8 + j] / 8.0;
      for (int j = 0; j < 8; ++j)
        want.push_back(x[r * 8 + j] / std::sqrt(sq + 1e-6) *
                       (withScale ? g[j] : 1));
    }
    expectNear(y, want);
  }
}

TEST(Kernels, BatchNormPerChannel) {
  auto x = randomFloats(2 * 3 * 4, 33), s = randomFloats(3, 34),
       b = randomFloats(3, 35), mean = randomFloats(3, 36),
       var = randomFloats(3, 37);
  for (float &v : var)
    v = std::fabs(v) + 0.5f;
  auto y = runF32("batch_norm",
                  {f32({2, 3, 2, 2}, x), f32({3}, s), f32({3}, b),
                   f32({3}, mean), f32({3}, var)},
                  {2, 3, 2, 2}, {{"epsilon", 1e-3}});
  std::vector<double> want;
  for (int i = 0; i < 24; ++i) {
    int c = i / 4 % 3;
    want.push_back((x[i] - mean[c]) / std::sqrt(var[c] + 1e-3) * s[c] + b[c]);
  }
  expectNear(y, want);
}

/// ONNX pooling of one [H, W] plane by definition.
std::vector<double> poolRef(const std::vector<float> &x, int h, int w, int oh,
                            int ow, Shape k, Shape st, Shape pads, Shape dil,
                            bool max, bool includePad) {
  std::vector<double> y;
  for (int i = 0; i < oh; ++i)
    for (int j = 0; j < ow; ++j) {
      double acc = max ? -INFINITY : 0;
      int count = 0;
      for (int a = 0; a < k[0]; ++a)
        for (int b = 0; b < k[1]; ++b) {
          int ih = i * st[0] - pads[0] + a * dil[0],
              iw = j * st[1] - pads[1] + b * dil[1];
          bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
          bool inPadded = ih < h + pads[2] && iw < w + pads[3];
          if (inside) {
            acc = max ? std::max<double>(acc, x[ih * w + iw])
                      : acc + x[ih * w + iw];
            ++count;
          } else if (includePad && inPadded) {
            ++count;
          }
        }
      y.push_back(max ? acc : acc / count);
    }
  return y;
}

TEST(Kernels, MaxPoolIgnoresPadding) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i)
    x[i] = -1.0f - i; // all negative: a zero from padding would win
  auto y = runF32("max_pool", {f32({1, 1, 4, 4}, x)}, {1, 1, 2, 2},
                  {{"kernel_shape", Shape{3, 3}},
                   {"strides", Shape{2, 2}},
                   {"pads", Shape{1, 1, 1, 1}},
                   {"dilations", Shape{1, 1}}});
  expectNear(y, {-1, -2, -5, -6});
}

TEST(Kernels, PoolsWithCeilModeDilationAndCountIncludePad) {
  auto x = randomFloats(2 * 3 * 7 * 7, 38);
  struct Case {
    bool max, includePad, ceil;
    Shape k, st, pads, dil;
    int out;
  };
  const std::vector<Case> cases = {
      {true, false, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 4},  // 7 -> 4
                                                                     // (ceil)
      {true, false, false, {2, 2}, {1, 1}, {1, 1, 0, 0}, {2, 2}, 6}, // dilation
      {false, false, false, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4},
      {false, true, false, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4},
      {false, true, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 4}, // past the
                                                                    // edge
      // Windows wider than the input: with ceil_mode one window, the whole
      // plane (EfficientNet's AvgPool2d(hidden_dim, ceil_mode=True)), the
      // average counting the padding only up to the padded edge.
      {false, true, true, {9, 9}, {9, 9}, {0, 0, 0, 0}, {1, 1}, 1},
      {false, true, true, {12, 12}, {4, 4}, {1, 1, 1, 1}, {1, 1}, 1},
      {false, false, true, {12, 12}, {4, 4}, {1, 1, 1, 1}, {1, 1}, 1},
      {true, false, true, {8, 8}, {3, 3}, {0, 0, 0, 0}, {1, 1}, 1},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.max ? "max" : "average") + " out " +
                 std::to_string(c.out));
    AttrList attrs = {{"kernel_shape", c.k},
                      {"strides", c.st},
                      {"pads", c.pads},
                      {"ceil_mode", int64_t(c.ceil)}};
    if (c.max)
      attrs.push_back({"dilations", c.dil});
    else
      attrs.push_back({"count_include_pad", int64_t(c.includePad)});
    auto y = runF32(c.max ? "max_pool" : "average_pool", {f32({2, 3, 7, 7}, x)},
                    {2, 3, c.out, c.out}, attrs);
    std::vector<double> want;
    for (int p = 0; p < 6; ++p) {
      std::vector<float> plane(x.begin() + p * 49, x.begin() + (p + 1) * 49);
      auto part = poolRef(plane, 7, 7, c.out, c.out, c.k, c.st, c.pads, c.dil,
                          c.max, c.includePad);
      want.insert(want.end(), part.begin(), part.end());
    }
    expectNear(y, want);
  }
  Result r = runOp("max_pool", {f32({2, 3, 7, 7}, x)}, {{F32, {2, 3, 4, 4}}},
                   {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}}});
  EXPECT_NE(r.error.find("does not match the window"), std::string::npos)
      << r.error;
  // Without ceil_mode a window wider than the padded input fits nowhere.
  r = runOp("average_pool", {f32({2, 3, 7, 7}, x)}, {{F32, {2, 3, 1, 1}}},
            {{"kernel_shape", Shape{9, 9}}, {"strides", Shape{9, 9}}});
  EXPECT_NE(r.error.find("does not match the window"), std::string::npos)
      << r.error;
}

TEST(Kernels, GlobalAveragePool) {
  auto x = randomFloats(2 * 3 * 5 * 4, 39);
  auto y = runF32("global_average_pool", {f32({2, 3, 5, 4}, x)}, {2, 3, 1, 1});
  std::vector<double> want;
  for (int p = 0; p < 6; ++p) {
    double s = 0;
    for (int j = 0; j < 20; ++j)
      s += x[p * 20 + j];
    want.push_back(s / 20);
  }
  expectNear(y, want);
}

/// A reduction of `x` ([2, 3, 4]) over `axes` by definition.
std::vector<double> reduceRef(const std::vector<float> &x, const Shape &shape,
                              const std::vector<bool> &reduced,
                              const std::string &kind) {
  Shape kept;
  for (size_t d = 0; d < shape.size(); ++d)
    kept.push_back(reduced[d] ? 1 : shape[d]);
  double init = kind == "max"    ? -INFINITY
                : kind == "min"  ? INFINITY
                : kind == "prod" ? 1.0
                                 : 0.0;
  std::vector<double> acc(numel(kept), init);
  std::vector<int> count(acc.size(), 0);
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (size_t k = shape.size(); k-- > 0;) {
      int64_t coord = rest % shape[k];
      rest /= shape[k];
      o += (reduced[k] ? 0 : coord) * stride;
      stride *= kept[k];
    }
    double v = x[i];
    if (kind == "max")
      acc[o] = std::max(acc[o], v);
    else if (kind == "min")
      acc[o] = std::min(acc[o], v);
    else if (kind == "prod")
      acc[o] *= v;
    else if (kind == "sum_square" || kind == "l2")
      acc[o] += v * v;
    else if (kind == "l1")
      acc[o] += std::fabs(v);
    else if (kind == "log_sum_exp")
      acc[o] += std::exp(v);
    else
      acc[o] += v;
    ++count[o];
  }
  for (size_t o = 0; o < acc.size(); ++o) {
    if (kind == "mean")
      acc[o] /= count[o];
    else if (kind == "l2")
      acc[o] = std::sqrt(acc[o]);
    else if (kind == "log_sum" || kind == "log_sum_exp")
      acc[o] = std::log(acc[o]);
  }
  return acc;
}

TEST(Kernels, ReductionsOverAnyAxes) {
  Shape shape = {2, 3, 4};
  auto x = randomFloats(24, 40);
  struct Case {
    Shape axes;
    bool keepdims;
    Shape out;
  };
  const std::vector<Case> cases = {
      {{2}, true, {2, 3, 1}},    {{1}, false, {2, 4}},
      {{0, 1}, true, {1, 1, 4}}, {{0, 2}, false, {3}},
      {{}, false, {}},           {{0, 1, 2}, true, {1, 1, 1}}};
  // log_sum reads positive values.
  std::vector<float> positive = x;
  for (float &v : positive)
    v = std::fabs(v) + 0.1f;
  for (const std::string kind : {"sum", "mean", "max", "min", "prod",
                                 "sum_square", "l1", "l2", "log_sum",
                                 "log_sum_exp"})
    for (const Case &c : cases) {
      SCOPED_TRACE(kind + " over " + std::to_string(c.axes.size()) + " axes");
      std::vector<bool> reduced(3, c.axes.empty());
      for (int64_t a : c.axes)
        reduced[a] = true;
      const std::vector<float> &in = kind == "log_sum" ? positive : x;
      auto y = runF32("reduce_" + kind, {f32(shape, in)}, c.out,
                      {{"axes", c.axes}, {"keepdims", int64_t(c.keepdims)}});
      expectNear(y, reduceRef(in, shape, reduced, kind));
    }
  // Everything of a large tensor into one value, in parallel pieces.
  auto big = randomFloats(300000, 41);
  double sum = 0;
  for (float v : big)
    sum += v;
  expectNear(runF32("reduce_mean", {f32({300, 1000}, big)}, {},
                    {{"axes", Shape{}}, {"keepdims", int64_t(0)}}),
             {sum / 300000});
  Result r = runOp("reduce_sum", {f32(shape, x)}, {{F32, {2, 3}}},
                   {{"axes", Shape{2}}, {"keepdims", int64_t(1)}});
  EXPECT_NE(r.error.find("output [2, 3] should be [2, 3, 1]"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, MatmulOnFloat64) {
  // [2, 2, 3] x [3, 2] and, with trans_b, x [2, 3], against plain loops in
  // double; 1e-12 terms survive only in float64.
  std::vector<double> a = {1, 2, 3, 4, 5, 6, 1e-12, 0, 1, 2, 2, 2};
  std::vector<double> b = {1, 0, 0, 1, 1, 1}, bt = {1, 0, 1, 0, 1, 1};
  std::vector<double> want;
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int t = 0; t < 3; ++t)
        acc += a[r * 3 + t] * b[t * 2 + j];
      want.push_back(acc);
    }
  Result r = runOp("matmul", {f64({2, 2, 3}, a), f64({3, 2}, b)},
                   {{F64, {2, 2, 2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<double>(), want);
  r = runOp("matmul", {f64({2, 2, 3}, a), f64({2, 3}, bt)}, {{F64, {2, 2, 2}}},
            {{"trans_b", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<double>(), want);
  EXPECT_NE(want[4], 1.0); // 1e-12 + 1: kept
  r = runOp("matmul", {f64({2, 2, 3}, a), f32({3, 2}, {1, 0, 0, 1, 1, 1})},
            {{F64, {2, 2, 2}}});
  EXPECT_NE(r.error.find("must all be float32 or all float64"), std::string::npos)
      << r.error;
}

TEST(Kernels, ReductionsOnFloat64KeepDoublePrecision) {
  // log(sum(exp(x))) over axis 1 of [2, 3] in double: the 1e-12 offsets
  // survive, as they would not in float.
  std::vector<double> x = {1e-12, 0, 0, 3, 3 + 2e-12, 3};
  Result r = runOp("reduce_log_sum_exp", {f64({2, 3}, x)}, {{F64, {2}}},
                   {{"axes", Shape{1}}, {"keepdims", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  std::vector<double> y = r.outputs[0].as<double>();
  for (int b = 0; b < 2; ++b) {
    double sum = 0;
    for (int j = 0; j < 3; ++j)
      sum += std::exp(x[b * 3 + j]);
    EXPECT_NEAR(y[b], std::log(sum), 1e-15) << b;
  }
  EXPECT_NE(y[0], std::log(3.0));
  r = runOp("reduce_sum", {f64({2, 3}, x)}, {{F32, {2}}},
            {{"axes", Shape{1}}, {"keepdims", int64_t(0)}});
  EXPECT_NE(r.error.find("x and y must both be float32, float64, int32 or "
                         "int64, not float64 and float32"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, IntegerReductionsAreExact) {
  // XLM's lengths = (ids != pad).sum(1), and the other integer reductions,
  // beyond 2^53 (where a double sum would round) and wrapping around as
  // the type does.
  const int64_t big = int64_t(1) << 60;
  std::vector<int64_t> x = {big + 1, big + 2, 3, -4, 5, -6};
  auto run64 = [&](const std::string &op, Shape axes, Shape out) {
    Result r = runOp(op, {i64({2, 3}, x)}, {{I64, out}},
                     {{"axes", axes}, {"keepdims", int64_t(0)}});
    EXPECT_EQ(r.error, "") << op;
    return r.error.empty() ? r.outputs[0].as<int64_t>()
                           : std::vector<int64_t>();
  };
  EXPECT_EQ(run64("reduce_sum", {1}, {2}),
            (std::vector<int64_t>{2 * big + 6, -5}));
  EXPECT_EQ(run64("reduce_max", {0}, {3}),
            (std::vector<int64_t>{big + 1, big + 2, 3}));
  EXPECT_EQ(run64("reduce_min", {}, {}), (std::vector<int64_t>{-6}));
  EXPECT_EQ(run64("reduce_prod", {1}, {2}),
            (std::vector<int64_t>{
                int64_t(uint64_t(big + 1) * uint64_t(big + 2) * 3), 120}));
  EXPECT_EQ(
      run64("reduce_sum_square", {1}, {2}),
      (std::vector<int64_t>{int64_t(uint64_t(big + 1) * uint64_t(big + 1) +
                                    uint64_t(big + 2) * uint64_t(big + 2) + 9),
                            77}));
  // int32: a sum over 2^31 wraps; everything of a long row (in parallel
  // pieces) sums exactly.
  Result r = runOp("reduce_sum", {i32({3}, {INT32_MAX, 2, 5})}, {{I32, {1}}},
                   {{"axes", Shape{0}}, {"keepdims", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int32_t>(), (std::vector<int32_t>{INT32_MIN + 6}));
  std::vector<int32_t> ones(300001, 1);
  ones[7] = 1000;
  r = runOp("reduce_sum", {i32({300001}, ones)}, {{I32, {}}},
            {{"keepdims", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int32_t>(), (std::vector<int32_t>{301000}));
  // Means, norms and logs of integers are refused, naming what integers
  // reduce by.
  r = runOp("reduce_mean", {i64({2, 3}, x)}, {{I64, {2}}},
            {{"axes", Shape{1}}, {"keepdims", int64_t(0)}});
  EXPECT_NE(r.error.find("reduces int64 only by reduce_sum, reduce_prod, "
                         "reduce_sum_square, reduce_max or reduce_min"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, ArgMaxAndArgMinOfIntegersAndFloat64) {
  // CLIP's pooled output: the position of the largest id (eos) per row,
  // in int32 and int64; float64 too. Ties: the first, or the last.
  auto run = [](const Value &x, const std::string &op, int64_t last) {
    Result r = runOp(op, {x}, {{I64, {2}}},
                     {{"axis", int64_t(1)},
                      {"keepdims", int64_t(0)},
                      {"select_last_index", last}});
    EXPECT_EQ(r.error, "") << op;
    return r.error.empty() ? r.outputs[0].as<int64_t>()
                           : std::vector<int64_t>();
  };
  std::vector<int64_t> ids = {5, 49407, 3, 49407, -2, 7, -9, -9};
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  std::vector<double> wide(ids.begin(), ids.end());
  for (const Value &x :
       {i64({2, 4}, ids), i32({2, 4}, ids32), f64({2, 4}, wide)}) {
    EXPECT_EQ(run(x, "arg_max", 0), (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(run(x, "arg_max", 1), (std::vector<int64_t>{3, 1}));
    EXPECT_EQ(run(x, "arg_min", 0), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(run(x, "arg_min", 1), (std::vector<int64_t>{2, 3}));
  }
  Result r = runOp("arg_max", {boolean({2}, {0, 1})}, {{I64, {}}},
                   {{"axis", int64_t(0)}, {"keepdims", int64_t(0)}});
  EXPECT_NE(r.error.find("the input must be float32, float64, int32 or "
                         "int64, not bool"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, ArgMaxAndArgMinPickFirstOrLast) {
  // [2, 3] with ties: rows {1, 5, 5} and {-2, -7, -7}.
  auto x = f32({2, 3}, {1, 5, 5, -2, -7, -7});
  auto run = [&](const std::string &op, int64_t axis, int64_t keepdims,
                 int64_t last, Shape out) {
    Result r = runOp(op, {x}, {{I64, out}},
                     {{"axis", axis},
                      {"keepdims", keepdims},
                      {"select_last_index", last}});
    EXPECT_EQ(r.error, "");
    return r.error.empty() ? r.outputs[0].as<int64_t>()
                           : std::vector<int64_t>();
  };
  EXPECT_EQ(run("arg_max", 1, 1, 0, {2, 1}), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(run("arg_max", 1, 0, 1, {2}), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(run("arg_min", 1, 0, 0, {2}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(run("arg_min", 1, 0, 1, {2}), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(run("arg_max", 0, 1, 0, {1, 3}), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(run("arg_min", 0, 0, 0, {3}), (std::vector<int64_t>{1, 1, 1}));
  Result r = runOp("arg_max", {x}, {{I64, {2}}},
                   {{"axis", int64_t(1)}, {"keepdims", int64_t(1)}});
  EXPECT_NE(r.error.find("output [2] should be [2, 1]"), std::string::npos)
      << r.error;
}

/// -log softmax(row)[label] over C scores read with `stride`.
double crossEntropy(const float *row, int c, int stride, int64_t label) {
  double max = -INFINITY, sum = 0;
  for (int j = 0; j < c; ++j)
    max = std::max<double>(max, row[j * stride]);
  for (int j = 0; j < c; ++j)
    sum += std::exp(row[j * stride] - max);
  return std::log(sum) + max - row[label * stride];
}

TEST(Kernels, SoftmaxCrossEntropyReductions) {
  auto scores = randomFloats(3 * 4, 42);
  std::vector<int64_t> labels = {2, -100, 0};
  Result r = runOp(
      "softmax_cross_entropy", {f32({3, 4}, scores), i64({3}, labels)},
      {{F32, {}}},
      {{"reduction", std::string("mean")}, {"ignore_index", int64_t(-100)}});
  ASSERT_EQ(r.error, "");
  double want =
      (crossEntropy(&scores[0], 4, 1, 2) + crossEntropy(&scores[8], 4, 1, 0)) /
      2;
  expectNear(r.outputs[0].as<float>(), {want});

  // [N, C, d] scores, class weights, sum and none.
  auto s3 = randomFloats(2 * 3 * 2, 43),
       w = std::vector<float>{0.5f, 2.0f, 1.0f};
  std::vector<int64_t> l3 = {1, 0, 2, 1};
  std::vector<double> each;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i) {
      int64_t label = l3[b * 2 + i];
      each.push_back(w[label] * crossEntropy(&s3[b * 6 + i], 3, 2, label));
    }
  r = runOp("softmax_cross_entropy",
            {f32({2, 3, 2}, s3), i64({2, 2}, l3), f32({3}, w)}, {{F32, {2, 2}}},
            {{"reduction", std::string("none")}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), each);
  r = runOp("softmax_cross_entropy",
            {f32({2, 3, 2}, s3), i64({2, 2}, l3), f32({3}, w)}, {{F32, {}}},
            {{"reduction", std::string("sum")}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), {each[0] + each[1] + each[2] + each[3]});
  // A label outside [0, C) fails the run, naming the kernel.
  r = runOp("softmax_cross_entropy", {f32({3, 4}, scores), i64({3}, {2, 4, 0})},
            {{F32, {}}});
  EXPECT_NE(
      r.error.find("kernel 0 (softmax_cross_entropy at 'node_1'): label 4 is "
                   "outside [0, 4)"),
      std::string::npos)
      << r.error;
}

TEST(Kernels, SoftmaxCrossEntropyGradMatchesFiniteDifferences) {
  // [N, C, d] = [2, 3, 2] scores, class weights, one ignored label.
  auto s = randomFloats(2 * 3 * 2, 44);
  std::vector<float> w = {0.5f, 2.0f, 1.0f}, g = {0.7f, -1.3f, 2.0f, 0.4f};
  std::vector<int64_t> labels = {1, -100, 2, 0};
  // The loss in double: per position w * CE, reduced as `reduction` says,
  // with `g` the cotangent (per position for none).
  auto loss = [&](const std::vector<double> &x, const std::string &reduction) {
    double total = 0, weights = 0;
    for (int p = 0; p < 4; ++p) {
      if (labels[p] == -100)
        continue;
      int b = p / 2, i = p % 2;
      double max = -INFINITY, sum = 0;
      for (int j = 0; j < 3; ++j)
        max = std::max(max, x[b * 6 + j * 2 + i]);
      for (int j = 0; j < 3; ++j)
        sum += std::exp(x[b * 6 + j * 2 + i] - max);
      double ce = std::log(sum) + max - x[b * 6 + labels[p] * 2 + i];
      double scale = reduction == "none" ? g[p] : 1.0;
      total += scale * w[labels[p]] * ce;
      weights += w[labels[p]];
    }
    return reduction == "mean"  ? g[0] * total / weights
           : reduction == "sum" ? g[0] * total
                                : total;
  };
  // The forward's log-sum-exp per position, for the gradient that reads it.
  Result forward =
      runOp("softmax_cross_entropy", {f32({2, 3, 2}, s), i64({2, 2}, labels)},
            {{F32, {}}, {F32, {2, 2}}},
            {{"ignore_index", int64_t(-100)}, {"lse", int64_t(1)}});
  ASSERT_EQ(forward.error, "");
  Value lse = forward.outputs[1];
  for (std::string reduction : {"mean", "sum", "none"})
    for (bool withLse : {false, true}) {
      SCOPED_TRACE(reduction + (withLse ? " with lse" : " recomputed"));
      Value gradIn = reduction == "none" ? f32({2, 2}, g) : f32({}, {g[0]});
      std::vector<Value> ins = {f32({2, 3, 2}, s), i64({2, 2}, labels), gradIn,
                                f32({3}, w)};
      AttrList attrs = {{"reduction", reduction},
                        {"ignore_index", int64_t(-100)}};
      if (withLse) {
        ins.push_back(lse);
        attrs.push_back({"lse", int64_t(1)});
      }
      Result r =
          runOp("softmax_cross_entropy_grad", ins, {{F32, {2, 3, 2}}}, attrs);
      ASSERT_EQ(r.error, "");
      std::vector<double> want;
      for (size_t k = 0; k < s.size(); ++k) {
        std::vector<double> up(s.begin(), s.end()), down = up;
        up[k] += 1e-4;
        down[k] -= 1e-4;
        want.push_back((loss(up, reduction) - loss(down, reduction)) / 2e-4);
      }
      expectNear(r.outputs[0].as<float>(), want);
    }
  // The cotangent's shape must match the reduction.
  Result r = runOp("softmax_cross_entropy_grad",
                   {f32({2, 3, 2}, s), i64({2, 2}, labels), f32({}, {1.0f})},
                   {{F32, {2, 3, 2}}}, {{"reduction", std::string("none")}});
  EXPECT_NE(r.error.find("the loss gradient [] does not match reduction none"),
            std::string::npos)
      << r.error;
  // The log-sum-exp must be one f32 per position.
  r = runOp("softmax_cross_entropy_grad",
            {f32({2, 3, 2}, s), i64({2, 2}, labels), f32({}, {1.0f}),
             f32({4}, {0, 0, 0, 0})},
            {{F32, {2, 3, 2}}}, {{"lse", int64_t(1)}});
  EXPECT_NE(r.error.find("the log-sum-exp [4] should be [2, 2]"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, SoftmaxCrossEntropyGivesEachPositionsLogSumExp) {
  // [N, C, d] = [2, 3, 2] scores, class weights, one ignored label (its
  // log-sum-exp given all the same), with and without log_prob.
  auto s = randomFloats(2 * 3 * 2, 45);
  std::vector<float> w = {0.5f, 2.0f, 1.0f};
  std::vector<int64_t> labels = {1, -100, 2, 0};
  std::vector<double> want;
  for (int p = 0; p < 4; ++p) {
    int b = p / 2, i = p % 2;
    // crossEntropy of label 0 plus the label's score: the log-sum-exp.
    want.push_back(crossEntropy(&s[b * 6 + i], 3, 2, 0) + s[b * 6 + i]);
  }
  std::vector<Value> ins = {f32({2, 3, 2}, s), i64({2, 2}, labels),
                            f32({3}, w)};
  AttrList attrs = {{"ignore_index", int64_t(-100)}};
  Result plain = runOp("softmax_cross_entropy", ins, {{F32, {}}}, attrs);
  ASSERT_EQ(plain.error, "");
  attrs.push_back({"lse", int64_t(1)});
  Result withLse =
      runOp("softmax_cross_entropy", ins, {{F32, {}}, {F32, {2, 2}}}, attrs);
  ASSERT_EQ(withLse.error, "");
  EXPECT_EQ(withLse.outputs[0].as<float>(), plain.outputs[0].as<float>());
  expectNear(withLse.outputs[1].as<float>(), want);
  Result all = runOp("softmax_cross_entropy", ins,
                     {{F32, {}}, {F32, {2, 3, 2}}, {F32, {2, 2}}}, attrs);
  ASSERT_EQ(all.error, "");
  EXPECT_EQ(all.outputs[0].as<float>(), plain.outputs[0].as<float>());
  EXPECT_EQ(all.outputs[2].as<float>(), withLse.outputs[1].as<float>());
  // The log-sum-exp must be one f32 per position.
  Result bad =
      runOp("softmax_cross_entropy", ins, {{F32, {}}, {F32, {2, 3}}}, attrs);
  EXPECT_NE(bad.error.find("the log-sum-exp [2, 3] should be [2, 2]"),
            std::string::npos)
      << bad.error;
}

/// nll_loss over input [2, 3, 2] with class weights and one ignored
/// position, by plain loops: per position -w[t] * x[b, t, i].
double nllRef(const std::vector<double> &x, const std::vector<int64_t> &target,
              const std::vector<float> &w, const std::vector<float> &g,
              const std::string &reduction, std::vector<double> *each) {
  double total = 0, weights = 0;
  for (int p = 0; p < 4; ++p) {
    int b = p / 2, i = p % 2;
    double loss = 0, wp = 0;
    if (target[p] != -1) {
      wp = w[target[p]];
      loss = -wp * x[b * 6 + target[p] * 2 + i];
    }
    if (each)
      each->push_back(loss);
    total += reduction == "none" ? g[p] * loss : loss;
    weights += wp;
  }
  return reduction == "mean"  ? g[0] * total / weights
         : reduction == "sum" ? g[0] * total
                              : total;
}

TEST(Kernels, NllLossReductionsWeightsAndIgnoredTargets) {
  auto x = randomFloats(2 * 3 * 2, 46);
  std::vector<float> w = {0.5f, 2.0f, 1.0f}, one = {1, 1, 1, 1};
  std::vector<int64_t> target = {1, -1, 2, 0};
  std::vector<double> xd(x.begin(), x.end()), each;
  for (std::string reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    bool none = reduction == "none";
    Result r = runOp("nll_loss",
                     {f32({2, 3, 2}, x), i64({2, 2}, target), f32({3}, w)},
                     {{F32, none ? Shape{2, 2} : Shape{}}},
                     {{"reduction", reduction}, {"ignore_index", int64_t(-1)}});
    ASSERT_EQ(r.error, "");
    each.clear();
    double want = nllRef(xd, target, w, one, reduction, &each);
    expectNear(r.outputs[0].as<float>(),
               none ? each : std::vector<double>{want});
  }
  // Without weights, int32 targets; the mean is over the counted positions.
  std::vector<int32_t> t32 = {1, 0, 2, 0};
  Result r = runOp("nll_loss", {f32({2, 3, 2}, x), i32({2, 2}, t32)},
                   {{F32, {}}}, {{"reduction", std::string("mean")}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(),
             {-(x[2] + x[1] + x[6 + 4] + x[6 + 1]) / 4});
  // A target outside [0, C) that is not ignored fails the run.
  r = runOp("nll_loss", {f32({2, 3, 2}, x), i64({2, 2}, {1, 3, 2, 0})},
            {{F32, {}}});
  EXPECT_NE(r.error.find("kernel 0 (nll_loss at 'node_1'): target 3 is "
                         "outside [0, 3)"),
            std::string::npos)
      << r.error;
  r = runOp("nll_loss", {f32({2, 3, 2}, x), i64({2, 3}, {1, 1, 2, 0, 0, 0})},
            {{F32, {}}});
  EXPECT_NE(r.error.find("target [2, 3] should be [2, 2]"), std::string::npos)
      << r.error;
}

TEST(Kernels, NllLossGradMatchesFiniteDifferences) {
  auto x = randomFloats(2 * 3 * 2, 47);
  std::vector<float> w = {0.5f, 2.0f, 1.0f}, g = {0.7f, -1.3f, 2.0f, 0.4f};
  std::vector<int64_t> target = {1, -1, 2, 1};
  for (std::string reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    Value gradIn = reduction == "none" ? f32({2, 2}, g) : f32({}, {g[0]});
    Result r = runOp("nll_loss_grad", {i64({2, 2}, target), gradIn, f32({3}, w)},
                     {{F32, {2, 3, 2}}},
                     {{"reduction", reduction}, {"ignore_index", int64_t(-1)}});
    ASSERT_EQ(r.error, "");
    std::vector<double> want;
    for (size_t k = 0; k < x.size(); ++k) {
      std::vector<double> up(x.begin(), x.end()), down = up;
      up[k] += 1e-3;
      down[k] -= 1e-3;
      want.push_back((nllRef(up, target, w, g, reduction, nullptr) -
                      nllRef(down, target, w, g, reduction, nullptr)) /
                     2e-3);
    }
    expectNear(r.outputs[0].as<float>(), want);
  }
  Result r = runOp("nll_loss_grad", {i64({2, 2}, target), f32({}, {1.0f})},
                   {{F32, {2, 3, 2}}}, {{"reduction", std::string("none")}});
  EXPECT_NE(r.error.find("the loss gradient [] does not match reduction none"),
            std::string::npos)
      << r.error;
}

//===----------------------------------------------------------------------===//
// Recurrent layers
//===----------------------------------------------------------------------===//

/// One recurrent configuration: the cell, its attributes and which optional
/// inputs it has.
struct RecurrentCase {
  std::string cell, direction;
  int64_t layout, linearBeforeReset;
  bool bias, h0, c0;
};

/// Checks <cell>_grad against central differences of the forward kernel's
/// sum(Y * gy) + sum(Y_h * gyh) (+ sum(Y_c * gyc)) in every input.
void checkRecurrentGradient(const RecurrentCase &c) {
  const int64_t seq = 3, batch = 2, input = 3, hidden = 2;
  int64_t gates = c.cell == "lstm" ? 4 : c.cell == "gru" ? 3 : 1;
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  bool lstm = c.cell == "lstm";
  Shape x = c.layout ? Shape{batch, seq, input} : Shape{seq, batch, input};
  Shape state =
      c.layout ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  Shape y = c.layout ? Shape{batch, seq, dirs, hidden}
                     : Shape{seq, dirs, batch, hidden};
  std::vector<Shape> shapes = {
      x, {dirs, gates * hidden, input}, {dirs, gates * hidden, hidden}};
  if (c.bias)
    shapes.push_back({dirs, 2 * gates * hidden});
  if (c.h0)
    shapes.push_back(state);
  if (c.c0)
    shapes.push_back(state);
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(randomFloats(numel(shapes[i]), 60 + i));
    for (float &v : inputs.back())
      v *= 0.6f;
  }
  std::vector<Shape> outShapes = {y, state};
  if (lstm)
    outShapes.push_back(state);
  std::vector<std::vector<float>> cotangents;
  for (size_t i = 0; i < outShapes.size(); ++i)
    cotangents.push_back(randomFloats(numel(outShapes[i]), 80 + i));
  AttrList attrs = {
      {"hidden_size", hidden},     {"direction", c.direction},
      {"layout", c.layout},        {"linear_before_reset", c.linearBeforeReset},
      {"bias", int64_t(c.bias)},   {"initial_h", int64_t(c.h0)},
      {"initial_c", int64_t(c.c0)}};
  auto values = [&](const std::vector<std::vector<float>> &data) {
    std::vector<Value> v;
    for (size_t i = 0; i < data.size(); ++i)
      v.push_back(f32(shapes[i], data[i]));
    return v;
  };
  std::vector<std::pair<plan::DType, Shape>> outs;
  for (const Shape &s : outShapes)
    outs.push_back({F32, s});
  auto objective = [&](const std::vector<std::vector<float>> &data) {
    Result r = runOp(c.cell, values(data), outs, attrs);
    EXPECT_EQ(r.error, "");
    double sum = 0;
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      std::vector<float> got = r.outputs[o].as<float>();
      for (size_t i = 0; i < got.size(); ++i)
        sum += double(got[i]) * cotangents[o][i];
    }
    return sum;
  };
  std::vector<Value> gradIns = values(inputs);
  for (size_t o = 0; o < outShapes.size(); ++o)
    gradIns.push_back(f32(outShapes[o], cotangents[o]));
  std::vector<std::pair<plan::DType, Shape>> gradOuts = {
      {F32, shapes[0]},
      {F32, shapes[1]},
      {F32, shapes[2]},
      {F32, {dirs, 2 * gates * hidden}},
      {F32, state}};
  if (lstm)
    gradOuts.push_back({F32, state});
  Result g = runOp(c.cell + "_grad", gradIns, gradOuts, attrs);
  ASSERT_EQ(g.error, "");
  // Which output holds each input's gradient.
  std::vector<size_t> gradOf = {0, 1, 2};
  if (c.bias)
    gradOf.push_back(3);
  if (c.h0)
    gradOf.push_back(4);
  if (c.c0)
    gradOf.push_back(5);
  const float step = 1e-2f;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    std::vector<double> want;
    for (size_t k = 0; k < inputs[i].size(); ++k) {
      auto up = inputs, down = inputs;
      up[i][k] += step;
      down[i][k] -= step;
      want.push_back((objective(up) - objective(down)) / (2 * step));
    }
    expectNear(g.outputs[gradOf[i]].as<float>(), want, 2e-3);
  }
}

TEST(Kernels, LstmGradMatchesFiniteDifferences) {
  checkRecurrentGradient({"lstm", "forward", 0, 0, true, true, true});
  checkRecurrentGradient({"lstm", "bidirectional", 1, 0, true, false, true});
  checkRecurrentGradient({"lstm", "reverse", 0, 0, false, true, false});
}

TEST(Kernels, GruGradMatchesFiniteDifferences) {
  checkRecurrentGradient({"gru", "forward", 0, 0, true, true, false});
  checkRecurrentGradient({"gru", "bidirectional", 1, 1, true, true, false});
  checkRecurrentGradient({"gru", "reverse", 0, 1, false, false, false});
  checkRecurrentGradient({"gru", "bidirectional", 0, 0, true, false, false});
}

TEST(Kernels, RnnGradMatchesFiniteDifferences) {
  checkRecurrentGradient({"rnn", "bidirectional", 1, 0, true, true, false});
  checkRecurrentGradient({"rnn", "forward", 0, 0, false, false, false});
}

TEST(Kernels, RecurrentKernelsRejectBadOperands) {
  Result r = runOp("lstm",
                   {f32({3, 2, 4}, randomFloats(24, 1)),
                    f32({1, 12, 4}, randomFloats(48, 2)),
                    f32({1, 8, 2}, randomFloats(16, 3))},
                   {{F32, {3, 1, 2, 2}}, {F32, {1, 2, 2}}, {F32, {1, 2, 2}}},
                   {{"hidden_size", int64_t(2)}});
  EXPECT_NE(r.error.find("w [1, 12, 4] should be [1, 8, 4]"), std::string::npos)
      << r.error;
  r = runOp("gru",
            {f32({3, 2, 4}, randomFloats(24, 1)),
             f32({1, 6, 4}, randomFloats(24, 2)),
             f32({1, 6, 2}, randomFloats(12, 3))},
            {{F32, {3, 1, 2, 2}}, {F32, {1, 2, 2}}},
            {{"hidden_size", int64_t(2)}, {"direction", std::string("up")}});
  EXPECT_NE(r.error.find("direction must be forward, reverse or "
                         "bidirectional, not 'up'"),
            std::string::npos)
      << r.error;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

std::vector<float> iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = static_cast<float>(i);
  return v;
}

// trilu against a plain loop: upper and lower, k from the attribute or an
// int64 input, k past the matrix; any dtype (int64 here); a bad k input.
TEST(Kernels, Trilu) {
  auto x = iota(2 * 3 * 4);
  for (int upper : {0, 1})
    for (int64_t k : {-5, -1, 0, 2, 7}) {
      std::vector<double> want;
      for (int m = 0; m < 2; ++m)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 4; ++j) {
            bool keep = upper ? j - i >= k : j - i <= k;
            want.push_back(keep ? x[(m * 3 + i) * 4 + j] : 0.0);
          }
      expectNear(runF32("trilu", {f32({2, 3, 4}, x)}, {2, 3, 4},
                        {{"k", k}, {"upper", int64_t(upper)}}),
                 want);
      expectNear(runF32("trilu", {f32({2, 3, 4}, x), i64({}, {k})}, {2, 3, 4},
                        {{"upper", int64_t(upper)}}),
                 want);
    }
  Result r = runOp("trilu", {i64({2, 2}, {1, 2, 3, 4})}, {{I64, {2, 2}}},
                   {{"upper", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, 0, 3, 4}));
  r = runOp("trilu", {f32({2, 2}, {1, 2, 3, 4}), f32({}, {1})},
            {{F32, {2, 2}}});
  EXPECT_NE(r.error.find("k must be int64"), std::string::npos) << r.error;
  r = runOp("trilu", {f32({4}, {1, 2, 3, 4})}, {{F32, {4}}});
  EXPECT_NE(r.error.find("rank 2 or more"), std::string::npos) << r.error;
}

// cumsum against a plain loop: every axis (a parameter or an int32 input),
// exclusive and reverse; int64; an axis out of range when it runs.
TEST(Kernels, CumSum) {
  auto x = iota(2 * 3 * 4);
  Shape shape = {2, 3, 4}, strides = {12, 4, 1};
  for (int64_t axis : {0, 1, 2})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1}) {
        std::vector<double> want(x.size());
        for (size_t at = 0; at < x.size(); ++at) {
          int64_t n = at / strides[axis] % shape[axis];
          int64_t base = at - n * strides[axis];
          double sum = 0;
          for (int64_t m = 0; m < shape[axis]; ++m) {
            bool before = reverse ? m > n : m < n;
            if (before || (!exclusive && m == n))
              sum += x[base + m * strides[axis]];
          }
          want[at] = sum;
        }
        AttrList attrs = {{"exclusive", exclusive}, {"reverse", reverse}};
        AttrList withAxis = attrs;
        withAxis.push_back({"axis", axis});
        expectNear(runF32("cumsum", {f32(shape, x)}, shape, withAxis), want);
        // The axis as an input, negative: counted from the end.
        Value axisInput = i32({}, {static_cast<int32_t>(axis - 3)});
        expectNear(runF32("cumsum", {f32(shape, x), axisInput}, shape, attrs),
                   want);
      }
  Result r = runOp("cumsum", {i64({4}, {1, 2, 3, 4})}, {{I64, {4}}},
                   {{"axis", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, 3, 6, 10}));
  // int32 sums wrap on overflow (as two's complement adds do).
  r = runOp("cumsum", {i32({2}, {INT32_MAX, 2})}, {{I32, {2}}},
            {{"axis", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int32_t>(),
            (std::vector<int32_t>{INT32_MAX, INT32_MIN + 1}));
  r = runOp("cumsum", {f32({2}, {1, 2}), i64({}, {2})}, {{F32, {2}}});
  EXPECT_NE(r.error.find("axis 2 is out of range for rank 1"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, TransposesThatMoveTheContiguousDimRunByTiles) {
  // The attention head permutations ([B, L, H, D] -> [B, H, D, L] and back,
  // the last two swapped), over sizes that are not multiples of the tile,
  // in 4-, 8- and 2-byte elements: each equals the element-by-element read.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 37, 3, 45}, {0, 2, 3, 1}},
      {{2, 3, 45, 37}, {0, 3, 1, 2}},
      {{2, 3, 37, 45}, {0, 1, 3, 2}},
      {{70, 33}, {1, 0}}};
  for (const auto &[shape, perm] : cases) {
    Shape out;
    for (int64_t p : perm)
      out.push_back(shape[p]);
    int64_t n = numel(shape);
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size() - 1; d-- > 0;)
      strides[d] = strides[d + 1] * shape[d + 1];
    std::vector<int64_t> want(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t from = 0;
      for (size_t d = out.size(), rest = i; d-- > 0; rest /= out[d])
        from += int64_t(rest % out[d]) * strides[perm[d]];
      want[i] = from;
    }
    std::vector<int64_t> x(n);
    std::iota(x.begin(), x.end(), 0);
    Result r = runOp("transpose", {i64(shape, x)}, {{I64, out}},
                     {{"perm", perm}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.outputs[0].as<int64_t>(), want);
    std::vector<float> xf(x.begin(), x.end());
    std::vector<float> got =
        runF32("transpose", {f32(shape, xf)}, out, {{"perm", perm}});
    EXPECT_EQ(got, std::vector<float>(want.begin(), want.end()));
    std::vector<uint16_t> h(x.begin(), x.end());
    r = runOp("transpose", {valueOf(plan::DType::BF16, shape, h)},
              {{plan::DType::BF16, out}}, {{"perm", perm}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.outputs[0].as<uint16_t>(),
              std::vector<uint16_t>(want.begin(), want.end()));
  }
}

TEST(Kernels, TransposeSliceAndExpand) {
  auto x = iota(24);
  // transpose [2, 3, 4] by [2, 0, 1] -> [4, 2, 3]
  auto t = runF32("transpose", {f32({2, 3, 4}, x)}, {4, 2, 3},
                  {{"perm", Shape{2, 0, 1}}});
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        want.push_back(x[(i * 3 + j) * 4 + k]);
  expectNear(t, want);
  // slice: the last dim reversed from index 3, the middle one from 1.
  auto s = runF32("slice", {f32({2, 3, 4}, x)}, {2, 2, 4},
                  {{"starts", Shape{0, 1, 3}}, {"steps", Shape{1, 1, -1}}});
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 1; j < 3; ++j)
      for (int k = 3; k >= 0; --k)
        want.push_back(x[(i * 3 + j) * 4 + k]);
  expectNear(s, want);
  // Every second element of the last dim, as int64.
  Result r =
      runOp("slice", {i64({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})}, {{I64, {2, 2}}},
            {{"starts", Shape{0, 1}}, {"steps", Shape{1, 2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, 3, 5, 7}));
  r = runOp("slice", {f32({2, 3, 4}, x)}, {{F32, {2, 2, 4}}},
            {{"starts", Shape{0, 2, 0}}, {"steps", Shape{1, 1, 1}}});
  EXPECT_NE(r.error.find("dimension 1 reads outside x [2, 3, 4]"),
            std::string::npos)
      << r.error;
  // expand [3, 1] -> [2, 3, 4]; a Bool one.
  auto e = runF32("expand", {f32({3, 1}, {1, 2, 3})}, {2, 3, 4});
  want.clear();
  for (int i = 0; i < 24; ++i)
    want.push_back(1 + i / 4 % 3);
  expectNear(e, want);
  r = runOp("expand", {boolean({2}, {1, 0})}, {{BOOL, {2, 2}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(Kernels, PadConstantReflectEdge) {
  auto x = iota(2 * 3 * 4);
  // pads [0, 2, 1] before, [1, 1, 3] after: [2, 3, 4] -> [3, 6, 8].
  Shape pads = {0, 2, 1, 1, 1, 3}, out = {3, 6, 8};
  // Where output index j of an axis of size n reads, by each mode's
  // definition (numpy.pad's constant, reflect and edge); -1: the fill.
  auto source = [](int64_t j, int64_t n, int64_t before,
                   const std::string &mode) -> int64_t {
    int64_t i = j - before;
    if (i >= 0 && i < n)
      return i;
    if (mode == "constant")
      return -1;
    if (mode == "edge")
      return std::clamp<int64_t>(i, 0, n - 1);
    int64_t m = std::abs(i);
    return m < n ? m : 2 * (n - 1) - m;
  };
  for (const std::string mode : {"constant", "reflect", "edge"}) {
    SCOPED_TRACE(mode);
    // Every pad is smaller than its dim, as reflect needs.
    auto y = runF32("pad", {f32({2, 3, 4}, x)}, out,
                    {{"pads", pads}, {"mode", mode}, {"value", 2.5}});
    std::vector<double> want;
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 6; ++b)
        for (int64_t c = 0; c < 8; ++c) {
          int64_t i = source(a, 2, 0, mode), j = source(b, 3, 2, mode),
                  k = source(c, 4, 1, mode);
          want.push_back(i < 0 || j < 0 || k < 0 ? 2.5
                                                 : x[(i * 3 + j) * 4 + k]);
        }
    expectNear(y, want);
  }
  Result r = runOp("pad", {i64({3}, {1, 2, 3})}, {{I64, {6}}},
                   {{"pads", Shape{1, 2}}, {"value", -7.0}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(),
            (std::vector<int64_t>{-7, 1, 2, 3, -7, -7}));
  r = runOp("pad", {f32({3}, {1, 2, 3})}, {{F32, {7}}},
            {{"pads", Shape{3, 1}}, {"mode", std::string("reflect")}});
  EXPECT_NE(r.error.find("reflect pads of dimension 0 must be smaller than "
                         "its size"),
            std::string::npos)
      << r.error;
  r = runOp("pad", {f32({3}, {1, 2, 3})}, {{F32, {5}}},
            {{"pads", Shape{1, 1}}, {"mode", std::string("wrap")}});
  EXPECT_NE(r.error.find("mode must be constant, reflect or edge, not wrap"),
            std::string::npos)
      << r.error;
}

// The expected values are ONNX's Resize examples (onnx/docs/Operators.md:
// resize_upsample_scales_nearest, _linear and _linear_align_corners).
TEST(Kernels, ResizeNearestAndLinear) {
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  using Floats = std::vector<double>;
  auto y = runF32("resize", {x}, {1, 1, 4, 6},
                  {{"scales", Floats{1, 1, 2, 3}},
                   {"mode", std::string("nearest")}});
  expectNear(y, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  y = runF32("resize", {x}, {1, 1, 4, 4},
             {{"scales", Floats{1, 1, 2, 2}}, {"mode", std::string("linear")}});
  expectNear(y, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5,
                 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  std::string corners = "align_corners";
  y = runF32("resize", {x}, {1, 1, 4, 4},
             {{"scales", Floats{1, 1, 2, 2}},
              {"mode", std::string("linear")},
              {"coordinate_transformation_mode", corners}});
  double t = 1.0 / 3, u = 2.0 / 3;
  expectNear(y, {1, 1 + t, 1 + u, 2, 1 + u, 2, 2 + t, 2 + u,
                 2 + t, 2 + u, 3, 3 + t, 3, 3 + t, 3 + u, 4},
             1e-6);
  Result r =
      runOp("resize", {x}, {{F32, {1, 1, 4, 4}}},
            {{"scales", Floats{1, 1, 2, 2}}, {"mode", std::string("area")}});
  EXPECT_NE(r.error.find("mode must be nearest, linear or cubic, not area"),
            std::string::npos)
      << r.error;
  r = runOp("resize", {x}, {{F32, {1, 1, 4, 4}}}, {{"scales", Floats{2, 2}}});
  EXPECT_NE(r.error.find("scales needs one entry per dimension"),
            std::string::npos)
      << r.error;
  r = runOp("resize", {f32(Shape(9, 1), {5})}, {{F32, Shape(9, 1)}},
            {{"scales", Floats(9, 1.0f)}});
  EXPECT_NE(r.error.find("resizes at most 8 dimensions, not 9"),
            std::string::npos)
      << r.error;
}

// ONNX's resize_upsample_scales_cubic example (its first output row), and
// scales read at run time, checked against the planned shape.
TEST(Kernels, ResizeCubicAndScalesAtRunTime) {
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i)
    ramp[i] = static_cast<float>(i + 1);
  using Floats = std::vector<double>;
  auto y =
      runF32("resize", {f32({1, 1, 4, 4}, ramp)}, {1, 1, 8, 8},
             {{"scales", Floats{1, 1, 2, 2}}, {"mode", std::string("cubic")}});
  ASSERT_EQ(y.size(), 64u);
  expectNear(std::vector<float>(y.begin(), y.begin() + 8),
             {0.47265625, 0.76953125, 1.24609375, 1.875, 2.28125, 2.91015625,
              3.38671875, 3.68359375},
             1e-5);
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  y = runF32("resize", {x, f32({4}, {1, 1, 2, 2})}, {1, 1, 4, 4},
             {{"mode", std::string("linear")}});
  expectNear(y, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5,
                 3, 3.25, 3.75, 4});
  Result r = runOp("resize", {x, f32({4}, {1, 1, 3, 3})}, {{F32, {1, 1, 4, 4}}},
                   {{"mode", std::string("linear")}});
  EXPECT_NE(r.error.find("resizes 2 to 6, not the plan's 4"), std::string::npos)
      << r.error;
}

TEST(Kernels, HardmaxIsInfAndGlobalMaxPool) {
  // Ties go to the first largest, as ONNX's reference (argmax) does.
  auto y = runF32("hardmax", {f32({2, 3}, {1, 3, 3, -1, -2, -5})}, {2, 3},
                  {{"axis", int64_t(1)}});
  expectNear(y, {0, 1, 0, 1, 0, 0});
  y = runF32("hardmax", {f32({2, 3}, {1, 3, 3, -1, -2, -5})}, {2, 3},
             {{"axis", int64_t(0)}});
  expectNear(y, {1, 1, 1, 0, 0, 0});
  float inf = std::numeric_limits<float>::infinity();
  Result r = runOp("is_inf", {f32({4}, {inf, -inf, 1, std::nanf("")})},
                   {{BOOL, {4}}}, {{"detect_positive", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 0}));
  y = runF32("global_max_pool",
             {f32({1, 2, 2, 2}, {1, 5, -2, 3, -1, -4, -3, -2})}, {1, 2, 1, 1});
  expectNear(y, {5, -1});
}

TEST(Kernels, PReluAndXorBroadcast) {
  auto x = randomFloats(2 * 3 * 4, 21), slope = randomFloats(3, 22);
  auto y = runF32("prelu", {f32({2, 3, 4}, x), f32({3, 1}, slope)}, {2, 3, 4});
  std::vector<double> want;
  for (int i = 0; i < 24; ++i)
    want.push_back(x[i] < 0 ? slope[i / 4 % 3] * x[i] : x[i]);
  expectNear(y, want);
  Result r = runOp("xor", {boolean({4}, {0, 1, 0, 1}), boolean({2, 1}, {0, 1})},
                   {{BOOL, {2, 4}}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<uint8_t>(),
            (std::vector<uint8_t>{0, 1, 0, 1, 1, 0, 1, 0}));
}

TEST(Kernels, CopyConcatAndSplit) {
  auto x = iota(24), z = randomFloats(2 * 2 * 4, 44);
  expectNear(runF32("copy", {f32({2, 3, 4}, x)}, {2, 3, 4}), toDouble(x));
  // concat [2, 3, 4] and [2, 2, 4] along 1 -> [2, 5, 4]
  auto c = runF32("concat", {f32({2, 3, 4}, x), f32({2, 2, 4}, z)}, {2, 5, 4},
                  {{"axis", int64_t(1)}});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 12; ++j)
      want.push_back(x[i * 12 + j]);
    for (int j = 0; j < 8; ++j)
      want.push_back(z[i * 8 + j]);
  }
  expectNear(c, want);
  // split [2, 5, 4] along 1 into [2, 3, 4] and [2, 2, 4] gives them back.
  std::vector<float> whole(c.begin(), c.end());
  Result r =
      runOp("split", {f32({2, 5, 4}, whole)},
            {{F32, {2, 3, 4}}, {F32, {2, 2, 4}}}, {{"axis", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), toDouble(x));
  expectNear(r.outputs[1].as<float>(), toDouble(z));
  r = runOp("concat", {f32({2, 3, 4}, x), f32({2, 2, 4}, z)},
            {{F32, {2, 6, 4}}}, {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("pieces do not add up"), std::string::npos) << r.error;
}

TEST(Kernels, GatherCountsNegativeIndicesFromTheEndAndRejectsOutOfRange) {
  auto table = randomFloats(5 * 3, 45);
  PlanBuilder b;
  uint32_t t = b.input("table", F32, {5, 3}), ids = b.input("ids", I64, {2});
  b.kernel("gather", {t, ids}, {b.output("y", F32, {2, 3})},
           {{"axis", int64_t(0)}}, "embed");
  Session s(b.finish());
  ASSERT_EQ(s.error, "");
  ASSERT_EQ(s.set("table", f32({5, 3}, table).bytes), "");
  ASSERT_EQ(s.set("ids", i64({2}, {-1, 2}).bytes), "");
  ASSERT_EQ(s.run(), "");
  std::vector<uint8_t> out(24);
  ASSERT_EQ(s.get("y", out), "");
  expectNear(as<float>(out),
             {table[12], table[13], table[14], table[6], table[7], table[8]});
  ASSERT_EQ(s.set("ids", i64({2}, {0, 5}).bytes), "");
  fsdprt_status_t status = fsdprt_session_run(s.session);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_OUT_OF_RANGE);
  std::string error = take(status);
  EXPECT_NE(
      error.find("kernel 0 (gather at 'embed'): index 5 is out of range for "
                 "a dimension of size 5"),
      std::string::npos)
      << error;
  // The failed run left no output to read.
  EXPECT_EQ(s.get("y", out),
            "fsdprt_session_get_output: output 'y' has no value: no run "
            "completed (none ran yet, or the last one failed); call "
            "fsdprt_session_run first");
}

TEST(Kernels, GatherAlongAnInnerAxisWithInt32Indices) {
  // data [2, 4, 3] (int64), indices [2, 2] (int32) along axis 1 -> [2, 2, 2, 3]
  std::vector<int64_t> data(24);
  for (int i = 0; i < 24; ++i)
    data[i] = 100 + i;
  std::vector<int32_t> idx = {3, 0, -4, 1};
  Result r = runOp("gather", {i64({2, 4, 3}, data), i32({2, 2}, idx)},
                   {{I64, {2, 2, 2, 3}}}, {{"axis", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  std::vector<int64_t> want;
  for (int o = 0; o < 2; ++o)
    for (int i : idx)
      for (int c = 0; c < 3; ++c)
        want.push_back(data[(o * 4 + (i < 0 ? i + 4 : i)) * 3 + c]);
  EXPECT_EQ(r.outputs[0].as<int64_t>(), want);
}

TEST(Kernels, GatherElementsAlongEachAxisAndRejectsOutOfRange) {
  // data [3, 4], indices [2, 4] along axis 0 and [3, 2] along axis 1 (with
  // negative indices counted from the end), by plain loops.
  auto data = randomFloats(12, 48);
  std::vector<int64_t> rows = {2, 0, -1, 1, 0, 0, 1, -3};
  Result r = runOp("gather_elements", {f32({3, 4}, data), i64({2, 4}, rows)},
                   {{F32, {2, 4}}}, {{"axis", int64_t(0)}});
  ASSERT_EQ(r.error, "");
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t k = rows[i * 4 + j];
      want.push_back(data[(k < 0 ? k + 3 : k) * 4 + j]);
    }
  expectNear(r.outputs[0].as<float>(), want);
  std::vector<int32_t> cols = {3, 3, 0, -4, 2, 1};
  r = runOp("gather_elements", {f32({3, 4}, data), i32({3, 2}, cols)},
            {{F32, {3, 2}}}, {{"axis", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  want.clear();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      int64_t k = cols[i * 2 + j];
      want.push_back(data[i * 4 + (k < 0 ? k + 4 : k)]);
    }
  expectNear(r.outputs[0].as<float>(), want);
  r = runOp("gather_elements", {f32({3, 4}, data), i64({1, 2}, {0, 4})},
            {{F32, {1, 2}}}, {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("kernel 0 (gather_elements at 'node_1'): index 4 is "
                         "out of range for a dimension of size 4"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, ScatterElementsAssignsAddsAndMultiplies) {
  // data [2, 5]; indices [2, 3] along axis 1 with a repeat (1, 1) in row 0.
  auto data = randomFloats(10, 49), updates = randomFloats(6, 50);
  std::vector<int64_t> idx = {1, 1, -1, 0, 2, 3};
  for (std::string reduction : {"none", "add", "mul"}) {
    SCOPED_TRACE(reduction);
    std::vector<double> want(data.begin(), data.end());
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        int64_t k = idx[i * 3 + j];
        double &at = want[i * 5 + (k < 0 ? k + 5 : k)], u = updates[i * 3 + j];
        at = reduction == "none" ? u : reduction == "add" ? at + u : at * u;
      }
    Result r = runOp("scatter_elements",
                     {f32({2, 5}, data), i64({2, 3}, idx), f32({2, 3}, updates)},
                     {{F32, {2, 5}}},
                     {{"axis", int64_t(1)}, {"reduction", reduction}});
    ASSERT_EQ(r.error, "");
    expectNear(r.outputs[0].as<float>(), want);
  }
  // int64 data adds too; a bad index fails the run.
  Result r = runOp("scatter_elements",
                   {i64({1, 3}, {1, 2, 3}), i64({1, 2}, {2, 2}),
                    i64({1, 2}, {10, 20})},
                   {{I64, {1, 3}}},
                   {{"axis", int64_t(1)}, {"reduction", std::string("add")}});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.outputs[0].as<int64_t>(), (std::vector<int64_t>{1, 2, 33}));
  r = runOp("scatter_elements",
            {f32({2, 5}, data), i64({2, 3}, {0, 0, 0, 0, 0, -6}),
             f32({2, 3}, updates)},
            {{F32, {2, 5}}}, {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("index -6 is out of range for a dimension of size 5"),
            std::string::npos)
      << r.error;
  r = runOp("scatter_elements",
            {f32({2, 5}, data), i64({2, 3}, idx), f32({2, 3}, updates)},
            {{F32, {2, 5}}}, {{"reduction", std::string("max")}});
  EXPECT_NE(r.error.find("reduction must be none, add or mul, not max"),
            std::string::npos)
      << r.error;
}

TEST(Kernels, ScatterNDWritesSlicesAtIndexTuples) {
  // data [4, 2, 3]; tuples of length 1 (whole [2, 3] slices) and of length
  // 2 (rows of 3), one repeated for add.
  auto data = randomFloats(24, 51), slices = randomFloats(12, 52);
  std::vector<int64_t> one = {3, -4};
  for (std::string reduction : {"none", "add", "mul"}) {
    SCOPED_TRACE(reduction);
    std::vector<double> want(data.begin(), data.end());
    for (int t = 0; t < 2; ++t) {
      int64_t k = one[t] < 0 ? one[t] + 4 : one[t];
      for (int e = 0; e < 6; ++e) {
        double &at = want[k * 6 + e], u = slices[t * 6 + e];
        at = reduction == "none" ? u : reduction == "add" ? at + u : at * u;
      }
    }
    Result r = runOp("scatter_nd",
                     {f32({4, 2, 3}, data), i64({2, 1}, one),
                      f32({2, 2, 3}, slices)},
                     {{F32, {4, 2, 3}}}, {{"reduction", reduction}});
    ASSERT_EQ(r.error, "");
    expectNear(r.outputs[0].as<float>(), want);
  }
  std::vector<int64_t> two = {1, 1, 1, 1, 2, 0};
  std::vector<double> want(data.begin(), data.end());
  for (int t = 0; t < 3; ++t)
    for (int e = 0; e < 3; ++e)
      want[two[2 * t] * 6 + two[2 * t + 1] * 3 + e] += slices[t * 3 + e];
  Result r = runOp("scatter_nd",
                   {f32({4, 2, 3}, data), i64({3, 2}, two),
                    f32({3, 3}, std::vector<float>(slices.begin(),
                                                   slices.begin() + 9))},
                   {{F32, {4, 2, 3}}}, {{"reduction", std::string("add")}});
  ASSERT_EQ(r.error, "");
  expectNear(r.outputs[0].as<float>(), want);
  r = runOp("scatter_nd",
            {f32({4, 2, 3}, data), i64({1, 2}, {0, 2}),
             f32({1, 3}, {1, 2, 3})},
            {{F32, {4, 2, 3}}});
  EXPECT_NE(r.error.find("index 2 is out of range for a dimension of size 2"),
            std::string::npos)
      << r.error;
  r = runOp("scatter_nd",
            {f32({4, 2, 3}, data), i64({1, 2}, {0, 1}), f32({1, 2}, {1, 2})},
            {{F32, {4, 2, 3}}});
  EXPECT_NE(r.error.find("updates [1, 2] should be [1, 3]"), std::string::npos)
      << r.error;
}

TEST(Kernels, LayerNormGivesMeanAndInvStdDev) {
  // x [2, 3, 4] normalised from axis 1: one mean and 1 / sqrt(var + eps)
  // per batch row, shaped [2, 1, 1].
  auto x = randomFloats(24, 53), scale = randomFloats(12, 54);
  Result r = runOp("layer_norm", {f32({2, 3, 4}, x), f32({3, 4}, scale)},
                   {{F32, {2, 3, 4}}, {F32, {2, 1, 1}}, {F32, {2, 1, 1}}},
                   {{"axis", int64_t(1)}, {"epsilon", 1e-3}});
  ASSERT_EQ(r.error, "");
  std::vector<double> y, mean, inv;
  for (int b = 0; b < 2; ++b) {
    double m = 0, v = 0;
    for (int j = 0; j < 12; ++j)
      m += x[b * 12 + j] / 12.0;
    for (int j = 0; j < 12; ++j)
      v += (x[b * 12 + j] - m) * (x[b * 12 + j] - m) / 12.0;
    mean.push_back(m);
    inv.push_back(1 / std::sqrt(v + 1e-3));
    for (int j = 0; j < 12; ++j)
      y.push_back((x[b * 12 + j] - m) * inv.back() * scale[j]);
  }
  expectNear(r.outputs[0].as<float>(), y);
  expectNear(r.outputs[1].as<float>(), mean);
  expectNear(r.outputs[2].as<float>(), inv);
  r = runOp("layer_norm", {f32({2, 3, 4}, x), f32({3, 4}, scale)},
            {{F32, {2, 3, 4}}, {F32, {2, 1}}, {F32, {2, 1}}},
            {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("mean [2, 1] should be [2, 1, 1]"), std::string::npos)
      << r.error;
}

TEST(Kernels, SoftmaxCrossEntropyGivesLogProb) {
  // scores [2, 3, 2]: log_prob is the log-softmax along C at every
  // position, the ignored one included.
  auto s = randomFloats(12, 55);
  Result r = runOp("softmax_cross_entropy",
                   {f32({2, 3, 2}, s), i64({2, 2}, {1, -100, 2, 0})},
                   {{F32, {}}, {F32, {2, 3, 2}}},
                   {{"ignore_index", int64_t(-100)}});
  ASSERT_EQ(r.error, "");
  std::vector<double> want(12);
  double loss = 0;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i) {
      double sum = 0;
      for (int j = 0; j < 3; ++j)
        sum += std::exp(double(s[b * 6 + j * 2 + i]));
      for (int j = 0; j < 3; ++j)
        want[b * 6 + j * 2 + i] = s[b * 6 + j * 2 + i] - std::log(sum);
    }
  loss = -(want[0 * 6 + 1 * 2 + 0] + want[6 + 2 * 2 + 0] + want[6 + 0 + 1]) / 3;
  expectNear(r.outputs[0].as<float>(), {loss});
  expectNear(r.outputs[1].as<float>(), want);
}

TEST(Kernels, MaxPoolGivesFlatIndices) {
  // x [2, 2, 4, 5], 2x2 windows, stride 2, padding 1 on the right and
  // bottom: each index counts from the start of x (ONNX's convention).
  auto x = randomFloats(80, 56);
  x[5] = x[6]; // a tie: the first maximum wins
  Result r = runOp("max_pool", {f32({2, 2, 4, 5}, x)},
                   {{F32, {2, 2, 2, 3}}, {I64, {2, 2, 2, 3}}},
                   {{"kernel_shape", std::vector<int64_t>{2, 2}},
                    {"strides", std::vector<int64_t>{2, 2}},
                    {"pads", std::vector<int64_t>{0, 0, 1, 1}}});
  ASSERT_EQ(r.error, "");
  std::vector<double> want;
  std::vector<int64_t> where;
  for (int plane = 0; plane < 4; ++plane)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        int64_t best = -1;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            int h = 2 * i + a, w = 2 * j + b;
            int64_t at = plane * 20 + h * 5 + w;
            if (h < 4 && w < 5 && (best < 0 || x[at] > x[best]))
              best = at;
          }
        want.push_back(x[best]);
        where.push_back(best);
      }
  expectNear(r.outputs[0].as<float>(), want);
  EXPECT_EQ(r.outputs[1].as<int64_t>(), where);
  // storage_order 1 numbers each plane column by column.
  r = runOp("max_pool", {f32({2, 2, 4, 5}, x)},
            {{F32, {2, 2, 2, 3}}, {I64, {2, 2, 2, 3}}},
            {{"kernel_shape", std::vector<int64_t>{2, 2}},
             {"strides", std::vector<int64_t>{2, 2}},
             {"pads", std::vector<int64_t>{0, 0, 1, 1}},
             {"storage_order", int64_t(1)}});
  ASSERT_EQ(r.error, "");
  for (int64_t &at : where)
    at = at / 20 * 20 + at % 5 * 4 + at % 20 / 5;
  EXPECT_EQ(r.outputs[1].as<int64_t>(), where);
  r = runOp("average_pool", {f32({2, 2, 4, 5}, x)},
            {{F32, {2, 2, 2, 2}}, {I64, {2, 2, 2, 2}}},
            {{"kernel_shape", std::vector<int64_t>{2, 2}},
             {"strides", std::vector<int64_t>{2, 2}}});
  EXPECT_NE(r.error.find("takes x and gives y"), std::string::npos)
      << r.error;
}

} // namespace

//===----------------------------------------------------------------------===//
// Fused training gradients
//===----------------------------------------------------------------------===//

/// Central differences of sum(forward(inputs)[0] * dy) in input `which`.
std::vector<double>
centralDifferences(const std::string &op, std::vector<Value> inputs,
                   size_t which, const Shape &outShape,
                   const std::vector<float> &dy, const AttrList &attrs) {
  auto objective = [&](const std::vector<Value> &ins) {
    Result r = runOp(op, ins, {{F32, outShape}}, attrs);
    EXPECT_EQ(r.error, "");
    std::vector<float> y = r.outputs.at(0).as<float>();
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i)
      sum += double(y[i]) * dy[i];
    return sum;
  };
  const float step = 1e-2f;
  std::vector<float> base = inputs[which].as<float>();
  std::vector<double> want;
  for (size_t k = 0; k < base.size(); ++k) {
    std::vector<float> up = base, down = base;
    up[k] += step;
    down[k] -= step;
    inputs[which] = f32(inputs[which].shape, up);
    double above = objective(inputs);
    inputs[which] = f32(inputs[which].shape, down);
    want.push_back((above - objective(inputs)) / (2 * step));
  }
  return want;
}

TEST(Kernels, ActivationGradMatchesFiniteDifferences) {
  for (std::string activation : {"gelu", "gelu_tanh", "silu"}) {
    SCOPED_TRACE(activation);
    // 37 values: not a multiple of any vector width; a wide range.
    Shape shape = {37};
    std::vector<float> x = randomFloats(37, 5), dy = randomFloats(37, 6);
    for (float &v : x)
      v *= 2.5f;
    std::string op = activation == "silu" ? "silu" : "gelu";
    AttrList forward;
    if (activation != "silu")
      forward = {{"approximate", std::string(activation == "gelu_tanh"
                                                 ? "tanh"
                                                 : "none")}};
    std::vector<double> want =
        centralDifferences(op, {f32(shape, x)}, 0, shape, dy, forward);
    Result g = runOp("activation_grad", {f32(shape, dy), f32(shape, x)},
                     {{F32, shape}}, {{"activation", activation}});
    ASSERT_EQ(g.error, "");
    expectNear(g.outputs[0].as<float>(), want, 2e-3);
  }
  Result bad = runOp("activation_grad", {f32({2}, {1, 2}), f32({2}, {1, 2})},
                     {{F32, {2}}}, {{"activation", std::string("relu")}});
  EXPECT_NE(bad.error.find("activation must be gelu, gelu_tanh or silu"),
            std::string::npos)
      << bad.error;
}

/// layer_norm_grad or rms_norm_grad on x `shape` normalised from `axis`
/// (scaled or not) against central differences of the forward kernel.
void checkNormGradient(bool rms, const Shape &shape, int64_t axis,
                       bool scaled) {
  Shape normalised(shape.begin() + axis, shape.end());
  int64_t n = numel(shape), cols = numel(normalised);
  std::vector<float> x = randomFloats(n, 11), dy = randomFloats(n, 12);
  std::vector<float> scale = randomFloats(cols, 13), bias = randomFloats(cols, 14);
  std::vector<Value> ins = {f32(shape, x)};
  if (scaled || !rms)
    ins.push_back(f32(normalised, scale));
  if (!rms)
    ins.push_back(f32(normalised, bias));
  AttrList attrs = {{"epsilon", 1e-5}};
  if (!rms)
    attrs.push_back({"axis", axis});
  std::string forward = rms ? "rms_norm" : "layer_norm";
  std::vector<Value> gradIns = {f32(shape, dy), f32(shape, x)};
  if (ins.size() > 1)
    gradIns.push_back(ins[1]);
  std::vector<std::pair<plan::DType, Shape>> outs = {
      {F32, shape}, {F32, normalised}, {F32, normalised}};
  Result g = runOp(forward + "_grad", gradIns, outs, attrs);
  ASSERT_EQ(g.error, "");
  for (size_t i = 0; i < ins.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    expectNear(g.outputs[i].as<float>(),
               centralDifferences(forward, ins, i, shape, dy, attrs), 3e-3);
  }
  if (!scaled && rms) { // dscale is given all the same: sum(dy * xhat)
    std::vector<double> want(cols, 0.0);
    for (int64_t r = 0; r < n / cols; ++r) {
      double squares = 0;
      for (int64_t j = 0; j < cols; ++j)
        squares += double(x[r * cols + j]) * x[r * cols + j];
      double inv = 1 / std::sqrt(squares / cols + 1e-5);
      for (int64_t j = 0; j < cols; ++j)
        want[j] += double(dy[r * cols + j]) * x[r * cols + j] * inv;
    }
    expectNear(g.outputs[1].as<float>(), want, 1e-5);
  }
}

TEST(Kernels, LayerNormGradMatchesFiniteDifferences) {
  checkNormGradient(false, {3, 2, 7}, 2, true);
  checkNormGradient(false, {2, 3, 5}, 1, true); // two normalised dims
  checkNormGradient(false, {1, 9}, 1, true);    // one row
}

TEST(Kernels, RmsNormGradMatchesFiniteDifferences) {
  checkNormGradient(true, {4, 6}, 1, true);
  checkNormGradient(true, {2, 3, 5}, 2, false);
}

TEST(Kernels, NormGradGivesTheSameBitsAtAnyThreadCount) {
  Shape shape = {515, 96};
  std::vector<Value> ins = {f32(shape, randomFloats(515 * 96, 21)),
                            f32(shape, randomFloats(515 * 96, 22)),
                            f32({96}, randomFloats(96, 23))};
  std::vector<std::pair<plan::DType, Shape>> outs = {
      {F32, shape}, {F32, {96}}, {F32, {96}}};
  AttrList attrs = {{"axis", int64_t(1)}, {"epsilon", 1e-5}};
  Result two = runOp("layer_norm_grad", ins, outs, attrs, /*threads=*/2);
  Result one = runOp("layer_norm_grad", ins, outs, attrs, /*threads=*/1);
  ASSERT_EQ(two.error, "");
  ASSERT_EQ(one.error, "");
  for (size_t o = 0; o < 3; ++o)
    EXPECT_EQ(one.outputs[o].bytes, two.outputs[o].bytes) << "output " << o;
}

TEST(Kernels, NormGradRejectsAMisshapenScale) {
  Result r = runOp("layer_norm_grad",
                   {f32({2, 4}, randomFloats(8, 1)), f32({2, 4}, randomFloats(8, 2)),
                    f32({2}, {1, 1})},
                   {{F32, {2, 4}}, {F32, {4}}, {F32, {4}}}, {{"axis", int64_t(1)}});
  EXPECT_NE(r.error.find("scale [2] must be [4] (the normalised dims)"),
            std::string::npos)
      << r.error;
}
