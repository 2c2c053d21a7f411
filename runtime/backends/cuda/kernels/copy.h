//===- copy.h - concat, split, copy and pack as strided copies --*- C++ -*-===//
//
// The CPU backend's data movement that is not a strided read (data.h):
// concat and split along an axis, copy, and pack (a unit's members into
// its flat buffer at given offsets, zeros in between), as copies of rows
// (CopyRows) and zero fills, for elements of any size (T: an unsigned
// integer of that size). Where the pieces lie is planned on the host
// (planPieces, planPack); the sequences (concat, split, pack) launch one
// copy per piece through a launcher, as losses.h's do.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_COPY_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_COPY_H

#include "hd.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fsdprt::cuda {

/// Rows of `width` elements: y[r * yPitch + j] = x[r * xPitch + j] for
/// i = r * width + j.
template <typename T> struct CopyRows {
  const T *x;
  T *y;
  int64_t width, xPitch, yPitch;
  FSDP_HD void operator()(int64_t i) const {
    int64_t r = i / width, j = i % width;
    y[r * yPitch + j] = x[r * xPitch + j];
  }
};

template <typename T> struct ZeroBody {
  T *y;
  FSDP_HD void operator()(int64_t i) const { y[i] = T(0); }
};

/// Where a piece lies in the whole, in elements: `rows` rows of `width`,
/// row r at offset + r * pitch. A piece is contiguous on its own side.
struct Piece {
  int64_t rows, width, pitch, offset;
};

/// The pieces of concat or split along `axis` of a whole of `shape`:
/// piece k is sizes[k] long along the axis. Throws std::invalid_argument
/// when the axis is out of range or the sizes do not add up to its length.
inline std::vector<Piece> planPieces(const std::vector<int64_t> &shape,
                                     int64_t axis,
                                     const std::vector<int64_t> &sizes) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0 || axis >= rank)
    throw std::invalid_argument("axis " + std::to_string(axis) +
                                " is out of range for rank " +
                                std::to_string(rank));
  int64_t outer = 1, inner = 1, total = 0;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= d == axis ? 1 : shape[d];
  std::vector<Piece> pieces;
  for (int64_t size : sizes) {
    pieces.push_back({outer, size * inner, shape[axis] * inner, total * inner});
    total += size;
  }
  if (total != shape[axis])
    throw std::invalid_argument("pieces of " + std::to_string(total) +
                                " do not add up to the axis's " +
                                std::to_string(shape[axis]));
  return pieces;
}

/// What pack writes into a flat buffer: each member's copy (one row) and
/// the zeros before, between and after them.
struct PackPlan {
  std::vector<Piece> members, gaps;
};

/// Plans pack of members of `numels` elements at element `offsets` of a
/// flat buffer of `total`. Throws std::invalid_argument when a member
/// overlaps the previous one or runs past the end.
inline PackPlan planPack(const std::vector<int64_t> &offsets,
                         const std::vector<int64_t> &numels, int64_t total) {
  if (offsets.size() != numels.size())
    throw std::invalid_argument("pack needs one offset per member");
  PackPlan plan;
  int64_t end = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] < end || numels[i] > total - offsets[i])
      throw std::invalid_argument(
          "member " + std::to_string(i) + " at offset " +
          std::to_string(offsets[i]) +
          " overlaps the previous one or runs past the flat buffer");
    plan.gaps.push_back({1, offsets[i] - end, 0, end});
    plan.members.push_back({1, numels[i], numels[i], offsets[i]});
    end = offsets[i] + numels[i];
  }
  plan.gaps.push_back({1, total - end, 0, end});
  return plan;
}

/// The error type a launcher returns (its `elementwise`'s).
template <class Launcher>
using LaunchError = decltype(std::declval<Launcher &>().elementwise(
    ZeroBody<uint8_t>{nullptr}, 0));

/// concat: each piece into its place in `whole`, through `launch` (a
/// launcher: `elementwise(body, n)` returns an error, false when none).
template <typename T, class Launcher>
LaunchError<Launcher> concat(Launcher &launch, const T *const *pieces, T *whole,
                             const std::vector<Piece> &plan) {
  for (size_t k = 0; k < plan.size(); ++k) {
    const Piece &p = plan[k];
    CopyRows<T> body{pieces[k], whole + p.offset, p.width, p.width, p.pitch};
    if (auto e = launch.elementwise(body, p.rows * p.width))
      return e;
  }
  return LaunchError<Launcher>{};
}

/// split: each piece from its place in `whole`.
template <typename T, class Launcher>
LaunchError<Launcher> split(Launcher &launch, const T *whole, T *const *pieces,
                            const std::vector<Piece> &plan) {
  for (size_t k = 0; k < plan.size(); ++k) {
    const Piece &p = plan[k];
    CopyRows<T> body{whole + p.offset, pieces[k], p.width, p.pitch, p.width};
    if (auto e = launch.elementwise(body, p.rows * p.width))
      return e;
  }
  return LaunchError<Launcher>{};
}

/// pack: the gaps zeroed, then the members copied in.
template <typename T, class Launcher>
LaunchError<Launcher> pack(Launcher &launch, const T *const *members, T *flat,
                           const PackPlan &plan) {
  for (const Piece &gap : plan.gaps)
    if (auto e = launch.elementwise(ZeroBody<T>{flat + gap.offset}, gap.width))
      return e;
  return concat(launch, members, flat, plan.members);
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_COPY_H
