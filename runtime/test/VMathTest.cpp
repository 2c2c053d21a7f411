//===- VMathTest.cpp - The CPU backend's vector math, per instruction set -===//
//
// Each table vmath has that this CPU runs (baseline always; AVX2 and
// AVX-512F when cpuid says so) against double-precision references, and
// the properties the kernels rely on: a value's result does not depend on
// its position or the array's length, a NaN reaches the max, float sums
// stay accurate over long rows. Through the static library, which exposes
// the backend's internals.
//
//===----------------------------------------------------------------------===//

#include "../backends/cpu/vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace fsdprt::cpu;

namespace {

std::vector<const vmath::Table *> tables() {
  std::vector<const vmath::Table *> all = {&vmath::baselineTable()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    all.push_back(&vmath::avx2Table());
  if (__builtin_cpu_supports("avx512f"))
    all.push_back(&vmath::avx512Table());
  return all;
}

/// Values over [lo, hi], an odd count so that every table has a tail.
std::vector<float> sweep(float lo, float hi, int n = 4099) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = lo + (hi - lo) * i / (n - 1);
  return x;
}

using ArrayFn = void (*)(const float *, float *, int64_t);

/// fn over x against ref in double: within `ulps` of the float-rounded
/// reference (relative), or `abs` near zero.
void expectClose(ArrayFn fn, double (*ref)(double), const std::vector<float> &x,
                 double rel, double abs, const char *what) {
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double want = ref(x[i]);
    EXPECT_NEAR(y[i], want, abs + rel * std::fabs(want))
        << what << "(" << x[i] << ")";
  }
}

double sigmoidRef(double x) { return 1 / (1 + std::exp(-x)); }
double siluRef(double x) { return x / (1 + std::exp(-x)); }
double geluErfRef(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double geluTanhRef(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double logRef(double x) { return std::log(x); }
double expRef(double x) { return std::exp(x); }
double tanhRef(double x) { return std::tanh(x); }
double erfRef(double x) { return std::erf(x); }

} // namespace

TEST(VMath, ChosenTableIsOneThisCpuRuns) {
  std::string name = vmath::isa();
  bool known = false;
  for (const vmath::Table *t : tables())
    known = known || name == t->name;
  EXPECT_TRUE(known) << name;
}

TEST(VMath, FunctionsMatchDoubleReferences) {
  const double eps = std::numeric_limits<float>::epsilon();
  for (const vmath::Table *t : tables()) {
    SCOPED_TRACE(t->name);
    expectClose(t->exp, expRef, sweep(-87, 88), 2 * eps, 0, "exp");
    expectClose(t->log, logRef, sweep(1e-6f, 1e6f), 2 * eps, 1e-7, "log");
    expectClose(t->tanh, tanhRef, sweep(-12, 12), 2 * eps, 1e-7, "tanh");
    expectClose(t->erf, erfRef, sweep(-6, 6), 2 * eps, 1e-7, "erf");
    expectClose(t->sigmoid, sigmoidRef, sweep(-30, 30), 4 * eps, 1e-7,
                "sigmoid");
    expectClose(t->silu, siluRef, sweep(-30, 30), 4 * eps, 1e-7, "silu");
    expectClose(t->geluErf, geluErfRef, sweep(-10, 10), 4 * eps, 1e-7, "gelu");
    expectClose(t->geluTanh, geluTanhRef, sweep(-10, 10), 1e-6, 1e-6,
                "gelu_tanh");
  }
}

TEST(VMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const vmath::Table *t : tables()) {
    SCOPED_TRACE(t->name);
    std::vector<float> x = {-inf, inf, 0.0f, -200.0f, 200.0f}, y(5);
    t->exp(x.data(), y.data(), 5);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], inf);
    EXPECT_EQ(y[2], 1.0f);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_EQ(y[4], inf);
    t->sigmoid(x.data(), y.data(), 5);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(y[2], 0.5f);
    float nan = std::nanf("");
    t->exp(&nan, y.data(), 1);
    EXPECT_TRUE(std::isnan(y[0]));
  }
}

TEST(VMath, AValueDoesNotDependOnItsPositionOrTheLength) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> x(1000);
  for (float &v : x)
    v = normal(rng);
  for (const vmath::Table *t : tables()) {
    SCOPED_TRACE(t->name);
    for (ArrayFn fn : {t->exp, t->tanh, t->erf, t->sigmoid, t->silu, t->geluErf,
                       t->geluTanh}) {
      std::vector<float> whole(x.size());
      fn(x.data(), whole.data(), x.size());
      // Every element alone (a tail of 1), and the array in odd pieces.
      for (size_t i = 0; i < x.size(); i += 37) {
        float one;
        fn(&x[i], &one, 1);
        EXPECT_EQ(one, whole[i]) << i;
      }
      std::vector<float> pieces(x.size());
      for (size_t i = 0; i < x.size(); i += 13)
        fn(&x[i], &pieces[i], std::min<size_t>(13, x.size() - i));
      EXPECT_EQ(pieces, whole);
    }
  }
}

TEST(VMath, MaxSumAndExpSum) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const vmath::Table *t : tables()) {
    SCOPED_TRACE(t->name);
    for (int64_t n : {0, 1, 3, 16, 17, 1000, 100003}) {
      std::vector<float> x(n);
      double want = 0;
      float max = -inf;
      for (int64_t i = 0; i < n; ++i) {
        x[i] = std::sin(0.37 * i) * 10 + 0.1f;
        want += x[i];
        max = std::max(max, x[i]);
      }
      EXPECT_EQ(t->max(x.data(), n), max) << n;
      EXPECT_NEAR(t->sum(x.data(), n), want, 1e-6 * (std::fabs(want) + n)) << n;
      // exp of the float difference, as the kernels shift.
      std::vector<float> e(n);
      auto shifted = [&](int64_t i) { return std::exp(double(x[i] - max)); };
      double wantExp = 0;
      for (int64_t i = 0; i < n; ++i)
        wantExp += shifted(i);
      float sum = t->expSum(x.data(), e.data(), n, max);
      EXPECT_NEAR(sum, wantExp, 1e-6 * wantExp + 1e-30) << n;
      for (int64_t i = 0; i < n; i += 97)
        EXPECT_NEAR(e[i], shifted(i), 2e-7 * shifted(i));
      if (n > 0) {
        x[n / 2] = std::nanf("");
        EXPECT_TRUE(std::isnan(t->max(x.data(), n))) << n;
      }
    }
  }
}
