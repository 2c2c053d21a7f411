//===- cuda_smoke.cu - The CUDA toolchain builds, links and runs ----------===//
//
// Checks that the CUDA toolchain configured for the project produces working
// device code: a kernel writes each element's index and the host reads it
// back. Without a usable GPU it reports why and exits 77, which ctest counts
// as skipped.
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int kSkipped = 77;

__global__ void iota(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = i;
}

bool check(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return true;
  std::fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

} // namespace

int main() {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no usable CUDA device (%s)\n",
                error == cudaSuccess ? "0 devices" : cudaGetErrorString(error));
    return kSkipped;
  }
  constexpr int n = 1000;
  int *device = nullptr;
  if (!check(cudaMalloc(&device, n * sizeof(int)), "cudaMalloc"))
    return 1;
  iota<<<(n + 255) / 256, 256>>>(device, n);
  std::vector<int> host(n, -1);
  bool ok = check(cudaGetLastError(), "kernel launch") &&
            check(cudaMemcpy(host.data(), device, n * sizeof(int),
                             cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
  cudaFree(device);
  if (!ok)
    return 1;
  for (int i = 0; i < n; ++i) {
    if (host[i] != i) {
      std::fprintf(stderr, "FAIL: element %d is %d\n", i, host[i]);
      return 1;
    }
  }
  std::printf("ok: %d elements written on device 0 of %d\n", n, devices);
  return 0;
}
