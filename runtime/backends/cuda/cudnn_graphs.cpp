//===- cudnn_graphs.cpp - cuDNN graphs the plans need, and their support --===//
//
// The only translation unit with cuDNN code (cuDNN's backend C API: tensor,
// operation, operation-graph, heuristics and engine-config descriptors).
// Attention is the fused flash-attention pattern cuDNN's runtime-compiled
// engines recognise: matmul, scale, causal mask (index generation, compare,
// select), softmax with its statistics, matmul; backward the same
// recomputation with the gradient matmuls.
//
//===----------------------------------------------------------------------===//

#include "cudnn_graphs.h"

#include <cudnn.h>
#include <dlfcn.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace fsdprt::cudnn {
namespace {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "fp32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  }
  return "?";
}

cudnnDataType_t toCudnn(DType t) {
  switch (t) {
  case DType::F32:
    return CUDNN_DATA_FLOAT;
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  }
  return CUDNN_DATA_FLOAT;
}

/// cuDNN's message for the last failed call, or the status's name.
std::string cudnnReason(cudnnStatus_t status) {
  char message[2048] = {0};
  cudnnGetLastErrorString(message, sizeof(message));
  std::string reason = cudnnGetErrorString(status);
  if (message[0])
    reason += ": " + std::string(message);
  return reason;
}

/// cuDNN's message for the last failure in this thread (reading it clears
/// it), as ": reason; reason", or empty. After heuristics the message holds
/// every engine's warnings: keep the distinct specific reasons ("only
/// Blackwell is supported", "graph was not given to the engine"), not the
/// call-site ones ("ptr->isSupported()").
std::string lastMessage() {
  std::vector<char> message(1 << 16, 0);
  cudnnGetLastErrorString(message.data(), message.size());
  std::istringstream lines(message.data());
  std::vector<std::string> reasons;
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find("Reason: ");
    if (at == std::string::npos)
      continue;
    std::string reason = line.substr(at + 8);
    bool generic =
        reason.find("==") != std::string::npos ||
        (reason.size() > 2 && reason.substr(reason.size() - 2) == "()");
    bool seen = false;
    for (const std::string &r : reasons)
      seen |= r == reason;
    if (!generic && !seen)
      reasons.push_back(reason);
  }
  std::string out;
  for (const std::string &r : reasons)
    out += (out.empty() ? ": " : "; ") + r;
  if (out.size() > 600)
    out = out.substr(0, 600) + "...";
  return out;
}

/// One backend descriptor, destroyed with its owner.
class Desc {
public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    status_ = cudnnBackendCreateDescriptor(type, &d_);
  }
  ~Desc() {
    if (d_)
      cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc &&o) noexcept : d_(o.d_), status_(o.status_) { o.d_ = nullptr; }
  Desc &operator=(Desc &&o) noexcept {
    std::swap(d_, o.d_);
    std::swap(status_, o.status_);
    return *this;
  }
  Desc(const Desc &) = delete;
  Desc &operator=(const Desc &) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnStatus_t status() const { return status_; }

private:
  cudnnBackendDescriptor_t d_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
};

/// A tensor a launch binds: the caller's memory, a by-value scalar or an
/// internal intermediate in the workspace.
struct BoundTensor {
  std::string name;
  int64_t uid = 0;
  bool byValue = false;
  float value = 0;
  int64_t bytes = 0;
  bool internal = false;
};

/// A graph under construction. Every descriptor it makes is kept alive until
/// the check is done; the first failing call is remembered (later calls are
/// skipped) and becomes the "build" step's reason.
class Builder {
public:
  explicit Builder(std::string graph) : graph_(std::move(graph)) {}

  bool failed() const { return !error_.empty(); }
  const std::string &error() const { return error_; }
  const std::string &graph() const { return graph_; }
  std::vector<cudnnBackendDescriptor_t> &ops() { return ops_; }

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type,
                                const char *what) {
    if (failed())
      return nullptr;
    descs_.push_back(std::make_unique<Desc>(type));
    if (descs_.back()->status() != CUDNN_STATUS_SUCCESS) {
      fail(what, "create", descs_.back()->status());
      return nullptr;
    }
    return descs_.back()->get();
  }

  void set(cudnnBackendDescriptor_t d, const char *what,
           cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void *value) {
    if (failed())
      return;
    cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, value);
    if (s != CUDNN_STATUS_SUCCESS)
      fail(what, "set attribute " + std::to_string(name), s);
  }
  void setDesc(cudnnBackendDescriptor_t d, const char *what,
               cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v) {
    set(d, what, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
  }
  void finalize(cudnnBackendDescriptor_t d, const char *what) {
    if (failed())
      return;
    cudnnStatus_t s = cudnnBackendFinalize(d);
    if (s != CUDNN_STATUS_SUCCESS)
      fail(what, "finalize", s);
  }

  /// A tensor; `virt` ones live only inside the fused graph, `byValue` ones
  /// are scalars passed with the launch. Every other one is bound to memory
  /// at a launch, and recorded (tensors()) in the order it is made.
  cudnnBackendDescriptor_t tensor(const char *what, std::vector<int64_t> dims,
                                  std::vector<int64_t> strides,
                                  cudnnDataType_t type, bool virt = false,
                                  bool byValue = false, float value = 0) {
    cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t uid = ++uid_, alignment = 16;
    if (!virt) {
      int64_t elements = 1;
      for (int64_t d : dims)
        elements *= d;
      int64_t size = type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_INT32 ? 4
                     : type == CUDNN_DATA_BOOLEAN                        ? 1
                                                                         : 2;
      tensors_.push_back({what, uid, byValue, value, elements * size, false});
    }
    bool v = virt, bv = byValue;
    set(t, what, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, what, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, what, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
        &alignment);
    set(t, what, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64,
        (int64_t)dims.size(), dims.data());
    set(t, what, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64,
        (int64_t)strides.size(), strides.data());
    set(t, what, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
    if (byValue)
      set(t, what, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    finalize(t, what);
    return t;
  }
  /// A contiguous tensor.
  cudnnBackendDescriptor_t packed(const char *what, std::vector<int64_t> dims,
                                  cudnnDataType_t type, bool virt = false) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i > 0; --i)
      strides[i - 1] = strides[i] * dims[i];
    return tensor(what, dims, strides, type, virt);
  }
  /// A float passed by value with every launch.
  cudnnBackendDescriptor_t scalar(const char *what, float value = 0) {
    return tensor(what, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false,
                  true, value);
  }
  /// An fp32 intermediate the graph writes to memory of its own (cuDNN's
  /// attention keeps its softmax sum and dQ accumulator so): it lives in
  /// the launch's workspace, after cuDNN's.
  cudnnBackendDescriptor_t internal(const char *what,
                                    std::vector<int64_t> dims) {
    cudnnBackendDescriptor_t t = packed(what, std::move(dims), CUDNN_DATA_FLOAT);
    if (!failed())
      tensors_.back().internal = true;
    return t;
  }
  const std::vector<BoundTensor> &tensors() const { return tensors_; }

  /// y = mode(x[, b[, t]]) computed in `prec`; `axis` for GEN_INDEX.
  void pointwise(const char *what, cudnnPointwiseMode_t mode,
                 cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                 cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    cudnnBackendDescriptor_t pw =
        make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    set(pw, what, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
        &mode);
    set(pw, what, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
        &prec);
    if (axis >= 0)
      set(pw, what, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, what);
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    setDesc(op, what, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    setDesc(op, what, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
      setDesc(op, what, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
      setDesc(op, what, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    setDesc(op, what, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    addOp(op, what);
  }

  /// c = a @ b over the last two dims, accumulated in fp32.
  void matmul(const char *what, cudnnBackendDescriptor_t a,
              cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(mm, what, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(mm, what);
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    setDesc(op, what, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    setDesc(op, what, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    setDesc(op, what, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    setDesc(op, what, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    addOp(op, what);
  }

  /// y = reduce(x) over the dims where y has size 1.
  void reduction(const char *what, cudnnReduceTensorOp_t mode,
                 cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(r, what, CUDNN_ATTR_REDUCTION_OPERATOR,
        CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    set(r, what, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
        &comp);
    finalize(r, what);
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    setDesc(op, what, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    setDesc(op, what, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    setDesc(op, what, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    addOp(op, what);
  }

  /// y = x viewed with y's dims and strides (a transpose, here).
  void reshape(const char *what, cudnnBackendDescriptor_t x,
               cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op =
        make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, what);
    setDesc(op, what, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    setDesc(op, what, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    addOp(op, what);
  }

  void addOp(cudnnBackendDescriptor_t op, const char *what) {
    finalize(op, what);
    if (!failed())
      ops_.push_back(op);
  }

  void fail(const std::string &what, const std::string &call, cudnnStatus_t s) {
    if (error_.empty())
      error_ = what + " (" + call + "): " + cudnnReason(s);
  }

private:
  std::string graph_;
  std::vector<std::unique_ptr<Desc>> descs_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::vector<BoundTensor> tensors_;
  std::string error_;
  int64_t uid_ = 0;
};

Support unsupported(const Builder &b, const std::string &step,
                    const std::string &reason) {
  Support s;
  s.step = step;
  s.reason = b.graph() + ": not supported at step '" + step + "': " + reason;
  return s;
}

/// Builds the operation graph into `graph` and keeps the engine configs
/// that fit `device` in `fitting`.
Support find(Builder &b, const DeviceDescription &device, Desc &graph,
             std::vector<Desc> &fitting) {
  if (b.failed())
    return unsupported(b, "build", b.error());
  lastMessage(); // Start the steps below with no stale message.
  graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  cudnnStatus_t s = graph.status();
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 (int64_t)b.ops().size(), b.ops().data());
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendFinalize(graph.get());
  if (s != CUDNN_STATUS_SUCCESS)
    return unsupported(b, "operation graph", cudnnReason(s));

  Support result;
  std::string heuristicsError, configError;
  cudnnBackendDescriptor_t dev = device.descriptor();
  for (cudnnBackendHeurMode_t mode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendDescriptor_t g = graph.get();
    s = heur.status();
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendSetAttribute(heur.get(),
                                   CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendSetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE,
                                   CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendSetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dev);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendFinalize(heur.get());
    int64_t count = 0;
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr);
    if (s != CUDNN_STATUS_SUCCESS) {
      if (heuristicsError.empty())
        heuristicsError = cudnnReason(s);
      continue;
    }
    std::vector<Desc> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    int64_t got = 0;
    s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                 raw.data());
    if (s != CUDNN_STATUS_SUCCESS) {
      if (heuristicsError.empty())
        heuristicsError = cudnnReason(s);
      continue;
    }
    // A config fits when cuDNN can say what it needs: its workspace, and
    // shared memory within the device's opt-in limit.
    for (int64_t i = 0; i < got; ++i) {
      int64_t workspace = 0, n = 0;
      int32_t shared = 0;
      s = cudnnBackendGetAttribute(raw[i], CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &workspace);
      if (s != CUDNN_STATUS_SUCCESS) {
        if (configError.empty())
          configError = "workspace size: " + cudnnReason(s);
        continue;
      }
      s = cudnnBackendGetAttribute(raw[i],
                                   CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED,
                                   CUDNN_TYPE_INT32, 1, &n, &shared);
      // Some engines do not report their shared memory: unknown, not a no.
      if (s == CUDNN_STATUS_SUCCESS && device.sharedMemoryPerBlockOptin() > 0 &&
          shared > device.sharedMemoryPerBlockOptin()) {
        if (configError.empty())
          configError = "an engine config needs " + std::to_string(shared) +
                        " bytes of shared memory, the device has " +
                        std::to_string(device.sharedMemoryPerBlockOptin());
        continue;
      }
      ++result.configs;
      fitting.push_back(std::move(configs[i]));
    }
  }
  if (result.configs > 0) {
    result.supported = true;
    return result;
  }
  if (!configError.empty())
    return unsupported(b, "engine configs", configError);
  if (!heuristicsError.empty())
    return unsupported(b, "heuristics", heuristicsError);
  std::string reason = "no engine config for this graph" + lastMessage();
  // Without libcuda.so.1 cuDNN skips its runtime-compiled engines (attention
  // among them) and says only that the others do not match.
  if (void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY))
    dlclose(libcuda);
  else
    reason += " (libcuda.so.1 is not loadable, so cuDNN did not consider its "
              "runtime-compiled engines)";
  return unsupported(b, "heuristics", reason);
}

/// The steps after the ops: is there an engine config for the graph?
Support finish(Builder &b, const DeviceDescription &device) {
  Desc graph;
  std::vector<Desc> fitting;
  return find(b, device, graph, fitting);
}
std::vector<int64_t> transposedStrides(int64_t h, int64_t rows, int64_t cols) {
  // [b, h, cols, rows] viewing a contiguous [b, h, rows, cols].
  return {h * rows * cols, rows * cols, 1, cols};
}

/// [b, h, d, skv] viewing K (or V) as the shape stores it: the last two of
/// its [b, h, skv, d] strides swapped.
std::vector<int64_t> keysTransposed(const SdpaShape &x) {
  std::vector<int64_t> s = x.strides(x.seqKv);
  std::swap(s[2], s[3]);
  return s;
}

/// scale * Q @ K^T, [b, h, sq, skv] in fp32 (attention forward and
/// backward alike).
auto scaledScores(Builder &g, cudnnBackendDescriptor_t q,
                  cudnnBackendDescriptor_t kt, cudnnBackendDescriptor_t scale,
                  const std::vector<int64_t> &dims) {
  auto s = g.packed("S", dims, CUDNN_DATA_FLOAT, true);
  g.matmul("Q@K^T", q, kt, s);
  auto scaled = g.packed("S*scale", dims, CUDNN_DATA_FLOAT, true);
  g.pointwise("S*scale", CUDNN_POINTWISE_MUL, s, scale, nullptr, scaled);
  return scaled;
}

/// `scores` with -inf above the diagonal (row < col): the causal mask.
auto causalMask(Builder &g, cudnnBackendDescriptor_t scores,
                const std::vector<int64_t> &dims) {
  auto negInf = g.scalar("-inf", -std::numeric_limits<float>::infinity());
  auto row = g.packed("row", dims, CUDNN_DATA_INT32, true);
  auto col = g.packed("col", dims, CUDNN_DATA_INT32, true);
  auto keep = g.packed("row>=col", dims, CUDNN_DATA_BOOLEAN, true);
  auto masked = g.packed("causal", dims, CUDNN_DATA_FLOAT, true);
  g.pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr,
              row, CUDNN_DATA_FLOAT, 2);
  g.pointwise("col index", CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr,
              col, CUDNN_DATA_FLOAT, 3);
  g.pointwise("row>=col", CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep,
              CUDNN_DATA_BOOLEAN);
  g.pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, scores, negInf,
              keep, masked);
  return masked;
}

void buildSdpaForward(Builder &g, const SdpaShape &x) {
  int64_t b = x.batch, h = x.heads, sq = x.seqQ, skv = x.seqKv, d = x.headDim;
  cudnnDataType_t io = toCudnn(x.dtype), f32 = CUDNN_DATA_FLOAT;
  auto q = g.tensor("Q", {b, h, sq, d}, x.strides(sq), io);
  auto kt = g.tensor("K^T", {b, h, d, skv}, keysTransposed(x), io);
  auto v = g.tensor("V", {b, h, skv, d}, x.strides(skv), io);
  auto o = g.tensor("O", {b, h, sq, d}, x.strides(sq), io);
  auto stats = g.packed("stats", {b, h, sq, 1}, f32);
  auto scale = g.scalar("scale", x.scale);

  auto scaled = scaledScores(g, q, kt, scale, {b, h, sq, skv});
  auto masked = x.causal ? causalMask(g, scaled, {b, h, sq, skv}) : scaled;
  auto max = g.packed("max", {b, h, sq, 1}, f32, true);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, masked, max);
  auto shifted = g.packed("S-max", {b, h, sq, skv}, f32, true);
  g.pointwise("S-max", CUDNN_POINTWISE_SUB, masked, max, nullptr, shifted);
  auto e = g.packed("exp", {b, h, sq, skv}, f32, true);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, shifted, nullptr, nullptr, e);
  auto sum = g.packed("sum", {b, h, sq, 1}, f32, true);
  g.reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  auto logSum = g.packed("log sum", {b, h, sq, 1}, f32, true);
  g.pointwise("log", CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, logSum);
  g.pointwise("stats", CUDNN_POINTWISE_ADD, max, logSum, nullptr, stats);
  auto p = g.packed("P", {b, h, sq, skv}, io, true);
  g.pointwise("P", CUDNN_POINTWISE_DIV, e, sum, nullptr, p);
  g.matmul("P@V", p, v, o);
}

void buildSdpaBackward(Builder &g, const SdpaShape &x) {
  int64_t b = x.batch, h = x.heads, sq = x.seqQ, skv = x.seqKv, d = x.headDim;
  cudnnDataType_t io = toCudnn(x.dtype), f32 = CUDNN_DATA_FLOAT;
  auto q = g.tensor("Q", {b, h, sq, d}, x.strides(sq), io);
  auto kt = g.tensor("K^T", {b, h, d, skv}, keysTransposed(x), io);
  auto vt = g.tensor("V^T", {b, h, d, skv}, keysTransposed(x), io);
  auto o = g.tensor("O", {b, h, sq, d}, x.strides(sq), io);
  auto dO = g.tensor("dO", {b, h, sq, d}, x.strides(sq), io);
  auto stats = g.packed("stats", {b, h, sq, 1}, f32);
  auto dQ = g.tensor("dQ", {b, h, sq, d}, x.strides(sq), io);
  auto dK = g.tensor("dK", {b, h, skv, d}, x.strides(skv), io);
  auto dV = g.tensor("dV", {b, h, skv, d}, x.strides(skv), io);
  auto scale = g.scalar("scale", x.scale);
  auto one = g.scalar("one", 1.0f);

  // softmax_sum = rowsum(dO * O), kept in workspace-backed fp32.
  auto dOO = g.packed("dO*O", {b, h, sq, d}, f32, true);
  g.pointwise("dO*O", CUDNN_POINTWISE_MUL, dO, o, nullptr, dOO);
  auto rowSum = g.packed("rowsum(dO*O)", {b, h, sq, 1}, f32, true);
  g.reduction("rowsum(dO*O)", CUDNN_REDUCE_TENSOR_ADD, dOO, rowSum);
  auto softmaxSum = g.internal("softmax sum", {b, h, sq, 1});
  g.pointwise("softmax sum", CUDNN_POINTWISE_MUL, rowSum, one, nullptr,
              softmaxSum);

  // P recomputed from the statistics.
  auto scaled = scaledScores(g, q, kt, scale, {b, h, sq, skv});
  auto shifted = g.packed("S-stats", {b, h, sq, skv}, f32, true);
  g.pointwise("S-stats", CUDNN_POINTWISE_SUB, scaled, stats, nullptr, shifted);
  auto masked = x.causal ? causalMask(g, shifted, {b, h, sq, skv}) : shifted;
  auto p = g.packed("P", {b, h, sq, skv}, f32, true);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, masked, nullptr, nullptr, p);

  // dV = P^T @ dO.
  auto pt =
      g.tensor("P^T", {b, h, skv, sq}, transposedStrides(h, sq, skv), io, true);
  g.reshape("P^T", p, pt);
  g.matmul("P^T@dO", pt, dO, dV);

  // dS = P * (dO @ V^T - softmax_sum) * scale.
  auto dP = g.packed("dP", {b, h, sq, skv}, f32, true);
  g.matmul("dO@V^T", dO, vt, dP);
  auto centred = g.packed("dP-sum", {b, h, sq, skv}, f32, true);
  g.pointwise("dP-sum", CUDNN_POINTWISE_SUB, dP, softmaxSum, nullptr, centred);
  auto dSu = g.packed("dS unscaled", {b, h, sq, skv}, f32, true);
  g.pointwise("(dP-sum)*P", CUDNN_POINTWISE_MUL, centred, p, nullptr, dSu);
  auto dS = g.packed("dS", {b, h, sq, skv}, f32, true);
  g.pointwise("dS*scale", CUDNN_POINTWISE_MUL, dSu, scale, nullptr, dS);

  // dK = dS^T @ Q.
  auto dSt = g.tensor("dS^T", {b, h, skv, sq}, transposedStrides(h, sq, skv),
                      io, true);
  g.reshape("dS^T", dS, dSt);
  g.matmul("dS^T@Q", dSt, q, dK);

  // dQ = dS @ K, accumulated in fp32.
  auto k = g.packed("K", {b, h, skv, d}, io, true);
  g.reshape("K", kt, k);
  auto dQacc = g.internal("dQ accum", {b, h, sq, d});
  g.matmul("dS@K", dS, k, dQacc);
  g.pointwise("dQ", CUDNN_POINTWISE_IDENTITY, dQacc, nullptr, nullptr, dQ);
}

void buildConv(Builder &g, const ConvShape &x) {
  cudnnDataType_t io = toCudnn(x.dtype), f32 = CUDNN_DATA_FLOAT;
  auto xt = g.packed("x", {x.n, x.c, x.h, x.w}, io);
  auto wt = g.packed("w", {x.k, x.c, x.r, x.s}, io);
  auto yt = g.packed("y", {x.n, x.k, x.outH(), x.outW()}, io);

  const char *what = "convolution";
  cudnnBackendDescriptor_t conv =
      g.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, what);
  int64_t dims = 2;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  std::vector<int64_t> stride(2, x.stride), pad(2, x.pad), dil(2, x.dilation);
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
        &f32);
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
        CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
        &dims);
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2,
        dil.data());
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
        stride.data());
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
        pad.data());
  g.set(conv, what, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
        pad.data());
  g.finalize(conv, what);

  // Each pass's operation and its attributes: x (dx), w (dw), y (dy), the
  // convolution, alpha, beta.
  struct PassAttrs {
    cudnnBackendDescriptorType_t op;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static const PassAttrs kPasses[] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  const PassAttrs &pass = kPasses[static_cast<int>(x.pass)];
  float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t op = g.make(pass.op, what);
  g.setDesc(op, what, pass.x, xt);
  g.setDesc(op, what, pass.w, wt);
  g.setDesc(op, what, pass.y, yt);
  g.setDesc(op, what, pass.conv, conv);
  g.set(op, what, pass.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  g.set(op, what, pass.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  g.addOp(op, what);
}

/// The tensors of a normalization forward; null ones are left unset.
struct NormForward {
  cudnnBackendNormMode_t mode;
  cudnnBackendNormFwdPhase_t phase;
  cudnnBackendDescriptor_t x = nullptr, scale = nullptr, bias = nullptr,
                           epsilon = nullptr, mean = nullptr,
                           invVariance = nullptr, y = nullptr;
};

/// A norm-forward operation with `t`'s tensors set, not yet added: the
/// caller adds what its phase needs more of (running statistics).
cudnnBackendDescriptor_t normForward(Builder &g, const NormForward &t) {
  const char *what = "normalization";
  auto op = g.make(CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR, what);
  g.set(op, what, CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, 1,
        &t.mode);
  g.set(op, what, CUDNN_ATTR_OPERATION_NORM_FWD_PHASE,
        CUDNN_TYPE_NORM_FWD_PHASE, 1, &t.phase);
  std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t> tensors[] =
      {{CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, t.x},
       {CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, t.scale},
       {CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, t.bias},
       {CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, t.epsilon},
       {CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, t.mean},
       {CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, t.invVariance},
       {CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, t.y}};
  for (auto [attribute, tensor] : tensors)
    if (tensor)
      g.setDesc(op, what, attribute, tensor);
  return op;
}

/// Batch norm with given statistics: cuDNN's normalization in its
/// inference phase. It reads the inverse standard deviation, not the
/// variance, and takes it (and the mean) only from memory, not from
/// pointwise operations before it in the graph ("linkEdges" fails): the
/// caller binds rsqrt(var + epsilon) it has computed.
void buildBatchNormInference(Builder &g, const NormShape &x,
                             const std::vector<int64_t> &dims,
                             const std::vector<int64_t> &strides) {
  cudnnDataType_t io = toCudnn(x.dtype), f32 = CUDNN_DATA_FLOAT;
  std::vector<int64_t> paramDims = {1, x.c, 1, 1};
  if (x.kind != NormKind::Batch || x.backward) {
    g.fail("normalization", "inference phase", CUDNN_STATUS_NOT_SUPPORTED);
    return;
  }
  NormForward t{CUDNN_BATCH_NORM, CUDNN_NORM_FWD_INFERENCE};
  t.x = g.tensor("x", dims, strides, io);
  t.scale = g.packed("scale", paramDims, f32);
  t.bias = g.packed("bias", paramDims, f32);
  t.mean = g.packed("mean", paramDims, f32);
  t.invVariance = g.packed("inv std", paramDims, f32);
  t.y = g.tensor("y", dims, strides, io);
  g.addOp(normForward(g, t), "normalization");
}

/// Training-phase batch norm's running statistics, read and written.
void setRunningStatistics(Builder &g, cudnnBackendDescriptor_t op,
                          const NormShape &x) {
  const char *what = "normalization";
  std::vector<int64_t> paramDims = {1, x.c, 1, 1};
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t> tensors[] =
      {{CUDNN_ATTR_OPERATION_NORM_FWD_EXP_AVG_FACTOR_DESC,
        g.scalar("momentum", x.momentum)},
       {CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_MEAN_DESC,
        g.packed("running mean", paramDims, f32)},
       {CUDNN_ATTR_OPERATION_NORM_FWD_INPUT_RUNNING_VAR_DESC,
        g.packed("running var", paramDims, f32)},
       {CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_MEAN_DESC,
        g.packed("next running mean", paramDims, f32)},
       {CUDNN_ATTR_OPERATION_NORM_FWD_OUTPUT_RUNNING_VAR_DESC,
        g.packed("next running var", paramDims, f32)}};
  for (auto [attribute, tensor] : tensors)
    g.setDesc(op, what, attribute, tensor);
}

void buildNorm(Builder &g, const NormShape &x) {
  cudnnDataType_t io = toCudnn(x.dtype), f32 = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims = {x.n, x.c, x.h, x.w};
  std::vector<int64_t> strides =
      x.channelsLast ? std::vector<int64_t>{x.c * x.h * x.w, 1, x.w * x.c, x.c}
                     : std::vector<int64_t>{x.c * x.h * x.w, x.h * x.w, x.w, 1};
  // Batch norm keeps a statistic per channel, layer and RMS norm per row.
  bool batch = x.kind == NormKind::Batch;
  std::vector<int64_t> statDims = batch ? std::vector<int64_t>{1, x.c, 1, 1}
                                        : std::vector<int64_t>{x.n, 1, 1, 1};
  std::vector<int64_t> paramDims = {1, x.c, 1, 1};
  cudnnBackendNormMode_t mode = batch                       ? CUDNN_BATCH_NORM
                                : x.kind == NormKind::Layer ? CUDNN_LAYER_NORM
                                                            : CUDNN_RMS_NORM;
  bool hasMean = x.kind != NormKind::Rms, hasBias = x.kind != NormKind::Rms;
  const char *what = "normalization";
  if (x.inference) {
    buildBatchNormInference(g, x, dims, strides);
    return;
  }
  auto xt = g.tensor("x", dims, strides, io);
  auto scale = g.packed("scale", paramDims, f32);
  auto mean = hasMean ? g.packed("mean", statDims, f32) : nullptr;
  auto invVar = g.packed("inv variance", statDims, f32);

  if (!x.backward) {
    NormForward t{mode, CUDNN_NORM_FWD_TRAINING};
    t.x = xt;
    t.scale = scale;
    t.y = g.tensor("y", dims, strides, io);
    t.bias = hasBias ? g.packed("bias", paramDims, f32) : nullptr;
    t.epsilon = g.scalar("epsilon", x.epsilon);
    t.mean = mean;
    t.invVariance = invVar;
    auto op = normForward(g, t);
    if (batch)
      setRunningStatistics(g, op, x);
    g.addOp(op, what);
    return;
  }
  auto dy = g.tensor("dy", dims, strides, io);
  auto dx = g.tensor("dx", dims, strides, io);
  auto dscale = g.packed("dscale", paramDims, f32);
  auto dbias = hasBias ? g.packed("dbias", paramDims, f32) : nullptr;
  auto op = g.make(CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR, what);
  g.set(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, 1,
        &mode);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, xt);
  if (mean)
    g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, mean);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, invVar);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, dy);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, scale);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, dscale);
  if (dbias)
    g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, dbias);
  g.setDesc(op, what, CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, dx);
  g.addOp(op, what);
}

/// The integer after "key": in a flat JSON object, or -1.
int64_t jsonInt(const std::string &json, const std::string &key) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos)
    return -1;
  at = json.find(':', at);
  if (at == std::string::npos)
    return -1;
  return std::strtoll(json.c_str() + at + 1, nullptr, 10);
}

} // namespace

std::string describe(const SdpaShape &x) {
  std::ostringstream os;
  os << "sdpa " << (x.backward ? "backward " : "forward ") << dtypeName(x.dtype)
     << " b" << x.batch << " h" << x.heads << " sq" << x.seqQ << " skv"
     << x.seqKv << " d" << x.headDim << (x.causal ? " causal" : "")
     << (x.headsInRows ? " bshd" : "");
  return os.str();
}

std::string describe(const ConvShape &x) {
  static const char *passes[] = {"fprop", "dgrad", "wgrad"};
  std::ostringstream os;
  os << "conv " << passes[(int)x.pass] << " " << dtypeName(x.dtype) << " x["
     << x.n << "," << x.c << "," << x.h << "," << x.w << "] w[" << x.k << ","
     << x.c << "," << x.r << "," << x.s << "] stride " << x.stride << " pad "
     << x.pad;
  if (x.dilation != 1)
    os << " dilation " << x.dilation;
  return os.str();
}

std::string describe(const NormShape &x) {
  static const char *kinds[] = {"batchnorm", "layernorm", "rmsnorm"};
  std::ostringstream os;
  os << kinds[(int)x.kind]
     << (x.backward    ? " backward "
         : x.inference ? " inference "
                       : " forward ")
     << dtypeName(x.dtype) << " [" << x.n << "," << x.c << "," << x.h << ","
     << x.w << "]" << (x.channelsLast ? " nhwc" : "");
  return os.str();
}

std::unique_ptr<DeviceDescription>
DeviceDescription::fromJson(const std::string &json, const std::string &name,
                            std::string &error) {
  cudnnBackendDescriptor_t d = nullptr;
  cudnnStatus_t s =
      cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &d);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(d, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, (int64_t)json.size() + 1,
                                 json.c_str());
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS) {
    error = "device description " + name + ": " + cudnnReason(s);
    if (d)
      cudnnBackendDestroyDescriptor(d);
    return nullptr;
  }
  std::unique_ptr<DeviceDescription> dev(new DeviceDescription(d, name));
  dev->sharedOptin_ = jsonInt(json, "maxSharedMemoryPerBlockOptin");
  return dev;
}

std::unique_ptr<DeviceDescription>
DeviceDescription::fromFile(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "device description " + path + ": cannot be read";
    return nullptr;
  }
  std::stringstream text;
  text << in.rdbuf();
  return fromJson(text.str(), path, error);
}

DeviceDescription::~DeviceDescription() {
  cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(desc_));
}

Support check(const SdpaShape &shape, const DeviceDescription &device) {
  Builder g(describe(shape) + " on " + device.name());
  if (shape.backward)
    buildSdpaBackward(g, shape);
  else
    buildSdpaForward(g, shape);
  return finish(g, device);
}

Support check(const ConvShape &shape, const DeviceDescription &device) {
  Builder g(describe(shape) + " on " + device.name());
  buildConv(g, shape);
  return finish(g, device);
}

Support check(const NormShape &shape, const DeviceDescription &device) {
  Builder g(describe(shape) + " on " + device.name());
  buildNorm(g, shape);
  return finish(g, device);
}

Choice chooseAttention(const SdpaShape &shape,
                       const DeviceDescription &device) {
  Support s = check(shape, device);
  if (s.supported)
    return {Impl::Cudnn, describe(shape) + ": cuDNN (" +
                             std::to_string(s.configs) + " engine configs)"};
  return {Impl::Own, s.reason + "; the backend's own attention kernel runs it"};
}

Choice chooseConv(const ConvShape &shape, const DeviceDescription &device) {
  Support s = check(shape, device);
  if (s.supported)
    return {Impl::Cudnn, describe(shape) + ": cuDNN (" +
                             std::to_string(s.configs) + " engine configs)"};
  return {Impl::Own,
          s.reason + "; the backend's own convolution kernel runs it"};
}

Choice chooseNorm(const NormShape &shape, const DeviceDescription &device) {
  Support s = check(shape, device);
  if (s.supported)
    return {Impl::Cudnn, describe(shape) + ": cuDNN (" +
                             std::to_string(s.configs) + " engine configs)"};
  return {Impl::Own,
          s.reason + "; the backend's own normalization kernel runs it"};
}

//===----------------------------------------------------------------------===//
// Executables: a graph's execution plan, its arguments and its launch
//===----------------------------------------------------------------------===//

struct Executable::State {
  std::unique_ptr<Builder> builder;
  Desc graph;
  std::vector<Desc> configs;
  Desc plan;
  /// Each bound tensor's workspace offset when it is internal, else -1.
  std::vector<int64_t> offsets;
  int64_t workspace = 0;
};

struct Executable::Arguments {
  Desc pack;
  std::vector<int64_t> uids;
  std::vector<void *> pointers;
};

namespace {

constexpr int64_t kWorkspaceAlignment = 256;

int64_t alignUp(int64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
         kWorkspaceAlignment;
}

/// The first fitting engine config whose execution plan finalizes on
/// `device`, and the workspace layout: cuDNN's, then the internal tensors.
std::unique_ptr<Executable> compileGraph(std::unique_ptr<Builder> b,
                                         const DeviceDescription &device,
                                         std::string &error) {
  auto state = std::make_unique<Executable::State>();
  Support support = find(*b, device, state->graph, state->configs);
  if (!support.supported) {
    error = support.reason;
    return nullptr;
  }
  std::string planError;
  int64_t cudnnWorkspace = -1;
  cudnnBackendDescriptor_t dev = device.descriptor();
  for (Desc &config : state->configs) {
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t c = config.get();
    cudnnStatus_t s = plan.status();
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendSetAttribute(plan.get(),
                                   CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendSetAttribute(plan.get(),
                                   CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dev);
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendFinalize(plan.get());
    int64_t n = 0, bytes = 0;
    if (s == CUDNN_STATUS_SUCCESS)
      s = cudnnBackendGetAttribute(plan.get(),
                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
      if (planError.empty())
        planError = cudnnReason(s);
      continue;
    }
    state->plan = std::move(plan);
    cudnnWorkspace = bytes;
    break;
  }
  if (cudnnWorkspace < 0) {
    error = b->graph() + ": no execution plan finalizes (" +
            std::to_string(state->configs.size()) +
            " engine configs tried): " + planError;
    return nullptr;
  }
  int64_t at = alignUp(cudnnWorkspace);
  for (const BoundTensor &t : b->tensors()) {
    state->offsets.push_back(t.internal ? at : -1);
    if (t.internal)
      at += alignUp(t.bytes);
  }
  state->workspace = at;
  state->builder = std::move(b);
  return std::make_unique<Executable>(std::move(state));
}

} // namespace

Executable::Executable(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
Executable::~Executable() = default;

std::unique_ptr<Executable> Executable::compile(const SdpaShape &shape,
                                                const DeviceDescription &device,
                                                std::string &error) {
  auto b = std::make_unique<Builder>(describe(shape) + " on " + device.name());
  if (shape.backward)
    buildSdpaBackward(*b, shape);
  else
    buildSdpaForward(*b, shape);
  return compileGraph(std::move(b), device, error);
}

std::unique_ptr<Executable> Executable::compile(const ConvShape &shape,
                                                const DeviceDescription &device,
                                                std::string &error) {
  auto b = std::make_unique<Builder>(describe(shape) + " on " + device.name());
  buildConv(*b, shape);
  return compileGraph(std::move(b), device, error);
}

std::unique_ptr<Executable> Executable::compile(const NormShape &shape,
                                                const DeviceDescription &device,
                                                std::string &error) {
  auto b = std::make_unique<Builder>(describe(shape) + " on " + device.name());
  buildNorm(*b, shape);
  return compileGraph(std::move(b), device, error);
}

const std::string &Executable::name() const { return state_->builder->graph(); }

std::vector<std::string> Executable::tensors() const {
  std::vector<std::string> names;
  for (const BoundTensor &t : state_->builder->tensors())
    if (!t.byValue && !t.internal)
      names.push_back(t.name);
  return names;
}

int64_t Executable::workspaceBytes() const { return state_->workspace; }

std::shared_ptr<Executable::Arguments>
Executable::bind(const std::vector<void *> &pointers, void *workspace,
                 std::string &error) const {
  auto args = std::make_shared<Arguments>();
  const std::vector<BoundTensor> &tensors = state_->builder->tensors();
  size_t next = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const BoundTensor &t = tensors[i];
    void *p;
    if (t.byValue)
      p = const_cast<float *>(&t.value);
    else if (t.internal)
      p = static_cast<char *>(workspace) + state_->offsets[i];
    else if (next < pointers.size())
      p = pointers[next++];
    else
      break;
    args->uids.push_back(t.uid);
    args->pointers.push_back(p);
  }
  if (args->uids.size() != tensors.size() || next != pointers.size()) {
    error = name() + ": " + std::to_string(pointers.size()) +
            " tensors bound, the graph has " + std::to_string(this->tensors().size());
    return nullptr;
  }
  args->pack = Desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  cudnnStatus_t s = args->pack.status();
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(
        args->pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
        (int64_t)args->uids.size(), args->uids.data());
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(args->pack.get(),
                                 CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                 CUDNN_TYPE_VOID_PTR,
                                 (int64_t)args->pointers.size(),
                                 args->pointers.data());
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(args->pack.get(),
                                 CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                 CUDNN_TYPE_VOID_PTR, 1, &workspace);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendFinalize(args->pack.get());
  if (s != CUDNN_STATUS_SUCCESS) {
    error = name() + ": variant pack: " + cudnnReason(s);
    return nullptr;
  }
  return args;
}

std::string Executable::run(void *handle, const Arguments &arguments) const {
  cudnnStatus_t s =
      cudnnBackendExecute(static_cast<cudnnHandle_t>(handle),
                          state_->plan.get(), arguments.pack.get());
  if (s != CUDNN_STATUS_SUCCESS)
    return name() + ": " + cudnnReason(s);
  return "";
}

std::unique_ptr<DeviceDescription>
DeviceDescription::fromHandle(void *handle, std::string &error) {
  cudnnBackendDescriptor_t d = nullptr;
  cudnnHandle_t h = static_cast<cudnnHandle_t>(handle);
  cudnnStatus_t s =
      cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &d);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(d, CUDNN_ATTR_DEVICEPROP_HANDLE,
                                 CUDNN_TYPE_HANDLE, 1, &h);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS) {
    error = "cuDNN's description of the device: " + cudnnReason(s);
    if (d)
      cudnnBackendDestroyDescriptor(d);
    return nullptr;
  }
  return std::unique_ptr<DeviceDescription>(new DeviceDescription(d, "this GPU"));
}

int64_t cudnnVersion() { return (int64_t)cudnnGetVersion(); }

} // namespace fsdprt::cudnn
