//===- hazards.h - Stream hazards: bytes touched without an event between -*- C++ -*-===//
//
// The fake CUDA device's checker. Work runs on streams; a stream's work is
// ordered, work on two streams is not, unless an event orders it: a
// stream that waits for an event recorded on another has everything that
// stream did before the record behind it. Each stream keeps a vector
// clock (what it knows of every stream's progress); a piece of work that
// reads or writes bytes that another stream's work wrote, or writes bytes
// it read, without that work being behind it, is a hazard: on a GPU the
// two could run in either order, or at once.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_HAZARDS_H
#define FSDPRT_BACKENDS_CUDA_HAZARDS_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdprt::cuda {

/// Bytes [begin, end) of device memory.
struct Range {
  uintptr_t begin = 0, end = 0;
};

/// The bytes [data, data + bytes).
inline Range rangeOf(const void *data, uint64_t bytes) {
  auto begin = reinterpret_cast<uintptr_t>(data);
  return {begin, begin + bytes};
}

/// A piece of work on a stream: what it is called and the bytes it reads
/// and writes.
struct Work {
  std::string name;
  std::vector<Range> reads, writes;
};

class HazardChecker {
public:
  /// A new stream's index.
  int addStream();
  /// Checks and records `work` on `stream`: "" or the hazard, naming both
  /// pieces of work, their streams and the bytes.
  std::string run(int stream, const Work &work);
  /// An event recorded on `stream` now, and a stream waiting for one.
  std::vector<uint64_t> record(int stream) const { return clocks[stream]; }
  void wait(int stream, const std::vector<uint64_t> &event);
  /// The host waited for every stream (a device synchronisation): all
  /// work so far is behind everything that follows.
  void synchronize();
  size_t remembered() const { return history.size(); }

private:
  struct Access {
    int stream;
    uint64_t time;
    bool write;
    Range range;
    std::string name;
  };
  /// clocks[s][t]: how far stream s knows stream t to have run.
  std::vector<std::vector<uint64_t>> clocks;
  std::vector<Access> history;
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_HAZARDS_H
