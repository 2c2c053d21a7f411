//===- CApiCxxTest.cpp - The C API used from C++17 ------------------------===//
//
// Compiled with -Wall -Wextra -pedantic -Werror against the shared library:
// the public header is clean C++17 and its handles work from C++.
//
//===----------------------------------------------------------------------===//

#include "fsdprt/fsdprt.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

struct StatusDeleter {
  void operator()(fsdprt_status_s *status) const { fsdprt_status_free(status); }
};
using Status = std::unique_ptr<fsdprt_status_s, StatusDeleter>;

struct LayoutDeleter {
  void operator()(fsdprt_layout_t *layout) const {
    fsdprt_layout_destroy(layout);
  }
};
using Layout = std::unique_ptr<fsdprt_layout_t, LayoutDeleter>;

TEST(CApi, VersionMatchesHeader) {
  int major = -1, minor = -1, patch = -1;
  fsdprt_version(&major, &minor, &patch);
  EXPECT_EQ(major, FSDPRT_VERSION_MAJOR);
  EXPECT_EQ(minor, FSDPRT_VERSION_MINOR);
  EXPECT_EQ(patch, FSDPRT_VERSION_PATCH);
  EXPECT_EQ(std::string(fsdprt_version_string()),
            std::to_string(major) + "." + std::to_string(minor) + "." +
                std::to_string(patch));
}

TEST(CApi, LayoutShardsThroughHandles) {
  std::vector<int64_t> numels = {5};
  fsdprt_layout_t *raw = nullptr;
  Status status(fsdprt_layout_create(numels.data(), numels.size(), 4, 1, &raw));
  ASSERT_EQ(status, nullptr) << fsdprt_status_message(status.get());
  Layout layout(raw);

  // Rank 3 of a 5-element buffer on 4 ranks holds padding only.
  size_t count = 99;
  status.reset(fsdprt_layout_param_shards(layout.get(), 3, nullptr, 0, &count));
  ASSERT_EQ(status, nullptr);
  EXPECT_EQ(count, 0u);
  int64_t begin = 0, end = 0, padding = 0;
  status.reset(
      fsdprt_layout_shard_range(layout.get(), 3, &begin, &end, &padding));
  ASSERT_EQ(status, nullptr);
  EXPECT_EQ(begin, 6);
  EXPECT_EQ(end, 8);
  EXPECT_EQ(padding, 2);
}

TEST(CApi, ErrorsAreStatusesWithMessages) {
  int64_t numel = -3;
  fsdprt_layout_t *raw = nullptr;
  Status status(fsdprt_layout_create(&numel, 1, 2, 1, &raw));
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(fsdprt_status_code(status.get()), FSDPRT_INVALID_ARGUMENT);
  EXPECT_STREQ(fsdprt_status_message(status.get()),
               "fsdprt_layout_create: parameter 0 has a negative element "
               "count -3");
  EXPECT_EQ(raw, nullptr);

  status.reset(fsdprt_layout_create(&numel, 1, 2, 1, nullptr));
  ASSERT_NE(status, nullptr);
  EXPECT_STREQ(fsdprt_status_message(status.get()),
               "fsdprt_layout_create: out_layout is NULL");
}

TEST(CApi, CheckpointDestinationsReplaceOnlyCheckpoints) {
  std::string dir = ::testing::TempDir() + "/fsdprt_check_destination";
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir +
                         "/experiment' '" + dir + "/ck'")
                            .c_str()),
            0);
  std::ofstream(dir + "/experiment/notes.txt") << "x";
  std::ofstream(dir + "/ck/index.json") << R"({"world_size": 1, "units": []})";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/user'").c_str()), 0);
  std::ofstream(dir + "/user/index.json") << R"({"my": "data"})";
  std::ofstream(dir + "/ck/rank-0.safetensors") << "";
  std::ofstream(dir + "/mine.txt") << "mine";
  auto message = [](fsdprt_status_t raw) {
    Status status(raw);
    return status ? std::string(fsdprt_status_message(status.get()))
                  : std::string("ok");
  };
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/new/nested").c_str(), 1)),
            "ok");
  EXPECT_EQ(
      message(fsdprt_checkpoint_check_destination((dir + "/ck/").c_str(), 1)),
      "ok");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/experiment").c_str(), 1)),
            "refusing to save the checkpoint '" + dir + "/experiment': '" +
                dir +
                "/experiment' holds 'notes.txt', which no checkpoint save "
                "wrote (a save replaces only a checkpoint it wrote; choose "
                "another path or move it away)");
  // A user's index.json (a save replaced it).
  EXPECT_EQ(
      message(fsdprt_checkpoint_check_destination((dir + "/user").c_str(), 1)),
      "refusing to save the checkpoint '" + dir + "/user': '" + dir +
          "/user' holds 'index.json', which is not a sharded "
          "checkpoint's index (no checkpoint save wrote it) (a save "
          "replaces only a checkpoint it wrote; choose another path or "
          "move it away)");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/mine.txt").c_str(), 1)),
            "refusing to save the checkpoint '" + dir + "/mine.txt': '" + dir +
                "/mine.txt' exists and is not a directory (a save replaces "
                "only a checkpoint it wrote; choose another path or move it "
                "away)");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/mine.txt").c_str(), 0)),
            "refusing to overwrite '" + dir + "/mine.txt': '" + dir +
                "/mine.txt' is not a safetensors file (shorter than 8 bytes) "
                "(a save replaces only a full checkpoint it wrote; choose "
                "another path or move it away)");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/missing/full.safetensors").c_str(), 0)),
            "cannot save a full checkpoint as '" + dir +
                "/missing/full.safetensors': its directory '" + dir +
                "/missing' does not exist");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(
                (dir + "/new.safetensors").c_str(), 0)),
            "ok");
  EXPECT_EQ(message(fsdprt_checkpoint_check_destination(nullptr, 0)),
            "fsdprt_checkpoint_check_destination: NULL argument");
}

} // namespace
