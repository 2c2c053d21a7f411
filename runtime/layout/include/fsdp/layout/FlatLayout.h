//===- FlatLayout.h - Flat-parameter layout and shard math -----*- C++ -*-===//
//
// The one place where FSDP-MLIR computes how a unit's parameters are laid out
// in a flat buffer and which part of it each rank owns. The compiler passes,
// the runtime and the tests all link this library; nothing re-derives it.
//
// It depends on the C++ standard library only (no MLIR, no LLVM), so the
// runtime can use it without pulling in the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LAYOUT_FLATLAYOUT_H
#define FSDP_LAYOUT_FLATLAYOUT_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::layout {

/// Every tensor of a plan starts on a multiple of this many bytes: the plan
/// writer's weights and constants, fsdp-plan-memory's activations (its
/// default), the arenas the runtime allocates, and the memory the wrap
/// search models.
inline constexpr int64_t kTensorAlignmentBytes = 64;

/// `use_orig_params` (PyTorch 2.x) starts every parameter of a flat buffer
/// on a multiple of this many bytes; torch 1.13 does not align.
inline constexpr int64_t kOrigParamsAlignmentBytes = 16;

/// `value` rounded up to a multiple of `alignment` (> 0). The caller keeps
/// `value + alignment - 1` within int64.
constexpr int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The alignment, in elements, of the parameters of a flat buffer whose
/// elements take `elementBytes` bytes: 1 unless `useOrigParams` (and for a
/// buffer without elements, `elementBytes` 0).
constexpr int64_t paramAlignment(int64_t elementBytes, bool useOrigParams) {
  if (!useOrigParams || elementBytes < 1 ||
      elementBytes >= kOrigParamsAlignmentBytes)
    return 1;
  return kOrigParamsAlignmentBytes / elementBytes;
}

/// A half-open range [begin, end) of element indices.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range &other) const {
    return begin == other.begin && end == other.end;
  }
};

/// The part of one parameter that lies in one rank's shard.
///
/// `inParam` is the range of the parameter's own (flattened) elements held by
/// the shard; `inShard` is where those elements sit in the rank's local shard
/// buffer. PyTorch 1.13 stores the same facts as `_shard_param_offsets`
/// (inclusive ends) and `_shard_indices`.
struct ParamShard {
  int64_t paramIndex = 0;
  Range inParam;
  Range inShard;

  bool operator==(const ParamShard &other) const {
    return paramIndex == other.paramIndex && inParam == other.inParam &&
           inShard == other.inShard;
  }
};

/// Layout of one flat parameter (one FSDP unit), with PyTorch FlatParameter
/// semantics:
///  - parameters are concatenated in the given order, each one's start offset
///    rounded up to a multiple of `alignment` elements (1 = no alignment, as in
///    torch 1.13; `use_orig_params` in later torch aligns to 16 bytes);
///  - the buffer is zero-padded at its end to a multiple of the world size;
///  - rank r owns [r * shardNumel, (r + 1) * shardNumel), so trailing ranks
///    may own padding only.
///
/// Everything per rank is derived from (layout, rank); nothing is stored per
/// rank, so a world of 1024 costs no more than a world of 2.
class FlatLayout {
public:
  /// Builds the layout of parameters with the given element counts. Returns
  /// std::nullopt and sets `error` when an input is invalid (world size or
  /// alignment < 1, a negative element count) or the total overflows int64.
  static std::optional<FlatLayout> create(const std::vector<int64_t> &numels,
                                          int64_t worldSize,
                                          int64_t alignment,
                                          std::string &error);

  int64_t worldSize() const { return worldSize_; }
  int64_t alignment() const { return alignment_; }
  size_t numParams() const { return numels_.size(); }

  /// Element count of parameter `index`.
  int64_t paramNumel(size_t index) const { return numels_[index]; }
  /// Where parameter `index` lies in the unsharded flat buffer.
  Range paramRange(size_t index) const {
    return {offsets_[index], offsets_[index] + numels_[index]};
  }
  /// Sum of the parameters' element counts (no padding of any kind).
  int64_t paramsNumel() const { return paramsNumel_; }
  /// Elements up to the end of the last parameter (alignment gaps included).
  int64_t unpaddedNumel() const { return unpaddedNumel_; }
  /// Total elements of the flat buffer, a multiple of the world size.
  int64_t paddedNumel() const { return paddedNumel_; }
  /// Elements in every rank's shard.
  int64_t shardNumel() const { return paddedNumel_ / worldSize_; }

  /// The range of the flat buffer owned by `rank` (0 <= rank < worldSize).
  Range shardRange(int64_t rank) const;
  /// How many of `rank`'s shard elements are end padding
  /// (torch 1.13's `_shard_numel_padded`).
  int64_t shardPadding(int64_t rank) const;
  /// The parameters that intersect `rank`'s shard, in flat order.
  std::vector<ParamShard> paramShards(int64_t rank) const;

private:
  FlatLayout() = default;

  int64_t worldSize_ = 1;
  int64_t alignment_ = 1;
  std::vector<int64_t> numels_;
  std::vector<int64_t> offsets_;
  int64_t paramsNumel_ = 0;
  int64_t unpaddedNumel_ = 0;
  int64_t paddedNumel_ = 0;
};

} // namespace fsdp::layout

#endif // FSDP_LAYOUT_FLATLAYOUT_H
