//===- host_launch.h - Kernel bodies run on the host -------------*- C++ -*-===//
//
// The host launchers of the CUDA backend's kernel bodies (kernels/hd.h):
// the same index space as the device launchers, on CPU threads. A row
// body's group of `lanes` lanes is `lanes` threads that meet at a barrier
// in every reduction, as a CUDA block's threads meet at __syncthreads, so
// a body's striding and reductions run here as they do on the device
// (with lanes = 1 the body runs alone, in order).
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_HOST_LAUNCH_H
#define FSDPRT_BACKENDS_CUDA_HOST_LAUNCH_H

#include "kernels/hd.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace fsdprt::cuda {

/// Runs an elementwise body over [0, n).
template <class Body> void hostForEach(const Body &body, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    body(i);
}

/// The lanes of one host group: reductions through a barrier.
class HostGroup {
public:
  struct Shared {
    explicit Shared(int lanes) : lanes(lanes), partial(lanes) {}
    int lanes;
    std::vector<float> partial;
    std::mutex mutex;
    std::condition_variable turn;
    int arrived = 0;
    long generation = 0;

    /// Waits until every lane has arrived.
    void barrier() {
      std::unique_lock<std::mutex> lock(mutex);
      long mine = generation;
      if (++arrived == lanes) {
        arrived = 0;
        ++generation;
        turn.notify_all();
        return;
      }
      turn.wait(lock, [&] { return generation != mine; });
    }
  };

  HostGroup(Shared &shared, int lane) : shared(shared), lane_(lane) {}
  int lane() const { return lane_; }
  int size() const { return shared.lanes; }
  float sum(float v) {
    return combine(v, [](float a, float b) { return a + b; });
  }
  float max(float v) {
    return combine(v, [](float a, float b) { return std::max(a, b); });
  }

private:
  template <class F> float combine(float v, F f) {
    shared.partial[lane_] = v;
    shared.barrier();
    float total = shared.partial[0];
    for (int k = 1; k < shared.lanes; ++k)
      total = f(total, shared.partial[k]);
    shared.barrier(); // every lane has read before the next write
    return total;
  }

  Shared &shared;
  int lane_;
};

/// Runs a row body over rows [0, rows) with groups of `lanes` lanes.
template <class Body>
void hostForEachRow(const Body &body, int64_t rows, int lanes) {
  HostGroup::Shared shared(lanes);
  auto run = [&](int lane) {
    HostGroup g(shared, lane);
    for (int64_t row = 0; row < rows; ++row)
      body(g, row);
  };
  std::vector<std::thread> threads;
  for (int lane = 1; lane < lanes; ++lane)
    threads.emplace_back(run, lane);
  run(0);
  for (std::thread &t : threads)
    t.join();
}

/// The lanes of one host block of a tile body (kernels/attention.h): a
/// barrier and the block's shared floats.
class HostBlock {
public:
  HostBlock(HostGroup::Shared &group, float *memory, int lane)
      : group(group), memory(memory), lane_(lane) {}
  int lane() const { return lane_; }
  int size() const { return group.lanes; }
  void sync() const { group.barrier(); }
  float *shared() const { return memory; }

private:
  HostGroup::Shared &group;
  float *memory;
  int lane_;
};

/// Runs a tile body over its tiles with blocks of `lanes` lanes, its
/// shared memory filled with NaN first (a body that reads what it did not
/// write shows it).
template <class Body> void hostForEachTile(const Body &body, int lanes) {
  HostGroup::Shared group(lanes);
  std::vector<float> memory(static_cast<size_t>(body.sharedFloats()), NAN);
  int64_t tiles = body.tiles();
  auto run = [&](int lane) {
    HostBlock block(group, memory.data(), lane);
    for (int64_t tile = 0; tile < tiles; ++tile)
      body(block, tile);
  };
  std::vector<std::thread> threads;
  for (int lane = 1; lane < lanes; ++lane)
    threads.emplace_back(run, lane);
  run(0);
  for (std::thread &t : threads)
    t.join();
}

/// The host launchers as a launcher object (kernels/losses.h's and
/// kernels/attention.h's sequences): row and tile bodies with `lanes` lanes;
/// errors are never returned (0).
struct HostLauncher {
  int lanes = 1;
  template <class Body> int elementwise(const Body &body, int64_t n) {
    hostForEach(body, n);
    return 0;
  }
  template <class Body> int rowwise(const Body &body, int64_t rows) {
    hostForEachRow(body, rows, lanes);
    return 0;
  }
  template <class Body> int tiled(const Body &body) {
    hostForEachTile(body, lanes);
    return 0;
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_HOST_LAUNCH_H
