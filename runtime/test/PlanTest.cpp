//===- PlanTest.cpp - Loading, verifying and refusing plans ---------------===//

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace plan = fsdprt::plan;

namespace {

struct StatusDeleter {
  void operator()(fsdprt_status_s *status) const { fsdprt_status_free(status); }
};
using Status = std::unique_ptr<fsdprt_status_s, StatusDeleter>;

struct PlanDeleter {
  void operator()(fsdprt_plan_t *plan) const { fsdprt_plan_destroy(plan); }
};
using Plan = std::unique_ptr<fsdprt_plan_t, PlanDeleter>;

/// A small plan: one input, one output, one weight reference.
std::vector<uint8_t> buildPlan(uint32_t version) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<int64_t> shape = {2, 16};
  auto input =
      plan::CreateTensorDescDirect(b, "input_ids", plan::DType::I64, &shape, 0);
  std::vector<int64_t> scalar;
  auto output =
      plan::CreateTensorDescDirect(b, "loss", plan::DType::F32, &scalar, 1);
  auto weight = plan::CreateWeightRefDirect(
      b, "wte.weight", plan::StateKind::Param, "gpt2.onnx", 36169, 8192, 2);
  std::vector<flatbuffers::Offset<plan::TensorDesc>> inputs = {input};
  std::vector<flatbuffers::Offset<plan::TensorDesc>> outputs = {output};
  std::vector<flatbuffers::Offset<plan::WeightRef>> weights = {weight};
  auto root =
      plan::CreatePlanDirect(b, version, "test", ".", 1, nullptr, nullptr,
                             &inputs, &outputs, nullptr, &weights);
  plan::FinishPlanBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

Plan load(const std::vector<uint8_t> &bytes, Status &status) {
  fsdprt_plan_t *raw = nullptr;
  status.reset(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &raw));
  return Plan(raw);
}

TEST(Plan, LoadsAndDescribesAVerifiedPlan) {
  Status status;
  Plan loaded = load(buildPlan(FSDPRT_PLAN_SCHEMA_VERSION), status);
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(fsdprt_plan_schema_version(loaded.get()),
            FSDPRT_PLAN_SCHEMA_VERSION);
  ASSERT_EQ(fsdprt_plan_num_inputs(loaded.get()), 1u);
  ASSERT_EQ(fsdprt_plan_num_outputs(loaded.get()), 1u);
  ASSERT_EQ(fsdprt_plan_num_weights(loaded.get()), 1u);

  fsdprt_tensor_desc_t desc;
  status.reset(fsdprt_plan_input(loaded.get(), 0, &desc));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(desc.name, "input_ids");
  EXPECT_EQ(desc.dtype, FSDPRT_I64);
  ASSERT_EQ(desc.rank, 2u);
  EXPECT_EQ(desc.shape[0], 2);
  EXPECT_EQ(desc.shape[1], 16);

  status.reset(fsdprt_plan_output(loaded.get(), 0, &desc));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(desc.name, "loss");
  EXPECT_EQ(desc.rank, 0u);

  fsdprt_weight_ref_t ref;
  status.reset(fsdprt_plan_weight(loaded.get(), 0, &ref));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(ref.fqn, "wte.weight");
  EXPECT_EQ(ref.is_buffer, 0);
  EXPECT_STREQ(ref.file, "gpt2.onnx");
  EXPECT_EQ(ref.offset, 36169u);
  EXPECT_EQ(ref.length, 8192u);

  status.reset(fsdprt_plan_input(loaded.get(), 1, &desc));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_OUT_OF_RANGE);
  EXPECT_STREQ(fsdprt_status_message(status.get()),
               "fsdprt_plan_input: index 1 is outside the plan's 1 inputs");
}

TEST(Plan, RefusesOtherSchemaVersionsNamingBoth) {
  Status status;
  Plan loaded = load(buildPlan(FSDPRT_PLAN_SCHEMA_VERSION + 1), status);
  EXPECT_EQ(loaded, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INCOMPATIBLE);
  std::string message = fsdprt_status_message(status.get());
  EXPECT_NE(message.find("has plan schema version " +
                         std::to_string(FSDPRT_PLAN_SCHEMA_VERSION + 1)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("reads version " +
                         std::to_string(FSDPRT_PLAN_SCHEMA_VERSION) +
                         "; use a runtime at least as new as the compiler"),
            std::string::npos)
      << message;

  loaded = load(buildPlan(0), status);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INCOMPATIBLE);
  EXPECT_NE(std::string(fsdprt_status_message(status.get()))
                .find("recompile the model"),
            std::string::npos);
}

TEST(Plan, RefusesBytesThatAreNotAPlan) {
  Status status;
  std::vector<uint8_t> garbage(64, 0xAB);
  Plan loaded = load(garbage, status);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INVALID_ARGUMENT);
  EXPECT_STREQ(fsdprt_status_message(status.get()),
               "the plan in memory is not an FSDP-MLIR plan (no 'FSDP' file "
               "identifier)");

  loaded = load({}, status);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INVALID_ARGUMENT);
}

TEST(Plan, RefusesCorruptAndTruncatedPlans) {
  std::vector<uint8_t> good = buildPlan(FSDPRT_PLAN_SCHEMA_VERSION);
  // Every truncation, and every single corrupted byte, is refused or loads
  // a plan that still verifies; nothing crashes.
  for (size_t size = 8; size < good.size(); ++size) {
    Status status;
    std::vector<uint8_t> cut(good.begin(), good.begin() + size);
    Plan loaded = load(cut, status);
    EXPECT_TRUE(status != nullptr || loaded != nullptr);
  }
  Status status;
  std::vector<uint8_t> bad = good;
  bad[0] = 0xFF; // The root offset now points outside the buffer.
  bad[1] = 0xFF;
  Plan loaded = load(bad, status);
  ASSERT_NE(status, nullptr);
  EXPECT_STREQ(fsdprt_status_message(status.get()),
               "the plan in memory is a corrupt plan (FlatBuffers "
               "verification failed)");
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> flipped = good;
    flipped[i] ^= 0x5A;
    Plan maybe = load(flipped, status);
    if (maybe) {
      fsdprt_tensor_desc_t desc;
      for (size_t j = 0; j < fsdprt_plan_num_inputs(maybe.get()); ++j)
        Status(fsdprt_plan_input(maybe.get(), j, &desc));
    }
  }
}

TEST(Plan, LoadsFilesAndReportsMissingOnes) {
  std::string path = ::testing::TempDir() + "fsdprt-plan-test.plan";
  std::vector<uint8_t> bytes = buildPlan(FSDPRT_PLAN_SCHEMA_VERSION);
  FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);

  fsdprt_plan_t *raw = nullptr;
  Status status(fsdprt_plan_load_file(path.c_str(), &raw));
  Plan loaded(raw);
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(fsdprt_plan_num_weights(loaded.get()), 1u);
  std::remove(path.c_str());

  raw = nullptr;
  status.reset(fsdprt_plan_load_file(path.c_str(), &raw));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(raw, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_NOT_FOUND);
  EXPECT_EQ(std::string(fsdprt_status_message(status.get())),
            "cannot open plan '" + path + "': No such file or directory");
}

TEST(Plan, RefusesVersionOnePlansWrittenBeforeSharding) {
  Status status;
  Plan loaded = load(buildPlan(1), status);
  EXPECT_EQ(loaded, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INCOMPATIBLE);
  EXPECT_NE(std::string(fsdprt_status_message(status.get()))
                .find("has plan schema version 1, but this runtime"),
            std::string::npos)
      << fsdprt_status_message(status.get());
}

/// How to spoil the sharded plan below, one fault at a time.
struct Faults {
  int64_t paddedNumel = 16;
  int16_t axis = 0;
  uint8_t stream = 1;
  int64_t gathered = 16; // elements of the gather's output
  std::vector<uint32_t> deps;
  uint32_t worldSize = 4;
  int64_t meshSize = 4;
};

/// A 4-rank plan: unit "unit:a" (a.w, 4x4 f32) sharded over mesh [4],
/// buffer 0 its 4-element shard (weights arena), buffer 1 the gathered
/// 16 elements (activations), one all_gather between them and a copy of
/// the gathered buffer on the compute stream.
std::vector<uint8_t> buildShardedPlan(const Faults &f = {}) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<plan::Arena>> arenas = {
      plan::CreateArenaDirect(b, "activations", 256, 64,
                              plan::ArenaKind::Activations),
      plan::CreateArenaDirect(b, "weights", 64, 64, plan::ArenaKind::Weights)};
  int64_t shard = 16 / f.meshSize;
  std::vector<int64_t> shardShape = {shard}, fullShape = {f.gathered};
  std::vector<flatbuffers::Offset<plan::Buffer>> buffers = {
      plan::CreateBufferDirect(b, 1, 0, shard * 4, plan::DType::F32,
                               &shardShape),
      plan::CreateBufferDirect(b, 0, 0, f.gathered * 4, plan::DType::F32,
                               &fullShape),
      plan::CreateBufferDirect(b, 0, 128, f.gathered * 4, plan::DType::F32,
                               &fullShape)};
  std::vector<int64_t> axesWide = {f.axis};
  std::vector<flatbuffers::Offset<plan::Attr>> attrs = {plan::CreateAttr(
      b, b.CreateString("mesh_axes"), plan::AttrValue::IntsAttr,
      plan::CreateIntsAttrDirect(b, &axesWide).Union())};
  std::vector<uint32_t> in0 = {0}, out1 = {1}, in1 = {1}, out2 = {2};
  std::vector<flatbuffers::Offset<plan::Kernel>> kernels = {
      plan::CreateKernelDirect(b, "all_gather", &in0, &out1, &attrs, "a",
                               f.stream),
      plan::CreateKernelDirect(b, "copy", &in1, &out2, nullptr, "b", 0,
                               &f.deps)};
  std::vector<int64_t> paramShape = {4, 4};
  std::vector<flatbuffers::Offset<plan::UnitParam>> params = {
      plan::CreateUnitParamDirect(b, "a.w", &paramShape, "w.bin", 0, 64)};
  std::vector<int16_t> axes = {f.axis};
  std::vector<flatbuffers::Offset<plan::Unit>> units = {plan::CreateUnitDirect(
      b, "unit:a", "a", &params, 1, &axes, plan::DType::F32, f.paddedNumel, 0)};
  std::vector<int64_t> mesh = {f.meshSize};
  std::vector<flatbuffers::Offset<plan::TensorDesc>> outputs = {
      plan::CreateTensorDescDirect(b, "y", plan::DType::F32, &fullShape, 2)};
  auto root = plan::CreatePlanDirect(b, FSDPRT_PLAN_SCHEMA_VERSION, "test", ".",
                                     f.worldSize, &arenas, &buffers, nullptr,
                                     &outputs, &kernels, nullptr, nullptr,
                                     nullptr, &mesh, &units, 320);
  plan::FinishPlanBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

TEST(Plan, ReadsShardedPlans) {
  Status status;
  Faults good;
  good.deps = {0};
  Plan loaded = load(buildShardedPlan(good), status);
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(fsdprt_plan_world_size(loaded.get()), 4);
  ASSERT_EQ(fsdprt_plan_mesh_rank(loaded.get()), 1u);
  EXPECT_EQ(fsdprt_plan_mesh_dim(loaded.get(), 0), 4);
  EXPECT_EQ(fsdprt_plan_peak_bytes(loaded.get()), 320u);
  ASSERT_EQ(fsdprt_plan_num_units(loaded.get()), 1u);
  fsdprt_unit_desc_t unit;
  status.reset(fsdprt_plan_unit(loaded.get(), 0, &unit));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(unit.name, "unit:a");
  EXPECT_STREQ(unit.module, "a");
  EXPECT_EQ(unit.num_params, 1u);
  EXPECT_EQ(unit.padded_numel, 16);
  EXPECT_EQ(unit.group_size, 4);
  EXPECT_EQ(unit.shard_numel, 4);
  fsdprt_tensor_desc_t member;
  status.reset(fsdprt_plan_unit_param(loaded.get(), 0, 0, &member));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(member.name, "a.w");
  ASSERT_EQ(member.rank, 2u);
  status.reset(fsdprt_plan_unit_param(loaded.get(), 0, 1, &member));
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_OUT_OF_RANGE);
  fsdprt_kernel_desc_t kernel;
  status.reset(fsdprt_plan_kernel(loaded.get(), 0, &kernel));
  ASSERT_EQ(status, nullptr);
  EXPECT_STREQ(kernel.op, "all_gather");
  EXPECT_EQ(kernel.stream, 1);
  status.reset(fsdprt_plan_kernel(loaded.get(), 1, &kernel));
  ASSERT_EQ(status, nullptr);
  EXPECT_EQ(kernel.stream, 0);
  EXPECT_EQ(kernel.num_deps, 1u);

  // Sessions run one rank: a 4-rank plan is refused with the reason.
  fsdprt_session_t *session = nullptr;
  status.reset(fsdprt_session_create(loaded.get(), nullptr, 1, &session));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(session, nullptr);
  EXPECT_NE(std::string(fsdprt_status_message(status.get()))
                .find("the plan is sharded over 4 ranks"),
            std::string::npos);
}

TEST(Plan, RunsAOneRankShardedPlan) {
  // A mesh of one rank: the unit's shard is the whole (padded) flat
  // buffer, read through the layout; the gather is a copy.
  std::string dir = ::testing::TempDir();
  std::vector<float> weights(16);
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] = 0.5f * static_cast<float>(i) - 3;
  FILE *file = std::fopen((dir + "/w.bin").c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(std::fwrite(weights.data(), sizeof(float), weights.size(), file),
            weights.size());
  std::fclose(file);

  Faults oneRank;
  oneRank.worldSize = 1;
  oneRank.meshSize = 1;
  oneRank.deps = {0};
  Status status;
  Plan loaded = load(buildShardedPlan(oneRank), status);
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  fsdprt_session_t *session = nullptr;
  status.reset(fsdprt_session_create(loaded.get(), dir.c_str(), 1, &session));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  std::unique_ptr<fsdprt_session_t, void (*)(fsdprt_session_t *)> owner(
      session, fsdprt_session_destroy);
  status.reset(fsdprt_session_load_weights(session));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  status.reset(fsdprt_session_run(session));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  std::vector<float> y(16);
  status.reset(fsdprt_session_get_output(session, "y", y.data(), 64));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(y, weights);
  // The member by its FQN, and the unit's shard by the unit's name.
  std::vector<float> member(16);
  status.reset(fsdprt_session_read_state(session, "a.w", member.data(), 64));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(member, weights);
  status.reset(fsdprt_session_read_state(session, "unit:a", member.data(), 64));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  EXPECT_EQ(member, weights);
}

TEST(Plan, RefusesInconsistentShardedPlans) {
  auto refused = [](void (*spoil)(Faults &)) {
    Faults faults;
    spoil(faults);
    Status status;
    Plan loaded = load(buildShardedPlan(faults), status);
    EXPECT_EQ(loaded, nullptr);
    return status ? std::string(fsdprt_status_message(status.get()))
                  : std::string("accepted");
  };
  EXPECT_EQ(refused([](Faults &f) { f.paddedNumel = 20; }),
            "the plan in memory: unit 'unit:a' stores 20 elements, but its "
            "members' layout over 4 ranks has 16");
  EXPECT_EQ(refused([](Faults &f) { f.axis = 1; }),
            "the plan in memory: unit 'unit:a': mesh axis 1 is not an axis "
            "of the 1-D mesh");
  EXPECT_EQ(refused([](Faults &f) { f.stream = 0; }),
            "the plan in memory: kernel 0 "
            "(all_gather at a) is a collective on "
            "the compute stream");
  EXPECT_EQ(refused([](Faults &f) { f.gathered = 12; }),
            "the plan in memory: kernel 0 (all_gather at a) over 4 ranks "
            "reads 16 bytes and writes 48");
  EXPECT_EQ(refused([](Faults &f) { f.deps = {1}; }),
            "the plan in memory: kernel 1 (copy at b) depends on kernel 1, "
            "which is not an earlier kernel of the other stream");
  EXPECT_EQ(refused([](Faults &f) { f.worldSize = 2; }),
            "the plan in memory: the plan is for 2 ranks but its mesh has 4");
}

TEST(Plan, RefusesSizesThatOverflow) {
  // What a compiler that wrapped a byte count would write: a [2^62, 8] f32
  // input in a 128-byte buffer (--describe said "128 bytes per rank").
  fsdprt::test::PlanBuilder b;
  uint32_t x = b.raw(fsdprt::test::PlanBuilder::Activations, 0, 128,
                     plan::DType::F32, {int64_t(1) << 62, 8});
  b.declareInput("x", plan::DType::F32, {int64_t(1) << 62, 8}, x);
  b.kernel("relu", {x}, {b.output("y", plan::DType::F32, {4})});
  Status status;
  Plan loaded = load(b.finish(), status);
  EXPECT_EQ(loaded, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(std::string(fsdprt_status_message(status.get())),
            "the plan in memory: buffer 0 has more bytes than int64 can count");
  // A mesh whose ranks int64 cannot count.
  status.reset();
  flatbuffers::FlatBufferBuilder fb;
  std::vector<int64_t> mesh = {int64_t(1) << 32, int64_t(1) << 32};
  auto root = plan::CreatePlanDirect(fb, FSDPRT_PLAN_SCHEMA_VERSION, "test",
                                     ".", 1, nullptr, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, nullptr, nullptr, &mesh);
  plan::FinishPlanBuffer(fb, root);
  loaded = load({fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize()},
                status);
  EXPECT_EQ(loaded, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(std::string(fsdprt_status_message(status.get())),
            "the plan in memory: the plan's mesh has more ranks than int64 "
            "can count");
}

TEST(Plan, RefusesFilesThatAreNotRegular) {
  // /dev/zero would be read until memory runs out.
  fsdprt_plan_t *raw = nullptr;
  Status status(fsdprt_plan_load_file("/dev/zero", &raw));
  EXPECT_EQ(raw, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(std::string(fsdprt_status_message(status.get())),
            "cannot load plan '/dev/zero': not a regular file");
}

} // namespace
