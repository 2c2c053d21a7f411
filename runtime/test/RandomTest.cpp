//===- RandomTest.cpp - Philox-4x32-10 and the dropout kernel -------------===//
//
// The generator against the known-answer vectors published with Random123
// (kat_vectors, philox4x32 R=10), which test/Runtime/philox_reference.py
// also checks against a Python implementation written from the paper; the
// dropout kernel against its definition (rate within a binomial bound,
// kept values exactly x / (1 - p) in f32, the mask output consistent with
// y, each element's draw that of its global index), across thread counts,
// seeds and steps; random_uniform against its definition (each value
// uniformValue of its element's word, all in [low, high) even where the
// rounding would reach high, mean and variance within 5 standard errors)
// and its keying (seed, step, op id, micro-batch slot; not the threads);
// random_normal (drawValue of each word, mean and variance within 5
// standard errors) and bernoulli (drawValue, 0 and 1 only, each p's rate
// within 5 binomial standard deviations, p = 0 and 1 exact).
//
//===----------------------------------------------------------------------===//

#include "SessionHarness.h"

#include "../src/philox.h"

#include <cmath>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

TEST(Philox, KnownAnswerVectors) {
  struct Case {
    uint32_t counter[4], key[2], want[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case &c : cases) {
    fsdprt::Philox4x32 counter{{c.counter[0], c.counter[1], c.counter[2],
                                c.counter[3]}};
    fsdprt::Philox4x32 got = fsdprt::philox4x32(counter, c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.v[i], c.want[i]) << "word " << i;
  }
}

TEST(Philox, StreamNumbersElementsInBlocksOfFour) {
  fsdprt::RandomStream stream{0x0123456789abcdefull, 7, 3};
  for (uint64_t element : {0ull, 5ull, (1ull << 34) + 2}) {
    fsdprt::Philox4x32 counter{{static_cast<uint32_t>(element / 4),
                                static_cast<uint32_t>(element / 4 >> 32), 3,
                                7}};
    EXPECT_EQ(stream.bits(element),
              fsdprt::philox4x32(counter, 0x89abcdef, 0x01234567)
                  .v[element % 4]);
  }
}

/// One dropout kernel on x [n], run `runs` times in a session with `seed`
/// and `threads`; the last run's y and mask.
struct Dropped {
  std::string error;
  std::vector<float> y;
  std::vector<uint8_t> mask;
};

Dropped runDropout(const std::vector<float> &x, const AttrList &attrs,
                   uint64_t seed, int threads, int runs = 1) {
  PlanBuilder b;
  Shape shape = {static_cast<int64_t>(x.size())};
  uint32_t in = b.input("x", plan::DType::F32, shape);
  uint32_t y = b.output("y", plan::DType::F32, shape);
  uint32_t mask = b.output("mask", plan::DType::Bool, shape);
  b.kernel("dropout", {in}, {y, mask}, attrs);
  std::vector<uint8_t> bytes = b.finish();
  Dropped out;
  fsdprt_plan_t *p = nullptr;
  fsdprt_session_t *s = nullptr;
  out.error = take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p));
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.num_threads = threads;
  options.seed = seed;
  if (out.error.empty())
    out.error = take(fsdprt_session_create_with_options(p, &options, &s));
  if (out.error.empty())
    out.error = take(fsdprt_session_set_input(s, "x", x.data(),
                                              x.size() * sizeof(float)));
  for (int r = 0; r < runs && out.error.empty(); ++r)
    out.error = take(fsdprt_session_run(s));
  out.y.resize(x.size());
  out.mask.resize(x.size());
  if (out.error.empty())
    out.error = take(fsdprt_session_get_output(s, "y", out.y.data(),
                                               x.size() * sizeof(float)));
  if (out.error.empty())
    out.error =
        take(fsdprt_session_get_output(s, "mask", out.mask.data(), x.size()));
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
  return out;
}

TEST(Dropout, RateScalingAndMaskFollowTheDefinition) {
  const size_t n = (1 << 20) + 3; // not a multiple of 4 or of a chunk
  std::vector<float> x = randomFloats(n, 11);
  for (double ratio : {0.1, 0.3, 0.5, 0.9}) {
    SCOPED_TRACE("ratio " + std::to_string(ratio));
    Dropped d =
        runDropout(x, {{"ratio", ratio}, {"op", int64_t(5)}}, 1234, 2);
    ASSERT_EQ(d.error, "");
    // torch's factor: 1 / (1 - p) in f32.
    const float scale = 1.0f / static_cast<float>(1.0 - ratio);
    fsdprt::RandomStream stream{1234, 0, 5};
    const uint64_t threshold =
        static_cast<uint64_t>(std::llround((1.0 - ratio) * 4294967296.0));
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      bool keep = stream.bits(i) < threshold;
      ASSERT_EQ(d.mask[i], keep ? 1 : 0) << "at " << i;
      ASSERT_EQ(d.y[i], keep ? x[i] * scale : 0.0f) << "at " << i;
      kept += keep;
    }
    // Kept ~ Binomial(n, 1 - p): within 5 standard deviations.
    double mean = n * (1 - ratio), sd = std::sqrt(n * ratio * (1 - ratio));
    EXPECT_NEAR(static_cast<double>(kept), mean, 5 * sd);
  }
}

TEST(Dropout, SameBitsAtAnyThreadCount) {
  std::vector<float> x = randomFloats(300001, 3);
  AttrList attrs = {{"ratio", 0.25}, {"op", int64_t(1)}};
  Dropped one = runDropout(x, attrs, 42, 1), four = runDropout(x, attrs, 42, 4);
  ASSERT_EQ(one.error, "");
  ASSERT_EQ(four.error, "");
  EXPECT_EQ(one.y, four.y);
  EXPECT_EQ(one.mask, four.mask);
}

TEST(Dropout, SeedStepOpAndSlotEachChangeTheMask) {
  std::vector<float> x = randomFloats(4096, 5);
  AttrList attrs = {{"ratio", 0.5}, {"op", int64_t(1)}};
  Dropped base = runDropout(x, attrs, 42, 2);
  ASSERT_EQ(base.error, "");
  EXPECT_EQ(base.mask, runDropout(x, attrs, 42, 2).mask);
  EXPECT_NE(base.mask, runDropout(x, attrs, 43, 2).mask);
  Dropped second = runDropout(x, attrs, 42, 2, 2);
  ASSERT_EQ(second.error, "");
  EXPECT_NE(base.mask, second.mask);
  EXPECT_NE(base.mask,
            runDropout(x, {{"ratio", 0.5}, {"op", int64_t(2)}}, 42, 2).mask);
  // Micro-batch 1 of 2 continues the global numbering after micro-batch 0.
  std::vector<float> twice(x);
  twice.insert(twice.end(), x.begin(), x.end());
  Dropped whole = runDropout(twice, attrs, 42, 2);
  Dropped slot1 = runDropout(
      x,
      {{"ratio", 0.5}, {"op", int64_t(1)}, {"slot", int64_t(1)},
       {"slots", int64_t(2)}},
      42, 2);
  ASSERT_EQ(whole.error, "");
  ASSERT_EQ(slot1.error, "");
  EXPECT_TRUE(std::equal(base.mask.begin(), base.mask.end(),
                         whole.mask.begin()));
  EXPECT_TRUE(std::equal(slot1.mask.begin(), slot1.mask.end(),
                         whole.mask.begin() + x.size()));
}

TEST(Dropout, RefusesBadAttributesAndTypes) {
  std::vector<float> x = randomFloats(8, 1);
  EXPECT_NE(runDropout(x, {{"ratio", 1.0}, {"op", int64_t(0)}}, 0, 1)
                .error.find("ratio must be in [0, 1), not 1"),
            std::string::npos);
  EXPECT_NE(runDropout(x, {{"ratio", 0.5}}, 0, 1)
                .error.find("needs its id in the plan"),
            std::string::npos);
  EXPECT_NE(runDropout(x,
                       {{"ratio", 0.5},
                        {"op", int64_t(0)},
                        {"slot", int64_t(2)},
                        {"slots", int64_t(2)}},
                       0, 1)
                .error.find("micro-batch slot 2 of 2 is out of range"),
            std::string::npos);
  Result r = runOp("dropout", {i64({8}, std::vector<int64_t>(8, 1))},
                   {{plan::DType::F32, {8}}}, {{"op", int64_t(0)}});
  EXPECT_NE(r.error.find("x must be"), std::string::npos) << r.error;
}

/// random_uniform of `shape` with `attrs` (op 0 unless given) in a session
/// with `seed`: its output, as doubles.
struct Uniform {
  std::string error;
  std::vector<double> y;
};

Uniform runUniform(plan::DType dtype, int64_t n, AttrList attrs, uint64_t seed,
                   int threads = 2, int runs = 1) {
  Result r = runSeeded("random_uniform", {}, {{dtype, {n}}}, attrs, seed,
                       threads, runs);
  Uniform out{r.error, {}};
  if (!r.error.empty())
    return out;
  if (dtype == plan::DType::F64)
    out.y = r.outputs[0].as<double>();
  else
    for (float v : r.outputs[0].as<float>())
      out.y.push_back(v);
  return out;
}

TEST(RandomUniform, ValuesFollowTheDefinitionAndTheDistribution) {
  const int64_t n = (1 << 20) + 3;
  struct Range {
    double low, high;
  };
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F64})
    for (Range r : {Range{0, 1}, Range{-2, 3}, Range{100, 101}}) {
      SCOPED_TRACE(
          std::string(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype))) +
          " [" + std::to_string(r.low) + ", " + std::to_string(r.high) + ")");
      Uniform u = runUniform(
          dtype, n, {{"low", r.low}, {"high", r.high}, {"op", int64_t(9)}}, 77,
          3);
      ASSERT_EQ(u.error, "");
      fsdprt::RandomStream stream{77, 0, 9};
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = stream.bits(i);
        double want = dtype == plan::DType::F64
                          ? fsdprt::uniformValue<double>(bits, r.low, r.high)
                          : fsdprt::uniformValue<float>(bits, r.low, r.high);
        ASSERT_EQ(u.y[i], want) << "at " << i;
        ASSERT_GE(u.y[i], r.low) << "at " << i;
        ASSERT_LT(u.y[i], r.high) << "at " << i;
        sum += u.y[i];
      }
      double mean = sum / n;
      for (double v : u.y)
        squares += (v - mean) * (v - mean);
      double width = r.high - r.low, variance = width * width / 12;
      // Var((x - mu)^2) of a uniform = width^4 / 180.
      EXPECT_NEAR(mean, (r.low + r.high) / 2, 5 * std::sqrt(variance / n));
      EXPECT_NEAR(squares / n, variance,
                  5 * std::sqrt(width * width * width * width / 180 / n));
    }
}

TEST(RandomUniform, AValueThatWouldRoundUpToHighIsTheFloatBelowIt) {
  // In [100, 101) a float32 is a multiple of 2^-17: u above 1 - 2^-18 rounds
  // 100 + u to 101 (64 of the 2^24 values of u; about 4 in 2^20 draws).
  const int64_t n = 1 << 20;
  Uniform u =
      runUniform(plan::DType::F32, n,
                 {{"low", 100.0}, {"high", 101.0}, {"op", int64_t(1)}}, 5);
  ASSERT_EQ(u.error, "");
  const double below = std::nextafter(101.0f, 100.0f);
  int64_t atTop = std::count(u.y.begin(), u.y.end(), below);
  EXPECT_GT(atTop, 0);
  EXPECT_EQ(*std::max_element(u.y.begin(), u.y.end()), below);
  EXPECT_EQ(fsdprt::uniformValue<float>(0xffffffffu, 0, 1), 1.0f - 0x1p-24f);
  EXPECT_EQ(fsdprt::uniformValue<float>(0, -3, 1), -3.0f);
}

TEST(RandomUniform, KeyedBySeedStepOpAndSlotNotThreads) {
  const int64_t n = 4099;
  AttrList attrs = {{"op", int64_t(2)}};
  Uniform base = runUniform(plan::DType::F32, n, attrs, 42, 1);
  ASSERT_EQ(base.error, "");
  EXPECT_EQ(base.y, runUniform(plan::DType::F32, n, attrs, 42, 4).y);
  EXPECT_NE(base.y, runUniform(plan::DType::F32, n, attrs, 43).y);
  EXPECT_NE(base.y, runUniform(plan::DType::F32, n, attrs, 42, 2, 2).y);
  EXPECT_NE(base.y,
            runUniform(plan::DType::F32, n, {{"op", int64_t(3)}}, 42).y);
  // Micro-batch 1 of 2 continues the global numbering after micro-batch 0.
  Uniform whole = runUniform(plan::DType::F32, 2 * n, attrs, 42);
  Uniform slot1 = runUniform(
      plan::DType::F32, n,
      {{"op", int64_t(2)}, {"slot", int64_t(1)}, {"slots", int64_t(2)}}, 42);
  ASSERT_EQ(slot1.error, "");
  EXPECT_TRUE(std::equal(base.y.begin(), base.y.end(), whole.y.begin()));
  EXPECT_TRUE(std::equal(slot1.y.begin(), slot1.y.end(), whole.y.begin() + n));
  // Its stream is dropout's under the same id: the draws are the same words.
  fsdprt::RandomStream stream{42, 0, 2};
  EXPECT_EQ(base.y[5], fsdprt::uniformValue<float>(stream.bits(5), 0, 1));
}

TEST(RandomNormal, ValuesFollowTheDefinitionAndTheDistribution) {
  const int64_t n = (1 << 20) + 1;
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F64}) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    const double mean = 2, scale = 0.5;
    Result r = runSeeded("random_normal", {}, {{dtype, {n}}},
                         {{"mean", mean}, {"scale", scale}, {"op", int64_t(6)}},
                         99, 3);
    ASSERT_EQ(r.error, "");
    std::vector<double> y;
    if (dtype == plan::DType::F64)
      y = r.outputs[0].as<double>();
    else
      for (float v : r.outputs[0].as<float>())
        y.push_back(v);
    fsdprt::RandomStream stream{99, 0, 6};
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < n; ++i) {
      fsdprt::Philox4x32 words = stream.block(i / 4);
      double want =
          dtype == plan::DType::F64
              ? fsdprt::drawValue<double>(fsdprt::Distribution::Normal, words,
                                          i % 4, mean, scale, 0)
              : fsdprt::drawValue<float>(fsdprt::Distribution::Normal, words,
                                         i % 4, mean, scale, 0);
      ASSERT_EQ(y[i], want) << "at " << i;
      sum += y[i];
    }
    double m = sum / n;
    for (double v : y)
      squares += (v - m) * (v - m);
    double variance = scale * scale;
    EXPECT_NEAR(m, mean, 5 * std::sqrt(variance / n));
    // Var((x - mu)^2) of a normal = 2 sigma^4.
    EXPECT_NEAR(squares / n, variance,
                5 * std::sqrt(2 * variance * variance / n));
  }
}

TEST(Bernoulli, DrawsOneWithProbabilityP) {
  const int64_t perP = 200000;
  const std::vector<double> ps = {0, 0.1, 0.5, 0.97, 1};
  std::vector<float> p;
  for (double v : ps)
    p.insert(p.end(), perP, static_cast<float>(v));
  const int64_t n = static_cast<int64_t>(p.size());
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F64}) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    Result r = runSeeded("bernoulli", {f32({n}, p)}, {{dtype, {n}}},
                         {{"op", int64_t(2)}}, 7, 2);
    ASSERT_EQ(r.error, "");
    std::vector<double> y;
    if (dtype == plan::DType::F64)
      y = r.outputs[0].as<double>();
    else
      for (float v : r.outputs[0].as<float>())
        y.push_back(v);
    fsdprt::RandomStream stream{7, 0, 2};
    for (size_t k = 0; k < ps.size(); ++k) {
      double ones = 0;
      for (int64_t i = k * perP; i < static_cast<int64_t>(k + 1) * perP; ++i) {
        ASSERT_TRUE(y[i] == 0 || y[i] == 1) << "at " << i;
        ASSERT_EQ(y[i], fsdprt::unitInterval(stream.bits(i)) < p[i] ? 1 : 0)
            << "at " << i;
        ones += y[i];
      }
      double q = static_cast<float>(ps[k]);
      EXPECT_NEAR(ones, perP * q, 5 * std::sqrt(perP * q * (1 - q)) + 1e-9)
          << "p " << ps[k];
    }
  }
  // Another seed, other draws.
  Result a = runSeeded("bernoulli", {f32({n}, p)}, {{plan::DType::F32, {n}}},
                       {{"op", int64_t(2)}}, 7);
  Result b = runSeeded("bernoulli", {f32({n}, p)}, {{plan::DType::F32, {n}}},
                       {{"op", int64_t(2)}}, 8);
  ASSERT_EQ(a.error + b.error, "");
  EXPECT_NE(a.outputs[0].bytes, b.outputs[0].bytes);
}

TEST(RandomUniform, RefusesBadAttributesAndTypes) {
  auto error = [](plan::DType dtype, AttrList attrs) {
    return runUniform(dtype, 8, std::move(attrs), 0).error;
  };
  EXPECT_NE(
      error(plan::DType::F32, {{"low", 1.0}, {"high", 1.0}, {"op", int64_t(0)}})
          .find("low 1.000000 must be less than high 1.000000"),
      std::string::npos);
  EXPECT_NE(error(plan::DType::F32, {}).find("needs its id in the plan"),
            std::string::npos);
  EXPECT_NE(error(plan::DType::I64, {{"op", int64_t(0)}})
                .find("y must be float32 or float64, not int64"),
            std::string::npos);
  Result r = runOp("random_uniform", {f32({2}, {1, 2})},
                   {{plan::DType::F32, {2}}}, {{"op", int64_t(0)}});
  EXPECT_NE(r.error.find("takes 0 inputs and 1 output, not 1 and 1"),
            std::string::npos)
      << r.error;
}

TEST(Bernoulli, RefusesBadTypesAndShapes) {
  Result r = runSeeded("bernoulli", {i64({2}, {0, 1})},
                       {{plan::DType::F32, {2}}}, {{"op", int64_t(0)}}, 0);
  EXPECT_NE(r.error.find("p must be float32 or float64, not int64"),
            std::string::npos)
      << r.error;
  r = runSeeded("bernoulli", {f32({2}, {0, 1})}, {{plan::DType::F32, {3}}},
                {{"op", int64_t(0)}}, 0);
  EXPECT_NE(r.error.find("y [3] must have p's shape [2]"), std::string::npos)
      << r.error;
  r = runSeeded("random_normal", {}, {{plan::DType::F32, {2}}},
                {{"op", int64_t(0)}, {"scale", INFINITY}}, 0);
  EXPECT_NE(r.error.find("mean and scale must be finite"), std::string::npos)
      << r.error;
}

} // namespace
