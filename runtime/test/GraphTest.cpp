//===- GraphTest.cpp - A replayed graph must issue the direct step's work -===//
//
// The fake device checks that a CUDA graph's replay issues the work a
// direct step issued, in the same order (backend.cpp, CudaStream::replay).
// Through the runtime's internal interface (the static library exposes
// it): two kernels run directly, then captured in the other order, must
// fail the replay naming both; captured in the same order, the replay
// runs and computes what the direct step did.
//
//===----------------------------------------------------------------------===//

#include "../src/backend.h"
#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace fsdprt;
using fsdprt::test::PlanBuilder;

TEST(Graphs, AReplayIssuingOtherWorkThanTheDirectStepFails) {
  PlanBuilder b;
  uint32_t x = b.input("x", plan::DType::F32, {4});
  uint32_t y = b.output("y", plan::DType::F32, {4});
  uint32_t z = b.output("z", plan::DType::F32, {4});
  b.kernel("relu", {x}, {y});
  b.kernel("neg", {y}, {z});
  std::vector<uint8_t> bytes = b.finish();
  const plan::Plan *p = plan::GetPlan(bytes.data());

  std::unique_ptr<Backend> backend = createFakeCudaBackend(/*strict=*/true);
  std::vector<Tensor> t(3);
  for (Tensor &each : t) {
    each.shape = {4};
    each.numel = 4;
    each.data = backend->allocate(each.bytes(), 256);
  }
  Workspace workspace;
  std::vector<KernelFn> kernels;
  const std::vector<std::pair<int, int>> io = {{0, 1}, {1, 2}};
  for (size_t i = 0; i < 2; ++i) {
    KernelArgs args{{t[io[i].first]}, {t[io[i].second]}, Attrs(*p->kernels()->Get(i)),
                    1, &workspace, "kernel " + std::to_string(i)};
    kernels.push_back(backend->prepare(p->kernels()->Get(i)->op()->str(), args));
  }
  std::unique_ptr<Stream> stream = backend->createStream();
  ASSERT_TRUE(stream->canCapture());
  const float in[4] = {-1, 2, -3, 4};
  backend->upload(t[0].data, in, sizeof in);
  auto step = [&](const std::vector<size_t> &order) {
    for (size_t i : order)
      ASSERT_EQ(stream->launch(kernels[i]), "");
  };
  step({0, 1});
  ASSERT_EQ(stream->synchronize().message, "");
  float direct[4];
  backend->download(direct, t[2].data, sizeof direct);

  // Captured in the other order: nothing runs while capturing; the replay
  // names the first launch that differs.
  ASSERT_EQ(stream->beginCapture(), "");
  step({1, 0});
  std::string error;
  std::unique_ptr<Graph> wrong = stream->endCapture(error);
  ASSERT_TRUE(wrong) << error;
  std::string replayed = stream->replay(*wrong);
  EXPECT_NE(replayed.find("the replayed graph's launch 0 is kernel 1"), std::string::npos)
      << replayed;
  EXPECT_NE(replayed.find("where the direct step's was kernel 0"), std::string::npos)
      << replayed;
  ASSERT_EQ(stream->synchronize().message, "");

  // A direct step again, then a capture in its order: the replay runs it.
  step({0, 1});
  ASSERT_EQ(stream->synchronize().message, "");
  ASSERT_EQ(stream->beginCapture(), "");
  step({0, 1});
  std::unique_ptr<Graph> right = stream->endCapture(error);
  ASSERT_TRUE(right) << error;
  backend->fill(t[2].data, 0, t[2].bytes());
  EXPECT_EQ(stream->replay(*right), "");
  ASSERT_EQ(stream->synchronize().message, "");
  float replayedOut[4];
  backend->download(replayedOut, t[2].data, sizeof replayedOut);
  EXPECT_EQ(std::memcmp(replayedOut, direct, sizeof direct), 0);
  EXPECT_EQ(replayedOut[0], -0.0f);
  EXPECT_EQ(replayedOut[1], -2.0f);
  for (Tensor &each : t)
    backend->free(each.data);
}
