//===- nccl_comm.cpp - Collectives over NCCL ------------------------------===//
//
// The GPU's collectives (stream_comm.h's DeviceCollectives), in the plugin
// libfsdprt_cuda.so; stream_comm.cpp orders them with the compute stream
// and watches their deadlines.
//  - Start-up: rank 0 makes the unique id. It reaches the other ranks
//    through the host communicator's broadcast (MPI), or, without one,
//    through a store (nccl_bootstrap.h). Then every rank calls
//    ncclCommInitRank on its GPU.
//  - Groups: one communicator per mesh-axis group, made with ncclCommSplit
//    (color: the coordinates along the other axes; key: the index within
//    the group). HYBRID_SHARD's groups within and across come from this.
//  - Abort (the watchdog's): ncclCommAbort on every communicator, so that
//    a collective stuck on a dead peer ends.
//
//===----------------------------------------------------------------------===//

#include "../../src/comm.h"
#include "device.h"
#include "nccl_bootstrap.h"
#include "stream_comm.h"

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

/// NCCL's communicators of one rank: the world's, and one per mesh-axis
/// group, split from it.
class NcclCollectives : public DeviceCollectives {
public:
  NcclCollectives(int ordinal, int rank, int world, std::vector<int64_t> mesh)
      : ordinal(ordinal), rank(rank), world(world), mesh(std::move(mesh)) {}

  ~NcclCollectives() override {
    cudaSetDevice(ordinal);
    for (auto &[axes, comm] : groups)
      if (comm && comm != worldComm)
        ncclCommDestroy(comm);
    if (worldComm)
      ncclCommDestroy(worldComm);
  }

  /// Joins the world communicator: "" or why not.
  std::string init(const UniqueId &id) {
    ncclUniqueId nccl;
    static_assert(sizeof(nccl.internal) == kUniqueIdBytes, "NCCL's id size");
    std::memcpy(nccl.internal, id.data(), kUniqueIdBytes);
    cudaSetDevice(ordinal); // NCCL takes the current device
    ncclResult_t result = ncclCommInitRank(&worldComm, world, nccl, rank);
    if (result != ncclSuccess) {
      worldComm = nullptr;
      return "ncclCommInitRank on rank " + std::to_string(rank) + ": " +
             ncclGetErrorString(result);
    }
    return "";
  }

  std::string addGroup(const std::vector<int64_t> &axes) override {
    std::unique_lock<std::mutex> lock(mutex);
    if (groups.count(axes))
      return "";
    if (!worldComm)
      return "ncclCommSplit on rank " + std::to_string(rank) +
             ": the communicator was aborted";
    GroupPlace place = groupPlace(mesh, rank, axes);
    if (place.size == world) { // the whole world: its own communicator
      groups[axes] = worldComm;
      return "";
    }
    ncclComm_t comm = nullptr, from = worldComm;
    // Not under the lock: the watchdog's abort takes it while this blocks.
    lock.unlock();
    cudaSetDevice(ordinal);
    ncclResult_t result =
        ncclCommSplit(from, static_cast<int>(place.color),
                      static_cast<int>(place.key), &comm, nullptr);
    lock.lock();
    if (result != ncclSuccess)
      return "ncclCommSplit on rank " + std::to_string(rank) + ": " +
             ncclGetErrorString(result);
    groups[axes] = comm;
    return "";
  }

  std::string enqueue(const std::string &op, const std::vector<int64_t> &axes,
                      const Tensor &in, const Tensor &out, Reduction reduction,
                      DeviceStream &stream, const std::string &what) override {
    ncclComm_t comm = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = groups.find(axes);
      if (it != groups.end())
        comm = it->second;
    }
    if (!comm)
      return what + " on rank " + std::to_string(rank) +
             ": its group was not prepared";
    ncclDataType_t type = in.dtype == FSDPRT_F64    ? ncclFloat64
                          : in.dtype == FSDPRT_BF16 ? ncclBfloat16
                          : in.dtype == FSDPRT_F16  ? ncclFloat16
                                                    : ncclFloat32;
    ncclRedOp_t sum = reduction == Reduction::Avg ? ncclAvg : ncclSum;
    cudaStream_t s = nativeStream(stream);
    cudaSetDevice(ordinal);
    ncclResult_t result;
    if (op == "all_gather")
      result = ncclAllGather(in.data, out.data, in.numel, type, comm, s);
    else if (op == "reduce_scatter")
      result =
          ncclReduceScatter(in.data, out.data, out.numel, type, sum, comm, s);
    else
      result = ncclAllReduce(in.data, out.data, out.numel, type, sum, comm, s);
    if (result != ncclSuccess)
      return what + " on rank " + std::to_string(rank) + ": " +
             ncclGetErrorString(result);
    return "";
  }

  void abort(const std::string &) override {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &[axes, comm] : groups)
      if (comm && comm != worldComm)
        ncclCommAbort(comm);
    if (worldComm)
      ncclCommAbort(worldComm);
    groups.clear();
    worldComm = nullptr;
  }

private:
  int ordinal, rank, world;
  std::vector<int64_t> mesh;
  std::mutex mutex;
  ncclComm_t worldComm = nullptr;
  std::map<std::vector<int64_t>, ncclComm_t> groups;
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
    auto library = std::make_unique<NcclCollectives>(deviceOrdinal(*device),
                                                     rank, world, *mesh);
    if (std::string e = library->init(id); !e.empty()) {
      *error = e;
      return nullptr;
    }
    return createStreamCommunicator(*device, *compute, std::move(library),
                                    std::move(hostComm), rank, world, timeout)
        .release();
  } catch (const std::exception &e) {
    *error = e.what();
    return nullptr;
  }
}
