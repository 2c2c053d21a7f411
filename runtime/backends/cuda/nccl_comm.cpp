//===- nccl_comm.cpp - Collectives over NCCL, on their own stream ---------===//
//
// The GPU's communicator (comm.h), in the plugin libfsdprt_cuda.so.
//  - Start-up: rank 0 makes the unique id. It reaches the other ranks
//    through the host communicator's broadcast (MPI), or, without one,
//    through a store (nccl_bootstrap.h). Then every rank calls
//    ncclCommInitRank on its GPU.
//  - Groups: one communicator per mesh-axis group, made with ncclCommSplit
//    (color: the coordinates along the other axes; key: the index within
//    the group). HYBRID_SHARD's groups within and across come from this.
//  - Streams: collectives run on a high-priority stream of their own.
//    A collective starts after an event recorded on the compute stream
//    (everything the plan computed before it). Its wait is an event the
//    compute stream waits for, so the host never blocks on it. Timed
//    events around it on its stream give its device time (deviceSeconds).
//  - Deadlines: a watchdog thread asks each collective's event whether it
//    finished. When one outruns the deadline, it aborts every communicator
//    (ncclCommAbort), and every later call fails with its message, naming
//    the collective.
//  - Tensors in host memory (the mean loss, checkpoint metadata, a full
//    state gathered for saving) go through the host communicator, staged
//    through the host.
//
//===----------------------------------------------------------------------===//

#include "../../src/comm.h"
#include "device.h"
#include "nccl_bootstrap.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <map>
#include <vector>
#include <mutex>

namespace fsdprt::cuda {

cudaStream_t nativeStream(DeviceStream &stream); // cuda_device.cpp
int deviceOrdinal(const Device &device);          // cuda_device.cpp

namespace {

struct NcclPending : Pending {
  /// On the collective's stream: when it could start (after the compute
  /// before it) and when it ended; timed, for deviceSeconds.
  cudaEvent_t begun = nullptr, done = nullptr;
  std::string what;
  ~NcclPending() override {
    for (cudaEvent_t e : {begun, done})
      if (e)
        cudaEventDestroy(e);
  }
};

bool onDevice(const void *p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice ||
         attributes.type == cudaMemoryTypeManaged;
}

class NcclCommunicator : public Communicator {
public:
  NcclCommunicator(int ordinal, cudaStream_t compute,
                   std::unique_ptr<Communicator> host, int rank, int world,
                   std::vector<int64_t> mesh, double timeout)
      : ordinal(ordinal), compute(compute), host(std::move(host)), rank_(rank),
        world(world), mesh(std::move(mesh)),
        dog(timeout, [this](const std::string &why) { abortAll(why); }) {}

  ~NcclCommunicator() override {
    cudaSetDevice(ordinal);
    if (stream)
      cudaStreamSynchronize(stream);
    for (auto &[axes, comm] : groups)
      if (comm && comm != worldComm)
        ncclCommDestroy(comm);
    if (worldComm)
      ncclCommDestroy(worldComm);
    if (ready)
      cudaEventDestroy(ready);
    if (stream)
      cudaStreamDestroy(stream);
  }

  /// Joins the world communicator: "" or why not.
  std::string init(const UniqueId &id) {
    cudaSetDevice(ordinal);
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest) != cudaSuccess ||
        cudaEventCreateWithFlags(&ready, cudaEventDisableTiming) != cudaSuccess)
      return "cannot create the collectives' stream";
    ncclUniqueId nccl;
    static_assert(sizeof(nccl.internal) == kUniqueIdBytes, "NCCL's id size");
    std::memcpy(nccl.internal, id.data(), kUniqueIdBytes);
    uint64_t ticket = dog.begin("ncclCommInitRank of rank " + std::to_string(rank_));
    ncclResult_t result = ncclCommInitRank(&worldComm, world, nccl, rank_);
    dog.end(ticket);
    if (result != ncclSuccess)
      return failure("ncclCommInitRank", result);
    return "";
  }

  int rank() const override { return rank_; }
  int size() const override { return world; }

  std::string addGroup(const std::vector<int64_t> &axes) override {
    if (host)
      if (std::string error = host->addGroup(axes); !error.empty())
        return error;
    if (groups.count(axes))
      return "";
    GroupPlace place = groupPlace(mesh, rank_, axes);
    if (place.size == world) { // the whole world: its own communicator
      groups[axes] = worldComm;
      return "";
    }
    ncclComm_t comm = nullptr;
    uint64_t ticket = dog.begin("ncclCommSplit on rank " + std::to_string(rank_));
    ncclResult_t result = ncclCommSplit(worldComm, static_cast<int>(place.color),
                                        static_cast<int>(place.key), &comm, nullptr);
    dog.end(ticket);
    if (result != ncclSuccess)
      return failure("ncclCommSplit", result);
    groups[axes] = comm;
    return "";
  }

  std::unique_ptr<Pending> start(const std::string &op,
                                 const std::vector<int64_t> &axes,
                                 const Tensor &in, const Tensor &out,
                                 Reduction reduction, const std::string &what,
                                 std::string &error) override {
    error = aborted(what);
    if (!error.empty())
      return nullptr;
    auto it = groups.find(axes);
    if (it == groups.end()) {
      error = what + " on rank " + std::to_string(rank_) + ": its group was not prepared";
      return nullptr;
    }
    ncclDataType_t type;
    switch (in.dtype) {
    case FSDPRT_F32: type = ncclFloat32; break;
    case FSDPRT_F64: type = ncclFloat64; break;
    case FSDPRT_BF16: type = ncclBfloat16; break;
    case FSDPRT_F16: type = ncclFloat16; break;
    default:
      error = what + " on rank " + std::to_string(rank_) + ": " +
              fsdprt_dtype_name(in.dtype) +
              " tensors are not communicated (floating point ones are)";
      return nullptr;
    }
    cudaSetDevice(ordinal);
    auto pending = std::make_unique<NcclPending>();
    pending->what = what;
    // After everything the compute stream has before it.
    if (cudaEventRecord(ready, compute) != cudaSuccess ||
        cudaStreamWaitEvent(stream, ready, 0) != cudaSuccess ||
        cudaEventCreate(&pending->begun) != cudaSuccess ||
        cudaEventCreate(&pending->done) != cudaSuccess ||
        cudaEventRecord(pending->begun, stream) != cudaSuccess) {
      error = what + " on rank " + std::to_string(rank_) + ": " +
              cudaGetErrorString(cudaGetLastError());
      return nullptr;
    }
    ncclRedOp_t sum = reduction == Reduction::Avg ? ncclAvg : ncclSum;
    ncclResult_t result;
    if (op == "all_gather")
      result = ncclAllGather(in.data, out.data, in.numel, type, it->second, stream);
    else if (op == "reduce_scatter")
      result = ncclReduceScatter(in.data, out.data, out.numel, type, sum, it->second, stream);
    else
      result = ncclAllReduce(in.data, out.data, out.numel, type, sum, it->second, stream);
    if (result != ncclSuccess) {
      error = what + " on rank " + std::to_string(rank_) + ": " + ncclGetErrorString(result);
      return nullptr;
    }
    cudaEventRecord(pending->done, stream);
    cudaEvent_t done = pending->done;
    dog.begin(what + " on rank " + std::to_string(rank_),
              [done] { return cudaEventQuery(done) != cudaErrorNotReady; });
    return pending;
  }

  /// The compute stream waits for the collective (the host does not).
  std::string wait(Pending &base) override {
    auto &pending = static_cast<NcclPending &>(base);
    if (std::string error = aborted(pending.what); !error.empty())
      return error;
    cudaSetDevice(ordinal);
    if (cudaStreamWaitEvent(compute, pending.done, 0) != cudaSuccess)
      return pending.what + " on rank " + std::to_string(rank_) + ": " +
             cudaGetErrorString(cudaGetLastError());
    return "";
  }

  double deviceSeconds(const Pending &base) override {
    const auto &pending = static_cast<const NcclPending &>(base);
    float ms = 0;
    cudaSetDevice(ordinal);
    if (cudaEventElapsedTime(&ms, pending.begun, pending.done) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return ms / 1e3;
  }

  bool test(Pending &base) override {
    return cudaEventQuery(static_cast<NcclPending &>(base).done) != cudaErrorNotReady;
  }

  std::string broadcast(void *data, size_t bytes, const std::string &what) override {
    if (host)
      return host->broadcast(data, bytes, what);
    return what + ": a broadcast of host memory needs a host communicator (MPI)";
  }

private:
  /// A collective, waited for; tensors in host memory go through the host
  /// communicator.
  std::string collective(const std::string &op, const std::vector<int64_t> &axes,
                         const Tensor &in, const Tensor &out, Reduction reduction,
                         const std::string &what) override {
    bool inOnDevice = onDevice(in.data), outOnDevice = onDevice(out.data);
    if (!inOnDevice || !outOnDevice) {
      if (!host)
        return what + ": a collective of host memory needs a host communicator (MPI)";
      // Staged through the host (a full state gathered for saving reads a
      // device shard into host memory).
      cudaSetDevice(ordinal);
      cudaDeviceSynchronize();
      std::vector<char> inCopy, outCopy;
      Tensor hostIn = in, hostOut = out;
      if (inOnDevice) {
        inCopy.resize(in.bytes());
        cudaMemcpy(inCopy.data(), in.data, in.bytes(), cudaMemcpyDeviceToHost);
        hostIn.data = inCopy.data();
      }
      if (outOnDevice) {
        outCopy.resize(out.bytes());
        hostOut.data = outCopy.data();
      }
      std::string error = host->collective(op, axes, hostIn, hostOut, reduction, what);
      if (error.empty() && outOnDevice &&
          cudaMemcpy(out.data, outCopy.data(), out.bytes(), cudaMemcpyHostToDevice) != cudaSuccess)
        error = what + ": " + cudaGetErrorString(cudaGetLastError());
      return error;
    }
    return Communicator::collective(op, axes, in, out, reduction, what);
  }

  std::string failure(const char *call, ncclResult_t result) {
    std::string why = aborted(call);
    return !why.empty() ? why
                        : std::string(call) + " on rank " + std::to_string(rank_) +
                              ": " + ncclGetErrorString(result);
  }

  /// The watchdog's message once it aborted, else "".
  std::string aborted(const std::string &what) {
    std::string fired = dog.fired();
    return fired.empty() ? "" : what + " on rank " + std::to_string(rank_) + ": " + fired;
  }

  void abortAll(const std::string &) {
    std::lock_guard<std::mutex> lock(abortMutex);
    for (auto &[axes, comm] : groups)
      if (comm && comm != worldComm)
        ncclCommAbort(comm);
    if (worldComm)
      ncclCommAbort(worldComm);
    groups.clear();
    worldComm = nullptr;
  }

  int ordinal;
  cudaStream_t compute, stream = nullptr;
  cudaEvent_t ready = nullptr;
  std::unique_ptr<Communicator> host;
  int rank_, world;
  std::vector<int64_t> mesh;
  ncclComm_t worldComm = nullptr;
  std::map<std::vector<int64_t>, ncclComm_t> groups;
  std::mutex abortMutex;
  Watchdog dog;
};

} // namespace
} // namespace fsdprt::cuda

/// The plugin's entry for multi-rank sessions on GPUs (devices.cpp): the
/// NCCL communicator of rank `rank` of `world` on `device`, ordered with
/// `compute`. The unique id comes through `host` (MPI; it is kept for
/// host-memory collectives) or, without one, the store `store`
/// (nccl_bootstrap.h). nullptr with `error` saying why not.
extern "C" __attribute__((visibility("default"))) fsdprt::Communicator *
fsdprt_cuda_open_nccl(fsdprt::cuda::Device *device,
                      fsdprt::cuda::DeviceStream *compute,
                      std::unique_ptr<fsdprt::Communicator> *host, int rank,
                      int world, const std::vector<int64_t> *mesh,
                      double timeout, const char *store, std::string *error) {
  using namespace fsdprt::cuda;
  try {
    UniqueId id{};
    std::unique_ptr<fsdprt::Communicator> hostComm = host ? std::move(*host) : nullptr;
    if (hostComm) {
      rank = hostComm->rank();
      world = hostComm->size();
      ncclUniqueId nccl;
      if (rank == 0 && ncclGetUniqueId(&nccl) != ncclSuccess) {
        *error = "ncclGetUniqueId failed";
        return nullptr;
      }
      if (rank == 0)
        std::memcpy(id.data(), nccl.internal, kUniqueIdBytes);
      if (std::string e = hostComm->broadcast(id.data(), id.size(), "the NCCL id");
          !e.empty()) {
        *error = e;
        return nullptr;
      }
    } else {
      IdStore where;
      if (std::string e = parseIdStore(store ? store : "", where); !e.empty()) {
        *error = e;
        return nullptr;
      }
      if (makesId(where, rank)) {
        ncclUniqueId nccl;
        if (ncclGetUniqueId(&nccl) != ncclSuccess) {
          *error = "ncclGetUniqueId failed";
          return nullptr;
        }
        std::memcpy(id.data(), nccl.internal, kUniqueIdBytes);
        if (std::string e = publishId(where, id); !e.empty()) {
          *error = e;
          return nullptr;
        }
      } else if (std::string e = fetchId(where, timeout, id); !e.empty()) {
        *error = e;
        return nullptr;
      }
    }
    auto comm = std::make_unique<fsdprt::cuda::NcclCommunicator>(
        deviceOrdinal(*device), nativeStream(*compute), std::move(hostComm), rank,
        world, *mesh, timeout);
    if (std::string e = comm->init(id); !e.empty()) {
      *error = e;
      return nullptr;
    }
    return comm.release();
  } catch (const std::exception &e) {
    *error = e.what();
    return nullptr;
  }
}
