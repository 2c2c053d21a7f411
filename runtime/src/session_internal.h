//===- session_internal.h - A session's state, shared in the runtime -*- C++
//-*-===//
//
// The session object behind fsdprt_session_t and the helpers that read
// weights and units, shared by session.cpp and checkpoint.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_SRC_SESSION_INTERNAL_H
#define FSDPRT_SRC_SESSION_INTERNAL_H

#include "backend.h"
#include "comm.h"
#include "plan_internal.h"
#include "status.h"

#include "fsdp/layout/FlatLayout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

struct fsdprt_session_s {
  const fsdprt_plan_s *plan = nullptr;
  std::string modelDir;
  /// The threads kernels use (resolved: never 0).
  int threads = 1;
  std::unique_ptr<fsdprt::Backend> backend;
  std::unique_ptr<fsdprt::Stream> stream;
  std::vector<void *> arenas;
  std::vector<uint64_t> arenaBytes;
  std::vector<fsdprt::plan::ArenaKind> arenaKinds;
  fsdprt::Workspace workspace;
  void *workspaceMemory = nullptr;
  std::vector<fsdprt::Tensor> buffers;
  std::vector<fsdprt::KernelFn> kernels;
  /// The seed, step and rank random kernels draw from: the step counts the
  /// runs completed so far.
  fsdprt::RandomState random;
  bool weightsLoaded = false;
  /// The inputs fsdprt_session_set_input has set (they keep their values
  /// from run to run): a run refuses an input never set, which would read
  /// whatever its arena held.
  std::set<std::string> inputsSet;
  /// Whether the last run completed, so the outputs hold its values: false
  /// before the first run and after a failed one.
  bool outputsDefined = false;
  /// Graphs (single-rank sessions on the CUDA backend): whether to use
  /// them, the runs made directly so far, and the step once captured.
  bool graphs = true;
  int directRuns = 0;
  std::unique_ptr<fsdprt::Graph> graph;
  /// The last completed run's seconds in compute kernels and in
  /// collectives (waits for peers included). Atomic: another thread may
  /// read them while a run is under way (it sees the previous run's).
  /// The last run's compute kernels, its collectives from start to
  /// completion, and the part of them the run waited for (exposed).
  std::atomic<double> computeSeconds{0}, communicationSeconds{0},
      exposedSeconds{0};
  /// A multi-rank session's collective kernels, by kernel index: started
  /// nonblocking when reached, waited for where the plan's dependencies
  /// say.
  struct Collective {
    std::string op;
    std::vector<int64_t> axes;
    fsdprt::Tensor in, out;
    fsdprt::Reduction reduction;
  };
  std::map<size_t, Collective> collectives;
  /// The multi-rank session's communicator (none: one rank).
  std::unique_ptr<fsdprt::Communicator> comm;
  int rank() const { return comm ? comm->rank() : 0; }

  ~fsdprt_session_s() {
    for (void *arena : arenas)
      backend->free(arena);
    if (workspaceMemory)
      backend->free(workspaceMemory);
  }
};

namespace fsdprt {

/// An open weight file, closed when the load ends.
struct WeightFile {
  int fd = -1;
  uint64_t size = 0;
  ~WeightFile() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Reads `length` bytes at `offset` of `file` into `data`; false at the end
/// of the file or on an error (errno then says which).
inline bool readFully(const WeightFile &file, uint64_t offset, uint64_t length,
                      void *data) {
  char *to = static_cast<char *>(data);
  while (length) {
    ssize_t got = ::pread(file.fd, to, length, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return false;
    }
    to += got;
    offset += got;
    length -= got;
  }
  return true;
}

/// Reads byte ranges of the model's data files, opening each file once
/// (hundreds of tensors usually share one).
struct WeightReader {
  std::string modelDir;
  std::map<std::string, WeightFile> files;

  fsdprt_status_t read(const std::string &file, const std::string &fqn,
                       uint64_t offset, uint64_t length, void *data) {
    std::string path = file[0] == '/' ? file : modelDir + "/" + file;
    auto [it, opened] = files.try_emplace(path);
    WeightFile &f = it->second;
    if (opened) {
      // O_NONBLOCK: opening a FIFO would wait for a writer (regular files
      // ignore it); only regular files are read.
      f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
      struct stat info;
      if (f.fd < 0 || ::fstat(f.fd, &info) != 0 || S_ISDIR(info.st_mode)) {
        int error = f.fd < 0 ? errno : S_ISDIR(info.st_mode) ? EISDIR : errno;
        files.erase(it);
        return makeStatus(error == ENOENT ? FSDPRT_NOT_FOUND : FSDPRT_IO_ERROR,
                          "cannot open '" + path + "' for '" + fqn +
                              "': " + std::strerror(error));
      }
      if (!S_ISREG(info.st_mode)) {
        files.erase(it);
        return makeStatus(FSDPRT_IO_ERROR, "cannot open '" + path + "' for '" +
                                               fqn + "': not a regular file");
      }
      f.size = static_cast<uint64_t>(info.st_size);
    }
    if (offset > f.size || length > f.size - offset)
      return makeStatus(
          FSDPRT_IO_ERROR,
          "'" + path + "' is too short for '" + fqn + "': it has " +
              std::to_string(f.size) + " bytes, the weight map reads " +
              std::to_string(length) + " at offset " + std::to_string(offset));
    if (!readFully(f, offset, length, data))
      return makeStatus(
          FSDPRT_IO_ERROR,
          "cannot read " + std::to_string(length) + " bytes at offset " +
              std::to_string(offset) + " of '" + path + "' for '" + fqn +
              "': " +
              (errno ? std::strerror(errno) : "unexpected end of file"));
    return nullptr;
  }

  /// Reads like `read`, into the backend's memory at `data` (an arena),
  /// through a host staging buffer of at most kStagingBytes.
  fsdprt_status_t readInto(Backend &backend, const std::string &file,
                           const std::string &fqn, uint64_t offset,
                           uint64_t length, void *data) {
    constexpr uint64_t kStagingBytes = uint64_t(8) << 20;
    std::vector<char> staging(std::min(length, kStagingBytes));
    for (uint64_t done = 0; done < length;) {
      uint64_t n = std::min<uint64_t>(length - done, staging.size());
      if (fsdprt_status_t status =
              read(file, fqn, offset + done, n, staging.data()))
        return status;
      backend.upload(static_cast<char *>(data) + done, staging.data(), n);
      done += n;
    }
    return nullptr;
  }
};

inline std::vector<int64_t> meshOf(const plan::Plan &p) {
  std::vector<int64_t> mesh;
  if (p.mesh_shape())
    mesh.assign(p.mesh_shape()->begin(), p.mesh_shape()->end());
  return mesh;
}

inline std::vector<int64_t> unitAxes(const plan::Unit &u) {
  std::vector<int64_t> axes;
  if (u.mesh_axes())
    axes.assign(u.mesh_axes()->begin(), u.mesh_axes()->end());
  return axes;
}

/// A unit's layout over its group (checked when the plan was loaded).
inline ::fsdp::layout::FlatLayout layoutOf(const plan::Unit &u,
                                           const std::vector<int64_t> &mesh) {
  std::vector<int64_t> numels;
  if (u.params())
    for (const plan::UnitParam *param : *u.params()) {
      int64_t numel = 1;
      if (param->shape())
        for (int64_t d : *param->shape())
          numel *= d;
      numels.push_back(numel);
    }
  std::string error;
  int64_t ranks = fsdprt::groupPosition(mesh, unitAxes(u), 0).size;
  return *::fsdp::layout::FlatLayout::create(numels, ranks, u.alignment(),
                                             error);
}

/// Where a state tensor's whole bytes are: given its FQN, dtype and shape,
/// sets the file and the offset of its first byte, or fails (naming what
/// differs where the file holds another dtype or shape).
using Locator = std::function<fsdprt_status_t(
    const std::string &fqn, fsdprt_dtype_t dtype,
    const std::vector<int64_t> &shape, std::string &file, uint64_t &offset)>;

/// Fills each unit's shard with what `rank` owns, read through the layout
/// from the members' bytes: where the plan's weight map says, or where
/// `locate` finds them (a checkpoint).
fsdprt_status_t loadShards(fsdprt_session_s &s, WeightReader &reader,
                           int64_t rank, const Locator &locate = nullptr);

} // namespace fsdprt

#endif // FSDPRT_SRC_SESSION_INTERNAL_H
