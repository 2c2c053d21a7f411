//===- mpi_comm.cpp - Collectives over MPI, with deadlines ----------------===//
//
// Open MPI's nonblocking collectives (MPI_Iallgather, MPI_Ireduce_scatter_
// block, MPI_Iallreduce, MPI_Ibcast) polled with MPI_Test until done or
// past the deadline. A group of mesh axes is a sub-communicator made once
// by MPI_Comm_split: color = the caller's coordinates along the other
// axes, key = its index within the group, so group ranks follow the
// layout's order. F32 and F64 go to MPI as they are. MPI has no bf16 or
// f16 datatype: those collectives run in fp32 (the values widened into
// scratch buffers, reduced, rounded back to nearest-even), so a bf16
// reduction sums in fp32, as NCCL does.
//
//===----------------------------------------------------------------------===//

#include "comm.h"
#include "half.h"

// The C API only (not the deprecated C++ bindings mpi.h would pull in).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

namespace fsdprt {

namespace {

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

/// A half-precision tensor's fp32 copy for MPI (or the tensor itself).
struct Widened {
  Tensor tensor;
  std::vector<float> storage;
};

Widened widen(const Tensor &t, bool copyValues) {
  if (!isHalf(t.dtype))
    return {t, {}};
  Widened w;
  w.storage.resize(t.numel);
  if (copyValues)
    for (int64_t i = 0; i < t.numel; ++i)
      w.storage[i] = halfToFloat(t.as<uint16_t>()[i], t.dtype);
  w.tensor = t;
  w.tensor.dtype = FSDPRT_F32;
  w.tensor.data = w.storage.data();
  return w;
}

struct MpiPending : Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  Tensor out;          // where the result goes (half: rounded back)
  Widened in, wideOut; // fp32 scratch of half-precision collectives
  Reduction reduction = Reduction::Sum;
  std::string what;
};

class MpiCommunicator : public Communicator {
public:
  MpiCommunicator(MPI_Comm world, std::vector<int64_t> mesh, double timeout)
      : world(world), mesh(std::move(mesh)), timeout(timeout) {
    MPI_Comm_rank(world, &rank_);
    MPI_Comm_size(world, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      for (auto &[axes, comm] : groups)
        if (comm != MPI_COMM_NULL && comm != world)
          MPI_Comm_free(&comm);
    if (!finalized && world != MPI_COMM_NULL)
      MPI_Comm_free(&world);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string addGroup(const std::vector<int64_t> &axes) override {
    if (groups.count(axes))
      return "";
    GroupPlace place = groupPlace(mesh, rank_, axes);
    MPI_Comm comm = MPI_COMM_NULL;
    int code = MPI_Comm_split(world, static_cast<int>(place.color),
                              static_cast<int>(place.key), &comm);
    if (code != MPI_SUCCESS)
      return "rank " + std::to_string(rank_) +
             ": cannot make the group of mesh axes: " + mpiError(code);
    groups[axes] = comm;
    return "";
  }

  std::unique_ptr<Pending> start(const std::string &op,
                                 const std::vector<int64_t> &axes,
                                 const Tensor &in, const Tensor &out,
                                 Reduction reduction, const std::string &what,
                                 std::string &error) override {
    auto pending = std::make_unique<MpiPending>();
    pending->in = widen(in, /*copyValues=*/true);
    pending->wideOut = widen(out, /*copyValues=*/false);
    const Tensor &src = pending->in.tensor, &dst = pending->wideOut.tensor;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    error = prepare(axes, src, pending->comm, type, what);
    if (!error.empty())
      return nullptr;
    pending->out = out;
    pending->reduction = reduction;
    pending->what = what;
    int code;
    if (op == "all_gather")
      code = MPI_Iallgather(src.data, static_cast<int>(src.numel), type,
                            dst.data, static_cast<int>(src.numel), type,
                            pending->comm, &pending->request);
    else if (op == "reduce_scatter")
      code = MPI_Ireduce_scatter_block(
          src.data, dst.data, static_cast<int>(dst.numel), type, MPI_SUM,
          pending->comm, &pending->request);
    else
      code = MPI_Iallreduce(src.data == dst.data ? MPI_IN_PLACE : src.data,
                            dst.data, static_cast<int>(dst.numel), type,
                            MPI_SUM, pending->comm, &pending->request);
    if (code != MPI_SUCCESS) {
      error =
          what + " on rank " + std::to_string(rank_) + ": " + mpiError(code);
      return nullptr;
    }
    return pending;
  }

  std::string wait(Pending &base) override {
    auto &pending = static_cast<MpiPending &>(base);
    if (std::string error = finish(MPI_SUCCESS, pending.request, pending.what);
        !error.empty())
      return error;
    std::string error =
        average(pending.comm, pending.wideOut.tensor, pending.reduction);
    if (isHalf(pending.out.dtype)) // round the fp32 result back
      for (int64_t i = 0; i < pending.out.numel; ++i)
        pending.out.as<uint16_t>()[i] =
            floatToHalf(pending.wideOut.storage[i], pending.out.dtype);
    return error;
  }

  bool test(Pending &base) override {
    auto &pending = static_cast<MpiPending &>(base);
    int done = 0;
    // A completed request becomes MPI_REQUEST_NULL, which wait's MPI_Test
    // then finds done at once.
    return MPI_Test(&pending.request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done;
  }

  std::string broadcast(void *data, size_t bytes,
                        const std::string &what) override {
    MPI_Request request;
    int code =
        MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, world, &request);
    return finish(code, request, what);
  }

private:
  std::string prepare(const std::vector<int64_t> &axes, const Tensor &in,
                      MPI_Comm &comm, MPI_Datatype &type,
                      const std::string &what) {
    auto it = groups.find(axes);
    if (it == groups.end())
      return what + " on rank " + std::to_string(rank_) +
             ": its group was not prepared";
    comm = it->second;
    switch (in.dtype) {
    case FSDPRT_F32:
      type = MPI_FLOAT;
      return "";
    case FSDPRT_F64:
      type = MPI_DOUBLE;
      return "";
    default:
      return what + " on rank " + std::to_string(rank_) + ": " +
             fsdprt_dtype_name(in.dtype) +
             " tensors are not communicated over MPI (floating point ones are)";
    }
  }

  /// Polls `request` until it completes or the deadline passes.
  std::string finish(int code, MPI_Request &request, const std::string &what) {
    if (code != MPI_SUCCESS)
      return what + " on rank " + std::to_string(rank_) + ": " + mpiError(code);
    auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (true) {
      int done = 0;
      code = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS)
        return what + " on rank " + std::to_string(rank_) + ": " +
               mpiError(code);
      if (done)
        return "";
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      if (timeout > 0 && waited > timeout)
        return what + " on rank " + std::to_string(rank_) +
               " timed out after " + std::to_string(waited) +
               " s (a peer died or stalled; the deadline is " +
               std::to_string(timeout) + " s)";
      // Spin briefly, then yield the core: ranks share cores when
      // oversubscribed.
      if (++spins > 64)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::string average(MPI_Comm comm, const Tensor &out, Reduction reduction) {
    if (reduction != Reduction::Avg)
      return "";
    int groupSize = 1;
    MPI_Comm_size(comm, &groupSize);
    if (out.dtype == FSDPRT_F32) {
      float scale = 1.0f / static_cast<float>(groupSize);
      for (int64_t i = 0; i < out.numel; ++i)
        out.as<float>()[i] *= scale;
    } else {
      double scale = 1.0 / groupSize;
      for (int64_t i = 0; i < out.numel; ++i)
        out.as<double>()[i] *= scale;
    }
    return "";
  }

  MPI_Comm world;
  std::vector<int64_t> mesh;
  double timeout;
  int rank_ = 0, size_ = 1;
  std::map<std::vector<int64_t>, MPI_Comm> groups;
};

} // namespace

int mpiWorldF() { return static_cast<int>(MPI_Comm_c2f(MPI_COMM_WORLD)); }

bool mpiReady() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

namespace {
bool startedMpi = false;
} // namespace

std::string mpiInit(int *rank, int *size) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return "MPI was finalized already";
  if (!initialized) {
    int provided = 0;
    if (int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED,
                                   &provided);
        code != MPI_SUCCESS)
      return "MPI_Init_thread failed: " + mpiError(code);
    startedMpi = true;
  }
  if (rank)
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
  if (size)
    MPI_Comm_size(MPI_COMM_WORLD, size);
  return "";
}

void mpiFinalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (startedMpi && !finalized)
    MPI_Finalize();
  startedMpi = false;
}

std::unique_ptr<Communicator> createMpiCommunicator(int commF,
                                                    std::vector<int64_t> mesh,
                                                    double timeoutSeconds,
                                                    std::string &error) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    error = "MPI is not initialized (call MPI_Init before creating a "
            "multi-rank session)";
    return nullptr;
  }
  MPI_Comm given = MPI_Comm_f2c(static_cast<MPI_Fint>(commF));
  if (given == MPI_COMM_NULL) {
    error = "the communicator handle is MPI_COMM_NULL";
    return nullptr;
  }
  // A private duplicate: the session's traffic never mixes with the host's,
  // and errors come back as codes.
  MPI_Comm own = MPI_COMM_NULL;
  if (int code = MPI_Comm_dup(given, &own); code != MPI_SUCCESS) {
    error = "cannot duplicate the communicator: " + mpiError(code);
    return nullptr;
  }
  MPI_Comm_set_errhandler(own, MPI_ERRORS_RETURN);
  int size = 1;
  MPI_Comm_size(own, &size);
  int64_t world = 1;
  for (int64_t d : mesh)
    world *= d;
  if (world != size) {
    MPI_Comm_free(&own);
    error = "the plan is for " + std::to_string(world) +
            " ranks but the communicator has " + std::to_string(size);
    return nullptr;
  }
  return std::make_unique<MpiCommunicator>(own, std::move(mesh),
                                           timeoutSeconds);
}

} // namespace fsdprt
