//===- cuda_device.cpp - The GPU as the CUDA backend sees it --------------===//
//
// The real Device (device.h): cudart memory, copies, streams and events;
// the project's kernels through launch.h's device launchers; GEMMs through
// cuBLASLt. Built into the plugin libfsdprt_cuda.so, which libfsdprt
// loads for device "cuda[:N]" (devices.cpp), so that libfsdprt needs no
// CUDA library where there is no GPU.
//
// Row-major GEMMs on a column-major library: a row-major matrix is the
// column-major transpose with the same leading dimension, so Y = op(A)
// op(B) is computed as Y^T = op(B)^T op(A)^T with the operands swapped;
// the bias, one value per column of Y, is one per row of Y^T, which is
// what cuBLASLt's BIAS epilogue adds.
//
//===----------------------------------------------------------------------===//

#include "device.h"
#include "launch.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#ifdef FSDP_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace fsdprt::cuda {
namespace {

std::string cudaText(cudaError_t error, const char *what) {
  return std::string(what) + ": " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")";
}

std::string check(cudaError_t error, const char *what) {
  return error == cudaSuccess ? std::string() : cudaText(error, what);
}

void require(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw DeviceError(cudaText(error, what));
}

std::string checkLt(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return "";
  return std::string(what) + ": cuBLASLt status " +
         std::to_string(static_cast<int>(status));
}

class CudaStream : public DeviceStream {
public:
  cudaStream_t stream = nullptr;
  ~CudaStream() override {
    if (stream)
      cudaStreamDestroy(stream);
  }
};

/// Events made once and lent again: a step timed on the device records two
/// per compute kernel (hundreds for GPT-2), and a cudaEventCreate/Destroy
/// pair each would cost more than the smallest kernels they time. An
/// event returns here when its holder drops it; re-recording it is then
/// safe, as nothing waits on its old record. Shared by the device and the
/// events it lent, which may outlive it.
class EventPool {
public:
  explicit EventPool(int ordinal) : ordinal(ordinal) {}
  EventPool(const EventPool &) = delete;
  EventPool &operator=(const EventPool &) = delete;
  ~EventPool() {
    cudaSetDevice(ordinal);
    for (std::vector<cudaEvent_t> &events : idle)
      for (cudaEvent_t event : events)
        cudaEventDestroy(event);
  }

  /// An idle event of the kind asked for, or a new one.
  cudaEvent_t take(bool timed) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      std::vector<cudaEvent_t> &events = idle[timed];
      if (!events.empty()) {
        cudaEvent_t event = events.back();
        events.pop_back();
        return event;
      }
    }
    cudaEvent_t event = nullptr;
    require(cudaEventCreateWithFlags(&event, timed ? cudaEventDefault
                                                   : cudaEventDisableTiming),
            "cudaEventCreate");
    return event;
  }
  void give(cudaEvent_t event, bool timed) {
    std::lock_guard<std::mutex> lock(mutex);
    idle[timed].push_back(event);
  }

private:
  int ordinal;
  std::mutex mutex;
  std::vector<cudaEvent_t> idle[2]; // [timed]
};

class CudaEvent : public DeviceEvent {
public:
  CudaEvent(std::shared_ptr<EventPool> pool, bool timed)
      : event(pool->take(timed)), pool(std::move(pool)), timed(timed) {}
  ~CudaEvent() override { pool->give(event, timed); }
  const cudaEvent_t event;

private:
  std::shared_ptr<EventPool> pool;
  bool timed;
};

cudaStream_t raw(DeviceStream &s) { return static_cast<CudaStream &>(s).stream; }

class CudaGraph : public DeviceGraph {
public:
  cudaGraphExec_t exec = nullptr;
  ~CudaGraph() override {
    if (exec)
      cudaGraphExecDestroy(exec);
  }
};

cudaDataType_t dataType(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_BF16: return CUDA_R_16BF;
  case FSDPRT_F16: return CUDA_R_16F;
  default: return CUDA_R_32F;
  }
}

/// cuBLASLt's descriptors and algorithm for one Gemm.
struct LtGemm : PreparedGemm {
  Gemm gemm;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// Algorithms for operands less aligned than cuBLASLt assumes (256
  /// bytes), by their alignment: views into a buffer (a convolution's
  /// image, a recurrent layer's gate block) start anywhere.
  std::map<uint32_t, cublasLtMatmulAlgo_t> lessAligned;
  ~LtGemm() override {
    for (cublasLtMatrixLayout_t layout : {a, b, y})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

/// cuBLASLt's workspace: what its heuristics may use.
constexpr size_t kLtWorkspace = 32 << 20;
/// The operand alignment cuBLASLt's heuristics assume unless told less.
constexpr uint32_t kLtAssumedAlignment = 256;

class CudaDevice : public Device {
public:
  explicit CudaDevice(int ordinal) : ordinal(ordinal) {
    int count = 0;
    require(cudaGetDeviceCount(&count),
            "no usable CUDA device (a GPU and NVIDIA's driver are needed)");
    if (ordinal >= count)
      throw DeviceError("there is no CUDA device " + std::to_string(ordinal) +
                        "; this machine has " + std::to_string(count));
    require(cudaSetDevice(ordinal), "cudaSetDevice");
    cudaDeviceProp prop{};
    require(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
    name = "cuda:" + std::to_string(ordinal) + " (" + prop.name + ", sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor) + ")";
    if (prop.major < 8)
      throw DeviceError(name + ": this build's kernels are for sm_80 and "
                        "later (compute capability 8.0)");
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS)
      throw DeviceError(name + ": cannot create a cuBLASLt handle");
    require(cudaMalloc(&ltWorkspace, kLtWorkspace), "cuBLASLt's workspace");
  }
  ~CudaDevice() override {
    cudaSetDevice(ordinal);
    cudaDeviceSynchronize();
    cudaFree(ltWorkspace);
    cublasLtDestroy(lt);
#ifdef FSDP_HAVE_CUDNN
    executables.clear();
    description.reset();
    if (cudnn)
      cudnnDestroy(cudnn);
#endif
  }

  std::string describe() const override { return name; }
  bool hostMemory() const override { return false; }

  void *allocate(uint64_t bytes) override {
    use();
    void *memory = nullptr;
    if (cudaMalloc(&memory, std::max<uint64_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError(); // out of memory is not sticky
      return nullptr;
    }
    return memory;
  }
  void free(void *memory) override {
    use();
    cudaFree(memory);
  }
  void copy(void *dst, const void *src, uint64_t bytes, CopyKind kind) override {
    use();
    require(cudaDeviceSynchronize(), "before a copy");
    cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                       : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
    if (cudaError_t e = cudaMemcpy(dst, src, bytes, k); e != cudaSuccess)
      throw DeviceError(cudaText(e, "cudaMemcpy") + ": " +
                        std::to_string(bytes) + " bytes from " +
                        describePointer(src) + " to " + describePointer(dst));
    require(cudaDeviceSynchronize(), "after a copy");
  }
  /// What the driver knows of `p`, for a failed copy's message.
  static std::string describePointer(const void *p) {
    char at[32];
    std::snprintf(at, sizeof at, "%p", p);
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return std::string(at) + " (unknown to the driver)";
    }
    const char *type = a.type == cudaMemoryTypeDevice    ? "device"
                       : a.type == cudaMemoryTypeHost    ? "pinned host"
                       : a.type == cudaMemoryTypeManaged ? "managed"
                                                         : "pageable host";
    bool onDevice =
        a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
    return std::string(at) + " (" + type +
           (onDevice ? " memory of device " + std::to_string(a.device)
                     : std::string(" memory")) +
           ")";
  }
  void fill(void *dst, uint8_t value, uint64_t bytes) override {
    use();
    require(cudaDeviceSynchronize(), "before a fill");
    require(cudaMemset(dst, value, bytes), "cudaMemset");
    require(cudaDeviceSynchronize(), "after a fill");
  }

  std::unique_ptr<DeviceStream> createStream() override {
    use();
    auto s = std::make_unique<CudaStream>();
    require(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
            "cudaStreamCreate");
    return s;
  }
  std::unique_ptr<DeviceStream> createPriorityStream() override {
    use();
    int least = 0, greatest = 0;
    require(cudaDeviceGetStreamPriorityRange(&least, &greatest),
            "cudaDeviceGetStreamPriorityRange");
    auto s = std::make_unique<CudaStream>();
    require(cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking,
                                         greatest),
            "cudaStreamCreateWithPriority");
    return s;
  }
  bool finished(const DeviceEvent &event) override {
    cudaError_t status =
        cudaEventQuery(static_cast<const CudaEvent &>(event).event);
    if (status == cudaErrorNotReady)
      return false;
    if (status != cudaSuccess)
      cudaGetLastError(); // a fault: the synchronisation reports it
    return true;
  }
  bool owns(const void *p) override {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice ||
           attributes.type == cudaMemoryTypeManaged;
  }
  std::unique_ptr<DeviceEvent> record(DeviceStream &s) override {
    use();
    auto e = std::make_unique<CudaEvent>(events, false);
    require(cudaEventRecord(e->event, raw(s)), "cudaEventRecord");
    return e;
  }
  std::unique_ptr<DeviceEvent> recordTimed(DeviceStream &s) override {
    use();
    auto e = std::make_unique<CudaEvent>(events, true);
    require(cudaEventRecord(e->event, raw(s)), "cudaEventRecord");
    return e;
  }
  double elapsed(const DeviceEvent &a, const DeviceEvent &b) override {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, static_cast<const CudaEvent &>(a).event,
                             static_cast<const CudaEvent &>(b).event) !=
        cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return ms / 1e3;
  }
  void wait(DeviceStream &s, const DeviceEvent &event) override {
    use();
    require(cudaStreamWaitEvent(raw(s), static_cast<const CudaEvent &>(event).event, 0),
            "cudaStreamWaitEvent");
  }
  std::string synchronize(DeviceStream &s) override {
    use();
    return check(cudaStreamSynchronize(raw(s)), "a kernel failed");
  }

  std::string unary(DeviceStream &s, Unary op, const float *x, float *y,
                    int64_t n, UnaryParams p) override {
    return check(launchUnary(op, p, x, y, n, raw(s)), "unary kernel");
  }
  std::string floatClass(DeviceStream &s, const FloatClassBody &body,
                         int64_t n) override {
    return check(launchFloatClass(body, n, raw(s)), "is_inf/isnan kernel");
  }
  std::string cast(DeviceStream &s, bool toHalf, fsdprt_dtype_t half,
                   const void *x, void *y, int64_t n) override {
    return check(launchCast(toHalf, half, x, y, n, raw(s)), "cast kernel");
  }
  std::string anyCast(DeviceStream &s, fsdprt_dtype_t from, fsdprt_dtype_t to,
                      const void *x, void *y, int64_t n) override {
    return check(launchAnyCast(from, to, x, y, n, raw(s)), "cast kernel");
  }
  std::string unary64(DeviceStream &s, Unary op, const int64_t *x,
                      int64_t *y, int64_t n) override {
    return check(launchUnary64(op, x, y, n, raw(s)), "int64 unary kernel");
  }
  std::string binary(DeviceStream &s, Binary op, const Broadcast &plan,
                     const float *a, const float *b, float *y,
                     int64_t n) override {
    return check(launchBinary(op, plan, a, b, y, n, raw(s)), "binary kernel");
  }
  std::string binary(DeviceStream &s, Binary op, const Broadcast &plan,
                     const int64_t *a, const int64_t *b, int64_t *y,
                     int64_t n) override {
    return check(launchBinary(op, plan, a, b, y, n, raw(s)),
                 "int64 binary kernel");
  }
  std::string integerBinary(DeviceStream &s, Binary op, fsdprt_dtype_t dtype,
                            const Broadcast &plan, const void *a, const void *b,
                            void *y, int64_t n) override {
    return check(launchIntegerBinary(op, dtype, plan, a, b, y, n, raw(s)),
                 "integer binary kernel");
  }
  std::string powInt64(DeviceStream &s, fsdprt_dtype_t exponent,
                       const Broadcast &plan, const int64_t *a, const void *b,
                       int64_t *y, int64_t n) override {
    return check(launchPowInt64(exponent, plan, a, b, y, n, raw(s)),
                 "int64 pow kernel");
  }
  std::string pad(DeviceStream &s, size_t elementSize, const PadShape &shape,
                  const void *x, void *y, int64_t n, uint64_t fill) override {
    return check(launchPad(elementSize, shape, x, y, n, fill, raw(s)),
                 "pad kernel");
  }
  std::string trilu(DeviceStream &s, size_t elementSize, const void *x,
                    void *y, int64_t n, int64_t rows, int64_t cols, int64_t k,
                    const int64_t *kInput, bool upper) override {
    return check(launchTrilu(elementSize, x, y, n, rows, cols, k, kInput,
                             upper, raw(s)),
                 "trilu kernel");
  }
  std::string cumsum(DeviceStream &s, fsdprt_dtype_t dtype, const void *x,
                     void *y, int64_t lines, int64_t dim, int64_t inner,
                     bool exclusive, bool reverse,
                     const CumsumAxisInput &axisInput) override {
    return check(launchCumsum(dtype, x, y, lines, dim, inner, exclusive,
                              reverse, raw(s), axisInput),
                 "cumsum kernel");
  }
  std::string gatherElements(DeviceStream &s, size_t elementSize,
                             bool indices32, const AxisWalk &walk,
                             const void *data, const void *indices, void *y,
                             int64_t n, ErrorSlot *error) override {
    return check(launchGatherElements(elementSize, indices32, walk, data,
                                      indices, y, n, error, raw(s)),
                 "gather_elements kernel");
  }
  std::string scatterElements(DeviceStream &s, const ScatterArgs &args,
                              int64_t lines) override {
    return check(launchScatterElements(args, lines, raw(s)),
                 "scatter_elements kernel");
  }
  std::string scatterND(DeviceStream &s, const ScatterArgs &args) override {
    return check(launchScatterND(args, raw(s)), "scatter_nd kernel");
  }
  std::string dropout(DeviceStream &s, const DropoutBody &body) override {
    return check(launchDropout(body, raw(s)), "dropout kernel");
  }
  std::string draw(DeviceStream &s, const DrawBody &body) override {
    return check(launchDraw(body, raw(s)), "random generator kernel");
  }
  std::string softmax(DeviceStream &s, bool log, const float *x, float *y,
                      int64_t outer, int64_t n, int64_t inner) override {
    return check(launchSoftmax(log, x, y, outer, n, inner, raw(s)), "softmax kernel");
  }
  std::string logic(DeviceStream &s, Logic op, fsdprt_dtype_t dtype,
                    const Broadcast &plan, const void *a, const void *b,
                    uint8_t *y, int64_t n) override {
    return check(launchLogic(op, dtype, plan, a, b, y, n, raw(s)),
                 "comparison kernel");
  }
  std::string logicalNot(DeviceStream &s, const uint8_t *x, uint8_t *y,
                         int64_t n) override {
    return check(launchNot(x, y, n, raw(s)), "not kernel");
  }
  std::string where(DeviceStream &s, size_t elementSize, const Broadcast &plan,
                    const uint8_t *cond, const void *a, const void *b, void *y,
                    int64_t n) override {
    return check(launchWhere(elementSize, plan, cond, a, b, y, n, raw(s)),
                 "where kernel");
  }
  std::string reduce(DeviceStream &s, Reduce kind, const ReducePlan &plan,
                     const float *x, float *y, float *scratch) override {
    return check(launchReduce(kind, plan, x, y, scratch, raw(s)),
                 "reduction kernel");
  }
  std::string integerReduce(DeviceStream &s,
                            const IntegerReduceBody &body) override {
    return check(launchIntegerReduce(body, raw(s)), "integer reduction kernel");
  }
  std::string norm(DeviceStream &s, bool rms, const float *x, const float *scale,
                   const float *bias, float *y, int64_t rows, int64_t n,
                   float eps, RowStats stats) override {
    return check(launchNorm(rms, x, scale, bias, y, rows, n, eps, stats, raw(s)),
                 "norm kernel");
  }
  std::string gather(DeviceStream &s, size_t elementSize, bool indices32,
                     const void *data, const void *indices, void *y,
                     int64_t outer, int64_t dim, int64_t count, int64_t inner,
                     ErrorSlot *error) override {
    return check(launchGather(elementSize, indices32, data, indices, y, outer,
                              dim, count, inner, error, raw(s)),
                 "gather kernel");
  }
  std::string gatherGrad(DeviceStream &s, bool indices32, const float *g,
                         const void *indices, float *y, int64_t outer,
                         int64_t dim, int64_t count, int64_t inner,
                         int64_t *scratch, ErrorSlot *error) override {
    return check(launchGatherGrad(indices32, g, indices, y, outer, dim, count,
                                  inner, scratch, error, raw(s)),
                 "gather gradient kernel");
  }
  std::string maxPoolIndices(DeviceStream &s, const MaxPoolIndicesBody &body,
                             int64_t planes) override {
    return check(launchMaxPoolIndices(body, planes, raw(s)),
                 "max_pool indices kernel");
  }
  std::string resize(DeviceStream &s, const ResizeBody &body,
                     int64_t n) override {
    return check(launchResize(body, n, raw(s)), "resize kernel");
  }
  std::string gridSample(DeviceStream &s, const GridSampleBody &body) override {
    return check(launchGridSample(body, raw(s)), "grid_sample kernel");
  }
  std::string globalMaxPool(DeviceStream &s, const float *x, float *y,
                            int64_t planes, int64_t inner) override {
    return check(launchGlobalMaxPool(x, y, planes, inner, raw(s)),
                 "global_max_pool kernel");
  }
  std::string argExtreme(DeviceStream &s, const ArgExtremeBody &body,
                         int64_t rows) override {
    return check(launchArgExtreme(body, rows, raw(s)), "arg_max/arg_min kernel");
  }
  std::string hardmax(DeviceStream &s, const float *x, float *y, int64_t outer,
                      int64_t n, int64_t inner) override {
    return check(launchHardmax(x, y, outer, n, inner, raw(s)),
                 "hardmax kernel");
  }
  std::string pool(DeviceStream &s, bool max, const PoolWindow &window,
                   const float *x, float *y, int64_t planes) override {
    return check(launchPool(max, window, x, y, planes, raw(s)), "pool kernel");
  }
  std::string poolGrad(DeviceStream &s, bool max, const PoolWindow &window,
                       const float *x, const float *g, float *dx,
                       int64_t planes) override {
    return check(launchPoolGrad(max, window, x, g, dx, planes, raw(s)),
                 "pool gradient kernel");
  }
  std::string batchNorm(DeviceStream &s, const float *x, const float *scale,
                        const float *bias, const float *mean, const float *var,
                        float *y, int64_t n, int64_t channels, int64_t inner,
                        float eps) override {
    return check(launchBatchNorm(x, scale, bias, mean, var, y, n, channels,
                                 inner, eps, raw(s)),
                 "batch norm kernel");
  }
  std::string batchNormTrain(DeviceStream &s,
                             const BatchNormTrainBody &body) override {
    return check(launchBatchNormTrain(body, raw(s)),
                 "batch norm training kernel");
  }
  std::string batchNormGrad(DeviceStream &s,
                            const BatchNormGradBody &body) override {
    return check(launchBatchNormGrad(body, raw(s)),
                 "batch norm gradient kernel");
  }
  std::string inverseStd(DeviceStream &s, const float *var, float *invStd,
                         int64_t channels, float eps) override {
    return check(launchInverseStd(var, invStd, channels, eps, raw(s)),
                 "inverse std kernel");
  }
  std::string recurrent(DeviceStream &s, const RecurrentBody &body,
                        int64_t n) override {
    return check(launchRecurrent(body, n, raw(s)), "recurrent step kernel");
  }
  std::string activationGrad(DeviceStream &s, const ActivationGradBody &body,
                             int64_t n) override {
    return check(launchActivationGrad(body, n, raw(s)),
                 "activation gradient kernel");
  }
  std::string normGrad(DeviceStream &s, const NormGradArgs &args) override {
    return check(launchNormGrad(args, raw(s)), "norm gradient kernel");
  }
  std::string adamw(DeviceStream &s, const AdamWBody &body,
                    int64_t n) override {
    return check(launchAdamW(body, n, raw(s)), "adamw kernel");
  }
  std::string sgd(DeviceStream &s, const SGDBody &body, int64_t n) override {
    return check(launchSGD(body, n, raw(s)), "sgd kernel");
  }
  std::string im2col(DeviceStream &s, const ConvWindow &window, const float *x,
                     float *col, int64_t images) override {
    return check(launchIm2col(window, x, col, images, raw(s)), "im2col kernel");
  }
  std::string col2im(DeviceStream &s, const ConvWindow &window,
                     const float *col, float *x, int64_t images) override {
    return check(launchCol2im(window, col, x, images, raw(s)), "col2im kernel");
  }
  std::string concat(DeviceStream &s, size_t elementSize,
                     const void *const *pieces, void *whole,
                     const std::vector<Piece> &plan) override {
    return check(launchConcat(elementSize, pieces, whole, plan, raw(s)),
                 "concat kernel");
  }
  std::string split(DeviceStream &s, size_t elementSize, const void *whole,
                    void *const *pieces,
                    const std::vector<Piece> &plan) override {
    return check(launchSplit(elementSize, whole, pieces, plan, raw(s)),
                 "split kernel");
  }
  std::string copyElements(DeviceStream &s, size_t elementSize, const void *x,
                           void *y, int64_t n) override {
    return check(launchCopy(elementSize, x, y, n, raw(s)), "copy kernel");
  }
  std::string pack(DeviceStream &s, size_t elementSize,
                   const void *const *members, void *flat,
                   const PackPlan &plan) override {
    return check(launchPack(elementSize, members, flat, plan, raw(s)),
                 "pack kernel");
  }
  std::string stridedRead(DeviceStream &s, size_t elementSize,
                          const Broadcast &plan, const void *x, void *y,
                          int64_t offset, int64_t n) override {
    return check(launchStridedRead(elementSize, plan, x, y, offset, n, raw(s)),
                 "strided read kernel");
  }
  std::string nllLoss(DeviceStream &s, const NllInputs &in, int64_t positions,
                      bool none, bool mean, float *scratch, float *y) override {
    return check(launchNllLoss(in, positions, none, mean, scratch, y, raw(s)),
                 "nll_loss kernel");
  }
  std::string nllLossGrad(DeviceStream &s, const NllInputs &in,
                          int64_t positions, const float *g, bool none,
                          bool mean, float *scratch, float *y,
                          int64_t n) override {
    return check(launchNllLossGrad(in, positions, g, none, mean, scratch, y, n,
                                   raw(s)),
                 "nll_loss gradient kernel");
  }
  std::string crossEntropy(DeviceStream &s, const CrossEntropyInputs &in,
                           int64_t positions, bool none, bool mean,
                           float *scratch, float *y) override {
    return check(launchCrossEntropy(in, positions, none, mean, scratch, y, raw(s)),
                 "cross-entropy kernel");
  }
  std::string crossEntropyGrad(DeviceStream &s, const CrossEntropyInputs &in,
                               int64_t positions, const float *g, bool none,
                               bool mean, float *scratch, float *y) override {
    return check(launchCrossEntropyGrad(in, positions, g, none, mean, scratch,
                                        y, raw(s)),
                 "cross-entropy gradient kernel");
  }
  std::string attention(DeviceStream &s, const AttentionArgs &args) override {
    return check(launchAttention(args, raw(s)), "attention kernel");
  }
  std::string attentionGrad(DeviceStream &s,
                            const AttentionArgs &args) override {
    return check(launchAttentionGrad(args, raw(s)),
                 "attention gradient kernels");
  }

  bool nativeGraphs() const override { return true; }
  std::string beginCapture(DeviceStream &s) override {
    use();
    return check(cudaStreamBeginCapture(raw(s), cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture");
  }
  std::unique_ptr<DeviceGraph> endCapture(DeviceStream &s, std::string &error) override {
    use();
    cudaGraph_t graph = nullptr;
    error = check(cudaStreamEndCapture(raw(s), &graph), "cudaStreamEndCapture");
    if (!error.empty())
      return nullptr;
    auto captured = std::make_unique<CudaGraph>();
    error = check(cudaGraphInstantiate(&captured->exec, graph, 0), "cudaGraphInstantiate");
    cudaGraphDestroy(graph);
    return error.empty() ? std::move(captured) : nullptr;
  }
  std::string launchGraph(DeviceStream &s, DeviceGraph &graph) override {
    use();
    return check(cudaGraphLaunch(static_cast<CudaGraph &>(graph).exec, raw(s)),
                 "cudaGraphLaunch");
  }

  std::shared_ptr<PreparedGemm> prepareGemm(const Gemm &gemm,
                                            std::string &error) override;
  /// cuBLASLt's first choice for `p` with operands aligned to `alignment`
  /// bytes; "" or why none.
  std::string chooseAlgo(const LtGemm &p, uint32_t alignment,
                         cublasLtMatmulAlgo_t &algo);
#ifdef FSDP_HAVE_CUDNN
  std::shared_ptr<PreparedGraph>
  prepareAttention(const cudnn::SdpaShape &shape, std::string &why) override;
  std::shared_ptr<PreparedGraph> prepareConv(const cudnn::ConvShape &shape,
                                             std::string &why) override;
  std::shared_ptr<PreparedGraph> prepareNorm(const cudnn::NormShape &shape,
                                             std::string &why) override;
  std::string runGraph(DeviceStream &s, PreparedGraph &graph,
                       const std::vector<void *> &tensors,
                       void *workspace) override;
#endif
  std::string gemm(DeviceStream &s, PreparedGemm &prepared, const void *a,
                   const void *b, const void *bias, void *y) override;

  int index() const { return ordinal; }

private:
  void use() const { cudaSetDevice(ordinal); }

  int ordinal;
  std::string name;
  std::shared_ptr<EventPool> events = std::make_shared<EventPool>(ordinal);
  cublasLtHandle_t lt = nullptr;
  void *ltWorkspace = nullptr;
#ifdef FSDP_HAVE_CUDNN
  /// cuDNN's handle and its description of this GPU, made at the first
  /// graph; `cudnnError` says why there are none.
  bool cudnnTried = false;
  cudnnHandle_t cudnn = nullptr;
  std::unique_ptr<cudnn::DeviceDescription> description;
  std::string cudnnError;
  /// Compiled graphs (or why cuDNN has none) by their description.
  struct Compiled {
    std::shared_ptr<const cudnn::Executable> exe;
    std::string why;
  };
  std::map<std::string, Compiled> executables;
  bool startCudnn();
  /// `shape`'s graph compiled for this GPU, or nullptr and why not.
  template <class Shape>
  std::shared_ptr<PreparedGraph> compileOnCudnn(const Shape &shape,
                                                std::string &why);
#endif
};

#ifdef FSDP_HAVE_CUDNN
/// A compiled cuDNN graph and its arguments, bound at the first launch
/// (the workspace's address is known then) and again if they move.
struct CudnnGraph : PreparedGraph {
  std::shared_ptr<const cudnn::Executable> exe;
  std::shared_ptr<cudnn::Executable::Arguments> args;
  std::vector<void *> tensors;
  void *workspace = nullptr;
  int64_t workspaceBytes() const override { return exe->workspaceBytes(); }
  std::string name() const override { return exe->name(); }
};

bool CudaDevice::startCudnn() {
  if (cudnnTried)
    return cudnn != nullptr;
  cudnnTried = true;
  if (const char *env = std::getenv("FSDPRT_CUDNN");
      env && std::string(env) == "off") {
    cudnnError = "cuDNN is turned off (FSDPRT_CUDNN=off)";
    return false;
  }
  use();
  cudnnHandle_t handle = nullptr;
  if (cudnnStatus_t s = cudnnCreate(&handle); s != CUDNN_STATUS_SUCCESS) {
    cudnnError = name + ": cudnnCreate: " + cudnnGetErrorString(s);
    return false;
  }
  description = cudnn::DeviceDescription::fromHandle(handle, cudnnError);
  if (!description) {
    cudnnDestroy(handle);
    return false;
  }
  cudnn = handle;
  return true;
}

template <class Shape>
std::shared_ptr<PreparedGraph> CudaDevice::compileOnCudnn(const Shape &shape,
                                                          std::string &why) {
  if (!startCudnn()) {
    why = cudnnError;
    return nullptr;
  }
  use();
  // One compile per distinct graph: a model's layers share their shapes,
  // and compiling attention's engines takes a second or more each.
  std::string key = cudnn::describe(shape);
  if constexpr (std::is_same_v<Shape, cudnn::SdpaShape>)
    key += " scale " + std::to_string(shape.scale);
  if constexpr (std::is_same_v<Shape, cudnn::NormShape>) {
    // The graph holds epsilon and momentum as values: every bit counts.
    char values[64];
    std::snprintf(values, sizeof values, " epsilon %a momentum %a",
                  shape.epsilon, shape.momentum);
    key += values;
  }
  auto [it, fresh] = executables.try_emplace(key);
  if (fresh) {
    it->second.exe = cudnn::Executable::compile(shape, *description, why);
    it->second.why = why;
  }
  if (!it->second.exe) {
    why = it->second.why;
    return nullptr;
  }
  auto graph = std::make_shared<CudnnGraph>();
  graph->exe = it->second.exe;
  return graph;
}

std::shared_ptr<PreparedGraph>
CudaDevice::prepareAttention(const cudnn::SdpaShape &shape, std::string &why) {
  return compileOnCudnn(shape, why);
}

std::shared_ptr<PreparedGraph>
CudaDevice::prepareConv(const cudnn::ConvShape &shape, std::string &why) {
  return compileOnCudnn(shape, why);
}

std::shared_ptr<PreparedGraph>
CudaDevice::prepareNorm(const cudnn::NormShape &shape, std::string &why) {
  return compileOnCudnn(shape, why);
}

std::string CudaDevice::runGraph(DeviceStream &s, PreparedGraph &prepared,
                                 const std::vector<void *> &tensors,
                                 void *workspace) {
  use();
  auto &graph = static_cast<CudnnGraph &>(prepared);
  if (!graph.args || graph.tensors != tensors || graph.workspace != workspace) {
    std::string error;
    graph.args = graph.exe->bind(tensors, workspace, error);
    if (!graph.args)
      return error;
    graph.tensors = tensors;
    graph.workspace = workspace;
  }
  if (cudnnStatus_t st = cudnnSetStream(cudnn, raw(s));
      st != CUDNN_STATUS_SUCCESS)
    return graph.exe->name() + ": cudnnSetStream: " + cudnnGetErrorString(st);
  return graph.exe->run(cudnn, *graph.args);
}
#endif

/// A column-major layout of `rows` x `cols` at `ld`, batched.
std::string layout(cublasLtMatrixLayout_t *out, cudaDataType_t type,
                   int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                   int64_t stride) {
  if (std::string e = checkLt(cublasLtMatrixLayoutCreate(out, type, rows, cols, ld),
                              "cublasLtMatrixLayoutCreate");
      !e.empty())
    return e;
  if (batch == 1)
    return "";
  int32_t count = static_cast<int32_t>(batch);
  if (std::string e = checkLt(cublasLtMatrixLayoutSetAttribute(
                                  *out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                  &count, sizeof(count)),
                              "batch count");
      !e.empty())
    return e;
  return checkLt(cublasLtMatrixLayoutSetAttribute(
                     *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                     sizeof(stride)),
                 "batch stride");
}

std::shared_ptr<PreparedGemm> CudaDevice::prepareGemm(const Gemm &g,
                                                      std::string &error) {
  use();
  auto p = std::make_shared<LtGemm>();
  p->gemm = g;
  cudaDataType_t type = dataType(g.dtype);
  // Y^T[n, m] = op(B)^T[n, k] op(A)^T[k, m]: B's stored matrix is the
  // first operand, A's the second.
  cublasOperation_t opFirst = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue =
      g.activation == GemmActivation::Relu
          ? (g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
      : g.activation == GemmActivation::GeluTanh
          ? (g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
          : (g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  cudaDataType_t scale = CUDA_R_32F;
  error = checkLt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, scale),
                  "cublasLtMatmulDescCreate");
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const void *value,
                 size_t bytes) {
    if (error.empty())
      error = checkLt(cublasLtMatmulDescSetAttribute(p->desc, attr, value, bytes),
                      "cublasLtMatmulDescSetAttribute");
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst));
  set(CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond));
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  if (g.bias)
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type));
  int64_t firstRows = g.transB ? g.k : g.n, firstCols = g.transB ? g.n : g.k;
  int64_t secondRows = g.transA ? g.m : g.k, secondCols = g.transA ? g.k : g.m;
  if (error.empty())
    error = layout(&p->a, type, firstRows, firstCols, g.ldb, g.batch, g.strideB);
  if (error.empty())
    error = layout(&p->b, type, secondRows, secondCols, g.lda, g.batch, g.strideA);
  if (error.empty())
    error = layout(&p->y, type, g.n, g.m, g.ldy, g.batch, g.strideY);
  if (error.empty())
    error = chooseAlgo(*p, kLtAssumedAlignment, p->algo);
  if (!error.empty())
    return nullptr;
  return p;
}

std::string CudaDevice::chooseAlgo(const LtGemm &p, uint32_t alignment,
                                   cublasLtMatmulAlgo_t &algo) {
  cublasLtMatmulPreference_t preference = nullptr;
  std::string error = checkLt(cublasLtMatmulPreferenceCreate(&preference),
                              "cublasLtMatmulPreferenceCreate");
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr,
                    const void *value, size_t bytes, const char *what) {
    if (error.empty())
      error = checkLt(
          cublasLtMatmulPreferenceSetAttribute(preference, attr, value, bytes),
          what);
  };
  size_t workspace = kLtWorkspace;
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
         sizeof(workspace), "workspace preference");
  if (alignment < kLtAssumedAlignment)
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      prefer(attr, &alignment, sizeof(alignment), "alignment preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (error.empty())
    error = checkLt(cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.y,
                                                   p.y, preference, 1, &result,
                                                   &found),
                    "cublasLtMatmulAlgoGetHeuristic");
  if (preference)
    cublasLtMatmulPreferenceDestroy(preference);
  if (error.empty() && found == 0)
    error = "cuBLASLt has no algorithm for this GEMM (m " +
            std::to_string(p.gemm.m) + ", n " + std::to_string(p.gemm.n) +
            ", k " + std::to_string(p.gemm.k) + ", operands aligned to " +
            std::to_string(alignment) + " bytes)";
  if (error.empty())
    algo = result.algo;
  return error;
}

std::string CudaDevice::gemm(DeviceStream &s, PreparedGemm &prepared,
                             const void *a, const void *b, const void *bias,
                             void *y) {
  auto &p = static_cast<LtGemm &>(prepared);
  if (p.gemm.m == 0 || p.gemm.n == 0 || p.gemm.batch == 0)
    return "";
  if (bias)
    if (std::string e = checkLt(cublasLtMatmulDescSetAttribute(
                                    p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                    &bias, sizeof(bias)),
                                "the bias");
        !e.empty())
      return e;
  // The algorithm chosen when planning assumes every operand 256-byte
  // aligned, as cuBLASLt does by default; one for the operands' actual
  // alignment otherwise (a misaligned operand fails the matmul or, with a
  // vectorised kernel, reads wrong).
  uintptr_t addresses = kLtAssumedAlignment;
  for (const void *operand : {a, b, bias, static_cast<const void *>(y)})
    addresses |= reinterpret_cast<uintptr_t>(operand);
  auto alignment = static_cast<uint32_t>(addresses & (~addresses + 1));
  const cublasLtMatmulAlgo_t *algo = &p.algo;
  if (alignment < kLtAssumedAlignment) {
    auto found = p.lessAligned.find(alignment);
    if (found == p.lessAligned.end()) {
      cublasLtMatmulAlgo_t chosen{};
      if (std::string e = chooseAlgo(p, alignment, chosen); !e.empty())
        return e;
      found = p.lessAligned.emplace(alignment, chosen).first;
    }
    algo = &found->second;
  }
  float alpha = p.gemm.alpha, beta = p.gemm.beta;
  return checkLt(cublasLtMatmul(lt, p.desc, &alpha, b, p.a, a, p.b, &beta, y,
                                p.y, y, p.y, algo, ltWorkspace, kLtWorkspace,
                                raw(s)),
                 "cublasLtMatmul");
}

} // namespace

cudaStream_t nativeStream(DeviceStream &stream) { return raw(stream); }

int deviceOrdinal(const Device &device) {
  return static_cast<const CudaDevice &>(device).index();
}

} // namespace fsdprt::cuda

/// The plugin's entry (devices.cpp): the GPU `ordinal`, or nullptr with
/// `error` saying why not.
extern "C" __attribute__((visibility("default"))) fsdprt::cuda::Device *
fsdprt_cuda_open_device(int ordinal, std::string *error) {
  try {
    return new fsdprt::cuda::CudaDevice(ordinal);
  } catch (const std::exception &e) {
    *error = e.what();
    return nullptr;
  }
}
