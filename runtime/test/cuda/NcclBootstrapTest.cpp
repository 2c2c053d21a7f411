//===- NcclBootstrapTest.cpp - NCCL's start-up and watchdog, no GPU -------===//
//
// The NCCL communicator's host code (backends/cuda/nccl_bootstrap.h): the
// unique id's stores and the watchdog that aborts a collective past its
// deadline. No NCCL and no GPU: the abort is a function the test records.
//
//===----------------------------------------------------------------------===//

#include "../../backends/cuda/nccl_bootstrap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

using namespace fsdprt::cuda;
namespace fs = std::filesystem;

namespace {

UniqueId randomId(unsigned seed) {
  std::mt19937 rng(seed);
  UniqueId id;
  for (uint8_t &b : id)
    b = static_cast<uint8_t>(rng());
  return id;
}

fs::path scratch(const char *name) {
  fs::path dir = fs::temp_directory_path() /
                 ("fsdprt-nccl-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

} // namespace

TEST(CudaHost, NcclIdStoresAreParsedAndBadOnesNamed) {
  IdStore store;
  EXPECT_EQ(parseIdStore("file:/tmp/x", store), "");
  EXPECT_EQ(store.kind, IdStore::File);
  EXPECT_EQ(store.where, "/tmp/x");
  EXPECT_TRUE(makesId(store, 0));
  EXPECT_FALSE(makesId(store, 1));
  EXPECT_EQ(parseIdStore("env:FSDP_NCCL_ID", store), "");
  EXPECT_EQ(store.kind, IdStore::Env);
  EXPECT_FALSE(makesId(store, 0)); // the launcher made it
  for (const char *bad : {"", "file:", "tcp:host:1", "/tmp/x", "env"})
    EXPECT_NE(parseIdStore(bad, store).find("is not file:PATH or env:NAME"),
              std::string::npos)
        << bad;
}

TEST(CudaHost, NcclIdGoesThroughAFileStoreWhileTheOtherRanksWait) {
  fs::path dir = scratch("file");
  IdStore store;
  ASSERT_EQ(parseIdStore("file:" + (dir / "id").string(), store), "");
  UniqueId id = randomId(1);
  // Ranks 1..3 wait for the file rank 0 writes a little later.
  std::vector<UniqueId> got(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] { errors[r] = fetchId(store, 10, got[r]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(publishId(store, id), "");
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_EQ(got[r], id);
  }
  EXPECT_FALSE(fs::exists(dir / "id.tmp"));
  fs::remove_all(dir);
}

TEST(CudaHost, NcclIdFromAFileStoreFailsClearly) {
  fs::path dir = scratch("bad");
  IdStore store;
  ASSERT_EQ(parseIdStore("file:" + (dir / "id").string(), store), "");
  UniqueId id;
  // Nobody writes it: the deadline, naming the file.
  auto start = std::chrono::steady_clock::now();
  std::string error = fetchId(store, 0.2, id);
  EXPECT_NE(error.find("no NCCL id appeared at '" + (dir / "id").string()),
            std::string::npos)
      << error;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            5.0);
  // A file of the wrong size, and a directory.
  std::ofstream(dir / "id") << "short";
  EXPECT_NE(fetchId(store, 1, id).find("has 5 bytes, not 128"), std::string::npos);
  fs::remove(dir / "id");
  fs::create_directory(dir / "id");
  EXPECT_NE(fetchId(store, 1, id).find("is not a regular file"), std::string::npos);
  // Rank 0 cannot write where there is no directory.
  ASSERT_EQ(parseIdStore("file:" + (dir / "none" / "id").string(), store), "");
  EXPECT_NE(publishId(store, randomId(2)).find("cannot write the NCCL id"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(CudaHost, NcclIdGoesThroughAnEnvironmentStoreAsHex) {
  UniqueId id = randomId(3), got;
  std::string hex = idToHex(id);
  EXPECT_EQ(hex.size(), 256u);
  IdStore store;
  ASSERT_EQ(parseIdStore("env:FSDPRT_TEST_NCCL_ID", store), "");
  ::unsetenv("FSDPRT_TEST_NCCL_ID");
  EXPECT_NE(fetchId(store, 1, got).find("is not set"), std::string::npos);
  ::setenv("FSDPRT_TEST_NCCL_ID", hex.c_str(), 1);
  EXPECT_EQ(fetchId(store, 1, got), "");
  EXPECT_EQ(got, id);
  ::setenv("FSDPRT_TEST_NCCL_ID", hex.substr(1).c_str(), 1);
  EXPECT_NE(fetchId(store, 1, got).find("256 hex digits, not 255"), std::string::npos);
  std::string bad = hex;
  bad[7] = 'g';
  ::setenv("FSDPRT_TEST_NCCL_ID", bad.c_str(), 1);
  EXPECT_NE(fetchId(store, 1, got).find("character 7 is not one"), std::string::npos);
  ::unsetenv("FSDPRT_TEST_NCCL_ID");
}

TEST(CudaHost, TheNcclWatchdogAbortsOnceWhenACollectiveOutrunsTheDeadline) {
  std::atomic<int> aborts{0};
  std::string message;
  std::mutex mutex;
  Watchdog dog(0.3, [&](const std::string &m) {
    std::lock_guard<std::mutex> lock(mutex);
    message = m;
    ++aborts;
  }, 0.02);
  // Collectives that end in time never fire it.
  for (int i = 0; i < 5; ++i) {
    uint64_t t = dog.begin("all_gather of unit blocks.0");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    dog.end(t);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(aborts.load(), 0);
  EXPECT_EQ(dog.fired(), "");
  // One that hangs: aborted once, soon after the deadline, named.
  auto start = std::chrono::steady_clock::now();
  dog.begin("reduce_scatter of unit blocks.1");
  while (aborts.load() == 0 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 3.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(aborts.load(), 1);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_NE(message.find("reduce_scatter of unit blocks.1 timed out after"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the deadline is 0.3"), std::string::npos) << message;
  EXPECT_EQ(dog.fired(), message);
}

TEST(CudaHost, TheNcclWatchdogForgetsCollectivesItSeesFinished) {
  // Completion known only by polling (a device event nobody waited for
  // yet): the watchdog asks, and a finished one never fires it.
  std::atomic<int> aborts{0};
  std::atomic<bool> finished{false};
  Watchdog dog(0.2, [&](const std::string &) { ++aborts; }, 0.02);
  dog.begin("all_gather", [&] { return finished.load(); });
  finished = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(aborts.load(), 0);
  // One whose probe never says finished fires it.
  dog.begin("all_reduce", [] { return false; });
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_NE(dog.fired().find("all_reduce timed out"), std::string::npos);
}

TEST(CudaHost, ANcclWatchdogWithoutADeadlineNeverFires) {
  int aborts = 0;
  {
    Watchdog dog(0, [&](const std::string &) { ++aborts; });
    dog.begin("all_reduce");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(aborts, 0);
}
