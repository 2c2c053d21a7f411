//===- PlanTest.cpp - Loading, verifying and refusing plans ---------------===//

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

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
  auto input = plan::CreateTensorDescDirect(b, "input_ids", plan::DType::I64,
                                            &shape, 0);
  std::vector<int64_t> scalar;
  auto output = plan::CreateTensorDescDirect(b, "loss", plan::DType::F32,
                                             &scalar, 1);
  auto weight = plan::CreateWeightRefDirect(
      b, "wte.weight", plan::StateKind::Param, "gpt2.onnx", 36169, 8192, 2);
  std::vector<flatbuffers::Offset<plan::TensorDesc>> inputs = {input};
  std::vector<flatbuffers::Offset<plan::TensorDesc>> outputs = {output};
  std::vector<flatbuffers::Offset<plan::WeightRef>> weights = {weight};
  auto root = plan::CreatePlanDirect(b, version, "test", ".", 1, nullptr,
                                     nullptr, &inputs, &outputs, nullptr,
                                     &weights);
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
  EXPECT_EQ(fsdprt_plan_schema_version(loaded.get()), FSDPRT_PLAN_SCHEMA_VERSION);
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

} // namespace
