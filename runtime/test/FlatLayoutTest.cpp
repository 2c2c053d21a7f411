//===- FlatLayoutTest.cpp - Hand-computed flat layouts --------------------===//
//
// Expected values are worked out by hand from PyTorch FlatParameter's rules
// (concatenate, pad to a multiple of the world size, rank r takes chunk r).
//
//===----------------------------------------------------------------------===//

#include "fsdp/layout/FlatLayout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

using fsdp::layout::FlatLayout;
using fsdp::layout::ParamShard;
using fsdp::layout::Range;

namespace {

FlatLayout build(const std::vector<int64_t> &numels, int64_t world,
                 int64_t alignment = 1) {
  std::string error;
  std::optional<FlatLayout> layout =
      FlatLayout::create(numels, world, alignment, error);
  EXPECT_TRUE(layout.has_value()) << error;
  return *layout;
}

std::string createError(const std::vector<int64_t> &numels, int64_t world,
                        int64_t alignment = 1) {
  std::string error;
  EXPECT_FALSE(FlatLayout::create(numels, world, alignment, error).has_value());
  return error;
}

TEST(FlatLayout, ConcatenatesAndPadsToWorldSize) {
  FlatLayout layout = build({6, 3, 4}, 4);
  EXPECT_EQ(layout.paramsNumel(), 13);
  EXPECT_EQ(layout.unpaddedNumel(), 13);
  EXPECT_EQ(layout.paddedNumel(), 16);
  EXPECT_EQ(layout.shardNumel(), 4);
  EXPECT_EQ(layout.paramRange(0), (Range{0, 6}));
  EXPECT_EQ(layout.paramRange(1), (Range{6, 9}));
  EXPECT_EQ(layout.paramRange(2), (Range{9, 13}));
}

TEST(FlatLayout, ShardRangesAndPerParamOffsets) {
  FlatLayout layout = build({6, 3, 4}, 4);
  EXPECT_EQ(layout.shardRange(0), (Range{0, 4}));
  EXPECT_EQ(layout.shardRange(3), (Range{12, 16}));

  EXPECT_EQ(layout.paramShards(0),
            (std::vector<ParamShard>{{0, {0, 4}, {0, 4}}}));
  EXPECT_EQ(layout.paramShards(1),
            (std::vector<ParamShard>{{0, {4, 6}, {0, 2}}, {1, {0, 2}, {2, 4}}}));
  EXPECT_EQ(layout.paramShards(2),
            (std::vector<ParamShard>{{1, {2, 3}, {0, 1}}, {2, {0, 3}, {1, 4}}}));
  EXPECT_EQ(layout.paramShards(3),
            (std::vector<ParamShard>{{2, {3, 4}, {0, 1}}}));

  EXPECT_EQ(layout.shardPadding(0), 0);
  EXPECT_EQ(layout.shardPadding(2), 0);
  EXPECT_EQ(layout.shardPadding(3), 3);
}

TEST(FlatLayout, TrailingRanksHoldOnlyPadding) {
  // torch.chunk(5 elements, 4) yields 3 chunks; rank 3 gets an empty,
  // fully padded shard.
  FlatLayout layout = build({5}, 4);
  EXPECT_EQ(layout.paddedNumel(), 8);
  EXPECT_EQ(layout.paramShards(2),
            (std::vector<ParamShard>{{0, {4, 5}, {0, 1}}}));
  EXPECT_EQ(layout.shardPadding(2), 1);
  EXPECT_TRUE(layout.paramShards(3).empty());
  EXPECT_EQ(layout.shardPadding(3), 2);

  FlatLayout tiny = build({1}, 8);
  EXPECT_EQ(tiny.shardNumel(), 1);
  EXPECT_EQ(tiny.paramShards(0), (std::vector<ParamShard>{{0, {0, 1}, {0, 1}}}));
  for (int64_t rank = 1; rank < 8; ++rank) {
    EXPECT_TRUE(tiny.paramShards(rank).empty()) << "rank " << rank;
    EXPECT_EQ(tiny.shardPadding(rank), 1) << "rank " << rank;
  }
}

TEST(FlatLayout, WorldSizeOneHasNoPadding) {
  FlatLayout layout = build({7, 2}, 1);
  EXPECT_EQ(layout.paddedNumel(), 9);
  EXPECT_EQ(layout.shardRange(0), (Range{0, 9}));
  EXPECT_EQ(layout.shardPadding(0), 0);
  EXPECT_EQ(layout.paramShards(0),
            (std::vector<ParamShard>{{0, {0, 7}, {0, 7}}, {1, {0, 2}, {7, 9}}}));
}

TEST(FlatLayout, AlignmentInsertsGapsBetweenParameters) {
  // 16-byte alignment of fp32 parameters is 4 elements.
  FlatLayout layout = build({3, 5, 2}, 2, /*alignment=*/4);
  EXPECT_EQ(layout.paramRange(0), (Range{0, 3}));
  EXPECT_EQ(layout.paramRange(1), (Range{4, 9}));
  EXPECT_EQ(layout.paramRange(2), (Range{12, 14}));
  EXPECT_EQ(layout.paramsNumel(), 10);
  EXPECT_EQ(layout.unpaddedNumel(), 14);
  EXPECT_EQ(layout.paddedNumel(), 14);
  EXPECT_EQ(layout.paramShards(0),
            (std::vector<ParamShard>{{0, {0, 3}, {0, 3}}, {1, {0, 3}, {4, 7}}}));
  EXPECT_EQ(layout.paramShards(1),
            (std::vector<ParamShard>{{1, {3, 5}, {0, 2}}, {2, {0, 2}, {5, 7}}}));
}

TEST(FlatLayout, OrigParamsAlignTo16BytesOfTheDtype) {
  using fsdp::layout::paramAlignment;
  EXPECT_EQ(paramAlignment(4, /*useOrigParams=*/false), 1);
  EXPECT_EQ(paramAlignment(4, /*useOrigParams=*/true), 4);  // f32
  EXPECT_EQ(paramAlignment(2, /*useOrigParams=*/true), 8);  // bf16, f16
  EXPECT_EQ(paramAlignment(1, /*useOrigParams=*/true), 16); // i8
  EXPECT_EQ(paramAlignment(16, /*useOrigParams=*/true), 1);
  EXPECT_EQ(fsdp::layout::alignTo(65, fsdp::layout::kTensorAlignmentBytes),
            128);
  EXPECT_EQ(fsdp::layout::alignTo(64, fsdp::layout::kTensorAlignmentBytes), 64);
}

TEST(FlatLayout, EmptyParametersOwnNoElements) {
  FlatLayout layout = build({0, 4, 0, 2}, 2);
  EXPECT_EQ(layout.paddedNumel(), 6);
  EXPECT_EQ(layout.paramShards(0),
            (std::vector<ParamShard>{{1, {0, 3}, {0, 3}}}));
  EXPECT_EQ(layout.paramShards(1),
            (std::vector<ParamShard>{{1, {3, 4}, {0, 1}}, {3, {0, 2}, {1, 3}}}));
}

TEST(FlatLayout, NoParameters) {
  FlatLayout layout = build({}, 4);
  EXPECT_EQ(layout.paddedNumel(), 0);
  EXPECT_EQ(layout.shardNumel(), 0);
  EXPECT_TRUE(layout.paramShards(3).empty());
  EXPECT_EQ(layout.shardPadding(3), 0);
}

TEST(FlatLayout, LargeWorldNeedsNoPerRankState) {
  // A 70B-shaped unit (LLaMA-2-70B MLP widths plus a bias) at world size
  // 1024: only (layout, rank) is needed to find any rank's pieces.
  FlatLayout layout = build({8192LL * 28672, 8192LL * 8192, 8191}, 1024);
  EXPECT_EQ(layout.unpaddedNumel(), 301998079);
  EXPECT_EQ(layout.paddedNumel(), 301998080);
  EXPECT_EQ(layout.shardNumel(), 294920);
  EXPECT_EQ(layout.shardRange(1023), (Range{301703160, 301998080}));
  EXPECT_EQ(layout.paramShards(1023),
            (std::vector<ParamShard>{{1, {66822136, 67108864}, {0, 286728}},
                                     {2, {0, 8191}, {286728, 294919}}}));
  EXPECT_EQ(layout.shardPadding(1023), 1);
}

TEST(FlatLayout, RejectsInvalidInputs) {
  EXPECT_EQ(createError({4}, 0), "world size must be at least 1, got 0");
  EXPECT_EQ(createError({4}, 2, 0),
            "alignment must be at least 1 element, got 0");
  EXPECT_EQ(createError({4, -1}, 2),
            "parameter 1 has a negative element count -1");
  EXPECT_EQ(createError({std::numeric_limits<int64_t>::max(), 1}, 2),
            "flat buffer size overflows int64 at parameter 1");
  EXPECT_EQ(createError({std::numeric_limits<int64_t>::max()}, 2),
            "flat buffer size overflows int64 when padded to world size 2");
}

// Every element of every parameter is owned by exactly one rank, at the
// position the layout says, for random layouts.
TEST(FlatLayout, ShardsPartitionEveryParameter) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> numels(rng() % 6);
    for (int64_t &n : numels)
      n = rng() % 40;
    int64_t world = 1 + rng() % 9;
    int64_t alignment = 1 + rng() % 4;
    FlatLayout layout = build(numels, world, alignment);

    std::vector<int64_t> covered(numels.size(), 0);
    for (int64_t rank = 0; rank < world; ++rank) {
      Range shard = layout.shardRange(rank);
      for (const ParamShard &piece : layout.paramShards(rank)) {
        ASSERT_EQ(piece.inParam.begin, covered[piece.paramIndex]);
        ASSERT_EQ(piece.inParam.size(), piece.inShard.size());
        ASSERT_EQ(layout.paramRange(piece.paramIndex).begin +
                      piece.inParam.begin,
                  shard.begin + piece.inShard.begin);
        covered[piece.paramIndex] = piece.inParam.end;
      }
    }
    for (size_t i = 0; i < numels.size(); ++i)
      EXPECT_EQ(covered[i], numels[i]) << "trial " << trial << " param " << i;
  }
}

} // namespace
