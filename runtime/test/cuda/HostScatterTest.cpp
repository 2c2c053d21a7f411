//===- HostScatterTest.cpp - gather's gradient on the host ----------------===//
//
// cuda-host: kernels/scatter.h's sequence, run by the host launcher,
// against the CPU backend's gather_grad: bit for bit (both sum each row's
// slices in increasing k from 0), for I64 and I32 indices with repeats
// and negative ones; the merge sort against std::stable_sort; a bad index
// recorded in the ErrorSlot.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/scatter.h"

#include <algorithm>
#include <numeric>

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

/// The host's gather_grad of g for `indices` (as I) into y [outer, dim,
/// inner]; returns the scratch (keys, order, ...).
template <typename I>
std::vector<int64_t> hostGatherGrad(const std::vector<float> &g,
                                    const std::vector<I> &indices, float *y,
                                    int64_t outer, int64_t dim, int64_t inner,
                                    cuda::ErrorSlot *error) {
  int64_t count = static_cast<int64_t>(indices.size());
  std::vector<int64_t> scratch(cuda::gatherGradScratch(count, dim));
  cuda::HostLauncher launch;
  cuda::gatherGrad(launch,
                   cuda::GatherGradArgs<I>{g.data(), indices.data(), y, outer,
                                           dim, count, inner, error},
                   scratch.data());
  return scratch;
}

TEST(CudaHost, GatherGradEqualsTheCpuBackendBitForBit) {
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{64, 32}, {4, 16}, 0}, // an embedding: repeats
      {{5, 7}, {1000}, 0},    // few rows, many repeats
      {{3, 257, 5}, {7}, 1},  // an inner axis
      {{1}, {1}, 0},          // size 1: no merge pass
      {{2, 9}, {3, 257}, 1},  // runs that are not powers of two
      {{50, 3}, {100003}, 0}, // a long sort
  };
  unsigned seed = 1500;
  for (const Case &c : cases)
    for (bool i32 : {false, true}) {
      SCOPED_TRACE(std::to_string(numel(c.indices)) + " indices into " +
                   std::to_string(c.data[c.axis]) +
                   (i32 ? ", int32" : ", int64"));
      int64_t dim = c.data[c.axis], outer = 1, inner = 1;
      for (int64_t d = 0; d < static_cast<int64_t>(c.data.size()); ++d)
        (d < c.axis ? outer : inner) *= d == c.axis ? 1 : c.data[d];
      std::mt19937 gen(seed++);
      std::vector<int64_t> idx(numel(c.indices));
      for (int64_t &v : idx) // negative ones count from the end
        v = static_cast<int64_t>(gen() % (2 * dim)) - dim;
      std::vector<int32_t> idx32(idx.begin(), idx.end());
      Shape gShape(c.data.begin(), c.data.begin() + c.axis);
      gShape.insert(gShape.end(), c.indices.begin(), c.indices.end());
      gShape.insert(gShape.end(), c.data.begin() + c.axis + 1, c.data.end());
      std::vector<float> g = randomFloats(numel(gShape), seed++);
      std::vector<float> y(numel(c.data), NAN);
      cuda::ErrorSlot error{0, 0};
      std::vector<int64_t> scratch =
          i32 ? hostGatherGrad(g, idx32, y.data(), outer, dim, inner, &error)
              : hostGatherGrad(g, idx, y.data(), outer, dim, inner, &error);
      EXPECT_EQ(error.code, 0);
      Value indices =
          i32 ? fsdprt::test::i32(c.indices, idx32) : i64(c.indices, idx);
      Result r = runOp("gather_grad", {f32(gShape, g), indices},
                       {{F32, c.data}}, {{"axis", c.axis}});
      ASSERT_EQ(r.error, "");
      std::vector<float> want = r.outputs[0].as<float>();
      ASSERT_EQ(y.size(), want.size());
      EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)),
                0);
      // The sorted order is std::stable_sort's of the positions by row.
      int64_t count = numel(c.indices);
      std::vector<int64_t> expected(count);
      std::iota(expected.begin(), expected.end(), 0);
      auto row = [&](int64_t k) { return idx[k] < 0 ? idx[k] + dim : idx[k]; };
      std::stable_sort(expected.begin(), expected.end(),
                       [&](int64_t p, int64_t q) { return row(p) < row(q); });
      int passes = 0;
      for (int64_t width = 1; width < count; width *= 2)
        ++passes;
      const int64_t *order = scratch.data() + (passes % 2 ? 2 : 1) * count;
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), order));
    }
}

TEST(CudaHost, GatherGradRecordsABadIndex) {
  std::vector<float> g = randomFloats(3 * 4, 5), y(8 * 4);
  std::vector<int64_t> idx = {1, -9, 2};
  cuda::ErrorSlot error{0, 0};
  hostGatherGrad(g, idx, y.data(), 1, 8, 4, &error);
  EXPECT_EQ(error.code, cuda::kBadIndex);
  EXPECT_EQ(error.detail, -9);
  // The good indices' rows still hold their slices; the bad one is dropped.
  EXPECT_EQ(y[1 * 4], g[0]);
  EXPECT_EQ(y[2 * 4 + 3], g[2 * 4 + 3]);
  Result r = runOp("gather_grad", {f32({3, 4}, g), i64({3}, idx)},
                   {{F32, {8, 4}}}, {{"axis", int64_t(0)}});
  EXPECT_NE(r.error.find("index -9 is out of range for a dimension of size 8"),
            std::string::npos)
      << r.error;
}

} // namespace
