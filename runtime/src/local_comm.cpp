//===- local_comm.cpp - Ranks of one process, meeting in memory -----------===//
//
// A local group: N sessions of one process, one per thread, whose
// collectives meet in host memory. It is how multi-rank plans run on one
// device, which NCCL refuses (two ranks on one GPU) and Open MPI here
// cannot do for device memory, and on the fake device in CI.
//
// Each collective is a rendezvous. Every member of the group copies its
// input to the host, through its backend's download. The last to arrive
// computes every member's output: an all-gather concatenates in group
// order, and a reduction sums in group order, in fp32 for half-precision
// tensors, then rounds back. Each member then uploads its own output.
// Members meet by (group, sequence number): the ranks of a group call its
// collectives in the same order, as MPI requires too. A member that waits
// longer than the group's deadline fails the collective with a message
// naming it and the ranks that never came, and the group is then broken:
// every later collective fails at once, so no rank hangs.
//
// On the fake device (memory the host can address) the ranks' collectives
// run as on a GPU instead: stream_comm.h's communicator, on a stream of
// their own ordered by events, each admitted by the hazard checker; the
// meeting then reads and writes the arenas directly.
//
//===----------------------------------------------------------------------===//

#include "../backends/cuda/stream_comm.h"
#include "comm.h"
#include "half.h"
#include "status.h"

#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

struct fsdprt_local_group_s {
  int world = 1;
  double timeout = 300;

  /// One collective in flight: each member's input, then its output.
  struct Meeting {
    std::vector<std::vector<char>> in, out;
    int arrived = 0, left = 0;
    bool done = false;
  };
  std::mutex mutex;
  std::condition_variable changed;
  /// (axes, group color, sequence number) -> its meeting.
  std::map<std::tuple<std::vector<int64_t>, int64_t, uint64_t>, Meeting> meetings;
  std::string broken; // why the group failed ("" while it works)
};

namespace fsdprt {
namespace {

/// Element `i` of `bytes` (of `dtype`) as a double, and back.
double load(fsdprt_dtype_t dtype, const char *bytes, int64_t i) {
  switch (dtype) {
  case FSDPRT_F32: return reinterpret_cast<const float *>(bytes)[i];
  case FSDPRT_F64: return reinterpret_cast<const double *>(bytes)[i];
  default: return halfToFloat(reinterpret_cast<const uint16_t *>(bytes)[i], dtype);
  }
}

void store(fsdprt_dtype_t dtype, char *bytes, int64_t i, double value) {
  switch (dtype) {
  case FSDPRT_F32: reinterpret_cast<float *>(bytes)[i] = static_cast<float>(value); break;
  case FSDPRT_F64: reinterpret_cast<double *>(bytes)[i] = value; break;
  default:
    reinterpret_cast<uint16_t *>(bytes)[i] = floatToHalf(static_cast<float>(value), dtype);
  }
}

/// The pending result of a collective that already completed (the
/// rendezvous blocks, so start runs it and wait reports it).
struct Done : Pending {
  std::string error;
};

class LocalCommunicator : public Communicator {
public:
  /// `direct`: the backend's memory is host memory, read and written in
  /// place (the fake device, where a download would synchronise it).
  /// `device`: the backend's device, if any; tensors it does not own (a
  /// loss to average, a status to agree on) are host memory, copied as
  /// such.
  LocalCommunicator(fsdprt_local_group_s &group, int rank,
                    std::vector<int64_t> mesh, Backend &backend, bool direct,
                    cuda::Device *device)
      : group(group), rank_(rank), mesh(std::move(mesh)), backend(backend),
        direct(direct), device(device) {}

  int rank() const override { return rank_; }
  int size() const override { return group.world; }

  std::string addGroup(const std::vector<int64_t> &axes) override {
    for (int64_t axis : axes)
      if (axis < 0 || axis >= static_cast<int64_t>(mesh.size()))
        return "rank " + std::to_string(rank_) + ": mesh axis " +
               std::to_string(axis) + " is not one of the plan's " +
               std::to_string(mesh.size());
    // Prepared again (the mean over ranks and the checkpoint agreements
    // ask each time): its sequence of meetings goes on.
    if (members.count(axes))
      return "";
    GroupPlace place = groupPlace(mesh, rank_, axes);
    Member m;
    m.color = place.color;
    m.index = place.key;
    m.size = place.size;
    members[axes] = m;
    return "";
  }

  std::unique_ptr<Pending> start(const std::string &op,
                                 const std::vector<int64_t> &axes,
                                 const Tensor &in, const Tensor &out,
                                 Reduction reduction, const std::string &what,
                                 std::string &error) override {
    auto done = std::make_unique<Done>();
    done->error = meet(op, axes, in, out, reduction, what);
    error = "";
    return done;
  }
  std::string wait(Pending &pending) override {
    return static_cast<Done &>(pending).error;
  }
  bool test(Pending &) override { return true; }

  /// Rank 0's bytes to every rank: host memory, through a meeting of all.
  std::string broadcast(void *data, size_t bytes, const std::string &what) override {
    std::vector<int64_t> all(mesh.size());
    for (size_t d = 0; d < all.size(); ++d)
      all[d] = static_cast<int64_t>(d);
    if (!members.count(all))
      addGroup(all);
    std::vector<char> mine(static_cast<char *>(data), static_cast<char *>(data) + bytes);
    std::vector<char> result;
    std::string error = rendezvous(all, what, std::move(mine), result,
                                   [](fsdprt_local_group_s::Meeting &m) {
                                     for (auto &out : m.out)
                                       out = m.in[0];
                                   });
    if (error.empty() && result.size() == bytes)
      std::memcpy(data, result.data(), bytes);
    return error;
  }

private:
  struct Member {
    int64_t color = 0, index = 0, size = 1;
    uint64_t sequence = 0;
  };

  std::string meet(const std::string &op, const std::vector<int64_t> &axes,
                   const Tensor &in, const Tensor &out, Reduction reduction,
                   const std::string &what) {
    auto it = members.find(axes);
    if (it == members.end())
      return what + " on rank " + std::to_string(rank_) +
             ": its group was not prepared";
    fsdprt_dtype_t dtype = in.dtype;
    if (dtype != FSDPRT_F32 && dtype != FSDPRT_F64 && !isHalf(dtype))
      return what + " on rank " + std::to_string(rank_) + ": " +
             fsdprt_dtype_name(dtype) +
             " tensors are not communicated (floating point ones are)";
    int64_t n = it->second.size;
    std::vector<char> mine(in.bytes()), result;
    if (inHost(in.data))
      std::memcpy(mine.data(), in.data, in.bytes());
    else
      backend.download(mine.data(), in.data, in.bytes());
    size_t outBytes = out.bytes();
    std::string error = rendezvous(axes, what, std::move(mine), result,
                                   [&](fsdprt_local_group_s::Meeting &m) {
      if (op == "all_gather") {
        std::vector<char> whole;
        for (const auto &part : m.in)
          whole.insert(whole.end(), part.begin(), part.end());
        for (auto &o : m.out)
          o = whole;
        return;
      }
      // A sum in group order (half precision in fp32), averaged.
      int64_t count = static_cast<int64_t>(m.in[0].size() / fsdprt_dtype_size(dtype));
      std::vector<double> sum(count, 0.0);
      for (const auto &part : m.in)
        for (int64_t i = 0; i < count; ++i)
          sum[i] = dtype == FSDPRT_F64 ? sum[i] + load(dtype, part.data(), i)
                                       : static_cast<float>(sum[i]) +
                                             static_cast<float>(load(dtype, part.data(), i));
      if (reduction == Reduction::Avg)
        for (double &v : sum)
          v = dtype == FSDPRT_F64 ? v / n
                                  : static_cast<float>(v) * (1.0f / static_cast<float>(n));
      std::vector<char> reduced(m.in[0].size());
      for (int64_t i = 0; i < count; ++i)
        store(dtype, reduced.data(), i, sum[i]);
      size_t slice = reduced.size() / n;
      for (int64_t k = 0; k < n; ++k)
        m.out[k] = op == "reduce_scatter"
                       ? std::vector<char>(reduced.begin() + k * slice,
                                           reduced.begin() + (k + 1) * slice)
                       : reduced;
    });
    if (!error.empty())
      return error;
    if (result.size() != outBytes)
      return what + " on rank " + std::to_string(rank_) + ": the result has " +
             std::to_string(result.size()) + " bytes, the output " +
             std::to_string(outBytes);
    if (inHost(out.data))
      std::memcpy(out.data, result.data(), outBytes);
    else
      backend.upload(out.data, result.data(), outBytes);
    return "";
  }

  /// Whether `p` is read and written in place: host memory, or the fake
  /// device's (a real device's goes through download and upload).
  bool inHost(const void *p) const {
    return direct || (device && !device->owns(p));
  }

  /// Hands `mine` to the meeting of `axes`' group and waits for its
  /// result; the last member to arrive runs `combine` on everyone's.
  template <class Combine>
  std::string rendezvous(const std::vector<int64_t> &axes, const std::string &what,
                         std::vector<char> mine, std::vector<char> &result,
                         Combine combine) {
    Member &me = members[axes];
    auto key = std::make_tuple(axes, me.color, me.sequence++);
    std::unique_lock<std::mutex> lock(group.mutex);
    if (!group.broken.empty())
      return what + " on rank " + std::to_string(rank_) + ": " + group.broken;
    auto &m = group.meetings[key];
    if (m.in.empty()) {
      m.in.resize(me.size);
      m.out.resize(me.size);
    }
    m.in[me.index] = std::move(mine);
    if (++m.arrived == me.size) {
      combine(m);
      m.done = true;
      group.changed.notify_all();
    }
    // steady_clock counts nanoseconds in 64 bits (292 years): a deadline
    // of 1e19 s overflowed into the past and the ranks spun forever. A
    // timeout past a century waits as no timeout does.
    bool bounded = group.timeout > 0 && group.timeout < 3.15e9;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(bounded ? group.timeout : 0);
    while (!m.done && group.broken.empty()) {
      if (!bounded)
        group.changed.wait(lock);
      else if (group.changed.wait_until(lock, deadline) == std::cv_status::timeout &&
               !m.done) {
        group.broken = what + " timed out after " + std::to_string(group.timeout) +
                       " s on rank " + std::to_string(rank_) + ": " +
                       std::to_string(me.size - m.arrived) + " of " +
                       std::to_string(me.size) +
                       " ranks of its group never came (a rank failed or "
                       "stalled)";
        group.changed.notify_all();
      }
    }
    if (!m.done)
      return what + " on rank " + std::to_string(rank_) + ": " + group.broken;
    result = std::move(m.out[me.index]);
    if (++m.left == me.size)
      group.meetings.erase(key);
    return "";
  }

  fsdprt_local_group_s &group;
  int rank_;
  std::vector<int64_t> mesh;
  Backend &backend;
  bool direct;
  cuda::Device *device;
  std::map<std::vector<int64_t>, Member> members;
};

/// A local group's collectives on the fake device's collective stream:
/// admitted there by the hazard checker with the bytes they read and
/// write, then met in place. The stream runs its work as it is launched,
/// so the meeting happens at the launch.
class LocalCollectives : public cuda::DeviceCollectives {
public:
  LocalCollectives(fsdprt_local_group_s &group, cuda::Device &device,
                   Communicator &local)
      : group(group), device(device), local(local) {}
  std::string addGroup(const std::vector<int64_t> &axes) override {
    return local.addGroup(axes);
  }
  std::string enqueue(const std::string &op, const std::vector<int64_t> &axes,
                      const Tensor &in, const Tensor &out, Reduction reduction,
                      cuda::DeviceStream &stream,
                      const std::string &what) override {
    cuda::Work work{what, {}, {}};
    work.reads.push_back(cuda::rangeOf(in.data, in.bytes()));
    work.writes.push_back(cuda::rangeOf(out.data, out.bytes()));
    if (std::string refused = device.admit(stream, work); !refused.empty())
      return what + " on rank " + std::to_string(local.rank()) + ": " + refused;
    return local.collective(op, axes, in, out, reduction, what);
  }
  void abort(const std::string &why) override {
    fsdprt_local_group_abort(&group, why.c_str());
  }

private:
  fsdprt_local_group_s &group;
  cuda::Device &device;
  Communicator &local;
};

} // namespace

int localGroupSize(const fsdprt_local_group_s &group) { return group.world; }

std::unique_ptr<Communicator>
createLocalCommunicator(fsdprt_local_group_s &group, int rank,
                        std::vector<int64_t> mesh, Backend &backend,
                        Stream &compute) {
  cuda::Device *device = cuda::deviceOf(backend);
  cuda::DeviceStream *stream = cuda::deviceStreamOf(compute);
  bool direct = device && stream && device->hostAddressable();
  auto local = std::make_unique<LocalCommunicator>(group, rank, std::move(mesh),
                                                   backend, direct, device);
  if (!direct)
    return local;
  auto library = std::make_unique<LocalCollectives>(group, *device, *local);
  return cuda::createStreamCommunicator(*device, *stream, std::move(library),
                                        std::move(local), rank, group.world,
                                        group.timeout);
}

} // namespace fsdprt

extern "C" {

fsdprt_status_t fsdprt_local_group_create(int world_size, double timeout_seconds,
                                          fsdprt_local_group_t **out_group) {
  if (!out_group)
    return fsdprt::makeStatus(FSDPRT_INVALID_ARGUMENT,
                              "fsdprt_local_group_create: NULL argument");
  *out_group = nullptr;
  if (world_size < 1 || world_size > 4096)
    return fsdprt::makeStatus(FSDPRT_INVALID_ARGUMENT,
                              "fsdprt_local_group_create: world_size must be 1 to "
                              "4096, not " + std::to_string(world_size));
  if (!std::isfinite(timeout_seconds) || timeout_seconds < 0)
    return fsdprt::makeStatus(FSDPRT_INVALID_ARGUMENT,
                              "fsdprt_local_group_create: timeout_seconds must be a "
                              "finite number >= 0 (0: no deadline)");
  auto *group = new fsdprt_local_group_s;
  group->world = world_size;
  group->timeout = timeout_seconds;
  *out_group = group;
  return nullptr;
}

void fsdprt_local_group_abort(fsdprt_local_group_t *group, const char *reason) {
  if (!group || !reason)
    return;
  std::lock_guard<std::mutex> lock(group->mutex);
  if (group->broken.empty())
    group->broken = std::string("another rank failed: ") + reason;
  group->changed.notify_all();
}

void fsdprt_local_group_destroy(fsdprt_local_group_t *group) { delete group; }

} // extern "C"
