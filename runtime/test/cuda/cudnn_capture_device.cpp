//===- cudnn_capture_device.cpp - A GPU's cuDNN description, as JSON ------===//
//
// Usage: fsdp-cudnn-capture-device OUT.json [DEVICE]
//
// Writes cuDNN's device-property description of CUDA device DEVICE (0) to
// OUT.json: runtime/backends/cuda/devices/h100.json and h200.json were
// captured this way on lent GPUs. Prints the device, the driver and cuDNN's
// version beside it (support may change with the cuDNN version). Without a
// GPU it says so and exits 77 (skipped).
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.json [DEVICE]\n", argv[0]);
    return 2;
  }
  int32_t device = argc > 2 ? std::atoi(argv[2]) : 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count <= device) {
    std::printf("skipped: no CUDA device %d (%s)\n", device,
                err != cudaSuccess ? cudaGetErrorString(err)
                                   : "too few devices");
    return 77;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, device);
  int driver = 0;
  cudaDriverGetVersion(&driver);

  cudnnBackendDescriptor_t desc = nullptr;
  cudnnStatus_t s =
      cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &desc);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(desc, CUDNN_ATTR_DEVICEPROP_DEVICE_ID,
                                 CUDNN_TYPE_INT32, 1, &device);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendFinalize(desc);
  int64_t size = 0;
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendGetAttribute(desc,
                                 CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, 0, &size, nullptr);
  std::vector<char> json(size + 1, 0);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendGetAttribute(desc,
                                 CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                 CUDNN_TYPE_CHAR, size, &size, json.data());
  if (s != CUDNN_STATUS_SUCCESS) {
    char message[1024] = {0};
    cudnnGetLastErrorString(message, sizeof(message));
    std::fprintf(stderr, "capturing device %d (%s): %s: %s\n", device,
                 prop.name, cudnnGetErrorString(s), message);
    return 1;
  }
  cudnnBackendDestroyDescriptor(desc);

  FILE *out = std::fopen(argv[1], "w");
  if (!out || std::fputs(json.data(), out) < 0 || std::fclose(out) != 0) {
    std::fprintf(stderr, "capturing device %d: cannot write %s\n", device,
                 argv[1]);
    return 1;
  }
  std::printf("%s: sm_%d%d, %d SMs, driver %d, cuDNN %zu: wrote %s\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              driver, cudnnGetVersion(), argv[1]);
  std::printf("%s\n", json.data());
  return 0;
}
