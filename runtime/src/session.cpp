//===- session.cpp - Sessions: arenas, weights, kernels, runs -------------===//

#include "backend.h"
#include "plan_internal.h"
#include "status.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>

using fsdprt::guarded;
using fsdprt::makeStatus;
namespace plan = fsdprt::plan;

struct fsdprt_session_s {
  const fsdprt_plan_s *plan = nullptr;
  std::string modelDir;
  int threads = 0;
  std::unique_ptr<fsdprt::Backend> backend;
  std::unique_ptr<fsdprt::Stream> stream;
  std::vector<void *> arenas;
  std::vector<uint64_t> arenaBytes;
  std::vector<plan::ArenaKind> arenaKinds;
  std::vector<fsdprt::Tensor> buffers;
  std::vector<fsdprt::KernelFn> kernels;
  bool weightsLoaded = false;

  ~fsdprt_session_s() {
    for (void *arena : arenas)
      backend->freeArena(arena);
  }
};

namespace {

size_t dtypeSize(plan::DType dtype) {
  return fsdprt_dtype_size(static_cast<fsdprt_dtype_t>(dtype));
}

/// A kernel's name in messages: "kernel 12 (matmul at 'node')".
std::string describeKernel(const plan::Kernel *kernel, size_t index) {
  std::string text = "kernel " + std::to_string(index) + " (" +
                     kernel->op()->str();
  if (kernel->location() && kernel->location()->size())
    text += " at '" + kernel->location()->str() + "'";
  return text + ")";
}

fsdprt_status_t invalid(const std::string &message) {
  return makeStatus(FSDPRT_INVALID_ARGUMENT, message);
}

/// Binds every buffer to its arena after checking it lies inside.
fsdprt_status_t bindBuffers(fsdprt_session_s &s) {
  const plan::Plan *root = s.plan->root;
  const auto *buffers = root->buffers();
  size_t count = buffers ? buffers->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const plan::Buffer *b = buffers->Get(i);
    size_t size = dtypeSize(b->dtype());
    if (!size)
      return invalid("plan buffer " + std::to_string(i) + " has an unknown dtype");
    fsdprt::Tensor t;
    t.dtype = static_cast<fsdprt_dtype_t>(b->dtype());
    if (b->shape())
      t.shape.assign(b->shape()->begin(), b->shape()->end());
    for (int64_t d : t.shape) {
      if (d < 0 || (d && t.numel > (int64_t(1) << 50) / d))
        return invalid("plan buffer " + std::to_string(i) + " has a bad shape");
      t.numel *= d;
    }
    if (b->arena() >= s.arenas.size())
      return invalid("plan buffer " + std::to_string(i) + " names arena " +
                     std::to_string(b->arena()) + " of " +
                     std::to_string(s.arenas.size()));
    uint64_t bytes = t.numel * size, limit = s.arenaBytes[b->arena()];
    if (b->bytes() != bytes || b->offset() > limit || bytes > limit - b->offset())
      return invalid("plan buffer " + std::to_string(i) + " (" +
                     std::to_string(b->bytes()) + " bytes at offset " +
                     std::to_string(b->offset()) + ") does not fit its shape "
                     "or its arena of " + std::to_string(limit) + " bytes");
    t.data = static_cast<char *>(s.arenas[b->arena()]) + b->offset();
    s.buffers.push_back(std::move(t));
  }
  return nullptr;
}

fsdprt_status_t fillConstants(fsdprt_session_s &s) {
  const auto *constants = s.plan->root->constants();
  if (!constants)
    return nullptr;
  for (const plan::ConstantData *c : *constants) {
    if (c->buffer() >= s.buffers.size())
      return invalid("a plan constant names buffer " +
                     std::to_string(c->buffer()) + " of " +
                     std::to_string(s.buffers.size()));
    const fsdprt::Tensor &t = s.buffers[c->buffer()];
    size_t size = c->data() ? c->data()->size() : 0;
    if (size != t.bytes())
      return invalid("plan constant for buffer " + std::to_string(c->buffer()) +
                     " holds " + std::to_string(size) + " bytes, not " +
                     std::to_string(t.bytes()));
    if (size)
      std::memcpy(t.data, c->data()->data(), size);
  }
  return nullptr;
}

fsdprt_status_t prepareKernels(fsdprt_session_s &s) {
  const auto *kernels = s.plan->root->kernels();
  size_t count = kernels ? kernels->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const plan::Kernel *k = kernels->Get(i);
    fsdprt::KernelArgs args{{}, {}, fsdprt::Attrs(*k), s.threads};
    for (auto [ids, list] : {std::make_pair(k->inputs(), &args.in),
                             std::make_pair(k->outputs(), &args.out)}) {
      if (!ids)
        continue;
      for (uint32_t id : *ids) {
        if (id >= s.buffers.size())
          return invalid(describeKernel(k, i) + " names buffer " +
                         std::to_string(id) + " of " +
                         std::to_string(s.buffers.size()));
        list->push_back(s.buffers[id]);
      }
    }
    try {
      s.kernels.push_back(s.backend->prepare(k->op()->str(), args));
    } catch (const fsdprt::KernelError &e) {
      return invalid(describeKernel(k, i) + ": " + e.what());
    }
  }
  return nullptr;
}

/// The declared input or output called `name`.
const plan::TensorDesc *
findTensor(const flatbuffers::Vector<flatbuffers::Offset<plan::TensorDesc>> *list,
           const char *name) {
  if (list)
    for (const plan::TensorDesc *t : *list)
      if (t->name()->str() == name)
        return t;
  return nullptr;
}

std::string names(
    const flatbuffers::Vector<flatbuffers::Offset<plan::TensorDesc>> *list) {
  std::string text;
  if (list)
    for (const plan::TensorDesc *t : *list)
      text += (text.empty() ? "" : ", ") + t->name()->str();
  return text.empty() ? "none" : text;
}

/// The bound buffer of a declared tensor, after checking `bytes`.
fsdprt_status_t tensorFor(
    const fsdprt_session_s &s,
    const flatbuffers::Vector<flatbuffers::Offset<plan::TensorDesc>> *list,
    const char *what, const char *name, size_t bytes,
    const fsdprt::Tensor **out) {
  const plan::TensorDesc *desc = findTensor(list, name);
  if (!desc)
    return makeStatus(FSDPRT_NOT_FOUND, std::string("the plan has no ") + what +
                                            " named '" + name + "' (its " +
                                            what + "s: " + names(list) + ")");
  if (desc->buffer() >= s.buffers.size())
    return invalid(std::string(what) + " '" + name + "' names a missing buffer");
  const fsdprt::Tensor &t = s.buffers[desc->buffer()];
  if (bytes != t.bytes())
    return invalid(std::string(what) + " '" + name + "' holds " +
                   std::to_string(t.bytes()) + " bytes, not " +
                   std::to_string(bytes));
  *out = &t;
  return nullptr;
}

} // namespace

extern "C" {

size_t fsdprt_dtype_size(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F64: case FSDPRT_I64: return 8;
  case FSDPRT_F32: case FSDPRT_I32: return 4;
  case FSDPRT_F16: case FSDPRT_BF16: case FSDPRT_I16: return 2;
  case FSDPRT_I8: case FSDPRT_U8: case FSDPRT_BOOL: return 1;
  }
  return 0;
}

const char *fsdprt_dtype_name(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32: return "float32";
  case FSDPRT_F16: return "float16";
  case FSDPRT_BF16: return "bfloat16";
  case FSDPRT_F64: return "float64";
  case FSDPRT_I64: return "int64";
  case FSDPRT_I32: return "int32";
  case FSDPRT_I16: return "int16";
  case FSDPRT_I8: return "int8";
  case FSDPRT_U8: return "uint8";
  case FSDPRT_BOOL: return "bool";
  }
  return "unknown";
}

fsdprt_status_t fsdprt_session_create(const fsdprt_plan_t *plan,
                                      const char *model_dir, int num_threads,
                                      fsdprt_session_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!plan || !out)
      return invalid("fsdprt_session_create: NULL argument");
    if (num_threads < 0)
      return invalid("fsdprt_session_create: num_threads must be >= 0, not " +
                     std::to_string(num_threads));
    auto s = std::make_unique<fsdprt_session_s>();
    s->plan = plan;
    s->threads = num_threads;
    s->modelDir = model_dir ? model_dir
                  : plan->root->model_dir() ? plan->root->model_dir()->str()
                                            : ".";
    s->backend = fsdprt::createCpuBackend();
    s->backend->setThreads(num_threads);
    s->stream = s->backend->createStream();
    if (const auto *arenas = plan->root->arenas())
      for (const plan::Arena *a : *arenas) {
        uint64_t alignment = a->alignment() ? a->alignment() : 64;
        if (alignment & (alignment - 1))
          return invalid("plan arena alignment " + std::to_string(alignment) +
                         " is not a power of two");
        void *memory = s->backend->allocateArena(a->bytes(), std::max<uint64_t>(alignment, 64));
        if (!memory)
          return makeStatus(FSDPRT_RESOURCE_EXHAUSTED,
                            "cannot allocate the " +
                                std::string(a->name() ? a->name()->c_str() : "") +
                                " arena of " + std::to_string(a->bytes()) +
                                " bytes");
        s->arenas.push_back(memory);
        s->arenaBytes.push_back(a->bytes());
        s->arenaKinds.push_back(a->kind());
      }
    for (auto step : {bindBuffers, fillConstants, prepareKernels})
      if (fsdprt_status_t status = step(*s))
        return status;
    *out = s.release();
    return nullptr;
  });
}

void fsdprt_session_destroy(fsdprt_session_t *session) { delete session; }

fsdprt_status_t fsdprt_session_load_weights(fsdprt_session_t *s) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s)
      return invalid("fsdprt_session_load_weights: NULL argument");
    const auto *weights = s->plan->root->weights();
    // Hundreds of tensors usually share one file: open each once.
    std::map<std::string, std::unique_ptr<FILE, int (*)(FILE *)>> files;
    if (weights)
      for (const plan::WeightRef *w : *weights) {
        std::string file = w->file()->str();
        std::string path = !file.empty() && file[0] == '/'
                               ? file
                               : s->modelDir + "/" + file;
        auto it = files.find(path);
        if (it == files.end()) {
          FILE *f = std::fopen(path.c_str(), "rb");
          if (!f)
            return makeStatus(errno == ENOENT ? FSDPRT_NOT_FOUND
                                              : FSDPRT_IO_ERROR,
                              "cannot open '" + path + "' for '" +
                                  w->fqn()->str() + "': " + std::strerror(errno));
          it = files.emplace(path, std::unique_ptr<FILE, int (*)(FILE *)>(
                                       f, &std::fclose))
                   .first;
        }
        if (w->buffer() >= s->buffers.size())
          return invalid("weight '" + w->fqn()->str() + "' names a missing buffer");
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        if (w->length() != t.bytes())
          return invalid("weight '" + w->fqn()->str() + "' has " +
                         std::to_string(w->length()) + " bytes but its buffer " +
                         std::to_string(t.bytes()));
        FILE *f = it->second.get();
        if (fseeko(f, static_cast<off_t>(w->offset()), SEEK_SET) != 0 ||
            std::fread(t.data, 1, t.bytes(), f) != t.bytes())
          return makeStatus(FSDPRT_IO_ERROR,
                            "cannot read " + std::to_string(t.bytes()) +
                                " bytes at offset " +
                                std::to_string(w->offset()) + " of '" + path +
                                "' for '" + w->fqn()->str() +
                                "' (file too short?)");
      }
    s->weightsLoaded = true;
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_set_input(fsdprt_session_t *s, const char *name,
                                         const void *data, size_t bytes) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !name || (!data && bytes))
      return invalid("fsdprt_session_set_input: NULL argument");
    const fsdprt::Tensor *t;
    if (fsdprt_status_t status =
            tensorFor(*s, s->plan->root->inputs(), "input", name, bytes, &t))
      return status;
    if (bytes)
      std::memcpy(t->data, data, bytes);
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_run(fsdprt_session_t *s) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s)
      return invalid("fsdprt_session_run: NULL argument");
    if (!s->weightsLoaded && s->plan->root->weights() &&
        s->plan->root->weights()->size())
      return invalid("fsdprt_session_run: weights are not loaded; call "
                     "fsdprt_session_load_weights first");
    s->backend->setThreads(s->threads);
    const auto *kernels = s->plan->root->kernels();
    // FSDPRT_PROFILE=1 prints each kernel's wall time to stderr.
    static const bool profile = std::getenv("FSDPRT_PROFILE") != nullptr;
    for (size_t i = 0; i < s->kernels.size(); ++i) {
      auto start = std::chrono::steady_clock::now();
      std::string error = s->stream->launch(s->kernels[i]);
      if (!error.empty())
        return invalid(describeKernel(kernels->Get(i), i) + ": " + error);
      if (profile)
        std::fprintf(stderr, "fsdprt: %s: %.3f ms\n",
                     describeKernel(kernels->Get(i), i).c_str(),
                     std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    }
    std::string error = s->stream->synchronize();
    if (!error.empty())
      return makeStatus(FSDPRT_INTERNAL, error);
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_get_output(const fsdprt_session_t *s,
                                          const char *name, void *data,
                                          size_t bytes) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !name || (!data && bytes))
      return invalid("fsdprt_session_get_output: NULL argument");
    const fsdprt::Tensor *t;
    if (fsdprt_status_t status =
            tensorFor(*s, s->plan->root->outputs(), "output", name, bytes, &t))
      return status;
    if (bytes)
      std::memcpy(data, t->data, bytes);
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_memory(const fsdprt_session_t *s,
                                      uint64_t *activations, uint64_t *weights,
                                      uint64_t *constants) {
  if (!s)
    return invalid("fsdprt_session_memory: NULL argument");
  uint64_t totals[3] = {0, 0, 0};
  for (size_t i = 0; i < s->arenas.size(); ++i) {
    auto kind = static_cast<size_t>(s->arenaKinds[i]);
    if (kind < 3)
      totals[kind] += s->arenaBytes[i];
  }
  if (activations)
    *activations = totals[0];
  if (weights)
    *weights = totals[1];
  if (constants)
    *constants = totals[2];
  return nullptr;
}

} // extern "C"
