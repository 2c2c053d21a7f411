//===- SessionTest.cpp - Sessions through the C API -----------------------===//
//
// Session creation refuses every inconsistent plan with a message (never a
// crash), weights load by the weight map, inputs and outputs are checked by
// name and size, and multi-kernel plans with views run end to end.
//
//===----------------------------------------------------------------------===//

#include "SessionHarness.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

const auto F32 = plan::DType::F32;
const auto I64 = plan::DType::I64;

/// The status of creating a session for `bytes`, as (code, message).
std::pair<fsdprt_status_code_t, std::string>
createStatus(const std::vector<uint8_t> &bytes) {
  fsdprt_plan_t *p = nullptr;
  std::string error =
      take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p));
  EXPECT_EQ(error, "");
  fsdprt_session_t *s = nullptr;
  fsdprt_status_t status = fsdprt_session_create(p, nullptr, 1, &s);
  fsdprt_status_code_t code = fsdprt_status_code(status);
  error = take(status);
  EXPECT_EQ(s == nullptr, code != FSDPRT_OK);
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
  return {code, error};
}

/// Expects creating a session for `bytes` to fail with INVALID_ARGUMENT and
/// a message containing `text`.
void expectRefused(const std::vector<uint8_t> &bytes, const std::string &text) {
  auto [code, error] = createStatus(bytes);
  EXPECT_EQ(code, FSDPRT_INVALID_ARGUMENT) << error;
  EXPECT_NE(error.find(text), std::string::npos) << error;
}

/// A relu plan: input x [4] -> output y [4].
PlanBuilder reluPlan() {
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {4});
  b.kernel("relu", {x}, {b.output("y", F32, {4})});
  return b;
}

TEST(Sessions, ShapeMismatchIsCaughtAtCreationNamingOpAndLocation) {
  PlanBuilder b;
  uint32_t x = b.input("a", F32, {2, 3}), w = b.input("b", F32, {4, 5});
  b.kernel("matmul", {x, w}, {b.output("y", F32, {2, 5})}, {},
           "/layer1/MatMul");
  expectRefused(
      b.finish(),
      "kernel 0 (matmul at '/layer1/MatMul'): inner dimensions differ: "
      "[2, 3] and [4, 5]");
}

TEST(Sessions, UnknownOpsAndAttributesOfTheWrongKindAreErrors) {
  PlanBuilder b = reluPlan();
  b.kernel("frobnicate", {0}, {1}, {}, "n2");
  expectRefused(
      b.finish(),
      "kernel 1 (frobnicate at 'n2'): is not a kernel of the CPU backend");
  PlanBuilder c;
  uint32_t x = c.input("x", F32, {2, 3});
  c.kernel("softmax", {x}, {c.output("y", F32, {2, 3})},
           {{"axis", std::string("1")}});
  expectRefused(
      c.finish(),
      "kernel 0 (softmax at 'node_1'): attribute 'axis' is not an int");
  PlanBuilder d;
  x = d.input("x", F32, {2, 3});
  d.kernel("relu", {x}, {});
  expectRefused(d.finish(), "has 0 outputs, expected 1");
}

TEST(Sessions, CorruptBuffersAreRefused) {
  {
    PlanBuilder b = reluPlan();
    b.arenaSlack(-64); // the output buffer now ends past the arena
    expectRefused(b.finish(),
                  "plan buffer 1 (16 bytes at offset 64) lies outside "
                  "arena 0 of 64 bytes");
  }
  {
    PlanBuilder b = reluPlan();
    b.raw(0, 0, 12, F32, {4});
    expectRefused(b.finish(),
                  "plan buffer 2 has 12 bytes, but its shape [4] of "
                  "float32 needs 16");
  }
  {
    PlanBuilder b = reluPlan();
    b.raw(7, 0, 16, F32, {4});
    expectRefused(b.finish(), "plan buffer 2 names arena 7 but the plan has 3");
  }
  {
    // Refused as the plan loads, before anything casts it to the enum.
    PlanBuilder b = reluPlan();
    b.raw(0, 0, 16, static_cast<plan::DType>(42), {4});
    std::vector<uint8_t> bytes = b.finish();
    fsdprt_plan_t *p = nullptr;
    std::string error =
        take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p));
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(error.find("plan buffer 2 has an unknown dtype 42"),
              std::string::npos)
        << error;
  }
  {
    PlanBuilder b = reluPlan();
    b.raw(0, 0, 0, F32, {-4});
    expectRefused(b.finish(), "plan buffer 2 has an invalid shape [-4]");
  }
  {
    PlanBuilder b = reluPlan();
    b.raw(0, ~uint64_t(0) - 8, 16, F32, {4}); // offset + bytes wraps around
    expectRefused(b.finish(), "lies outside arena 0");
  }
  {
    PlanBuilder b = reluPlan();
    b.kernel("relu", {0}, {99}, {}, "n2");
    expectRefused(b.finish(),
                  "kernel 1 (relu at 'n2') names buffer 99 but the plan has 2");
  }
}

TEST(Sessions, DeclarationsWeightsAndConstantsMustAgreeWithTheirBuffers) {
  {
    PlanBuilder b = reluPlan();
    b.declareInput("z", I64, {4}, 0);
    expectRefused(b.finish(),
                  "plan input 'z' is declared int64 [4] but its buffer "
                  "is float32 [4]");
  }
  {
    PlanBuilder b = reluPlan();
    b.declareInput("x", F32, {4}, 0);
    expectRefused(b.finish(), "plan input 'x' is declared twice");
  }
  {
    PlanBuilder b = reluPlan();
    b.declareInput("z", F32, {4}, 5);
    expectRefused(b.finish(),
                  "plan input 'z' names buffer 5 but the plan has 2");
  }
  {
    PlanBuilder b = reluPlan();
    b.weight("fc.weight", "w.bin", 0, 8, 0);
    expectRefused(b.finish(),
                  "weight 'fc.weight' has 8 bytes but its buffer holds 16");
  }
  {
    PlanBuilder b = reluPlan();
    b.constant(0, {1, 2, 3});
    expectRefused(b.finish(),
                  "plan constant for buffer 0 holds 3 bytes but the "
                  "buffer has 16");
  }
}

TEST(Sessions, ConstantsFillTheirBuffersAndMemoryIsReported) {
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {3});
  uint32_t c = b.buffer(F32, {3}, PlanBuilder::Constants);
  std::vector<float> values = {10, 20, 30};
  b.constant(
      c, std::vector<uint8_t>(reinterpret_cast<uint8_t *>(values.data()),
                              reinterpret_cast<uint8_t *>(values.data()) + 12));
  b.kernel("add", {x, c}, {b.output("y", F32, {3})});
  Session s(b.finish());
  ASSERT_EQ(s.error, "");
  ASSERT_EQ(s.set("x", f32({3}, {1, 2, 3}).bytes), "");
  ASSERT_EQ(s.run(), "");
  std::vector<uint8_t> out(12);
  ASSERT_EQ(s.get("y", out), "");
  EXPECT_EQ(as<float>(out), (std::vector<float>{11, 22, 33}));
  uint64_t act = 0, weights = 1, constants = 0;
  ASSERT_EQ(take(fsdprt_session_memory(s.session, &act, &weights, &constants)),
            "");
  EXPECT_EQ(act, 128u); // two buffers, each padded to 64 bytes
  EXPECT_EQ(weights, 0u);
  EXPECT_EQ(constants, 64u);
}

/// A fresh directory under the test's temporary directory.
std::string tempDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "/fsdprt_" + name;
  std::string command = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return dir;
}

void writeFile(const std::string &path, const std::vector<float> &values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(values.data()),
            values.size() * sizeof(float));
}

/// y = w1 * x + w2, with w1 and w2 [4] read from one file.
std::vector<uint8_t> weightedPlan(const std::string &modelDir) {
  PlanBuilder b;
  b.modelDir(modelDir);
  uint32_t x = b.input("x", F32, {4});
  uint32_t w1 = b.buffer(F32, {4}, PlanBuilder::Weights);
  uint32_t w2 = b.buffer(F32, {4}, PlanBuilder::Weights);
  uint32_t t = b.buffer(F32, {4});
  b.weight("scale", "model.bin", 4, 16, w1);
  b.weight("shift", "model.bin", 20, 16, w2);
  b.kernel("mul", {x, w1}, {t});
  b.kernel("add", {t, w2}, {b.output("y", F32, {4})}, {}, "node_2");
  return b.finish();
}

TEST(Sessions, WeightsLoadByTheWeightMap) {
  std::string dir = tempDir("weights");
  auto bytes = weightedPlan(dir);
  {
    Session s(bytes); // the plan's model_dir, no file yet
    ASSERT_EQ(s.error, "");
    std::string error = s.run();
    EXPECT_NE(error.find("the weights are not loaded; call "
                         "fsdprt_session_load_weights first"),
              std::string::npos)
        << error;
    fsdprt_status_t status = fsdprt_session_load_weights(s.session);
    EXPECT_EQ(fsdprt_status_code(status), FSDPRT_NOT_FOUND);
    error = take(status);
    EXPECT_NE(error.find("cannot open '" + dir +
                         "/model.bin' for 'scale': No such "
                         "file or directory"),
              std::string::npos)
        << error;
  }
  // A FIFO would block the open until a writer came.
  ASSERT_EQ(std::system(("mkfifo '" + dir + "/model.bin'").c_str()), 0);
  {
    Session s(bytes);
    ASSERT_EQ(s.error, "");
    fsdprt_status_t status = fsdprt_session_load_weights(s.session);
    EXPECT_EQ(fsdprt_status_code(status), FSDPRT_IO_ERROR);
    std::string error = take(status);
    EXPECT_NE(error.find("cannot open '" + dir +
                         "/model.bin' for 'scale': not a regular file"),
              std::string::npos)
        << error;
  }
  std::remove((dir + "/model.bin").c_str());
  // A header float, then scale, then the first half of shift only.
  writeFile(dir + "/model.bin", {99, 1, 2, 3, 4, 10, 20});
  {
    Session s(bytes);
    ASSERT_EQ(s.error, "");
    fsdprt_status_t status = fsdprt_session_load_weights(s.session);
    EXPECT_EQ(fsdprt_status_code(status), FSDPRT_IO_ERROR);
    std::string error = take(status);
    EXPECT_NE(error.find("'" + dir +
                         "/model.bin' is too short for 'shift': it has "
                         "28 bytes, the weight map reads 16 at offset 20"),
              std::string::npos)
        << error;
    EXPECT_NE(s.run().find("the weights are not loaded"), std::string::npos);
  }
  writeFile(dir + "/model.bin", {99, 1, 2, 3, 4, 10, 20, 30, 40});
  // The session's model_dir overrides the plan's.
  std::string other = tempDir("weights_other");
  writeFile(other + "/model.bin", {0, -1, -1, -1, -1, 0, 0, 0, 0});
  for (const std::string &where : {std::string(), other}) {
    Session s(bytes, where.empty() ? nullptr : where.c_str());
    ASSERT_EQ(s.error, "");
    ASSERT_EQ(take(fsdprt_session_load_weights(s.session)), "");
    ASSERT_EQ(s.set("x", f32({4}, {1, 1, 2, 2}).bytes), "");
    ASSERT_EQ(s.run(), "");
    std::vector<uint8_t> out(16);
    ASSERT_EQ(s.get("y", out), "");
    std::vector<float> want = where.empty()
                                  ? std::vector<float>{11, 22, 36, 48}
                                  : std::vector<float>{-1, -1, -2, -2};
    EXPECT_EQ(as<float>(out), want);
    uint64_t weights = 0;
    ASSERT_EQ(
        take(fsdprt_session_memory(s.session, nullptr, &weights, nullptr)), "");
    EXPECT_EQ(weights, 128u);
  }
}

TEST(Sessions, InputsAndOutputsAreCheckedByNameAndSize) {
  Session s(reluPlan().finish());
  ASSERT_EQ(s.error, "");
  // No weights: running needs no load. Inputs persist across runs.
  ASSERT_EQ(s.set("x", f32({4}, {-1, 2, -3, 4}).bytes), "");
  std::vector<uint8_t> out(16);
  // Before a run the output holds nothing to read.
  fsdprt_status_t early =
      fsdprt_session_get_output(s.session, "y", out.data(), 16);
  EXPECT_EQ(fsdprt_status_code(early), FSDPRT_INVALID_ARGUMENT);
  EXPECT_NE(take(early).find("output 'y' has no value: no run completed"),
            std::string::npos);
  ASSERT_EQ(s.run(), "");
  ASSERT_EQ(s.run(), "");
  ASSERT_EQ(s.get("y", out), "");
  EXPECT_EQ(as<float>(out), (std::vector<float>{0, 2, 0, 4}));

  std::vector<float> three(3);
  fsdprt_status_t status =
      fsdprt_session_set_input(s.session, "x", three.data(), 12);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_INVALID_ARGUMENT);
  EXPECT_EQ(take(status), "input 'x' (float32 [4]) holds 16 bytes, not 12");
  status = fsdprt_session_set_input(s.session, "nope", three.data(), 12);
  EXPECT_EQ(fsdprt_status_code(status), FSDPRT_NOT_FOUND);
  EXPECT_EQ(take(status), "the plan has no input named 'nope' (its inputs: x)");
  status = fsdprt_session_get_output(s.session, "y", three.data(), 12);
  EXPECT_EQ(take(status), "output 'y' (float32 [4]) holds 16 bytes, not 12");
  status = fsdprt_session_get_output(s.session, "x", out.data(), 16);
  EXPECT_EQ(take(status), "the plan has no output named 'x' (its outputs: y)");
  EXPECT_NE(take(fsdprt_session_set_input(s.session, nullptr, out.data(), 16))
                .find("NULL argument"),
            std::string::npos);
}

TEST(Sessions, TheDeviceIsAnOptionAndUnknownOnesAreNamed) {
  auto bytes = reluPlan().finish();
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  fsdprt_session_options_t o;
  fsdprt_session_options_init(&o);
  EXPECT_EQ(o.device, nullptr);
  fsdprt_session_t *s = nullptr;
  for (const char *device : {"cpu", ""}) {
    o.device = device;
    EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)), "") << device;
    fsdprt_session_destroy(s);
    s = nullptr;
  }
  o.device = "tpu";
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)),
            "fsdprt_session_create_with_options: unknown device 'tpu'; "
            "expected cpu, cuda or cuda:N");
  // No GPU has number 999: refused, naming the device and why (no GPU
  // or driver here, no such GPU there, or a build without the plugin).
  o.device = "cuda:999";
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s))
                .rfind("fsdprt_session_create_with_options: device 'cuda:999': ", 0),
            0u);
  o.device = "cuda:x";
  EXPECT_NE(take(fsdprt_session_create_with_options(p, &o, &s))
                .find("unknown device 'cuda:x'"),
            std::string::npos);
  // NCCL ranks without MPI: a GPU, the plan's world and one mode only.
  o.device = "cpu";
  o.nccl_id_store = "file:/tmp/none";
  o.nccl_rank = 0;
  o.nccl_world_size = 1;
  EXPECT_NE(take(fsdprt_session_create_with_options(p, &o, &s))
                .find("nccl_id_store needs device cuda or cuda:N, not 'cpu'"),
            std::string::npos);
  o.nccl_world_size = 2;
  EXPECT_NE(take(fsdprt_session_create_with_options(p, &o, &s))
                .find("NCCL rank 0 of 2, for a plan sharded over 1"),
            std::string::npos);
  fsdprt_mpi_options_t mpi = {1, 0, 10.0};
  o.mpi = &mpi;
  EXPECT_NE(take(fsdprt_session_create_with_options(p, &o, &s))
                .find("one of mpi, local_group and nccl_id_store"),
            std::string::npos);
  o.mpi = nullptr;
  o.nccl_id_store = nullptr;
  // A host compiled before the field existed: its device is the CPU.
  o.device = "tpu";
  o.struct_size = offsetof(fsdprt_session_options_t, device);
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)), "");
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
}

TEST(Sessions, TheStrictFakeDeviceRefusesOpsWithNoCudaKernel) {
  // relu has a CUDA kernel; an add broadcasting over 9 dims that do not
  // collapse (one past the CUDA kernels' kMaxDims) has none: fake-cuda
  // runs the CPU's, fake-cuda:strict refuses it when the session is
  // created, naming the op, as a GPU does.
  PlanBuilder b = reluPlan();
  uint32_t i = b.input("i", F32, {2, 1, 2, 1, 2, 1, 2, 1, 2}),
           j = b.input("j", F32, {1, 2, 1, 2, 1, 2, 1, 2, 1});
  b.kernel("add", {i, j}, {b.output("k", F32, Shape(9, 2))}, {}, "n2");
  auto bytes = b.finish();
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  fsdprt_session_options_t o;
  fsdprt_session_options_init(&o);
  fsdprt_session_t *s = nullptr;
  o.device = "fake-cuda";
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)), "");
  fsdprt_session_destroy(s);
  s = nullptr;
  o.device = "fake-cuda:strict";
  EXPECT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)),
            "kernel 1 (add at 'n2'): has "
            "no CUDA kernel yet for these dtypes and shapes (docs/gpu.md "
            "lists the kernels the GPU has); run the plan with device 'cpu'");
  fsdprt_plan_destroy(p);
  // The relu plan alone runs on the strict device, as on the CPU.
  auto relu = reluPlan().finish();
  ASSERT_EQ(take(fsdprt_plan_load_memory(relu.data(), relu.size(), &p)), "");
  ASSERT_EQ(take(fsdprt_session_create_with_options(p, &o, &s)), "");
  std::vector<float> x = {-1, 2, -3, 4}, y(4);
  EXPECT_EQ(take(fsdprt_session_set_input(s, "x", x.data(), 16)), "");
  EXPECT_EQ(take(fsdprt_session_run(s)), "");
  EXPECT_EQ(take(fsdprt_session_get_output(s, "y", y.data(), 16)), "");
  EXPECT_EQ(y, (std::vector<float>{0, 2, 0, 4}));
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
}

TEST(Sessions, TheStrictFakeDeviceRefusesTheKernelsOnlyTheCpuHas) {
  // A transpose reversing 9 dims (9 strided dims after collapsing, one
  // past the CUDA kernels' kMaxDims) is refused, never run on the host's
  // kernel.
  auto refusal = [](PlanBuilder b) {
    auto bytes = b.finish();
    fsdprt_plan_t *p = nullptr;
    EXPECT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)),
              "");
    fsdprt_session_options_t o;
    fsdprt_session_options_init(&o);
    o.device = "fake-cuda:strict";
    fsdprt_session_t *s = nullptr;
    std::string error = take(fsdprt_session_create_with_options(p, &o, &s));
    fsdprt_session_destroy(s);
    fsdprt_plan_destroy(p);
    return error;
  };
  PlanBuilder transpose;
  Shape nine(9, 2);
  uint32_t x = transpose.input("x", F32, nine);
  transpose.kernel("transpose", {x}, {transpose.output("y", F32, nine)},
                   {{"perm", Shape{8, 7, 6, 5, 4, 3, 2, 1, 0}}}, "t");
  EXPECT_NE(refusal(std::move(transpose))
                .find("kernel 0 (transpose at 't'): has no CUDA kernel yet"),
            std::string::npos);
}

TEST(Sessions, ThreadCountsAreCheckedAndGiveTheSameResults) {
  auto bytes = reluPlan().finish();
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  fsdprt_session_t *s = nullptr;
  EXPECT_EQ(take(fsdprt_session_create(p, nullptr, -1, &s)),
            "fsdprt_session_create: num_threads must be 0 to 1024, not -1");
  // OpenMP cannot start 65536 threads: refused, not a crash in a kernel.
  EXPECT_EQ(take(fsdprt_session_create(p, nullptr, 65536, &s)),
            "fsdprt_session_create: num_threads must be 0 to 1024, not 65536");
  EXPECT_EQ(s, nullptr);
  fsdprt_plan_destroy(p);

  // A chain large enough to run in parallel, on 1, 2 and every core.
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {256, 300}), w = b.input("w", F32, {300, 200});
  uint32_t h = b.buffer(F32, {256, 200});
  b.kernel("matmul", {x, w}, {h});
  b.kernel("softmax", {h}, {b.output("y", F32, {256, 200})},
           {{"axis", int64_t(1)}});
  auto plan = b.finish();
  auto xs = randomFloats(256 * 300, 1), ws = randomFloats(300 * 200, 2);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 0}) {
    Session session(plan, nullptr, threads);
    ASSERT_EQ(session.error, "");
    ASSERT_EQ(session.set("x", f32({256, 300}, xs).bytes), "");
    ASSERT_EQ(session.set("w", f32({300, 200}, ws).bytes), "");
    ASSERT_EQ(session.run(), "");
    std::vector<uint8_t> out(256 * 200 * 4);
    ASSERT_EQ(session.get("y", out), "");
    results.push_back(as<float>(out));
  }
  for (size_t i = 1; i < results.size(); ++i)
    expectNear(results[i],
               std::vector<double>(results[0].begin(), results[0].end()));
}

TEST(Sessions, ViewsShareBytesAcrossKernels) {
  // y = softmax(reshape(x @ w, [2, 3, 2]), axis 2): the reshape is a second
  // buffer at the matmul output's offset, not a kernel.
  PlanBuilder b;
  uint32_t x = b.input("x", F32, {6, 4}), w = b.input("w", F32, {4, 2});
  uint32_t h = b.buffer(F32, {6, 2});
  uint32_t view = b.raw(0, b.offsetOf(h), 48, F32, {2, 3, 2});
  b.kernel("matmul", {x, w}, {h});
  b.kernel("softmax", {view}, {b.output("y", F32, {2, 3, 2})},
           {{"axis", int64_t(2)}});
  auto xs = randomFloats(24, 3), ws = randomFloats(8, 4);
  Session s(b.finish());
  ASSERT_EQ(s.error, "");
  ASSERT_EQ(s.set("x", f32({6, 4}, xs).bytes) +
                s.set("w", f32({4, 2}, ws).bytes),
            "");
  ASSERT_EQ(s.run(), "");
  std::vector<uint8_t> out(48);
  ASSERT_EQ(s.get("y", out), "");
  std::vector<double> want;
  for (int r = 0; r < 6; ++r) {
    double v[2];
    for (int c = 0; c < 2; ++c) {
      v[c] = 0;
      for (int k = 0; k < 4; ++k)
        v[c] += double(xs[r * 4 + k]) * ws[k * 2 + c];
    }
    double m = std::max(v[0], v[1]), e0 = std::exp(v[0] - m),
           e1 = std::exp(v[1] - m);
    want.push_back(e0 / (e0 + e1));
    want.push_back(e1 / (e0 + e1));
  }
  expectNear(as<float>(out), want);
}

} // namespace

namespace {

/// w [4] (a weight from w.bin) and acc [4] (zeros): each run outputs
/// loss = sum(w) and updates w <- w - g, acc <- acc + g.
PlanBuilder stepPlan(const std::string &dir) {
  PlanBuilder b;
  b.modelDir(dir);
  uint32_t w = b.buffer(F32, {4}, PlanBuilder::Weights);
  uint32_t acc = b.buffer(F32, {4}, PlanBuilder::Weights);
  b.weight("w", "w.bin", 0, 16, w);
  b.weight("acc", "", 0, 16, acc);
  uint32_t g = b.input("g", F32, {4});
  b.kernel("reduce_sum", {w}, {b.output("loss", F32, {})},
           {{"axes", Shape{0}}, {"keepdims", int64_t(0)}});
  uint32_t nw = b.buffer(F32, {4}), na = b.buffer(F32, {4});
  b.kernel("sub", {w, g}, {nw});
  b.kernel("add", {acc, g}, {na});
  b.update(nw, w);
  b.update(na, acc);
  return b;
}

} // namespace

TEST(Sessions, StateUpdatesCarryOverRunsAndReloadingResetsThem) {
  std::string dir = ::testing::TempDir();
  {
    std::ofstream out(dir + "/w.bin", std::ios::binary);
    float w[4] = {1, 2, 3, 4};
    out.write(reinterpret_cast<const char *>(w), sizeof w);
  }
  std::vector<uint8_t> bytes = stepPlan(dir).finish();
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  fsdprt_session_t *s = nullptr;
  ASSERT_EQ(take(fsdprt_session_create(p, nullptr, 1, &s)), "");
  float state[4];
  EXPECT_NE(take(fsdprt_session_read_state(s, "w", state, sizeof state)), "");
  ASSERT_EQ(take(fsdprt_session_load_weights(s)), "");
  float g[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  ASSERT_EQ(take(fsdprt_session_set_input(s, "g", g, sizeof g)), "");
  for (float expected : {10.0f, 8.0f, 6.0f}) { // sum(w) before each step
    ASSERT_EQ(take(fsdprt_session_run(s)), "");
    float loss = 0;
    ASSERT_EQ(take(fsdprt_session_get_output(s, "loss", &loss, sizeof loss)),
              "");
    EXPECT_FLOAT_EQ(loss, expected);
  }
  ASSERT_EQ(take(fsdprt_session_read_state(s, "w", state, sizeof state)), "");
  EXPECT_FLOAT_EQ(state[0], -0.5f);
  EXPECT_FLOAT_EQ(state[3], 2.5f);
  ASSERT_EQ(take(fsdprt_session_read_state(s, "acc", state, sizeof state)), "");
  EXPECT_FLOAT_EQ(state[2], 1.5f);
  // Reloading resets both the weight and the zero-initialised state.
  ASSERT_EQ(take(fsdprt_session_load_weights(s)), "");
  ASSERT_EQ(take(fsdprt_session_read_state(s, "acc", state, sizeof state)), "");
  EXPECT_FLOAT_EQ(state[2], 0.0f);
  EXPECT_NE(take(fsdprt_session_read_state(s, "acc", state, 8))
                .find("has 16 bytes, not 8"),
            std::string::npos);
  EXPECT_NE(take(fsdprt_session_read_state(s, "nope", state, sizeof state))
                .find("no parameter or buffer 'nope'"),
            std::string::npos);
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
}

TEST(Sessions, BadStateUpdatesAreRefused) {
  {
    PlanBuilder b = stepPlan(".");
    b.update(2, 99);
    expectRefused(b.finish(), "state update 2 names buffers 2 -> 99");
  }
  {
    PlanBuilder b = stepPlan(".");
    b.update(2, 3); // onto an input, not a weight
    expectRefused(b.finish(), "state update 2: its target, buffer 3, is not "
                              "a parameter or buffer");
  }
  {
    PlanBuilder b = stepPlan(".");
    b.update(1, 0); // from a weight, not a computed value
    expectRefused(b.finish(), "state update 2: its source, buffer 1, is not "
                              "computed by the run");
  }
  {
    PlanBuilder b = stepPlan(".");
    b.update(3, 0); // the scalar loss over w [4]
    expectRefused(b.finish(),
                  "state update 2 copies float32 [] over float32 [4]");
  }
  {
    PlanBuilder b = stepPlan(".");
    b.update(4, 1); // acc updated twice
    expectRefused(b.finish(), "state update 2 updates buffer 1, which another "
                              "update writes too");
  }
}

TEST(Sessions, AMultiRankPlanWithoutMpiIsRefusedNotAborted) {
  PlanBuilder b = reluPlan();
  b.worldSize(2);
  auto bytes = b.finish();
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p)), "");
  fsdprt_session_t *s = nullptr;
  // MPI_Comm_c2f before MPI_Init is Open MPI's abort of the whole host.
  EXPECT_EQ(take(fsdprt_session_create_mpi(p, nullptr, 1, nullptr, &s)),
            "fsdprt_session_create_mpi: MPI is not initialized; the plan is "
            "for 2 ranks: launch it with mpirun -np 2 (and call MPI_Init or "
            "fsdprt_mpi_init first)");
  EXPECT_EQ(s, nullptr);
  // A NaN deadline would be no deadline at all.
  for (double timeout : {double(NAN), double(INFINITY), -1.0}) {
    fsdprt_mpi_options_t mpi = {1, 0, timeout};
    std::string error =
        take(fsdprt_session_create_mpi(p, nullptr, 1, &mpi, &s));
    EXPECT_EQ(error.rfind("fsdprt_session_create_mpi: timeout_seconds must "
                          "be a finite number >= 0 (0: no deadline), not ",
                          0),
              0u)
        << error;
  }
  fsdprt_plan_destroy(p);
}

TEST(Sessions, MalformedSafetensorsHeadersNameTheByte) {
  std::string dir = ::testing::TempDir();
  Session session(reluPlan().finish());
  ASSERT_EQ(session.error, "");
  auto write = [&](const std::string &name, const std::string &header) {
    std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    uint64_t length = header.size();
    for (int i = 0; i < 8; ++i)
      out.put(static_cast<char>(length >> (8 * i)));
    out << header;
    return path;
  };
  // std::stoul's exception said only "stoul", and "12zz" passed as 0x12.
  for (const char *bad : {R"({"a\uZZZZ": {}})", R"({"a\u12zz": {}})"}) {
    std::string path = write("bad-escape.safetensors", bad);
    std::string error = take(
        fsdprt_session_load_full_checkpoint(session.session, path.c_str()));
    EXPECT_NE(error.find("has a malformed header: bad \\u escape at byte "),
              std::string::npos)
        << error;
    EXPECT_EQ(error.find("stoul"), std::string::npos) << error;
  }
  // The reader's nesting bound (the parser recurses once per level).
  std::string deep = "{\"a\": " + std::string(40000, '[') + "}";
  std::string path = write("deep.safetensors", deep);
  std::string error =
      take(fsdprt_session_load_full_checkpoint(session.session, path.c_str()));
  EXPECT_NE(error.find("has a malformed header: nested too deeply at byte "),
            std::string::npos)
      << error;
  // Duplicate keys (the last one won), raw control characters, numbers
  // that are not integers ("6.5536e4" was read as 6), offsets reversed
  // (their size was reported as 18446744073709486080 bytes).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
       R"( "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
       "has a malformed header: the key \"x\" twice at byte "},
      {std::string("{\"a\0b\": {}}", 11),
       "has a malformed header: a raw control character in a string at byte 3"},
      {R"({"x": {"dtype": "F32", "shape": [6.5536e4], "data_offsets": [0, 4]}})",
       "tensor 'x' has a bad shape"},
      {R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})",
       "tensor 'x' has data_offsets [4, 0] that end before they begin"}};
  for (const auto &[header, message] : cases) {
    std::string path = write("strict.safetensors", header);
    std::string error = take(
        fsdprt_session_load_full_checkpoint(session.session, path.c_str()));
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
}
