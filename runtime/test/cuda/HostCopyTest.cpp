//===- HostCopyTest.cpp - concat, split, copy and pack on the host --------===//
//
// cuda-host: kernels/copy.h's sequences, run by the host launcher, against
// the CPU backend's concat, split, copy and pack, bit for bit, for every
// element size (1, 2, 4, 8 bytes), along every axis, with pieces of 1
// element and rows of 100,003.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/copy.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

template <typename T> std::vector<T> randomBits(int64_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::vector<T> v(n);
  for (T &x : v)
    x = static_cast<T>(gen());
  return v;
}

struct PiecesCase {
  Shape whole;
  int64_t axis;
  std::vector<int64_t> sizes;
};

const std::vector<PiecesCase> kPieces = {
    {{1}, 0, {1}},
    {{3, 257, 5}, 1, {100, 1, 156}},
    {{7, 4}, 0, {1, 6}},
    {{2, 3, 7}, 2, {3, 4}},
    {{2, 100003}, 1, {50000, 50003}},
    {{4, 8, 2}, 1, {1, 1, 1, 1, 1, 1, 1, 1}},
};

Shape pieceShape(const PiecesCase &c, size_t k) {
  Shape s = c.whole;
  s[c.axis] = c.sizes[k];
  return s;
}

template <typename T> void checkConcatAndSplit(plan::DType dtype) {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  unsigned seed = 40 + static_cast<unsigned>(dtype);
  cuda::HostLauncher launch;
  for (const PiecesCase &c : kPieces) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + " of " +
                 std::to_string(c.whole.size()));
    std::vector<cuda::Piece> plan = cuda::planPieces(c.whole, c.axis, c.sizes);
    // concat
    std::vector<std::vector<T>> pieces;
    std::vector<const T *> in;
    std::vector<Value> values;
    for (size_t k = 0; k < c.sizes.size(); ++k) {
      pieces.push_back(randomBits<T>(numel(pieceShape(c, k)), seed++));
      in.push_back(pieces.back().data());
      values.push_back(valueOf(dtype, pieceShape(c, k), pieces.back()));
    }
    std::vector<T> whole(numel(c.whole));
    cuda::concat(launch, in.data(), whole.data(), plan);
    Result r = runOp("concat", values, {{dtype, c.whole}}, {{"axis", c.axis}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(whole, r.outputs[0].as<T>());
    // split of another whole
    whole = randomBits<T>(numel(c.whole), seed++);
    std::vector<std::pair<plan::DType, Shape>> outs;
    std::vector<T *> out;
    for (size_t k = 0; k < c.sizes.size(); ++k) {
      pieces[k].assign(pieces[k].size(), T(0));
      out.push_back(pieces[k].data());
      outs.push_back({dtype, pieceShape(c, k)});
    }
    cuda::split(launch, whole.data(), out.data(), plan);
    r = runOp("split", {valueOf(dtype, c.whole, whole)}, outs,
              {{"axis", c.axis}});
    ASSERT_EQ(r.error, "");
    for (size_t k = 0; k < c.sizes.size(); ++k)
      EXPECT_EQ(pieces[k], r.outputs[k].as<T>()) << "piece " << k;
  }
}

TEST(CudaHost, ConcatAndSplitEqualTheCpuBackendForEveryElementSize) {
  checkConcatAndSplit<uint8_t>(plan::DType::U8);
  checkConcatAndSplit<uint16_t>(plan::DType::BF16);
  checkConcatAndSplit<uint32_t>(plan::DType::F32);
  checkConcatAndSplit<uint64_t>(plan::DType::I64);
}

TEST(CudaHost, PiecePlansRefuseWhatDoesNotAddUp) {
  std::vector<cuda::Piece> p = cuda::planPieces({3, 10, 4}, 1, {3, 7});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].rows, 3);
  EXPECT_EQ(p[1].width, 28);
  EXPECT_EQ(p[1].pitch, 40);
  EXPECT_EQ(p[1].offset, 12);
  EXPECT_THROW(cuda::planPieces({3, 10}, 1, {3, 6}), std::invalid_argument);
  EXPECT_THROW(cuda::planPieces({3, 10}, 2, {10}), std::invalid_argument);
}

template <typename T> void checkCopy(plan::DType dtype) {
  for (int64_t n : kSizes) {
    std::vector<T> x = randomBits<T>(n, 60 + n), y(n);
    cuda::hostForEach(cuda::CopyRows<T>{x.data(), y.data(), n, 0, 0}, n);
    Result r = runOp("copy", {valueOf(dtype, {n}, x)}, {{dtype, {n}}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<T>()) << "n " << n;
  }
}

TEST(CudaHost, CopyEqualsTheCpuBackendForEveryElementSize) {
  checkCopy<uint8_t>(plan::DType::Bool);
  checkCopy<uint16_t>(plan::DType::F16);
  checkCopy<uint32_t>(plan::DType::I32);
  checkCopy<uint64_t>(plan::DType::F64);
}

template <typename T> void checkPack(plan::DType dtype) {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  struct Case {
    std::vector<Shape> members;
    std::vector<int64_t> offsets;
    int64_t total;
  };
  const std::vector<Case> cases = {
      {{{1}}, {0}, 1},
      {{{3, 5}, {7}, {2, 2}}, {0, 16, 32}, 40}, // gaps and padding
      {{{257}, {1}}, {3, 260}, 261},            // a leading gap, no padding
      {{{100003}, {4, 4}}, {0, 100003}, 100032},
  };
  unsigned seed = 80;
  for (const Case &c : cases) {
    std::vector<std::vector<T>> members;
    std::vector<const T *> in;
    std::vector<Value> values;
    std::vector<int64_t> numels;
    for (const Shape &s : c.members) {
      members.push_back(randomBits<T>(numel(s), seed++));
      in.push_back(members.back().data());
      values.push_back(valueOf(dtype, s, members.back()));
      numels.push_back(numel(s));
    }
    std::vector<T> flat = randomBits<T>(c.total, seed++); // stale contents
    cuda::HostLauncher launch;
    cuda::pack(launch, in.data(), flat.data(),
               cuda::planPack(c.offsets, numels, c.total));
    Result r =
        runOp("pack", values, {{dtype, {c.total}}}, {{"offsets", c.offsets}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(flat, r.outputs[0].as<T>()) << c.total;
  }
  EXPECT_THROW(cuda::planPack({0, 2}, {3, 1}, 8), std::invalid_argument);
  EXPECT_THROW(cuda::planPack({6}, {3}, 8), std::invalid_argument);
}

TEST(CudaHost, PackEqualsTheCpuBackendForEveryElementSize) {
  checkPack<uint8_t>(plan::DType::U8);
  checkPack<uint16_t>(plan::DType::BF16);
  checkPack<uint32_t>(plan::DType::F32);
  checkPack<uint64_t>(plan::DType::I64);
}

} // namespace
