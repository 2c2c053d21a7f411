//===- RandomTest.cpp - Philox-4x32-10 and the dropout kernel -------------===//
//
// The generator against the known-answer vectors published with Random123
// (kat_vectors, philox4x32 R=10), which test/Runtime/philox_reference.py
// also checks against a Python implementation written from the paper; the
// dropout kernel against its definition (rate within a binomial bound,
// kept values exactly x / (1 - p) in f32, the mask output consistent with
// y, each element's draw that of its global index), across thread counts,
// seeds and steps.
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

} // namespace
