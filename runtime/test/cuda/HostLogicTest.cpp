//===- HostLogicTest.cpp - Comparison, logic and where bodies on the host -===//
//
// cuda-host: kernels/logic.h's bodies against the CPU backend's equal,
// less, greater (F32, I64, Bool), and, or, not and where (every element
// size), bit for bit, over broadcasts of up to 10 dims.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/logic.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

struct Case {
  Shape a, b, out;
};

const std::vector<Case> kCases = {
    {{1}, {1}, {1}},
    {{257}, {257}, {257}},
    {{100003}, {}, {100003}},
    {{64, 1025}, {1025}, {64, 1025}},
    {{2, 1, 4}, {3, 1}, {2, 3, 4}},
    {{1, 1, 1, 1, 1, 1, 1, 1, 1, 7},
     {2, 1, 3, 1, 2, 1, 2, 1, 2, 1},
     {2, 1, 3, 1, 2, 1, 2, 1, 2, 7}}, // 10 dims, 6 after collapsing
};

/// n values of T drawn from {-2, ..., 2} (Bool: {0, 1}), so that equal
/// operands are common.
template <typename T> std::vector<T> smallValues(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (T &x : v)
    x = std::is_same_v<T, uint8_t> ? static_cast<T>(gen() % 2)
                                   : static_cast<T>(int(gen() % 5) - 2);
  return v;
}

template <cuda::Logic Op, typename T> void checkLogic(plan::DType dtype) {
  SCOPED_TRACE(std::string(cuda::logicName(Op)) + " of " +
               fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  unsigned seed = 10 * static_cast<unsigned>(Op) + static_cast<unsigned>(dtype);
  for (const Case &c : kCases) {
    std::vector<T> a = smallValues<T>(numel(c.a), seed++),
                   b = smallValues<T>(numel(c.b), seed++);
    if constexpr (std::is_same_v<T, float>)
      a[0] = NAN; // unequal to everything, ordered with nothing
    std::vector<uint8_t> y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.a, c.b});
    cuda::hostForEach(
        cuda::LogicBody<Op, T>{plan, a.data(), b.data(), y.data()},
        numel(c.out));
    Result r = runOp(cuda::logicName(Op),
                     {valueOf(dtype, c.a, a), valueOf(dtype, c.b, b)},
                     {{plan::DType::Bool, c.out}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<uint8_t>());
    if (numel(c.b) > 1000) { // both answers occur
      EXPECT_GT(std::count(y.begin(), y.end(), 1), 0);
      EXPECT_GT(std::count(y.begin(), y.end(), 0), 0);
    }
  }
}

TEST(CudaHost, ComparisonsAndLogicEqualTheCpuBackendBitForBit) {
  checkLogic<cuda::Logic::Equal, float>(plan::DType::F32);
  checkLogic<cuda::Logic::Equal, int64_t>(plan::DType::I64);
  checkLogic<cuda::Logic::Equal, uint8_t>(plan::DType::Bool);
  checkLogic<cuda::Logic::Less, float>(plan::DType::F32);
  checkLogic<cuda::Logic::Less, int64_t>(plan::DType::I64);
  checkLogic<cuda::Logic::Less, uint8_t>(plan::DType::Bool);
  checkLogic<cuda::Logic::Greater, float>(plan::DType::F32);
  checkLogic<cuda::Logic::Greater, int64_t>(plan::DType::I64);
  checkLogic<cuda::Logic::Greater, uint8_t>(plan::DType::Bool);
  checkLogic<cuda::Logic::And, uint8_t>(plan::DType::Bool);
  checkLogic<cuda::Logic::Or, uint8_t>(plan::DType::Bool);
}

TEST(CudaHost, NotEqualsTheCpuBackend) {
  for (int64_t n : kSizes) {
    std::vector<uint8_t> x = smallValues<uint8_t>(n, 70 + n), y(n);
    cuda::hostForEach(cuda::NotBody{x.data(), y.data()}, n);
    Result r = runOp("not", {boolean({n}, x)}, {{plan::DType::Bool, {n}}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<uint8_t>()) << "n " << n;
  }
}

/// where over a broadcast of (cond, a, b) for elements of type T.
template <typename T> void checkWhere(plan::DType dtype) {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
  struct WhereCase {
    Shape cond, a, b, out;
  };
  const std::vector<WhereCase> cases = {
      {{1}, {1}, {1}, {1}},
      {{257}, {257}, {}, {257}},
      {{100003}, {100003}, {100003}, {100003}},
      {{2, 1, 4}, {3, 1}, {4}, {2, 3, 4}},
      {{}, {7, 5}, {5}, {7, 5}},
      {{2, 1, 3, 1, 2, 1, 2, 1, 2, 1},
       {1, 1, 1, 1, 1, 1, 1, 1, 1, 7},
       {7},
       {2, 1, 3, 1, 2, 1, 2, 1, 2, 7}},
  };
  unsigned seed = 200 + static_cast<unsigned>(dtype);
  for (const WhereCase &c : cases) {
    std::mt19937 gen(seed++);
    auto bits = [&](int64_t n) { // random bytes, as T
      std::vector<T> v(n);
      for (T &x : v)
        x = static_cast<T>(gen());
      return v;
    };
    std::vector<uint8_t> cond = smallValues<uint8_t>(numel(c.cond), seed++);
    std::vector<T> a = bits(numel(c.a)), b = bits(numel(c.b)), y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.cond, c.a, c.b});
    cuda::hostForEach(
        cuda::WhereBody<T>{plan, cond.data(), a.data(), b.data(), y.data()},
        numel(c.out));
    Result r = runOp(
        "where",
        {boolean(c.cond, cond), valueOf(dtype, c.a, a), valueOf(dtype, c.b, b)},
        {{dtype, c.out}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(y, r.outputs[0].as<T>());
  }
}

TEST(CudaHost, WhereEqualsTheCpuBackendForEveryElementSize) {
  checkWhere<uint8_t>(plan::DType::U8);
  checkWhere<uint16_t>(plan::DType::BF16);
  checkWhere<uint32_t>(plan::DType::F32);
  checkWhere<uint64_t>(plan::DType::I64);
}

} // namespace
