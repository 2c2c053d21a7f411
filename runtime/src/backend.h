//===- backend.h - The runtime's backend interface --------------*- C++ -*-===//
//
// What a device backend provides to a session: arenas (one allocation per
// plan arena, never per op), kernels (prepared once per plan kernel, when
// the session is created, then run many times), one scratch workspace that
// the kernels of a session share, and streams with events (the order
// kernels and, later, collectives run in). The CPU backend runs a stream's
// work in order on the calling thread, so its events are complete when
// recorded; the CUDA backend maps them to cudaStream_t and cudaEvent_t.
//
// Errors: preparing a kernel throws KernelError (the session turns it into
// an fsdprt_status_t naming the kernel's op and location); running one
// returns "" or a message, which the session reports the same way.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_SRC_BACKEND_H
#define FSDPRT_SRC_BACKEND_H

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdprt {

/// A plan buffer bound to memory.
struct Tensor {
  void *data = nullptr;
  fsdprt_dtype_t dtype = FSDPRT_F32;
  std::vector<int64_t> shape;
  int64_t numel = 1;

  template <typename T> T *as() const { return static_cast<T *>(data); }
  size_t bytes() const { return numel * fsdprt_dtype_size(dtype); }
};

/// A kernel's shapes or attributes do not fit its op.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A plan kernel's attributes, looked up by name.
class Attrs {
public:
  explicit Attrs(const plan::Kernel &kernel) : kernel(kernel) {}
  /// The attribute named `name`, or `fallback` when absent. A present
  /// attribute of another kind throws KernelError.
  int64_t getInt(const char *name, int64_t fallback) const;
  double getFloat(const char *name, double fallback) const;
  std::string getString(const char *name, const std::string &fallback) const;
  std::vector<int64_t> getInts(const char *name,
                               std::vector<int64_t> fallback) const;
  std::vector<double> getFloats(const char *name,
                                std::vector<double> fallback) const;
  bool has(const char *name) const { return find(name) != nullptr; }

private:
  const plan::Attr *find(const char *name) const;
  const plan::Kernel &kernel;
};

/// Scratch memory shared by a session's kernels (they run one after the
/// other): each kernel reserves what it needs when prepared and reads the
/// address when it runs; the session allocates the largest reservation once.
class Workspace {
public:
  void reserve(uint64_t bytes) { size = std::max(size, bytes); }
  uint64_t bytes() const { return size; }
  void *data() const { return memory; }
  template <typename T> T *as() const { return static_cast<T *>(memory); }
  void bind(void *address) { memory = address; }

private:
  uint64_t size = 0;
  void *memory = nullptr;
};

/// A prepared kernel: runs on bound tensors; returns "" or a message.
using KernelFn = std::function<std::string()>;

/// What random kernels (dropout) draw from, owned by the session: its seed,
/// the step (the runs it has completed, read by a kernel when it runs) and
/// its rank, which places the rank's slice of the global batch among the
/// elements (docs/training.md, "Randomness").
struct RandomState {
  uint64_t seed = 0;
  uint32_t step = 0;
  int64_t rank = 0;
};

/// What a kernel factory receives. Factories check shapes, dtypes and
/// attributes and throw KernelError (saying what is wrong) on a mismatch.
struct KernelArgs {
  std::vector<Tensor> in, out;
  Attrs attrs;
  /// The threads the kernel may use when it runs (>= 1).
  int threads;
  Workspace *workspace;
  /// The kernel in messages ("kernel 12 (gather at 'node')"): faults a
  /// device finds after the launch are reported with it.
  std::string where = {};
  /// The session's random state (nullptr: kernels that draw refuse).
  const RandomState *random = nullptr;
};

/// Work runs on a stream in order; an event marks a point of a stream that
/// another stream can wait for.
class Event {
public:
  virtual ~Event() = default;
  virtual bool done() const = 0;
};

/// What a stream reports once synchronised: "" or what failed, and
/// whether the data caused it (a label or an index out of range that a
/// kernel recorded; the message names the kernel) or the device did.
struct StreamFailure {
  std::string message;
  bool data = false;
};

/// A stream's work captured once and replayed as a whole (a CUDA graph).
class Graph {
public:
  virtual ~Graph() = default;
};

class Stream {
public:
  virtual ~Stream() = default;
  /// Graphs: between beginCapture and endCapture, launches are recorded
  /// into a graph instead of run; replay then runs the graph. A backend
  /// without graphs (the CPU) says so with canCapture.
  virtual bool canCapture() const { return false; }
  virtual std::string beginCapture() { return "this backend has no graphs"; }
  virtual std::unique_ptr<Graph> endCapture(std::string &error) {
    error = "this backend has no graphs";
    return nullptr;
  }
  virtual std::string replay(Graph &) { return "this backend has no graphs"; }
  /// Runs (or enqueues) `kernel`; a failure is returned as a message.
  virtual std::string launch(const KernelFn &kernel) = 0;
  virtual std::unique_ptr<Event> record() = 0;
  virtual void wait(const Event &event) = 0;
  /// Device time, for a stream whose launches return before their work is
  /// done (the CUDA backend): an event the device can time, and the
  /// seconds between two of them once the stream is synchronised. A
  /// stream that runs its work as it is launched (the CPU) has none
  /// (nullptr, -1): the host's clock times it.
  virtual std::unique_ptr<Event> recordTimed() { return nullptr; }
  virtual double elapsed(const Event &, const Event &) { return -1; }
  /// Waits for everything launched so far; returns the first failure.
  virtual StreamFailure synchronize() = 0;
};

/// The calling thread's execution settings (threads, device) for the
/// lifetime of the object; the host's own settings come back afterwards.
class ExecutionScope {
public:
  virtual ~ExecutionScope() = default;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// One block of `bytes` bytes aligned to `alignment` (a power of two, at
  /// least 64); nullptr when memory runs out.
  virtual void *allocate(uint64_t bytes, uint64_t alignment) = 0;
  virtual void free(void *memory) = 0;
  /// Moves bytes between host memory and the backend's memory (arenas,
  /// the workspace): sessions, weight loading and checkpoints never touch
  /// backend memory but through these. Each returns when `dst` may be read
  /// (CPU: memcpy and memset; CUDA: synchronous copies, staged through
  /// pinned memory).
  virtual void upload(void *dst, const void *src, uint64_t bytes) = 0;
  virtual void download(void *dst, const void *src, uint64_t bytes) = 0;
  /// Within the backend's memory.
  virtual void copy(void *dst, const void *src, uint64_t bytes) = 0;
  virtual void fill(void *dst, uint8_t value, uint64_t bytes) = 0;
  /// Whether the host reads the backend's memory directly (the CPU
  /// backend); otherwise what the host reads is downloaded first.
  virtual bool hostAccessible() const = 0;
  /// Prepares plan kernel `op` on `args`; throws KernelError on a mismatch.
  virtual KernelFn prepare(const std::string &op, KernelArgs &args) = 0;
  virtual std::unique_ptr<Stream> createStream() = 0;
  /// The threads kernels use for a `requested` count (0: one per core).
  virtual int resolveThreads(int requested) const = 0;
  /// Makes the calling thread run kernels with `threads` threads until the
  /// scope ends.
  virtual std::unique_ptr<ExecutionScope> enter(int threads) = 0;
};

/// The CPU backend: OpenBLAS for GEMMs, OpenMP loops for the rest.
std::unique_ptr<Backend> createCpuBackend();

/// The CUDA backend's host code on host memory: device "fake-cuda", for
/// tests (runtime/backends/cuda/fake_device.cpp). Ops with no own kernel
/// run the CPU backend's kernel, unless `strict` ("fake-cuda:strict"):
/// then they are refused when the session is created, as on a GPU. With
/// `cudnn` ("fake-cuda:cudnn", strict too) attention runs through the
/// backend's cuDNN path on a host model of cuDNN's graphs.
std::unique_ptr<Backend> createFakeCudaBackend(bool strict = false,
                                               bool cudnn = false);

/// The backend for session option `device` ("cpu", "fake-cuda",
/// "fake-cuda:strict", "fake-cuda:cudnn", "cuda", "cuda:N"; empty: "cpu"),
/// or nullptr with
/// `error` saying why not.
std::unique_ptr<Backend> createBackend(const std::string &device,
                                       std::string &error);

} // namespace fsdprt

#endif // FSDPRT_SRC_BACKEND_H
