//===- backend.cpp - The CUDA backend's host code -------------------------===//
//
// Plan kernels on a Device (device.h): each factory checks the kernel's
// shapes as the CPU backend does (one set of rules: the CPU kernel's
// factory throws KernelError naming what is wrong), plans the launches
// (broadcasts, strides, rows, GEMMs) and returns a function that enqueues
// them on the stream running it. Every launch passes the device's admit
// check with the bytes it reads and writes first (on the fake device, the
// hazard checker).
//
// Faults in the data: a kernel that checks its data gets an ErrorSlot of
// its own in device memory; the stream reads every slot once it is
// synchronised and reports the first fault (in kernel order) with the
// kernel's op and location.
//
// bf16/f16: the kernels that take fp32 only run widened (fp32 scratch in
// the workspace, casts around the kernel), as the CPU backend runs its own.
//
// An op with no own kernel: on the fake device (host memory), the CPU
// backend's kernel on the same memory; on a GPU and on
// "fake-cuda:strict", refused when the session is created, naming the op.
//
//===----------------------------------------------------------------------===//

#include "../cpu/kernels.h"
#include "device.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

namespace fsdprt::cuda {
namespace {

/// The stream running the current launch (set by CudaStream::launch).
thread_local DeviceStream *current = nullptr;

Range rangeOf(const Tensor &t) { return cuda::rangeOf(t.data, t.bytes()); }

bool allF32(const KernelArgs &args) {
  for (const auto *list : {&args.in, &args.out})
    for (const Tensor &t : *list)
      if (t.dtype != FSDPRT_F32)
        return false;
  return true;
}

/// Checks `args` for `op` as the CPU backend's kernel does, which throws
/// KernelError naming what is wrong; its workspace reservation is not kept.
void checkLikeTheCpu(const std::string &op, const KernelArgs &args) {
  static const std::unique_ptr<Backend> cpu = createCpuBackend();
  KernelArgs check = args;
  Workspace unused;
  check.workspace = &unused;
  cpu->prepare(op, check);
}

/// A fault a kernel reports through its ErrorSlot, in words.
/// `bounds`: what the kernel checked the data against (a label's class
/// count; the size of each dim an index indexes).
using FaultText = std::string (*)(const ErrorSlot &slot,
                                  const std::vector<int64_t> &bounds);

std::string badLabel(const ErrorSlot &slot, const std::vector<int64_t> &bounds) {
  return "label " + std::to_string(slot.detail) + " is outside [0, " +
         std::to_string(bounds[0]) + ")";
}

/// A bad index into dim `slot.code - kBadIndex` (scatter_nd's k dims; the
/// one dim of the others).
std::string badTarget(const ErrorSlot &slot, const std::vector<int64_t> &bounds) {
  return "target " + std::to_string(slot.detail) + " is outside [0, " +
         std::to_string(bounds[0]) + ")";
}

std::string badIndex(const ErrorSlot &slot, const std::vector<int64_t> &bounds) {
  size_t d = std::min<size_t>(slot.code - kBadIndex, bounds.size() - 1);
  return "index " + std::to_string(slot.detail) +
         " is out of range for a dimension of size " + std::to_string(bounds[d]);
}

class CudaBackend;

/// What a kernel factory works with.
struct Context {
  Device &device;
  CudaBackend &backend;
  KernelArgs &args;
};

using Factory = KernelFn (*)(Context &);

class CudaEvent : public Event {
public:
  CudaEvent(Device &device, std::unique_ptr<DeviceEvent> event)
      : device(device), event(std::move(event)) {}
  bool done() const override { return true; }
  Device &device;
  std::unique_ptr<DeviceEvent> event;
};

class CudaBackend : public Backend {
public:
  explicit CudaBackend(std::unique_ptr<Device> device)
      : device(std::move(device)) {
    // Both fake devices run their GEMMs on OpenBLAS on the host: the CPU
    // backend's execution scope bounds its threads to the session's (else
    // OpenMP's and OpenBLAS's pools oversubscribe the cores); only the
    // non-strict one lends its kernels.
    if (this->device->describe().rfind("fake-cuda", 0) == 0)
      cpu = createCpuBackend();
  }
  ~CudaBackend() override {
    if (slots)
      device->free(slots);
  }

  const char *name() const override {
    return device->describe().rfind("fake-cuda", 0) == 0 ? "fake-cuda" : "cuda";
  }
  /// Device allocations are 256-byte aligned; a larger alignment takes
  /// a larger block, freed by its start.
  void *allocate(uint64_t bytes, uint64_t alignment) override {
    if (alignment <= 256)
      return device->allocate(bytes);
    void *block = device->allocate(bytes + alignment);
    if (!block)
      return nullptr;
    auto at = (reinterpret_cast<uintptr_t>(block) + alignment - 1) & ~(alignment - 1);
    starts[reinterpret_cast<void *>(at)] = block;
    return reinterpret_cast<void *>(at);
  }
  void free(void *memory) override {
    auto it = starts.find(memory);
    if (it == starts.end())
      return device->free(memory);
    device->free(it->second);
    starts.erase(it);
  }
  void upload(void *dst, const void *src, uint64_t bytes) override {
    device->copy(dst, src, bytes, CopyKind::HostToDevice);
  }
  void download(void *dst, const void *src, uint64_t bytes) override {
    device->copy(dst, src, bytes, CopyKind::DeviceToHost);
  }
  void copy(void *dst, const void *src, uint64_t bytes) override {
    device->copy(dst, src, bytes, CopyKind::DeviceToDevice);
  }
  void fill(void *dst, uint8_t value, uint64_t bytes) override {
    device->fill(dst, value, bytes);
  }
  bool hostAccessible() const override { return false; }

  KernelFn prepare(const std::string &op, KernelArgs &args) override;
  std::unique_ptr<Stream> createStream() override;
  int resolveThreads(int requested) const override {
    return cpu ? cpu->resolveThreads(requested) : 1;
  }
  std::unique_ptr<ExecutionScope> enter(int threads) override {
    return cpu ? cpu->enter(threads) : std::make_unique<ExecutionScope>();
  }

  /// A new ErrorSlot for the kernel at `where`, whose faults `text` puts
  /// in words with `bound`; its address is slot(index) once prepared.
  size_t addFault(const std::string &where, FaultText text,
                  std::vector<int64_t> bounds) {
    if (replay < faults.size())
      return replay++;
    faults.push_back({where, text, std::move(bounds)});
    return faults.size() - 1;
  }
  size_t faultCount() const { return faults.size(); }
  /// The next addFault calls return the slots from `first` on again: a
  /// kernel prepared a second time (bound to its workspace) keeps the
  /// slots it had; replayDone() ends that.
  void replayFaults(size_t first) { replay = first; }
  void replayDone() { replay = SIZE_MAX; }
  ErrorSlot *slot(size_t index) const { return slots + index; }

  /// After a synchronisation: the first fault the kernels recorded (then
  /// every slot is cleared), or "".
  std::string takeFault();

  Device &dev() { return *device; }
  /// A kernel that reads the session's step when it runs was prepared.
  void noteRandom() { random = true; }
  bool drawsRandom() const { return random; }

  /// Device memory for every kernel's ErrorSlot, zeroed: made at the
  /// first launch after kernels were prepared (sessions prepare every
  /// kernel before the first launch, so none in flight holds old slots).
  void makeSlots();

private:

  struct Fault {
    std::string where;
    FaultText text;
    std::vector<int64_t> bounds;
  };
  std::unique_ptr<Device> device;
  std::unique_ptr<Backend> cpu; // the fake devices' threads, fallback kernels
  std::vector<Fault> faults;
  ErrorSlot *slots = nullptr;
  size_t slotCount = 0;
  size_t replay = SIZE_MAX;
  bool random = false;
  std::map<void *, void *> starts; // over-aligned blocks' starts
};

/// A captured step. On the GPU: the device's instantiated graph. On the
/// fake device: the launches' functions, kept in order, with the work the
/// direct step before the capture issued, which a replay must issue again.
struct CudaGraph : Graph {
  std::unique_ptr<DeviceGraph> device;
  std::vector<KernelFn> kept;
  std::vector<std::string> direct;
};

class CudaStream : public Stream {
public:
  CudaStream(CudaBackend &backend)
      : backend(backend), stream(backend.dev().createStream()) {}
  std::string launch(const KernelFn &kernel) override {
    backend.makeSlots();
    if (keeping) {
      keeping->kept.push_back(kernel);
      return "";
    }
    current = stream.get();
    std::string error = kernel();
    current = nullptr;
    return error;
  }

  /// Not on a GPU once a kernel draws random numbers: a CUDA graph would
  /// replay the step it was captured at, and so the same masks every step
  /// (the fake device's replays call the kernels again).
  bool canCapture() const override {
    return !backend.drawsRandom() || !backend.dev().nativeGraphs();
  }
  std::string beginCapture() override {
    backend.makeSlots();
    Device &dev = backend.dev();
    if (dev.nativeGraphs())
      return dev.beginCapture(*stream);
    keeping = std::make_unique<CudaGraph>();
    if (const std::vector<std::string> *step = dev.issued(/*previous=*/true))
      keeping->direct = *step;
    return "";
  }
  std::unique_ptr<Graph> endCapture(std::string &error) override {
    if (keeping)
      return std::move(keeping);
    auto graph = std::make_unique<CudaGraph>();
    graph->device = backend.dev().endCapture(*stream, error);
    return graph->device ? std::move(graph) : nullptr;
  }
  std::string replay(Graph &base) override {
    auto &graph = static_cast<CudaGraph &>(base);
    if (graph.device)
      return backend.dev().launchGraph(*stream, *graph.device);
    for (const KernelFn &kernel : graph.kept)
      if (std::string error = launch(kernel); !error.empty())
        return error;
    // The fake device: the replay issued what the direct step issued.
    const std::vector<std::string> *now = backend.dev().issued(/*previous=*/false);
    if (now && !graph.direct.empty() && *now != graph.direct) {
      size_t i = 0;
      while (i < now->size() && i < graph.direct.size() && (*now)[i] == graph.direct[i])
        ++i;
      auto at = [](const std::vector<std::string> &list, size_t i) {
        return i < list.size() ? list[i] : std::string("nothing");
      };
      return "the replayed graph's launch " + std::to_string(i) + " is " + at(*now, i) +
             " where the direct step's was " + at(graph.direct, i);
    }
    return "";
  }
  std::unique_ptr<Event> record() override {
    return std::make_unique<CudaEvent>(backend.dev(),
                                       backend.dev().record(*stream));
  }
  void wait(const Event &event) override {
    backend.dev().wait(*stream, *static_cast<const CudaEvent &>(event).event);
  }
  std::unique_ptr<Event> recordTimed() override {
    return std::make_unique<CudaEvent>(backend.dev(),
                                       backend.dev().recordTimed(*stream));
  }
  double elapsed(const Event &a, const Event &b) override {
    return backend.dev().elapsed(*static_cast<const CudaEvent &>(a).event,
                                 *static_cast<const CudaEvent &>(b).event);
  }
  StreamFailure synchronize() override {
    if (std::string error = backend.dev().synchronize(*stream); !error.empty())
      return {error, false};
    return {backend.takeFault(), true};
  }

  DeviceStream &device() { return *stream; }

private:
  CudaBackend &backend;
  std::unique_ptr<DeviceStream> stream;
  std::unique_ptr<CudaGraph> keeping; // capturing on the fake device
};

void CudaBackend::makeSlots() {
  if (slotCount == faults.size())
    return;
  if (slots)
    device->free(slots);
  slots = static_cast<ErrorSlot *>(device->allocate(faults.size() * sizeof(ErrorSlot)));
  if (!slots)
    throw DeviceError("cannot allocate " + std::to_string(faults.size()) +
                      " error slots");
  slotCount = faults.size();
  device->fill(slots, 0, slotCount * sizeof(ErrorSlot));
}

std::unique_ptr<Stream> CudaBackend::createStream() {
  return std::make_unique<CudaStream>(*this);
}

std::string CudaBackend::takeFault() {
  if (!slotCount)
    return "";
  std::vector<ErrorSlot> found(slotCount);
  device->copy(found.data(), slots, slotCount * sizeof(ErrorSlot),
               CopyKind::DeviceToHost);
  for (size_t i = 0; i < slotCount; ++i)
    if (found[i].code) {
      device->fill(slots, 0, slotCount * sizeof(ErrorSlot));
      const Fault &f = faults[i];
      return f.where + ": " + f.text(found[i], f.bounds);
    }
  return "";
}

/// Runs `launch(device, stream)` on the stream that runs the kernel.
template <class F> KernelFn onStream(Device &device, F launch) {
  return [&device, launch]() { return launch(device, *current); };
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

KernelFn unaryKernel(Context &c, Unary op, UnaryParams params = {}) {
  const Tensor x = c.args.in[0], y = c.args.out[0];
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.unary(s, op, x.as<float>(), y.as<float>(), y.numel, params);
  });
}

/// The attribute `name` as the CPU reads it (a double, then fp32).
float floatAttr(const Context &c, const char *name, double fallback) {
  return static_cast<float>(c.args.attrs.getFloat(name, fallback));
}

/// The unary functions (fp32; neg, abs and sign on int64 too) with their
/// attributes, as the CPU backend reads them; is_inf and isnan.
KernelFn unaryOp(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  if ((op == "neg" || op == "abs" || op == "sign") && args.in.size() == 1 &&
      args.out.size() == 1 && args.in[0].dtype == FSDPRT_I64 &&
      args.out[0].dtype == FSDPRT_I64 && args.in[0].shape == args.out[0].shape) {
    const Tensor x = args.in[0], y = args.out[0];
    Unary kind = op == "neg" ? Unary::Neg : op == "abs" ? Unary::Abs : Unary::Sign;
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.unary64(s, kind, x.as<int64_t>(), y.as<int64_t>(), y.numel);
    });
  }
  if (op == "is_inf" || op == "isnan") {
    checkLikeTheCpu(op, args);
    const Tensor x = args.in[0], y = args.out[0];
    if (x.dtype != FSDPRT_F32)
      return nullptr; // a half runs widened
    FloatClassBody body{x.as<float>(), y.as<uint8_t>(), op == "isnan",
                        args.attrs.getInt("detect_negative", 1) != 0,
                        args.attrs.getInt("detect_positive", 1) != 0};
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.floatClass(s, body, y.numel);
    });
  }
  if (!allF32(args) || args.in.size() != 1 || args.out.size() != 1 ||
      args.in[0].shape != args.out[0].shape)
    return nullptr;
  static const std::map<std::string, Unary> plain = {
      {"exp", Unary::Exp},           {"log", Unary::Log},
      {"sqrt", Unary::Sqrt},         {"reciprocal", Unary::Reciprocal},
      {"erf", Unary::Erf},           {"tanh", Unary::Tanh},
      {"sigmoid", Unary::Sigmoid},   {"relu", Unary::Relu},
      {"silu", Unary::Silu},         {"neg", Unary::Neg},
      {"abs", Unary::Abs},           {"floor", Unary::Floor},
      {"ceil", Unary::Ceil},         {"round", Unary::Round},
      {"sign", Unary::Sign},         {"softsign", Unary::Softsign},
      {"softplus", Unary::Softplus}, {"hard_swish", Unary::HardSwish},
      {"sin", Unary::Sin},           {"cos", Unary::Cos},
      {"tan", Unary::Tan},           {"sinh", Unary::Sinh},
      {"cosh", Unary::Cosh},         {"asin", Unary::Asin},
      {"acos", Unary::Acos},         {"atan", Unary::Atan},
      {"asinh", Unary::Asinh},       {"acosh", Unary::Acosh},
      {"atanh", Unary::Atanh}};
  if (auto it = plain.find(op); it != plain.end())
    return unaryKernel(c, it->second);
  if (op == "gelu") {
    std::string approximate = args.attrs.getString("approximate", "none");
    if (approximate == "tanh")
      return unaryKernel(c, Unary::GeluTanh);
    return approximate == "none" ? unaryKernel(c, Unary::Gelu) : nullptr;
  }
  // The defaults are the CPU's (and ONNX's).
  if (op == "hard_sigmoid")
    return unaryKernel(c, Unary::HardSigmoid,
                       {floatAttr(c, "alpha", 0.2), floatAttr(c, "beta", 0.5)});
  if (op == "elu")
    return unaryKernel(c, Unary::Elu, {floatAttr(c, "alpha", 1.0)});
  if (op == "selu")
    return unaryKernel(c, Unary::Selu, {floatAttr(c, "alpha", 1.6732632),
                                        floatAttr(c, "gamma", 1.0507010)});
  if (op == "celu") {
    checkLikeTheCpu(op, args); // alpha 0
    return unaryKernel(c, Unary::Celu, {floatAttr(c, "alpha", 1.0)});
  }
  if (op == "leaky_relu")
    return unaryKernel(c, Unary::LeakyRelu, {floatAttr(c, "alpha", 0.01)});
  if (op == "thresholded_relu")
    return unaryKernel(c, Unary::ThresholdedRelu, {floatAttr(c, "alpha", 1.0)});
  if (op == "shrink")
    return unaryKernel(c, Unary::Shrink, {floatAttr(c, "bias", 0.0),
                                          floatAttr(c, "lambd", 0.5)});
  if (op == "clip")
    return unaryKernel(c, Unary::Clip, {floatAttr(c, "min", -INFINITY),
                                        floatAttr(c, "max", INFINITY)});
  return nullptr;
}

/// The broadcast of `operands` to `out`, or none when the shapes do not
/// broadcast or need more than kMaxDims dims: the kernel is then the CPU's,
/// which names what is wrong, or refused on a GPU.
std::optional<Broadcast>
broadcastOrNone(const std::vector<int64_t> &out,
                const std::vector<std::vector<int64_t>> &operands) {
  try {
    return planBroadcast(out, operands);
  } catch (const std::invalid_argument &) {
    return std::nullopt;
  }
}

/// A broadcasting binary function on T (float or int64_t).
template <typename T> KernelFn binaryKernel(Context &c, Binary op) {
  const Tensor a = c.args.in[0], b = c.args.in[1], y = c.args.out[0];
  std::optional<Broadcast> plan = broadcastOrNone(y.shape, {a.shape, b.shape});
  if (!plan)
    return nullptr;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.binary(s, op, *plan, a.as<T>(), b.as<T>(), y.as<T>(), y.numel);
  });
}

bool allI64(const KernelArgs &args) {
  for (const auto *list : {&args.in, &args.out})
    for (const Tensor &t : *list)
      if (t.dtype != FSDPRT_I64)
        return false;
  return true;
}

/// One dtype for every operand of `args`, and it is one of the narrow
/// integers (I32, I16, I8, U8).
bool allNarrowInteger(const KernelArgs &args) {
  fsdprt_dtype_t t = args.out[0].dtype;
  if (t != FSDPRT_I32 && t != FSDPRT_I16 && t != FSDPRT_I8 && t != FSDPRT_U8)
    return false;
  for (const Tensor &x : args.in)
    if (x.dtype != t)
      return false;
  return true;
}

/// pow of an int64 base (the CPU's checks: the output's dtype), its
/// exponent I64, I32, F32 or F64.
KernelFn powInt64Kernel(Context &c) {
  checkLikeTheCpu("pow", c.args);
  const Tensor a = c.args.in[0], b = c.args.in[1], y = c.args.out[0];
  if (b.dtype != FSDPRT_I64 && b.dtype != FSDPRT_I32 && b.dtype != FSDPRT_F32 &&
      b.dtype != FSDPRT_F64)
    return nullptr;
  std::optional<Broadcast> plan = broadcastOrNone(y.shape, {a.shape, b.shape});
  if (!plan)
    return nullptr;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.powInt64(s, b.dtype, *plan, a.as<int64_t>(), b.data,
                      y.as<int64_t>(), y.numel);
  });
}

/// add, sub, mul, div, mod, max and min on fp32 and on int64, int32,
/// int16, int8 and uint8 (wrapping as the CPU's); pow and prelu on fp32,
/// pow of an int64 base.
KernelFn binaryOp(const std::string &op, Context &c) {
  if (c.args.in.size() != 2 || c.args.out.size() != 1)
    return nullptr;
  if (op == "pow" && c.args.in[0].dtype == FSDPRT_I64)
    return powInt64Kernel(c);
  bool narrow = allNarrowInteger(c.args);
  bool integers = narrow || allI64(c.args);
  if (!integers && !allF32(c.args))
    return nullptr;
  Binary kind;
  static const std::map<std::string, Binary> ops = {
      {"add", Binary::Add}, {"sub", Binary::Sub}, {"mul", Binary::Mul},
      {"div", Binary::Div}, {"pow", Binary::Pow}, {"max", Binary::Max},
      {"min", Binary::Min}, {"prelu", Binary::PRelu}};
  if (op == "mod") {
    checkLikeTheCpu(op, c.args); // fmod = 0 on floats
    kind = c.args.attrs.getInt("fmod", 0) != 0 ? Binary::Mod : Binary::FloorMod;
  } else if (auto it = ops.find(op); it != ops.end()) {
    kind = it->second;
  } else {
    return nullptr;
  }
  if (integers && (kind == Binary::Pow || kind == Binary::PRelu))
    return nullptr; // the CPU's pow in double, its refusal of prelu
  if (narrow) {
    checkLikeTheCpu(op, c.args);
    const Tensor a = c.args.in[0], b = c.args.in[1], y = c.args.out[0];
    std::optional<Broadcast> plan =
        broadcastOrNone(y.shape, {a.shape, b.shape});
    if (!plan)
      return nullptr;
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.integerBinary(s, kind, y.dtype, *plan, a.data, b.data, y.data,
                             y.numel);
    });
  }
  return integers ? binaryKernel<int64_t>(c, kind) : binaryKernel<float>(c, kind);
}

/// cast: between fp32 and bf16/f16 (the mixed-precision casts, their own
/// body), and between any other two dtypes AnyCast takes.
KernelFn castKernel(Context &c) {
  const KernelArgs &args = c.args;
  if (args.in.size() != 1 || args.out.size() != 1 ||
      args.in[0].shape != args.out[0].shape)
    return nullptr;
  const Tensor x = args.in[0], y = args.out[0];
  bool toHalf = x.dtype == FSDPRT_F32 && isHalf(y.dtype);
  if (toHalf || (isHalf(x.dtype) && y.dtype == FSDPRT_F32)) {
    fsdprt_dtype_t half = toHalf ? y.dtype : x.dtype;
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.cast(s, toHalf, half, x.data, y.data, y.numel);
    });
  }
  if (!AnyCast::takes(x.dtype) || !AnyCast::takes(y.dtype))
    return nullptr;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.anyCast(s, x.dtype, y.dtype, x.data, y.data, y.numel);
  });
}

/// The comparisons (F32, I64 or Bool operands) and and, or, xor (Bool),
/// broadcasting: Bool outputs.
KernelFn logicKernel(const std::string &op, Context &c) {
  static const std::map<std::string, Logic> ops = {
      {"equal", Logic::Equal},
      {"less", Logic::Less},
      {"greater", Logic::Greater},
      {"greater_or_equal", Logic::GreaterOrEqual},
      {"less_or_equal", Logic::LessOrEqual},
      {"and", Logic::And},
      {"or", Logic::Or},
      {"xor", Logic::Xor}};
  checkLikeTheCpu(op, c.args);
  const Tensor a = c.args.in[0], b = c.args.in[1], y = c.args.out[0];
  if (a.dtype != FSDPRT_F32 && a.dtype != FSDPRT_I64 && a.dtype != FSDPRT_BOOL)
    return nullptr;
  Logic kind = ops.at(op);
  std::optional<Broadcast> plan = broadcastOrNone(y.shape, {a.shape, b.shape});
  if (!plan)
    return nullptr;
  fsdprt_dtype_t dtype = a.dtype;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.logic(s, kind, dtype, *plan, a.data, b.data, y.as<uint8_t>(),
                   y.numel);
  });
}

KernelFn notKernel(Context &c) {
  checkLikeTheCpu("not", c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.logicalNot(s, x.as<uint8_t>(), y.as<uint8_t>(), y.numel);
  });
}

/// where of any element size: cond, a and b broadcast to the output.
KernelFn whereKernel(Context &c) {
  checkLikeTheCpu("where", c.args);
  const Tensor cond = c.args.in[0], a = c.args.in[1], b = c.args.in[2];
  const Tensor y = c.args.out[0];
  std::optional<Broadcast> plan =
      broadcastOrNone(y.shape, {cond.shape, a.shape, b.shape});
  if (!plan)
    return nullptr;
  size_t size = fsdprt_dtype_size(y.dtype);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.where(s, size, *plan, cond.as<uint8_t>(), a.data, b.data, y.data,
                   y.numel);
  });
}

/// dropout (training mode) as the CPU runs it, its checks and draws
/// (kernels/random.h): the session's step and rank are read each time the
/// kernel runs.
KernelFn dropoutKernel(Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu("dropout", args);
  if (args.in[0].dtype != FSDPRT_F32 || args.out[0].dtype != FSDPRT_F32)
    return nullptr; // a half runs widened
  const Tensor x = args.in[0], y = args.out[0];
  uint8_t *mask = args.out.size() == 2 ? args.out[1].as<uint8_t>() : nullptr;
  double ratio = args.attrs.getFloat("ratio", 0.5);
  auto op = static_cast<uint32_t>(args.attrs.getInt("op", -1));
  int64_t slot = args.attrs.getInt("slot", 0);
  int64_t slots = args.attrs.getInt("slots", 1);
  uint64_t threshold = keepThreshold(1.0 - ratio);
  float scale = 1.0f / static_cast<float>(1.0 - ratio);
  const RandomState *random = args.random;
  c.backend.noteRandom();
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    DropoutBody body{{random->seed, random->step, op},
                     static_cast<uint64_t>((random->rank * slots + slot) * x.numel),
                     threshold,
                     scale,
                     x.as<float>(),
                     y.as<float>(),
                     mask,
                     x.numel};
    return d.dropout(s, body);
  });
}

/// random_uniform, random_normal and bernoulli as the CPU runs them
/// (kernels/random.h), f32 or f64; the session's step and rank are read
/// each time the kernel runs.
KernelFn drawKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  const Tensor y = args.out[0];
  auto wideOrF32 = [](const Tensor &t) {
    return t.dtype == FSDPRT_F32 || t.dtype == FSDPRT_F64;
  };
  if (!wideOrF32(y) || (!args.in.empty() && !wideOrF32(args.in[0])))
    return nullptr; // a half runs widened
  Distribution kind = op == "random_uniform"  ? Distribution::Uniform
                      : op == "random_normal" ? Distribution::Normal
                                              : Distribution::Bernoulli;
  const bool uniform = kind == Distribution::Uniform;
  double a = args.attrs.getFloat(uniform ? "low" : "mean", 0.0);
  double b = args.attrs.getFloat(uniform ? "high" : "scale", 1.0);
  const Tensor p = args.in.empty() ? Tensor() : args.in[0];
  auto op32 = static_cast<uint32_t>(args.attrs.getInt("op", -1));
  int64_t slot = args.attrs.getInt("slot", 0);
  int64_t slots = args.attrs.getInt("slots", 1);
  const RandomState *random = args.random;
  c.backend.noteRandom();
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    DrawBody body{
        {random->seed, random->step, op32},
        static_cast<uint64_t>((random->rank * slots + slot) * y.numel),
        kind,
        a,
        b,
        p.data,
        p.dtype == FSDPRT_F64,
        y.data,
        y.dtype == FSDPRT_F64,
        y.numel};
    return d.draw(s, body);
  });
}

//===----------------------------------------------------------------------===//
// Rows: softmax, norms, sums, cross-entropy
//===----------------------------------------------------------------------===//

KernelFn softmaxKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  if (!allF32(args) || args.in.size() != 1 || args.out.size() != 1 ||
      args.in[0].shape != args.out[0].shape || args.in[0].shape.empty())
    return nullptr;
  const Tensor x = args.in[0], y = args.out[0];
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = args.attrs.getInt("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return nullptr;
  int64_t n = x.shape[axis], inner = 1, outer = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      (d < axis ? outer : inner) *= x.shape[d];
  bool log = op == "log_softmax";
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.softmax(s, log, x.as<float>(), y.as<float>(), outer, n, inner);
  });
}

/// layer_norm / rms_norm over contiguous rows. A scale or bias of the
/// row's elements is read in place; one that broadcasts onto the
/// normalised dims otherwise (one value, or a partial broadcast, as the
/// CPU's Affine reads it) is first expanded to a row in the workspace by a
/// strided read, so that the norm's body reads every affine input alike.
KernelFn normKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  bool rms = op == "rms_norm";
  const Tensor x = args.in[0], y = args.out[0];
  // layer_norm may also give each row's mean and inv_std_dev.
  if (!allF32(args) || x.shape.empty() || x.shape != y.shape ||
      (args.out.size() != 1 && (rms || args.out.size() != 3)))
    return nullptr;
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = rms ? rank - 1 : args.attrs.getInt("axis", -1);
  if (axis < 0 || axis >= rank || (!rms && args.in.size() < 2))
    return nullptr;
  std::vector<int64_t> normalised(x.shape.begin() + axis, x.shape.end());
  int64_t cols = cpu::product(normalised);
  // The affine inputs that are not a row: their reads onto one.
  struct Expand {
    bool needed = false;
    Broadcast plan;
  } expand[2];
  bool expanding = false;
  for (size_t i = 1; i < args.in.size(); ++i) {
    if (args.in[i].numel == cols)
      continue;
    checkLikeTheCpu(op, args); // the shape broadcasts onto the row
    std::vector<int64_t> shape = args.in[i].shape;
    while (!shape.empty() && shape.front() == 1 &&
           shape.size() > normalised.size())
      shape.erase(shape.begin());
    try {
      expand[i - 1].plan = planStrided(
          normalised,
          cpu::broadcastStrides(shape, normalised, i == 1 ? "scale" : "bias"));
    } catch (const std::invalid_argument &) {
      return nullptr;
    }
    expand[i - 1].needed = expanding = true;
  }
  if (args.out.size() == 3)
    checkLikeTheCpu(op, args); // their shapes
  const Tensor scale = args.in.size() > 1 ? args.in[1] : Tensor();
  const Tensor bias = args.in.size() > 2 ? args.in[2] : Tensor();
  float eps = static_cast<float>(args.attrs.getFloat("epsilon", rms ? 1e-6 : 1e-5));
  int64_t rows = cols ? x.numel / cols : 0;
  RowStats stats;
  if (args.out.size() == 3)
    stats = {args.out[1].as<float>(), args.out[2].as<float>()};
  Workspace *workspace = args.workspace;
  if (expanding)
    workspace->reserve(2 * cols * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    const float *affine[2] = {scale.as<float>(), bias.as<float>()};
    for (int k = 0; k < 2; ++k) {
      if (!expand[k].needed)
        continue;
      float *row = workspace->as<float>() + k * cols;
      if (std::string e = d.stridedRead(s, sizeof(float), expand[k].plan,
                                        affine[k], row, 0, cols);
          !e.empty())
        return e;
      affine[k] = row;
    }
    return d.norm(s, rms, x.as<float>(), affine[0], affine[1], y.as<float>(),
                  rows, cols, eps, stats);
  });
}

/// The reductions over any axes, and global_average_pool (the mean over
/// the spatial dims): one row per output element (planReduce); F32, or
/// I32 and I64 for those the CPU takes them for (IntegerReduceBody).
KernelFn reduceKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  const Tensor x = args.in[0], y = args.out[0];
  bool integer = x.dtype == FSDPRT_I32 || x.dtype == FSDPRT_I64;
  if (!allF32(args) && !integer)
    return nullptr;
  std::vector<int64_t> axes;
  if (op == "global_average_pool")
    for (size_t d = 2; d < x.shape.size(); ++d)
      axes.push_back(static_cast<int64_t>(d));
  else
    axes = args.attrs.getInts("axes", {});
  static const std::map<std::string, Reduce> kinds = {
      {"reduce_sum", Reduce::Sum},
      {"reduce_mean", Reduce::Mean},
      {"global_average_pool", Reduce::Mean},
      {"reduce_max", Reduce::Max},
      {"reduce_min", Reduce::Min},
      {"reduce_sum_square", Reduce::SumSquare},
      {"reduce_log_sum", Reduce::LogSum},
      {"reduce_log_sum_exp", Reduce::LogSumExp},
      {"reduce_prod", Reduce::Prod}};
  Reduce kind = kinds.at(op);
  ReducePlan plan;
  try {
    plan = planReduce(x.shape, axes);
  } catch (const std::invalid_argument &) {
    return nullptr; // more dims than a strided read takes
  }
  if (integer) {
    IntegerReduceBody body{plan, x.data, y.data, x.dtype, kind};
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.integerReduce(s, body);
    });
  }
  Workspace *workspace = c.args.workspace;
  workspace->reserve(reduceScratchFloats(kind, plan) * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.reduce(s, kind, plan, x.as<float>(), y.as<float>(),
                    workspace->as<float>());
  });
}

/// softmax_cross_entropy(_grad) (kernels/losses.h): its scratch in the
/// workspace, a bad label in its ErrorSlot; the forward's optional
/// log_prob output the log-softmax kernel along the classes. With `lse` =
/// 1 the forward's last output and the gradient's last input is the
/// per-position log-sum-exp.
KernelFn crossEntropyKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  bool grad = op == "softmax_cross_entropy_grad";
  bool hasLse = args.attrs.getInt("lse", 0) != 0;
  size_t base = grad ? 3 : 2;
  size_t lseIn = hasLse && grad, lseOut = hasLse && !grad;
  if (args.in.size() < base + lseIn || args.out.size() < 1 + lseOut)
    return nullptr;
  // The counts without the log-sum-exp.
  size_t ins = args.in.size() - lseIn, outs = args.out.size() - lseOut;
  bool logProb = !grad && outs == 2;
  if (ins > base + 1 || (outs != 1 && !logProb) ||
      (logProb && args.out[1].dtype != FSDPRT_F32))
    return nullptr;
  const Tensor scores = args.in[0], labels = args.in[1], y = args.out[0];
  const Tensor lse =
      hasLse ? (grad ? args.in.back() : args.out.back()) : Tensor();
  bool weighted = ins == base + 1;
  if (scores.dtype != FSDPRT_F32 || labels.dtype != FSDPRT_I64 ||
      y.dtype != FSDPRT_F32 || scores.shape.size() < 2 ||
      (weighted && args.in[base].dtype != FSDPRT_F32) ||
      (grad && args.in[2].dtype != FSDPRT_F32) ||
      (hasLse && lse.dtype != FSDPRT_F32))
    return nullptr;
  checkLikeTheCpu(op, args);
  int64_t classes = scores.shape[1];
  int64_t positions = labels.numel, inner = positions / scores.shape[0];
  const Tensor logProbs = logProb ? args.out[1] : Tensor();
  std::string reduction = args.attrs.getString("reduction", "mean");
  bool none = reduction == "none", mean = reduction == "mean";
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  const float *weights = weighted ? args.in[base].as<float>() : nullptr;
  const float *g = grad ? args.in[2].as<float>() : nullptr;
  Workspace *workspace = args.workspace;
  workspace->reserve((2 * positions + 1) * sizeof(float));
  size_t slot = c.backend.addFault(args.where, badLabel, {classes});
  CudaBackend *backend = &c.backend;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    CrossEntropyInputs in{scores.as<float>(), labels.as<int64_t>(), weights,
                          classes, inner, hasIgnore, ignore,
                          backend->slot(slot)};
    in.lse = hasLse ? lse.as<float>() : nullptr;
    float *scratch = workspace->as<float>();
    if (grad)
      return d.crossEntropyGrad(s, in, positions, g, none, mean, scratch,
                                y.as<float>());
    if (logProb)
      if (std::string e = d.softmax(s, true, scores.as<float>(),
                                    logProbs.as<float>(), scores.shape[0],
                                    classes, inner);
          !e.empty())
        return e;
    return d.crossEntropy(s, in, positions, none, mean, scratch, y.as<float>());
  });
}

/// nll_loss(_grad) (kernels/losses.h): its scratch in the workspace, a bad
/// target in its ErrorSlot.
KernelFn nllKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  bool grad = op == "nll_loss_grad";
  const Tensor input = grad ? args.out[0] : args.in[0];
  const Tensor target = grad ? args.in[0] : args.in[1];
  const Tensor y = args.out[0];
  bool weighted = args.in.size() == 3;
  if (input.dtype != FSDPRT_F32 || (grad && args.in[1].dtype != FSDPRT_F32))
    return nullptr; // halves run widened
  int64_t classes = input.shape[1], positions = target.numel;
  int64_t inner = cpu::product(input.shape, 2, input.shape.size());
  std::string reduction = args.attrs.getString("reduction", "mean");
  bool none = reduction == "none", mean = reduction == "mean";
  bool hasIgnore = args.attrs.has("ignore_index");
  int64_t ignore = args.attrs.getInt("ignore_index", 0);
  const float *weights = weighted ? args.in[2].as<float>() : nullptr;
  const float *g = grad ? args.in[1].as<float>() : nullptr;
  const float *logProbs = grad ? nullptr : input.as<float>();
  bool target32 = target.dtype == FSDPRT_I32;
  Workspace *workspace = args.workspace;
  workspace->reserve((2 * positions + 1) * sizeof(float));
  size_t slot = c.backend.addFault(args.where, badTarget, {classes});
  CudaBackend *backend = &c.backend;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    NllInputs in{logProbs, target.data, target32, weights, classes,
                 inner,    hasIgnore,   ignore,   backend->slot(slot)};
    float *scratch = workspace->as<float>();
    return grad ? d.nllLossGrad(s, in, positions, g, none, mean, scratch,
                                y.as<float>(), y.numel)
                : d.nllLoss(s, in, positions, none, mean, scratch,
                            y.as<float>());
  });
}

//===----------------------------------------------------------------------===//
// Data movement: gather, strided reads
//===----------------------------------------------------------------------===//

/// gather of any element size; a bad index in its ErrorSlot.
KernelFn gatherKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("gather", args);
  const Tensor data = args.in[0], indices = args.in[1], y = args.out[0];
  int64_t axis = args.attrs.getInt("axis", 0);
  if (axis < 0)
    axis += data.shape.size();
  int64_t dim = data.shape[axis], outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d)
    inner *= data.shape[d];
  size_t size = fsdprt_dtype_size(data.dtype);
  bool indices32 = indices.dtype == FSDPRT_I32;
  size_t slot = c.backend.addFault(args.where, badIndex, {dim});
  CudaBackend *backend = &c.backend;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.gather(s, size, indices32, data.data, indices.data, y.data, outer,
                    dim, indices.numel, inner, backend->slot(slot));
  });
}

/// transpose, slice and expand: the CPU backend's plan of the read (its
/// checks), run by StridedReadBody.
KernelFn stridedKernel(const std::string &op, Context &c) {
  cpu::StridedRead read = cpu::stridedRead(op, c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  Broadcast plan;
  try {
    plan = planStrided(y.shape, read.strides);
  } catch (const std::invalid_argument &) {
    return nullptr;
  }
  size_t size = fsdprt_dtype_size(y.dtype);
  int64_t offset = read.offset;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.stridedRead(s, size, plan, x.data, y.data, offset, y.numel);
  });
}

/// gather_grad (kernels/scatter.h): its sort's scratch in the workspace, a
/// bad index in its ErrorSlot.
KernelFn gatherGradKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("gather_grad", args);
  const Tensor g = args.in[0], indices = args.in[1], y = args.out[0];
  if (g.dtype != FSDPRT_F32 || y.dtype != FSDPRT_F32)
    return nullptr;
  int64_t axis = args.attrs.getInt("axis", 0);
  int64_t dim = y.shape[axis], outer = cpu::product(y.shape, 0, axis);
  int64_t inner = cpu::product(y.shape, axis + 1, y.shape.size());
  int64_t count = indices.numel;
  bool indices32 = indices.dtype == FSDPRT_I32;
  Workspace *workspace = args.workspace;
  workspace->reserve(gatherGradScratch(count, dim) * sizeof(int64_t));
  size_t slot = c.backend.addFault(args.where, badIndex, {dim});
  CudaBackend *backend = &c.backend;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.gatherGrad(s, indices32, g.as<float>(), indices.data,
                        y.as<float>(), outer, dim, count, inner,
                        workspace->as<int64_t>(), backend->slot(slot));
  });
}

/// pad (constant, reflect, edge) of any element size, as the CPU checks it.
KernelFn padKernel(Context &c) {
  checkLikeTheCpu("pad", c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  size_t rank = x.shape.size();
  if (rank > static_cast<size_t>(kMaxDims))
    return nullptr;
  std::vector<int64_t> pads = c.args.attrs.getInts("pads", {});
  std::string mode = c.args.attrs.getString("mode", "constant");
  std::vector<int64_t> strides = cpu::stridesOf(x.shape);
  PadShape shape{};
  shape.rank = static_cast<int>(rank);
  shape.mode = mode == "reflect" ? PadMode::Reflect
               : mode == "edge"  ? PadMode::Edge
                                 : PadMode::Constant;
  for (size_t d = 0; d < rank; ++d) {
    shape.shape[d] = y.shape[d];
    shape.from[d] = x.shape[d];
    shape.stride[d] = strides[d];
    shape.before[d] = pads[d];
  }
  uint64_t fill = cpu::padFill(y.dtype, c.args.attrs.getFloat("value", 0));
  size_t size = fsdprt_dtype_size(y.dtype);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.pad(s, size, shape, x.data, y.data, y.numel, fill);
  });
}

/// trilu of any element size; k the attribute or, as a second input, read
/// by the kernel from device memory.
KernelFn triluKernel(Context &c) {
  checkLikeTheCpu("trilu", c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  const int64_t *kInput =
      c.args.in.size() == 2 ? c.args.in[1].as<int64_t>() : nullptr;
  int64_t k = c.args.attrs.getInt("k", 0);
  bool upper = c.args.attrs.getInt("upper", 1) != 0;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  size_t size = fsdprt_dtype_size(x.dtype);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.trilu(s, size, x.data, y.data, y.numel, rows, cols, k, kInput,
                   upper);
  });
}

std::string badAxis(const ErrorSlot &slot, const std::vector<int64_t> &bounds) {
  return "axis " + std::to_string(slot.detail) + " is out of range for rank " +
         std::to_string(bounds[0]);
}

/// cumsum (F32, F64, I64, I32) along the attribute's axis or along an axis
/// given as an input. The input is read by the kernel from device memory
/// (as trilu's k), not downloaded here: a download would synchronise the
/// stream mid-step and could not be captured in a graph. So the launch
/// covers the most lines any axis makes, each thread finds its line's
/// geometry, and a bad axis goes to the kernel's ErrorSlot.
KernelFn cumsumKernel(Context &c) {
  checkLikeTheCpu("cumsum", c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  if (x.dtype != FSDPRT_F32 && x.dtype != FSDPRT_F64 && x.dtype != FSDPRT_I64 &&
      x.dtype != FSDPRT_I32)
    return nullptr;
  bool exclusive = c.args.attrs.getInt("exclusive", 0) != 0;
  bool reverse = c.args.attrs.getInt("reverse", 0) != 0;
  fsdprt_dtype_t dtype = x.dtype;
  CumsumAxisInput axisInput;
  int64_t lines = 0, dim = 0, inner = 0;
  if (c.args.in.size() == 2) {
    if (x.shape.size() > static_cast<size_t>(kMaxDims))
      return nullptr;
    axisInput.axis = c.args.in[1].data;
    axisInput.is32 = c.args.in[1].dtype == FSDPRT_I32;
    axisInput.rank = static_cast<int>(x.shape.size());
    std::copy(x.shape.begin(), x.shape.end(), axisInput.shape);
    size_t slot = c.backend.addFault(c.args.where, badAxis, {axisInput.rank});
    CudaBackend *backend = &c.backend;
    lines = axisInput.maxLines();
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      CumsumAxisInput withSlot = axisInput;
      withSlot.error = backend->slot(slot);
      return d.cumsum(s, dtype, x.data, y.data, lines, dim, inner, exclusive,
                      reverse, withSlot);
    });
  }
  int64_t axis = c.args.attrs.getInt("axis", 0);
  dim = x.shape[axis];
  inner = cpu::product(x.shape, axis + 1, x.shape.size());
  lines = dim ? x.numel / dim : 0;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.cumsum(s, dtype, x.data, y.data, lines, dim, inner, exclusive,
                    reverse, axisInput);
  });
}

/// gather_elements' and scatter_elements' walk of data and indices along
/// `axis` (the CPU's checks have passed); false past kMaxDims dims.
bool axisWalk(const Tensor &data, const Tensor &indices, int64_t axis,
              AxisWalk &w) {
  size_t rank = data.shape.size();
  if (rank > static_cast<size_t>(kMaxDims))
    return false;
  std::vector<int64_t> dataStrides = cpu::stridesOf(data.shape);
  std::vector<int64_t> indexStrides = cpu::stridesOf(indices.shape);
  w.rank = static_cast<int>(rank);
  w.axis = static_cast<int>(axis);
  for (size_t d = 0; d < rank; ++d) {
    w.data[d] = static_cast<int64_t>(d) == axis ? 1 : data.shape[d];
    w.index[d] = indices.shape[d];
    w.dataStride[d] = dataStrides[d];
    w.indexStride[d] = indexStrides[d];
  }
  w.dim = data.shape[axis];
  w.axisStride = dataStrides[axis];
  w.count = indices.shape[axis];
  return true;
}

/// gather_elements of any element size; a bad index in its ErrorSlot.
KernelFn gatherElementsKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("gather_elements", args);
  const Tensor data = args.in[0], indices = args.in[1], y = args.out[0];
  AxisWalk walk;
  if (!axisWalk(data, indices, args.attrs.getInt("axis", 0), walk))
    return nullptr;
  size_t size = fsdprt_dtype_size(y.dtype);
  bool indices32 = indices.dtype == FSDPRT_I32;
  size_t slot = c.backend.addFault(args.where, badIndex, {walk.dim});
  CudaBackend *backend = &c.backend;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.gatherElements(s, size, indices32, walk, data.data, indices.data,
                            y.data, y.numel, backend->slot(slot));
  });
}

/// scatter_elements and scatter_nd (reduction none, add or mul, as the CPU
/// takes them); a bad index in the kernel's ErrorSlot.
KernelFn scatterKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  const Tensor data = args.in[0], indices = args.in[1], updates = args.in[2];
  const Tensor y = args.out[0];
  std::string reduction = args.attrs.getString("reduction", "none");
  ScatterArgs a{};
  a.dtype = y.dtype;
  a.elementSize = fsdprt_dtype_size(y.dtype);
  a.indices32 = indices.dtype == FSDPRT_I32;
  a.how = reduction == "add"   ? Combine::Add
          : reduction == "mul" ? Combine::Mul
                               : Combine::Assign;
  if (a.how != Combine::Assign && y.dtype != FSDPRT_F32 &&
      y.dtype != FSDPRT_F64 && y.dtype != FSDPRT_I32 && y.dtype != FSDPRT_I64)
    return nullptr; // halves add and multiply widened, as on the CPU
  a.data = data.data, a.indices = indices.data, a.updates = updates.data;
  a.y = y.data;
  CudaBackend *backend = &c.backend;
  if (op == "scatter_elements") {
    if (!axisWalk(data, indices, args.attrs.getInt("axis", 0), a.walk))
      return nullptr;
    int64_t lines = a.walk.dim ? data.numel / a.walk.dim : 0;
    size_t slot = c.backend.addFault(args.where, badIndex, {a.walk.dim});
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      ScatterArgs bound = a;
      bound.error = backend->slot(slot);
      return d.scatterElements(s, bound, lines);
    });
  }
  a.k = indices.shape.back();
  if (a.k > kMaxDims)
    return nullptr;
  std::vector<int64_t> strides = cpu::stridesOf(data.shape);
  for (int64_t d = 0; d < a.k; ++d) {
    a.shape[d] = data.shape[d];
    a.strides[d] = strides[d];
  }
  a.slice = cpu::product(data.shape, a.k, data.shape.size());
  a.tuples = cpu::product(indices.shape, 0, indices.shape.size() - 1);
  size_t slot = c.backend.addFault(
      args.where, badIndex,
      std::vector<int64_t>(data.shape.begin(), data.shape.begin() + a.k));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    if (y.data != data.data)
      if (std::string e = d.copyElements(s, a.elementSize, data.data, y.data,
                                         y.numel);
          !e.empty())
        return e;
    ScatterArgs bound = a;
    bound.error = backend->slot(slot);
    return d.scatterND(s, bound);
  });
}

/// The tensors' data pointers, in order.
template <typename P> std::vector<P> pointers(const std::vector<Tensor> &list) {
  std::vector<P> out;
  for (const Tensor &t : list)
    out.push_back(t.data);
  return out;
}

/// concat (pieces: the inputs) and split (pieces: the outputs) along an
/// axis, any element size.
KernelFn piecesKernel(const std::string &op, Context &c) {
  checkLikeTheCpu(op, c.args);
  bool concat = op == "concat";
  const std::vector<Tensor> &parts = concat ? c.args.in : c.args.out;
  const Tensor whole = concat ? c.args.out[0] : c.args.in[0];
  int64_t axis = c.args.attrs.getInt("axis", 0);
  std::vector<int64_t> sizes;
  for (const Tensor &p : parts)
    sizes.push_back(p.shape[axis]);
  std::vector<Piece> plan = planPieces(whole.shape, axis, sizes);
  size_t size = fsdprt_dtype_size(whole.dtype);
  if (concat) {
    std::vector<const void *> in = pointers<const void *>(parts);
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.concat(s, size, in.data(), whole.data, plan);
    });
  }
  std::vector<void *> out = pointers<void *>(parts);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.split(s, size, whole.data, out.data(), plan);
  });
}

/// copy, and the collectives of a group of one rank (a copy too).
KernelFn copyKernel(const std::string &op, Context &c) {
  checkLikeTheCpu(op, c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  size_t size = fsdprt_dtype_size(y.dtype);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.copyElements(s, size, x.data, y.data, y.numel);
  });
}

/// pack: a unit's members into its flat buffer, zeros elsewhere.
KernelFn packKernel(Context &c) {
  checkLikeTheCpu("pack", c.args);
  const Tensor flat = c.args.out[0];
  std::vector<int64_t> numels;
  for (const Tensor &t : c.args.in)
    numels.push_back(t.numel);
  PackPlan plan =
      planPack(c.args.attrs.getInts("offsets", {}), numels, flat.numel);
  std::vector<const void *> members = pointers<const void *>(c.args.in);
  size_t size = fsdprt_dtype_size(flat.dtype);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.pack(s, size, members.data(), flat.data, plan);
  });
}

//===----------------------------------------------------------------------===//
// Convolutional nets: pooling, batch norm
//===----------------------------------------------------------------------===//

/// The CPU's window (its checks: cpu::poolWindow) as the bodies take it.
PoolWindow poolWindow(KernelArgs &args, const Tensor &x, const Tensor &y) {
  cpu::PoolWindow p = cpu::poolWindow(args, x, y);
  PoolWindow w{};
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = p.k[d];
    w.stride[d] = p.st[d];
    w.dilation[d] = p.dil[d];
  }
  for (int d = 0; d < 4; ++d)
    w.pads[d] = p.pads[d];
  w.includePad = p.includePad;
  w.h = p.h;
  w.w = p.w;
  w.oh = p.oh;
  w.ow = p.ow;
  return w;
}

/// max_pool (with its Indices output too), average_pool and pool_grad over
/// planes [N * C, H, W].
KernelFn poolKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  const Tensor x = args.in[0], y = args.out[0];
  int64_t planes = x.shape[0] * x.shape[1];
  if (op == "max_pool" && args.out.size() == 2) {
    if (x.dtype != FSDPRT_F32 || y.dtype != FSDPRT_F32)
      return nullptr; // halves run widened
    MaxPoolIndicesBody body{poolWindow(args, x, y), x.as<float>(),
                            y.as<float>(), args.out[1].as<int64_t>(),
                            args.attrs.getInt("storage_order", 0) != 0};
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.maxPoolIndices(s, body, planes);
    });
  }
  if (!allF32(args))
    return nullptr;
  if (op == "pool_grad") {
    const Tensor g = args.in[1];
    bool max = args.attrs.getString("mode", "") == "max";
    PoolWindow window = poolWindow(args, x, g);
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.poolGrad(s, max, window, x.as<float>(), g.as<float>(),
                        y.as<float>(), planes);
    });
  }
  bool max = op == "max_pool";
  PoolWindow window = poolWindow(args, x, y);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.pool(s, max, window, x.as<float>(), y.as<float>(), planes);
  });
}

/// activation_grad, layer_norm_grad and rms_norm_grad (kernels/grads.h),
/// checked as the CPU checks them; a norm's row statistics in the
/// workspace.
KernelFn gradKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  if (!allF32(args))
    return nullptr;
  const Tensor dy = args.in[0], x = args.in[1], dx = args.out[0];
  if (op == "activation_grad") {
    std::string name = args.attrs.getString("activation", "");
    ActivationGrad kind = name == "gelu_tanh" ? ActivationGrad::GeluTanh
                          : name == "silu"    ? ActivationGrad::Silu
                                              : ActivationGrad::Gelu;
    ActivationGradBody body{dy.as<float>(), x.as<float>(), dx.as<float>(),
                            kind};
    int64_t n = x.numel;
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.activationGrad(s, body, n);
    });
  }
  bool rms = op == "rms_norm_grad";
  const Tensor dscale = args.out[1], dbias = args.out[2];
  int64_t cols = dscale.numel, rows = cols ? x.numel / cols : 0;
  const float *scale = args.in.size() == 3 ? args.in[2].as<float>() : nullptr;
  float eps =
      static_cast<float>(args.attrs.getFloat("epsilon", rms ? 1e-6 : 1e-5));
  Workspace *workspace = args.workspace;
  workspace->reserve(normGradScratchFloats(rows, cols) * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.normGrad(s, NormGradArgs{dy.as<float>(), x.as<float>(), scale,
                                      dx.as<float>(), dscale.as<float>(),
                                      dbias.as<float>(), workspace->as<float>(),
                                      rows, cols, eps, rms});
  });
}

/// A run-time scale that does not fit the plan, as the CPU words it;
/// `bounds`: x's dims, then y's.
std::string badScale(const ErrorSlot &slot,
                     const std::vector<int64_t> &bounds) {
  ResizePlan plan{};
  plan.rank = static_cast<int>(bounds.size() / 2);
  for (int d = 0; d < plan.rank; ++d)
    plan.in[d] = bounds[d], plan.out[d] = bounds[plan.rank + d];
  return cpu::resizeScaleError(plan, slot.code, slot.detail);
}

/// resize (the CPU's plan and checks: cpu::resizePlan), its taps computed
/// by each output element's thread. Scales given as an input are read by
/// the kernel from device memory, as trilu's k is, rather than downloaded
/// here: y's shape is the plan's whatever the scales say (they only move
/// the taps, and a scale that does not give y's size is a fault, in the
/// kernel's ErrorSlot), so nothing on the host needs them, and a download
/// would synchronise the stream mid-step and could not be captured.
KernelFn resizeKernel(Context &c) {
  checkLikeTheCpu("resize", c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  if (x.dtype != FSDPRT_F32 || y.dtype != FSDPRT_F32)
    return nullptr; // halves run widened
  ResizePlan plan = cpu::resizePlan(c.args, x, y);
  if (c.args.in.size() == 1) {
    std::vector<double> scales = c.args.attrs.getFloats("scales", {});
    std::copy(scales.begin(), scales.end(), plan.scale);
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.resize(s, ResizeBody{plan, x.as<float>(), y.as<float>()},
                      y.numel);
    });
  }
  std::vector<int64_t> bounds = x.shape;
  bounds.insert(bounds.end(), y.shape.begin(), y.shape.end());
  size_t slot = c.backend.addFault(c.args.where, badScale, bounds);
  CudaBackend *backend = &c.backend;
  const float *scales = c.args.in[1].as<float>();
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    ResizeBody body{plan, x.as<float>(), y.as<float>(), scales,
                    backend->slot(slot)};
    return d.resize(s, body, std::max<int64_t>(y.numel, 1));
  });
}

/// grid_sample and grid_sample_grad in F32 and F64 (halves run widened):
/// the CPU's checks and body (cpu::gridSampleBody), the gradient's d(x)
/// then d(grid).
KernelFn gridSampleKernel(const std::string &op, Context &c) {
  checkLikeTheCpu(op, c.args);
  if (isHalf(c.args.in[0].dtype))
    return nullptr; // halves run widened
  bool grad = op == "grid_sample_grad";
  GridSampleBody body = cpu::gridSampleBody(c.args, grad);
  if (!grad)
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.gridSample(s, body);
    });
  GridSampleBody dgrid = body;
  dgrid.step = GridSampleStep::GridGrad;
  dgrid.out = c.args.out[1].data;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    std::string error = d.gridSample(s, body);
    return error.empty() ? d.gridSample(s, dgrid) : error;
  });
}

/// global_max_pool over the spatial dims, hardmax, arg_max and arg_min
/// along an axis, one thread per plane or row, as the CPU computes them.
KernelFn maxKernel(const std::string &op, Context &c) {
  checkLikeTheCpu(op, c.args);
  const Tensor x = c.args.in[0], y = c.args.out[0];
  if (op == "arg_max" || op == "arg_min") {
    if (isHalf(x.dtype))
      return nullptr; // halves run widened
    int64_t axis = c.args.attrs.getInt("axis", 0);
    int64_t rank = static_cast<int64_t>(x.shape.size());
    ArgExtremeBody body{
        x.data,          y.as<int64_t>(),
        x.shape[axis],   cpu::product(x.shape, axis + 1, rank),
        op == "arg_max", c.args.attrs.getInt("select_last_index", 0) != 0,
        x.dtype};
    int64_t rows = y.numel;
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.argExtreme(s, body, rows);
    });
  }
  if (!allF32(c.args))
    return nullptr;
  if (op == "global_max_pool") {
    int64_t inner = cpu::product(x.shape, 2, x.shape.size());
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.globalMaxPool(s, x.as<float>(), y.as<float>(), y.numel, inner);
    });
  }
  int64_t rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = c.args.attrs.getInt("axis", -1); // the CPU's check: >= 0
  int64_t n = x.shape.empty() ? 1 : x.shape[axis];
  int64_t inner = x.shape.empty() ? 1 : cpu::product(x.shape, axis + 1, rank);
  int64_t outer = n != 0 && inner != 0 ? x.numel / (n * inner) : 0;
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.hardmax(s, x.as<float>(), y.as<float>(), outer, n, inner);
  });
}

/// adamw and sgd (kernels/optim.h): one pass over the parameter and its
/// state, the CPU kernel's operands and constants.
KernelFn optimizerKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  if (!allF32(args))
    return nullptr;
  const std::vector<Tensor> in = args.in, out = args.out;
  const int64_t n = in[0].numel;
  auto data = [&](size_t i) {
    return i < in.size() ? in[i].as<const float>() : nullptr;
  };
  if (op == "adamw") {
    double beta1 = args.attrs.getFloat("beta1", 0.9);
    double beta2 = args.attrs.getFloat("beta2", 0.999);
    AdamWConstants k{
        static_cast<float>(beta1),
        static_cast<float>(beta2),
        static_cast<float>(1 - beta1),
        static_cast<float>(1 - beta2),
        static_cast<float>(args.attrs.getFloat("eps", 1e-8)),
        static_cast<float>(args.attrs.getFloat("weight_decay", 0.01))};
    AdamWBody body{data(0),
                   data(1),
                   data(2),
                   data(3),
                   data(4),
                   data(5),
                   data(6),
                   out[0].as<float>(),
                   out[1].as<float>(),
                   out[2].as<float>(),
                   k};
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.adamw(s, body, n);
    });
  }
  double momentum = args.attrs.getFloat("momentum", 0);
  double dampening = args.attrs.getFloat("dampening", 0);
  bool stateful = momentum != 0;
  SGDConstants k{static_cast<float>(momentum),
                 static_cast<float>(1 - dampening),
                 static_cast<float>(args.attrs.getFloat("weight_decay", 0)),
                 dampening != 0, args.attrs.getInt("nesterov", 0) != 0};
  SGDBody body{data(0),
               data(1),
               stateful ? data(4) : nullptr,
               data(2),
               data(3),
               data(stateful ? 5 : 4),
               out[0].as<float>(),
               stateful ? out[1].as<float>() : nullptr,
               k};
  return onStream(
      c.device, [=](Device &d, DeviceStream &s) { return d.sgd(s, body, n); });
}

/// batch_norm with given statistics, x [N, C, ...].
KernelFn batchNormKernel(Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu("batch_norm", args);
  if (!allF32(args))
    return nullptr;
  const Tensor x = args.in[0], y = args.out[0];
  const Tensor scale = args.in[1], bias = args.in[2], mean = args.in[3],
               var = args.in[4];
  int64_t n = x.shape[0], channels = x.shape[1];
  int64_t inner = cpu::product(x.shape, 2, x.shape.size());
  float eps = static_cast<float>(args.attrs.getFloat("epsilon", 1e-5));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.batchNorm(s, x.as<float>(), scale.as<float>(), bias.as<float>(),
                       mean.as<float>(), var.as<float>(), y.as<float>(), n,
                       channels, inner, eps);
  });
}

/// batch_norm_train and batch_norm_grad (kernels/pool.h), checked as the
/// CPU checks them; fp32 (halves run widened, the statistics stay fp32).
KernelFn batchNormTrainKernel(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  if (!allF32(args))
    return nullptr;
  bool grad = op == "batch_norm_grad";
  const Tensor &x = args.in[grad ? 1 : 0];
  int64_t n = x.shape[0], channels = x.shape[1];
  int64_t inner = cpu::product(x.shape, 2, x.shape.size());
  const std::vector<Tensor> &in = args.in, &out = args.out;
  if (grad) {
    BatchNormGradBody body{in[0].as<float>(),  in[1].as<float>(),
                           in[2].as<float>(),  in[3].as<float>(),
                           in[4].as<float>(),  out[0].as<float>(),
                           out[1].as<float>(), out[2].as<float>(),
                           n,                  channels,
                           inner};
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      return d.batchNormGrad(s, body);
    });
  }
  int64_t count = n * inner;
  BatchNormTrainBody body{
      in[0].as<float>(),  in[1].as<float>(),  in[2].as<float>(),
      in[3].as<float>(),  in[4].as<float>(),  out[0].as<float>(),
      out[1].as<float>(), out[2].as<float>(), out[3].as<float>(),
      out[4].as<float>(), n,                  channels,
      inner,              args.attrs.getFloat("epsilon", 1e-5),
      args.attrs.getFloat("momentum", 0.9),
      count > 1 ? double(count) / double(count - 1) : 1.0};
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.batchNormTrain(s, body);
  });
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

/// attention's shape, attributes and mask strides (the CPU's checks have
/// passed); false when the batch has more dims than the bodies index.
bool attentionShape(const KernelArgs &args, bool hasMask, AttentionShape &g) {
  const Tensor &q = args.in[0], &kt = args.in[1], &v = args.in[2];
  size_t rank = q.shape.size();
  g.headsInRows = args.attrs.getString("layout", "bhsd") == "bshd";
  std::vector<int64_t> batch(q.shape.begin(), q.shape.end() - 2);
  if (g.headsInRows) // [B, L, H, D]: batch B, H
    batch = {q.shape[0], q.shape[2]};
  if (batch.size() > static_cast<size_t>(kMaxDims))
    return false;
  g.batch = cpu::product(batch);
  if (g.headsInRows) {
    g.heads = q.shape[2];
    g.l = q.shape[1], g.d = q.shape[3], g.s = kt.shape[1], g.dv = v.shape[3];
  } else {
    g.l = q.shape[rank - 2], g.d = q.shape[rank - 1];
    g.s = kt.shape[rank - 1], g.dv = v.shape[rank - 1];
  }
  g.scale = static_cast<float>(args.attrs.getFloat("scale", 1.0));
  g.fill = static_cast<float>(args.attrs.getFloat("fill_value", 0.0));
  std::string kind = args.attrs.getString("mask_kind", "none");
  g.mask = kind == "add"      ? MaskKind::Add
           : kind == "fill"   ? MaskKind::Fill
           : kind == "causal" ? MaskKind::Causal
                              : MaskKind::None;
  g.batchDims = static_cast<int>(batch.size());
  for (size_t k = 0; k < batch.size(); ++k)
    g.batchSize[k] = batch[k];
  if (hasMask) {
    std::vector<int64_t> scores = batch;
    scores.push_back(g.l);
    scores.push_back(g.s);
    std::vector<int64_t> strides =
        cpu::broadcastStrides(args.in[3].shape, scores, "the mask");
    for (size_t k = 0; k < batch.size(); ++k)
      g.maskStride[k] = strides[k];
    g.maskStrideL = strides[batch.size()];
    g.maskStrideS = strides[batch.size() + 1];
  }
  return true;
}

/// attention and attention_grad (kernels/attention.h), checked as the CPU
/// checks them: the own flash-style kernels on fp32 tensors (bf16/f16 run
/// widened through them) where cuDNN does not run them (cudnnAttention).
KernelFn attentionKernel(const std::string &op, Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu(op, args);
  bool grad = op == "attention_grad";
  std::string kind = args.attrs.getString("mask_kind", "none");
  bool hasMask = kind == "add" || kind == "fill";
  AttentionShape shape;
  if (!attentionShape(args, hasMask, shape))
    return nullptr;
  // The bodies read f32 tensors, an f32 add mask and a bool fill mask; a
  // bf16/f16 tensor (the mask too) runs widened through this kernel.
  for (size_t i = 0; i < args.in.size(); ++i) {
    bool fillMask = hasMask && i == 3 && kind == "fill";
    if (args.in[i].dtype != (fillMask ? FSDPRT_BOOL : FSDPRT_F32))
      return nullptr;
  }
  for (const Tensor &t : args.out)
    if (t.dtype != FSDPRT_F32)
      return nullptr;
  if (!planAttentionTiles(shape.d, shape.dv).fits)
    throw KernelError("head dims " + std::to_string(shape.d) + " and " +
                      std::to_string(shape.dv) +
                      " are too large for the CUDA attention kernels' tiles "
                      "in 48 KiB of shared memory");
  std::vector<Tensor> in = args.in, out = args.out;
  size_t at = hasMask ? 4 : 3; // attention_grad's y, lse and dy
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    AttentionArgs a;
    a.shape = shape;
    a.q = in[0].as<float>(), a.kt = in[1].as<float>(), a.v = in[2].as<float>();
    a.mask = hasMask ? in[3].data : nullptr;
    if (!grad) {
      a.y = out[0].as<float>();
      a.lse = out.size() == 2 ? out[1].as<float>() : nullptr;
      return d.attention(s, a);
    }
    a.y = in[at].as<float>(), a.lse = in[at + 1].as<float>();
    a.dy = in[at + 2].as<float>();
    a.dq = out[0].as<float>(), a.dkt = out[1].as<float>();
    a.dv = out[2].as<float>();
    return d.attentionGrad(s, a);
  });
}

//===----------------------------------------------------------------------===//
// GEMMs: matmul, gemm, linear (cuBLASLt on a GPU)
//===----------------------------------------------------------------------===//

/// Whether a GEMM's operands share one dtype the device's GEMMs take.
bool gemmDtypes(const KernelArgs &args) {
  fsdprt_dtype_t dtype = args.out[0].dtype;
  if (dtype != FSDPRT_F32 && !isHalf(dtype))
    return false;
  for (const Tensor &t : args.in)
    if (t.dtype != dtype)
      return false;
  return true;
}

/// `gemm` planned by the device; KernelError when it cannot run it.
std::shared_ptr<PreparedGemm> prepareGemm(Context &c, const Gemm &gemm) {
  std::string error;
  std::shared_ptr<PreparedGemm> prepared = c.device.prepareGemm(gemm, error);
  if (!prepared)
    throw KernelError(error);
  return prepared;
}

/// Runs `gemm` on a, b, bias and y.
KernelFn gemmLaunch(Context &c, const Gemm &gemm, const Tensor &a,
                    const Tensor &b, const void *bias, const Tensor &y) {
  std::shared_ptr<PreparedGemm> g = prepareGemm(c, gemm);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    return d.gemm(s, *g, a.data, b.data, bias, y.data);
  });
}

/// Element offsets of an operand's matrices whose batch dims broadcast to
/// `batch`.
std::vector<int64_t> batchOffsets(std::vector<int64_t> shape,
                                  const std::vector<int64_t> &batch,
                                  int64_t matrix) {
  shape.resize(shape.size() - 2);
  std::vector<int64_t> strides = cpu::broadcastStrides(shape, batch, "batch");
  std::vector<int64_t> offsets(cpu::product(batch));
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] = cpu::offsetOf(i, batch, strides) * matrix;
  return offsets;
}

/// The stride between consecutive entries of `offsets`, or -1 when they
/// are not evenly spaced.
int64_t evenStride(const std::vector<int64_t> &offsets) {
  int64_t stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != stride)
      return -1;
  return stride;
}

/// matmul with NumPy's broadcasting: one strided-batched GEMM when the
/// batch is evenly spaced in both operands, else one GEMM per matrix.
KernelFn matmulKernel(Context &c) {
  checkLikeTheCpu("matmul", c.args);
  if (!gemmDtypes(c.args))
    return nullptr;
  const Tensor a = c.args.in[0], b = c.args.in[1], y = c.args.out[0];
  bool transB = c.args.attrs.getInt("trans_b", 0) != 0;
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  Gemm g;
  g.dtype = y.dtype;
  g.transB = transB;
  g.m = as[as.size() - 2];
  g.k = as.back();
  g.n = transB ? bs[bs.size() - 2] : bs.back();
  g.lda = g.k;
  g.ldb = transB ? g.k : g.n;
  g.ldy = g.n;
  std::vector<int64_t> batch = cpu::broadcastShapes(
      std::vector<int64_t>(as.begin(), as.end() - 2),
      std::vector<int64_t>(bs.begin(), bs.end() - 2));
  std::vector<int64_t> aOff = batchOffsets(as, batch, g.m * g.k);
  std::vector<int64_t> bOff = batchOffsets(bs, batch, g.k * g.n);
  int64_t strideA = evenStride(aOff), strideB = evenStride(bOff);
  if (strideA >= 0 && strideB >= 0) {
    g.batch = static_cast<int64_t>(aOff.size());
    g.strideA = strideA;
    g.strideB = strideB;
    g.strideY = g.m * g.n;
    return gemmLaunch(c, g, a, b, nullptr, y);
  }
  size_t size = fsdprt_dtype_size(y.dtype);
  std::shared_ptr<PreparedGemm> one = prepareGemm(c, g);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    for (size_t i = 0; i < aOff.size(); ++i)
      if (std::string error =
              d.gemm(s, *one, a.as<char>() + aOff[i] * size,
                     b.as<char>() + bOff[i] * size, nullptr,
                     y.as<char>() + i * g.m * g.n * size);
          !error.empty())
        return error;
    return std::string();
  });
}

/// ONNX Gemm: y = alpha * op(a) op(b) + beta * c, c broadcast to y (read
/// into y first, then the GEMM accumulates onto it).
KernelFn gemmKernel(Context &c) {
  checkLikeTheCpu("gemm", c.args);
  if (!gemmDtypes(c.args))
    return nullptr;
  const KernelArgs &args = c.args;
  const Tensor a = args.in[0], b = args.in[1], y = args.out[0];
  Gemm g;
  g.dtype = y.dtype;
  g.transA = args.attrs.getInt("trans_a", 0) != 0;
  g.transB = args.attrs.getInt("trans_b", 0) != 0;
  g.alpha = static_cast<float>(args.attrs.getFloat("alpha", 1.0));
  float beta = static_cast<float>(args.attrs.getFloat("beta", 1.0));
  g.m = y.shape[0];
  g.n = y.shape[1];
  g.k = g.transA ? a.shape[0] : a.shape[1];
  g.lda = a.shape[1];
  g.ldb = b.shape[1];
  g.ldy = g.n;
  if (args.in.size() < 3 || beta == 0)
    return gemmLaunch(c, g, a, b, nullptr, y);
  const Tensor addend = args.in[2];
  Broadcast read;
  try {
    read = planStrided(y.shape, cpu::broadcastStrides(addend.shape, y.shape, "c"));
  } catch (const std::invalid_argument &) {
    return nullptr;
  }
  g.beta = beta;
  size_t size = fsdprt_dtype_size(y.dtype);
  std::shared_ptr<PreparedGemm> accumulate = prepareGemm(c, g);
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    std::string error = d.stridedRead(s, size, read, addend.data, y.data, 0, y.numel);
    return error.empty() ? d.gemm(s, *accumulate, a.data, b.data, nullptr, y.data)
                         : error;
  });
}

/// linear: x [..., k] by w [k, n] (or [n, k], trans_w), the bias and a
/// ReLU or tanh-GELU in the GEMM's epilogue; other activations as a
/// kernel after it (fp32).
KernelFn linearKernel(Context &c) {
  checkLikeTheCpu("linear", c.args);
  if (!gemmDtypes(c.args))
    return nullptr;
  const KernelArgs &args = c.args;
  const Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  Gemm g;
  g.dtype = y.dtype;
  g.transB = args.attrs.getInt("trans_w", 0) != 0;
  g.k = x.shape.back();
  g.n = y.shape.back();
  g.m = g.n ? y.numel / g.n : 0;
  g.lda = g.k;
  g.ldb = g.transB ? g.k : g.n;
  g.ldy = g.n;
  g.bias = args.in.size() == 3;
  const void *bias = g.bias ? args.in[2].data : nullptr;
  cpu::Activation act =
      cpu::parseActivation(args.attrs.getString("activation", "none"));
  static const std::map<cpu::Activation, Unary> after = {
      {cpu::Activation::Gelu, Unary::Gelu},
      {cpu::Activation::Silu, Unary::Silu},
      {cpu::Activation::Tanh, Unary::Tanh},
      {cpu::Activation::Sigmoid, Unary::Sigmoid}};
  if (act == cpu::Activation::Relu)
    g.activation = GemmActivation::Relu;
  else if (act == cpu::Activation::GeluTanh)
    g.activation = GemmActivation::GeluTanh;
  else if (act != cpu::Activation::None) {
    if (y.dtype != FSDPRT_F32)
      return nullptr;
    Unary then = after.at(act);
    std::shared_ptr<PreparedGemm> product = prepareGemm(c, g);
    return onStream(c.device, [=](Device &d, DeviceStream &s) {
      std::string error = d.gemm(s, *product, x.data, w.data, bias, y.data);
      return error.empty() ? d.unary(s, then, y.as<float>(), y.as<float>(),
                                     y.numel, {})
                           : error;
    });
  }
  return gemmLaunch(c, g, x, w, bias, y);
}

//===----------------------------------------------------------------------===//
// Convolutions: im2col, GEMMs, col2im (kernels/conv.h)
//===----------------------------------------------------------------------===//

/// The most im2col scratch a convolution takes: as many whole images as
/// fit (at least one), so that one GEMM launch covers several.
constexpr uint64_t kColumnBytes = 64ull << 20;

/// A 1-D or 2-D convolution after the CPU's checks (checkLikeTheCpu), as a
/// 2-D one (a 1-D one has height 1): x [images, C, h, w], w [M, C/group,
/// kh, kw], y [images, M, oh, ow].
struct ConvPlan {
  ConvWindow win;
  int64_t images, group, m;
  int64_t mg, kdim, spatial; // outputs and column rows of a group; oh * ow
  int64_t chunk;             // images per im2col
  /// A 1x1 window with unit strides and no padding: x is its own column
  /// matrix (and dx the col2im of nothing), as on the CPU.
  bool direct;

  int64_t colImage() const { return win.rows() * spatial; }
  int64_t xImage() const { return win.channels * win.h * win.w; }
  int64_t yImage() const { return m * spatial; }
  /// Shapes a GEMM takes (cuBLASLt refuses empty ones).
  bool gemmable() const { return images && kdim && spatial && mg; }
};

ConvPlan convPlan(const KernelArgs &args, const Tensor &x, const Tensor &w,
                  const Tensor &y) {
  size_t sp = x.shape.size() - 2;
  auto ints = [&](const char *name, size_t n, int64_t fallback) {
    std::vector<int64_t> v = args.attrs.getInts(name, {});
    return v.empty() ? std::vector<int64_t>(n, fallback) : v;
  };
  std::vector<int64_t> strides = ints("strides", sp, 1);
  std::vector<int64_t> dilations = ints("dilations", sp, 1);
  std::vector<int64_t> pads = ints("pads", 2 * sp, 0);
  ConvPlan p{};
  ConvWindow &win = p.win;
  win.channels = x.shape[1];
  // The leading dim of a 2-D window; a 1-D one's is one row, unpadded.
  int two = sp == 2;
  win.h = two ? x.shape[2] : 1;
  win.w = x.shape.back();
  win.kernel[0] = two ? w.shape[2] : 1;
  win.kernel[1] = w.shape.back();
  win.stride[0] = two ? strides[0] : 1;
  win.stride[1] = strides.back();
  win.dilation[0] = two ? dilations[0] : 1;
  win.dilation[1] = dilations.back();
  win.pad[0] = two ? pads[0] : 0;
  win.pad[1] = pads[sp - 1];
  win.oh = two ? y.shape[2] : 1;
  win.ow = y.shape.back();
  p.images = x.shape[0];
  p.group = args.attrs.getInt("group", 1);
  p.m = w.shape[0];
  p.mg = p.m / p.group;
  p.kdim = w.shape[1] * win.kernel[0] * win.kernel[1];
  p.spatial = win.oh * win.ow;
  p.direct = win.kernel[0] == 1 && win.kernel[1] == 1 && win.stride[0] == 1 &&
             win.stride[1] == 1 &&
             std::all_of(pads.begin(), pads.end(),
                         [](int64_t pad) { return pad == 0; });
  uint64_t perImage = std::max<uint64_t>(p.colImage() * sizeof(float), 1);
  p.chunk = p.direct ? p.images
                     : std::clamp<int64_t>(kColumnBytes / perImage, 1,
                                           std::max<int64_t>(p.images, 1));
  return p;
}

/// Element strides of a convolution GEMM's operand between images and
/// between groups.
struct Strides {
  int64_t image, group;
};

/// The GEMMs of a chunk of images, one product per (image, group): batched
/// over the images (a launch per group) when a chunk has at least as many
/// images as there are groups, else over the groups (a launch per image):
/// depthwise convolutions take few launches, ungrouped ones one.
struct ConvGemms {
  Strides a, b, y;
  int64_t groups;
  std::map<int64_t, std::shared_ptr<PreparedGemm>> byImages; // by count
  std::shared_ptr<PreparedGemm> byGroups;

  /// The products of `images` images whose operands start at pa, pb, py.
  std::string run(Device &d, DeviceStream &s, const float *pa, const float *pb,
                  float *py, int64_t images) const {
    auto it = byImages.find(images);
    bool overImages = it != byImages.end();
    int64_t launches = overImages ? groups : images;
    for (int64_t i = 0; i < launches; ++i) {
      auto at = [&](const Strides &o) {
        return i * (overImages ? o.group : o.image);
      };
      std::string error = d.gemm(s, overImages ? *it->second : *byGroups,
                                 pa + at(a), pb + at(b), nullptr, py + at(y));
      if (!error.empty())
        return error;
    }
    return "";
  }
};

/// The GEMMs of chunks of `counts` images (`one`: a single product).
ConvGemms planGemms(Context &c, const Gemm &one, Strides a, Strides b,
                    Strides y, int64_t groups,
                    std::initializer_list<int64_t> counts) {
  ConvGemms plan{a, b, y, groups, {}, nullptr};
  for (int64_t count : counts) {
    if (count == 0 || plan.byImages.count(count))
      continue;
    bool overImages = count >= groups;
    if (!overImages && plan.byGroups)
      continue;
    Gemm g = one;
    g.batch = overImages ? count : groups;
    g.strideA = overImages ? a.image : a.group;
    g.strideB = overImages ? b.image : b.group;
    g.strideY = overImages ? y.image : y.group;
    (overImages ? plan.byImages[count] : plan.byGroups) = prepareGemm(c, g);
  }
  return plan;
}

/// A kernel with nothing to compute (an empty output).
KernelFn nothing(Context &c) {
  return onStream(c.device,
                  [](Device &, DeviceStream &) { return std::string(); });
}

/// conv(x, w[, bias]) -> y: per chunk of images, im2col (not for a direct
/// one), then y = w col per group; the bias added after the GEMMs, as the
/// CPU adds it after its.
KernelFn convKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("conv", args);
  if (!allF32(args))
    return nullptr;
  const Tensor x = args.in[0], w = args.in[1], y = args.out[0];
  ConvPlan p = convPlan(args, x, w, y);
  if (y.numel == 0)
    return nothing(c);
  if (!p.gemmable())
    return nullptr; // an empty reduction: the CPU's kernel only
  Gemm one;
  one.m = p.mg;
  one.n = p.spatial;
  one.k = p.kdim;
  one.lda = p.kdim;
  one.ldb = one.ldy = p.spatial;
  ConvGemms gemms = planGemms(
      c, one, {0, p.mg * p.kdim}, {p.colImage(), p.kdim * p.spatial},
      {p.yImage(), p.mg * p.spatial}, p.group, {p.chunk, p.images % p.chunk});
  bool hasBias = args.in.size() == 3;
  const Tensor bias = hasBias ? args.in[2] : Tensor();
  Broadcast addBias;
  if (hasBias) {
    std::vector<int64_t> perChannel(y.shape.size() - 1, 1);
    perChannel[0] = p.m;
    addBias = planBroadcast(y.shape, {y.shape, perChannel});
  }
  Workspace *workspace = args.workspace;
  if (!p.direct)
    workspace->reserve(p.chunk * p.colImage() * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    float *col = workspace->as<float>();
    for (int64_t b0 = 0; b0 < p.images; b0 += p.chunk) {
      int64_t count = std::min(p.chunk, p.images - b0);
      const float *xb = x.as<float>() + b0 * p.xImage();
      if (!p.direct)
        if (std::string e = d.im2col(s, p.win, xb, col, count); !e.empty())
          return e;
      if (std::string e = gemms.run(d, s, w.as<float>(), p.direct ? xb : col,
                                    y.as<float>() + b0 * p.yImage(), count);
          !e.empty())
        return e;
    }
    if (!hasBias)
      return std::string();
    return d.binary(s, Binary::Add, addBias, y.as<float>(), bias.as<float>(),
                    y.as<float>(), y.numel);
  });
}

/// conv_grad_input(dy, w) -> dx: per chunk of images, the window gradients
/// col = w^T dy per group, folded onto dx by col2im (a direct one's GEMM
/// writes dx itself).
KernelFn convGradInputKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("conv_grad_input", args);
  if (!allF32(args))
    return nullptr;
  const Tensor dy = args.in[0], w = args.in[1], dx = args.out[0];
  ConvPlan p = convPlan(args, dx, w, dy);
  if (dx.numel == 0)
    return nothing(c);
  if (!p.gemmable())
    return nullptr;
  Gemm one;
  one.transA = true;
  one.m = p.kdim;
  one.n = p.spatial;
  one.k = p.mg;
  one.lda = p.kdim;
  one.ldb = one.ldy = p.spatial;
  ConvGemms gemms =
      planGemms(c, one, {0, p.mg * p.kdim}, {p.yImage(), p.mg * p.spatial},
                {p.colImage(), p.kdim * p.spatial}, p.group,
                {p.chunk, p.images % p.chunk});
  Workspace *workspace = args.workspace;
  if (!p.direct)
    workspace->reserve(p.chunk * p.colImage() * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    float *col = workspace->as<float>();
    for (int64_t b0 = 0; b0 < p.images; b0 += p.chunk) {
      int64_t count = std::min(p.chunk, p.images - b0);
      float *xb = dx.as<float>() + b0 * p.xImage();
      if (std::string e =
              gemms.run(d, s, w.as<float>(), dy.as<float>() + b0 * p.yImage(),
                        p.direct ? xb : col, count);
          !e.empty())
        return e;
      if (!p.direct)
        if (std::string e = d.col2im(s, p.win, col, xb, count); !e.empty())
          return e;
    }
    return std::string();
  });
}

/// conv_grad_weight(x, dy) -> dw: per group, the sum over images of
/// dy im2col(x)^T, one GEMM per image (batched over the groups) adding
/// onto the images before it, in the CPU's order.
KernelFn convGradWeightKernel(Context &c) {
  KernelArgs &args = c.args;
  checkLikeTheCpu("conv_grad_weight", args);
  if (!allF32(args))
    return nullptr;
  const Tensor x = args.in[0], dy = args.in[1], dw = args.out[0];
  ConvPlan p = convPlan(args, x, dw, dy);
  if (dw.numel == 0)
    return nothing(c);
  if (!p.gemmable())
    return nullptr; // dw is zeros: the CPU's kernel only
  Gemm one;
  one.transB = true;
  one.m = p.mg;
  one.n = p.kdim;
  one.k = p.spatial;
  one.lda = one.ldb = p.spatial;
  one.ldy = p.kdim;
  one.batch = p.group;
  one.strideA = p.mg * p.spatial;
  one.strideB = p.kdim * p.spatial;
  one.strideY = p.mg * p.kdim;
  std::shared_ptr<PreparedGemm> first = prepareGemm(c, one);
  one.beta = 1;
  std::shared_ptr<PreparedGemm> add = prepareGemm(c, one);
  Workspace *workspace = args.workspace;
  if (!p.direct)
    workspace->reserve(p.chunk * p.colImage() * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    float *col = workspace->as<float>();
    for (int64_t b0 = 0; b0 < p.images; b0 += p.chunk) {
      int64_t count = std::min(p.chunk, p.images - b0);
      const float *xb = x.as<float>() + b0 * p.xImage();
      if (!p.direct)
        if (std::string e = d.im2col(s, p.win, xb, col, count); !e.empty())
          return e;
      const float *cols = p.direct ? xb : col;
      for (int64_t i = 0; i < count; ++i)
        if (std::string e = d.gemm(s, b0 + i == 0 ? *first : *add,
                                   dy.as<float>() + (b0 + i) * p.yImage(),
                                   cols + i * p.colImage(), nullptr, dw.data);
            !e.empty())
          return e;
    }
    return std::string();
  });
}

//===----------------------------------------------------------------------===//
// Recurrences: lstm, gru, rnn and their gradients (kernels/recurrent.h)
//===----------------------------------------------------------------------===//

/// A GEMM of row-major operands as cpu::sgemm takes them.
Gemm rowMajor(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              int64_t lda, int64_t ldb, int64_t ldy, float beta = 0) {
  Gemm g;
  g.transA = transA;
  g.transB = transB;
  g.m = m;
  g.n = n;
  g.k = k;
  g.lda = lda;
  g.ldb = ldb;
  g.ldy = ldy;
  g.beta = beta;
  return g;
}

/// A recurrence's shape from its (CPU-checked) arguments.
RecurrentShape recurrentShape(const KernelArgs &args, RecurrentCell cell) {
  RecurrentShape rc{};
  rc.cell = cell;
  rc.gates = cell == RecurrentCell::Lstm  ? 4
             : cell == RecurrentCell::Gru ? 3
                                          : 1;
  rc.hidden = args.attrs.getInt("hidden_size", 0);
  std::string direction = args.attrs.getString("direction", "forward");
  rc.dirs = direction == "bidirectional" ? 2 : 1;
  rc.reverse = direction == "reverse";
  rc.batchFirst = args.attrs.getInt("layout", 0) == 1;
  rc.linearBeforeReset = args.attrs.getInt("linear_before_reset", 0) != 0;
  const Tensor &x = args.in[0];
  rc.seq = x.shape[rc.batchFirst ? 1 : 0];
  rc.batch = x.shape[rc.batchFirst ? 0 : 1];
  rc.input = x.shape[2];
  return rc;
}

/// What a direction's forward reads: x, w, r and the optional b,
/// initial_h, initial_c (whole tensors, or null; b, initial_h and
/// initial_c as RecurrentBody's fields, which a gradient's pieces write).
struct RecurrentInputs {
  const float *x, *w, *r;
  float *b, *h0, *c0;
};

/// The inputs of `args` (the bias, initial_h and initial_c attributes say
/// which optional ones follow x, w and r); `next`: the index after them.
RecurrentInputs recurrentInputs(const KernelArgs &args, RecurrentCell cell,
                                size_t &next) {
  RecurrentInputs in{args.in[0].as<float>(),
                     args.in[1].as<float>(),
                     args.in[2].as<float>(),
                     nullptr,
                     nullptr,
                     nullptr};
  next = 3;
  if (args.attrs.getInt("bias", 0) != 0)
    in.b = args.in[next++].as<float>();
  if (args.attrs.getInt("initial_h", 0) != 0)
    in.h0 = args.in[next++].as<float>();
  if (cell == RecurrentCell::Lstm && args.attrs.getInt("initial_c", 0) != 0)
    in.c0 = args.in[next++].as<float>();
  return in;
}

/// The GEMMs of one direction's forward: the input projection X W^T, each
/// step's h R^T (a GRU resetting first: z's and r's part, then (r * h)
/// R_h^T).
struct RecurrentGemms {
  std::shared_ptr<PreparedGemm> projection, recurrent, resetHidden;
};

RecurrentGemms forwardGemms(Context &c, const RecurrentShape &rc) {
  const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch;
  RecurrentGemms g;
  g.projection = prepareGemm(c, rowMajor(false, true, rc.seq * N, GH, rc.input,
                                         rc.input, rc.input, GH));
  g.recurrent = prepareGemm(
      c, rowMajor(false, true, N, rc.resetFirst() ? 2 * H : GH, H, H, H, GH));
  if (rc.resetFirst())
    g.resetHidden = prepareGemm(c, rowMajor(false, true, N, H, H, H, H, GH));
  return g;
}

/// The forward's buffers of one direction (workspace floats).
struct ForwardScratch {
  float *proj, *q, *h, *c, *m;
  static int64_t floats(const RecurrentShape &rc) {
    return rc.seq * rc.batch * rc.gh() + rc.batch * (rc.gh() + 3 * rc.hidden);
  }
  ForwardScratch(const RecurrentShape &rc, float *at)
      : proj(at), q(proj + rc.seq * rc.batch * rc.gh()),
        h(q + rc.batch * rc.gh()), c(h + rc.batch * rc.hidden),
        m(c + rc.batch * rc.hidden) {}
};

/// Enqueues direction d's forward. `saved` (a gradient's): each step's
/// states in saved.h/saved.c [seq + 1, batch, hidden] and its gates in
/// saved.act/saved.qh; otherwise y, y_h, y_c when given.
std::string runForward(Device &dev, DeviceStream &s, const RecurrentShape &rc,
                       const RecurrentGemms &gemms, const RecurrentInputs &in,
                       int64_t d, const ForwardScratch &f,
                       const RecurrentBody *saved, float *y, float *yh,
                       float *yc) {
  const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch, NH = N * H;
  const float *w = in.w + d * GH * rc.input, *r = in.r + d * GH * H;
  RecurrentBody body{};
  body.rc = rc;
  body.d = d;
  body.proj = f.proj;
  body.q = f.q;
  body.m = f.m;
  body.wb = in.b ? in.b + d * 2 * GH : nullptr;
  body.rb = body.wb ? body.wb + GH : nullptr;
  auto launch = [&](RecurrentStep step, int64_t n) {
    body.step = step;
    return dev.recurrent(s, body, n);
  };
  if (std::string e = dev.gemm(s, *gemms.projection, in.x, w, nullptr, f.proj);
      !e.empty())
    return e;
  if (body.wb)
    if (std::string e = launch(RecurrentStep::Bias, rc.seq * N * GH);
        !e.empty())
      return e;
  body.h = saved ? saved->h : f.h;
  body.c = saved ? saved->c : f.c;
  body.h0 = in.h0;
  body.c0 = in.c0;
  if (std::string e = launch(RecurrentStep::Start, NH); !e.empty())
    return e;
  body.y = y;
  for (int64_t step = 0; step < rc.seq; ++step) {
    body.t = rc.timeOf(step, d);
    if (saved) {
      body.h = saved->h + step * NH;
      body.c = saved->c + step * NH;
      body.act = saved->act + step * N * GH;
      body.qh = saved->qh + step * NH;
    }
    body.hOut = saved ? body.h + NH : body.h;
    body.cOut = saved ? body.c + NH : body.c;
    if (std::string e = dev.gemm(s, *gemms.recurrent, body.h, r, nullptr, f.q);
        !e.empty())
      return e;
    if (rc.cell == RecurrentCell::Gru) {
      if (std::string e = launch(RecurrentStep::ResetGate, NH); !e.empty())
        return e;
      if (rc.resetFirst())
        if (std::string e = dev.gemm(s, *gemms.resetHidden, f.m, r + 2 * H * H,
                                     nullptr, f.q + 2 * H);
            !e.empty())
          return e;
    }
    if (std::string e = launch(RecurrentStep::Gates, NH); !e.empty())
      return e;
  }
  if (saved || (!yh && !yc))
    return "";
  body.h = f.h;
  body.c = f.c;
  body.yh = yh;
  body.yc = yc;
  return launch(RecurrentStep::Finish, NH);
}

/// lstm, gru, rnn: x, w, r[, b][, initial_h][, initial_c] -> y, y_h[, y_c].
KernelFn recurrentForwardKernel(Context &c, RecurrentCell cell) {
  KernelArgs &args = c.args;
  RecurrentShape rc = recurrentShape(args, cell);
  if (rc.seq == 0 || rc.batch == 0 || rc.input == 0)
    return nullptr; // empty GEMMs: the CPU's kernel only
  RecurrentGemms gemms = forwardGemms(c, rc);
  size_t next = 0;
  RecurrentInputs in = recurrentInputs(args, cell, next);
  const std::vector<Tensor> out = args.out;
  Workspace *workspace = args.workspace;
  workspace->reserve(ForwardScratch::floats(rc) * sizeof(float));
  return onStream(c.device, [=](Device &d, DeviceStream &s) {
    ForwardScratch f(rc, workspace->as<float>());
    for (int64_t dir = 0; dir < rc.dirs; ++dir)
      if (std::string e =
              runForward(d, s, rc, gemms, in, dir, f, nullptr,
                         out[0].as<float>(), out[1].as<float>(),
                         out.size() == 3 ? out[2].as<float>() : nullptr);
          !e.empty())
        return e;
    return std::string();
  });
}

/// The GEMMs back through one step and over all steps (kernels/recurrent.h
/// says which products each piece needs).
struct RecurrentGradGemms {
  // Per step: dr += dq^T h_prev, dh_prev += dq R (a GRU resetting first:
  // dm = dq_h R_h, then z's and r's part and h's separately).
  std::shared_ptr<PreparedGemm> dr, dprev, dm, drGates, drHidden, dprevGates;
  // Over all steps: dx (=, then += for the second direction) dP W, dW = dP^T X.
  std::shared_ptr<PreparedGemm> dxFirst, dxNext, dw;
};

RecurrentGradGemms gradGemms(Context &c, const RecurrentShape &rc) {
  const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch;
  RecurrentGradGemms g;
  if (rc.resetFirst()) {
    g.dm = prepareGemm(c, rowMajor(false, false, N, H, H, GH, H, H));
    g.drGates = prepareGemm(c, rowMajor(true, false, 2 * H, H, N, GH, H, H, 1));
    g.drHidden = prepareGemm(c, rowMajor(true, false, H, H, N, GH, H, H, 1));
    g.dprevGates =
        prepareGemm(c, rowMajor(false, false, N, H, 2 * H, GH, H, H, 1));
  } else {
    g.dr = prepareGemm(c, rowMajor(true, false, GH, H, N, GH, H, H, 1));
    g.dprev = prepareGemm(c, rowMajor(false, false, N, H, GH, GH, H, H, 1));
  }
  int64_t rows = rc.seq * N;
  g.dxFirst = prepareGemm(
      c, rowMajor(false, false, rows, rc.input, GH, GH, rc.input, rc.input));
  g.dxNext = prepareGemm(
      c, rowMajor(false, false, rows, rc.input, GH, GH, rc.input, rc.input, 1));
  g.dw = prepareGemm(
      c, rowMajor(true, false, GH, rc.input, rows, GH, rc.input, rc.input));
  return g;
}

/// The gradient's saved steps and backward buffers of one direction, after
/// its forward scratch (dq before dh: the GEMMs reading dq's h part read
/// up to 2 * hidden floats past dq's last row).
struct GradScratch {
  RecurrentBody saved{}; // h, c, act, qh
  float *dproj, *dq, *dh, *dc, *dprev, *dm, *m;
  static int64_t floats(const RecurrentShape &rc) {
    int64_t N = rc.batch, H = rc.hidden, GH = rc.gh(), seq = rc.seq;
    return 2 * (seq + 1) * N * H + seq * N * GH + seq * N * H + seq * N * GH +
           N * (GH + 5 * H);
  }
  GradScratch(const RecurrentShape &rc, float *at) {
    int64_t N = rc.batch, H = rc.hidden, GH = rc.gh(), seq = rc.seq;
    saved.h = at;
    saved.c = saved.h + (seq + 1) * N * H;
    saved.act = saved.c + (seq + 1) * N * H;
    saved.qh = saved.act + seq * N * GH;
    dproj = saved.qh + seq * N * H;
    dq = dproj + seq * N * GH;
    dh = dq + N * GH;
    dc = dh + N * H;
    dprev = dc + N * H;
    dm = dprev + N * H;
    m = dm + N * H;
  }
};

/// lstm_grad, gru_grad, rnn_grad: the forward's inputs, then dy, dy_h
/// (and dy_c) -> dx, dw, dr, db, d initial_h (and d initial_c); per
/// direction the forward again, saving its steps, then back through time.
KernelFn recurrentGradKernel(Context &c, RecurrentCell cell) {
  KernelArgs &args = c.args;
  RecurrentShape rc = recurrentShape(args, cell);
  if (rc.seq == 0 || rc.batch == 0 || rc.input == 0)
    return nullptr; // empty GEMMs: the CPU's kernel only
  RecurrentGemms forward = forwardGemms(c, rc);
  RecurrentGradGemms back = gradGemms(c, rc);
  bool lstm = cell == RecurrentCell::Lstm;
  size_t next = 0;
  RecurrentInputs in = recurrentInputs(args, cell, next);
  const std::vector<Tensor> ins = args.in, out = args.out;
  Workspace *workspace = args.workspace;
  int64_t forwardFloats = ForwardScratch::floats(rc);
  workspace->reserve((forwardFloats + GradScratch::floats(rc)) * sizeof(float));
  return onStream(c.device, [=](Device &dev, DeviceStream &s) {
    const int64_t H = rc.hidden, GH = rc.gh(), N = rc.batch, NH = N * H;
    ForwardScratch f(rc, workspace->as<float>());
    GradScratch g(rc, workspace->as<float>() + forwardFloats);
    float *dx = out[0].as<float>(), *dw = out[1].as<float>(),
          *dr = out[2].as<float>(), *db = out[3].as<float>();
    RecurrentBody body{};
    body.rc = rc;
    auto launch = [&](RecurrentStep step, int64_t n) {
      body.step = step;
      return dev.recurrent(s, body, n);
    };
    auto gemm = [&](const std::shared_ptr<PreparedGemm> &p, const float *a,
                    const float *b,
                    float *y) { return dev.gemm(s, *p, a, b, nullptr, y); };
    for (int64_t d = 0; d < rc.dirs; ++d) {
      if (std::string e = runForward(dev, s, rc, forward, in, d, f, &g.saved,
                                     nullptr, nullptr, nullptr);
          !e.empty())
        return e;
      const float *r = in.r + d * GH * H;
      float *drd = dr + d * GH * H;
      body.d = d;
      body.h = drd;
      if (std::string e = launch(RecurrentStep::Zero, GH * H); !e.empty())
        return e;
      body.h = db + d * 2 * GH;
      if (std::string e = launch(RecurrentStep::Zero, 2 * GH); !e.empty())
        return e;
      body.dh = g.dh;
      body.dc = g.dc;
      body.yh = ins[next + 1].as<float>();
      body.yc = lstm ? ins[next + 2].as<float>() : nullptr;
      if (std::string e = launch(RecurrentStep::GradStart, NH); !e.empty())
        return e;
      body.y = ins[next].as<float>();
      body.proj = g.dproj;
      body.q = g.dq;
      body.dprev = g.dprev;
      body.dm = g.dm;
      body.m = g.m;
      body.wb = db + d * 2 * GH;
      body.rb = body.wb + GH;
      for (int64_t step = rc.seq - 1; step >= 0; --step) {
        body.t = rc.timeOf(step, d);
        body.h = g.saved.h + step * NH;
        body.c = g.saved.c + step * NH;
        body.hOut = body.h + NH;
        body.cOut = body.c + NH;
        body.act = g.saved.act + step * N * GH;
        body.qh = g.saved.qh + step * NH;
        if (std::string e = launch(RecurrentStep::GradGates, NH); !e.empty())
          return e;
        std::string e;
        if (rc.resetFirst()) {
          e = gemm(back.dm, g.dq + 2 * H, r + 2 * H * H, g.dm);
          if (e.empty())
            e = launch(RecurrentStep::GradReset, NH);
          if (e.empty())
            e = gemm(back.drGates, g.dq, body.h, drd);
          if (e.empty())
            e = gemm(back.drHidden, g.dq + 2 * H, g.m, drd + 2 * H * H);
          if (e.empty())
            e = gemm(back.dprevGates, g.dq, r, body.dprev);
        } else {
          e = gemm(back.dr, g.dq, body.h, drd);
          if (e.empty())
            e = gemm(back.dprev, g.dq, r, body.dprev);
        }
        if (e.empty())
          e = launch(RecurrentStep::GradBias, GH);
        if (!e.empty())
          return e;
        std::swap(body.dh, body.dprev);
      }
      if (std::string e = gemm(d == 0 ? back.dxFirst : back.dxNext, g.dproj,
                               in.w + d * GH * rc.input, dx);
          !e.empty())
        return e;
      if (std::string e = gemm(back.dw, g.dproj, in.x, dw + d * GH * rc.input);
          !e.empty())
        return e;
      body.h0 = out[4].as<float>();
      body.c0 = lstm ? out[5].as<float>() : nullptr;
      if (std::string e = launch(RecurrentStep::GradFinish, NH); !e.empty())
        return e;
    }
    return std::string();
  });
}

/// lstm, gru, rnn and their gradients, checked as the CPU checks them.
KernelFn recurrentKernel(const std::string &op, Context &c) {
  checkLikeTheCpu(op, c.args);
  if (!allF32(c.args))
    return nullptr;
  RecurrentCell cell = op.rfind("lstm", 0) == 0  ? RecurrentCell::Lstm
                       : op.rfind("gru", 0) == 0 ? RecurrentCell::Gru
                                                 : RecurrentCell::Rnn;
  bool grad = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
  return grad ? recurrentGradKernel(c, cell) : recurrentForwardKernel(c, cell);
}

//===----------------------------------------------------------------------===//
// The kernel table
//===----------------------------------------------------------------------===//

/// The project's own kernel for `op`, or an empty function.
KernelFn own(const std::string &op, Context &c) {
  if (op == "reduce_sum" || op == "reduce_mean" || op == "reduce_max" ||
      op == "reduce_min" || op == "reduce_sum_square" ||
      op == "reduce_log_sum" || op == "reduce_log_sum_exp" ||
      op == "reduce_prod" ||
      op == "global_average_pool")
    return reduceKernel(op, c);
  if (op == "equal" || op == "less" || op == "greater" ||
      op == "greater_or_equal" || op == "less_or_equal" || op == "and" ||
      op == "or" || op == "xor")
    return logicKernel(op, c);
  if (op == "not")
    return notKernel(c);
  if (op == "dropout")
    return dropoutKernel(c);
  if (op == "random_uniform" || op == "random_normal" || op == "bernoulli")
    return drawKernel(op, c);
  if (op == "where")
    return whereKernel(c);
  if (op == "gather_grad")
    return gatherGradKernel(c);
  if (op == "concat" || op == "split")
    return piecesKernel(op, c);
  if (op == "copy" || op == "all_gather" || op == "reduce_scatter" ||
      op == "all_reduce")
    return copyKernel(op, c);
  if (op == "pack")
    return packKernel(c);
  if (op == "max_pool" || op == "average_pool" || op == "pool_grad")
    return poolKernel(op, c);
  if (op == "global_max_pool" || op == "hardmax" || op == "arg_max" ||
      op == "arg_min")
    return maxKernel(op, c);
  if (op == "resize")
    return resizeKernel(c);
  if (op == "grid_sample" || op == "grid_sample_grad")
    return gridSampleKernel(op, c);
  if (op == "batch_norm")
    return batchNormKernel(c);
  if (op == "batch_norm_train" || op == "batch_norm_grad")
    return batchNormTrainKernel(op, c);
  if (op == "adamw" || op == "sgd")
    return optimizerKernel(op, c);
  if (op == "activation_grad" || op == "layer_norm_grad" ||
      op == "rms_norm_grad")
    return gradKernel(op, c);
  if (op == "attention" || op == "attention_grad")
    return attentionKernel(op, c);
  if (op == "cast")
    return castKernel(c);
  if (cpu::isStridedRead(op))
    return stridedKernel(op, c);
  if (op == "softmax_cross_entropy" || op == "softmax_cross_entropy_grad")
    return crossEntropyKernel(op, c);
  if (op == "gather")
    return gatherKernel(c);
  if (op == "nll_loss" || op == "nll_loss_grad")
    return nllKernel(op, c);
  if (op == "gather_elements")
    return gatherElementsKernel(c);
  if (op == "scatter_elements" || op == "scatter_nd")
    return scatterKernel(op, c);
  if (op == "trilu")
    return triluKernel(c);
  if (op == "pad")
    return padKernel(c);
  if (op == "cumsum")
    return cumsumKernel(c);
  if (op == "lstm" || op == "gru" || op == "rnn" || op == "lstm_grad" ||
      op == "gru_grad" || op == "rnn_grad")
    return recurrentKernel(op, c);
  if (op == "conv")
    return convKernel(c);
  if (op == "conv_grad_input")
    return convGradInputKernel(c);
  if (op == "conv_grad_weight")
    return convGradWeightKernel(c);
  if (op == "matmul")
    return matmulKernel(c);
  if (op == "gemm")
    return gemmKernel(c);
  if (op == "linear")
    return linearKernel(c);
  if (op == "layer_norm" || op == "rms_norm")
    return normKernel(op, c);
  if (op == "softmax" || op == "log_softmax")
    return softmaxKernel(op, c);
  if (KernelFn f = unaryOp(op, c))
    return f;
  return binaryOp(op, c);
}

bool hasHalf(const KernelArgs &args) {
  for (const auto *list : {&args.in, &args.out})
    for (const Tensor &t : *list)
      if (isHalf(t.dtype))
        return true;
  return false;
}

/// An own fp32 kernel on bf16/f16 tensors, as the CPU backend's widened()
/// runs its kernels: each half input cast into fp32 scratch, the fp32
/// kernel, each half output cast back (the same roundings, so the same
/// results as the CPU). The scratch lies in the session's workspace after
/// the fp32 kernel's own, so the two never overlap. Prepared once on
/// placeholder tensors (the checks run then), the kernel is prepared again
/// on the scratch once the workspace's address is known, keeping its error
/// slots. nullptr when there is no fp32 kernel either.
KernelFn widened(const std::string &op, Context &c) {
  struct Wide {
    KernelArgs args;
    Workspace own;
    std::vector<uint64_t> at; // each tensor's scratch offset, or ~0
    uint64_t ownBytes = 0;
    void *base = nullptr;
    size_t firstFault = 0;
    KernelFn kernel;
  };
  auto wide = std::make_shared<Wide>(Wide{c.args, {}, {}, 0, nullptr, 0, {}});
  wide->args.workspace = &wide->own;
  uint64_t scratch = 0;
  for (auto *list : {&wide->args.in, &wide->args.out})
    for (Tensor &t : *list) {
      if (!isHalf(t.dtype)) {
        wide->at.push_back(~uint64_t(0));
        continue;
      }
      t.dtype = FSDPRT_F32;
      t.data = nullptr;
      wide->at.push_back(scratch);
      scratch += (t.numel * sizeof(float) + 255) / 256 * 256;
    }
  wide->firstFault = c.backend.faultCount();
  Context inner{c.device, c.backend, wide->args};
  try {
    if (!own(op, inner))
      return nullptr;
  } catch (const KernelError &) {
    return nullptr; // the CPU's check names what is wrong
  }
  wide->ownBytes = (wide->own.bytes() + 255) / 256 * 256;
  Workspace *session = c.args.workspace;
  session->reserve(wide->ownBytes + scratch);
  std::vector<Tensor> in = c.args.in, out = c.args.out;
  Device *device = &c.device;
  CudaBackend *backend = &c.backend;
  return [=]() -> std::string {
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
      backend->replayFaults(wide->firstFault);
      Context bound{*device, *backend, wide->args};
      try {
        wide->kernel = own(op, bound);
      } catch (const KernelError &) {
        wide->kernel = nullptr;
      }
      backend->replayDone();
      if (!wide->kernel) // it was prepared with the same shapes: never
        return "cannot bind the widened " + op + " kernel to its workspace";
      wide->base = base;
    }
    DeviceStream &s = *current;
    for (size_t i = 0; i < in.size(); ++i)
      if (isHalf(in[i].dtype))
        if (std::string e = device->cast(s, false, in[i].dtype, in[i].data,
                                         wide->args.in[i].data, in[i].numel);
            !e.empty())
          return e;
    if (std::string e = wide->kernel(); !e.empty())
      return e;
    for (size_t i = 0; i < out.size(); ++i)
      if (isHalf(out[i].dtype))
        if (std::string e =
                device->cast(s, true, out[i].dtype, wide->args.out[i].data,
                             out[i].data, out[i].numel);
            !e.empty())
          return e;
    return std::string();
  };
}

//===----------------------------------------------------------------------===//
// Attention on cuDNN
//===----------------------------------------------------------------------===//

/// The element type cuDNN's graphs take for `dtype`, if they take it.
std::optional<cudnn::DType> cudnnDType(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32: return cudnn::DType::F32;
  case FSDPRT_BF16: return cudnn::DType::BF16;
  case FSDPRT_F16: return cudnn::DType::F16;
  default: return std::nullopt;
  }
}

/// Under FSDPRT_PROFILE (docs/runtime.md), says when a kernel is prepared
/// whether cuDNN's graph or the backend's own kernel runs it, and why.
void sayWhichRuns(const std::string &op, const KernelArgs &args,
                  const PreparedGraph *graph, const std::string &why) {
  // Read at each prepare (once per kernel, not per launch), so that a test
  // may turn it on for one plan.
  if (std::getenv("FSDPRT_PROFILE"))
    std::fprintf(stderr, "fsdprt: %s: %s\n",
                 (args.where.empty() ? op : args.where).c_str(),
                 graph ? ("cuDNN, " + graph->name()).c_str()
                       : ("the backend's own kernel: " + why).c_str());
}

/// attention and attention_grad on cuDNN's fused flash attention where the
/// device has cuDNN and cuDNN has a plan for the shape: bf16 or f16, no
/// mask or the causal one, equal head dims of q and v. The plan stores keys
/// transposed (k_t [..., D, S]) and cuDNN reads K [..., S, D]: k_t is
/// transposed into the workspace first, and the backward's dK back into
/// dk_t after, O(S D) beside attention's O(S^2 D). Layout "bshd" binds
/// every tensor as it is, its strides in the graph's descriptors. nullptr
/// otherwise (the backend's own kernel runs it).
KernelFn cudnnAttention(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  bool backward = op == "attention_grad";
  std::string kind = args.attrs.getString("mask_kind", "none");
  size_t inputs = backward ? 6 : 3;
  if ((kind != "none" && kind != "causal") || args.in.size() != inputs ||
      args.out.size() != (backward ? 3u : 2u))
    return nullptr;
  const Tensor &q = args.in[0], &kt = args.in[1], &v = args.in[2];
  fsdprt_dtype_t dtype = q.dtype;
  if (!isHalf(dtype))
    return nullptr;
  size_t rank = q.shape.size();
  if (rank < 2 || kt.shape.size() != rank || v.shape.size() != rank)
    return nullptr;
  bool headsInRows = args.attrs.getString("layout", "bhsd") == "bshd";
  for (size_t i = 0; i < args.in.size(); ++i) {
    // lse (the forward's second output, the backward's fifth input) is f32.
    bool stats = backward && i == 4;
    if (args.in[i].dtype != (stats ? FSDPRT_F32 : dtype))
      return nullptr;
  }
  for (size_t i = 0; i < args.out.size(); ++i)
    if (args.out[i].dtype != (!backward && i == 1 ? FSDPRT_F32 : dtype))
      return nullptr;
  cudnn::SdpaShape shape;
  shape.headsInRows = headsInRows;
  int64_t l, d, sk;
  if (headsInRows) { // q [B, L, H, D], k and v [B, S, H, D]
    if (rank != 4)
      return nullptr;
    l = q.shape[1], d = q.shape[3], sk = kt.shape[1];
    shape.batch = q.shape[0], shape.heads = q.shape[2];
    if (kt.shape != std::vector<int64_t>{shape.batch, sk, shape.heads, d} ||
        v.shape != kt.shape)
      return nullptr;
  } else {
    l = q.shape[rank - 2], d = q.shape[rank - 1], sk = kt.shape[rank - 1];
    if (kt.shape[rank - 2] != d || v.shape[rank - 2] != sk ||
        v.shape[rank - 1] != d)
      return nullptr;
    shape.heads = rank >= 3 ? q.shape[rank - 3] : 1;
    shape.batch = 1;
    for (size_t i = 0; i + 3 < rank; ++i)
      shape.batch *= q.shape[i];
  }
  if (shape.batch * shape.heads * l * d != q.numel)
    return nullptr;
  shape.seqQ = l;
  shape.seqKv = sk;
  shape.headDim = d;
  shape.dtype =
      dtype == FSDPRT_BF16 ? cudnn::DType::BF16 : cudnn::DType::F16;
  shape.causal = kind == "causal";
  shape.backward = backward;
  shape.scale = args.attrs.getFloat("scale", 1.0);
  std::string why;
  std::shared_ptr<PreparedGraph> graph = c.device.prepareAttention(shape, why);
  sayWhichRuns(op, args, graph.get(), why);
  if (!graph)
    return nullptr;

  // The workspace: K (and dK) unless the plan stores them so, then cuDNN's.
  uint64_t keys =
      headsInRows ? 0 : (kt.numel * fsdprt_dtype_size(dtype) + 255) / 256 * 256;
  uint64_t cudnnAt = backward ? 2 * keys : keys;
  args.workspace->reserve(cudnnAt + graph->workspaceBytes());
  Workspace *workspace = args.workspace;
  int64_t batches = shape.batch * shape.heads;
  // [B, D, S] -> [B, S, D], and back.
  Broadcast toK, toKt;
  toK.rank = toKt.rank = 3;
  int64_t kShape[3] = {batches, sk, d}, ktShape[3] = {batches, d, sk};
  int64_t kRead[3] = {d * sk, 1, sk}, ktRead[3] = {sk * d, 1, d};
  for (int i = 0; i < 3; ++i) {
    toK.shape[i] = kShape[i];
    toK.strides[0][i] = kRead[i];
    toKt.shape[i] = ktShape[i];
    toKt.strides[0][i] = ktRead[i];
  }
  size_t size = fsdprt_dtype_size(dtype);
  std::vector<Tensor> in = args.in, out = args.out;
  return onStream(c.device, [=](Device &dev, DeviceStream &s) -> std::string {
    char *base = workspace->as<char>();
    void *k = base, *dk = base + keys, *rest = base + cudnnAt;
    if (headsInRows)
      k = in[1].data, dk = out.size() == 3 ? out[1].data : nullptr;
    else if (std::string e =
                 dev.stridedRead(s, size, toK, in[1].data, k, 0, kt.numel);
             !e.empty())
      return e;
    if (!backward)
      return dev.runGraph(s, *graph,
                          {in[0].data, k, in[2].data, out[0].data, out[1].data},
                          rest);
    if (std::string e =
            dev.runGraph(s, *graph,
                         {in[0].data, k, in[2].data, in[3].data, in[5].data,
                          in[4].data, out[0].data, dk, out[2].data},
                         rest);
        !e.empty() || headsInRows)
      return e;
    return dev.stridedRead(s, size, toKt, dk, out[1].data, 0, kt.numel);
  });
}

/// conv, conv_grad_input and conv_grad_weight on cuDNN where the device has
/// a plan: 2-D, one group, square and symmetric strides, padding and
/// dilation (cudnn::ConvShape), and a bias only in fp32 (added after, by
/// the broadcast kernel). nullptr otherwise (the own kernels run it).
KernelFn cudnnConv(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  cudnn::ConvShape shape;
  shape.pass = op == "conv"                ? cudnn::ConvPass::Fprop
               : op == "conv_grad_input" ? cudnn::ConvPass::Dgrad
                                         : cudnn::ConvPass::Wgrad;
  bool bias = args.in.size() == 3;
  if (args.out.size() != 1 || args.in.size() < 2 ||
      (bias && shape.pass != cudnn::ConvPass::Fprop))
    return nullptr;
  checkLikeTheCpu(op, args); // a mismatch is named as on the CPU
  // x, w and y as the graph binds them: dgrad's x is its output and y its
  // first input; wgrad's w is its output.
  const Tensor *x = &args.in[0], *w = &args.in[1], *y = &args.out[0];
  if (shape.pass == cudnn::ConvPass::Dgrad)
    x = &args.out[0], y = &args.in[0];
  else if (shape.pass == cudnn::ConvPass::Wgrad)
    w = &args.out[0], y = &args.in[1];
  fsdprt_dtype_t dtype = x->dtype;
  for (const Tensor *t : {x, w, y})
    if (t->dtype != dtype || t->shape.size() != 4)
      return nullptr;
  if (bias && (dtype != FSDPRT_F32 || args.in[2].dtype != FSDPRT_F32))
    return nullptr;
  if (args.attrs.getInt("group", 1) != 1)
    return nullptr;
  auto square = [&](const char *name, size_t n, int64_t fallback,
                    int64_t &out) {
    std::vector<int64_t> v = args.attrs.getInts(name, {});
    if (v.empty())
      v.assign(n, fallback);
    out = v[0];
    return v.size() == n && std::all_of(v.begin(), v.end(),
                                        [&](int64_t e) { return e == v[0]; });
  };
  if (!square("strides", 2, 1, shape.stride) ||
      !square("pads", 4, 0, shape.pad) ||
      !square("dilations", 2, 1, shape.dilation))
    return nullptr;
  shape.n = x->shape[0], shape.c = x->shape[1];
  shape.h = x->shape[2], shape.w = x->shape[3];
  shape.k = w->shape[0], shape.r = w->shape[2], shape.s = w->shape[3];
  std::optional<cudnn::DType> io = cudnnDType(dtype);
  if (!io)
    return nullptr;
  shape.dtype = *io;
  std::string why;
  std::shared_ptr<PreparedGraph> graph = c.device.prepareConv(shape, why);
  sayWhichRuns(op, args, graph.get(), why);
  if (!graph)
    return nullptr;
  args.workspace->reserve(graph->workspaceBytes());
  Workspace *workspace = args.workspace;
  void *px = x->data, *pw = w->data, *py = y->data;
  Tensor b = bias ? args.in[2] : Tensor();
  Broadcast plan;
  if (bias)
    plan = planBroadcast(y->shape, {y->shape, {1, shape.k, 1, 1}});
  int64_t n = y->numel;
  return onStream(c.device, [=](Device &dev, DeviceStream &s) -> std::string {
    std::string error =
        dev.runGraph(s, *graph, {px, pw, py}, workspace->data());
    if (error.empty() && bias)
      error = dev.binary(s, Binary::Add, plan, static_cast<float *>(py),
                         b.as<float>(), static_cast<float *>(py), n);
    return error;
  });
}

/// batch_norm (given statistics, x [N, C, ...]) on cuDNN's inference-phase
/// batch norm where the device has a plan: fp32 as the own kernel, x seen
/// as [N, C, inner, 1] (its contiguous NCHW layout). cuDNN reads the
/// inverse standard deviation, which the own inverse-std kernel writes into
/// the workspace first (C floats), before cuDNN's own workspace. nullptr
/// otherwise (the own kernel runs it).
KernelFn cudnnBatchNorm(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  if (args.in.size() != 5 || args.out.size() != 1)
    return nullptr;
  checkLikeTheCpu(op, args); // a mismatch is named as on the CPU
  if (!allF32(args))
    return nullptr;
  const Tensor &x = args.in[0], &y = args.out[0];
  if (x.numel == 0)
    return nullptr;
  cudnn::NormShape shape;
  shape.kind = cudnn::NormKind::Batch;
  shape.inference = true;
  shape.dtype = cudnn::DType::F32;
  shape.n = x.shape[0], shape.c = x.shape[1];
  shape.h = cpu::product(x.shape, 2, x.shape.size()), shape.w = 1;
  shape.epsilon = static_cast<float>(args.attrs.getFloat("epsilon", 1e-5));
  std::string why;
  std::shared_ptr<PreparedGraph> graph = c.device.prepareNorm(shape, why);
  sayWhichRuns(op, args, graph.get(), why);
  if (!graph)
    return nullptr;
  uint64_t stats = (shape.c * sizeof(float) + 255) / 256 * 256;
  args.workspace->reserve(stats + graph->workspaceBytes());
  Workspace *workspace = args.workspace;
  const Tensor scale = args.in[1], bias = args.in[2], mean = args.in[3],
               var = args.in[4];
  float eps = shape.epsilon;
  int64_t channels = shape.c;
  return onStream(c.device, [=](Device &dev, DeviceStream &s) -> std::string {
    char *base = workspace->as<char>();
    float *invStd = reinterpret_cast<float *>(base);
    if (std::string e =
            dev.inverseStd(s, var.as<float>(), invStd, channels, eps);
        !e.empty())
      return e;
    return dev.runGraph(
        s, *graph,
        {x.data, scale.data, bias.data, mean.data, invStd, y.data},
        base + stats);
  });
}

/// batch_norm_train and batch_norm_grad on cuDNN's training-phase batch
/// norm forward and its backward where the device has a plan: x (and y,
/// dy, dx) fp32, bf16 or f16 as [N, C, inner, 1], every per-channel tensor
/// fp32 (mixed precision's statistics). cuDNN's running-statistics factor
/// is 1 - the plan's (ONNX) momentum. nullptr otherwise (the own kernels
/// run them).
KernelFn cudnnBatchNormTrain(const std::string &op, Context &c) {
  const KernelArgs &args = c.args;
  bool backward = op == "batch_norm_grad";
  if (args.in.size() != 5 || args.out.size() != (backward ? 3u : 5u))
    return nullptr;
  checkLikeTheCpu(op, args); // a mismatch is named as on the CPU
  const Tensor &x = args.in[backward ? 1 : 0];
  fsdprt_dtype_t dtype = x.dtype;
  std::vector<const Tensor *> wide = {&x, &args.out[0]}, perChannel;
  if (backward)
    wide.push_back(&args.in[0]);
  for (size_t i = backward ? 2 : 1; i < 5; ++i)
    perChannel.push_back(&args.in[i]);
  for (size_t i = 1; i < args.out.size(); ++i)
    perChannel.push_back(&args.out[i]);
  for (const Tensor *t : wide)
    if (t->dtype != dtype)
      return nullptr;
  for (const Tensor *t : perChannel)
    if (t->dtype != FSDPRT_F32)
      return nullptr;
  cudnn::NormShape shape;
  std::optional<cudnn::DType> io = cudnnDType(dtype);
  if (!io)
    return nullptr;
  shape.dtype = *io;
  if (x.numel == 0)
    return nullptr;
  shape.kind = cudnn::NormKind::Batch;
  shape.backward = backward;
  shape.n = x.shape[0], shape.c = x.shape[1];
  shape.h = cpu::product(x.shape, 2, x.shape.size()), shape.w = 1;
  shape.epsilon = static_cast<float>(args.attrs.getFloat("epsilon", 1e-5));
  shape.momentum =
      static_cast<float>(1.0 - args.attrs.getFloat("momentum", 0.9));
  std::string why;
  std::shared_ptr<PreparedGraph> graph = c.device.prepareNorm(shape, why);
  sayWhichRuns(op, args, graph.get(), why);
  if (!graph)
    return nullptr;
  args.workspace->reserve(graph->workspaceBytes());
  Workspace *workspace = args.workspace;
  const std::vector<Tensor> &in = args.in, &out = args.out;
  // The graph's order (cudnn_graphs.h): forward x, scale, saved mean,
  // saved inv std, y, bias, running mean and var, their new values;
  // backward x, scale, mean, inv std, dy, dx, dscale, dbias.
  std::vector<void *> tensors =
      backward ? std::vector<void *>{in[1].data,  in[2].data,  in[3].data,
                                     in[4].data,  in[0].data,  out[0].data,
                                     out[1].data, out[2].data}
               : std::vector<void *>{in[0].data,  in[1].data,  out[1].data,
                                     out[2].data, out[0].data, in[2].data,
                                     in[3].data,  in[4].data,  out[3].data,
                                     out[4].data};
  return onStream(c.device, [=](Device &dev, DeviceStream &s) {
    return dev.runGraph(s, *graph, tensors, workspace->data());
  });
}

KernelFn CudaBackend::prepare(const std::string &op, KernelArgs &args) {
  Context context{*device, *this, args};
  KernelFn body;
  if (op == "attention" || op == "attention_grad")
    body = cudnnAttention(op, context);
  else if (op == "conv" || op == "conv_grad_input" ||
           op == "conv_grad_weight")
    body = cudnnConv(op, context);
  else if (op == "batch_norm")
    body = cudnnBatchNorm(op, context);
  else if (op == "batch_norm_train" || op == "batch_norm_grad")
    body = cudnnBatchNormTrain(op, context);
  if (!body)
    body = own(op, context);
  if (!body && hasHalf(args))
    body = widened(op, context);
  if (!body && cpu && device->hostMemory())
    body = cpu->prepare(op, args); // the fake device: the CPU's kernel
  if (!body) {
    checkLikeTheCpu(op, args); // a mismatch is named as on the CPU
    throw KernelError("has no CUDA kernel yet for these dtypes and shapes "
                      "(docs/gpu.md lists the kernels the GPU has); run the "
                      "plan with device 'cpu'");
  }
  Work work{args.where.empty() ? op : args.where, {}, {}};
  for (const Tensor &t : args.in)
    work.reads.push_back(rangeOf(t));
  for (const Tensor &t : args.out)
    work.writes.push_back(rangeOf(t));
  Device *dev = device.get();
  return [dev, body, work]() -> std::string {
    if (std::string refused = dev->admit(*current, work); !refused.empty())
      return refused;
    return body();
  };
}

} // namespace

std::unique_ptr<Backend> createCudaBackend(std::unique_ptr<Device> device) {
  return std::make_unique<CudaBackend>(std::move(device));
}

Device *deviceOf(Backend &backend) {
  auto *cuda = dynamic_cast<CudaBackend *>(&backend);
  return cuda ? &cuda->dev() : nullptr;
}

DeviceStream *deviceStreamOf(Stream &stream) {
  auto *cuda = dynamic_cast<CudaStream *>(&stream);
  return cuda ? &cuda->device() : nullptr;
}

} // namespace fsdprt::cuda
