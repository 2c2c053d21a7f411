//===- devices.cpp - The backend for a session's device option ------------===//
//
// "cpu" (or empty): the CPU backend. "fake-cuda": the CUDA backend's host
// code on a device made of host memory (tests); "fake-cuda:strict" the same,
// refusing ops with no own kernel as a GPU does. "cuda" and "cuda:N": the
// CUDA backend on GPU N, whose device comes from the plugin
// libfsdprt_cuda.so: $FSDPRT_CUDA_PLUGIN, else the file beside the
// library (or, linked statically, beside the program or in ../lib), so
// that libfsdprt itself needs no CUDA library.
//
//===----------------------------------------------------------------------===//

#include "../backends/cuda/device.h"
#include "backend.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <unistd.h>

namespace fsdprt {
namespace {

using OpenDevice = cuda::Device *(*)(int ordinal, std::string *error);

/// Where the plugin may be, in the order tried.
std::vector<std::string> pluginPaths() {
  if (const char *path = std::getenv("FSDPRT_CUDA_PLUGIN"); path && *path)
    return {path};
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&pluginPaths), &info) || !info.dli_fname)
    return {"libfsdprt_cuda.so"};
  std::string self = info.dli_fname;
  std::string dir = self.substr(0, self.rfind('/') + 1);
  return {dir + "libfsdprt_cuda.so", dir + "../lib/libfsdprt_cuda.so"};
}

/// The plugin's entry, loaded once; nullptr with `error` saying why.
OpenDevice openDevice(std::string &error) {
  static std::mutex mutex;
  static OpenDevice entry = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (entry || !failure.empty()) {
    error = failure;
    return entry;
  }
  std::vector<std::string> paths = pluginPaths();
  std::string tried;
  for (const std::string &path : paths) {
    if (paths.size() > 1 && access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      failure = "cannot load the CUDA backend " + path + ": " + dlerror();
      break;
    }
    entry = reinterpret_cast<OpenDevice>(dlsym(handle, "fsdprt_cuda_open_device"));
    if (!entry)
      failure = path + " is not this libfsdprt's CUDA backend (no "
                       "fsdprt_cuda_open_device)";
    break;
  }
  if (!entry && failure.empty())
    failure = "this libfsdprt was built without the CUDA backend (no "
              "libfsdprt_cuda.so at " + tried + "; set FSDPRT_CUDA_PLUGIN to "
              "its path if it is elsewhere)";
  error = failure;
  return entry;
}

} // namespace

std::unique_ptr<Backend> createBackend(const std::string &device,
                                       std::string &error) {
  if (device.empty() || device == "cpu")
    return createCpuBackend();
  if (device == "fake-cuda" || device == "fake-cuda:strict")
    return createFakeCudaBackend(device == "fake-cuda:strict");
  bool cuda = device == "cuda";
  int ordinal = 0;
  if (!cuda && device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
      device.size() < 10) {
    cuda = true;
    for (size_t i = 5; i < device.size(); ++i)
      cuda &= std::isdigit(static_cast<unsigned char>(device[i])) != 0;
    if (cuda)
      ordinal = std::stoi(device.substr(5));
  }
  if (!cuda) {
    error = "unknown device '" + device + "'; expected cpu, cuda or cuda:N";
    return nullptr;
  }
  std::string why;
  OpenDevice open = openDevice(why);
  cuda::Device *opened = open ? open(ordinal, &why) : nullptr;
  if (!opened) {
    error = "device '" + device + "': " + why;
    return nullptr;
  }
  return cuda::createCudaBackend(std::unique_ptr<cuda::Device>(opened));
}

} // namespace fsdprt
