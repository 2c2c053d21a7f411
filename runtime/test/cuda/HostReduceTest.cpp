//===- HostReduceTest.cpp - Reductions over any axes on the host ----------===//
//
// cuda-host: kernels/reduce.h's body against the CPU backend's
// reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_sum_square,
// reduce_log_sum and reduce_log_sum_exp (and global_average_pool) over
// interleaved axes, every axis, rows of 100,003 elements, in groups of 1,
// 4 and 32 lanes; reduce_max with NaNs and infinities, exactly, and
// reduce_min and reduce_log_sum_exp at NaN, infinities and rows of -inf;
// the new reductions on "fake-cuda:strict" in fp32, bf16 and f16; the
// integer reductions (int32, int64: sum, prod, sum_square, max, min),
// wrapping around, exactly, on the host and on "fake-cuda:strict".
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/reduce.h"

#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

/// The body's output for `kind` over `axes` of x, in groups of `lanes`.
std::vector<float> hostReduce(cuda::Reduce kind, const Shape &shape,
                              const std::vector<int64_t> &axes,
                              const std::vector<float> &x, int lanes) {
  cuda::ReducePlan p = cuda::planReduce(shape, axes);
  std::vector<float> y(p.rows), scratch(cuda::reduceScratchFloats(kind, p));
  cuda::HostLauncher launch{lanes};
  cuda::reduce(launch, kind, p, x.data(), y.data(), scratch.data());
  return y;
}

TEST(CudaHost, ReductionsOverAnyAxesEqualTheCpuBackendInAnyGroup) {
  struct Case {
    Shape x;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {{1}, {0}},
      {{}, {}},               // a scalar
      {{7}, {}},              // every dim
      {{4, 6, 5, 7}, {0, 2}}, // interleaved
      {{4, 6, 5, 7}, {1, 3}},
      {{4, 6, 5, 7}, {0, 3}},
      {{2, 257, 3}, {0, 2}},
      {{3, 300, 5}, {1}},       // one run, as SumRows
      {{2, 100003}, {1}},       // a long row
      {{100003, 2}, {0}},       // a long column
      {{300, 7}, {0}},          // by columns: 4 whole chunks and a part
      {{5, 1, 64, 33}, {0, 2}}, // by columns, a dim of 1 between
      {{3, 64, 1}, {1, 2}},     // not by columns: a kept dim outside
      {{2, 1, 3, 1, 2, 3, 2, 1, 2, 2}, {0, 2, 5, 8}}, // 10 dims
  };
  unsigned seed = 1300;
  for (cuda::Reduce kind :
       {cuda::Reduce::Sum, cuda::Reduce::Mean, cuda::Reduce::Max,
        cuda::Reduce::Min, cuda::Reduce::SumSquare, cuda::Reduce::LogSum,
        cuda::Reduce::LogSumExp, cuda::Reduce::Prod})
    for (const Case &c : cases)
      for (bool keepdims : {false, true})
        for (int lanes : {1, 4, 32}) {
          SCOPED_TRACE(std::string(cuda::reduceName(kind)) + " of " +
                       std::to_string(numel(c.x)) + " over " +
                       std::to_string(c.axes.size()) + " axes, lanes " +
                       std::to_string(lanes));
          std::vector<float> x = randomFloats(numel(c.x), seed++);
          if (kind == cuda::Reduce::LogSum)
            for (float &v : x)
              v = std::fabs(v) + 0.1f; // a positive sum
          if (kind == cuda::Reduce::LogSumExp)
            for (float &v : x)
              v = v * 30 + 60; // exp overflows fp32 without the shift
          if (kind == cuda::Reduce::Prod)
            for (float &v : x)
              v = 1 + v / 4096; // a product that stays finite
          Shape out;
          for (size_t d = 0; d < c.x.size(); ++d) {
            bool reduced = c.axes.empty() ||
                           std::count(c.axes.begin(), c.axes.end(), int64_t(d));
            if (!reduced || keepdims)
              out.push_back(reduced ? 1 : c.x[d]);
          }
          std::vector<float> y = hostReduce(kind, c.x, c.axes, x, lanes);
          int64_t count = numel(c.x) / std::max<int64_t>(numel(out), 1);
          bool extreme =
              kind == cuda::Reduce::Max || kind == cuda::Reduce::Min;
          double tol = extreme                        ? 0
                       : kind == cuda::Reduce::Prod  ? 1e-6
                       : count > 10000               ? 2e-4
                                                     : 2e-5;
          expectClose(y,
                      cpu(cuda::reduceName(kind), {f32(c.x, x)}, out,
                          {{"axes", c.axes}, {"keepdims", int64_t(keepdims)}}),
                      tol);
        }
}

TEST(CudaHost, ReduceMaxPropagatesNaNAndKeepsInfinities) {
  const Shape shape = {3, 257, 5};
  std::vector<float> x = randomFloats(numel(shape), 77);
  x[0] = NAN;         // row (0, 0) of axis 1: NaN
  x[5 * 9 + 1] = NAN; // row (0, 1)
  x[5 * 9 + 2] = INFINITY;
  for (int64_t j = 0; j < 257; ++j) // row (1, 3): all -inf
    x[(257 + j) * 5 + 3] = -INFINITY;
  for (int lanes : {1, 4, 32}) {
    std::vector<float> y = hostReduce(cuda::Reduce::Max, shape, {1}, x, lanes);
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_TRUE(std::isnan(y[1]));
    EXPECT_EQ(y[2], INFINITY);
    EXPECT_EQ(y[5 + 3], -INFINITY);
    expectClose(
        y,
        cpu("reduce_max", {f32(shape, x)}, {3, 5},
            {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}),
        0);
  }
}

TEST(CudaHost, GlobalAveragePoolIsAMeanOverTheSpatialDims) {
  for (const Shape &shape :
       {Shape{2, 3, 7, 9}, Shape{1, 1, 1}, Shape{2, 5, 3, 4, 5}})
    for (int lanes : {1, 4}) {
      std::vector<float> x = randomFloats(numel(shape), 19);
      std::vector<int64_t> spatial;
      for (size_t d = 2; d < shape.size(); ++d)
        spatial.push_back(static_cast<int64_t>(d));
      Shape out(shape.size(), 1);
      out[0] = shape[0], out[1] = shape[1];
      expectClose(hostReduce(cuda::Reduce::Mean, shape, spatial, x, lanes),
                  cpu("global_average_pool", {f32(shape, x)}, out), 2e-6);
    }
}

TEST(CudaHost, ReducePlansCollapseAndRefuse) {
  // Interleaved axes of [4, 6, 5, 7] over {0, 2}: kept [6, 7], reduced [4, 5].
  cuda::ReducePlan p = cuda::planReduce({4, 6, 5, 7}, {0, 2});
  EXPECT_EQ(p.rows, 42);
  EXPECT_EQ(p.count, 20);
  EXPECT_EQ(p.kept.rank, 2);
  EXPECT_EQ(p.reduced.strides[0][0], 210);
  // Neighbouring reduced axes collapse into one.
  EXPECT_EQ(cuda::planReduce({4, 6, 5, 7}, {2, 3}).reduced.rank, 1);
  EXPECT_THROW(cuda::planReduce({4, 6}, {2}), std::invalid_argument);
}

TEST(CudaHost, ReduceMinAndLogSumExpKeepTheCpusSpecialValues) {
  // Rows of 5 (axis 1): plain, a NaN, +inf, all -inf.
  const Shape shape = {4, 5};
  std::vector<float> x = randomFloats(20, 81);
  x[5 + 2] = NAN;
  x[10 + 4] = INFINITY;
  for (int j = 0; j < 5; ++j)
    x[15 + j] = -INFINITY;
  for (cuda::Reduce kind : {cuda::Reduce::Min, cuda::Reduce::LogSumExp})
    for (int lanes : {1, 4}) {
      SCOPED_TRACE(std::string(cuda::reduceName(kind)) + " lanes " +
                   std::to_string(lanes));
      std::vector<float> y = hostReduce(kind, shape, {1}, x, lanes);
      std::vector<float> want =
          cpu(cuda::reduceName(kind), {f32(shape, x)}, {4},
              {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
      expectClose(y, want, 2e-6);
      EXPECT_TRUE(std::isnan(y[1]));
    }
}

TEST(CudaHost, NewReductionsRunOnTheStrictFakeDeviceInEveryFloatType) {
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16})
    for (const char *op : {"reduce_min", "reduce_sum_square", "reduce_log_sum",
                           "reduce_log_sum_exp", "reduce_prod"}) {
      SCOPED_TRACE(std::string(op) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      std::vector<float> v = randomFloats(3 * 4 * 5, 91);
      for (float &e : v)
        e = std::fabs(e) + 0.25f;
      Value x = f32({3, 4, 5}, v);
      if (dtype != plan::DType::F32) {
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i)
          h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
        x = valueOf(dtype, {3, 4, 5}, h);
      }
      AttrList attrs = {{"axes", std::vector<int64_t>{0, 2}},
                        {"keepdims", int64_t(1)}};
      std::vector<std::pair<plan::DType, Shape>> outs = {{dtype, {1, 4, 1}}};
      Result cpu = runOp(op, {x}, outs, attrs);
      Result fake = runOp(op, {x}, outs, attrs, 2, "fake-cuda:strict");
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      if (dtype == plan::DType::F32) {
        expectClose(fake.outputs[0].as<float>(), cpu.outputs[0].as<float>(), 2e-6);
        continue;
      }
      std::vector<uint16_t> a = fake.outputs[0].as<uint16_t>(),
                            b = cpu.outputs[0].as<uint16_t>();
      for (size_t i = 0; i < a.size(); ++i) // within one rounding
        EXPECT_LE(std::abs(int(a[i]) - int(b[i])), 1) << "at " << i;
    }
}

/// `n` integers of T spread over T's whole range (sums and products wrap).
template <typename T> std::vector<T> randomIntegers(int64_t n, uint64_t seed) {
  std::vector<T> v(n);
  for (T &e : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<T>(seed >> (64 - 8 * sizeof(T)));
  }
  return v;
}

template <typename T>
void expectIntegerReductionsLikeTheCpu(plan::DType dtype) {
  struct Case {
    Shape x;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {{7}, {}},              // every dim
      {{4, 6, 5, 7}, {0, 2}}, // interleaved
      {{3, 300, 5}, {1}},     // one run
      {{2, 100003}, {1}},     // a long row
      {{100003}, {0}},        // the CPU's parallel pieces
      {{3, 0, 2}, {1}},       // empty: the kind's identity
  };
  uint64_t seed = 4100;
  for (cuda::Reduce kind :
       {cuda::Reduce::Sum, cuda::Reduce::Prod, cuda::Reduce::SumSquare,
        cuda::Reduce::Max, cuda::Reduce::Min})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(cuda::reduceName(kind)) + " of " +
                   std::to_string(numel(c.x)) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      std::vector<T> x = randomIntegers<T>(numel(c.x), seed++);
      Shape out;
      for (size_t d = 0; d < c.x.size(); ++d)
        if (!c.axes.empty() &&
            !std::count(c.axes.begin(), c.axes.end(), int64_t(d)))
          out.push_back(c.x[d]);
      cuda::ReducePlan p = cuda::planReduce(c.x, c.axes);
      std::vector<T> y(p.rows);
      cuda::hostForEach(
          cuda::IntegerReduceBody{p, x.data(), y.data(),
                                  static_cast<fsdprt_dtype_t>(dtype), kind},
          p.rows);
      Value in = valueOf(dtype, c.x, x);
      AttrList attrs = {{"axes", c.axes}, {"keepdims", int64_t(0)}};
      Result r = runOp(cuda::reduceName(kind), {in}, {{dtype, out}}, attrs);
      ASSERT_EQ(r.error, "");
      EXPECT_EQ(y, r.outputs[0].as<T>());
      // The backend picks the body for integers.
      Result fake = runOp(cuda::reduceName(kind), {in}, {{dtype, out}}, attrs,
                          2, "fake-cuda:strict");
      ASSERT_EQ(fake.error, "");
      EXPECT_EQ(fake.outputs[0].bytes, r.outputs[0].bytes);
    }
}

TEST(CudaHost, IntegerReductionsEqualTheCpuBackendExactly) {
  expectIntegerReductionsLikeTheCpu<int64_t>(plan::DType::I64);
  expectIntegerReductionsLikeTheCpu<int32_t>(plan::DType::I32);
}

} // namespace
