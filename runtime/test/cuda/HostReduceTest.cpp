//===- HostReduceTest.cpp - Reductions over any axes on the host ----------===//
//
// cuda-host: kernels/reduce.h's body against the CPU backend's
// reduce_sum, reduce_mean and reduce_max (and global_average_pool) over
// interleaved axes, every axis, rows of 100,003 elements, in groups of 1,
// 4 and 32 lanes; reduce_max with NaNs and infinities, exactly.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/reduce.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

/// The body's output for `kind` over `axes` of x, in groups of `lanes`.
std::vector<float> hostReduce(cuda::Reduce kind, const Shape &shape,
                              const std::vector<int64_t> &axes,
                              const std::vector<float> &x, int lanes) {
  cuda::ReducePlan p = cuda::planReduce(shape, axes);
  std::vector<float> y(p.rows);
  switch (kind) {
  case cuda::Reduce::Sum:
    cuda::hostForEachRow(
        cuda::ReduceBody<cuda::Reduce::Sum>{p, x.data(), y.data()}, p.rows,
        lanes);
    break;
  case cuda::Reduce::Mean:
    cuda::hostForEachRow(
        cuda::ReduceBody<cuda::Reduce::Mean>{p, x.data(), y.data()}, p.rows,
        lanes);
    break;
  case cuda::Reduce::Max:
    cuda::hostForEachRow(
        cuda::ReduceBody<cuda::Reduce::Max>{p, x.data(), y.data()}, p.rows,
        lanes);
    break;
  }
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
      {{3, 300, 5}, {1}},                             // one run, as SumRows
      {{2, 100003}, {1}},                             // a long row
      {{100003, 2}, {0}},                             // a long column
      {{2, 1, 3, 1, 2, 3, 2, 1, 2, 2}, {0, 2, 5, 8}}, // 10 dims
  };
  unsigned seed = 1300;
  for (cuda::Reduce kind :
       {cuda::Reduce::Sum, cuda::Reduce::Mean, cuda::Reduce::Max})
    for (const Case &c : cases)
      for (bool keepdims : {false, true})
        for (int lanes : {1, 4, 32}) {
          SCOPED_TRACE(std::string(cuda::reduceName(kind)) + " of " +
                       std::to_string(numel(c.x)) + " over " +
                       std::to_string(c.axes.size()) + " axes, lanes " +
                       std::to_string(lanes));
          std::vector<float> x = randomFloats(numel(c.x), seed++);
          Shape out;
          for (size_t d = 0; d < c.x.size(); ++d) {
            bool reduced = c.axes.empty() ||
                           std::count(c.axes.begin(), c.axes.end(), int64_t(d));
            if (!reduced || keepdims)
              out.push_back(reduced ? 1 : c.x[d]);
          }
          std::vector<float> y = hostReduce(kind, c.x, c.axes, x, lanes);
          int64_t count = numel(c.x) / std::max<int64_t>(numel(out), 1);
          double tol = kind == cuda::Reduce::Max ? 0
                       : count > 10000           ? 2e-4
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

} // namespace
