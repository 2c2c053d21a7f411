//===- stream_comm.h - Collectives on a device stream of their own -*- C++
//-*-===//
//
// The GPU's communicator (comm.h) as host code over a Device (device.h):
//  - Streams: collectives run on a high-priority stream of their own. A
//    collective starts after an event recorded on the compute stream
//    (everything the plan computed before it). Its wait is an event the
//    compute stream waits for, so the host never blocks on it. Timed
//    events around it on its stream give its device time (deviceSeconds).
//  - Deadlines: a watchdog thread asks each collective's end event whether
//    it was reached. When one outruns the deadline, it aborts the library
//    (ncclCommAbort), and every later call fails with its message, naming
//    the collective.
//  - Tensors in host memory (the mean loss, checkpoint metadata, a full
//    state gathered for saving) go through the host communicator, staged
//    through the host.
// What enqueues the collectives is a DeviceCollectives:
//  - NCCL on a GPU (nccl_comm.cpp, in the plugin);
//  - the ranks of a local group on the fake device (local_comm.cpp): each
//    collective is admitted on the collective stream by the hazard checker
//    with the bytes it reads and writes, then meets its peers in memory.
//    So CI runs this file's stream and event logic, the arenas' reuse
//    around collectives in flight, and the watchdog, as on a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_STREAM_COMM_H
#define FSDPRT_BACKENDS_CUDA_STREAM_COMM_H

#include "../../src/comm.h"
#include "device.h"

#include <memory>
#include <string>
#include <vector>

namespace fsdprt::cuda {

/// A library of collectives that run on a device stream.
class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  /// Prepares the group of `axes` (collective, like Communicator's).
  virtual std::string addGroup(const std::vector<int64_t> &axes) = 0;
  /// Enqueues collective `op` of `axes`' group on `stream`: "" or a
  /// message naming `what` and the rank.
  virtual std::string enqueue(const std::string &op,
                              const std::vector<int64_t> &axes,
                              const Tensor &in, const Tensor &out,
                              Reduction reduction, DeviceStream &stream,
                              const std::string &what) = 0;
  /// Ends every collective in flight, and fails later ones (the watchdog
  /// calls it from its thread with its message).
  virtual void abort(const std::string &why) = 0;
};

/// Rank `rank` of `world`, its collectives on `library`, ordered with
/// `compute` on `device`; `host` (may be null) takes the collectives of
/// host memory and the broadcasts. A collective older than
/// `timeoutSeconds` (0: no deadline) aborts the library.
std::unique_ptr<Communicator>
createStreamCommunicator(Device &device, DeviceStream &compute,
                         std::unique_ptr<DeviceCollectives> library,
                         std::unique_ptr<Communicator> host, int rank,
                         int world, double timeoutSeconds);

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_STREAM_COMM_H
