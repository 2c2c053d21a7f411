//===- comm.h - The runtime's communicator interface -------------*- C++
//-*-===//
//
// What a session needs from a collective library: the rank and world size
// of its communicator, and all-gather, reduce-scatter, all-reduce and
// broadcast over the group formed by some axes of the plan's mesh (the
// ranks that differ from the caller only along those axes). Every call is
// started nonblocking and waited for with a deadline, so a dead or stalled
// peer ends the call with a message instead of a hang (Open MPI 4.1 has no
// collective timeouts of its own). The MPI implementation is mpi_comm.cpp;
// the NCCL one (GPU issue) implements the same interface.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_SRC_COMM_H
#define FSDPRT_SRC_COMM_H

#include "backend.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdprt {

enum class Reduction { Sum, Avg };

/// Where rank `rank` of a row-major `mesh` sits in the group of `axes`
/// (the ranks that differ from it only along those axes): `color` numbers
/// the group (the coordinates along the other axes), `key` the rank in it
/// (its coordinates along the axes, in their order), `size` its ranks.
/// Every communicator forms its groups from this (MPI_Comm_split,
/// ncclCommSplit, a local group's meetings).
struct GroupPlace {
  int64_t color = 0, key = 0, size = 1;
};
inline GroupPlace groupPlace(const std::vector<int64_t> &mesh, int64_t rank,
                             const std::vector<int64_t> &axes) {
  std::vector<int64_t> coord(mesh.size());
  for (size_t d = mesh.size(); d-- > 0;) {
    coord[d] = rank % mesh[d];
    rank /= mesh[d];
  }
  GroupPlace place;
  for (size_t d = 0; d < mesh.size(); ++d) {
    bool inGroup = false;
    for (int64_t axis : axes)
      inGroup |= axis == static_cast<int64_t>(d);
    if (!inGroup)
      place.color = place.color * mesh[d] + coord[d];
  }
  for (int64_t axis : axes) {
    place.key = place.key * mesh[axis] + coord[axis];
    place.size *= mesh[axis];
  }
  return place;
}

/// A started collective (see Communicator::start*); waited for once.
struct Pending {
  virtual ~Pending() = default;
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Prepares the group of `axes` (every rank calls this in the same order,
  /// with the same axes: it may create sub-communicators collectively).
  /// Returns "" or a message.
  virtual std::string addGroup(const std::vector<int64_t> &axes) = 0;
  /// The collectives, on a group added before; "" or a message naming the
  /// operation, the rank and what went wrong (a timeout says after how
  /// long). `what` names the operation in messages.
  std::string allGather(const std::vector<int64_t> &axes, const Tensor &in,
                        const Tensor &out, const std::string &what) {
    return collective("all_gather", axes, in, out, Reduction::Sum, what);
  }
  std::string reduceScatter(const std::vector<int64_t> &axes, const Tensor &in,
                            const Tensor &out, Reduction reduction,
                            const std::string &what) {
    return collective("reduce_scatter", axes, in, out, reduction, what);
  }
  std::string allReduce(const std::vector<int64_t> &axes, const Tensor &in,
                        const Tensor &out, Reduction reduction,
                        const std::string &what) {
    return collective("all_reduce", axes, in, out, reduction, what);
  }
  /// Collective `op` ("all_gather", "reduce_scatter", "all_reduce"),
  /// blocking: by default started, then waited for.
  virtual std::string collective(const std::string &op,
                                 const std::vector<int64_t> &axes,
                                 const Tensor &in, const Tensor &out,
                                 Reduction reduction, const std::string &what) {
    std::string error;
    std::unique_ptr<Pending> pending = start(op, axes, in, out, reduction, what, error);
    return pending ? wait(*pending) : error;
  }
  /// The same collectives started nonblocking: the result is defined once
  /// `wait` returned "". Started collectives complete in start order.
  virtual std::unique_ptr<Pending>
  start(const std::string &op, const std::vector<int64_t> &axes,
        const Tensor &in, const Tensor &out, Reduction reduction,
        const std::string &what, std::string &error) = 0;
  virtual std::string wait(Pending &pending) = 0;
  /// A completed collective's time on the device (NCCL: between events on
  /// its stream), once the compute stream is synchronised; -1 where only
  /// the host's clock knows it (MPI, local groups).
  virtual double deviceSeconds(const Pending &) { return -1; }
  /// Whether a started collective has completed, without waiting (MPI:
  /// MPI_Test, which also progresses it). A failure is left for `wait`.
  virtual bool test(Pending &pending) = 0;
  /// Rank 0 of the whole communicator sends `data` to every rank.
  virtual std::string broadcast(void *data, size_t bytes,
                                const std::string &what) = 0;
};

/// MPI_COMM_WORLD as an MPI_Fint (MPI must be initialized).
int mpiWorldF();
/// Whether MPI is initialized and not yet finalized (mpiWorldF needs it).
bool mpiReady();
/// Starts MPI unless running (fsdprt_mpi_init); "" or why not.
std::string mpiInit(int *rank, int *size);
/// Ends MPI if mpiInit started it.
void mpiFinalize();

/// A communicator over the MPI communicator `commF` (an MPI_Fint, from
/// MPI_Comm_c2f), for a plan whose mesh is `mesh`, waiting at most
/// `timeoutSeconds` for any collective. Fails (returns nullptr and sets
/// `error`) when MPI is not initialized or the sizes disagree.
std::unique_ptr<Communicator> createMpiCommunicator(int commF,
                                                    std::vector<int64_t> mesh,
                                                    double timeoutSeconds,
                                                    std::string &error);

/// The NCCL communicator (from the CUDA plugin) of a multi-rank session on
/// a GPU: its collectives ordered with `compute`, the unique id sent
/// through `host` (MPI), which it keeps for collectives of host memory.
/// nullptr with `error` saying why not.
/// Without `host`, rank `rank` of `world` gets the id through `store`
/// (file:PATH or env:NAME).
std::unique_ptr<Communicator>
createNcclCommunicator(Backend &backend, Stream &compute,
                       std::unique_ptr<Communicator> host,
                       const std::vector<int64_t> &mesh, double timeout,
                       std::string &error, int rank = 0, int world = 0,
                       const char *store = nullptr);

/// The number of ranks of a local group.
int localGroupSize(const fsdprt_local_group_s &group);
/// Rank `rank` of local group `group` (local_comm.cpp), for a plan whose
/// mesh is `mesh`, computing on `compute`; collectives move bytes through
/// `backend`'s download and upload, or, on the fake device, run on a
/// collective stream of their own, as on a GPU.
std::unique_ptr<Communicator>
createLocalCommunicator(fsdprt_local_group_s &group, int rank,
                        std::vector<int64_t> mesh, Backend &backend,
                        Stream &compute);

} // namespace fsdprt

#endif // FSDPRT_SRC_COMM_H
