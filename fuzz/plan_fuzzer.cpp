//===- plan_fuzzer.cpp - libFuzzer target: the runtime's plan reader ------===//
//
// Feeds arbitrary bytes to fsdprt_plan_load_memory (FlatBuffers
// verification, the schema version, the sharding checks) and, when a plan
// loads, to every describing accessor. Whatever the bytes, the reader must
// return a status, never crash, hang or read out of bounds (the fuzzer is
// built with AddressSanitizer and UndefinedBehaviorSanitizer).
//
//===----------------------------------------------------------------------===//

#include "fsdprt/fsdprt.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsdprt_plan_t *plan = nullptr;
  fsdprt_status_t status = fsdprt_plan_load_memory(data, size, &plan);
  if (status) {
    (void)fsdprt_status_message(status);
    fsdprt_status_free(status);
    return 0;
  }
  fsdprt_tensor_desc_t desc;
  fsdprt_weight_ref_t ref;
  fsdprt_unit_desc_t unit;
  fsdprt_kernel_desc_t kernel;
  auto drop = [](fsdprt_status_t s) { fsdprt_status_free(s); };
  for (size_t i = 0; i < fsdprt_plan_num_inputs(plan); ++i)
    drop(fsdprt_plan_input(plan, i, &desc));
  for (size_t i = 0; i < fsdprt_plan_num_outputs(plan); ++i)
    drop(fsdprt_plan_output(plan, i, &desc));
  for (size_t i = 0; i < fsdprt_plan_num_weights(plan); ++i) {
    drop(fsdprt_plan_weight(plan, i, &ref));
    drop(fsdprt_plan_weight_desc(plan, i, &desc));
    if (ref.fqn)
      (void)fsdprt_plan_num_aliases(plan, ref.fqn);
  }
  for (size_t i = 0; i < fsdprt_plan_num_units(plan); ++i) {
    drop(fsdprt_plan_unit(plan, i, &unit));
    for (size_t p = 0; p < 4; ++p)
      drop(fsdprt_plan_unit_param(plan, i, p, &desc));
  }
  for (size_t i = 0; i < fsdprt_plan_num_kernels(plan); ++i)
    drop(fsdprt_plan_kernel(plan, i, &kernel));
  (void)fsdprt_plan_world_size(plan);
  (void)fsdprt_plan_peak_bytes(plan);
  for (size_t axis = 0; axis < fsdprt_plan_mesh_rank(plan); ++axis)
    (void)fsdprt_plan_mesh_dim(plan, axis);
  fsdprt_plan_destroy(plan);
  return 0;
}
