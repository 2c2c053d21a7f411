//===- devices.cpp - The backend for a session's device option ------------===//

#include "backend.h"

#include <cctype>

namespace fsdprt {

std::unique_ptr<Backend> createBackend(const std::string &device,
                                       std::string &error) {
  if (device.empty() || device == "cpu")
    return createCpuBackend();
  if (device == "fake-cuda")
    return createFakeCudaBackend();
  bool cuda = device == "cuda";
  if (!cuda && device.rfind("cuda:", 0) == 0 && device.size() > 5) {
    cuda = true;
    for (size_t i = 5; i < device.size(); ++i)
      cuda &= std::isdigit(static_cast<unsigned char>(device[i])) != 0;
  }
  if (cuda)
    error = "device '" + device +
            "': this libfsdprt has no CUDA backend yet; the plan runs on "
            "'cpu' (docs/gpu.md says what exists)";
  else
    error = "unknown device '" + device + "'; expected cpu, cuda or cuda:N";
  return nullptr;
}

} // namespace fsdprt
