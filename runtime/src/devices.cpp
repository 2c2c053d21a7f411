//===- devices.cpp - The backend for a session's device option ------------===//
//
// "cpu" (or empty): the CPU backend. "fake-cuda": the CUDA backend's host
// code on a device made of host memory (tests); "fake-cuda:strict" the same,
// refusing ops with no own kernel as a GPU does; "fake-cuda:cudnn" strict,
// with a host model of cuDNN's attention. "cuda" and "cuda:N": the
// CUDA backend on GPU N, whose device comes from the plugin
// libfsdprt_cuda.so: $FSDPRT_CUDA_PLUGIN, else the file beside the
// library (or, linked statically, beside the program or in ../lib), so
// that libfsdprt itself needs no CUDA library.
//
//===----------------------------------------------------------------------===//

#include "../backends/cuda/device.h"
#include "backend.h"
#include "comm.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <unistd.h>

namespace fsdprt {
namespace {

using OpenDevice = cuda::Device *(*)(int ordinal, std::string *error);
using OpenNccl = Communicator *(*)(cuda::Device *, cuda::DeviceStream *,
                                   std::unique_ptr<Communicator> *host, int rank,
                                   int world, const std::vector<int64_t> *mesh,
                                   double timeout, const char *store,
                                   std::string *error);

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

/// The plugin, loaded once; nullptr with `error` saying why.
void *plugin(std::string &error) {
  static std::mutex mutex;
  static void *loaded = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded || !failure.empty()) {
    error = failure;
    return loaded;
  }
  std::vector<std::string> paths = pluginPaths();
  std::string tried;
  for (const std::string &path : paths) {
    if (paths.size() > 1 && access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    loaded = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!loaded)
      failure = "cannot load the CUDA backend " + path + ": " + dlerror();
    else if (!dlsym(loaded, "fsdprt_cuda_open_device")) {
      failure = path + " is not this libfsdprt's CUDA backend (no "
                       "fsdprt_cuda_open_device)";
      loaded = nullptr;
    }
    break;
  }
  if (!loaded && failure.empty())
    failure = "this libfsdprt was built without the CUDA backend (no "
              "libfsdprt_cuda.so at " + tried + "; set FSDPRT_CUDA_PLUGIN to "
              "its path if it is elsewhere)";
  error = failure;
  return loaded;
}

} // namespace

std::unique_ptr<Communicator>
createNcclCommunicator(Backend &backend, Stream &compute,
                       std::unique_ptr<Communicator> host,
                       const std::vector<int64_t> &mesh, double timeout,
                       std::string &error, int rank, int world, const char *store) {
  cuda::Device *device = cuda::deviceOf(backend);
  cuda::DeviceStream *stream = cuda::deviceStreamOf(compute);
  void *loaded = device && stream ? plugin(error) : nullptr;
  if (!device || !stream)
    error = "NCCL needs the CUDA backend's device and stream";
  auto open = loaded ? reinterpret_cast<OpenNccl>(dlsym(loaded, "fsdprt_cuda_open_nccl"))
                     : nullptr;
  if (loaded && !open)
    error = "this libfsdprt's CUDA backend was built without NCCL; run the "
            "ranks as a local group on one GPU, or on the CPU";
  if (!open)
    return nullptr;
  Communicator *comm = open(device, stream, host ? &host : nullptr, rank, world,
                            &mesh, timeout, store, &error);
  return std::unique_ptr<Communicator>(comm);
}

std::unique_ptr<Backend> createBackend(const std::string &device,
                                       std::string &error) {
  if (device.empty() || device == "cpu")
    return createCpuBackend();
  if (device == "fake-cuda" || device == "fake-cuda:strict" ||
      device == "fake-cuda:cudnn")
    return createFakeCudaBackend(device == "fake-cuda:strict",
                                 device == "fake-cuda:cudnn");
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
  void *loaded = plugin(why);
  auto open = loaded ? reinterpret_cast<OpenDevice>(dlsym(loaded, "fsdprt_cuda_open_device"))
                     : nullptr;
  cuda::Device *opened = open ? open(ordinal, &why) : nullptr;
  if (!opened) {
    error = "device '" + device + "': " + why;
    return nullptr;
  }
  return cuda::createCudaBackend(std::unique_ptr<cuda::Device>(opened));
}

} // namespace fsdprt
