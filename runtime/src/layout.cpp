//===- layout.cpp - C API over the flat-parameter layout library ----------===//

#include "status.h"

#include "fsdp/layout/FlatLayout.h"

#include <vector>

using fsdp::layout::FlatLayout;
using fsdprt::guarded;
using fsdprt::makeStatus;

struct fsdprt_layout_s {
  FlatLayout layout;
};

namespace {

fsdprt_status_t checkRank(const fsdprt_layout_t *layout, int64_t rank,
                          const char *function) {
  if (!layout)
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      std::string(function) + ": layout is NULL");
  if (rank < 0 || rank >= layout->layout.worldSize())
    return makeStatus(FSDPRT_OUT_OF_RANGE,
                      std::string(function) + ": rank " + std::to_string(rank) +
                          " is outside [0, " +
                          std::to_string(layout->layout.worldSize()) + ")");
  return nullptr;
}

} // namespace

extern "C" {

fsdprt_status_t fsdprt_layout_create(const int64_t *numels, size_t num_params,
                                     int64_t world_size, int64_t alignment,
                                     fsdprt_layout_t **out_layout) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (!out_layout)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_layout_create: out_layout is NULL");
    if (!numels && num_params > 0)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_layout_create: numels is NULL but num_params "
                        "is " +
                            std::to_string(num_params));
    std::vector<int64_t> sizes(numels, numels + num_params);
    std::string error;
    std::optional<FlatLayout> layout =
        FlatLayout::create(sizes, world_size, alignment, error);
    if (!layout)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_layout_create: " + error);
    *out_layout = new fsdprt_layout_s{std::move(*layout)};
    return nullptr;
  });
}

void fsdprt_layout_destroy(fsdprt_layout_t *layout) { delete layout; }

int64_t fsdprt_layout_padded_numel(const fsdprt_layout_t *layout) {
  return layout ? layout->layout.paddedNumel() : 0;
}

int64_t fsdprt_layout_shard_numel(const fsdprt_layout_t *layout) {
  return layout ? layout->layout.shardNumel() : 0;
}

fsdprt_status_t fsdprt_layout_param_range(const fsdprt_layout_t *layout,
                                          int64_t index, int64_t *out_begin,
                                          int64_t *out_end) {
  if (!layout || !out_begin || !out_end)
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      "fsdprt_layout_param_range: NULL argument");
  int64_t count = static_cast<int64_t>(layout->layout.numParams());
  if (index < 0 || index >= count)
    return makeStatus(FSDPRT_OUT_OF_RANGE,
                      "fsdprt_layout_param_range: parameter index " +
                          std::to_string(index) + " is outside [0, " +
                          std::to_string(count) + ")");
  fsdp::layout::Range range = layout->layout.paramRange(index);
  *out_begin = range.begin;
  *out_end = range.end;
  return nullptr;
}

fsdprt_status_t fsdprt_layout_shard_range(const fsdprt_layout_t *layout,
                                          int64_t rank, int64_t *out_begin,
                                          int64_t *out_end,
                                          int64_t *out_padding) {
  if (fsdprt_status_t status = checkRank(layout, rank, __func__))
    return status;
  if (!out_begin || !out_end)
    return makeStatus(FSDPRT_INVALID_ARGUMENT,
                      "fsdprt_layout_shard_range: NULL output pointer");
  fsdp::layout::Range range = layout->layout.shardRange(rank);
  *out_begin = range.begin;
  *out_end = range.end;
  if (out_padding)
    *out_padding = layout->layout.shardPadding(rank);
  return nullptr;
}

fsdprt_status_t fsdprt_layout_param_shards(const fsdprt_layout_t *layout,
                                           int64_t rank,
                                           fsdprt_param_shard_t *out_shards,
                                           size_t capacity, size_t *out_count) {
  return guarded(__func__, [&]() -> fsdprt_status_t {
    if (fsdprt_status_t status =
            checkRank(layout, rank, "fsdprt_layout_param_shards"))
      return status;
    if (!out_count)
      return makeStatus(FSDPRT_INVALID_ARGUMENT,
                        "fsdprt_layout_param_shards: out_count is NULL");
    std::vector<fsdp::layout::ParamShard> shards =
        layout->layout.paramShards(rank);
    if (out_shards && capacity < shards.size())
      return makeStatus(
          FSDPRT_OUT_OF_RANGE,
          "fsdprt_layout_param_shards: rank " + std::to_string(rank) +
              " holds " + std::to_string(shards.size()) +
              " parameter pieces but capacity is " + std::to_string(capacity));
    if (out_shards)
      for (size_t i = 0; i < shards.size(); ++i)
        out_shards[i] = {shards[i].paramIndex, shards[i].inParam.begin,
                         shards[i].inParam.end, shards[i].inShard.begin,
                         shards[i].inShard.end};
    *out_count = shards.size();
    return nullptr;
  });
}

} // extern "C"
