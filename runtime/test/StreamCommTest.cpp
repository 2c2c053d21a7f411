//===- StreamCommTest.cpp - Collectives on a stream of their own ----------===//
//
// The GPU's communicator (backends/cuda/stream_comm.cpp, which NCCL runs
// under on a GPU) on the fake device, as a local group's ranks use it:
//  - two ranks (threads) all-gather, reduce-scatter (avg, bf16) and
//    all-reduce arena memory; each collective is timed on its stream;
//  - a kernel that reads a collective's output before the collective was
//    waited for, or writes its input, is refused by the hazard checker,
//    naming both;
//  - a peer that never comes: the watchdog ends the collective at the
//    deadline, naming it, and every later one fails at once;
//  - a local group's group prepared again before each collective (as the
//    mean over ranks and the checkpoint agreements do) keeps meeting in
//    order (it used to start its count again: a crash on --local-ranks
//    with --save-checkpoint);
//  - on a device the host may not address (as a GPU's), a local group
//    reduces device memory and host memory (the mean loss), each copied
//    as what it is, and a copy whose device side is host memory fails,
//    as cudaMemcpy does (both ran wrong on an H200 before).
// Through the runtime's internal interface (the static library).
//
//===----------------------------------------------------------------------===//

#include "../src/backend.h"
#include "../src/comm.h"
#include "../src/half.h"
#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace fsdprt;
using fsdprt::test::PlanBuilder;

namespace {

struct Group {
  fsdprt_local_group_t *group = nullptr;
  Group(int world, double timeout) {
    fsdprt_status_t status = fsdprt_local_group_create(world, timeout, &group);
    EXPECT_EQ(status, nullptr);
    fsdprt_status_free(status);
  }
  ~Group() { fsdprt_local_group_destroy(group); }
};

/// One rank: the fake device, its compute stream and its communicator.
/// `gpuLike`: "fake-cuda:cudnn", whose memory the runtime may not address
/// directly, as a GPU's: the ranks meet through download and upload.
struct Rank {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Communicator> comm;
  std::vector<void *> memory;

  Rank(Group &group, int rank, int world, bool gpuLike = false)
      : backend(createFakeCudaBackend(/*strict=*/true, gpuLike)),
        stream(backend->createStream()) {
    comm =
        createLocalCommunicator(*group.group, rank, {world}, *backend, *stream);
  }
  ~Rank() {
    comm.reset();
    for (void *m : memory)
      backend->free(m);
  }
  Tensor tensor(fsdprt_dtype_t dtype, int64_t n) {
    Tensor t;
    t.dtype = dtype;
    t.shape = {n};
    t.numel = n;
    t.data = backend->allocate(t.bytes(), 256);
    memory.push_back(t.data);
    return t;
  }
  Tensor floats(const std::vector<float> &v) {
    Tensor t = tensor(FSDPRT_F32, static_cast<int64_t>(v.size()));
    backend->upload(t.data, v.data(), t.bytes());
    return t;
  }
  std::vector<float> read(const Tensor &t) {
    std::vector<float> v(t.numel);
    backend->download(v.data(), t.data, t.bytes());
    return v;
  }
  /// Starts `op`, waits for it on the stream and synchronises: "" or the
  /// failure.
  std::string run(const std::string &op, const Tensor &in, const Tensor &out,
                  Reduction reduction = Reduction::Sum) {
    std::string error;
    std::unique_ptr<Pending> pending =
        comm->start(op, {0}, in, out, reduction, op, error);
    if (!pending)
      return error;
    if (std::string waited = comm->wait(*pending); !waited.empty())
      return waited;
    if (std::string failed = stream->synchronize().message; !failed.empty())
      return failed;
    if (!comm->test(*pending) || comm->deviceSeconds(*pending) < 0)
      return op +
             ": not seen complete, or not timed, after the synchronisation";
    return "";
  }
};

} // namespace

TEST(StreamComm, LocalRanksOnTheFakeDeviceCollectOnTheirOwnStream) {
  Group group(2, 30);
  std::vector<std::string> failures(2);
  auto rankMain = [&](int r) {
    Rank me(group, r, 2);
    std::string &failed = failures[r];
    auto check = [&](bool ok, const std::string &what) {
      if (!ok && failed.empty())
        failed = "rank " + std::to_string(r) + ": " + what;
    };
    check(me.comm->addGroup({0}).empty(), "addGroup");
    // All-gather: rank order.
    Tensor mine = me.floats({float(r), float(10 + r)});
    Tensor all = me.tensor(FSDPRT_F32, 4);
    std::string error = me.run("all_gather", mine, all);
    check(error.empty(), error);
    check(me.read(all) == std::vector<float>{0, 10, 1, 11},
          "all_gather's values");
    // Reduce-scatter, averaged, in bf16: rank r gets its half of the mean.
    std::vector<uint16_t> halves;
    for (float v : {1.0f, 2.0f, 3.0f, 4.0f})
      halves.push_back(floatToHalf(v * (r + 1), FSDPRT_BF16));
    Tensor in = me.tensor(FSDPRT_BF16, 4), out = me.tensor(FSDPRT_BF16, 2);
    me.backend->upload(in.data, halves.data(), in.bytes());
    error = me.run("reduce_scatter", in, out, Reduction::Avg);
    check(error.empty(), error);
    uint16_t got[2];
    me.backend->download(got, out.data, sizeof got);
    check(halfToFloat(got[0], FSDPRT_BF16) == 1.5f * (2 * r + 1) &&
              halfToFloat(got[1], FSDPRT_BF16) == 1.5f * (2 * r + 2),
          "reduce_scatter's mean");
    // All-reduce, summed.
    Tensor x = me.floats({float(r + 1)}), sum = me.tensor(FSDPRT_F32, 1);
    error = me.run("all_reduce", x, sum);
    check(error.empty(), error);
    check(me.read(sum) == std::vector<float>{3}, "all_reduce's sum");
  };
  std::thread other(rankMain, 1);
  rankMain(0);
  other.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

TEST(StreamComm, ATimeoutPastTheClocksRangeWaitsAsNoneDoes) {
  // now() + 1e19 s overflowed steady_clock into the past: the ranks spun
  // at the deadline forever instead of meeting.
  for (double timeout : {1e19, 1e300}) {
    Group group(2, timeout);
    std::vector<std::string> errors(2);
    std::vector<float> sums(2);
    auto rankMain = [&](int r) {
      Rank me(group, r, 2);
      errors[r] = me.comm->addGroup({0});
      Tensor x = me.floats({float(r + 1)}), sum = me.tensor(FSDPRT_F32, 1);
      if (errors[r].empty())
        errors[r] = me.run("all_reduce", x, sum);
      sums[r] = me.read(sum)[0];
    };
    std::thread other(rankMain, 1);
    rankMain(0);
    other.join();
    EXPECT_EQ(errors[0], "") << timeout;
    EXPECT_EQ(errors[1], "") << timeout;
    EXPECT_EQ(sums, (std::vector<float>{3, 3})) << timeout;
  }
}

TEST(StreamComm, AGpuLikeLocalGroupReducesDeviceAndHostMemory) {
  Group group(2, 30);
  std::vector<std::string> failures(2);
  auto rankMain = [&](int r) {
    Rank me(group, r, 2, /*gpuLike=*/true);
    std::string &failed = failures[r];
    auto check = [&](bool ok, const std::string &what) {
      if (!ok && failed.empty())
        failed = "rank " + std::to_string(r) + ": " + what;
    };
    check(me.comm->addGroup({0}).empty(), "addGroup");
    Tensor x = me.floats({float(r + 1), 5}), sum = me.tensor(FSDPRT_F32, 2);
    std::string error = me.comm->allReduce({0}, x, sum, Reduction::Sum, "sum");
    check(error.empty(), error);
    check(me.read(sum) == std::vector<float>{3, 10}, "the device sum");
    double loss = 2.0 * (r + 1), mean = 0;
    Tensor in{&loss, FSDPRT_F64, {1}, 1}, out{&mean, FSDPRT_F64, {1}, 1};
    error = me.comm->allReduce({0}, in, out, Reduction::Avg, "mean loss");
    check(error.empty(), error);
    check(mean == 3.0, "the host mean: " + std::to_string(mean));
    // A host address given as the device side of a copy.
    float host[2] = {0, 0};
    bool refused = false;
    try {
      me.backend->upload(host, host, sizeof host);
    } catch (const std::exception &e) {
      refused = std::string(e.what()).find("not inside one allocation") !=
                std::string::npos;
    }
    check(refused, "an upload to host memory was not refused");
  };
  std::thread other(rankMain, 1);
  rankMain(0);
  other.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

TEST(StreamComm, AKernelTouchingACollectiveInFlightIsAHazard) {
  PlanBuilder b;
  uint32_t x = b.input("x", plan::DType::F32, {4});
  uint32_t y = b.output("y", plan::DType::F32, {4});
  b.kernel("relu", {x}, {y});
  std::vector<uint8_t> bytes = b.finish();
  const plan::Plan *p = plan::GetPlan(bytes.data());

  Group group(1, 30);
  Rank me(group, 0, 1);
  ASSERT_EQ(me.comm->addGroup({0}), "");
  Tensor in = me.floats({1, -2, 3, -4}), out = me.tensor(FSDPRT_F32, 4);
  Tensor elsewhere = me.tensor(FSDPRT_F32, 4);
  Workspace workspace;
  auto kernel = [&](const Tensor &from, const Tensor &to) {
    KernelArgs args{{from}, {to},       Attrs(*p->kernels()->Get(0)),
                    1,      &workspace, "the relu"};
    return me.backend->prepare("relu", args);
  };
  KernelFn readsOut = kernel(out, elsewhere), writesIn = kernel(elsewhere, in);

  // Read before the wait: the compute stream does not know the
  // collective's stream wrote it.
  std::string error;
  std::unique_ptr<Pending> pending = me.comm->start(
      "all_reduce", {0}, in, out, Reduction::Sum, "all_reduce", error);
  ASSERT_TRUE(pending) << error;
  std::string refused = me.stream->launch(readsOut);
  EXPECT_NE(refused.find("stream hazard: 'the relu'"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("that 'all_reduce' on stream 1 wrote"),
            std::string::npos)
      << refused;
  ASSERT_EQ(me.stream->synchronize().message, "");

  // Its input overwritten before the wait: the same.
  pending = me.comm->start("all_reduce", {0}, in, out, Reduction::Sum,
                           "all_reduce", error);
  ASSERT_TRUE(pending) << error;
  refused = me.stream->launch(writesIn);
  EXPECT_NE(refused.find("stream hazard"), std::string::npos) << refused;
  EXPECT_NE(refused.find("'all_reduce' on stream 1 read"), std::string::npos)
      << refused;
  ASSERT_EQ(me.stream->synchronize().message, "");

  // Waited for: both run.
  pending = me.comm->start("all_reduce", {0}, in, out, Reduction::Sum,
                           "all_reduce", error);
  ASSERT_TRUE(pending) << error;
  ASSERT_EQ(me.comm->wait(*pending), "");
  EXPECT_EQ(me.stream->launch(readsOut), "");
  EXPECT_EQ(me.stream->launch(writesIn), "");
  ASSERT_EQ(me.stream->synchronize().message, "");
  EXPECT_EQ(me.read(elsewhere), (std::vector<float>{1, 0, 3, 0}));
}

TEST(StreamComm, APeerThatNeverComesEndsTheCollectiveAtTheDeadline) {
  Group group(2, 0.3);
  Rank me(group, 0, 2); // rank 1 never starts
  ASSERT_EQ(me.comm->addGroup({0}), "");
  Tensor mine = me.floats({1, 2}), all = me.tensor(FSDPRT_F32, 4);
  auto began = std::chrono::steady_clock::now();
  std::string error = me.run("all_gather", mine, all);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  EXPECT_NE(error.find("all_gather on rank 0"), std::string::npos) << error;
  EXPECT_NE(error.find("timed out after"), std::string::npos) << error;
  EXPECT_GE(seconds, 0.25);
  EXPECT_LT(seconds, 10.0);
  // Later collectives fail at once, naming why.
  began = std::chrono::steady_clock::now();
  error = me.run("all_reduce", mine, mine);
  EXPECT_NE(error.find("all_reduce on rank 0"), std::string::npos) << error;
  EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count(),
      0.25);
}

TEST(StreamComm, ALocalGroupPreparedAgainGoesOnWithItsMeetings) {
  // The mean over ranks and the checkpoint agreements prepare their group
  // before every call: a rank that moved on must meet the others at the
  // next meeting, not at the one it just left (on the CPU: the plain
  // local communicator).
  Group group(2, 30);
  std::vector<std::string> failures(2);
  auto rankMain = [&](int r) {
    std::unique_ptr<Backend> backend = createCpuBackend();
    std::unique_ptr<Stream> stream = backend->createStream();
    std::unique_ptr<Communicator> comm =
        createLocalCommunicator(*group.group, r, {2}, *backend, *stream);
    for (int i = 0; i < 200 && failures[r].empty(); ++i) {
      float mine = float(i * 10 + r), sum = 0;
      Tensor in{&mine, FSDPRT_F32, {1}, 1}, out{&sum, FSDPRT_F32, {1}, 1};
      std::string error = comm->addGroup({0});
      if (error.empty())
        error = comm->allReduce({0}, in, out, Reduction::Sum, "all_reduce");
      if (error.empty() && sum != float(i * 20 + 1))
        error =
            "meeting " + std::to_string(i) + " summed " + std::to_string(sum);
      failures[r] = error;
    }
  };
  std::thread other(rankMain, 1);
  rankMain(0);
  other.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}
