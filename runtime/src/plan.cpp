//===- plan.cpp - Loading and verifying plans -----------------------------===//

#include "plan_internal.h"
#include "status.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

using fsdprt::guarded;
using fsdprt::makeStatus;

namespace {

/// Verifies `plan->bytes` and checks the schema version; `what` names the
/// source in messages.
fsdprt_status_t verify(fsdprt_plan_s &plan, const std::string &what) {
  const std::vector<uint8_t> &bytes = plan.bytes;
  if (bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(
                              bytes.data(), fsdprt::plan::PlanIdentifier()))
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      what + " is not an FSDP-MLIR plan (no 'FSDP' file "
                             "identifier)");
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!fsdprt::plan::VerifyPlanBuffer(verifier))
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      what + " is a corrupt plan (FlatBuffers verification "
                             "failed)");
  plan.root = fsdprt::plan::GetPlan(bytes.data());
  uint32_t version = plan.root->schema_version();
  if (version != FSDPRT_PLAN_SCHEMA_VERSION)
    return makeStatus(
        FSDPRT_INCOMPATIBLE,
        what + " has plan schema version " + std::to_string(version) +
            ", but this runtime (" FSDPRT_VERSION_STRING ") reads version " +
            std::to_string(FSDPRT_PLAN_SCHEMA_VERSION) +
            (version > FSDPRT_PLAN_SCHEMA_VERSION
                 ? "; use a runtime at least as new as the compiler"
                 : "; recompile the model"));
  std::string sharding = fsdprt::checkSharding(*plan.root);
  if (!sharding.empty())
    return makeStatus(FSDPRT_INVALID_ARGUMENT, what + ": " + sharding);
  return nullptr;
}

fsdprt_status_t finish(std::unique_ptr<fsdprt_plan_s> plan,
                       const std::string &what, fsdprt_plan_t **out) {
  if (fsdprt_status_t status = verify(*plan, what))
    return status;
  *out = plan.release();
  return nullptr;
}

fsdprt_status_t describe(const fsdprt::plan::TensorDesc *tensor,
                         fsdprt_tensor_desc_t *out) {
  out->name = tensor->name()->c_str();
  out->dtype = static_cast<fsdprt_dtype_t>(tensor->dtype());
  out->rank = tensor->shape() ? tensor->shape()->size() : 0;
  out->shape = tensor->shape() ? tensor->shape()->data() : nullptr;
  return nullptr;
}

/// Checks the arguments of an accessor of entry `index` of `total`.
fsdprt_status_t checkEntry(const fsdprt_plan_t *plan, const void *out,
                           size_t index, size_t total, const char *function,
                           const char *what) {
  if (!plan || !out)
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      std::string(function) + ": NULL argument");
  if (index >= total)
    return makeStatus(FSDPRT_OUT_OF_RANGE,
                      std::string(function) + ": index " +
                          std::to_string(index) + " is outside the plan's " +
                          std::to_string(total) + " " + what);
  return nullptr;
}

template <typename T>
size_t count(const flatbuffers::Vector<flatbuffers::Offset<T>> *list) {
  return list ? list->size() : 0;
}

} // namespace

extern "C" {

fsdprt_status_t fsdprt_plan_load_file(const char *path, fsdprt_plan_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!path || !out)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_plan_load_file: NULL argument");
    // A device (/dev/zero) would be read until memory runs out, a FIFO
    // would block the open: both are refused before opening.
    struct stat info;
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode))
      return makeStatus(FSDPRT_IO_ERROR, std::string("cannot read plan '") +
                                             path +
                                             "': it is a directory, not a plan");
    if (stat(path, &info) == 0 && !S_ISREG(info.st_mode))
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        std::string("cannot load plan '") + path +
                            "': not a regular file");
    std::unique_ptr<FILE, int (*)(FILE *)> file(std::fopen(path, "rb"),
                                                &std::fclose);
    if (!file)
      return makeStatus(errno == ENOENT ? FSDPRT_NOT_FOUND : FSDPRT_IO_ERROR,
                        std::string("cannot open plan '") + path +
                            "': " + std::strerror(errno));
    auto plan = std::make_unique<fsdprt_plan_s>();
    uint8_t chunk[1 << 16];
    size_t read;
    while ((read = std::fread(chunk, 1, sizeof chunk, file.get())) > 0)
      plan->bytes.insert(plan->bytes.end(), chunk, chunk + read);
    if (std::ferror(file.get()))
      return makeStatus(FSDPRT_IO_ERROR,
                        std::string("cannot read plan '") + path + "': " +
                            (errno == EISDIR ? "it is a directory, not a plan"
                                             : std::strerror(errno)));
    return finish(std::move(plan), std::string("'") + path + "'", out);
  });
}

fsdprt_status_t fsdprt_plan_load_memory(const void *data, size_t size,
                                        fsdprt_plan_t **out) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if ((!data && size) || !out)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_plan_load_memory: NULL argument");
    auto plan = std::make_unique<fsdprt_plan_s>();
    const auto *begin = static_cast<const uint8_t *>(data);
    plan->bytes.assign(begin, begin + size);
    return finish(std::move(plan), "the plan in memory", out);
  });
}

void fsdprt_plan_destroy(fsdprt_plan_t *plan) { delete plan; }

uint32_t fsdprt_plan_schema_version(const fsdprt_plan_t *plan) {
  return plan ? plan->root->schema_version() : 0;
}

size_t fsdprt_plan_num_inputs(const fsdprt_plan_t *plan) {
  return plan ? count(plan->root->inputs()) : 0;
}

size_t fsdprt_plan_num_outputs(const fsdprt_plan_t *plan) {
  return plan ? count(plan->root->outputs()) : 0;
}

size_t fsdprt_plan_num_weights(const fsdprt_plan_t *plan) {
  return plan ? count(plan->root->weights()) : 0;
}

fsdprt_status_t fsdprt_plan_input(const fsdprt_plan_t *plan, size_t index,
                                  fsdprt_tensor_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_inputs(plan),
                     "fsdprt_plan_input", "inputs"))
    return status;
  return describe(plan->root->inputs()->Get(index), out);
}

fsdprt_status_t fsdprt_plan_output(const fsdprt_plan_t *plan, size_t index,
                                   fsdprt_tensor_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_outputs(plan),
                     "fsdprt_plan_output", "outputs"))
    return status;
  return describe(plan->root->outputs()->Get(index), out);
}

fsdprt_status_t fsdprt_plan_weight(const fsdprt_plan_t *plan, size_t index,
                                   fsdprt_weight_ref_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_weights(plan),
                     "fsdprt_plan_weight", "weight references"))
    return status;
  const fsdprt::plan::WeightRef *ref = plan->root->weights()->Get(index);
  out->fqn = ref->fqn()->c_str();
  out->is_buffer = ref->kind() == fsdprt::plan::StateKind::Buffer;
  out->file = ref->file()->c_str();
  out->offset = ref->offset();
  out->length = ref->length();
  return nullptr;
}

fsdprt_status_t fsdprt_plan_weight_desc(const fsdprt_plan_t *plan, size_t index,
                                        fsdprt_tensor_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_weights(plan),
                     "fsdprt_plan_weight_desc", "weight references"))
    return status;
  const fsdprt::plan::WeightRef *ref = plan->root->weights()->Get(index);
  const auto *buffers = plan->root->buffers();
  if (!buffers || ref->buffer() >= buffers->size())
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      "fsdprt_plan_weight_desc: weight '" + ref->fqn()->str() +
                          "' names a buffer the plan does not have");
  const fsdprt::plan::Buffer *buffer = buffers->Get(ref->buffer());
  out->name = ref->fqn()->c_str();
  out->dtype = static_cast<fsdprt_dtype_t>(buffer->dtype());
  out->rank = buffer->shape() ? buffer->shape()->size() : 0;
  out->shape = buffer->shape() ? buffer->shape()->data() : nullptr;
  return nullptr;
}

int64_t fsdprt_plan_world_size(const fsdprt_plan_t *plan) {
  return plan ? plan->root->world_size() : 0;
}

size_t fsdprt_plan_mesh_rank(const fsdprt_plan_t *plan) {
  return plan && plan->root->mesh_shape() ? plan->root->mesh_shape()->size()
                                          : 0;
}

int64_t fsdprt_plan_mesh_dim(const fsdprt_plan_t *plan, size_t axis) {
  return axis < fsdprt_plan_mesh_rank(plan)
             ? plan->root->mesh_shape()->Get(axis)
             : 0;
}

uint64_t fsdprt_plan_peak_bytes(const fsdprt_plan_t *plan) {
  return plan ? fsdprt::arenaBytes(*plan->root) : 0;
}

size_t fsdprt_plan_num_units(const fsdprt_plan_t *plan) {
  return plan ? count(plan->root->units()) : 0;
}

fsdprt_status_t fsdprt_plan_unit(const fsdprt_plan_t *plan, size_t index,
                                 fsdprt_unit_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_units(plan),
                     "fsdprt_plan_unit", "units"))
    return status;
  const fsdprt::plan::Unit *unit = plan->root->units()->Get(index);
  std::vector<int64_t> mesh, axes;
  if (plan->root->mesh_shape())
    mesh.assign(plan->root->mesh_shape()->begin(),
                plan->root->mesh_shape()->end());
  if (unit->mesh_axes())
    axes.assign(unit->mesh_axes()->begin(), unit->mesh_axes()->end());
  out->name = unit->name()->c_str();
  out->module = unit->module_fqn() ? unit->module_fqn()->c_str() : "";
  out->num_params = unit->params() ? unit->params()->size() : 0;
  out->dtype = static_cast<fsdprt_dtype_t>(unit->dtype());
  out->padded_numel = unit->padded_numel();
  out->group_size = fsdprt::groupPosition(mesh, axes, 0).size;
  out->shard_numel = out->padded_numel / out->group_size;
  return nullptr;
}

fsdprt_status_t fsdprt_plan_unit_param(const fsdprt_plan_t *plan, size_t unit,
                                       size_t index,
                                       fsdprt_tensor_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, unit, fsdprt_plan_num_units(plan),
                     "fsdprt_plan_unit_param", "units"))
    return status;
  const auto *params = plan->root->units()->Get(unit)->params();
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, params ? params->size() : 0,
                     "fsdprt_plan_unit_param", "members of the unit"))
    return status;
  const fsdprt::plan::UnitParam *param = params->Get(index);
  out->name = param->fqn()->c_str();
  out->dtype =
      static_cast<fsdprt_dtype_t>(plan->root->units()->Get(unit)->dtype());
  out->rank = param->shape() ? param->shape()->size() : 0;
  out->shape = param->shape() ? param->shape()->data() : nullptr;
  return nullptr;
}

namespace {
/// The aliases recorded for `fqn` (a weight or a unit member), or null.
const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *
aliasesOf(const fsdprt_plan_t *plan, const char *fqn) {
  if (!plan || !fqn)
    return nullptr;
  if (const auto *weights = plan->root->weights())
    for (const fsdprt::plan::WeightRef *w : *weights)
      if (w->fqn()->str() == fqn)
        return w->aliases();
  if (const auto *units = plan->root->units())
    for (const fsdprt::plan::Unit *u : *units)
      if (u->params())
        for (const fsdprt::plan::UnitParam *p : *u->params())
          if (p->fqn()->str() == fqn)
            return p->aliases();
  return nullptr;
}
} // namespace

size_t fsdprt_plan_num_aliases(const fsdprt_plan_t *plan, const char *fqn) {
  const auto *aliases = aliasesOf(plan, fqn);
  return aliases ? aliases->size() : 0;
}

const char *fsdprt_plan_alias(const fsdprt_plan_t *plan, const char *fqn,
                              size_t index) {
  const auto *aliases = aliasesOf(plan, fqn);
  return aliases && index < aliases->size() ? aliases->Get(index)->c_str()
                                            : nullptr;
}

size_t fsdprt_plan_num_kernels(const fsdprt_plan_t *plan) {
  return plan ? count(plan->root->kernels()) : 0;
}

fsdprt_status_t fsdprt_plan_kernel(const fsdprt_plan_t *plan, size_t index,
                                   fsdprt_kernel_desc_t *out) {
  if (fsdprt_status_t status =
          checkEntry(plan, out, index, fsdprt_plan_num_kernels(plan),
                     "fsdprt_plan_kernel", "kernels"))
    return status;
  const fsdprt::plan::Kernel *kernel = plan->root->kernels()->Get(index);
  out->op = kernel->op()->c_str();
  out->location = kernel->location() ? kernel->location()->c_str() : "";
  out->stream = kernel->stream();
  out->num_deps = kernel->deps() ? kernel->deps()->size() : 0;
  return nullptr;
}

} // extern "C"
