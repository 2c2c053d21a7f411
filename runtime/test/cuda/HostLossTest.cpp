//===- HostLossTest.cpp - nll_loss and its gradient on the host -----------===//
//
// cuda-host: kernels/losses.h's nll_loss sequences, run on the host with
// groups of 1, 4 and 32 lanes, against the CPU backend's nll_loss and
// nll_loss_grad: per-position losses and the gradient bit for bit (the
// gradient's mean divisor a sum of whole weights), sums and means within
// fp32 rounding of the CPU's double sums; int64 and int32 targets, class
// weights, an ignored class, spatial dims, a mean over nothing (NaN, as
// torch). Then both ops on "fake-cuda:strict" in fp32, bf16 and f16, and a
// target out of range reported in the CPU's words. The optional outputs:
// layer_norm's mean and inv_std_dev (rows.h's NormBody, any group) and
// softmax_cross_entropy's log_prob, against the CPU's, on the strict fake
// device too.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/losses.h"
#include "../../backends/cuda/kernels/rows.h"

#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

struct NllCase {
  int64_t n, classes, inner;
  bool weighted, ignore, target32;
};

const std::vector<NllCase> kCases = {
    {1, 1, 1, false, false, false},     {7, 5, 1, true, false, false},
    {300, 257, 1, false, true, true},   {4, 10, 33, true, true, false},
    {2, 3, 100003, false, false, true}, {64, 50257, 1, true, true, false},
};

/// Targets in [0, classes), a few of them the ignored class 0.
std::vector<int64_t> targetsOf(int64_t n, int64_t classes, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> t(n);
  for (int64_t &v : t)
    v = gen() % classes;
  return t;
}

Value targetValue(const Shape &shape, const std::vector<int64_t> &t, bool i32) {
  if (!i32)
    return i64(shape, t);
  return valueOf(plan::DType::I32, shape,
                 std::vector<int32_t>(t.begin(), t.end()));
}

TEST(CudaHost, NllLossAndItsGradientEqualTheCpuBackend) {
  unsigned seed = 1;
  for (const NllCase &c : kCases)
    for (const char *reduction : {"none", "sum", "mean"})
      for (int lanes : {1, 4, 32}) {
        if (c.n * c.classes * c.inner > 1000000 && lanes != 4)
          continue; // the long cases once
        SCOPED_TRACE(std::string(reduction) + " N " + std::to_string(c.n) +
                     " C " + std::to_string(c.classes) + " inner " +
                     std::to_string(c.inner) + " lanes " +
                     std::to_string(lanes));
        Shape in = {c.n, c.classes, c.inner}, ts = {c.n, c.inner};
        int64_t positions = c.n * c.inner;
        std::vector<float> x = randomFloats(numel(in), seed++);
        std::vector<int64_t> t = targetsOf(positions, c.classes, seed++);
        std::vector<float> w = randomFloats(c.classes, seed++);
        for (float &v : w)
          v = std::round(std::fabs(v) * 4) + 1; // whole weights: exact sums
        std::vector<int32_t> t32(t.begin(), t.end());
        bool none = std::string(reduction) == "none";
        bool mean = std::string(reduction) == "mean";
        cuda::NllInputs inputs{x.data(),
                               c.target32 ? static_cast<const void *>(t32.data())
                                          : static_cast<const void *>(t.data()),
                               c.target32,
                               c.weighted ? w.data() : nullptr,
                               c.classes,
                               c.inner,
                               c.ignore,
                               0,
                               nullptr};
        cuda::ErrorSlot slot{0, 0};
        inputs.error = &slot;
        std::vector<Value> ins = {f32(in, x), targetValue(ts, t, c.target32)};
        if (c.weighted)
          ins.push_back(f32({c.classes}, w));
        AttrList attrs = {{"reduction", std::string(reduction)}};
        if (c.ignore)
          attrs.push_back({"ignore_index", int64_t(0)});
        Shape out = none ? ts : Shape{};
        std::vector<float> scratch(2 * positions + 1, NAN);
        std::vector<float> y(numel(out));
        cuda::HostLauncher launch{lanes};
        cuda::nllLoss(launch, inputs, positions, none, mean, scratch.data(),
                      y.data());
        std::vector<float> want = cpu("nll_loss", ins, out, attrs);
        if (none)
          EXPECT_EQ(y, want);
        else
          expectClose(y, want, positions > 10000 ? 1e-4 : 1e-5);
        // The gradient, bit for bit.
        std::vector<float> g = randomFloats(numel(out), seed++);
        std::vector<Value> gins = {targetValue(ts, t, c.target32), f32(out, g)};
        if (c.weighted)
          gins.push_back(f32({c.classes}, w));
        std::vector<float> dx(numel(in), NAN);
        cuda::nllLossGrad(launch, inputs, positions, g.data(), none, mean,
                          scratch.data(), dx.data(), numel(in));
        EXPECT_EQ(dx, cpu("nll_loss_grad", gins, in, attrs));
        EXPECT_EQ(slot.code, 0);
      }
}

TEST(CudaHost, NllLossMeanOverNothingIsNaNAsTheCpus) {
  std::vector<float> x = randomFloats(6, 3);
  std::vector<int64_t> t = {0, 0};
  cuda::NllInputs inputs{x.data(), t.data(), false, nullptr, 3, 1,
                         true,     0,        nullptr};
  std::vector<float> scratch(5), y(1);
  cuda::HostLauncher launch{4};
  cuda::nllLoss(launch, inputs, 2, false, true, scratch.data(), y.data());
  std::vector<float> want =
      cpu("nll_loss", {f32({2, 3}, x), i64({2}, t)}, {},
          {{"ignore_index", int64_t(0)}});
  ASSERT_EQ(want.size(), 1u);
  EXPECT_TRUE(std::isnan(want[0]));
  EXPECT_TRUE(std::isnan(y[0]));
}

Value floats(plan::DType dtype, const Shape &shape, const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

/// Values of a float tensor of any float dtype.
std::vector<float> floatsOf(const Value &v) {
  if (v.dtype == plan::DType::F32)
    return v.as<float>();
  std::vector<uint16_t> h = v.as<uint16_t>();
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    out[i] = fsdprt::halfToFloat(h[i], static_cast<fsdprt_dtype_t>(v.dtype));
  return out;
}

TEST(CudaHost, NllLossRunsOnTheStrictFakeDeviceInEveryFloatType) {
  Shape in = {4, 6, 5}, ts = {4, 5};
  std::vector<int64_t> t = targetsOf(20, 6, 7);
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16})
    for (const char *reduction : {"none", "sum", "mean"}) {
      SCOPED_TRACE(std::string(reduction) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      Shape out = std::string(reduction) == "none" ? ts : Shape{};
      AttrList attrs = {{"reduction", std::string(reduction)},
                        {"ignore_index", int64_t(2)}};
      std::vector<Value> ins = {floats(dtype, in, randomFloats(120, 8)),
                                i64(ts, t)};
      std::vector<Value> gins = {
          i64(ts, t), floats(dtype, out, randomFloats(numel(out), 9))};
      for (bool grad : {false, true}) {
        const char *op = grad ? "nll_loss_grad" : "nll_loss";
        Shape shape = grad ? in : out;
        Result cpu = runOp(op, grad ? gins : ins, {{dtype, shape}}, attrs);
        Result fake = runOp(op, grad ? gins : ins, {{dtype, shape}}, attrs, 2,
                            "fake-cuda:strict");
        ASSERT_EQ(cpu.error, "");
        ASSERT_EQ(fake.error, "");
        std::vector<float> want = floatsOf(cpu.outputs[0]);
        expectClose(floatsOf(fake.outputs[0]), want,
                    dtype == plan::DType::F32 ? 1e-6 : 1e-2);
      }
    }
  // A target out of range: the CPU's words.
  std::vector<Value> bad = {f32({2, 3}, randomFloats(6, 10)), i64({2}, {1, 3})};
  Result cpu = runOp("nll_loss", bad, {{F32, {}}});
  Result fake = runOp("nll_loss", bad, {{F32, {}}}, {}, 2, "fake-cuda:strict");
  EXPECT_NE(cpu.error.find("target 3 is outside [0, 3)"), std::string::npos)
      << cpu.error;
  EXPECT_EQ(fake.error, cpu.error);
}

TEST(CudaHost, LayerNormStatisticsEqualTheCpuBackendInAnyGroup) {
  unsigned seed = 40;
  for (int64_t n : {1, 255, 4099})
    for (int lanes : {1, 4, 32}) {
      SCOPED_TRACE("n " + std::to_string(n) + " lanes " + std::to_string(lanes));
      const int64_t rows = 6;
      std::vector<float> x = randomFloats(rows * n, seed++),
                         s = randomFloats(n, seed++), b = randomFloats(n, seed++);
      for (float &v : x)
        v = v * 3 + 2; // a mean away from 0
      std::vector<float> y(x.size()), mean(rows), inv(rows);
      cuda::hostForEachRow(cuda::NormBody<false>{x.data(), s.data(), b.data(),
                                                 y.data(), n, 1e-5f,
                                                 {mean.data(), inv.data()}},
                           rows, lanes);
      Shape xs = {2, 3, n}, stats = {2, 3, 1};
      Result r = runOp("layer_norm", {f32(xs, x), f32({n}, s), f32({n}, b)},
                       {{F32, xs}, {F32, stats}, {F32, stats}},
                       {{"axis", int64_t(2)}});
      ASSERT_EQ(r.error, "");
      expectClose(y, r.outputs[0].as<float>(), 2e-5);
      expectClose(mean, r.outputs[1].as<float>(), 2e-6);
      expectClose(inv, r.outputs[2].as<float>(), 2e-5);
    }
}

TEST(CudaHost, NormsWithBroadcastScalesAndBiasesRunOnTheStrictFakeDevice) {
  // Scales and biases that broadcast onto the normalised dims otherwise
  // than as a row: one value, a column, a row of the last dim, with
  // leading 1s; expanded to a row in the workspace, then the norm.
  struct Case {
    const char *op;
    Shape x, scale, bias;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {"layer_norm", {3, 4, 5}, {1}, {5}, 1},
      {"layer_norm", {3, 4, 5}, {4, 1}, {1, 1, 5}, 1},
      {"layer_norm", {2, 6, 257}, {257}, {6, 1}, 1},
      {"layer_norm", {3, 4, 5}, {4, 5}, {1}, 1}, // the scale a row itself
      {"rms_norm", {3, 4, 5}, {1}, {}, -1},
      {"rms_norm", {2, 7}, {1, 1, 7}, {}, -1}};
  unsigned seed = 60;
  for (plan::DType dtype : {plan::DType::F32, plan::DType::BF16}) {
    double tol = dtype == plan::DType::F32 ? 2e-5 : 1e-2;
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(c.op) + " scale rank " +
                   std::to_string(c.scale.size()) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      std::vector<Value> ins = {
          floats(dtype, c.x, randomFloats(numel(c.x), seed++)),
          floats(dtype, c.scale, randomFloats(numel(c.scale), seed++))};
      if (!c.bias.empty())
        ins.push_back(
            floats(dtype, c.bias, randomFloats(numel(c.bias), seed++)));
      AttrList attrs;
      if (c.axis >= 0)
        attrs.push_back({"axis", c.axis});
      Result cpu = runOp(c.op, ins, {{dtype, c.x}}, attrs);
      Result fake =
          runOp(c.op, ins, {{dtype, c.x}}, attrs, 2, "fake-cuda:strict");
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      expectClose(floatsOf(fake.outputs[0]), floatsOf(cpu.outputs[0]), tol);
    }
  }
}

TEST(CudaHost, OptionalOutputsRunOnTheStrictFakeDevice) {
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16}) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    double tol = dtype == plan::DType::F32 ? 2e-5 : 1e-2;
    // layer_norm over the last two dims, with mean and inv_std_dev.
    Shape xs = {3, 4, 5}, stats = {3, 1, 1};
    std::vector<Value> ins = {floats(dtype, xs, randomFloats(60, 21)),
                              floats(dtype, {4, 5}, randomFloats(20, 22))};
    std::vector<std::pair<plan::DType, Shape>> outs = {
        {dtype, xs}, {dtype, stats}, {dtype, stats}};
    AttrList attrs = {{"axis", int64_t(1)}};
    Result cpu = runOp("layer_norm", ins, outs, attrs);
    Result fake = runOp("layer_norm", ins, outs, attrs, 2, "fake-cuda:strict");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    for (size_t i = 0; i < 3; ++i)
      expectClose(floatsOf(fake.outputs[i]), floatsOf(cpu.outputs[i]), tol);
    // softmax_cross_entropy with log_prob, spatial positions.
    Shape scores = {2, 7, 3};
    std::vector<Value> ce = {floats(dtype, scores, randomFloats(42, 23)),
                             i64({2, 3}, {0, 6, 3, 2, 2, 5})};
    std::vector<std::pair<plan::DType, Shape>> ceOuts = {{dtype, {}},
                                                         {dtype, scores}};
    cpu = runOp("softmax_cross_entropy", ce, ceOuts);
    fake = runOp("softmax_cross_entropy", ce, ceOuts, {}, 2, "fake-cuda:strict");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    for (size_t i = 0; i < 2; ++i)
      expectClose(floatsOf(fake.outputs[i]), floatsOf(cpu.outputs[i]), tol);
    // ... and with the log-sum-exp (f32 whatever the scores' dtype), which
    // the gradient then reads.
    AttrList lse = {{"lse", int64_t(1)}};
    ceOuts.push_back({plan::DType::F32, {2, 3}});
    cpu = runOp("softmax_cross_entropy", ce, ceOuts, lse);
    fake =
        runOp("softmax_cross_entropy", ce, ceOuts, lse, 2, "fake-cuda:strict");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    for (size_t i = 0; i < 3; ++i)
      expectClose(floatsOf(fake.outputs[i]), floatsOf(cpu.outputs[i]), tol);
    std::vector<Value> gradIns = {ce[0], ce[1], floats(dtype, {}, {1.0f}),
                                  cpu.outputs[2]};
    cpu = runOp("softmax_cross_entropy_grad", gradIns, {{dtype, scores}}, lse);
    fake = runOp("softmax_cross_entropy_grad", gradIns, {{dtype, scores}}, lse,
                 2, "fake-cuda:strict");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    expectClose(floatsOf(fake.outputs[0]), floatsOf(cpu.outputs[0]), tol);
  }
}

} // namespace
