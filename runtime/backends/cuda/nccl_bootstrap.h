//===- nccl_bootstrap.h - NCCL's start-up and deadlines, host code -*- C++ -*-===//
//
// What the NCCL communicator does on the host, kept apart from NCCL so
// that CI tests it without a GPU:
//  - the unique id: rank 0 makes it (ncclGetUniqueId) and every rank needs
//    it before ncclCommInitRank. Over MPI it is broadcast; a host without
//    MPI names a store instead:
//      file:PATH  rank 0 writes the id to PATH (atomically: PATH.tmp, then
//                 a rename); the others wait for it, up to the deadline;
//      env:NAME   the launcher put the id, as 256 hex digits, in variable
//                 NAME of every rank (rank 0 too: nobody makes one);
//  - the watchdog: a thread that watches the collectives in flight and,
//    when one outruns the deadline, calls the abort it was given once
//    (ncclCommAbort there), naming the collective, so that every rank
//    ends with a message instead of hanging.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_NCCL_BOOTSTRAP_H
#define FSDPRT_BACKENDS_CUDA_NCCL_BOOTSTRAP_H

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace fsdprt::cuda {

/// The bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
constexpr size_t kUniqueIdBytes = 128;
using UniqueId = std::array<uint8_t, kUniqueIdBytes>;

/// A store spec ("file:PATH" or "env:NAME"), checked.
struct IdStore {
  enum Kind { File, Env } kind = File;
  std::string where;
};

/// Parses `spec`; "" on success, else what is wrong with it.
std::string parseIdStore(const std::string &spec, IdStore &store);

/// Whether rank `rank` must make the id (rank 0 of a file store).
inline bool makesId(const IdStore &store, int rank) {
  return store.kind == IdStore::File && rank == 0;
}

/// Rank 0: writes `id` to a file store. "" or why not.
std::string publishId(const IdStore &store, const UniqueId &id);

/// Any rank: reads the id from the store, waiting for a file up to
/// `timeoutSeconds` (0: forever). "" or why not (naming the store).
std::string fetchId(const IdStore &store, double timeoutSeconds, UniqueId &id);

/// The id as 256 hex digits (what an env store holds), and back ("" or
/// what is wrong).
std::string idToHex(const UniqueId &id);
std::string idFromHex(const std::string &hex, UniqueId &id);

/// Watches collectives in flight; calls `abort(message)` once when one
/// is older than the deadline.
class Watchdog {
public:
  using Abort = std::function<void(const std::string &message)>;
  /// `timeoutSeconds` 0: no deadline (the thread is not started).
  Watchdog(double timeoutSeconds, Abort abort, double periodSeconds = 0.05);
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// A collective `what` started; its ticket for end(). `finished`, when
  /// given, is asked every period whether it completed (the device's
  /// event), so a collective nobody waits for yet does not fire it.
  uint64_t begin(const std::string &what, std::function<bool()> finished = nullptr);
  void end(uint64_t ticket);
  /// The message the watchdog aborted with, or "".
  std::string fired() const;

private:
  void watch();

  double timeout, period;
  Abort abort;
  mutable std::mutex mutex;
  std::condition_variable stop;
  bool stopping = false;
  std::string firedWith;
  uint64_t next = 0;
  struct Entry {
    std::string what;
    std::chrono::steady_clock::time_point started;
    std::function<bool()> finished;
  };
  std::map<uint64_t, Entry> inFlight;
  std::thread thread;
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_NCCL_BOOTSTRAP_H
