//===- backend.h - The runtime's backend interface --------------*- C++ -*-===//
//
// What a device backend provides to a session: arenas (one allocation per
// plan arena, never per op), kernels (prepared once per plan kernel, when
// the session is created, then run many times) and streams with events
// (the order kernels and, later, collectives run in). The CPU backend runs
// a stream's work in order on the calling thread, so its events are
// complete when recorded; the CUDA backend maps them to cudaStream_t and
// cudaEvent_t.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_SRC_BACKEND_H
#define FSDPRT_SRC_BACKEND_H

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <cstdint>
#include <functional>
#include <memory>
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

/// A plan kernel's attributes, looked up by name.
class Attrs {
public:
  explicit Attrs(const plan::Kernel &kernel) : kernel(kernel) {}
  /// The attribute named `name`, or `fallback` when absent. A present
  /// attribute of another kind throws AttrError.
  int64_t getInt(const char *name, int64_t fallback) const;
  double getFloat(const char *name, double fallback) const;
  std::string getString(const char *name, const std::string &fallback) const;
  std::vector<int64_t> getInts(const char *name,
                               std::vector<int64_t> fallback) const;
  bool has(const char *name) const { return find(name) != nullptr; }

private:
  const plan::Attr *find(const char *name) const;
  const plan::Kernel &kernel;
};

/// A prepared kernel: runs on bound tensors; returns "" or a message.
using KernelFn = std::function<std::string()>;

/// What a kernel factory receives. Factories check shapes and dtypes and
/// throw KernelError (with a message saying what is wrong) on a mismatch.
struct KernelArgs {
  std::vector<Tensor> in, out;
  Attrs attrs;
  int threads;
};

struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Work runs on a stream in order; an event marks a point of a stream that
/// another stream can wait for.
class Event {
public:
  virtual ~Event() = default;
  virtual bool done() const = 0;
};

class Stream {
public:
  virtual ~Stream() = default;
  /// Runs (or enqueues) `kernel`; a failure is returned as a message.
  virtual std::string launch(const KernelFn &kernel) = 0;
  virtual std::unique_ptr<Event> record() = 0;
  virtual void wait(const Event &event) = 0;
  /// Waits for everything launched so far; returns the first failure.
  virtual std::string synchronize() = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// One arena of `bytes` bytes aligned to `alignment`; nullptr when memory
  /// runs out.
  virtual void *allocateArena(uint64_t bytes, uint64_t alignment) = 0;
  virtual void freeArena(void *arena) = 0;
  /// Prepares plan kernel `op` on `args`; throws KernelError on a mismatch.
  virtual KernelFn prepare(const std::string &op, KernelArgs &args) = 0;
  virtual std::unique_ptr<Stream> createStream() = 0;
  /// Bounds the threads kernels use (0: one per core).
  virtual void setThreads(int threads) = 0;
};

/// The CPU backend: OpenBLAS for GEMMs, OpenMP loops for the rest.
std::unique_ptr<Backend> createCpuBackend();

} // namespace fsdprt

#endif // FSDPRT_SRC_BACKEND_H
