//===- session.cpp - Sessions: arenas, weights, kernels, runs -------------===//
//
// A session checks everything in its plan that could make a kernel read or
// write outside its memory before it runs anything: buffers inside their
// arenas with bytes = numel * element size, declared inputs, outputs,
// weights and constants agreeing with their buffers, and every kernel's
// buffers fitting its op. A corrupt plan is an error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "session_internal.h"
#include "status.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "fsdp/layout/FlatLayout.h"

using fsdprt::guarded;
using fsdprt::layoutOf;
using fsdprt::loadShards;
using fsdprt::makeStatus;
using fsdprt::meshOf;
using fsdprt::unitAxes;
using fsdprt::WeightReader;
namespace plan = fsdprt::plan;

using TensorDescs = flatbuffers::Vector<flatbuffers::Offset<plan::TensorDesc>>;

namespace {

fsdprt_status_t invalid(const std::string &message) {
  return makeStatus(FSDPRT_INVALID_ARGUMENT, message);
}

/// A kernel's name in messages: "kernel 12 (matmul at 'node')".
std::string describeKernel(const plan::Kernel *kernel, size_t index) {
  std::string text =
      "kernel " + std::to_string(index) + " (" + kernel->op()->str();
  if (kernel->location() && kernel->location()->size())
    text += " at '" + kernel->location()->str() + "'";
  return text + ")";
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// Whether `dtype` is one of the schema's values (FlatBuffers does not
/// check enums, and a C++ enum must not hold another value).
bool knownDtype(plan::DType dtype) {
  return static_cast<uint8_t>(dtype) <= static_cast<uint8_t>(plan::DType::Bool);
}

std::vector<int64_t> shapeOf(const flatbuffers::Vector<int64_t> *shape) {
  return shape ? std::vector<int64_t>(shape->begin(), shape->end())
               : std::vector<int64_t>();
}

fsdprt_status_t allocateArenas(fsdprt_session_s &s) {
  const auto *arenas = s.plan->root->arenas();
  if (!arenas)
    return nullptr;
  for (size_t i = 0; i < arenas->size(); ++i) {
    const plan::Arena *a = arenas->Get(i);
    std::string name = "plan arena " + std::to_string(i) +
                       (a->name() ? " ('" + a->name()->str() + "')" : "");
    constexpr uint64_t tensorAlignment = fsdp::layout::kTensorAlignmentBytes;
    uint64_t alignment = a->alignment() ? a->alignment() : tensorAlignment;
    if (alignment & (alignment - 1))
      return invalid(name + " has alignment " + std::to_string(alignment) +
                     ", not a power of two");
    if (static_cast<uint32_t>(a->kind()) > 2)
      return invalid(name + " has an unknown kind " +
                     std::to_string(static_cast<int>(a->kind())));
    void *memory =
        s.backend->allocate(a->bytes(), std::max<uint64_t>(alignment, tensorAlignment));
    if (!memory)
      return makeStatus(FSDPRT_RESOURCE_EXHAUSTED,
                        "cannot allocate " + name + " of " +
                            std::to_string(a->bytes()) + " bytes");
    s.arenas.push_back(memory);
    s.arenaBytes.push_back(a->bytes());
    s.arenaKinds.push_back(a->kind());
  }
  return nullptr;
}

/// Binds every buffer to its arena after checking it lies inside.
fsdprt_status_t bindBuffers(fsdprt_session_s &s) {
  const auto *buffers = s.plan->root->buffers();
  size_t count = buffers ? buffers->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const plan::Buffer *b = buffers->Get(i);
    std::string name = "plan buffer " + std::to_string(i);
    if (!knownDtype(b->dtype()))
      return invalid(name + " has an unknown dtype " +
                     std::to_string(static_cast<int>(b->dtype())));
    fsdprt::Tensor t;
    t.dtype = static_cast<fsdprt_dtype_t>(b->dtype());
    size_t size = fsdprt_dtype_size(t.dtype);
    t.shape = shapeOf(b->shape());
    for (int64_t d : t.shape) {
      if (d < 0 || (d && t.numel > (int64_t(1) << 56) / d))
        return invalid(name + " has an invalid shape " + shapeText(t.shape));
      t.numel *= d;
    }
    if (b->arena() >= s.arenas.size())
      return invalid(name + " names arena " + std::to_string(b->arena()) +
                     " but the plan has " + std::to_string(s.arenas.size()));
    uint64_t bytes = t.numel * size, limit = s.arenaBytes[b->arena()];
    if (b->bytes() != bytes)
      return invalid(name + " has " + std::to_string(b->bytes()) +
                     " bytes, but its shape " + shapeText(t.shape) + " of " +
                     fsdprt_dtype_name(t.dtype) + " needs " +
                     std::to_string(bytes));
    if (b->offset() > limit || bytes > limit - b->offset())
      return invalid(name + " (" + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(b->offset()) + ") lies outside arena " +
                     std::to_string(b->arena()) + " of " +
                     std::to_string(limit) + " bytes");
    t.data = static_cast<char *>(s.arenas[b->arena()]) + b->offset();
    s.buffers.push_back(std::move(t));
  }
  return nullptr;
}

/// Checks that declared inputs or outputs have unique names and agree with
/// their buffers.
fsdprt_status_t checkDescs(const fsdprt_session_s &s, const TensorDescs *list,
                           const char *what) {
  if (!list)
    return nullptr;
  std::set<std::string> seen;
  for (const plan::TensorDesc *t : *list) {
    std::string name =
        std::string("plan ") + what + " '" + t->name()->str() + "'";
    if (!seen.insert(t->name()->str()).second)
      return invalid(name + " is declared twice");
    if (t->buffer() >= s.buffers.size())
      return invalid(name + " names buffer " + std::to_string(t->buffer()) +
                     " but the plan has " + std::to_string(s.buffers.size()));
    const fsdprt::Tensor &b = s.buffers[t->buffer()];
    std::vector<int64_t> shape = shapeOf(t->shape());
    if (!knownDtype(t->dtype()))
      return invalid(name + " has an unknown dtype " +
                     std::to_string(static_cast<int>(t->dtype())));
    auto dtype = static_cast<fsdprt_dtype_t>(t->dtype());
    if (dtype != b.dtype || shape != b.shape)
      return invalid(name + " is declared " + fsdprt_dtype_name(dtype) + " " +
                     shapeText(shape) + " but its buffer is " +
                     fsdprt_dtype_name(b.dtype) + " " + shapeText(b.shape));
  }
  return nullptr;
}

fsdprt_status_t checkWeights(const fsdprt_session_s &s) {
  const auto *weights = s.plan->root->weights();
  if (!weights)
    return nullptr;
  for (const plan::WeightRef *w : *weights) {
    std::string name = "weight '" + w->fqn()->str() + "'";
    if (w->buffer() >= s.buffers.size())
      return invalid(name + " names buffer " + std::to_string(w->buffer()) +
                     " but the plan has " + std::to_string(s.buffers.size()));
    if (w->length() != s.buffers[w->buffer()].bytes())
      return invalid(name + " has " + std::to_string(w->length()) +
                     " bytes but its buffer holds " +
                     std::to_string(s.buffers[w->buffer()].bytes()));
    if (w->offset() > uint64_t(INT64_MAX) - w->length())
      return invalid(name + " has an invalid offset " +
                     std::to_string(w->offset()));
  }
  return nullptr;
}

/// Each state update copies a computed value over a parameter or buffer of
/// the same dtype and size, and no state is updated twice.
fsdprt_status_t checkUpdates(const fsdprt_session_s &s) {
  const auto *updates = s.plan->root->updates();
  if (!updates)
    return nullptr;
  const auto *buffers = s.plan->root->buffers();
  std::vector<bool> targeted(s.buffers.size());
  for (size_t i = 0; i < updates->size(); ++i) {
    const plan::StateUpdate *u = updates->Get(i);
    std::string name = "state update " + std::to_string(i);
    if (u->source() >= s.buffers.size() || u->target() >= s.buffers.size())
      return invalid(name + " names buffers " + std::to_string(u->source()) +
                     " -> " + std::to_string(u->target()) +
                     " but the plan has " + std::to_string(s.buffers.size()));
    auto kindOf = [&](uint32_t buffer) {
      return s.arenaKinds[buffers->Get(buffer)->arena()];
    };
    if (kindOf(u->target()) != plan::ArenaKind::Weights)
      return invalid(name + ": its target, buffer " +
                     std::to_string(u->target()) +
                     ", is not a parameter or buffer");
    if (kindOf(u->source()) != plan::ArenaKind::Activations)
      return invalid(name + ": its source, buffer " +
                     std::to_string(u->source()) +
                     ", is not computed by the run");
    const fsdprt::Tensor &from = s.buffers[u->source()],
                         &to = s.buffers[u->target()];
    if (from.dtype != to.dtype || from.bytes() != to.bytes())
      return invalid(name + " copies " + fsdprt_dtype_name(from.dtype) + " " +
                     shapeText(from.shape) + " over " +
                     fsdprt_dtype_name(to.dtype) + " " + shapeText(to.shape));
    if (targeted[u->target()])
      return invalid(name + " updates buffer " + std::to_string(u->target()) +
                     ", which another update writes too");
    targeted[u->target()] = true;
  }
  return nullptr;
}

fsdprt_status_t fillConstants(fsdprt_session_s &s) {
  const auto *constants = s.plan->root->constants();
  if (!constants)
    return nullptr;
  for (const plan::ConstantData *c : *constants) {
    std::string name =
        "plan constant for buffer " + std::to_string(c->buffer());
    if (c->buffer() >= s.buffers.size())
      return invalid(name + ": the plan has " +
                     std::to_string(s.buffers.size()) + " buffers");
    const fsdprt::Tensor &t = s.buffers[c->buffer()];
    size_t size = c->data() ? c->data()->size() : 0;
    if (size != t.bytes())
      return invalid(name + " holds " + std::to_string(size) +
                     " bytes but the buffer has " + std::to_string(t.bytes()));
    s.backend->upload(t.data, c->data()->data(), size);
  }
  return nullptr;
}

/// The mesh axes a collective kernel names (checked when the plan loaded).
std::vector<int64_t> axesOf(const plan::Kernel &k) {
  return fsdprt::Attrs(k).getInts("mesh_axes", {});
}

/// A collective kernel of a multi-rank session: the communicator's call on
/// the kernel's group, its failure naming the kernel.
fsdprt::KernelFn prepareCollective(fsdprt_session_s &s, const plan::Kernel &k,
                                   size_t index,
                                   const fsdprt::KernelArgs &args) {
  if (args.in.size() != 1 || args.out.size() != 1 ||
      args.in[0].dtype != args.out[0].dtype)
    throw fsdprt::KernelError("takes one input and one output of one dtype");
  std::string op = k.op()->str();
  std::vector<int64_t> axes = axesOf(k);
  fsdprt::Reduction reduction =
      fsdprt::Attrs(k).getString("reduction", "sum") == "avg"
          ? fsdprt::Reduction::Avg
          : fsdprt::Reduction::Sum;
  std::string what = op; // the session's message names the kernel
  fsdprt::Communicator *comm = s.comm.get();
  fsdprt::Tensor in = args.in[0], out = args.out[0];
  s.collectives[index] = {op, axes, in, out, reduction};
  if (op == "all_gather")
    return [=]() { return comm->allGather(axes, in, out, what); };
  if (op == "reduce_scatter")
    return
        [=]() { return comm->reduceScatter(axes, in, out, reduction, what); };
  if (op == "all_reduce")
    return [=]() { return comm->allReduce(axes, in, out, reduction, what); };
  throw fsdprt::KernelError("is not a collective the runtime knows");
}

/// Every group the plan's collectives and units use, made in one order on
/// every rank (sub-communicators are created collectively).
fsdprt_status_t prepareGroups(fsdprt_session_s &s) {
  std::set<std::vector<int64_t>> groups;
  if (const auto *kernels = s.plan->root->kernels())
    for (const plan::Kernel *k : *kernels)
      if (k->stream() == 1)
        groups.insert(axesOf(*k));
  if (const auto *units = s.plan->root->units())
    for (const plan::Unit *u : *units)
      groups.insert(unitAxes(*u));
  for (const std::vector<int64_t> &axes : groups)
    if (std::string error = s.comm->addGroup(axes); !error.empty())
      return makeStatus(FSDPRT_UNAVAILABLE, error);
  return nullptr;
}

fsdprt_status_t prepareKernels(fsdprt_session_s &s) {
  const auto *kernels = s.plan->root->kernels();
  size_t count = kernels ? kernels->size() : 0;
  for (size_t i = 0; i < count; ++i) {
    const plan::Kernel *k = kernels->Get(i);
    fsdprt::KernelArgs args{{},        {},           fsdprt::Attrs(*k),
                            s.threads, &s.workspace, describeKernel(k, i),
                            &s.random};
    for (auto [ids, list] : {std::make_pair(k->inputs(), &args.in),
                             std::make_pair(k->outputs(), &args.out)}) {
      if (!ids)
        continue;
      for (uint32_t id : *ids) {
        if (id >= s.buffers.size())
          return invalid(describeKernel(k, i) + " names buffer " +
                         std::to_string(id) + " but the plan has " +
                         std::to_string(s.buffers.size()));
        list->push_back(s.buffers[id]);
      }
    }
    try {
      std::string op = k->op()->str();
      if (s.comm && k->stream() == 1)
        s.kernels.push_back(prepareCollective(s, *k, i, args));
      else
        s.kernels.push_back(s.backend->prepare(op, args));
    } catch (const fsdprt::KernelError &e) {
      return invalid(describeKernel(k, i) + ": " + e.what());
    }
  }
  if (s.workspace.bytes()) {
    s.workspaceMemory =
        s.backend->allocate(s.workspace.bytes(), fsdp::layout::kTensorAlignmentBytes);
    if (!s.workspaceMemory)
      return makeStatus(FSDPRT_RESOURCE_EXHAUSTED,
                        "cannot allocate a kernel workspace of " +
                            std::to_string(s.workspace.bytes()) + " bytes");
    s.workspace.bind(s.workspaceMemory);
  }
  return nullptr;
}

/// The bound buffer of the declared input or output `name`, after checking
/// `bytes`.
fsdprt_status_t tensorFor(const fsdprt_session_s &s, const TensorDescs *list,
                          const char *what, const char *name, size_t bytes,
                          const fsdprt::Tensor **out) {
  const plan::TensorDesc *desc = nullptr;
  std::string names;
  if (list)
    for (const plan::TensorDesc *t : *list) {
      names += (names.empty() ? "" : ", ") + t->name()->str();
      if (t->name()->str() == name)
        desc = t;
    }
  if (!desc)
    return makeStatus(FSDPRT_NOT_FOUND,
                      std::string("the plan has no ") + what + " named '" +
                          name + "' (its " + what +
                          "s: " + (names.empty() ? "none" : names) + ")");
  const fsdprt::Tensor &t = s.buffers[desc->buffer()];
  if (bytes != t.bytes())
    return invalid(std::string(what) + " '" + name + "' (" +
                   fsdprt_dtype_name(t.dtype) + " " + shapeText(t.shape) +
                   ") holds " + std::to_string(t.bytes()) + " bytes, not " +
                   std::to_string(bytes));
  *out = &t;
  return nullptr;
}

} // namespace

/// Fills each unit's shard with the bytes `rank` owns, read straight from
/// the members' data files through the layout; gaps and padding are zero.
fsdprt_status_t fsdprt::loadShards(fsdprt_session_s &s, WeightReader &reader,
                                   int64_t rank, const Locator &locate) {
  const auto *units = s.plan->root->units();
  if (!units)
    return nullptr;
  std::vector<int64_t> mesh = meshOf(*s.plan->root);
  for (const plan::Unit *u : *units) {
    ::fsdp::layout::FlatLayout layout = layoutOf(*u, mesh);
    int64_t index = fsdprt::groupPosition(mesh, unitAxes(*u), rank).index;
    const fsdprt::Tensor &shard = s.buffers[u->shard()];
    size_t element = fsdprt_dtype_size(shard.dtype);
    auto *bytes = static_cast<char *>(shard.data);
    s.backend->fill(bytes, 0, shard.bytes());
    for (const ::fsdp::layout::ParamShard &part : layout.paramShards(index)) {
      const plan::UnitParam *param = u->params()->Get(part.paramIndex);
      uint64_t length = (part.inParam.end - part.inParam.begin) * element;
      std::string file = param->file()->str();
      uint64_t offset = param->offset();
      if (locate) {
        std::vector<int64_t> shape;
        if (param->shape())
          shape.assign(param->shape()->begin(), param->shape()->end());
        if (fsdprt_status_t status =
                locate(param->fqn()->str(), shard.dtype, shape, file, offset))
          return status;
      }
      if (fsdprt_status_t status = reader.readInto(
              *s.backend, file, param->fqn()->str(),
              offset + part.inParam.begin * element, length,
              bytes + part.inShard.begin * element))
        return status;
    }
  }
  return nullptr;
}

extern "C" {

namespace {

/// Refuses a plan whose arenas (and, once known, kernel workspace) do not
/// fit `budget` bytes (0: no budget).
fsdprt_status_t checkBudget(const fsdprt_plan_t *plan, uint64_t budget,
                            uint64_t workspace) {
  if (!budget)
    return nullptr;
  uint64_t arenas = fsdprt::arenaBytes(*plan->root); // saturating
  uint64_t peak =
      workspace > UINT64_MAX - arenas ? UINT64_MAX : arenas + workspace;
  if (peak <= budget)
    return nullptr;
  // The parts, for the message only.
  uint64_t parts[3] = {0, 0, 0};
  if (const auto *list = plan->root->arenas())
    for (const plan::Arena *a : *list)
      if (static_cast<uint32_t>(a->kind()) <= 2)
        parts[static_cast<uint32_t>(a->kind())] += a->bytes();
  std::string why = "the plan needs " + std::to_string(peak) +
                    " bytes per rank (activations " + std::to_string(parts[0]) +
                    ", weights and state " + std::to_string(parts[1]) +
                    ", constants " + std::to_string(parts[2]);
  if (workspace)
    why += ", kernel workspace " + std::to_string(workspace);
  return makeStatus(FSDPRT_RESOURCE_EXHAUSTED,
                    why + "), more than the memory budget of " +
                        std::to_string(budget) + " bytes");
}

/// Everything a session needs, for one rank (no `options.mpi`) or several.
/// `api` names the entry point in messages.
fsdprt_status_t createSession(const fsdprt_plan_t *plan,
                              const fsdprt_session_options_t &options,
                              const char *api, fsdprt_session_t **out) {
  if (!plan || !out)
    return invalid(std::string(api) + ": NULL argument");
  if (options.num_threads < 0 || options.num_threads > FSDPRT_MAX_THREADS)
    return invalid(std::string(api) + ": num_threads must be 0 to " +
                   std::to_string(FSDPRT_MAX_THREADS) + ", not " +
                   std::to_string(options.num_threads));
  auto s = std::make_unique<fsdprt_session_s>();
  s->plan = plan;
  if ((options.mpi != nullptr) + (options.local_group != nullptr) +
          (options.nccl_id_store != nullptr) > 1)
    return invalid(std::string(api) + ": a session is an MPI rank, a local "
                   "group's or an NCCL rank: one of mpi, local_group and "
                   "nccl_id_store");
  if (const fsdprt_mpi_options_t *mpi = options.mpi) {
    if (!std::isfinite(mpi->timeout_seconds) || mpi->timeout_seconds < 0)
      return invalid(std::string(api) +
                     ": timeout_seconds must be a finite number >= 0 (0: no "
                     "deadline), not " +
                     std::to_string(mpi->timeout_seconds));
    std::vector<int64_t> mesh;
    if (plan->root->mesh_shape())
      mesh.assign(plan->root->mesh_shape()->begin(),
                  plan->root->mesh_shape()->end());
    if (mesh.empty())
      mesh = {1};
    // MPI_Comm_c2f before MPI_Init is Open MPI's abort, not an error code.
    if (mpi->use_world && !fsdprt::mpiReady())
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        std::string(api) +
                            ": MPI is not initialized; the "
                            "plan is for " +
                            std::to_string(plan->root->world_size()) +
                            " ranks: launch it with mpirun -np " +
                            std::to_string(plan->root->world_size()) +
                            " (and call MPI_Init or fsdprt_mpi_init first)");
    std::string error;
    s->comm = fsdprt::createMpiCommunicator(mpi->use_world ? fsdprt::mpiWorldF()
                                                           : mpi->comm,
                                            mesh, mpi->timeout_seconds, error);
    if (!s->comm)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        std::string(api) + ": " + error);
  } else if (options.nccl_id_store) {
    if (options.nccl_world_size != static_cast<int>(plan->root->world_size()) ||
        options.nccl_rank < 0 || options.nccl_rank >= options.nccl_world_size)
      return invalid(std::string(api) + ": NCCL rank " + std::to_string(options.nccl_rank) +
                     " of " + std::to_string(options.nccl_world_size) +
                     ", for a plan sharded over " + std::to_string(plan->root->world_size()));
    if (!std::isfinite(options.nccl_timeout_seconds) || options.nccl_timeout_seconds < 0)
      return invalid(std::string(api) + ": nccl_timeout_seconds must be a finite "
                     "number >= 0 (0: no deadline)");
  } else if (options.local_group) {
    int world = fsdprt::localGroupSize(*options.local_group);
    if (world != static_cast<int>(plan->root->world_size()) ||
        options.local_rank < 0 || options.local_rank >= world)
      return invalid(std::string(api) + ": rank " + std::to_string(options.local_rank) +
                     " of a local group of " + std::to_string(world) +
                     " ranks, for a plan sharded over " +
                     std::to_string(plan->root->world_size()));
  } else if (plan->root->world_size() > 1) {
    return makeStatus(
        FSDPRT_INCOMPATIBLE,
        "the plan is sharded over " + std::to_string(plan->root->world_size()) +
            " ranks; " + api +
            " runs one rank (use fsdprt_session_create_mpi with a "
            "communicator of that size)");
  }
  if (fsdprt_status_t status =
          checkBudget(plan, options.memory_budget_bytes, 0))
    return status;
  const char *dir = options.model_dir;
  s->modelDir = dir                       ? dir
                : plan->root->model_dir() ? plan->root->model_dir()->str()
                                          : ".";
  if (s->modelDir.empty())
    s->modelDir = ".";
  std::string deviceError;
  s->backend =
      fsdprt::createBackend(options.device ? options.device : "", deviceError);
  if (!s->backend)
    return invalid(std::string(api) + ": " + deviceError);
  s->threads = s->backend->resolveThreads(options.num_threads);
  s->stream = s->backend->createStream();
  if (options.local_group) {
    std::vector<int64_t> mesh;
    if (plan->root->mesh_shape())
      mesh.assign(plan->root->mesh_shape()->begin(), plan->root->mesh_shape()->end());
    if (mesh.empty())
      mesh = {1};
    s->comm = fsdprt::createLocalCommunicator(*options.local_group,
                                              options.local_rank, mesh,
                                              *s->backend, *s->stream);
  }
  s->graphs = options.disable_graphs == 0;
  // MPI ranks on GPUs: collectives over NCCL on the device (MPI stays for
  // collectives of host memory and sends NCCL its id).
  if (options.mpi && s->comm && std::string(s->backend->name()) == "cuda") {
    std::vector<int64_t> mesh;
    if (plan->root->mesh_shape())
      mesh.assign(plan->root->mesh_shape()->begin(), plan->root->mesh_shape()->end());
    if (mesh.empty())
      mesh = {1};
    std::string error;
    s->comm = fsdprt::createNcclCommunicator(*s->backend, *s->stream, std::move(s->comm),
                                             mesh, options.mpi->timeout_seconds, error);
    if (!s->comm)
      return makeStatus(FSDPRT_UNAVAILABLE, std::string(api) + ": NCCL: " + error);
  } else if (options.nccl_id_store) {
    if (std::string(s->backend->name()) != "cuda")
      return invalid(std::string(api) + ": nccl_id_store needs device cuda or cuda:N, "
                     "not '" + std::string(s->backend->name()) + "'");
    std::vector<int64_t> mesh;
    if (plan->root->mesh_shape())
      mesh.assign(plan->root->mesh_shape()->begin(), plan->root->mesh_shape()->end());
    if (mesh.empty())
      mesh = {1};
    std::string error;
    s->comm = fsdprt::createNcclCommunicator(
        *s->backend, *s->stream, nullptr, mesh, options.nccl_timeout_seconds, error,
        options.nccl_rank, options.nccl_world_size, options.nccl_id_store);
    if (!s->comm)
      return makeStatus(FSDPRT_UNAVAILABLE, std::string(api) + ": NCCL: " + error);
  }
  if (s->comm)
    if (fsdprt_status_t status = prepareGroups(*s))
      return status;
  if (fsdprt_status_t status = allocateArenas(*s))
    return status;
  if (fsdprt_status_t status = bindBuffers(*s))
    return status;
  if (fsdprt_status_t status = checkDescs(*s, plan->root->inputs(), "input"))
    return status;
  if (fsdprt_status_t status = checkDescs(*s, plan->root->outputs(), "output"))
    return status;
  if (fsdprt_status_t status = checkUpdates(*s))
    return status;
  if (fsdprt_status_t status = checkWeights(*s))
    return status;
  if (fsdprt_status_t status = fillConstants(*s))
    return status;
  s->random.seed = options.seed;
  s->random.rank = s->rank();
  if (fsdprt_status_t status = prepareKernels(*s))
    return status;
  if (fsdprt_status_t status =
          checkBudget(plan, options.memory_budget_bytes, s->workspace.bytes()))
    return status;
  *out = s.release();
  return nullptr;
}

/// The first version's options struct ended after `mpi`.
constexpr size_t kOptionsV1Size =
    offsetof(fsdprt_session_options_t, mpi) + sizeof(void *);

} // namespace

void fsdprt_session_options_init(fsdprt_session_options_t *options) {
  if (!options)
    return;
  *options = fsdprt_session_options_t{};
  options->struct_size = sizeof(fsdprt_session_options_t);
}

fsdprt_status_t
fsdprt_session_create_with_options(const fsdprt_plan_t *plan,
                                   const fsdprt_session_options_t *options,
                                   fsdprt_session_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    fsdprt_session_options_t o;
    fsdprt_session_options_init(&o);
    if (options) {
      if (options->struct_size < kOptionsV1Size ||
          options->struct_size > sizeof(fsdprt_session_options_t))
        return invalid("fsdprt_session_create_with_options: struct_size is " +
                       std::to_string(options->struct_size) +
                       "; this runtime reads options of " +
                       std::to_string(kOptionsV1Size) + " to " +
                       std::to_string(sizeof(fsdprt_session_options_t)) +
                       " bytes (call fsdprt_session_options_init first)");
      std::memcpy(&o, options, options->struct_size);
    }
    return createSession(plan, o, "fsdprt_session_create_with_options", out);
  });
}

fsdprt_status_t fsdprt_session_create(const fsdprt_plan_t *plan,
                                      const char *model_dir, int num_threads,
                                      fsdprt_session_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    fsdprt_session_options_t o;
    fsdprt_session_options_init(&o);
    o.model_dir = model_dir;
    o.num_threads = num_threads;
    return createSession(plan, o, "fsdprt_session_create", out);
  });
}

fsdprt_status_t fsdprt_session_create_mpi(const fsdprt_plan_t *plan,
                                          const char *model_dir,
                                          int num_threads,
                                          const fsdprt_mpi_options_t *options,
                                          fsdprt_session_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    const fsdprt_mpi_options_t defaults = {1, 0, 300.0};
    fsdprt_session_options_t o;
    fsdprt_session_options_init(&o);
    o.model_dir = model_dir;
    o.num_threads = num_threads;
    o.mpi = options ? options : &defaults;
    return createSession(plan, o, "fsdprt_session_create_mpi", out);
  });
}

fsdprt_status_t fsdprt_mpi_init(int *out_rank, int *out_size) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    std::string error = fsdprt::mpiInit(out_rank, out_size);
    return error.empty() ? nullptr : makeStatus(FSDPRT_UNAVAILABLE, error);
  });
}

void fsdprt_mpi_finalize(void) { fsdprt::mpiFinalize(); }

fsdprt_status_t fsdprt_session_mean_over_ranks(const fsdprt_session_t *s,
                                               double *value) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !value)
      return invalid("fsdprt_session_mean_over_ranks: NULL argument");
    if (!s->comm)
      return nullptr;
    std::vector<int64_t> all;
    for (size_t d = 0; d < meshOf(*s->plan->root).size(); ++d)
      all.push_back(static_cast<int64_t>(d));
    if (std::string error = s->comm->addGroup(all); !error.empty())
      return makeStatus(FSDPRT_UNAVAILABLE, error);
    double mine = *value;
    fsdprt::Tensor in{&mine, FSDPRT_F64, {1}, 1},
        out{value, FSDPRT_F64, {1}, 1};
    std::string error = s->comm->allReduce(all, in, out, fsdprt::Reduction::Avg,
                                           "mean over ranks");
    return error.empty() ? nullptr : makeStatus(FSDPRT_UNAVAILABLE, error);
  });
}

int fsdprt_session_rank(const fsdprt_session_t *session) {
  return session ? session->rank() : -1;
}

int fsdprt_session_world_size(const fsdprt_session_t *session) {
  return session ? (session->comm ? session->comm->size() : 1) : 0;
}

void fsdprt_session_destroy(fsdprt_session_t *session) { delete session; }

fsdprt_status_t fsdprt_session_load_weights(fsdprt_session_t *s) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s)
      return invalid("fsdprt_session_load_weights: NULL argument");
    s->weightsLoaded = false;
    const auto *weights = s->plan->root->weights();
    WeightReader reader{s->modelDir, {}};
    if (weights)
      for (const plan::WeightRef *w : *weights) {
        std::string file = w->file()->str(), fqn = w->fqn()->str();
        if (file.empty()) { // state that starts as zeros
          s->backend->fill(s->buffers[w->buffer()].data, 0, w->length());
          continue;
        }
        if (fsdprt_status_t status =
                reader.readInto(*s->backend, file, fqn, w->offset(),
                                w->length(), s->buffers[w->buffer()].data))
          return status;
      }
    if (fsdprt_status_t status = loadShards(*s, reader, s->rank()))
      return status;
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
    s->backend->upload(t->data, data, bytes);
    s->inputsSet.insert(name);
    return nullptr;
  });
}

/// The step's figures from the device's clock (docs/runtime.md,
/// "Measured overlap"): compute, the sum of the compute kernels' spans;
/// communication, each collective's device time where the communicator
/// has it (else the host's), plus the blocking ones; exposed (several
/// ranks), the step's span less its compute: the time the stream waited,
/// for collectives and for the host's launches. A span the device cannot
/// time keeps the host's figures.
static void deviceTimes(
    fsdprt_session_t &s, fsdprt::Event *begin, fsdprt::Event *end,
    const std::vector<std::pair<std::unique_ptr<fsdprt::Event>,
                                std::unique_ptr<fsdprt::Event>>> &spans,
    const std::vector<std::pair<std::unique_ptr<fsdprt::Pending>, double>>
        &finished,
    double blockingSeconds, double &compute, double &communication,
    double &exposed) {
  double busy = 0;
  for (const auto &[a, b] : spans) {
    double t = s.stream->elapsed(*a, *b);
    if (t < 0)
      return;
    busy += t;
  }
  compute = busy;
  if (!s.comm)
    return;
  double total = blockingSeconds;
  for (const auto &[pending, host] : finished) {
    double t = s.comm->deviceSeconds(*pending);
    total += t >= 0 ? t : host;
  }
  communication = total;
  double step = s.stream->elapsed(*begin, *end);
  if (step >= 0)
    exposed = std::max(0.0, step - busy);
}

fsdprt_status_t fsdprt_session_run(fsdprt_session_t *s) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s)
      return invalid("fsdprt_session_run: NULL argument");
    const auto *weights = s->plan->root->weights();
    if (!s->weightsLoaded && weights && weights->size())
      return invalid("fsdprt_session_run: the weights are not loaded; call "
                     "fsdprt_session_load_weights first");
    if (const auto *inputs = s->plan->root->inputs())
      for (const auto *input : *inputs)
        if (!s->inputsSet.count(input->name()->str()))
          return invalid("fsdprt_session_run: the input '" +
                         input->name()->str() +
                         "' was never set; call fsdprt_session_set_input "
                         "for every input");
    s->outputsDefined = false;
    auto scope = s->backend->enter(s->threads);
    const auto *kernels = s->plan->root->kernels();
    // FSDPRT_PROFILE=1 prints each kernel's time to stderr: its wall time
    // on the CPU, its device time (between two events, printed once the
    // step is done) where launches return early; a step replayed from a
    // CUDA graph has no per-kernel times.
    static const bool profile = std::getenv("FSDPRT_PROFILE") != nullptr;
    // Time: compute kernels; each collective from its start to when it is
    // seen complete (polled after every compute kernel, which also
    // progresses MPI); and exposed, the time the run waited for
    // collectives (blocking ones whole).
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point t) {
      return std::chrono::duration<double>(Clock::now() - t).count();
    };
    double computeSeconds = 0, communicationSeconds = 0, exposedSeconds = 0;
    // A backend whose launches return before their work is done (CUDA)
    // times the step on the device instead: each compute kernel between
    // two events, the whole step between two more, each collective on its
    // own stream where the communicator can (NCCL). Read once the stream
    // is synchronised.
    std::unique_ptr<fsdprt::Event> stepBegin = s->stream->recordTimed();
    bool deviceTimed = stepBegin != nullptr;
    std::vector<std::pair<std::unique_ptr<fsdprt::Event>,
                          std::unique_ptr<fsdprt::Event>>>
        spans;
    std::vector<size_t> spanKernels; // each span's kernel (direct runs)
    auto timed = [&](auto &&run) {
      std::unique_ptr<fsdprt::Event> begin;
      if (deviceTimed)
        begin = s->stream->recordTimed();
      std::string error = run();
      if (deviceTimed)
        spans.emplace_back(std::move(begin), s->stream->recordTimed());
      return error;
    };
    // Collectives seen complete, kept until then for their device time;
    // and the host's figure for each.
    std::vector<std::pair<std::unique_ptr<fsdprt::Pending>, double>> finished;
    double blockingSeconds = 0;
    // Multi-rank: collectives start where the plan has them and are waited
    // for only where a kernel depends on them (Kernel.deps) or the next
    // collective starts (the communication stream runs in order), so they
    // overlap the compute in between.
    struct InFlight {
      std::unique_ptr<fsdprt::Pending> pending;
      Clock::time_point started;
      bool done = false;
    };
    std::map<size_t, InFlight> pending;
    auto poll = [&]() {
      for (auto &[j, f] : pending)
        if (!f.done && s->comm->test(*f.pending)) {
          f.done = true;
          communicationSeconds += since(f.started);
        }
    };
    auto waitFor = [&](size_t j) -> std::string {
      auto it = pending.find(j);
      if (it == pending.end())
        return "";
      auto begin = Clock::now();
      std::string error = s->comm->wait(*it->second.pending);
      exposedSeconds += since(begin);
      if (!it->second.done)
        communicationSeconds += since(it->second.started);
      finished.emplace_back(std::move(it->second.pending),
                            since(it->second.started));
      pending.erase(it);
      return error.empty() ? ""
                           : describeKernel(kernels->Get(j), j) + ": " + error;
    };
    auto waitAll = [&]() -> std::string {
      while (!pending.empty())
        if (std::string error = waitFor(pending.begin()->first); !error.empty())
          return error;
      return "";
    };
    // A single-rank session on a backend with graphs runs its first step
    // directly (it checks, warms up and times the kernels), captures the
    // second into a graph and from then on replays it: the arenas never
    // move, so the same launches do the same work. Multi-rank sessions
    // run their collectives from the host, between kernels: no graph.
    bool replayed = false;
    if (s->graphs && !s->comm && s->stream->canCapture() && s->directRuns > 0) {
      std::string error;
      if (!s->graph) {
        error = s->stream->beginCapture();
        for (size_t i = 0; error.empty() && i < s->kernels.size(); ++i)
          if (std::string failed = s->stream->launch(s->kernels[i]); !failed.empty())
            error = describeKernel(kernels->Get(i), i) + ": " + failed;
        std::string ended;
        std::unique_ptr<fsdprt::Graph> graph = s->stream->endCapture(ended);
        if (error.empty() && !graph)
          error = ended;
        if (error.empty())
          s->graph = std::move(graph);
      }
      auto start = Clock::now();
      if (error.empty())
        error = timed([&] { return s->stream->replay(*s->graph); });
      computeSeconds = since(start);
      if (!error.empty())
        return makeStatus(FSDPRT_INTERNAL, "the step's graph: " + error);
      replayed = true;
    }
    for (size_t i = 0; !replayed && i < s->kernels.size(); ++i) {
      const plan::Kernel *k = kernels->Get(i);
      auto start = std::chrono::steady_clock::now();
      std::string error;
      auto async = s->collectives.find(i);
      if (async != s->collectives.end()) {
        error = waitAll();
        if (error.empty()) {
          const auto &c = async->second;
          auto begin = Clock::now();
          std::unique_ptr<fsdprt::Pending> started = s->comm->start(
              c.op, c.axes, c.in, c.out, c.reduction, c.op, error);
          exposedSeconds += since(begin); // the run waits while it starts
          if (started)
            pending[i] = {std::move(started), begin};
          else
            error = describeKernel(k, i) + ": " + error;
        }
        if (!error.empty())
          return makeStatus(FSDPRT_UNAVAILABLE, error);
        continue;
      }
      if (k->deps())
        for (uint32_t dep : *k->deps())
          if (std::string failed = waitFor(dep); !failed.empty())
            return makeStatus(FSDPRT_UNAVAILABLE, failed);
      start = std::chrono::steady_clock::now();
      if (k->stream() == 1) {
        error = s->stream->launch(s->kernels[i]);
      } else {
        error = timed([&] { return s->stream->launch(s->kernels[i]); });
        spanKernels.push_back(i);
      }
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (k->stream() == 1) { // a blocking collective: all of it exposed
        communicationSeconds += seconds;
        exposedSeconds += seconds;
        blockingSeconds += seconds;
      } else {
        computeSeconds += seconds;
        poll();
      }
      if (!error.empty()) // a collective's failure is a peer's or the link's
        return makeStatus(kernels->Get(i)->stream() == 1 ? FSDPRT_UNAVAILABLE
                                                         : FSDPRT_OUT_OF_RANGE,
                          describeKernel(kernels->Get(i), i) + ": " + error);
      if (profile && !deviceTimed)
        std::fprintf(stderr, "fsdprt: %s: %.3f ms\n",
                     describeKernel(kernels->Get(i), i).c_str(),
                     std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    }
    if (std::string error = waitAll(); !error.empty())
      return makeStatus(FSDPRT_UNAVAILABLE, error);
    if (!replayed)
      ++s->directRuns;
    std::unique_ptr<fsdprt::Event> stepEnd =
        deviceTimed ? s->stream->recordTimed() : nullptr;
    fsdprt::StreamFailure failed = s->stream->synchronize();
    if (!failed.message.empty())
      return makeStatus(failed.data ? FSDPRT_OUT_OF_RANGE : FSDPRT_INTERNAL,
                        failed.message);
    if (deviceTimed)
      deviceTimes(*s, stepBegin.get(), stepEnd.get(), spans, finished,
                  blockingSeconds, computeSeconds, communicationSeconds,
                  exposedSeconds);
    if (profile && deviceTimed && spanKernels.size() == spans.size())
      for (size_t j = 0; j < spans.size(); ++j)
        std::fprintf(
            stderr, "fsdprt: %s: %.3f ms on the device\n",
            describeKernel(kernels->Get(spanKernels[j]), spanKernels[j])
                .c_str(),
            1e3 * s->stream->elapsed(*spans[j].first, *spans[j].second));
    // The step's new parameters and state, once every kernel has read the
    // old ones.
    if (const auto *updates = s->plan->root->updates())
      for (const plan::StateUpdate *u : *updates)
        s->backend->copy(s->buffers[u->target()].data,
                         s->buffers[u->source()].data,
                         s->buffers[u->target()].bytes());
    ++s->random.step;
    s->computeSeconds.store(computeSeconds, std::memory_order_relaxed);
    s->communicationSeconds.store(communicationSeconds,
                                  std::memory_order_relaxed);
    s->exposedSeconds.store(exposedSeconds, std::memory_order_relaxed);
    s->outputsDefined = true;
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_read_state(const fsdprt_session_t *s,
                                          const char *fqn, void *data,
                                          size_t bytes) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !fqn || (!data && bytes))
      return invalid("fsdprt_session_read_state: NULL argument");
    const auto *weights = s->plan->root->weights();
    if (weights)
      for (const plan::WeightRef *w : *weights) {
        if (w->fqn()->str() != fqn)
          continue;
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        if (bytes != t.bytes())
          return invalid(std::string("state '") + fqn + "' has " +
                         std::to_string(t.bytes()) + " bytes, not " +
                         std::to_string(bytes));
        if (!s->weightsLoaded)
          return invalid("fsdprt_session_read_state: the weights are not "
                         "loaded; call fsdprt_session_load_weights first");
        s->backend->download(data, t.data, bytes);
        return nullptr;
      }
    if (const auto *units = s->plan->root->units())
      for (const plan::Unit *u : *units) {
        std::vector<int64_t> mesh = meshOf(*s->plan->root);
        ::fsdp::layout::FlatLayout layout = layoutOf(*u, mesh);
        const fsdprt::Tensor &shard = s->buffers[u->shard()];
        size_t element = fsdprt_dtype_size(shard.dtype);
        // The unit's own name reads the rank's shard, a member's FQN the
        // member (whole on one rank).
        int64_t begin = 0, numel = -1;
        if (u->name()->str() == fqn)
          numel = shard.numel;
        for (size_t i = 0; numel < 0 && i < layout.numParams(); ++i)
          if (u->params()->Get(i)->fqn()->str() == fqn) {
            if (layout.worldSize() > 1)
              return makeStatus(FSDPRT_INCOMPATIBLE,
                                std::string("parameter '") + fqn +
                                    "' is sharded over " +
                                    std::to_string(layout.worldSize()) +
                                    " ranks; read its unit's shard");
            begin = layout.paramRange(i).begin;
            numel = layout.paramNumel(i);
          }
        if (numel < 0)
          continue;
        if (bytes != numel * element)
          return invalid(std::string("state '") + fqn + "' has " +
                         std::to_string(numel * element) + " bytes, not " +
                         std::to_string(bytes));
        if (!s->weightsLoaded)
          return invalid("fsdprt_session_read_state: the weights are not "
                         "loaded; call fsdprt_session_load_weights first");
        s->backend->download(
            data, static_cast<char *>(shard.data) + begin * element, bytes);
        return nullptr;
      }
    return makeStatus(FSDPRT_NOT_FOUND, std::string("the plan has no "
                                                    "parameter or buffer '") +
                                            fqn + "'");
  });
}

fsdprt_status_t fsdprt_session_read_full_state(const fsdprt_session_t *s,
                                               const char *fqn, void *data,
                                               size_t bytes) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !fqn || (!data && bytes))
      return invalid("fsdprt_session_read_full_state: NULL argument");
    const auto *units = s->plan->root->units();
    if (s->comm && units)
      for (const plan::Unit *u : *units) {
        std::vector<int64_t> mesh = meshOf(*s->plan->root);
        ::fsdp::layout::FlatLayout layout = layoutOf(*u, mesh);
        for (size_t i = 0; i < layout.numParams(); ++i) {
          if (u->params()->Get(i)->fqn()->str() != fqn)
            continue;
          const fsdprt::Tensor &shard = s->buffers[u->shard()];
          size_t element = fsdprt_dtype_size(shard.dtype);
          if (bytes != static_cast<size_t>(layout.paramNumel(i)) * element)
            return invalid(std::string("parameter '") + fqn + "' has " +
                           std::to_string(layout.paramNumel(i) * element) +
                           " bytes, not " + std::to_string(bytes));
          if (!s->weightsLoaded)
            return invalid("fsdprt_session_read_full_state: the weights are "
                           "not loaded; call fsdprt_session_load_weights "
                           "first");
          // The unit's whole flat buffer from every rank's shard.
          std::vector<char> full(layout.paddedNumel() * element);
          fsdprt::Tensor gathered = shard;
          gathered.data = full.data();
          gathered.numel = layout.paddedNumel();
          gathered.shape = {gathered.numel};
          std::string error =
              s->comm->allGather(unitAxes(*u), shard, gathered,
                                 std::string("gathering '") + fqn +
                                     "' of unit '" + u->name()->str() + "'");
          if (!error.empty())
            return makeStatus(FSDPRT_UNAVAILABLE, error);
          std::memcpy(data, full.data() + layout.paramRange(i).begin * element,
                      bytes);
          return nullptr;
        }
      }
    return fsdprt_session_read_state(s, fqn, data, bytes);
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
    if (!s->outputsDefined)
      return invalid(std::string("fsdprt_session_get_output: output '") + name +
                     "' has no value: no run completed (none ran yet, or "
                     "the last one failed); call fsdprt_session_run first");
    s->backend->download(data, t->data, bytes);
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_timings(const fsdprt_session_t *s,
                                       double *compute_seconds,
                                       double *communication_seconds) {
  if (!s)
    return invalid("fsdprt_session_timings: NULL argument");
  if (compute_seconds)
    *compute_seconds = s->computeSeconds.load(std::memory_order_relaxed);
  if (communication_seconds) // the communication the run waited for
    *communication_seconds = s->exposedSeconds.load(std::memory_order_relaxed);
  return nullptr;
}

fsdprt_status_t fsdprt_session_overlap(const fsdprt_session_t *s,
                                       double *communication_seconds,
                                       double *exposed_seconds) {
  if (!s)
    return invalid("fsdprt_session_overlap: NULL argument");
  if (communication_seconds)
    *communication_seconds = s->communicationSeconds.load(std::memory_order_relaxed);
  if (exposed_seconds)
    *exposed_seconds = s->exposedSeconds.load(std::memory_order_relaxed);
  return nullptr;
}

fsdprt_status_t fsdprt_session_workspace_bytes(const fsdprt_session_t *s,
                                               uint64_t *out_bytes) {
  if (!s || !out_bytes)
    return invalid("fsdprt_session_workspace_bytes: NULL argument");
  *out_bytes = s->workspaceMemory ? s->workspace.bytes() : 0;
  return nullptr;
}

fsdprt_status_t fsdprt_session_memory(const fsdprt_session_t *s,
                                      uint64_t *activations, uint64_t *weights,
                                      uint64_t *constants) {
  if (!s)
    return invalid("fsdprt_session_memory: NULL argument");
  uint64_t totals[3] = {0, 0, 0};
  for (size_t i = 0; i < s->arenas.size(); ++i)
    totals[static_cast<size_t>(s->arenaKinds[i])] += s->arenaBytes[i];
  if (activations)
    *activations = totals[0];
  if (weights)
    *weights = totals[1];
  if (constants)
    *constants = totals[2];
  return nullptr;
}

} // extern "C"
