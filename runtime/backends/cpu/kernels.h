//===- kernels.h - CPU kernels: registry and shared helpers -----*- C++ -*-===//

#ifndef FSDPRT_BACKENDS_CPU_KERNELS_H
#define FSDPRT_BACKENDS_CPU_KERNELS_H

#include "../../src/backend.h"
#include "../cuda/kernels/grid_sample.h"
#include "../cuda/kernels/resize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace fsdprt::cpu {

using Factory = KernelFn (*)(KernelArgs &);
using Registry = std::map<std::string, Factory>;

/// Each family adds its kernels (docs/plan-format.md) to the registry.
void registerElementwise(Registry &registry);
void registerLinalg(Registry &registry);
void registerNN(Registry &registry);
void registerData(Registry &registry);
void registerOptim(Registry &registry);
void registerRandom(Registry &registry);
void registerRecurrent(Registry &registry);

//===----------------------------------------------------------------------===//
// Checks made when a kernel is prepared
//===----------------------------------------------------------------------===//

/// Throws KernelError unless `condition`.
inline void require(bool condition, const std::string &message) {
  if (!condition)
    throw KernelError(message);
}

/// Checks the number of inputs (within [minIn, maxIn]) and outputs.
void requireArity(const KernelArgs &args, size_t minIn, size_t maxIn,
                  size_t out);
void requireDtype(const Tensor &t, fsdprt_dtype_t dtype, const char *what);
/// Every input and output is F32.
void requireF32(const KernelArgs &args);
/// Every value of attribute `name` is at least `min`.
void requireAtLeast(const std::vector<int64_t> &values, int64_t min,
                    const char *name);
std::string shapeString(const std::vector<int64_t> &shape);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// Row-major element strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

/// The product of dims [begin, end) of `shape`.
int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end);
inline int64_t product(const std::vector<int64_t> &shape) {
  return product(shape, 0, shape.size());
}

/// NumPy broadcasting of `shape` to `target`: the element strides to read
/// `shape` at each index of `target` (0 along stretched dims). Throws when
/// `shape` does not broadcast to `target`.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target,
                                      const char *what);

/// The NumPy broadcast of two shapes; throws when they do not broadcast.
std::vector<int64_t> broadcastShapes(const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b);

/// The element offset, for strides `strides`, of flat index `index` of
/// `shape` (row-major).
inline int64_t offsetOf(int64_t index, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides) {
  int64_t offset = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    offset += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return offset;
}

/// Element `i` of an index tensor (I64 or I32, checked by the kernel).
inline int64_t indexAt(const Tensor &t, int64_t i) {
  return t.dtype == FSDPRT_I64 ? t.as<int64_t>()[i] : t.as<int32_t>()[i];
}

/// The output size along one spatial dim of a window (ONNX Conv and the
/// pools) over `in` elements padded by `padBegin` and `padEnd`; -1 when the
/// window does not fit. With `ceil` a partial last window counts if it
/// starts inside the input or its leading padding (PyTorch's rule), also
/// when it is the only one (a window wider than the padded input).
int64_t windowOutput(int64_t in, int64_t padBegin, int64_t padEnd,
                     int64_t kernel, int64_t stride, int64_t dilation,
                     bool ceil);

/// The read that transpose, slice and expand share: y[i...] = x[offset +
/// sum(i_d * strides_d)] over y's indices. `stridedRead` checks the op's
/// attributes and shapes (KernelError) and plans it; any device runs it.
struct StridedRead {
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
bool isStridedRead(const std::string &op);
StridedRead stridedRead(const std::string &op, const KernelArgs &args);

/// A 2-D pooling window over x [N, C, H, W] giving [N, C, OH, OW]; `y` is
/// the pooled tensor (the forward's output, or the gradient flowing into it).
struct PoolWindow {
  std::vector<int64_t> k, st, pads, dil;
  bool includePad, ceil;
  int64_t h, w, oh, ow;

  /// Visits the input positions of output (i, j): `inside(ih * w + iw)` for
  /// those in x, and returns how many count for an average.
  template <typename Inside>
  int64_t visit(int64_t i, int64_t j, bool max, Inside inside) const {
    int64_t count = 0;
    for (int64_t a = 0; a < k[0]; ++a)
      for (int64_t b = 0; b < k[1]; ++b) {
        int64_t ih = i * st[0] - pads[0] + a * dil[0];
        int64_t iw = j * st[1] - pads[1] + b * dil[1];
        if (ih < 0 || ih >= h || iw < 0 || iw >= w) {
          // Padding never wins a max; it counts for an average only with
          // count_include_pad, and only up to the padded edge (a ceil_mode
          // window may reach past it).
          if (!max && includePad && ih < h + pads[2] && iw < w + pads[3])
            ++count;
          continue;
        }
        inside(ih * w + iw);
        ++count;
      }
    return std::max<int64_t>(count, 1);
  }
};

/// The window of max_pool, average_pool or pool_grad over x (its
/// attributes and the pooled shape `y` checked: KernelError); the CUDA
/// backend plans its pooling kernels with it too.
PoolWindow poolWindow(KernelArgs &args, const Tensor &x, const Tensor &y);

/// resize's plan of x to y from its attributes (checked: KernelError),
/// without the scales; the CUDA backend plans its resize kernel with it.
cuda::ResizePlan resizePlan(const KernelArgs &args, const Tensor &x,
                            const Tensor &y);

/// grid_sample's (grad: grid_sample_grad's) body from its attributes and
/// tensors (checked: KernelError), its Forward (InputGrad) step writing
/// the first output; the CPU backend and the CUDA backend both run it.
cuda::GridSampleBody gridSampleBody(const KernelArgs &args, bool grad);

/// A run-time scale's fault (cuda::resizeScaleFault's code and detail) in
/// words, as the CPU's resize reports it and the CUDA backend too.
std::string resizeScaleError(const cuda::ResizePlan &plan, int code,
                             int64_t detail);

/// pad's constant `value` in `dtype`, as bits (low bytes), as both
/// backends convert it; a non-zero constant for another dtype (bf16, f16)
/// is a KernelError.
uint64_t padFill(fsdprt_dtype_t dtype, double value);

//===----------------------------------------------------------------------===//
// Activations: one definition for the elementwise kernels and for linear's
// epilogue.
//===----------------------------------------------------------------------===//

enum class Activation { None, Relu, Gelu, GeluTanh, Silu, Tanh, Sigmoid };

/// The activation called `name` (plan-format.md's `linear`); throws
/// KernelError for another name.
Activation parseActivation(const std::string &name);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

inline float geluErf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2)));
}

/// 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), computed as
/// x * sigmoid(2u): one exp instead of libm's slower tanh.
inline float geluTanh(float x) {
  const float twoK = 2 * 0.7978845608028654f;
  return x / (1.0f + std::exp(-twoK * (x + 0.044715f * x * x * x)));
}

/// row[i] = f(row[i]) for the activation f of `kind`, i in [0, n): exp, erf
/// and tanh through vmath (vectorised, chosen at run time), so the
/// activation kernels and linear's epilogue give the same bits.
void applyActivation(Activation kind, float *row, int64_t n);

/// Calls `body` with the function of `kind` as a functor, so that loops in
/// `body` are compiled once per activation, without a switch per element.
template <typename Body> auto withActivation(Activation kind, Body body) {
  switch (kind) {
  case Activation::Relu:
    return body([](float x) { return x > 0 ? x : 0.0f; });
  case Activation::Gelu:
    return body([](float x) { return geluErf(x); });
  case Activation::GeluTanh:
    return body([](float x) { return geluTanh(x); });
  case Activation::Silu:
    return body([](float x) { return x * sigmoid(x); });
  case Activation::Tanh:
    return body([](float x) { return std::tanh(x); });
  case Activation::Sigmoid:
    return body([](float x) { return sigmoid(x); });
  case Activation::None:
    break;
  }
  return body([](float x) { return x; });
}

//===----------------------------------------------------------------------===//
// Parallelism
//===----------------------------------------------------------------------===//

/// Work done on the block [m0, m1) x [n0, n1) of a GEMM's output by the
/// thread that computed it, while the block is still in its cache.
using GemmEpilogue =
    std::function<void(int64_t m0, int64_t m1, int64_t n0, int64_t n1)>;

/// C = alpha * op(A) op(B) + beta * C (row-major), then `epilogue` on each
/// block. OpenBLAS runs single-threaded inside OpenMP threads: one thread
/// pool for the whole backend (OpenBLAS's own pool and OpenMP's would
/// fight over the cores). Called from inside a parallel region it runs on
/// the calling thread alone.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc,
           const GemmEpilogue &epilogue = nullptr);

/// Below this much work (items times cost per item, roughly in flops) a
/// loop stays on one thread: waking a team costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 15;

/// A static parallel loop over [0, n) when the work is worth it.
template <typename Body>
void parallelFor(int64_t n, int64_t costPerItem, Body body) {
  const bool parallel = n > 1 && n * costPerItem >= kParallelGrain;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < n; ++i)
    body(i);
}

} // namespace fsdprt::cpu

#endif // FSDPRT_BACKENDS_CPU_KERNELS_H
