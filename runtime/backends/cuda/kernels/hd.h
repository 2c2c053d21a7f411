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

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_HD_H
