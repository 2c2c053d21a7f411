//===- CudnnDevicelessTest.cpp - cuDNN's support for the plans' graphs ----===//
//
// Every cuDNN graph the corpus plans need (attention forward and backward at
// their head dims, ResNet-18's convolutions, batch, layer and RMS norms),
// checked against the committed H100 description without a GPU; graphs cuDNN
// rejects, with its reason; and the backend's choice of its own kernel for
// them. Runs on any machine with
// cuDNN (ctest puts the CUDA stub libcuda.so.1 on this test's library path
// so that cuDNN considers its runtime-compiled attention engines); without a
// loadable libcuda.so.1 it says so and exits 77 (skipped).
//
//===----------------------------------------------------------------------===//

#include "cudnn_graphs.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

using namespace fsdprt::cudnn;

namespace {

/// The committed H100 description, or $FSDP_CUDNN_DEVICE (scripts/gpu-check.sh
/// sets it to the description it has just captured on a lent GPU).
std::string devicePath() {
  const char *path = std::getenv("FSDP_CUDNN_DEVICE");
  return path && *path ? path : FSDP_H100_JSON;
}

const DeviceDescription &h100() {
  static std::unique_ptr<DeviceDescription> device = [] {
    std::string error;
    auto d = DeviceDescription::fromFile(devicePath(), error);
    if (!d)
      ADD_FAILURE() << error;
    return d;
  }();
  return *device;
}

SdpaShape sdpa(int64_t b, int64_t h, int64_t s, int64_t d, bool backward,
               DType dtype = DType::BF16) {
  SdpaShape x;
  x.batch = b;
  x.heads = h;
  x.seqQ = x.seqKv = s;
  x.headDim = d;
  x.backward = backward;
  x.dtype = dtype;
  x.causal = true;
  return x;
}

ConvShape conv(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t rs,
               int64_t stride, int64_t pad) {
  ConvShape x;
  x.n = n;
  x.c = c;
  x.h = x.w = hw;
  x.k = k;
  x.r = x.s = rs;
  x.stride = stride;
  x.pad = pad;
  return x;
}

void expectSupported(const Support &s, const std::string &graph) {
  EXPECT_TRUE(s.supported) << graph << ": " << s.reason;
  EXPECT_GT(s.configs, 0) << graph;
  EXPECT_TRUE(s.step.empty()) << graph;
  std::printf("  supported  %-70s %3d engine configs\n", graph.c_str(),
              s.configs);
}

} // namespace

TEST(CudnnDeviceless, DescriptionLoads) {
  ASSERT_NE(h100().descriptor(), nullptr);
  EXPECT_EQ(h100().sharedMemoryPerBlockOptin(), 232448);
  EXPECT_GE(cudnnVersion(), 90800) << "deviceless checks need cuDNN 9.8";
}

TEST(CudnnDeviceless, DescriptionMissingKeyIsRejectedByName) {
  std::string error;
  auto d =
      DeviceDescription::fromJson("{\"smVersion\": 90}", "partial.json", error);
  EXPECT_EQ(d, nullptr);
  EXPECT_NE(error.find("device description partial.json: "), std::string::npos)
      << error;
  EXPECT_NE(error.find("CUDNN_STATUS_"), std::string::npos) << error;

  d = DeviceDescription::fromFile("/nonexistent/h100.json", error);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(error, "device description /nonexistent/h100.json: cannot be read");
}

// The corpus's GPT-2 and LLaMA (d 32, 4 heads: head dim 8, 16 tokens, batch
// 2), GPT-2 small (12 heads of 64, 1024 tokens) and LLaMA-sized heads (32 of
// 128, 2048 tokens): bf16, causal, forward and backward; GPT-2's also in
// layout bshd (the head split folded: Q, K, V, O and the gradients strided).
TEST(CudnnDeviceless, AttentionTheCorpusNeedsIsSupported) {
  std::vector<SdpaShape> shapes;
  for (bool backward : {false, true}) {
    shapes.push_back(sdpa(2, 4, 16, 8, backward));
    shapes.push_back(sdpa(4, 12, 1024, 64, backward));
    shapes.push_back(sdpa(2, 32, 2048, 128, backward));
    shapes.push_back(sdpa(4, 12, 1024, 64, backward, DType::F16));
    for (SdpaShape x :
         {sdpa(2, 4, 16, 8, backward), sdpa(4, 12, 1024, 64, backward)}) {
      x.headsInRows = true;
      shapes.push_back(x);
    }
  }
  for (const SdpaShape &x : shapes) {
    expectSupported(check(x, h100()), describe(x));
    EXPECT_EQ(chooseAttention(x, h100()).impl, Impl::Cudnn) << describe(x);
  }
}

// ResNet-18's convolutions: the corpus's (batch 2, 32x32 images) and
// ImageNet's (batch 32, 224x224): the 7x7 stride-2 stem, 3x3 stride 1 and 2,
// the 1x1 stride-2 downsample; fprop, dgrad and wgrad; fp32 and bf16.
TEST(CudnnDeviceless, ResNet18ConvolutionsAreSupported) {
  std::vector<ConvShape> shapes = {
      conv(2, 3, 32, 64, 7, 2, 3),    conv(2, 64, 8, 64, 3, 1, 1),
      conv(2, 64, 8, 128, 3, 2, 1),   conv(2, 64, 8, 128, 1, 2, 0),
      conv(2, 256, 2, 512, 3, 2, 1),  conv(32, 3, 224, 64, 7, 2, 3),
      conv(32, 64, 56, 64, 3, 1, 1),  conv(32, 128, 56, 128, 3, 2, 1),
      conv(32, 256, 28, 512, 1, 2, 0)};
  for (ConvShape x : shapes)
    for (DType dtype : {DType::F32, DType::BF16})
      for (ConvPass pass :
           {ConvPass::Fprop, ConvPass::Dgrad, ConvPass::Wgrad}) {
        x.dtype = dtype;
        x.pass = pass;
        expectSupported(check(x, h100()), describe(x));
      }
}

NormShape norm(NormKind kind, int64_t n, int64_t c, int64_t hw, bool backward,
               DType dtype) {
  NormShape x;
  x.kind = kind;
  x.n = n;
  x.c = c;
  x.h = x.w = hw;
  x.backward = backward;
  x.dtype = dtype;
  return x;
}

// Training-mode normalizations: ResNet-18's batch norms (corpus and ImageNet
// sizes), the corpus's BatchNorm1d ([8, 32] as [8, 32, 1, 1]), GPT-2's layer
// norm and LLaMA's RMS norm over rows of 32 (corpus) and 768 / 4096.
TEST(CudnnDeviceless, NormalizationsTheCorpusNeedsAreSupported) {
  for (bool backward : {false, true})
    for (DType dtype : {DType::F32, DType::BF16})
      for (const NormShape &x :
           {norm(NormKind::Batch, 2, 64, 16, backward, dtype),
            norm(NormKind::Batch, 2, 512, 1, backward, dtype),
            norm(NormKind::Batch, 32, 64, 112, backward, dtype),
            norm(NormKind::Batch, 8, 32, 1, backward, dtype),
            norm(NormKind::Layer, 32, 32, 1, backward, dtype),
            norm(NormKind::Layer, 4096, 768, 1, backward, dtype),
            norm(NormKind::Rms, 32, 32, 1, backward, dtype),
            norm(NormKind::Rms, 4096, 4096, 1, backward, dtype)}) {
        expectSupported(check(x, h100()), describe(x));
        EXPECT_EQ(chooseNorm(x, h100()).impl, Impl::Cudnn) << describe(x);
      }
}

// Beyond the corpus, what the H100 description answers today: head dim 320
// forward, and fp32 forward (a generic fusion engine, not flash attention),
// have engines; their backwards do not (below).
TEST(CudnnDeviceless, AttentionForwardBeyondTheCorpus) {
  for (const SdpaShape &x : {sdpa(4, 12, 1024, 320, false),
                             sdpa(4, 12, 1024, 64, false, DType::F32)})
    expectSupported(check(x, h100()), describe(x));
}

// Head dim 320 has no backward engine, and fp32 attention has no backward
// engine at all: cuDNN says no at its heuristics and says why.
TEST(CudnnDeviceless, AttentionCudnnCannotRunIsRejectedWithItsReason) {
  for (const SdpaShape &x : {sdpa(4, 12, 1024, 320, true),
                             sdpa(4, 12, 1024, 64, true, DType::F32)}) {
    Support s = check(x, h100());
    EXPECT_FALSE(s.supported) << describe(x);
    EXPECT_EQ(s.configs, 0) << describe(x);
    EXPECT_EQ(s.step, "heuristics") << describe(x) << ": " << s.reason;
    std::string prefix = describe(x) + " on " + devicePath() +
                         ": not supported at step 'heuristics': no engine "
                         "config for this graph: ";
    EXPECT_EQ(s.reason.rfind(prefix, 0), 0u) << s.reason;
    // cuDNN's own reasons follow ours.
    EXPECT_GT(s.reason.size(), prefix.size() + 10) << s.reason;
    std::printf("  rejected   %s\n", s.reason.c_str());
  }
}

// A convolution whose filter is larger than its padded input: its output
// would have negative size, and cuDNN's tensor descriptor refuses it while
// the graph is built.
TEST(CudnnDeviceless, ImpossibleConvolutionIsRejectedWhileBuilt) {
  ConvShape x = conv(2, 64, 2, 64, 7, 1, 0);
  Support s = check(x, h100());
  EXPECT_FALSE(s.supported);
  EXPECT_EQ(s.step, "build") << s.reason;
  EXPECT_EQ(s.reason.rfind(describe(x) + " on " + devicePath() +
                               ": not supported at step 'build': ",
                           0),
            0u)
      << s.reason;
  EXPECT_NE(s.reason.find("CUDNN_STATUS_"), std::string::npos) << s.reason;
  std::printf("  rejected   %s\n", s.reason.c_str());
}

// The backend's prepare() runs its own kernel where cuDNN says no, and says
// why; where cuDNN says yes, cuDNN runs it.
TEST(CudnnDeviceless, FallbackToOwnKernelSaysWhy) {
  SdpaShape wide = sdpa(4, 12, 1024, 320, true);
  Choice c = chooseAttention(wide, h100());
  EXPECT_EQ(c.impl, Impl::Own);
  EXPECT_EQ(c.why.rfind(describe(wide) + " on ", 0), 0u) << c.why;
  EXPECT_NE(c.why.find("not supported at step 'heuristics'"), std::string::npos)
      << c.why;
  EXPECT_NE(c.why.find("; the backend's own attention kernel runs it"),
            std::string::npos)
      << c.why;

  SdpaShape gpt2 = sdpa(4, 12, 1024, 64, true);
  c = chooseAttention(gpt2, h100());
  EXPECT_EQ(c.impl, Impl::Cudnn) << c.why;
  EXPECT_EQ(c.why.rfind(describe(gpt2) + ": cuDNN (", 0), 0u) << c.why;

  ConvShape bad = conv(2, 64, 2, 64, 7, 1, 0);
  Choice k = chooseConv(bad, h100());
  EXPECT_EQ(k.impl, Impl::Own);
  EXPECT_NE(k.why.find("; the backend's own convolution kernel runs it"),
            std::string::npos)
      << k.why;
  EXPECT_EQ(chooseConv(conv(2, 64, 8, 64, 3, 1, 1), h100()).impl, Impl::Cudnn);
}

/// Binds `exe` with one distinct, aligned, never dereferenced address per
/// tensor (cuDNN's variant pack finalizes), and refuses one pointer short.
void expectBinds(const Executable &exe) {
  std::vector<void *> pointers;
  for (size_t i = 0; i < exe.tensors().size(); ++i)
    pointers.push_back(reinterpret_cast<void *>((i + 1) << 20));
  void *workspace = reinterpret_cast<void *>(uintptr_t(1) << 32);
  std::string error;
  EXPECT_NE(exe.bind(pointers, workspace, error), nullptr) << error;
  pointers.pop_back();
  EXPECT_EQ(exe.bind(pointers, workspace, error), nullptr);
  EXPECT_EQ(error, exe.name() + ": " + std::to_string(pointers.size()) +
                       " tensors bound, the graph has " +
                       std::to_string(exe.tensors().size()));
}

// Execution plans finalize without a GPU (cuDNN >= 9.8, against the
// description) for precompiled engines: ResNet's convolutions compile in
// each pass, name the tensors a launch binds, and bind.
TEST(CudnnDeviceless, ConvolutionPlansCompileAndBind) {
  ConvShape x = conv(2, 64, 8, 128, 3, 2, 1);
  const std::vector<std::vector<std::string>> tensors = {
      {"x", "w", "y"}, {"x", "w", "y"}, {"x", "w", "y"}};
  for (ConvPass pass : {ConvPass::Fprop, ConvPass::Dgrad, ConvPass::Wgrad}) {
    x.pass = pass;
    std::string error;
    auto exe = Executable::compile(x, h100(), error);
    ASSERT_NE(exe, nullptr) << describe(x) << ": " << error;
    EXPECT_EQ(exe->tensors(), tensors[(int)pass]) << describe(x);
    EXPECT_EQ(exe->workspaceBytes() % 256, 0);
    expectBinds(*exe);
  }
}

// Attention's engines are compiled at run time, and loading what they
// compile needs the CUDA driver: with the stub (here) the plan cannot
// finalize and this test says so and skips; on a lent GPU (gpu-check runs
// this binary there) the corpus's forward and backward compile, name their
// tensors, hold their fp32 intermediates in the workspace, and bind.
TEST(CudnnDeviceless, AttentionPlansCompileAndBind) {
  struct Case {
    SdpaShape shape;
    std::vector<std::string> tensors;
    int64_t internalBytes;
  };
  std::vector<std::string> backward = {"Q",     "K^T", "V^T", "O", "dO",
                                       "stats", "dQ",  "dK",  "dV"};
  std::vector<Case> cases = {
      {sdpa(2, 4, 16, 8, false), {"Q", "K^T", "V", "O", "stats"}, 0},
      // softmax sum [2,4,16,1] and dQ accum [2,4,16,8], fp32, each aligned.
      {sdpa(2, 4, 16, 8, true), backward, 512 + 4096},
      {sdpa(4, 12, 1024, 64, true), backward,
       4 * 12 * 1024 * 4 + 4 * 12 * 1024 * 64 * 4}};
  for (const Case &c : cases) {
    std::string error;
    auto exe = Executable::compile(c.shape, h100(), error);
    if (!exe && error.find("CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER") !=
                    std::string::npos)
      GTEST_SKIP() << "attention plans need the CUDA driver to finalize: "
                   << error;
    ASSERT_NE(exe, nullptr) << describe(c.shape) << ": " << error;
    EXPECT_EQ(exe->name(), describe(c.shape) + " on " + devicePath());
    EXPECT_EQ(exe->tensors(), c.tensors) << describe(c.shape);
    EXPECT_GE(exe->workspaceBytes(), c.internalBytes) << describe(c.shape);
    EXPECT_EQ(exe->workspaceBytes() % 256, 0);
    std::printf("  compiled   %-60s workspace %lld bytes\n",
                describe(c.shape).c_str(), (long long)exe->workspaceBytes());
    expectBinds(*exe);
  }
}

// Batch norm with given statistics (evaluation mode) in cuDNN's
// inference phase: ResNet-18's shapes (corpus and ImageNet) and
// BatchNorm1d's [8, 32] as [8, 32, 1, 1], fp32 as the batch_norm kernel
// runs them, bf16 and channels-last too. cuDNN 9.19 has no engine for any
// of them: it says no at its heuristics, the plan does not compile (with
// check()'s reason), and the backend's own kernel is chosen, saying why.
// (The same pointwise graph cudnn-frontend builds for it, and the variance
// turned into the inverse standard deviation inside the graph, fare no
// better: "pointwise fusion" and "linkEdges".)
TEST(CudnnDeviceless, BatchNormInferenceHasNoEngineAndTheOwnKernelRuns) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (NormShape x : {norm(NormKind::Batch, 2, 64, 16, false, dtype),
                        norm(NormKind::Batch, 2, 512, 1, false, dtype),
                        norm(NormKind::Batch, 32, 64, 112, false, dtype),
                        norm(NormKind::Batch, 8, 32, 1, false, dtype)})
      for (bool channelsLast : {false, true}) {
        x.inference = true;
        x.channelsLast = channelsLast;
        Support s = check(x, h100());
        EXPECT_FALSE(s.supported) << describe(x);
        EXPECT_EQ(s.step, "heuristics") << describe(x) << ": " << s.reason;
        std::string prefix = describe(x) + " on " + devicePath() +
                             ": not supported at step 'heuristics': ";
        EXPECT_EQ(s.reason.rfind(prefix, 0), 0u) << s.reason;
        EXPECT_NE(s.reason.find("CUDNN_STATUS_NOT_SUPPORTED"),
                  std::string::npos)
            << s.reason;
        Choice c = chooseNorm(x, h100());
        EXPECT_EQ(c.impl, Impl::Own) << describe(x);
        EXPECT_EQ(c.why, s.reason + "; the backend's own normalization "
                                    "kernel runs it");
        std::string error;
        EXPECT_EQ(Executable::compile(x, h100(), error), nullptr);
        EXPECT_EQ(error, s.reason);
        if (dtype == DType::F32 && !channelsLast && x.c == 64 && x.n == 2)
          std::printf("  rejected   %s\n", s.reason.c_str());
      }
}

// The training graphs batch_norm_train and batch_norm_grad run (ResNet's
// and BatchNorm1d's shapes, fp32 and bf16) compile to plans that name
// the tensors in the order the backend binds them, and bind.
TEST(CudnnDeviceless, BatchNormTrainingPlansCompileAndBind) {
  const std::vector<std::string> forward = {
      "x",    "scale",        "mean",        "inv variance",
      "y",    "bias",         "running mean", "running var",
      "next running mean", "next running var"};
  const std::vector<std::string> backward = {
      "x", "scale", "mean", "inv variance", "dy", "dx", "dscale", "dbias"};
  for (bool back : {false, true})
    for (DType dtype : {DType::F32, DType::BF16})
      for (const NormShape &x :
           {norm(NormKind::Batch, 2, 64, 16, back, dtype),
            norm(NormKind::Batch, 8, 32, 1, back, dtype)}) {
        std::string error;
        auto exe = Executable::compile(x, h100(), error);
        if (!exe && error.find("CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER") !=
                        std::string::npos)
          GTEST_SKIP() << "batch norm plans need the CUDA driver to finalize: "
                       << error;
        ASSERT_NE(exe, nullptr) << describe(x) << ": " << error;
        EXPECT_EQ(exe->tensors(), back ? backward : forward) << describe(x);
        EXPECT_EQ(exe->workspaceBytes() % 256, 0);
        std::printf("  compiled   %-60s workspace %lld bytes\n",
                    describe(x).c_str(), (long long)exe->workspaceBytes());
        expectBinds(*exe);
      }
}

// Only batch norm has an inference graph: layer norm's is refused while
// the graph is built, naming the graph, and the backend's own kernel runs.
TEST(CudnnDeviceless, InferenceOfOtherNormsIsRejectedWhileBuilt) {
  NormShape x = norm(NormKind::Layer, 32, 32, 1, false, DType::F32);
  x.inference = true;
  Support s = check(x, h100());
  EXPECT_FALSE(s.supported);
  EXPECT_EQ(s.step, "build") << s.reason;
  EXPECT_EQ(s.reason.rfind("layernorm inference fp32 [32,32,1,1] on ", 0), 0u)
      << s.reason;
  Choice c = chooseNorm(x, h100());
  EXPECT_EQ(c.impl, Impl::Own);
  EXPECT_NE(c.why.find("; the backend's own normalization kernel runs it"),
            std::string::npos)
      << c.why;
}

// What cuDNN cannot run does not compile, and the error is check()'s.
TEST(CudnnDeviceless, ExecutionPlanRefusedWithTheReason) {
  SdpaShape x = sdpa(4, 12, 1024, 64, true, DType::F32);
  std::string error;
  EXPECT_EQ(Executable::compile(x, h100(), error), nullptr);
  EXPECT_EQ(error, check(x, h100()).reason);
}

int main(int argc, char **argv) {
  // Without libcuda.so.1 cuDNN silently drops its attention engines; a
  // rejection then would be this machine's, not the H100's.
  if (void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY)) {
    dlclose(libcuda);
  } else {
    std::printf("skipped: libcuda.so.1 cannot be loaded (%s); run through "
                "ctest, which puts the CUDA stub on this test's library path\n",
                dlerror());
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
