//===- kernels.h - CPU kernels: registry and shared helpers -----*- C++ -*-===//

#ifndef FSDPRT_BACKENDS_CPU_KERNELS_H
#define FSDPRT_BACKENDS_CPU_KERNELS_H

#include "../../src/backend.h"

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

/// Throws KernelError unless `condition`.
inline void require(bool condition, const std::string &message) {
  if (!condition)
    throw KernelError(message);
}

/// Checks the number of inputs (within [min, max]) and outputs.
void requireArity(const KernelArgs &args, size_t minIn, size_t maxIn,
                  size_t out);
void requireDtype(const Tensor &t, fsdprt_dtype_t dtype, const char *what);
std::string shapeString(const std::vector<int64_t> &shape);

/// NumPy broadcasting of `shape` to `target`: the element strides to read
/// `shape` at each index of `target` (0 along stretched dims). Throws when
/// `shape` does not broadcast to `target`.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target,
                                      const char *what);

/// Row-major element strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end);

/// C = alpha * op(A) op(B) + beta * C (row-major) with OpenBLAS running
/// single-threaded inside OpenMP threads: one thread pool for the whole
/// backend (OpenBLAS's own pool and OpenMP's would fight over the cores).
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

/// Parallel loop over [0, n) when the work is worth it.
template <typename Body>
void parallelFor(int64_t n, int64_t costPerItem, Body body) {
  const bool parallel = n > 1 && n * costPerItem >= (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < n; ++i)
    body(i);
}

} // namespace fsdprt::cpu

#endif // FSDPRT_BACKENDS_CPU_KERNELS_H
