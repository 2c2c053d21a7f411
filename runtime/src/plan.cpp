//===- plan.cpp - Loading and verifying plans -----------------------------===//

#include "plan_internal.h"
#include "status.h"

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
                        std::string("cannot read plan '") + path + "'");
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

} // extern "C"
