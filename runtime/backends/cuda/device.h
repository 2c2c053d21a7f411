//===- device.h - What the CUDA backend needs of a GPU -----------*- C++ -*-===//
//
// The CUDA backend (backend.cpp) is host code: it checks a plan kernel's
// shapes, plans its launches and runs them on a Device. A Device is the
// GPU as that code sees it: memory, synchronous copies, streams and
// events, and the launchers of the project's kernels and of GEMMs. Two
// implement it:
//  - the real one (cuda_device.cpp, in the plugin libfsdprt_cuda.so, so
//    that libfsdprt itself needs no CUDA library): cudart, cuBLASLt and the
//    device launchers of launch.h;
//  - the fake one (fake_device.cpp, devices "fake-cuda" and
//    "fake-cuda:strict"): host memory, the host launchers of the same
//    kernel bodies, and a stream hazard checker (hazards.h) in front of
//    every launch.
// So CI runs everything the backend does but the device code itself.
//
// Launchers enqueue work on a stream and return "" or the launch's error;
// faults the kernels find in the data (a bad label) go to an ErrorSlot,
// which the backend reads once the stream is synchronised.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_DEVICE_H
#define FSDPRT_BACKENDS_CUDA_DEVICE_H

#include "../../src/backend.h"
#include "cudnn_graphs.h"
#include "hazards.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/copy.h"
#include "kernels/data.h"
#include "kernels/elementwise.h"
#include "kernels/grads.h"
#include "kernels/grid_sample.h"
#include "kernels/indexing.h"
#include "kernels/logic.h"
#include "kernels/losses.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/random.h"
#include "kernels/recurrent.h"
#include "kernels/reduce.h"
#include "kernels/rows.h"
#include "kernels/scatter.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace fsdprt::cuda {

/// A failure of the device itself (a CUDA error), thrown by the
/// synchronous operations.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A device stream and event, opaque to the backend.
class DeviceStream {
public:
  virtual ~DeviceStream() = default;
};
class DeviceEvent {
public:
  virtual ~DeviceEvent() = default;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

/// The activation a GEMM applies to its output as it writes it (the
/// epilogues cuBLASLt has); others run as a kernel after the GEMM.
enum class GemmActivation { None, Relu, GeluTanh };

/// A family of row-major GEMMs: for b in [0, batch),
///   Y_b[m, n] = alpha * op(A_b)[m, k] * op(B_b)[k, n] + beta * Y_b
///               (+ bias[n]) (then the activation),
/// with A_b = a + b * strideA elements (and so on; stride 0: one matrix
/// for all), op() the transpose where asked, leading dims in elements.
/// A, B, Y and the bias share one dtype (f32, bf16 or f16); the products
/// accumulate in fp32, and fp32 GEMMs are exact fp32 (no tf32).
struct Gemm {
  fsdprt_dtype_t dtype = FSDPRT_F32;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldy = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideY = 0;
  float alpha = 1, beta = 0;
  bool bias = false;
  GemmActivation activation = GemmActivation::None;
};

/// A stream's captured work (a CUDA graph, instantiated).
class DeviceGraph {
public:
  virtual ~DeviceGraph() = default;
};

/// A Gemm the device has planned (cuBLASLt's descriptors and algorithm).
class PreparedGemm {
public:
  virtual ~PreparedGemm() = default;
};

/// A cuDNN graph the device compiled for itself (cudnn_graphs.h's
/// Executable).
class PreparedGraph {
public:
  virtual ~PreparedGraph() = default;
  /// Device workspace a launch needs, bytes.
  virtual int64_t workspaceBytes() const = 0;
  /// The graph and the device, for messages ("sdpa forward bf16 ... on
  /// this GPU").
  virtual std::string name() const = 0;
};

class Device {
public:
  virtual ~Device() = default;
  /// "fake-cuda", or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)".
  virtual std::string describe() const = 0;
  /// Whether an op with no own kernel may run the CPU backend's kernel on
  /// this device's memory (the fake device: it is host memory; not the
  /// strict one, which refuses such ops as a GPU does).
  virtual bool hostMemory() const = 0;

  /// `bytes` of device memory, 256-byte aligned; nullptr when it runs out.
  virtual void *allocate(uint64_t bytes) = 0;
  virtual void free(void *memory) = 0;
  /// Synchronous: every stream is idle before and after. Throw
  /// DeviceError.
  virtual void copy(void *dst, const void *src, uint64_t bytes,
                    CopyKind kind) = 0;
  virtual void fill(void *dst, uint8_t value, uint64_t bytes) = 0;

  virtual std::unique_ptr<DeviceStream> createStream() = 0;
  /// A stream whose work the device schedules first (collectives, so that
  /// they start as soon as they may).
  virtual std::unique_ptr<DeviceStream> createPriorityStream() {
    return createStream();
  }
  virtual std::unique_ptr<DeviceEvent> record(DeviceStream &stream) = 0;
  /// Whether the work before `event` has finished (cudaEventQuery; never
  /// blocks, so a watchdog may ask).
  virtual bool finished(const DeviceEvent &event) = 0;
  /// Whether `p` points into memory this device allocated (a collective
  /// of host memory is staged through the host).
  virtual bool owns(const void *p) = 0;
  /// Whether the host may read and write this device's memory directly
  /// (the fake device but "fake-cuda:cudnn": it is host memory), so that
  /// the ranks of a local group exchange it without a copy
  /// (stream_comm.h).
  virtual bool hostAddressable() const { return false; }
  /// An event that can be timed (GPU events are made without timing
  /// otherwise: cheaper), and the seconds between two once both completed.
  virtual std::unique_ptr<DeviceEvent> recordTimed(DeviceStream &stream) {
    return record(stream);
  }
  virtual double elapsed(const DeviceEvent &, const DeviceEvent &) {
    return -1;
  }
  virtual void wait(DeviceStream &stream, const DeviceEvent &event) = 0;
  /// Waits for `stream`'s work: "" or the device's error.
  virtual std::string synchronize(DeviceStream &stream) = 0;
  /// Before `work` is launched on `stream`: "" or why it must not run
  /// (the fake device's hazard checker).
  virtual std::string admit(DeviceStream &, const Work &) { return ""; }

  /// Graphs on the GPU (nativeGraphs): from beginCapture, launches on
  /// `stream` are captured instead of run; endCapture instantiates them;
  /// launchGraph runs them. The fake device has no capture of its own: the
  /// backend keeps the launches' functions and replays them.
  virtual bool nativeGraphs() const { return false; }
  virtual std::string beginCapture(DeviceStream &) { return "no graphs"; }
  virtual std::unique_ptr<DeviceGraph> endCapture(DeviceStream &, std::string &error) {
    error = "no graphs";
    return nullptr;
  }
  virtual std::string launchGraph(DeviceStream &, DeviceGraph &) { return "no graphs"; }
  /// The fake device: the work admitted since the last synchronisation
  /// (or, with `previous`, between the two before), as names and byte
  /// ranges, so that a replay is checked against a direct step.
  virtual const std::vector<std::string> *issued(bool /*previous*/) const {
    return nullptr;
  }

  // The launchers (launch.h has what each computes).
  virtual std::string unary(DeviceStream &s, Unary op, const float *x,
                            float *y, int64_t n, UnaryParams params) = 0;
  virtual std::string floatClass(DeviceStream &s, const FloatClassBody &body,
                                 int64_t n) = 0;
  virtual std::string cast(DeviceStream &s, bool toHalf, fsdprt_dtype_t half,
                           const void *x, void *y, int64_t n) = 0;
  virtual std::string anyCast(DeviceStream &s, fsdprt_dtype_t from,
                              fsdprt_dtype_t to, const void *x, void *y,
                              int64_t n) = 0;
  virtual std::string unary64(DeviceStream &s, Unary op, const int64_t *x,
                              int64_t *y, int64_t n) = 0;
  virtual std::string binary(DeviceStream &s, Binary op, const Broadcast &plan,
                             const float *a, const float *b, float *y,
                             int64_t n) = 0;
  virtual std::string binary(DeviceStream &s, Binary op, const Broadcast &plan,
                             const int64_t *a, const int64_t *b, int64_t *y,
                             int64_t n) = 0;
  /// a op b of one narrow integer dtype (I32, I16, I8, U8; not Pow, PRelu).
  virtual std::string integerBinary(DeviceStream &s, Binary op,
                                    fsdprt_dtype_t dtype, const Broadcast &plan,
                                    const void *a, const void *b, void *y,
                                    int64_t n) = 0;
  /// pow of an int64 base by an I64, I32, F32 or F64 `exponent`.
  virtual std::string powInt64(DeviceStream &s, fsdprt_dtype_t exponent,
                               const Broadcast &plan, const int64_t *a,
                               const void *b, int64_t *y, int64_t n) = 0;
  virtual std::string dropout(DeviceStream &s, const DropoutBody &body) = 0;
  /// random_uniform, random_normal and bernoulli (kernels/random.h).
  virtual std::string draw(DeviceStream &s, const DrawBody &body) = 0;
  virtual std::string softmax(DeviceStream &s, bool log, const float *x,
                              float *y, int64_t outer, int64_t n,
                              int64_t inner) = 0;
  virtual std::string logic(DeviceStream &s, Logic op, fsdprt_dtype_t dtype,
                            const Broadcast &plan, const void *a, const void *b,
                            uint8_t *y, int64_t n) = 0;
  virtual std::string logicalNot(DeviceStream &s, const uint8_t *x, uint8_t *y,
                                 int64_t n) = 0;
  virtual std::string where(DeviceStream &s, size_t elementSize,
                            const Broadcast &plan, const uint8_t *cond,
                            const void *a, const void *b, void *y,
                            int64_t n) = 0;
  /// scratch: reduceScratchFloats(kind, plan) floats.
  virtual std::string reduce(DeviceStream &s, Reduce kind,
                             const ReducePlan &plan, const float *x, float *y,
                             float *scratch) = 0;
  virtual std::string integerReduce(DeviceStream &s,
                                    const IntegerReduceBody &body) = 0;
  virtual std::string norm(DeviceStream &s, bool rms, const float *x,
                           const float *scale, const float *bias, float *y,
                           int64_t rows, int64_t n, float eps,
                           RowStats stats) = 0;
  virtual std::string gather(DeviceStream &s, size_t elementSize,
                             bool indices32, const void *data,
                             const void *indices, void *y, int64_t outer,
                             int64_t dim, int64_t count, int64_t inner,
                             ErrorSlot *error) = 0;
  virtual std::string gatherGrad(DeviceStream &s, bool indices32,
                                 const float *g, const void *indices, float *y,
                                 int64_t outer, int64_t dim, int64_t count,
                                 int64_t inner, int64_t *scratch,
                                 ErrorSlot *error) = 0;
  virtual std::string pool(DeviceStream &s, bool max, const PoolWindow &window,
                           const float *x, float *y, int64_t planes) = 0;
  virtual std::string maxPoolIndices(DeviceStream &s,
                                     const MaxPoolIndicesBody &body,
                                     int64_t planes) = 0;
  virtual std::string resize(DeviceStream &s, const ResizeBody &body,
                             int64_t n) = 0;
  virtual std::string gridSample(DeviceStream &s,
                                 const GridSampleBody &body) = 0;
  virtual std::string globalMaxPool(DeviceStream &s, const float *x, float *y,
                                    int64_t planes, int64_t inner) = 0;
  virtual std::string argExtreme(DeviceStream &s, const ArgExtremeBody &body,
                                 int64_t rows) = 0;
  virtual std::string hardmax(DeviceStream &s, const float *x, float *y,
                              int64_t outer, int64_t n, int64_t inner) = 0;
  virtual std::string poolGrad(DeviceStream &s, bool max,
                               const PoolWindow &window, const float *x,
                               const float *g, float *dx, int64_t planes) = 0;
  virtual std::string batchNorm(DeviceStream &s, const float *x,
                                const float *scale, const float *bias,
                                const float *mean, const float *var, float *y,
                                int64_t n, int64_t channels, int64_t inner,
                                float eps) = 0;
  virtual std::string batchNormTrain(DeviceStream &s,
                                     const BatchNormTrainBody &body) = 0;
  virtual std::string batchNormGrad(DeviceStream &s,
                                    const BatchNormGradBody &body) = 0;
  virtual std::string inverseStd(DeviceStream &s, const float *var,
                                 float *invStd, int64_t channels,
                                 float eps) = 0;
  /// The fused training gradients (kernels/grads.h; launch.h says what
  /// each computes).
  virtual std::string activationGrad(DeviceStream &s,
                                     const ActivationGradBody &body,
                                     int64_t n) = 0;
  virtual std::string normGrad(DeviceStream &s, const NormGradArgs &args) = 0;
  /// The fused optimizer steps over n elements (kernels/optim.h).
  virtual std::string adamw(DeviceStream &s, const AdamWBody &body,
                            int64_t n) = 0;
  virtual std::string sgd(DeviceStream &s, const SGDBody &body, int64_t n) = 0;
  virtual std::string recurrent(DeviceStream &s, const RecurrentBody &body,
                                int64_t n) = 0;
  virtual std::string im2col(DeviceStream &s, const ConvWindow &window,
                             const float *x, float *col, int64_t images) = 0;
  virtual std::string col2im(DeviceStream &s, const ConvWindow &window,
                             const float *col, float *x, int64_t images) = 0;
  virtual std::string concat(DeviceStream &s, size_t elementSize,
                             const void *const *pieces, void *whole,
                             const std::vector<Piece> &plan) = 0;
  virtual std::string split(DeviceStream &s, size_t elementSize,
                            const void *whole, void *const *pieces,
                            const std::vector<Piece> &plan) = 0;
  /// launchCopy (not the synchronous copy above).
  virtual std::string copyElements(DeviceStream &s, size_t elementSize,
                                   const void *x, void *y, int64_t n) = 0;
  virtual std::string pack(DeviceStream &s, size_t elementSize,
                           const void *const *members, void *flat,
                           const PackPlan &plan) = 0;
  virtual std::string pad(DeviceStream &s, size_t elementSize,
                          const PadShape &shape, const void *x, void *y,
                          int64_t n, uint64_t fill) = 0;
  virtual std::string trilu(DeviceStream &s, size_t elementSize,
                            const void *x, void *y, int64_t n, int64_t rows,
                            int64_t cols, int64_t k, const int64_t *kInput,
                            bool upper) = 0;
  virtual std::string cumsum(DeviceStream &s, fsdprt_dtype_t dtype,
                             const void *x, void *y, int64_t lines, int64_t dim,
                             int64_t inner, bool exclusive, bool reverse,
                             const CumsumAxisInput &axisInput) = 0;
  virtual std::string gatherElements(DeviceStream &s, size_t elementSize,
                                     bool indices32, const AxisWalk &walk,
                                     const void *data, const void *indices,
                                     void *y, int64_t n, ErrorSlot *error) = 0;
  virtual std::string scatterElements(DeviceStream &s, const ScatterArgs &args,
                                      int64_t lines) = 0;
  virtual std::string scatterND(DeviceStream &s, const ScatterArgs &args) = 0;
  virtual std::string stridedRead(DeviceStream &s, size_t elementSize,
                                  const Broadcast &plan, const void *x,
                                  void *y, int64_t offset, int64_t n) = 0;
  virtual std::string nllLoss(DeviceStream &s, const NllInputs &in,
                              int64_t positions, bool none, bool mean,
                              float *scratch, float *y) = 0;
  virtual std::string nllLossGrad(DeviceStream &s, const NllInputs &in,
                                  int64_t positions, const float *g, bool none,
                                  bool mean, float *scratch, float *y,
                                  int64_t n) = 0;
  virtual std::string crossEntropy(DeviceStream &s, const CrossEntropyInputs &in,
                                   int64_t positions, bool none, bool mean,
                                   float *scratch, float *y) = 0;
  virtual std::string crossEntropyGrad(DeviceStream &s,
                                       const CrossEntropyInputs &in,
                                       int64_t positions, const float *g,
                                       bool none, bool mean, float *scratch,
                                       float *y) = 0;
  /// Plans `gemm` (when the kernel is prepared): nullptr, with `error`
  /// saying why, when the device cannot run it.
  virtual std::shared_ptr<PreparedGemm> prepareGemm(const Gemm &gemm,
                                                    std::string &error) = 0;
  /// attention (kernels/attention.h): y and, when args.lse is set, lse.
  virtual std::string attention(DeviceStream &s, const AttentionArgs &args) = 0;
  /// attention_grad: dq, dk_t and dv.
  virtual std::string attentionGrad(DeviceStream &s,
                                    const AttentionArgs &args) = 0;
  /// Compiles attention on cuDNN for this device: nullptr, with `why`,
  /// when the device has no cuDNN (the fake one), cuDNN is turned off
  /// (FSDPRT_CUDNN=off) or has no plan for the shape.
  virtual std::shared_ptr<PreparedGraph>
  prepareAttention(const cudnn::SdpaShape &, std::string &why) {
    why = describe() + " runs no cuDNN";
    return nullptr;
  }
  /// The same for a convolution (any pass).
  virtual std::shared_ptr<PreparedGraph>
  prepareConv(const cudnn::ConvShape &, std::string &why) {
    why = describe() + " runs no cuDNN";
    return nullptr;
  }
  /// The same for a normalization (cudnn::NormShape).
  virtual std::shared_ptr<PreparedGraph>
  prepareNorm(const cudnn::NormShape &, std::string &why) {
    why = describe() + " runs no cuDNN";
    return nullptr;
  }
  /// Runs a prepared graph on `s` over `tensors` (in the order of
  /// cudnn::Executable::tensors()) with `workspace`.
  virtual std::string runGraph(DeviceStream &, PreparedGraph &,
                               const std::vector<void *> &, void *) {
    return describe() + " runs no cuDNN";
  }
  /// A prepared GEMM over a, b (and bias: [n], or null) into y.
  virtual std::string gemm(DeviceStream &s, PreparedGemm &gemm, const void *a,
                           const void *b, const void *bias, void *y) = 0;
};

/// The CUDA backend on `device` (backend.cpp).
std::unique_ptr<Backend> createCudaBackend(std::unique_ptr<Device> device);
/// A CUDA backend's device and a stream's (nullptr for other backends).
Device *deviceOf(Backend &backend);
DeviceStream *deviceStreamOf(Stream &stream);

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_DEVICE_H
