//===- HostHarness.h - What the cuda-host tests share -----------*- C++ -*-===//
//
// The CPU backend as the oracle of the cuda-host tests: one kernel run
// through the C API, and the comparison of a body's output with it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_TEST_CUDA_HOSTHARNESS_H
#define FSDPRT_TEST_CUDA_HOSTHARNESS_H

#include "../SessionHarness.h"

namespace fsdprt::test {

inline const auto F32 = plan::DType::F32;

/// The CPU backend's output 0 of `op`.
inline std::vector<float> cpu(const std::string &op,
                              const std::vector<Value> &ins, const Shape &out,
                              const AttrList &attrs = {}) {
  Result r = runOp(op, ins, {{F32, out}}, attrs);
  EXPECT_EQ(r.error, "");
  return r.error.empty() ? r.outputs[0].as<float>() : std::vector<float>();
}

inline void expectClose(const std::vector<float> &got,
                        const std::vector<float> &want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    if (got[i] == want[i]) // infinities too
      continue;
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
  }
}

inline const std::vector<int64_t> kSizes = {1, 7, 256, 257, 1000, 100003};

} // namespace fsdprt::test

#endif // FSDPRT_TEST_CUDA_HOSTHARNESS_H
