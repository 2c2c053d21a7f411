//===- HostTest.cpp - What embedding hosts rely on ------------------------===//
//
// Session options (versioned struct, memory budget), and the threading
// contract fsdprt.h documents: sessions in different threads run at once
// with the results they give alone, and another thread may read a running
// session's timings and memory. The leak test runs these under valgrind.
//
//===----------------------------------------------------------------------===//

#include "SessionHarness.h"

#include <atomic>
#include <thread>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

const auto F32 = plan::DType::F32;

/// y = softmax(x @ w): enough work for runs to overlap across threads.
std::vector<uint8_t> matmulSoftmaxPlan() {
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {64, 96}), w = b.input("w", F32, {96, 80});
  uint32_t h = b.buffer(F32, {64, 80});
  b.kernel("matmul", {x, w}, {h});
  b.kernel("softmax", {h}, {b.output("y", F32, {64, 80})},
           {{"axis", int64_t(1)}});
  return b.finish();
}

/// Loads `bytes` as a plan; fails the test on error.
fsdprt_plan_t *loadPlan(const std::vector<uint8_t> &bytes) {
  fsdprt_plan_t *p = nullptr;
  EXPECT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  return p;
}

/// Runs `s` on x, w and returns y.
std::vector<float> runOnce(fsdprt_session_t *s, const std::vector<float> &x,
                           const std::vector<float> &w) {
  EXPECT_EQ(take(fsdprt_session_set_input(s, "x", x.data(), x.size() * 4)), "");
  EXPECT_EQ(take(fsdprt_session_set_input(s, "w", w.data(), w.size() * 4)), "");
  EXPECT_EQ(take(fsdprt_session_run(s)), "");
  std::vector<float> y(64 * 80);
  EXPECT_EQ(take(fsdprt_session_get_output(s, "y", y.data(), y.size() * 4)),
            "");
  return y;
}

TEST(Host, OptionsDefaultToWhatSessionCreateDoes) {
  auto bytes = matmulSoftmaxPlan();
  fsdprt_plan_t *p = loadPlan(bytes);
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  EXPECT_EQ(options.struct_size, sizeof(fsdprt_session_options_t));
  EXPECT_EQ(options.model_dir, nullptr);
  EXPECT_EQ(options.num_threads, 0);
  EXPECT_EQ(options.memory_budget_bytes, 0u);
  EXPECT_EQ(options.mpi, nullptr);
  options.num_threads = 1;

  auto x = randomFloats(64 * 96, 1), w = randomFloats(96 * 80, 2);
  fsdprt_session_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(take(fsdprt_session_create_with_options(p, &options, &a)), "");
  ASSERT_EQ(take(fsdprt_session_create(p, nullptr, 1, &b)), "");
  EXPECT_EQ(runOnce(a, x, w), runOnce(b, x, w));
  fsdprt_session_destroy(a);
  fsdprt_session_destroy(b);
  // NULL options: the defaults.
  ASSERT_EQ(take(fsdprt_session_create_with_options(p, nullptr, &a)), "");
  fsdprt_session_destroy(a);
  a = nullptr;

  // A struct from no version this library knows.
  options.struct_size = 3;
  fsdprt_status_t status = fsdprt_session_create_with_options(p, &options, &a);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_INVALID_ARGUMENT);
  EXPECT_NE(take(status).find("struct_size is 3"), std::string::npos);
  options.struct_size = sizeof(fsdprt_session_options_t) + 8;
  EXPECT_NE(take(fsdprt_session_create_with_options(p, &options, &a)), "");
  EXPECT_EQ(a, nullptr);
  options.struct_size = sizeof(fsdprt_session_options_t);
  options.num_threads = -2;
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &options, &a)),
            "fsdprt_session_create_with_options: num_threads must be 0 to "
            "1024, not -2");
  fsdprt_plan_destroy(p);
}

TEST(Host, AMemoryBudgetBelowThePlansPeakIsRefusedBeforeAllocating) {
  auto bytes = matmulSoftmaxPlan();
  fsdprt_plan_t *p = loadPlan(bytes);
  uint64_t peak = fsdprt_plan_peak_bytes(p);
  ASSERT_GT(peak, 0u);
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  fsdprt_session_t *s = nullptr;

  options.memory_budget_bytes = peak - 1;
  fsdprt_status_t status = fsdprt_session_create_with_options(p, &options, &s);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_RESOURCE_EXHAUSTED);
  std::string message = take(status);
  EXPECT_EQ(s, nullptr);
  uint64_t activations = (64 * 96 + 96 * 80 + 64 * 80 * 2) * 4;
  EXPECT_EQ(activations, peak);
  EXPECT_EQ(message, "the plan needs " + std::to_string(peak) +
                         " bytes per rank (activations " +
                         std::to_string(activations) +
                         ", weights and state 0, constants 0), more than the "
                         "memory budget of " +
                         std::to_string(peak - 1) + " bytes");

  // Exactly the peak fits, and the session holds what the plan said.
  options.memory_budget_bytes = peak;
  ASSERT_EQ(take(fsdprt_session_create_with_options(p, &options, &s)), "");
  uint64_t held[3];
  ASSERT_EQ(take(fsdprt_session_memory(s, &held[0], &held[1], &held[2])), "");
  EXPECT_EQ(held[0] + held[1] + held[2], peak);
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
}

TEST(Host, SessionsInSeveralThreadsGiveTheirSequentialResults) {
  auto bytes = matmulSoftmaxPlan();
  fsdprt_plan_t *p = loadPlan(bytes); // one plan shared by every session
  constexpr int kThreads = 3, kRuns = 8;
  std::vector<std::vector<float>> xs, expected;
  auto w = randomFloats(96 * 80, 100);
  for (int t = 0; t < kThreads; ++t) {
    xs.push_back(randomFloats(64 * 96, t + 1));
    fsdprt_session_t *s = nullptr;
    ASSERT_EQ(take(fsdprt_session_create(p, nullptr, 2, &s)), "");
    expected.push_back(runOnce(s, xs[t], w));
    fsdprt_session_destroy(s);
  }

  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      fsdprt_session_t *s = nullptr;
      if (fsdprt_status_t status = fsdprt_session_create(p, nullptr, 2, &s)) {
        fsdprt_status_free(status);
        ++mismatches;
        return;
      }
      for (int run = 0; run < kRuns; ++run)
        if (runOnce(s, xs[t], w) != expected[t])
          ++mismatches;
      fsdprt_session_destroy(s);
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(mismatches.load(), 0);
  fsdprt_plan_destroy(p);
}

TEST(Host, AnotherThreadReadsTimingsAndMemoryWhileASessionRuns) {
  auto bytes = matmulSoftmaxPlan();
  fsdprt_plan_t *p = loadPlan(bytes);
  fsdprt_session_t *s = nullptr;
  ASSERT_EQ(take(fsdprt_session_create(p, nullptr, 1, &s)), "");
  auto x = randomFloats(64 * 96, 1), w = randomFloats(96 * 80, 2);
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, bad{0};
  std::thread reader([&] {
    while (!done.load()) {
      double compute = -1, communication = -1;
      uint64_t activations = 0;
      if (fsdprt_status_t st =
              fsdprt_session_timings(s, &compute, &communication)) {
        fsdprt_status_free(st);
        ++bad;
      }
      if (fsdprt_status_t st =
              fsdprt_session_memory(s, &activations, nullptr, nullptr)) {
        fsdprt_status_free(st);
        ++bad;
      }
      if (compute < 0 || communication != 0 || activations == 0)
        ++bad;
      ++reads;
    }
  });
  // Runs until the reader has read many times during them.
  for (int run = 0; run < 20 || reads.load() < 100; ++run)
    runOnce(s, x, w);
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  double compute = 0;
  ASSERT_EQ(take(fsdprt_session_timings(s, &compute, nullptr)), "");
  EXPECT_GT(compute, 0);
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
}

} // namespace

namespace {

TEST(Host, APlanStatingAnotherPeakThanItsArenasIsRefused) {
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {4});
  b.kernel("relu", {x}, {b.output("y", F32, {4})});
  b.statedPeak(512); // the arenas hold 128
  auto bytes = b.finish();
  fsdprt_plan_t *p = nullptr;
  fsdprt_status_t status =
      fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_INVALID_ARGUMENT);
  EXPECT_NE(take(status).find("the plan states a peak of 512 bytes per rank, "
                              "but its arenas hold 128"),
            std::string::npos);
  EXPECT_EQ(p, nullptr);
  b.statedPeak(128);
  bytes = b.finish();
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  EXPECT_EQ(fsdprt_plan_peak_bytes(p), 128u);
  fsdprt_plan_destroy(p);
}

} // namespace
