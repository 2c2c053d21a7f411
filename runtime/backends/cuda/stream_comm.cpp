//===- stream_comm.cpp - Collectives on a device stream of their own ------===//
//
// stream_comm.h says what this does. Compiled into libfsdprt (the fake
// device's local groups) and into the plugin (NCCL).
//
//===----------------------------------------------------------------------===//

#include "stream_comm.h"
#include "nccl_bootstrap.h"

#include <mutex>

namespace fsdprt::cuda {
namespace {

/// What the watchdog asks about a collective: its end event, once
/// enqueued (before, the collective has not finished).
struct Watched {
  std::mutex mutex;
  std::shared_ptr<DeviceEvent> done;
};

struct StreamPending : Pending {
  /// On the collective's stream: when it could start (after the compute
  /// before it) and when it ended; timed, for deviceSeconds.
  std::unique_ptr<DeviceEvent> begun;
  std::shared_ptr<DeviceEvent> done;
  std::string what;
  Watchdog *dog = nullptr;
  uint64_t ticket = 0;
  ~StreamPending() override {
    if (dog)
      dog->end(ticket);
  }
};

class StreamCommunicator : public Communicator {
public:
  StreamCommunicator(Device &device, DeviceStream &compute,
                     std::unique_ptr<DeviceCollectives> library,
                     std::unique_ptr<Communicator> host, int rank, int world,
                     double timeout)
      : device(device), compute(compute), host(std::move(host)),
        library(std::move(library)), rank_(rank), world(world),
        stream(device.createPriorityStream()),
        dog(timeout,
            [this](const std::string &why) { this->library->abort(why); }) {}

  ~StreamCommunicator() override {
    // Nothing in flight may outlive the stream.
    device.synchronize(*stream);
  }

  int rank() const override { return rank_; }
  int size() const override { return world; }

  std::string addGroup(const std::vector<int64_t> &axes) override {
    if (host)
      if (std::string error = host->addGroup(axes); !error.empty())
        return error;
    uint64_t ticket = dog.begin("the group of mesh axes " + axesName(axes) +
                                " on rank " + std::to_string(rank_));
    std::string error = library->addGroup(axes);
    dog.end(ticket);
    if (std::string why = aborted("preparing a group"); !why.empty())
      return why;
    return error;
  }

  std::unique_ptr<Pending> start(const std::string &op,
                                 const std::vector<int64_t> &axes,
                                 const Tensor &in, const Tensor &out,
                                 Reduction reduction, const std::string &what,
                                 std::string &error) override {
    error = aborted(what);
    if (!error.empty())
      return nullptr;
    if (in.dtype != FSDPRT_F32 && in.dtype != FSDPRT_F64 &&
        in.dtype != FSDPRT_BF16 && in.dtype != FSDPRT_F16) {
      error = what + " on rank " + std::to_string(rank_) + ": " +
              fsdprt_dtype_name(in.dtype) +
              " tensors are not communicated (floating point ones are)";
      return nullptr;
    }
    auto pending = std::make_unique<StreamPending>();
    pending->what = what;
    auto watched = std::make_shared<Watched>();
    // Watched from before the enqueue: a library may block in it (NCCL
    // connects lazily; a local group meets its peers there).
    pending->dog = &dog;
    pending->ticket = dog.begin(
        what + " on rank " + std::to_string(rank_), [watched, &dev = device] {
          std::lock_guard<std::mutex> lock(watched->mutex);
          return watched->done && dev.finished(*watched->done);
        });
    try {
      // After everything the compute stream has before it.
      device.wait(*stream, *device.record(compute));
      pending->begun = device.recordTimed(*stream);
      error = library->enqueue(op, axes, in, out, reduction, *stream, what);
      if (error.empty()) {
        pending->done = device.recordTimed(*stream);
        std::lock_guard<std::mutex> lock(watched->mutex);
        watched->done = pending->done;
      }
    } catch (const DeviceError &e) {
      error = what + " on rank " + std::to_string(rank_) + ": " + e.what();
    }
    if (std::string why = aborted(what); !why.empty())
      error = why;
    return error.empty() ? std::move(pending) : nullptr;
  }

  /// The compute stream waits for the collective (the host does not).
  std::string wait(Pending &base) override {
    auto &pending = static_cast<StreamPending &>(base);
    if (std::string error = aborted(pending.what); !error.empty())
      return error;
    try {
      device.wait(compute, *pending.done);
    } catch (const DeviceError &e) {
      return pending.what + " on rank " + std::to_string(rank_) + ": " +
             e.what();
    }
    return "";
  }

  double deviceSeconds(const Pending &base) override {
    const auto &pending = static_cast<const StreamPending &>(base);
    return device.elapsed(*pending.begun, *pending.done);
  }

  bool test(Pending &base) override {
    return device.finished(*static_cast<StreamPending &>(base).done);
  }

  std::string broadcast(void *data, size_t bytes,
                        const std::string &what) override {
    if (host)
      return host->broadcast(data, bytes, what);
    return what +
           ": a broadcast of host memory needs a host communicator (MPI)";
  }

private:
  /// A collective, waited for; tensors in host memory go through the host
  /// communicator.
  std::string collective(const std::string &op,
                         const std::vector<int64_t> &axes, const Tensor &in,
                         const Tensor &out, Reduction reduction,
                         const std::string &what) override {
    bool inOnDevice = device.owns(in.data), outOnDevice = device.owns(out.data);
    if (inOnDevice && outOnDevice)
      return Communicator::collective(op, axes, in, out, reduction, what);
    if (!host)
      return staged(op, axes, in, out, reduction, what, inOnDevice,
                    outOnDevice);
    // Staged through the host (a full state gathered for saving reads a
    // device shard into host memory). The copies synchronise the device.
    try {
      std::vector<char> inCopy, outCopy;
      Tensor hostIn = in, hostOut = out;
      if (inOnDevice) {
        inCopy.resize(in.bytes());
        device.copy(inCopy.data(), in.data, in.bytes(), CopyKind::DeviceToHost);
        hostIn.data = inCopy.data();
      }
      if (outOnDevice) {
        outCopy.resize(out.bytes());
        hostOut.data = outCopy.data();
      }
      std::string error =
          host->collective(op, axes, hostIn, hostOut, reduction, what);
      if (error.empty() && outOnDevice)
        device.copy(out.data, outCopy.data(), out.bytes(),
                    CopyKind::HostToDevice);
      return error;
    } catch (const DeviceError &e) {
      return what + ": " + e.what();
    }
  }

  /// A collective of host memory with no host communicator (NCCL started
  /// from a store, without MPI: the mean loss, a status to agree on):
  /// through device scratch, the library's collective, and back. The
  /// copies synchronise the device.
  std::string staged(const std::string &op, const std::vector<int64_t> &axes,
                     const Tensor &in, const Tensor &out, Reduction reduction,
                     const std::string &what, bool inOnDevice,
                     bool outOnDevice) {
    void *scratch = device.allocate(in.bytes() + out.bytes());
    if (!scratch)
      return what + ": no device memory for " +
             std::to_string(in.bytes() + out.bytes()) +
             " bytes of host data to communicate";
    try {
      Tensor deviceIn = in, deviceOut = out;
      char *base = static_cast<char *>(scratch);
      if (!inOnDevice) {
        deviceIn.data = base;
        device.copy(base, in.data, in.bytes(), CopyKind::HostToDevice);
      }
      if (!outOnDevice)
        deviceOut.data = base + in.bytes();
      std::string error = Communicator::collective(op, axes, deviceIn,
                                                   deviceOut, reduction, what);
      if (error.empty() && !outOnDevice)
        device.copy(out.data, deviceOut.data, out.bytes(),
                    CopyKind::DeviceToHost);
      device.free(scratch);
      return error;
    } catch (const DeviceError &e) {
      device.free(scratch);
      return what + ": " + e.what();
    }
  }

  /// The watchdog's message once it aborted, else "".
  std::string aborted(const std::string &what) {
    std::string fired = dog.fired();
    return fired.empty()
               ? ""
               : what + " on rank " + std::to_string(rank_) + ": " + fired;
  }

  static std::string axesName(const std::vector<int64_t> &axes) {
    std::string name = "[";
    for (size_t i = 0; i < axes.size(); ++i)
      name += (i ? ", " : "") + std::to_string(axes[i]);
    return name + "]";
  }

  Device &device;
  DeviceStream &compute;
  // Declared before the library, which may use it, so destroyed after.
  std::unique_ptr<Communicator> host;
  std::unique_ptr<DeviceCollectives> library;
  int rank_, world;
  std::unique_ptr<DeviceStream> stream;
  Watchdog dog; // last: its thread stops first
};

} // namespace

std::unique_ptr<Communicator>
createStreamCommunicator(Device &device, DeviceStream &compute,
                         std::unique_ptr<DeviceCollectives> library,
                         std::unique_ptr<Communicator> host, int rank,
                         int world, double timeoutSeconds) {
  return std::make_unique<StreamCommunicator>(
      device, compute, std::move(library), std::move(host), rank, world,
      timeoutSeconds);
}

} // namespace fsdprt::cuda
