//===- FlatLayout.cpp - Flat-parameter layout and shard math --------------===//

#include "fsdp/layout/FlatLayout.h"

#include <algorithm>
#include <limits>

namespace fsdp::layout {

namespace {

/// Rounds `value` up to a multiple of `multiple`; false on int64 overflow.
bool roundUp(int64_t value, int64_t multiple, int64_t &result) {
  int64_t remainder = value % multiple;
  if (remainder == 0) {
    result = value;
    return true;
  }
  return !__builtin_add_overflow(value, multiple - remainder, &result);
}

} // namespace

std::optional<FlatLayout> FlatLayout::create(const std::vector<int64_t> &numels,
                                             int64_t worldSize,
                                             int64_t alignment,
                                             std::string &error) {
  if (worldSize < 1) {
    error = "world size must be at least 1, got " + std::to_string(worldSize);
    return std::nullopt;
  }
  if (alignment < 1) {
    error = "alignment must be at least 1 element, got " +
            std::to_string(alignment);
    return std::nullopt;
  }

  FlatLayout layout;
  layout.worldSize_ = worldSize;
  layout.alignment_ = alignment;
  layout.numels_ = numels;
  layout.offsets_.reserve(numels.size());

  int64_t end = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] < 0) {
      error = "parameter " + std::to_string(i) +
              " has a negative element count " + std::to_string(numels[i]);
      return std::nullopt;
    }
    int64_t offset;
    if (!roundUp(end, alignment, offset) ||
        __builtin_add_overflow(offset, numels[i], &end) ||
        __builtin_add_overflow(layout.paramsNumel_, numels[i],
                               &layout.paramsNumel_)) {
      error = "flat buffer size overflows int64 at parameter " +
              std::to_string(i);
      return std::nullopt;
    }
    layout.offsets_.push_back(offset);
  }
  layout.unpaddedNumel_ = end;
  if (!roundUp(end, worldSize, layout.paddedNumel_)) {
    error = "flat buffer size overflows int64 when padded to world size " +
            std::to_string(worldSize);
    return std::nullopt;
  }
  return layout;
}

Range FlatLayout::shardRange(int64_t rank) const {
  int64_t shard = shardNumel();
  return {rank * shard, (rank + 1) * shard};
}

int64_t FlatLayout::shardPadding(int64_t rank) const {
  Range shard = shardRange(rank);
  int64_t dataEnd = std::clamp(unpaddedNumel_, shard.begin, shard.end);
  return shard.end - dataEnd;
}

std::vector<ParamShard> FlatLayout::paramShards(int64_t rank) const {
  Range shard = shardRange(rank);
  std::vector<ParamShard> result;
  // Offsets are sorted, so the first intersecting parameter is the last one
  // that starts before the shard ends and ends after it begins.
  auto first = std::upper_bound(offsets_.begin(), offsets_.end(), shard.begin);
  size_t index = first == offsets_.begin() ? 0 : first - offsets_.begin() - 1;
  for (; index < numels_.size(); ++index) {
    Range param = paramRange(index);
    if (param.begin >= shard.end)
      break;
    int64_t begin = std::max(param.begin, shard.begin);
    int64_t end = std::min(param.end, shard.end);
    if (begin >= end)
      continue; // Empty parameter, or one that ends before the shard.
    result.push_back({static_cast<int64_t>(index),
                      {begin - param.begin, end - param.begin},
                      {begin - shard.begin, end - shard.begin}});
  }
  return result;
}

} // namespace fsdp::layout
