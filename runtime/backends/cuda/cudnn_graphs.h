//===- cudnn_graphs.h - cuDNN graphs and their support ---------*- C++ -*-===//
//
// The cuDNN graphs the CUDA backend runs (attention forward and backward,
// convolutions), built with cuDNN's backend C API, and the question the
// backend's prepare() asks of each: does cuDNN have an engine for it on this
// device? The device is a description (cuDNN's device-property descriptor,
// from JSON), so the question is answered without a GPU: ahead of time, in
// CI, against a committed H100 description. When cuDNN says no, the backend
// runs its own kernel instead (chooseAttention, chooseConv).
//
// All cuDNN code lives in cudnn_graphs.cpp: this header includes no cuDNN
// header.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_CUDNN_GRAPHS_H
#define FSDPRT_BACKENDS_CUDA_CUDNN_GRAPHS_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fsdprt::cudnn {

enum class DType { F32, F16, BF16 };

/// Scaled dot-product attention on [batch, heads, seq, head_dim] tensors
/// (contiguous; K and V as stored, not transposed), fp32 softmax statistics
/// (the row log-sum-exp). Forward
/// writes O and the statistics; backward reads them and writes dQ, dK, dV.
/// With `headsInRows` Q, K, V, O and their gradients are stored
/// [batch, seq, heads, head_dim] (the attention op's layout "bshd": the
/// head split's transposes folded away); the statistics stay
/// [batch, heads, seqQ].
struct SdpaShape {
  int64_t batch = 1, heads = 1, seqQ = 1, seqKv = 1, headDim = 64;
  /// The scores' scale (the plan's, usually 1/sqrt(headDim)).
  float scale = 0.125f;
  DType dtype = DType::BF16;
  bool causal = true;
  bool backward = false;
  bool headsInRows = false;

  /// The strides of a [batch, heads, seq, head_dim] view of Q, K, V or O
  /// (`seq` rows per head) as stored.
  std::vector<int64_t> strides(int64_t seq) const {
    if (headsInRows)
      return {seq * heads * headDim, headDim, heads * headDim, 1};
    return {heads * seq * headDim, seq * headDim, headDim, 1};
  }
  /// The offset of row i of head `bh` (batch * heads + head) of such a
  /// tensor.
  int64_t rowAt(int64_t bh, int64_t i, int64_t seq) const {
    std::vector<int64_t> s = strides(seq);
    return bh / heads * s[0] + bh % heads * s[1] + i * s[2];
  }
};

/// A 2-D convolution, NCHW tensors and KCRS filters (contiguous), square
/// stride, padding and dilation, one group. fprop: y = conv(x, w); dgrad:
/// dx from dy and w; wgrad: dw from x and dy.
enum class ConvPass { Fprop, Dgrad, Wgrad };
struct ConvShape {
  ConvPass pass = ConvPass::Fprop;
  int64_t n = 1, c = 1, h = 1, w = 1; // input x
  int64_t k = 1, r = 1, s = 1;        // filter
  int64_t stride = 1, pad = 0, dilation = 1;
  DType dtype = DType::F32;
  /// Output height and width.
  int64_t outH() const {
    return (h + 2 * pad - dilation * (r - 1) - 1) / stride + 1;
  }
  int64_t outW() const {
    return (w + 2 * pad - dilation * (s - 1) - 1) / stride + 1;
  }
};

/// A normalization in training: batch norm over [n, c, h, w] (statistics
/// per channel, running mean and variance updated), layer norm and RMS norm
/// over rows [n, c, 1, 1] (statistics per row of c). Forward writes y and the
/// saved statistics; backward writes dx, dscale (and dbias but for RMS).
/// Batch norm in inference (`inference`, forward only) normalizes with the
/// given running statistics and writes only y: the graph reads x, scale,
/// bias, the mean and the inverse standard deviation rsqrt(var + epsilon),
/// which the caller computes (cuDNN takes it only from memory).
/// Statistics, scale and bias are fp32; x and y are `dtype`.
enum class NormKind { Batch, Layer, Rms };
struct NormShape {
  NormKind kind = NormKind::Batch;
  int64_t n = 1, c = 1, h = 1, w = 1;
  DType dtype = DType::F32;
  /// NHWC strides (channels innermost) instead of NCHW.
  bool channelsLast = false;
  bool backward = false;
  /// Batch norm with given statistics (CUDNN_NORM_FWD_INFERENCE).
  bool inference = false;
  float epsilon = 1e-5f;
  /// Batch norm's running-statistics factor.
  float momentum = 0.1f;
};

/// "sdpa forward bf16 b4 h12 sq1024 skv1024 d64 causal" and the like: every
/// message about a graph names it so.
std::string describe(const SdpaShape &shape);
std::string describe(const ConvShape &shape);
std::string describe(const NormShape &shape);

/// A GPU as cuDNN sees it (cuDNN's device-property descriptor), built from
/// its JSON form: captured on a real GPU, or hand-written.
class DeviceDescription {
public:
  /// Parses `json` into a finalized descriptor. On failure returns null and
  /// sets `error` to cuDNN's reason (a missing key, for instance).
  static std::unique_ptr<DeviceDescription> fromJson(const std::string &json,
                                                     const std::string &name,
                                                     std::string &error);
  /// The GPU a cuDNN handle (a cudnnHandle_t) runs on.
  static std::unique_ptr<DeviceDescription> fromHandle(void *handle,
                                                       std::string &error);
  /// Reads the JSON from a file; errors name the file.
  static std::unique_ptr<DeviceDescription> fromFile(const std::string &path,
                                                     std::string &error);
  ~DeviceDescription();
  DeviceDescription(const DeviceDescription &) = delete;
  DeviceDescription &operator=(const DeviceDescription &) = delete;

  const std::string &name() const { return name_; }
  /// The cuDNN descriptor (a cudnnBackendDescriptor_t).
  void *descriptor() const { return desc_; }
  /// maxSharedMemoryPerBlockOptin from the JSON, or -1.
  int64_t sharedMemoryPerBlockOptin() const { return sharedOptin_; }

private:
  DeviceDescription(void *desc, std::string name)
      : desc_(desc), name_(std::move(name)) {}
  void *desc_;
  std::string name_;
  int64_t sharedOptin_ = -1;
};

/// cuDNN's answer for one graph on one device.
struct Support {
  bool supported = false;
  /// The step that said no: "build" (a descriptor rejected an attribute or
  /// did not finalize), "operation graph", "heuristics" or "engine configs"
  /// (heuristics found configs, none of which fits the device). Empty when
  /// supported.
  std::string step;
  /// The graph, the step and cuDNN's own message.
  std::string reason;
  /// Engine configs that fit the device.
  int configs = 0;
};

/// Builds the graph and asks cuDNN for engine configs on `device` (heuristic
/// modes A and FALLBACK). A config fits when cuDNN can give its workspace
/// size and its shared memory fits the device's opt-in limit. Needs no GPU;
/// the runtime-compiled engines (attention) need libcuda.so.1 loadable (the
/// driver, or the CUDA stub on a test's private library path).
Support check(const SdpaShape &shape, const DeviceDescription &device);
Support check(const ConvShape &shape, const DeviceDescription &device);
Support check(const NormShape &shape, const DeviceDescription &device);

/// A graph compiled for one device: cuDNN's execution plan (the first
/// engine config, in heuristics' order, whose plan finalizes) and what a
/// launch binds. Compiling needs no GPU (cuDNN >= 9.8 finalizes plans
/// against a description); running does.
class Executable {
public:
  /// nullptr, with `error` naming the graph and cuDNN's reason, when cuDNN
  /// has no plan for it on `device`.
  static std::unique_ptr<Executable> compile(const SdpaShape &shape,
                                             const DeviceDescription &device,
                                             std::string &error);
  static std::unique_ptr<Executable> compile(const ConvShape &shape,
                                             const DeviceDescription &device,
                                             std::string &error);
  static std::unique_ptr<Executable> compile(const NormShape &shape,
                                             const DeviceDescription &device,
                                             std::string &error);
  ~Executable();
  Executable(const Executable &) = delete;
  Executable &operator=(const Executable &) = delete;

  /// The graph ("sdpa forward bf16 ...").
  const std::string &name() const;
  /// The device memory a launch binds, in order. Attention forward: Q, K^T
  /// (a view of K [b, h, skv, d]), V, O, stats; backward: Q, K^T, V^T (a
  /// view of V), O, dO, stats, dQ, dK, dV (K, V, dK and dV as
  /// [b, h, skv, d]). Convolution: x, w, y (fprop), dx, w, dy (dgrad),
  /// x, dw, dy (wgrad). Batch norm in inference: x, scale, bias, mean,
  /// inv std, y; in training, forward: x, scale, mean, inv variance (the
  /// saved inverse std), y, bias, running mean, running var, next running
  /// mean, next running var; backward: x, scale, mean, inv variance, dy,
  /// dx, dscale, dbias.
  std::vector<std::string> tensors() const;
  /// Bytes of device workspace a launch needs (cuDNN's, then the graph's
  /// own fp32 intermediates), 256-byte aligned.
  int64_t workspaceBytes() const;
  /// The launch's arguments (cuDNN's variant pack), made once: one device
  /// pointer per tensors() entry and the workspace. nullptr with `error`
  /// on a wrong count or cuDNN's refusal.
  struct Arguments;
  std::shared_ptr<Arguments> bind(const std::vector<void *> &pointers,
                                  void *workspace, std::string &error) const;
  /// Runs on `handle` (a cudnnHandle_t, its stream set): "" or cuDNN's
  /// error naming the graph.
  std::string run(void *handle, const Arguments &arguments) const;

  /// What cudnn_graphs.cpp keeps (opaque here: no cuDNN header).
  struct State;
  explicit Executable(std::unique_ptr<State> state);

private:
  std::unique_ptr<State> state_;
};

/// Which implementation the backend runs for a graph.
enum class Impl { Cudnn, Own };
struct Choice {
  Impl impl = Impl::Own;
  /// Why: the graph and cuDNN's reason when it is Own.
  std::string why;
};

/// cuDNN when it supports the graph on `device`, else the backend's own
/// kernel, saying why.
Choice chooseAttention(const SdpaShape &shape, const DeviceDescription &device);
Choice chooseConv(const ConvShape &shape, const DeviceDescription &device);
Choice chooseNorm(const NormShape &shape, const DeviceDescription &device);

/// cudnnGetVersion(), for the record beside a captured description.
int64_t cudnnVersion();

} // namespace fsdprt::cudnn

#endif // FSDPRT_BACKENDS_CUDA_CUDNN_GRAPHS_H
