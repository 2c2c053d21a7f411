//===- cpu_backend.cpp - The CPU backend ----------------------------------===//

#include "kernels.h"

#include "../../src/half.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

namespace fsdprt {

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const plan::Attr *Attrs::find(const char *name) const {
  if (!kernel.attrs())
    return nullptr;
  for (const plan::Attr *attr : *kernel.attrs())
    if (attr->name()->str() == name)
      return attr;
  return nullptr;
}

int64_t Attrs::getInt(const char *name, int64_t fallback) const {
  const plan::Attr *attr = find(name);
  if (!attr)
    return fallback;
  if (const plan::IntAttr *value = attr->value_as_IntAttr())
    return value->value();
  throw KernelError(std::string("attribute '") + name + "' is not an int");
}

double Attrs::getFloat(const char *name, double fallback) const {
  const plan::Attr *attr = find(name);
  if (!attr)
    return fallback;
  if (const plan::FloatAttr *value = attr->value_as_FloatAttr())
    return value->value();
  throw KernelError(std::string("attribute '") + name + "' is not a float");
}

std::string Attrs::getString(const char *name,
                             const std::string &fallback) const {
  const plan::Attr *attr = find(name);
  if (!attr)
    return fallback;
  if (const plan::StringAttr *value = attr->value_as_StringAttr())
    return value->value() ? value->value()->str() : "";
  throw KernelError(std::string("attribute '") + name + "' is not a string");
}

std::vector<int64_t> Attrs::getInts(const char *name,
                                    std::vector<int64_t> fallback) const {
  const plan::Attr *attr = find(name);
  if (!attr)
    return fallback;
  if (const plan::IntsAttr *value = attr->value_as_IntsAttr())
    return value->values() ? std::vector<int64_t>(value->values()->begin(),
                                                  value->values()->end())
                           : std::vector<int64_t>();
  throw KernelError(std::string("attribute '") + name +
                    "' is not a list of ints");
}

std::vector<double> Attrs::getFloats(const char *name,
                                     std::vector<double> fallback) const {
  const plan::Attr *attr = find(name);
  if (!attr)
    return fallback;
  if (const plan::FloatsAttr *value = attr->value_as_FloatsAttr())
    return value->values() ? std::vector<double>(value->values()->begin(),
                                                 value->values()->end())
                           : std::vector<double>();
  throw KernelError(std::string("attribute '") + name +
                    "' is not a list of floats");
}

namespace cpu {

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

void requireArity(const KernelArgs &args, size_t minIn, size_t maxIn,
                  size_t out) {
  require(args.in.size() >= minIn && args.in.size() <= maxIn,
          "takes " + std::to_string(minIn) +
              (maxIn != minIn ? " to " + std::to_string(maxIn) : "") +
              " inputs, not " + std::to_string(args.in.size()));
  require(args.out.size() == out, "has " + std::to_string(args.out.size()) +
                                      " outputs, expected " +
                                      std::to_string(out));
}

void requireDtype(const Tensor &t, fsdprt_dtype_t dtype, const char *what) {
  require(t.dtype == dtype, std::string(what) + " must be " +
                                fsdprt_dtype_name(dtype) + ", not " +
                                fsdprt_dtype_name(t.dtype));
}

void requireF32(const KernelArgs &args) {
  for (const Tensor &t : args.in)
    requireDtype(t, FSDPRT_F32, "every input");
  for (const Tensor &t : args.out)
    requireDtype(t, FSDPRT_F32, "every output");
}

void requireAtLeast(const std::vector<int64_t> &values, int64_t min,
                    const char *name) {
  for (int64_t v : values)
    require(v >= min, std::string(name) + " must be >= " + std::to_string(min) +
                          ", not " + std::to_string(v));
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i)
    n *= shape[i];
  return n;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target,
                                      const char *what) {
  require(shape.size() <= target.size(),
          std::string(what) + " " + shapeString(shape) +
              " does not broadcast to " + shapeString(target));
  std::vector<int64_t> own = stridesOf(shape);
  std::vector<int64_t> strides(target.size(), 0);
  size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    require(shape[i] == target[offset + i] || shape[i] == 1,
            std::string(what) + " " + shapeString(shape) +
                " does not broadcast to " + shapeString(target));
    strides[offset + i] = shape[i] == 1 ? 0 : own[i];
  }
  return strides;
}

std::vector<int64_t> broadcastShapes(const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    require(da == db || da == 1 || db == 1,
            shapeString(a) + " and " + shapeString(b) + " do not broadcast");
    shape[i] = da == 1 ? db : da;
  }
  return shape;
}

int64_t windowOutput(int64_t in, int64_t padBegin, int64_t padEnd,
                     int64_t kernel, int64_t stride, int64_t dilation,
                     bool ceil) {
  // `span`: how far the first window's start may move and still end
  // inside the padded input. With ceil a window may end past it, even the
  // first (a window wider than the padded input, EfficientNet's
  // AvgPool2d(hidden_dim, ceil_mode=True) over a 1x1 map): rounded to
  // minus infinity, as PyTorch's and ONNX's output-size formulas are.
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (!ceil)
    return span < 0 ? -1 : span / stride + 1;
  int64_t reach = span + stride - 1;
  int64_t out =
      (reach >= 0 ? reach / stride : -((stride - 1 - reach) / stride)) + 1;
  if ((out - 1) * stride >= in + padBegin)
    --out;
  return out < 1 ? -1 : out;
}

Activation parseActivation(const std::string &name) {
  static const std::pair<const char *, Activation> kNames[] = {
      {"none", Activation::None},      {"relu", Activation::Relu},
      {"gelu", Activation::Gelu},      {"gelu_tanh", Activation::GeluTanh},
      {"silu", Activation::Silu},      {"tanh", Activation::Tanh},
      {"sigmoid", Activation::Sigmoid}};
  for (const auto &[text, kind] : kNames)
    if (name == text)
      return kind;
  throw KernelError("unknown activation '" + name +
                    "' (none, relu, gelu, gelu_tanh, silu, tanh, sigmoid)");
}

namespace {

//===----------------------------------------------------------------------===//
// Streams: in order, on the calling thread
//===----------------------------------------------------------------------===//

class CpuEvent : public Event {
public:
  bool done() const override { return true; }
};

class CpuStream : public Stream {
public:
  std::string launch(const KernelFn &kernel) override { return kernel(); }
  std::unique_ptr<Event> record() override {
    return std::make_unique<CpuEvent>();
  }
  void wait(const Event &) override {}
  StreamFailure synchronize() override { return {}; }
};

/// OpenMP's thread count for the calling thread, and OpenBLAS's (1: GEMMs
/// are split by OpenMP, see sgemm), while a session runs. OpenMP's count
/// is per thread; OpenBLAS's is global, so the first of concurrent runs
/// (sessions in several host threads) saves it and the last restores it.
class CpuScope : public ExecutionScope {
public:
  explicit CpuScope(int threads) : ompThreads(omp_get_max_threads()) {
    omp_set_num_threads(threads);
    std::lock_guard<std::mutex> lock(blasMutex);
    if (runs++ == 0) {
      blasThreads = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~CpuScope() override {
    omp_set_num_threads(ompThreads);
    std::lock_guard<std::mutex> lock(blasMutex);
    if (--runs == 0)
      openblas_set_num_threads(blasThreads);
  }

private:
  int ompThreads;
  static inline std::mutex blasMutex;
  static inline int runs = 0, blasThreads = 1;
};

/// Runs `factory`'s fp32 kernel on a kernel whose float tensors are bf16 or
/// f16: each half input is widened into fp32 scratch, the kernel computes
/// in fp32, and each half output is rounded back (nearest-even). So every
/// op computes in fp32 and stores in half precision, as torch's CPU
/// kernels and the GPU's do. The scratch lives in the session's workspace
/// after the kernel's own: prepared once on placeholder tensors (shapes
/// and attributes are checked then), the kernel is bound to the workspace
/// once its address is known, when it first runs.
KernelFn widened(Factory factory, KernelArgs &args) {
  struct Wide {
    KernelArgs args;
    Workspace own;                // the fp32 kernel's workspace, first
    std::vector<uint64_t> at;     // each tensor's scratch offset, or ~0
    uint64_t ownBytes = 0;
    void *base = nullptr;         // the workspace the kernel is bound to
    KernelFn kernel;
  };
  auto wide = std::make_shared<Wide>(Wide{args, {}, {}, 0, nullptr, {}});
  wide->args.workspace = &wide->own;
  std::vector<Tensor *> tensors;
  for (auto *list : {&wide->args.in, &wide->args.out})
    for (Tensor &t : *list)
      tensors.push_back(&t);
  uint64_t scratch = 0;
  for (Tensor *t : tensors) {
    if (!isHalf(t->dtype)) {
      wide->at.push_back(~uint64_t(0));
      continue;
    }
    t->dtype = FSDPRT_F32;
    t->data = nullptr;
    wide->at.push_back(scratch);
    scratch += (t->numel * sizeof(float) + 63) / 64 * 64;
  }
  factory(wide->args); // throws KernelError if fp32 does not fit either
  wide->ownBytes = (wide->own.bytes() + 63) / 64 * 64;
  Workspace *session = args.workspace;
  session->reserve(wide->ownBytes + scratch);
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    char *base = session->as<char>();
    if (wide->base != base) {
      size_t i = 0;
      for (auto *list : {&wide->args.in, &wide->args.out})
        for (Tensor &t : *list) {
          if (wide->at[i] != ~uint64_t(0))
            t.data = base + wide->ownBytes + wide->at[i];
          ++i;
        }
      wide->own.bind(base);
      wide->kernel = factory(wide->args);
      wide->base = base;
    }
    for (size_t i = 0; i < in.size(); ++i)
      if (isHalf(in[i].dtype)) {
        const uint16_t *from = in[i].as<uint16_t>();
        float *to = wide->args.in[i].as<float>();
        fsdprt_dtype_t dtype = in[i].dtype;
        parallelFor(in[i].numel, 4,
                    [&](int64_t k) { to[k] = halfToFloat(from[k], dtype); });
      }
    std::string error = wide->kernel();
    if (!error.empty())
      return error;
    for (size_t i = 0; i < out.size(); ++i)
      if (isHalf(out[i].dtype)) {
        const float *from = wide->args.out[i].as<float>();
        uint16_t *to = out[i].as<uint16_t>();
        fsdprt_dtype_t dtype = out[i].dtype;
        parallelFor(out[i].numel, 4,
                    [&](int64_t k) { to[k] = floatToHalf(from[k], dtype); });
      }
    return std::string();
  };
}

class CpuBackend : public Backend {
public:
  CpuBackend() {
    registerElementwise(registry);
    registerLinalg(registry);
    registerNN(registry);
    registerData(registry);
    registerOptim(registry);
    registerRandom(registry);
    registerRecurrent(registry);
  }

  const char *name() const override { return "cpu"; }

  void *allocate(uint64_t bytes, uint64_t alignment) override {
    uint64_t size =
        (std::max<uint64_t>(bytes, 1) + alignment - 1) / alignment * alignment;
    if (size < bytes) // wrapped around: no machine has that much memory
      return nullptr;
    return std::aligned_alloc(alignment, size);
  }

  void free(void *memory) override { std::free(memory); }

  void upload(void *dst, const void *src, uint64_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
  }
  void download(void *dst, const void *src, uint64_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
  }
  void copy(void *dst, const void *src, uint64_t bytes) override {
    if (bytes && dst != src)
      std::memmove(dst, src, bytes);
  }
  void fill(void *dst, uint8_t value, uint64_t bytes) override {
    if (bytes)
      std::memset(dst, value, bytes);
  }
  bool hostAccessible() const override { return true; }

  KernelFn prepare(const std::string &op, KernelArgs &args) override {
    auto it = registry.find(op);
    if (it == registry.end())
      throw KernelError("is not a kernel of the CPU backend");
    // Kernels that move elements (copies, transposes, gathers, casts) take
    // bf16 and f16 as they are; the others compute in fp32 (widened).
    try {
      return it->second(args);
    } catch (const KernelError &) {
      bool half = false;
      for (const auto *list : {&args.in, &args.out})
        for (const Tensor &t : *list)
          half |= isHalf(t.dtype);
      if (!half)
        throw;
      try {
        return widened(it->second, args);
      } catch (const KernelError &) {
      }
      throw;
    }
  }

  std::unique_ptr<Stream> createStream() override {
    return std::make_unique<CpuStream>();
  }

  int resolveThreads(int requested) const override {
    return requested > 0
               ? requested
               : std::clamp(omp_get_num_procs(), 1, FSDPRT_MAX_THREADS);
  }

  std::unique_ptr<ExecutionScope> enter(int threads) override {
    return std::make_unique<CpuScope>(resolveThreads(threads));
  }

private:
  Registry registry;
};

} // namespace
} // namespace cpu

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<cpu::CpuBackend>();
}

} // namespace fsdprt
