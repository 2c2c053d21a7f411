//===- indexing.h - Trilu, CumSum and the elementwise scatters --*- C++ -*-===//
//
// ONNX's Pad, Trilu, CumSum, GatherElements, ScatterElements and ScatterND as
// the CPU backend runs them (backends/cpu/data.cpp), as kernel bodies
// (hd.h). Elements that are only moved are unsigned integers of their
// size; sums and products are in their dtype (integers wrap).
//
// The scatters write in the CPU's order where updates land on the same
// element: scatter_elements gives each line of y along the axis to one
// thread, which copies data's line and then applies the line's updates
// in increasing index; scatter_nd gives each element of a slice to one
// thread, which walks the index tuples in order (slices land aligned, so
// two tuples' slices are the same or disjoint). An index outside
// [-dim, dim) is a fault (ErrorSlot, kBadIndex; scatter_nd's index into
// dim d kBadIndex + d, so that its message names that dim's size): its
// update is skipped.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_INDEXING_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_INDEXING_H

#include "data.h"

#include <type_traits>

namespace fsdprt::cuda {

/// trilu over matrices [.., rows, cols]: y keeps x where j - i >= k
/// (upper) or j - i <= k (lower), else 0; k is `kValue` unless `kInput`
/// (one int64 in device memory, the model's input) is given.
template <typename T> struct TriluBody {
  const T *x;
  T *y;
  int64_t rows, cols, kValue;
  const int64_t *kInput;
  bool upper;
  FSDP_HD void operator()(int64_t i) const {
    int64_t k = kInput ? *kInput : kValue;
    int64_t j = i % cols, r = (i / cols) % rows;
    // j - r lies in (-rows, cols): no overflow for any k.
    bool keep = upper ? j - r >= k : j - r <= k;
    y[i] = keep ? x[i] : T(0);
  }
};

/// ONNX Pad's modes: the fill value, the nearest edge element, or the
/// mirror image without the edge.
enum class PadMode { Constant, Reflect, Edge };

/// How y = pad(x) reads x: `before` elements added in front of each of
/// the `rank` dims (y's dims `shape`, x's `from`, x's strides `stride`).
struct PadShape {
  int rank;
  int64_t shape[kMaxDims], from[kMaxDims], stride[kMaxDims],
      before[kMaxDims];
  PadMode mode;
};

/// pad over output elements i; `fill` is the constant's bits in T.
template <typename T> struct PadBody {
  PadShape p;
  const T *x;
  T *y;
  T fill;

  FSDP_HD void operator()(int64_t i) const {
    int64_t at = 0, rest = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t j = rest % p.shape[d] - p.before[d], n = p.from[d];
      rest /= p.shape[d];
      if (j < 0 || j >= n) {
        if (p.mode == PadMode::Constant) {
          y[i] = fill;
          return;
        }
        j = p.mode == PadMode::Edge ? (j < 0 ? 0 : n - 1)
                                    : (j < 0 ? -j : 2 * (n - 1) - j);
      }
      at += j * p.stride[d];
    }
    y[i] = x[at];
  }
};

/// What a running sum of T adds in: integers unsigned, so that they wrap
/// as the CPU's do.
template <typename T> struct SumType { using type = T; };
template <> struct SumType<int64_t> { using type = uint64_t; };
template <> struct SumType<int32_t> { using type = uint32_t; };

/// cumsum's fault: an axis input outside [-rank, rank) (detail: the axis).
constexpr int kBadAxis = 1;

/// cumsum's axis as an input (one I64 or, with `is32`, I32 in device
/// memory, the model's input), read by every thread when the kernel runs;
/// `rank` 0 when the axis is the attribute. x has dims `shape`.
struct CumsumAxisInput {
  const void *axis = nullptr;
  bool is32 = false;
  int rank = 0;
  int64_t shape[kMaxDims] = {};
  ErrorSlot *error = nullptr;

  /// The most lines any axis makes (numel over the smallest dim), at least
  /// one, so that a bad axis of an empty x is still reported.
  int64_t maxLines() const {
    int64_t numel = 1, smallest = 0;
    for (int d = 0; d < rank; ++d) {
      numel *= shape[d];
      smallest = d == 0 || shape[d] < smallest ? shape[d] : smallest;
    }
    return smallest > 0 && numel / smallest > 1 ? numel / smallest : 1;
  }

  /// Line `line`'s dim and inner for the axis read; false when the line
  /// lies past the axis's lines or the axis is out of range (reported by
  /// line 0, as the CPU's "axis A is out of range for rank R").
  FSDP_HD bool resolve(int64_t line, int64_t &dim, int64_t &inner) const {
    int64_t a = is32 ? *static_cast<const int32_t *>(axis)
                     : *static_cast<const int64_t *>(axis);
    if (a < -rank || a >= rank) {
      if (line == 0)
        reportError(error, kBadAxis, a);
      return false;
    }
    a = a < 0 ? a + rank : a;
    int64_t numel = 1;
    inner = 1;
    for (int d = 0; d < rank; ++d) {
      numel *= shape[d];
      if (d > a)
        inner *= shape[d];
    }
    dim = shape[a];
    return dim > 0 && line < numel / dim;
  }
};

/// cumsum of the lines [outer, dim, inner] along dim, one line per index
/// in order (reversed with `reverse`; each element the sum before it with
/// `exclusive`): the CPU's sums bit for bit. y may be x. With `axisInput`
/// (its rank not 0), dim and inner come from the axis it reads.
template <typename T> struct CumsumBody {
  const T *x;
  T *y;
  int64_t dim, inner;
  bool exclusive, reverse;
  CumsumAxisInput axisInput = {};
  FSDP_HD void operator()(int64_t line) const {
    using Sum = typename SumType<T>::type;
    int64_t d = dim, in = inner;
    if (axisInput.rank && !axisInput.resolve(line, d, in))
      return;
    int64_t base = line / in * d * in + line % in;
    Sum sum = 0;
    for (int64_t n = 0; n < d; ++n) {
      int64_t at = base + (reverse ? d - 1 - n : n) * in;
      Sum value = static_cast<Sum>(x[at]);
      y[at] = static_cast<T>(exclusive ? sum : sum + value);
      sum += value;
    }
  }
};

/// How gather_elements and scatter_elements walk their tensors: the
/// coordinates of an element of indices (shape `index`, row-major) or of a
/// line of data (shape `data` with the axis dim 1), and the element
/// strides of data, with the axis left out.
struct AxisWalk {
  int rank = 0, axis = 0;
  int64_t data[kMaxDims] = {}, index[kMaxDims] = {};
  int64_t dataStride[kMaxDims] = {}, indexStride[kMaxDims] = {};
  int64_t dim = 0;       // data's size along the axis
  int64_t axisStride = 0; // data's stride along it
  int64_t count = 0;      // indices' size along it

  /// data's offset of the indices element `i` with its axis coordinate 0.
  FSDP_HD int64_t dataOffsetOfIndex(int64_t i) const {
    int64_t at = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = i % index[d];
      i /= index[d];
      if (d != axis)
        at += c * dataStride[d];
    }
    return at;
  }
  /// For line `line` of data: its offset in data and, when the line has
  /// updates (its coordinates lie within indices'), theirs in indices.
  FSDP_HD bool lineOffsets(int64_t line, int64_t &at, int64_t &indexAt) const {
    at = 0, indexAt = 0;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = line % data[d];
      line /= data[d];
      at += c * dataStride[d];
      if (d != axis) {
        inside = inside && c < index[d];
        indexAt += c * indexStride[d];
      }
    }
    return inside;
  }
};

/// An index counted from the end when negative, or false (a fault
/// recorded) when it lies outside [-dim, dim).
FSDP_HD inline bool normalise(int64_t &index, int64_t dim, ErrorSlot *error,
                              int code = kBadIndex) {
  if (index < -dim || index >= dim) {
    reportError(error, code, index);
    return false;
  }
  if (index < 0)
    index += dim;
  return true;
}

/// gather_elements: y[i] = data[element i of indices, its axis coordinate
/// replaced by indices[i]] (0 where the index is bad).
template <typename T, typename I> struct GatherElementsBody {
  AxisWalk walk;
  const T *data;
  const I *indices;
  T *y;
  ErrorSlot *error;
  FSDP_HD void operator()(int64_t i) const {
    int64_t index = static_cast<int64_t>(indices[i]);
    y[i] = normalise(index, walk.dim, error)
               ? data[walk.dataOffsetOfIndex(i) + index * walk.axisStride]
               : T(0);
  }
};

/// How a scatter combines an update with the element it lands on (ONNX's
/// reduction none, add or mul).
enum class Combine { Assign, Add, Mul };

/// Integers combine as the CPU backend's int64 arithmetic does (wrapping
/// on overflow: binary<> of elementwise.h), then narrow back to T.
template <typename T>
FSDP_HD inline T combine(Combine how, T old, T update) {
  if (how == Combine::Assign)
    return update;
  if constexpr (std::is_integral_v<T>) {
    auto a = static_cast<int64_t>(old), b = static_cast<int64_t>(update);
    return static_cast<T>(how == Combine::Add ? binary<Binary::Add>(a, b)
                                              : binary<Binary::Mul>(a, b));
  } else {
    return how == Combine::Add ? static_cast<T>(old + update)
                               : static_cast<T>(old * update);
  }
}

/// scatter_elements over the lines of y along the axis: data's line, then
/// the line's updates in increasing position. y may be data.
template <typename T, typename I> struct ScatterElementsBody {
  AxisWalk walk;
  const T *data;
  const I *indices;
  const T *updates;
  T *y;
  Combine how;
  ErrorSlot *error;
  FSDP_HD void operator()(int64_t line) const {
    int64_t at, indexAt;
    bool updated = walk.lineOffsets(line, at, indexAt);
    for (int64_t n = 0; n < walk.dim; ++n)
      y[at + n * walk.axisStride] = data[at + n * walk.axisStride];
    if (!updated)
      return;
    int64_t step = walk.indexStride[walk.axis];
    for (int64_t n = 0; n < walk.count; ++n) {
      int64_t index = static_cast<int64_t>(indices[indexAt + n * step]);
      if (!normalise(index, walk.dim, error))
        continue;
      T &to = y[at + index * walk.axisStride];
      to = combine(how, to, updates[indexAt + n * step]);
    }
  }
};

/// scatter_nd over the elements of a slice (y already holds data): tuple
/// t of `k` indices names the slice at sum(index_d * strides[d]), which
/// updates[t] (`slice` elements) is combined into, in order of t.
template <typename T, typename I> struct ScatterNDBody {
  const I *indices;
  const T *updates;
  T *y;
  int64_t k, tuples, slice;
  int64_t shape[kMaxDims], strides[kMaxDims]; // data's first k dims
  Combine how;
  ErrorSlot *error;
  FSDP_HD void operator()(int64_t j) const {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t at = 0;
      bool good = true;
      for (int64_t d = 0; d < k && good; ++d) {
        int64_t index = static_cast<int64_t>(indices[t * k + d]);
        good = normalise(index, shape[d], error, kBadIndex + static_cast<int>(d));
        at += index * strides[d];
      }
      if (good)
        y[at + j] = combine(how, y[at + j], updates[t * slice + j]);
    }
  }
};

/// A scatter's operands, untyped (the launchers type them): scatter_nd
/// reads k, tuples, slice, shape and strides; scatter_elements the walk.
struct ScatterArgs {
  fsdprt_dtype_t dtype;
  size_t elementSize;
  bool indices32;
  Combine how;
  const void *data, *indices, *updates;
  void *y;
  ErrorSlot *error;
  AxisWalk walk;
  int64_t k, tuples, slice;
  int64_t shape[kMaxDims], strides[kMaxDims];
};

/// f(T{}, I{}) with T the type `args` combine in (the dtype to add or
/// multiply: F32, F64, I32, I64; an unsigned integer of its size to
/// assign) and I the indices' type.
template <class F> decltype(auto) withScatterTypes(const ScatterArgs &args, F f) {
  auto typed = [&](auto t) {
    if (args.indices32)
      return f(t, int32_t{});
    return f(t, int64_t{});
  };
  if (args.how != Combine::Assign) {
    switch (args.dtype) {
    case FSDPRT_F32: return typed(float{});
    case FSDPRT_F64: return typed(double{});
    case FSDPRT_I32: return typed(int32_t{});
    default: return typed(int64_t{});
    }
  }
  switch (args.elementSize) {
  case 1: return typed(uint8_t{});
  case 2: return typed(uint16_t{});
  case 4: return typed(uint32_t{});
  default: return typed(uint64_t{});
  }
}

/// The scatter_elements body of `args` for T and I.
template <typename T, typename I>
ScatterElementsBody<T, I> scatterElementsBody(const ScatterArgs &a) {
  return {a.walk,
          static_cast<const T *>(a.data),
          static_cast<const I *>(a.indices),
          static_cast<const T *>(a.updates),
          static_cast<T *>(a.y),
          a.how,
          a.error};
}

/// The scatter_nd body of `args` for T and I.
template <typename T, typename I>
ScatterNDBody<T, I> scatterNDBody(const ScatterArgs &a) {
  ScatterNDBody<T, I> body{static_cast<const I *>(a.indices),
                           static_cast<const T *>(a.updates),
                           static_cast<T *>(a.y),
                           a.k,
                           a.tuples,
                           a.slice,
                           {},
                           {},
                           a.how,
                           a.error};
  for (int d = 0; d < kMaxDims; ++d) {
    body.shape[d] = a.shape[d];
    body.strides[d] = a.strides[d];
  }
  return body;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_INDEXING_H
