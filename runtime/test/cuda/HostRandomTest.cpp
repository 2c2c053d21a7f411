//===- HostRandomTest.cpp - Dropout's body and kernel on the host ---------===//
//
// cuda-host: kernels/random.h's dropout body, run on the host over its
// Philox blocks, draws the CPU backend's masks bit for bit and writes its
// outputs bit for bit: sizes of 1, not multiples of 4 or of a block, and
// micro-batch slots that start x mid-block, at several ratios, seeds and
// steps. Then the kernel through the backend on "fake-cuda:strict" (own
// kernels only) in fp32, bf16 and f16 (widened) over several steps of one
// session, the later ones replayed from its captured step: each step's
// masks are the CPU's, and new. The generators' body (random_uniform,
// random_normal, bernoulli) the same way: on the host it writes the CPU
// kernels' f32 and f64 values bit for bit (sizes 1, 3, 5, not multiples of
// 4, large; slots that start mid-block; a uniform range where rounding
// reaches high; Bernoulli's p of either float type, 0 and 1 among them),
// and so do the kernels on the strict fake device, step after step.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/random.h"

#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

/// y and mask of the last of `runs` runs of one dropout kernel on x, in a
/// session with `seed` on `device` (nullptr: the CPU).
struct Dropped {
  std::string error;
  std::vector<uint8_t> y, mask;
};

Dropped runDropout(const Value &x, const AttrList &attrs, uint64_t seed,
                   int runs, const char *device = nullptr) {
  PlanBuilder b;
  uint32_t in = b.input("x", x.dtype, x.shape);
  uint32_t y = b.output("y", x.dtype, x.shape);
  uint32_t mask = b.output("mask", plan::DType::Bool, x.shape);
  b.kernel("dropout", {in}, {y, mask}, attrs);
  std::vector<uint8_t> bytes = b.finish();
  Dropped out;
  fsdprt_plan_t *p = nullptr;
  fsdprt_session_t *s = nullptr;
  out.error = take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p));
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.num_threads = 2;
  options.seed = seed;
  options.device = device;
  if (out.error.empty())
    out.error = take(fsdprt_session_create_with_options(p, &options, &s));
  if (out.error.empty())
    out.error = take(fsdprt_session_set_input(s, "x", x.bytes.data(),
                                              x.bytes.size()));
  for (int r = 0; r < runs && out.error.empty(); ++r)
    out.error = take(fsdprt_session_run(s));
  out.y.resize(x.bytes.size());
  out.mask.resize(numel(x.shape));
  if (out.error.empty())
    out.error = take(
        fsdprt_session_get_output(s, "y", out.y.data(), out.y.size()));
  if (out.error.empty())
    out.error = take(fsdprt_session_get_output(s, "mask", out.mask.data(),
                                               out.mask.size()));
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
  return out;
}

TEST(CudaHost, DropoutBodyDrawsTheCpuBackendsMasksBitForBit) {
  struct Slot {
    int64_t slot, slots;
  };
  unsigned seed = 10;
  for (int64_t n : kSizes)
    for (Slot sl : {Slot{0, 1}, Slot{1, 3}, Slot{2, 3}})
      for (double ratio : {0.0, 0.1, 0.5, 0.9})
        for (int runs : {1, 3}) {
          SCOPED_TRACE("n " + std::to_string(n) + " slot " +
                       std::to_string(sl.slot) + " of " +
                       std::to_string(sl.slots) + " ratio " +
                       std::to_string(ratio) + " runs " +
                       std::to_string(runs));
          const uint64_t key = 0x0123456789abcdefull + seed;
          const int64_t op = 3 + seed % 5;
          std::vector<float> x = randomFloats(n, seed++);
          AttrList attrs = {{"ratio", ratio},
                            {"op", op},
                            {"slot", sl.slot},
                            {"slots", sl.slots}};
          Dropped want = runDropout(f32({n}, x), attrs, key, runs);
          ASSERT_EQ(want.error, "");
          std::vector<float> y(n, NAN);
          std::vector<uint8_t> mask(n, 7);
          cuda::DropoutBody body{
              {key, static_cast<uint32_t>(runs - 1), static_cast<uint32_t>(op)},
              static_cast<uint64_t>(sl.slot * n),
              fsdprt::keepThreshold(1.0 - ratio),
              1.0f / static_cast<float>(1.0 - ratio),
              x.data(),
              y.data(),
              mask.data(),
              n};
          cuda::hostForEach(body, body.blocks());
          EXPECT_EQ(mask, want.mask);
          EXPECT_EQ(std::memcmp(y.data(), want.y.data(), n * sizeof(float)), 0);
          if (n > 1000 && ratio > 0) { // both outcomes occur
            EXPECT_GT(std::count(mask.begin(), mask.end(), 0), 0);
            EXPECT_GT(std::count(mask.begin(), mask.end(), 1), 0);
          }
        }
}

TEST(CudaHost, DropoutBodyWithoutAMaskWritesTheSameOutputs) {
  const int64_t n = 1001;
  std::vector<float> x = randomFloats(n, 3), withMask(n), without(n);
  std::vector<uint8_t> mask(n);
  cuda::DropoutBody body{{42, 2, 1}, 5, fsdprt::keepThreshold(0.7),
                         1.0f / 0.7f, x.data(), withMask.data(), mask.data(), n};
  cuda::hostForEach(body, body.blocks());
  body.y = without.data();
  body.mask = nullptr;
  cuda::hostForEach(body, body.blocks());
  EXPECT_EQ(withMask, without);
  EXPECT_EQ(body.blocks(), (5 + n - 1) / 4 - 5 / 4 + 1);
}

/// `v` stored as `dtype` (F32, BF16 or F16).
Value floats(plan::DType dtype, const Shape &shape, const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

TEST(CudaHost, DropoutOnTheStrictFakeDeviceDrawsTheCpusMasksEveryStep) {
  Shape shape = {3, 1001};
  std::vector<float> values = randomFloats(numel(shape), 9);
  AttrList attrs = {{"ratio", 0.3},
                    {"op", int64_t(2)},
                    {"slot", int64_t(1)},
                    {"slots", int64_t(2)}};
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16}) {
    Value x = floats(dtype, shape, values);
    std::vector<uint8_t> previous;
    // Steps 2 and 3 replay the step the session captured.
    for (int runs : {1, 2, 3}) {
      SCOPED_TRACE(std::string(fsdprt_dtype_name(
                       static_cast<fsdprt_dtype_t>(dtype))) +
                   " runs " + std::to_string(runs));
      Dropped cpu = runDropout(x, attrs, 77, runs);
      Dropped fake = runDropout(x, attrs, 77, runs, "fake-cuda:strict");
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      EXPECT_EQ(fake.mask, cpu.mask);
      EXPECT_EQ(fake.y, cpu.y);
      EXPECT_NE(fake.mask, previous); // a new mask each step
      previous = fake.mask;
    }
  }
}

/// A generator case: its kernel, distribution and parameters (low and
/// high, or mean and scale; Bernoulli's come from p).
struct Generator {
  const char *op;
  fsdprt::Distribution kind;
  double a, b;
};

const Generator kGenerators[] = {
    {"random_uniform", fsdprt::Distribution::Uniform, 0, 1},
    {"random_uniform", fsdprt::Distribution::Uniform, -2.5, 4},
    {"random_uniform", fsdprt::Distribution::Uniform, 100, 101},
    {"random_normal", fsdprt::Distribution::Normal, 0, 1},
    {"random_normal", fsdprt::Distribution::Normal, 3, 0.5},
    {"bernoulli", fsdprt::Distribution::Bernoulli, 0, 0},
};

AttrList generatorAttrs(const Generator &g, int64_t op, int64_t slot,
                        int64_t slots) {
  AttrList attrs = {{"op", op}, {"slot", slot}, {"slots", slots}};
  if (g.kind == fsdprt::Distribution::Uniform) {
    attrs.push_back({"low", g.a});
    attrs.push_back({"high", g.b});
  } else if (g.kind == fsdprt::Distribution::Normal) {
    attrs.push_back({"mean", g.a});
    attrs.push_back({"scale", g.b});
  }
  return attrs;
}

/// Bernoulli's probabilities: n values in [0, 1] (0 and 1 among them), as
/// `dtype`.
Value probabilities(plan::DType dtype, int64_t n, unsigned seed) {
  std::vector<float> p = randomFloats(n, seed);
  for (int64_t i = 0; i < n; ++i)
    p[i] = i % 7 == 0 ? float(i % 2) : std::fabs(std::tanh(p[i]));
  if (dtype == plan::DType::F32)
    return f32({n}, p);
  return f64({n}, std::vector<double>(p.begin(), p.end()));
}

TEST(CudaHost, DrawBodyWritesTheCpuKernelsValuesBitForBit) {
  struct Slot {
    int64_t slot, slots;
  };
  unsigned seed = 3;
  for (const Generator &g : kGenerators)
    for (plan::DType dtype : {plan::DType::F32, plan::DType::F64})
      for (int64_t n : {int64_t(1), int64_t(3), int64_t(5), int64_t(1001),
                        int64_t(1 << 20) + 3})
        for (Slot sl : {Slot{0, 1}, Slot{1, 3}})
          for (int runs : {1, 2}) {
            SCOPED_TRACE(std::string(g.op) + " " + std::to_string(g.a) + " " +
                         std::to_string(g.b) + " n " + std::to_string(n) +
                         " slot " + std::to_string(sl.slot) + " runs " +
                         std::to_string(runs));
            const uint64_t key = 0xfedcba9876543210ull + seed++;
            const int64_t op = 1 + seed % 7;
            const bool bernoulli = g.kind == fsdprt::Distribution::Bernoulli;
            // Bernoulli's p: of the other float type than y, to cover both.
            plan::DType pType =
                dtype == plan::DType::F32 ? plan::DType::F64 : plan::DType::F32;
            std::vector<Value> ins;
            if (bernoulli)
              ins.push_back(probabilities(pType, n, seed));
            Result want = runSeeded(g.op, ins, {{dtype, {n}}},
                                    generatorAttrs(g, op, sl.slot, sl.slots),
                                    key, 2, runs);
            ASSERT_EQ(want.error, "");
            std::vector<uint8_t> y(want.outputs[0].bytes.size(), 0xff);
            cuda::DrawBody body{{key, static_cast<uint32_t>(runs - 1),
                                 static_cast<uint32_t>(op)},
                                static_cast<uint64_t>(sl.slot * n),
                                g.kind,
                                g.a,
                                g.b,
                                bernoulli ? ins[0].bytes.data() : nullptr,
                                pType == plan::DType::F64,
                                y.data(),
                                dtype == plan::DType::F64,
                                n};
            cuda::hostForEach(body, body.blocks());
            ASSERT_EQ(y, want.outputs[0].bytes);
          }
}

TEST(CudaHost, GeneratorsOnTheStrictFakeDeviceWriteTheCpusValuesEveryStep) {
  const int64_t n = 3003;
  for (const Generator &g : kGenerators)
    for (plan::DType dtype : {plan::DType::F32, plan::DType::F64}) {
      std::vector<Value> ins;
      if (g.kind == fsdprt::Distribution::Bernoulli)
        ins.push_back(probabilities(dtype, n, 5));
      AttrList attrs = generatorAttrs(g, 4, 1, 2);
      std::vector<uint8_t> previous;
      for (int runs : {1, 2, 3}) {
        SCOPED_TRACE(std::string(g.op) + " " +
                     fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)) +
                     " runs " + std::to_string(runs));
        Result cpu = runSeeded(g.op, ins, {{dtype, {n}}}, attrs, 77, 2, runs);
        Result fake = runSeeded(g.op, ins, {{dtype, {n}}}, attrs, 77, 2, runs,
                                "fake-cuda:strict");
        ASSERT_EQ(cpu.error, "");
        ASSERT_EQ(fake.error, "");
        EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
        EXPECT_NE(fake.outputs[0].bytes, previous); // new numbers each step
        previous = fake.outputs[0].bytes;
      }
    }
}

} // namespace
