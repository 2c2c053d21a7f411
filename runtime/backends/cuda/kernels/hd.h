//===- hd.h - Code that compiles for the GPU and for the host ----*- C++ -*-===//
//
// The CUDA backend's own kernels keep their arithmetic in kernel bodies:
// small structs of pointers and sizes with a FSDP_HD call operator. nvcc
// compiles them for the device (runtime/backends/cuda/kernels.cu launches
// them); any C++ compiler compiles them for the host, where the launchers
// of host_launch.h run them over the same index space, so the `cuda-host`
// tests compare every body with the CPU backend on a machine without a GPU.
//
// Two shapes of body:
//  - elementwise: `void operator()(int64_t i) const`, called once for each
//    index of [0, n);
//  - row: `template <class Group> void operator()(Group &g, int64_t row)
//    const`, called by every lane of a group for each row. A group is the
//    threads of a CUDA block on the device, lanes of host threads on the
//    host; a body strides over its row by `g.lane()` and `g.size()` and
//    combines the lanes' partial results with `g.sum(v)` and `g.max(v)`,
//    which every lane calls and which return the group's total to each.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_HD_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_HD_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FSDP_HD __host__ __device__
// Before a row body's call operator template: it calls its group's
// functions, which are __device__ for a block and host functions for a
// host group; each instantiation runs only on its own side.
#define FSDP_GROUP_BODY _Pragma("nv_exec_check_disable")
#else
#define FSDP_HD
#define FSDP_GROUP_BODY
#endif

namespace fsdprt::cuda {

/// The most dims an elementwise kernel indexes (after collapsing).
constexpr int kMaxDims = 8;

/// The offset of row `row`'s first element in rows [outer, n, inner]: the
/// n elements of a row lie `inner` apart (softmax, sums, cross-entropy).
FSDP_HD inline int64_t rowStart(int64_t row, int64_t n, int64_t inner) {
  return (row / inner) * n * inner + row % inner;
}

/// Where a kernel that checks its data as it runs (a label out of range,
/// an index out of bounds) records the first fault it meets: a code the
/// kernel defines (0: none) and a detail (the bad value). The launcher's
/// caller reads it after the kernel has finished and reports it with the
/// kernel's op and location.
struct ErrorSlot {
  int code;
  long long detail;
};

/// Records fault `code` with `detail` in `slot` unless one is there.
FSDP_HD inline void reportError(ErrorSlot *slot, int code, long long detail) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(&slot->code, 0, code) == 0)
    slot->detail = detail;
#else
  int none = 0;
  if (__atomic_compare_exchange_n(&slot->code, &none, code, false,
                                  __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    slot->detail = detail;
#endif
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_HD_H
