//===- fake_backend.cpp - The CUDA backend's host code on a fake device ---===//
//
// Device "fake-cuda": what the CUDA backend does, run on host memory, so
// that CI checks it without a GPU. Arenas are blocks standing in for
// device memory; the host reaches them only through upload, download,
// copy and fill (hostAccessible is false, so checkpoints download as they
// will from a GPU); kernels launch on streams, every launch goes through
// the hazard checker (hazards.h) with the bytes it reads and writes; the
// project's own kernels run their bodies (kernels/) with the host
// launchers, in groups of 4 lanes, and a kernel's ErrorSlot is read after
// it ran. Ops that have no own kernel yet run the CPU backend's kernel on
// the same memory (the real device will refuse them until they have one).
//
//===----------------------------------------------------------------------===//

#include "../cpu/kernels.h"
#include "hazards.h"
#include "host_launch.h"
#include "kernels/data.h"
#include "kernels/elementwise.h"
#include "kernels/losses.h"
#include "kernels/rows.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace fsdprt {
namespace cuda {
namespace {

/// Lanes of a host group: more than one, so that the bodies' striding and
/// reductions run as on a block.
constexpr int kLanes = 4;

Range rangeOf(const Tensor &t) {
  auto begin = reinterpret_cast<uintptr_t>(t.data);
  return {begin, begin + t.bytes()};
}

class FakeBackend;

/// The stream a kernel is launched on (set by FakeStream::launch).
thread_local int currentStream = 0;

class FakeEvent : public Event {
public:
  explicit FakeEvent(std::vector<uint64_t> clock) : clock(std::move(clock)) {}
  bool done() const override { return true; }
  std::vector<uint64_t> clock;
};

class FakeStream : public Stream {
public:
  FakeStream(HazardChecker &checker, std::mutex &mutex)
      : checker(checker), mutex(mutex) {
    std::lock_guard<std::mutex> lock(mutex);
    index = checker.addStream();
  }
  std::string launch(const KernelFn &kernel) override {
    currentStream = index;
    return kernel();
  }
  std::unique_ptr<Event> record() override {
    std::lock_guard<std::mutex> lock(mutex);
    return std::make_unique<FakeEvent>(checker.record(index));
  }
  void wait(const Event &event) override {
    std::lock_guard<std::mutex> lock(mutex);
    checker.wait(index, static_cast<const FakeEvent &>(event).clock);
  }
  std::string synchronize() override {
    std::lock_guard<std::mutex> lock(mutex);
    checker.synchronize();
    return "";
  }

private:
  HazardChecker &checker;
  std::mutex &mutex;
  int index;
};

bool allF32(const KernelArgs &args) {
  for (const auto *list : {&args.in, &args.out})
    for (const Tensor &t : *list)
      if (t.dtype != FSDPRT_F32)
        return false;
  return true;
}

class FakeBackend : public Backend {
public:
  FakeBackend() : cpu(createCpuBackend()) {}

  const char *name() const override { return "fake-cuda"; }

  void *allocate(uint64_t bytes, uint64_t alignment) override {
    return cpu->allocate(bytes, std::max<uint64_t>(alignment, 256));
  }
  void free(void *memory) override { cpu->free(memory); }

  // Synchronous copies, as cudaMemcpy: the device is idle around them.
  void upload(void *dst, const void *src, uint64_t bytes) override {
    idle([&] { std::memcpy(dst, src, bytes); });
  }
  void download(void *dst, const void *src, uint64_t bytes) override {
    idle([&] { std::memcpy(dst, src, bytes); });
  }
  void copy(void *dst, const void *src, uint64_t bytes) override {
    idle([&] { std::memmove(dst, src, bytes); });
  }
  void fill(void *dst, uint8_t value, uint64_t bytes) override {
    idle([&] { std::memset(dst, value, bytes); });
  }
  bool hostAccessible() const override { return false; }

  KernelFn prepare(const std::string &op, KernelArgs &args) override {
    KernelFn body = own(op, args);
    if (!body)
      body = cpu->prepare(op, args); // no own kernel yet: the CPU's
    Work work{op, {}, {}};
    for (const Tensor &t : args.in)
      work.reads.push_back(rangeOf(t));
    for (const Tensor &t : args.out)
      work.writes.push_back(rangeOf(t));
    return [this, body, work]() -> std::string {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (std::string hazard = checker.run(currentStream, work);
            !hazard.empty())
          return hazard;
      }
      return body();
    };
  }

  std::unique_ptr<Stream> createStream() override {
    return std::make_unique<FakeStream>(checker, mutex);
  }
  int resolveThreads(int requested) const override {
    return cpu->resolveThreads(requested);
  }
  std::unique_ptr<ExecutionScope> enter(int threads) override {
    return cpu->enter(threads);
  }

private:
  /// Runs `f` with the device idle (every stream synchronised).
  template <class F> void idle(F f) {
    std::lock_guard<std::mutex> lock(mutex);
    checker.synchronize();
    f();
  }

  /// The project's own kernel for `op`, or an empty function.
  KernelFn own(const std::string &op, KernelArgs &args);

  std::unique_ptr<Backend> cpu;
  HazardChecker checker;
  std::mutex mutex;
};

/// Checks `args` for `op` as the CPU backend's kernel does, which throws
/// KernelError naming what is wrong (the own kernels then need not repeat
/// the rules); its workspace reservation is not kept.
void checkLikeTheCpu(const std::string &op, const KernelArgs &args) {
  static const std::unique_ptr<Backend> cpu = createCpuBackend();
  KernelArgs check = args;
  Workspace unused;
  check.workspace = &unused;
  cpu->prepare(op, check);
}

template <Unary Op> KernelFn unaryKernel(const KernelArgs &args) {
  const Tensor x = args.in[0], y = args.out[0];
  return [x, y]() {
    hostForEach(UnaryBody<Op>{x.as<float>(), y.as<float>()}, y.numel);
    return std::string();
  };
}

template <Binary Op> KernelFn binaryKernel(const KernelArgs &args) {
  const Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  Broadcast plan;
  try {
    plan = planBroadcast(y.shape, {a.shape, b.shape});
  } catch (const std::invalid_argument &) {
    return nullptr; // the CPU kernel names what is wrong
  }
  return [plan, a, b, y]() {
    hostForEach(BinaryBody<Op>{plan, a.as<float>(), b.as<float>(), y.as<float>()},
                y.numel);
    return std::string();
  };
}

/// layer_norm / rms_norm over contiguous rows, with a scale and bias of
/// the row's elements (or none); other broadcasts: the CPU's kernel.
KernelFn normKernel(const std::string &op, const KernelArgs &args) {
  bool rms = op == "rms_norm";
  const Tensor x = args.in[0], y = args.out[0];
  if (x.shape.empty() || x.shape != y.shape)
    return nullptr;
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = rms ? rank - 1 : args.attrs.getInt("axis", -1);
  if (axis < 0 || axis >= rank || (!rms && args.in.size() < 2))
    return nullptr;
  int64_t cols = 1;
  for (int64_t d = axis; d < rank; ++d)
    cols *= x.shape[d];
  for (size_t i = 1; i < args.in.size(); ++i)
    if (args.in[i].numel != cols)
      return nullptr;
  const float *scale = args.in.size() > 1 ? args.in[1].as<float>() : nullptr;
  const float *bias = args.in.size() > 2 ? args.in[2].as<float>() : nullptr;
  float eps = static_cast<float>(args.attrs.getFloat("epsilon", rms ? 1e-6 : 1e-5));
  int64_t rows = cols ? x.numel / cols : 0;
  return [=]() {
    if (rms)
      hostForEachRow(NormBody<true>{x.as<float>(), scale, bias, y.as<float>(), cols, eps},
                     rows, kLanes);
    else
      hostForEachRow(NormBody<false>{x.as<float>(), scale, bias, y.as<float>(), cols, eps},
                     rows, kLanes);
    return std::string();
  };
}

/// softmax_cross_entropy(_grad) (kernels/losses.h): its scratch and its
/// ErrorSlot in the workspace; a bad label read from the slot after the
/// kernels ran, reported as the CPU kernel does.
KernelFn crossEntropyKernel(const std::string &op, KernelArgs &args) {
  bool grad = op == "softmax_cross_entropy_grad";
  size_t base = grad ? 3 : 2;
  if (args.in.size() < base || args.in.size() > base + 1 || args.out.size() != 1)
    return nullptr;
  const Tensor scores = args.in[0], labels = args.in[1], y = args.out[0];
  bool weighted = args.in.size() == base + 1;
  if (scores.dtype != FSDPRT_F32 || labels.dtype != FSDPRT_I64 ||
      y.dtype != FSDPRT_F32 || scores.shape.size() < 2 ||
      (weighted && args.in[base].dtype != FSDPRT_F32) ||
      (grad && args.in[2].dtype != FSDPRT_F32))
    return nullptr;
  // The CPU kernel checks shapes and attributes and names what is wrong.
  checkLikeTheCpu(op, args);
  int64_t classes = scores.shape[1];
  int64_t positions = labels.numel, inner = positions / scores.shape[0];
  std::string reduction = args.attrs.getString("reduction", "mean");
  bool none = reduction == "none", mean = reduction == "mean";
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  const float *weights = weighted ? args.in[base].as<float>() : nullptr;
  const float *g = grad ? args.in[2].as<float>() : nullptr;
  Workspace *workspace = args.workspace;
  workspace->reserve(64 + (2 * positions + 1) * sizeof(float));
  return [=]() -> std::string {
    auto *slot = workspace->as<ErrorSlot>();
    *slot = {0, 0};
    float *scratch = reinterpret_cast<float *>(workspace->as<char>() + 64);
    CrossEntropyInputs in{scores.as<float>(), labels.as<int64_t>(), weights,
                          classes, inner, hasIgnore, ignore, slot};
    HostLauncher launch{kLanes};
    if (grad)
      crossEntropyGrad(launch, in, positions, g, none, mean, scratch,
                       y.as<float>());
    else
      crossEntropy(launch, in, positions, none, mean, scratch, y.as<float>());
    if (slot->code == kBadLabel)
      return "label " + std::to_string(slot->detail) + " is outside [0, " +
             std::to_string(classes) + ")";
    return "";
  };
}

template <typename T>
KernelFn gatherOf(const Tensor &data, const Tensor &indices, const Tensor &y,
                  int64_t dim, int64_t inner, Workspace *workspace) {
  return [=]() -> std::string {
    auto *slot = workspace->as<ErrorSlot>();
    *slot = {0, 0};
    if (indices.dtype == FSDPRT_I32)
      hostForEach(GatherBody<T, int32_t>{data.as<T>(), indices.as<int32_t>(), y.as<T>(),
                                         dim, indices.numel, inner, slot},
                  y.numel);
    else
      hostForEach(GatherBody<T, int64_t>{data.as<T>(), indices.as<int64_t>(), y.as<T>(),
                                         dim, indices.numel, inner, slot},
                  y.numel);
    if (slot->code == kBadIndex)
      return "index " + std::to_string(slot->detail) +
             " is out of range for a dimension of size " + std::to_string(dim);
    return "";
  };
}

/// gather (kernels/data.h) by element size; its ErrorSlot in the
/// workspace, read after the kernel ran.
KernelFn gatherKernel(KernelArgs &args) {
  checkLikeTheCpu("gather", args);
  const Tensor data = args.in[0], indices = args.in[1], y = args.out[0];
  int64_t axis = args.attrs.getInt("axis", 0), dim = data.shape[axis], inner = 1;
  for (size_t d = axis + 1; d < data.shape.size(); ++d)
    inner *= data.shape[d];
  args.workspace->reserve(sizeof(ErrorSlot));
  switch (fsdprt_dtype_size(data.dtype)) {
  case 1: return gatherOf<uint8_t>(data, indices, y, dim, inner, args.workspace);
  case 2: return gatherOf<uint16_t>(data, indices, y, dim, inner, args.workspace);
  case 4: return gatherOf<uint32_t>(data, indices, y, dim, inner, args.workspace);
  case 8: return gatherOf<uint64_t>(data, indices, y, dim, inner, args.workspace);
  }
  return nullptr;
}

/// transpose, slice and expand: the CPU backend's plan of the read (its
/// checks), run by StridedReadBody by element size.
template <typename T>
KernelFn stridedOf(const Tensor &x, const Tensor &y, const Broadcast &plan,
                   int64_t offset) {
  return [=]() {
    hostForEach(StridedReadBody<T>{plan, x.as<T>(), y.as<T>(), offset}, y.numel);
    return std::string();
  };
}

KernelFn stridedKernel(const std::string &op, const KernelArgs &args) {
  cpu::StridedRead read = cpu::stridedRead(op, args);
  const Tensor x = args.in[0], y = args.out[0];
  Broadcast plan;
  try {
    plan = planStrided(y.shape, read.strides);
  } catch (const std::invalid_argument &) {
    return nullptr;
  }
  switch (fsdprt_dtype_size(y.dtype)) {
  case 1: return stridedOf<uint8_t>(x, y, plan, read.offset);
  case 2: return stridedOf<uint16_t>(x, y, plan, read.offset);
  case 4: return stridedOf<uint32_t>(x, y, plan, read.offset);
  case 8: return stridedOf<uint64_t>(x, y, plan, read.offset);
  }
  return nullptr;
}

/// cast between fp32 and bf16/f16 through its bodies; other casts: the
/// CPU's kernel.
KernelFn castKernel(const KernelArgs &args) {
  if (args.in.size() != 1 || args.out.size() != 1 ||
      args.in[0].shape != args.out[0].shape)
    return nullptr;
  const Tensor x = args.in[0], y = args.out[0];
  if (x.dtype == FSDPRT_F32 && isHalf(y.dtype))
    return [=]() {
      hostForEach(CastToHalf{x.as<float>(), y.as<uint16_t>(), y.dtype}, y.numel);
      return std::string();
    };
  if (isHalf(x.dtype) && y.dtype == FSDPRT_F32)
    return [=]() {
      hostForEach(CastFromHalf{x.as<uint16_t>(), y.as<float>(), x.dtype}, y.numel);
      return std::string();
    };
  return nullptr;
}

/// reduce_sum / reduce_mean over one run of reduced dims ([outer, n,
/// inner] once size-1 dims are dropped and neighbours of one kind merged);
/// interleaved reductions: the CPU's kernel.
KernelFn sumKernel(const std::string &op, KernelArgs &args) {
  checkLikeTheCpu(op, args);
  const Tensor x = args.in[0], y = args.out[0];
  std::vector<int64_t> axes = args.attrs.getInts("axes", {});
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[a] = true;
  int64_t outer = 1, n = 1, inner = 1, runs = 0;
  bool last = false;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] == 1)
      continue;
    if (reduced[d] && !last)
      ++runs;
    last = reduced[d];
    (reduced[d] ? n : runs ? inner : outer) *= x.shape[d];
  }
  if (runs > 1)
    return nullptr;
  bool mean = op == "reduce_mean";
  return [=]() {
    if (mean)
      hostForEachRow(SumRows<true>{x.as<float>(), y.as<float>(), n, inner},
                     outer * inner, kLanes);
    else
      hostForEachRow(SumRows<false>{x.as<float>(), y.as<float>(), n, inner},
                     outer * inner, kLanes);
    return std::string();
  };
}

KernelFn FakeBackend::own(const std::string &op, KernelArgs &args) {
  if ((op == "reduce_sum" || op == "reduce_mean") && allF32(args) &&
      args.in.size() == 1 && args.out.size() == 1)
    return sumKernel(op, args);
  if (op == "cast")
    return castKernel(args);
  if (cpu::isStridedRead(op))
    return stridedKernel(op, args);
  if (op == "softmax_cross_entropy" || op == "softmax_cross_entropy_grad")
    return crossEntropyKernel(op, args);
  if (op == "gather")
    return gatherKernel(args);
  if ((op == "layer_norm" || op == "rms_norm") && allF32(args))
    return normKernel(op, args);
  if (!allF32(args) && op.rfind("softmax_cross_entropy", 0) != 0)
    return nullptr;
  const size_t ins = args.in.size();
  if (ins == 1 && args.out.size() == 1 &&
      args.in[0].shape == args.out[0].shape) {
    static const std::map<std::string, KernelFn (*)(const KernelArgs &)>
        unary = {{"exp", unaryKernel<Unary::Exp>},
                 {"log", unaryKernel<Unary::Log>},
                 {"sqrt", unaryKernel<Unary::Sqrt>},
                 {"reciprocal", unaryKernel<Unary::Reciprocal>},
                 {"erf", unaryKernel<Unary::Erf>},
                 {"tanh", unaryKernel<Unary::Tanh>},
                 {"sigmoid", unaryKernel<Unary::Sigmoid>},
                 {"relu", unaryKernel<Unary::Relu>},
                 {"silu", unaryKernel<Unary::Silu>},
                 {"neg", unaryKernel<Unary::Neg>},
                 {"abs", unaryKernel<Unary::Abs>}};
    if (op == "gelu") {
      std::string approximate = args.attrs.getString("approximate", "none");
      if (approximate == "tanh")
        return unaryKernel<Unary::GeluTanh>(args);
      return approximate == "none" ? unaryKernel<Unary::Gelu>(args) : nullptr;
    }
    if (auto it = unary.find(op); it != unary.end())
      return it->second(args);
  }
  if (ins == 2 && args.out.size() == 1) {
    static const std::map<std::string, KernelFn (*)(const KernelArgs &)>
        binary = {{"add", binaryKernel<Binary::Add>},
                  {"sub", binaryKernel<Binary::Sub>},
                  {"mul", binaryKernel<Binary::Mul>},
                  {"div", binaryKernel<Binary::Div>},
                  {"pow", binaryKernel<Binary::Pow>}};
    if (auto it = binary.find(op); it != binary.end())
      return it->second(args);
  }
  if ((op == "softmax" || op == "log_softmax") && ins == 1 &&
      args.out.size() == 1 && args.in[0].shape == args.out[0].shape &&
      !args.in[0].shape.empty()) {
    const Tensor x = args.in[0], y = args.out[0];
    int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t axis = args.attrs.getInt("axis", -1);
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return nullptr;
    int64_t n = x.shape[axis], inner = 1, outer = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < axis ? outer : d > axis ? inner : n) *= d == axis ? 1 : x.shape[d];
    bool log = op == "log_softmax";
    return [=]() {
      if (log)
        hostForEachRow(SoftmaxBody<true>{x.as<float>(), y.as<float>(), n, inner},
                       outer * inner, kLanes);
      else
        hostForEachRow(SoftmaxBody<false>{x.as<float>(), y.as<float>(), n, inner},
                       outer * inner, kLanes);
      return std::string();
    };
  }
  return nullptr;
}

} // namespace
} // namespace cuda

std::unique_ptr<Backend> createFakeCudaBackend() {
  return std::make_unique<cuda::FakeBackend>();
}

} // namespace fsdprt
