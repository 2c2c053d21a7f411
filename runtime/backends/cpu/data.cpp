//===- data.cpp - Data movement CPU kernels (any dtype) -------------------===//

#include "kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

namespace fsdprt::cpu {
namespace {

void requireSameDtype(const KernelArgs &args) {
  for (const Tensor &t : args.in)
    require(t.dtype == args.out[0].dtype,
            "inputs and outputs must have one dtype");
  for (const Tensor &t : args.out)
    require(t.dtype == args.out[0].dtype, "outputs must have one dtype");
}

/// Side of the square tiles a transposing read moves at a time: a tile's
/// source columns and destination rows both stay in L1.
constexpr int64_t kTransposeTile = 32;

/// The strided read of a transpose whose last output dim is not
/// contiguous in x while an earlier one, `p`, is: y viewed as a batch of
/// [Y_p, Y_last] matrices (every other dim a batch dim) each read from
/// its transpose in x, tile by tile, so that every cache line is used
/// whole on both sides instead of one element per line read.
template <typename T>
KernelFn transposeTiles(Tensor x, Tensor y, std::vector<int64_t> strides,
                        int64_t offset, size_t p) {
  size_t last = y.shape.size() - 1;
  std::vector<int64_t> own = stridesOf(y.shape), batch, from, to;
  for (size_t d = 0; d < last; ++d)
    if (d != p) {
      batch.push_back(y.shape[d]);
      from.push_back(strides[d]);
      to.push_back(own[d]);
    }
  int64_t rows = y.shape[p], cols = y.shape[last];
  int64_t rowStride = own[p], colStride = strides[last];
  int64_t count = rows && cols ? y.numel / (rows * cols) : 0;
  return [=]() {
    const T *px = x.as<T>() + offset;
    parallelFor(count, rows * cols, [&](int64_t b) {
      const T *src = px + offsetOf(b, batch, from);
      T *dst = y.as<T>() + offsetOf(b, batch, to);
      for (int64_t i0 = 0; i0 < rows; i0 += kTransposeTile)
        for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile) {
          int64_t i1 = std::min(rows, i0 + kTransposeTile);
          int64_t j1 = std::min(cols, j0 + kTransposeTile);
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j)
              dst[i * rowStride + j] = src[i + j * colStride];
        }
    });
    return std::string();
  };
}

/// y[i...] = x[offset + sum(i_d * strides_d)] for elements of type T (only
/// their bytes matter): the strided read shared by transpose, slice and
/// expand, a row of y at a time, or by tiles when it transposes.
template <typename T>
KernelFn gatherStridedOf(Tensor x, Tensor y,
                         std::shared_ptr<const std::vector<int64_t>> strides,
                         int64_t offset) {
  if (y.shape.size() >= 2 && y.shape.back() > 1 && strides->back() != 1)
    for (size_t p = y.shape.size() - 1; p-- > 0;)
      if ((*strides)[p] == 1 && y.shape[p] > 1)
        return transposeTiles<T>(x, y, *strides, offset, p);
  int64_t inner = y.shape.empty() ? 1 : y.shape.back();
  int64_t rows = inner ? y.numel / inner : 0;
  int64_t step = y.shape.empty() ? 0 : strides->back();
  std::vector<int64_t> outer(y.shape.begin(),
                             y.shape.end() - (y.shape.empty() ? 0 : 1));
  return [=]() {
    const T *px = x.as<T>() + offset;
    parallelFor(rows, inner, [&](int64_t row) {
      const T *src = px + offsetOf(row, outer, *strides);
      T *dst = y.as<T>() + row * inner;
      if (step == 1)
        std::memcpy(dst, src, inner * sizeof(T));
      else
        for (int64_t j = 0; j < inner; ++j)
          dst[j] = src[j * step];
    });
    return std::string();
  };
}

KernelFn gatherStrided(const Tensor &x, const Tensor &y,
                       std::vector<int64_t> strides, int64_t offset) {
  auto shared =
      std::make_shared<const std::vector<int64_t>>(std::move(strides));
  switch (fsdprt_dtype_size(y.dtype)) {
  case 1:
    return gatherStridedOf<uint8_t>(x, y, shared, offset);
  case 2:
    return gatherStridedOf<uint16_t>(x, y, shared, offset);
  case 4:
    return gatherStridedOf<uint32_t>(x, y, shared, offset);
  default:
    return gatherStridedOf<uint64_t>(x, y, shared, offset);
  }
}

StridedRead transposeRead(const KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  const Tensor &x = args.in[0], &y = args.out[0];
  std::vector<int64_t> perm = args.attrs.getInts("perm", {});
  require(perm.size() == x.shape.size() && y.shape.size() == x.shape.size(),
          "perm must name every dimension");
  std::vector<int64_t> own = stridesOf(x.shape), strides(perm.size());
  std::vector<bool> seen(perm.size(), false);
  for (size_t d = 0; d < perm.size(); ++d) {
    require(perm[d] >= 0 && perm[d] < static_cast<int64_t>(perm.size()) &&
                !seen[perm[d]],
            "perm is not a permutation");
    seen[perm[d]] = true;
    require(y.shape[d] == x.shape[perm[d]],
            "output " + shapeString(y.shape) + " is not the permuted input");
    strides[d] = own[perm[d]];
  }
  return {strides, 0};
}

StridedRead sliceRead(const KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  const Tensor &x = args.in[0], &y = args.out[0];
  size_t rank = x.shape.size();
  std::vector<int64_t> starts = args.attrs.getInts("starts", {});
  std::vector<int64_t> steps = args.attrs.getInts("steps", {});
  require(starts.size() == rank && steps.size() == rank &&
              y.shape.size() == rank,
          "starts and steps need one entry per dimension of x " +
              shapeString(x.shape) + ", and the output x's rank");
  std::vector<int64_t> own = stridesOf(x.shape), strides(rank);
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t last = starts[d] + (y.shape[d] - 1) * steps[d];
    require(y.shape[d] == 0 || (starts[d] >= 0 && starts[d] < x.shape[d] &&
                                last >= 0 && last < x.shape[d]),
            "dimension " + std::to_string(d) + " reads outside x " +
                shapeString(x.shape));
    offset += starts[d] * own[d];
    strides[d] = steps[d] * own[d];
  }
  return {strides, offset};
}

StridedRead expandRead(const KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  require(broadcastShapes(args.in[0].shape, args.out[0].shape) ==
              args.out[0].shape,
          "output " + shapeString(args.out[0].shape) +
              " is not the broadcast of " + shapeString(args.in[0].shape));
  return {broadcastStrides(args.in[0].shape, args.out[0].shape, "the input"),
          0};
}

KernelFn stridedKernel(KernelArgs &args, StridedRead read) {
  return gatherStrided(args.in[0], args.out[0], std::move(read.strides),
                       read.offset);
}

KernelFn copy(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  Tensor x = args.in[0], y = args.out[0];
  require(x.numel == y.numel, "input and output differ in size");
  return [=]() {
    std::memmove(y.data, x.data, y.bytes());
    return std::string();
  };
}

/// A unit's flat buffer from its members: input i at element `offsets[i]`,
/// zeros in the alignment gaps and the padding.
KernelFn pack(KernelArgs &args) {
  require(args.out.size() == 1 && !args.in.empty(),
          "takes the unit's members and one output");
  requireSameDtype(args);
  Tensor flat = args.out[0];
  std::vector<Tensor> members = args.in;
  std::vector<int64_t> offsets = args.attrs.getInts("offsets", {});
  require(offsets.size() == members.size(), "needs one offset per member");
  int64_t end = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    require(offsets[i] >= end && members[i].numel <= flat.numel - offsets[i],
            "member " + std::to_string(i) + " at offset " +
                std::to_string(offsets[i]) +
                " overlaps the previous one or runs past the flat buffer " +
                shapeString(flat.shape));
    end = offsets[i] + members[i].numel;
  }
  size_t element = fsdprt_dtype_size(flat.dtype);
  return [=]() {
    char *to = flat.as<char>();
    int64_t at = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      std::memset(to + at * element, 0, (offsets[i] - at) * element);
      std::memcpy(to + offsets[i] * element, members[i].data,
                  members[i].bytes());
      at = offsets[i] + members[i].numel;
    }
    std::memset(to + at * element, 0, (flat.numel - at) * element);
    return std::string();
  };
}

/// A collective over a group of one rank (a mesh axis of size 1): every
/// reduction and gather is the input itself. Groups of several ranks need
/// the multi-rank runtime's communicator.
KernelFn oneRankCollective(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  require(args.in[0].numel == args.out[0].numel,
          "input and output differ in size: its group has several ranks, "
          "and a session runs one");
  return copy(args);
}

//===----------------------------------------------------------------------===//
// pad
//===----------------------------------------------------------------------===//

enum class PadMode { Constant, Reflect, Edge };

/// Where output index `j` of a padded axis (size `n`, `before` added in
/// front) reads the input, or -1 for the fill value.
int64_t padSource(int64_t j, int64_t n, int64_t before, PadMode mode) {
  int64_t i = j - before;
  if (i >= 0 && i < n)
    return i;
  if (mode == PadMode::Constant)
    return -1;
  if (mode == PadMode::Edge)
    return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i;
}

/// y = x padded per axis (`pads`: begins then ends), a row of y at a time:
/// the row's source row (or the fill) from the outer indices, then each
/// element of the last axis from its source.
template <typename T>
KernelFn padOf(Tensor x, Tensor y, std::vector<int64_t> pads, PadMode mode,
               T fill) {
  size_t rank = x.shape.size();
  int64_t inner = rank ? y.shape.back() : 1;
  int64_t rows = inner ? y.numel / inner : 0;
  std::vector<int64_t> xStrides = stridesOf(x.shape);
  std::vector<int64_t> lastSource;
  for (int64_t j = 0; rank && j < inner; ++j)
    lastSource.push_back(padSource(j, x.shape.back(), pads[rank - 1], mode));
  return [=]() {
    parallelFor(rows, inner, [&](int64_t row) {
      T *dst = y.as<T>() + row * inner;
      int64_t from = 0;
      int64_t r = row;
      for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0;
           r /= y.shape[d], --d) {
        int64_t i = padSource(r % y.shape[d], x.shape[d], pads[d], mode);
        if (i < 0) {
          std::fill(dst, dst + inner, fill);
          return;
        }
        from += i * xStrides[d];
      }
      const T *src = x.as<T>() + from;
      for (int64_t j = 0; j < inner; ++j)
        dst[j] =
            rank && lastSource[j] < 0 ? fill : src[rank ? lastSource[j] : 0];
    });
    return std::string();
  };
}

PadMode padMode(const std::string &name) {
  if (name == "constant")
    return PadMode::Constant;
  if (name == "reflect")
    return PadMode::Reflect;
  require(name == "edge",
          "mode must be constant, reflect or edge, not " + name);
  return PadMode::Edge;
}

KernelFn pad(KernelArgs &args) {
  requireArity(args, 1, 1, 1);
  requireSameDtype(args);
  const Tensor &x = args.in[0], &y = args.out[0];
  size_t rank = x.shape.size();
  std::vector<int64_t> pads = args.attrs.getInts("pads", {});
  PadMode mode = padMode(args.attrs.getString("mode", "constant"));
  require(pads.size() == 2 * rank && y.shape.size() == rank,
          "pads needs a begin and an end for each dimension of x " +
              shapeString(x.shape));
  for (size_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[d + rank];
    require(before >= 0 && after >= 0 &&
                y.shape[d] == x.shape[d] + before + after,
            "output " + shapeString(y.shape) + " is not x " +
                shapeString(x.shape) + " padded by non-negative pads");
    bool padded = before || after;
    require(!padded || mode == PadMode::Constant || x.shape[d] > 0,
            "dimension " + std::to_string(d) + " is empty: nothing to copy");
    require(!padded || mode != PadMode::Reflect ||
                (before < x.shape[d] && after < x.shape[d]),
            "reflect pads of dimension " + std::to_string(d) +
                " must be smaller than its size");
  }
  pads.resize(rank); // the kernel needs only the begins
  uint64_t bits = padFill(y.dtype, args.attrs.getFloat("value", 0));
  auto typed = [&](auto zero) {
    decltype(zero) fill;
    std::memcpy(&fill, &bits, sizeof(fill));
    return padOf(x, y, pads, mode, fill);
  };
  switch (fsdprt_dtype_size(y.dtype)) {
  case 1:
    return typed(uint8_t());
  case 2:
    return typed(uint16_t());
  case 4:
    return typed(uint32_t());
  default:
    return typed(uint64_t());
  }
}

/// Concat (pieces = inputs) and split (pieces = outputs) along `axis`.
KernelFn pieces(KernelArgs &args, bool concat) {
  require(concat ? args.out.size() == 1 && !args.in.empty()
                 : args.in.size() == 1 && !args.out.empty(),
          concat ? "takes inputs and one output" : "takes one input");
  requireSameDtype(args);
  Tensor whole = concat ? args.out[0] : args.in[0];
  std::vector<Tensor> parts = concat ? args.in : args.out;
  int64_t axis = args.attrs.getInt("axis", 0);
  size_t rank = whole.shape.size();
  require(axis >= 0 && axis < static_cast<int64_t>(rank), "axis out of range");
  int64_t total = 0;
  for (const Tensor &p : parts) {
    require(p.shape.size() == rank, "pieces must have the whole's rank");
    for (size_t d = 0; d < rank; ++d)
      require(d == static_cast<size_t>(axis) || p.shape[d] == whole.shape[d],
              "piece " + shapeString(p.shape) + " does not fit " +
                  shapeString(whole.shape));
    total += p.shape[axis];
  }
  require(total == whole.shape[axis], "pieces do not add up along the axis");
  size_t size = fsdprt_dtype_size(whole.dtype);
  int64_t outer = product(whole.shape, 0, axis);
  int64_t inner = product(whole.shape, axis + 1, rank) * size;
  // Where each piece starts inside one outer slice of the whole, in bytes.
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Tensor &p : parts) {
    starts.push_back(at);
    at += p.shape[axis] * inner;
  }
  int64_t span = whole.shape[axis] * inner;
  return [=]() {
    parallelFor(outer, span / 4, [&](int64_t o) {
      for (size_t i = 0; i < parts.size(); ++i) {
        int64_t chunk = parts[i].shape[axis] * inner;
        char *w = whole.as<char>() + o * span + starts[i];
        char *q = parts[i].as<char>() + o * chunk;
        if (concat)
          std::memcpy(w, q, chunk);
        else
          std::memcpy(q, w, chunk);
      }
    });
    return std::string();
  };
}

KernelFn gather(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  Tensor data = args.in[0], indices = args.in[1], y = args.out[0];
  require(data.dtype == y.dtype, "data and output must have one dtype");
  require(indices.dtype == FSDPRT_I64 || indices.dtype == FSDPRT_I32,
          "indices must be int64 or int32");
  int64_t axis = args.attrs.getInt("axis", 0);
  size_t rank = data.shape.size();
  require(axis >= 0 && axis < static_cast<int64_t>(rank), "axis out of range");
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), data.shape.begin() + axis + 1,
                  data.shape.end());
  require(expected == y.shape, "output " + shapeString(y.shape) +
                                   " should be " + shapeString(expected));
  size_t size = fsdprt_dtype_size(data.dtype);
  int64_t outer = product(data.shape, 0, axis), dim = data.shape[axis];
  int64_t inner = product(data.shape, axis + 1, rank) * size;
  return [=]() -> std::string {
    for (int64_t i = 0; i < indices.numel; ++i) {
      int64_t index = indices.dtype == FSDPRT_I64 ? indices.as<int64_t>()[i]
                                                  : indices.as<int32_t>()[i];
      if (index < -dim || index >= dim)
        return "index " + std::to_string(index) +
               " is out of range for a dimension of size " +
               std::to_string(dim);
    }
    parallelFor(outer * indices.numel, inner, [&](int64_t r) {
      int64_t o = r / indices.numel, i = r % indices.numel;
      int64_t index = indices.dtype == FSDPRT_I64 ? indices.as<int64_t>()[i]
                                                  : indices.as<int32_t>()[i];
      if (index < 0)
        index += dim;
      std::memcpy(y.as<char>() + r * inner,
                  data.as<char>() + (o * dim + index) * inner, inner);
    });
    return "";
  };
}

/// The gradient of gather: zeros of data's shape, with each gathered slice
/// of g added back at its index (indices repeat in embeddings: summed).
KernelFn gatherGrad(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  Tensor g = args.in[0], indices = args.in[1], y = args.out[0];
  requireDtype(g, FSDPRT_F32, "the gradient");
  requireDtype(y, FSDPRT_F32, "the data gradient");
  require(indices.dtype == FSDPRT_I64 || indices.dtype == FSDPRT_I32,
          "indices must be int64 or int32");
  int64_t axis = args.attrs.getInt("axis", 0);
  size_t rank = y.shape.size();
  require(axis >= 0 && axis < static_cast<int64_t>(rank), "axis out of range");
  std::vector<int64_t> expected(y.shape.begin(), y.shape.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), y.shape.begin() + axis + 1, y.shape.end());
  require(expected == g.shape, "gradient " + shapeString(g.shape) +
                                   " should be " + shapeString(expected));
  int64_t outer = product(y.shape, 0, axis), dim = y.shape[axis];
  int64_t inner = product(y.shape, axis + 1, rank);
  return [=]() -> std::string {
    float *py = y.as<float>();
    std::fill(py, py + y.numel, 0.0f);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < indices.numel; ++i) {
        int64_t index = indices.dtype == FSDPRT_I64 ? indices.as<int64_t>()[i]
                                                    : indices.as<int32_t>()[i];
        if (index < -dim || index >= dim)
          return "index " + std::to_string(index) +
                 " is out of range for a dimension of size " +
                 std::to_string(dim);
        if (index < 0)
          index += dim;
        const float *src = g.as<float>() + (o * indices.numel + i) * inner;
        float *dst = py + (o * dim + index) * inner;
        for (int64_t j = 0; j < inner; ++j)
          dst[j] += src[j];
      }
    return "";
  };
}

/// ONNX Trilu on the last two dims: y keeps x where `j - i >= k` (upper)
/// or `j - i <= k` (lower) and is 0 elsewhere. `k` is the attribute, or
/// the optional second input (one int64) when the model computes it. Only
/// the elements' bytes matter, so it takes any dtype.
KernelFn trilu(KernelArgs &args) {
  requireArity(args, 1, 2, 1);
  const Tensor &x = args.in[0], &y = args.out[0];
  Tensor kInput = args.in.size() == 2 ? args.in[1] : Tensor();
  if (args.in.size() == 2) {
    requireDtype(kInput, FSDPRT_I64, "k");
    require(kInput.numel == 1, "k must hold one value");
  }
  require(x.shape.size() >= 2,
          "takes a tensor of rank 2 or more, not " + shapeString(x.shape));
  require(y.shape == x.shape && y.dtype == x.dtype,
          "output must have the input's shape and dtype");
  int64_t kAttr = args.attrs.getInt("k", 0);
  bool hasKInput = args.in.size() == 2;
  bool upper = args.attrs.getInt("upper", 1) != 0;
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  int64_t matrices = product(x.shape, 0, x.shape.size() - 2);
  size_t size = fsdprt_dtype_size(x.dtype);
  return [=]() {
    const char *px = x.as<char>();
    char *py = y.as<char>();
    int64_t k = hasKInput ? *kInput.as<int64_t>() : kAttr;
    // Past every column either way: clamping keeps i + k from overflowing.
    k = std::clamp<int64_t>(k, -rows - cols, rows + cols);
    parallelFor(matrices * rows, cols, [&](int64_t row) {
      int64_t i = row % rows;
      // The kept columns [begin, end) of row i, clamped to the row.
      int64_t begin = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      int64_t end = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      const char *from = px + row * cols * size;
      char *to = py + row * cols * size;
      std::memset(to, 0, begin * size);
      std::memmove(to + begin * size, from + begin * size,
                   (end - begin) * size);
      std::memset(to + end * size, 0, (cols - end) * size);
    });
    return std::string();
  };
}

/// `index` counted from the end when negative; an error unless it lies in
/// [-dim, dim).
std::string normaliseIndex(int64_t &index, int64_t dim) {
  if (index < -dim || index >= dim)
    return "index " + std::to_string(index) +
           " is out of range for a dimension of size " + std::to_string(dim);
  if (index < 0)
    index += dim;
  return "";
}

void requireIndices(const Tensor &indices) {
  require(indices.dtype == FSDPRT_I64 || indices.dtype == FSDPRT_I32,
          "indices must be int64 or int32");
}

/// Where each element of `indices` points in `data` for gather_elements
/// and scatter_elements: its own position, with the coordinate along
/// `axis` replaced by its value.
struct AlongAxis {
  std::vector<int64_t> shape, strides;
  int64_t axisStride = 0, dim = 0;

  AlongAxis(const KernelArgs &args, const Tensor &data, const Tensor &indices) {
    requireIndices(indices);
    size_t rank = data.shape.size();
    int64_t axis = args.attrs.getInt("axis", 0);
    require(axis >= 0 && axis < static_cast<int64_t>(rank),
            "axis out of range");
    require(indices.shape.size() == rank,
            "indices " + shapeString(indices.shape) + " and data " +
                shapeString(data.shape) + " differ in rank");
    for (size_t d = 0; d < rank; ++d)
      require(d == static_cast<size_t>(axis) ||
                  indices.shape[d] <= data.shape[d],
              "indices " + shapeString(indices.shape) +
                  " are larger than data " + shapeString(data.shape) +
                  " off the axis");
    shape = indices.shape;
    strides = stridesOf(data.shape);
    axisStride = strides[axis];
    dim = data.shape[axis];
    strides[axis] = 0;
  }

  /// The element of data that element `i` of `indices` points at.
  std::string offset(const Tensor &indices, int64_t i, int64_t &at) const {
    int64_t index = indexAt(indices, i);
    if (std::string error = normaliseIndex(index, dim); !error.empty())
      return error;
    at = offsetOf(i, shape, strides) + index * axisStride;
    return "";
  }
};

template <typename T>
KernelFn gatherElementsOf(Tensor data, Tensor indices, Tensor y, AlongAxis e) {
  return [=]() -> std::string {
    for (int64_t i = 0; i < y.numel; ++i) {
      int64_t at;
      if (std::string error = e.offset(indices, i, at); !error.empty())
        return error;
      y.as<T>()[i] = data.as<T>()[at];
    }
    return "";
  };
}

/// One int read from a one-value I64 or I32 tensor.
int64_t scalarInt(const Tensor &t) {
  return t.dtype == FSDPRT_I64 ? *t.as<int64_t>() : *t.as<int32_t>();
}

/// What running sums of T add in: integers unsigned, so that they wrap on
/// overflow as int64 `add` does.
template <typename T, bool = std::is_integral_v<T>> struct SumOf {
  using type = T;
};
template <typename T> struct SumOf<T, true> {
  using type = std::make_unsigned_t<T>;
};

/// Running sums of T along `axis` (known when prepared, or -1: read from
/// the one-value `axisInput` when run), ONNX CumSum's `exclusive` and
/// `reverse` as flags.
template <typename T>
KernelFn cumsumOf(Tensor x, Tensor y, int64_t axis, Tensor axisInput,
                  bool exclusive, bool reverse) {
  return [=]() -> std::string {
    int64_t rank = static_cast<int64_t>(x.shape.size());
    int64_t a = axis >= 0 ? axis : scalarInt(axisInput);
    if (a < -rank || a >= rank)
      return "axis " + std::to_string(a) + " is out of range for rank " +
             std::to_string(rank);
    a = a < 0 ? a + rank : a;
    int64_t outer = product(x.shape, 0, a), dim = x.shape[a];
    int64_t inner = product(x.shape, a + 1, rank);
    const T *px = x.as<T>();
    T *py = y.as<T>();
    parallelFor(outer * inner, dim, [&](int64_t line) {
      int64_t base = line / inner * dim * inner + line % inner;
      using Sum = typename SumOf<T>::type;
      Sum sum = 0;
      for (int64_t n = 0; n < dim; ++n) {
        int64_t at = base + (reverse ? dim - 1 - n : n) * inner;
        Sum value = static_cast<Sum>(px[at]); // read first: y may be x
        py[at] = static_cast<T>(exclusive ? sum : sum + value);
        sum += value;
      }
    });
    return "";
  };
}

/// ONNX GatherElements: y[i...] = data[i... with i_axis = indices[i...]].
KernelFn gatherElements(KernelArgs &args) {
  requireArity(args, 2, 2, 1);
  Tensor data = args.in[0], indices = args.in[1], y = args.out[0];
  require(data.dtype == y.dtype, "data and output must have one dtype");
  require(y.shape == indices.shape, "output " + shapeString(y.shape) +
                                        " should be " +
                                        shapeString(indices.shape));
  AlongAxis e(args, data, indices);
  switch (fsdprt_dtype_size(y.dtype)) {
  case 1:
    return gatherElementsOf<uint8_t>(data, indices, y, e);
  case 2:
    return gatherElementsOf<uint16_t>(data, indices, y, e);
  case 4:
    return gatherElementsOf<uint32_t>(data, indices, y, e);
  default:
    return gatherElementsOf<uint64_t>(data, indices, y, e);
  }
}

/// How a scatter combines an update with the element it lands on.
enum class Combine { Assign, Add, Mul };

Combine combineOf(const KernelArgs &args, fsdprt_dtype_t dtype) {
  std::string reduction = args.attrs.getString("reduction", "none");
  require(reduction == "none" || reduction == "add" || reduction == "mul",
          "reduction must be none, add or mul, not " + reduction);
  if (reduction == "none")
    return Combine::Assign;
  require(dtype == FSDPRT_F32 || dtype == FSDPRT_F64 || dtype == FSDPRT_I32 ||
              dtype == FSDPRT_I64,
          "reduction " + reduction + " does not support " +
              fsdprt_dtype_name(dtype));
  return reduction == "add" ? Combine::Add : Combine::Mul;
}

template <typename T>
void combine(Combine how, T *dst, const T *src, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    dst[j] = how == Combine::Assign ? src[j]
             : how == Combine::Add  ? static_cast<T>(dst[j] + src[j])
                                    : static_cast<T>(dst[j] * src[j]);
}

/// Calls `body` with a value of the element type a scatter works in: the
/// dtype itself to add or multiply, an integer of its size to assign.
template <typename Body>
KernelFn withScatterType(fsdprt_dtype_t dtype, Combine how, Body body) {
  if (how != Combine::Assign) {
    switch (dtype) {
    case FSDPRT_F32:
      return body(float());
    case FSDPRT_F64:
      return body(double());
    case FSDPRT_I32:
      return body(int32_t());
    default:
      return body(int64_t());
    }
  }
  switch (fsdprt_dtype_size(dtype)) {
  case 1:
    return body(uint8_t());
  case 2:
    return body(uint16_t());
  case 4:
    return body(uint32_t());
  default:
    return body(uint64_t());
  }
}

/// ONNX ScatterElements: y = data, then updates[i...] written (or added,
/// or multiplied) at data[i... with i_axis = indices[i...]], in order.
KernelFn scatterElements(KernelArgs &args) {
  requireArity(args, 3, 3, 1);
  Tensor data = args.in[0], indices = args.in[1], updates = args.in[2],
         y = args.out[0];
  require(data.dtype == y.dtype && updates.dtype == y.dtype,
          "data, updates and output must have one dtype");
  require(y.shape == data.shape, "output " + shapeString(y.shape) +
                                     " should be " + shapeString(data.shape));
  require(updates.shape == indices.shape,
          "updates " + shapeString(updates.shape) + " should be " +
              shapeString(indices.shape));
  AlongAxis e(args, data, indices);
  Combine how = combineOf(args, y.dtype);
  return withScatterType(y.dtype, how, [&](auto type) -> KernelFn {
    using T = decltype(type);
    return [=]() -> std::string {
      std::memmove(y.data, data.data, y.bytes());
      for (int64_t i = 0; i < indices.numel; ++i) {
        int64_t at;
        if (std::string error = e.offset(indices, i, at); !error.empty())
          return error;
        combine(how, y.as<T>() + at, updates.as<T>() + i, 1);
      }
      return "";
    };
  });
}

/// ONNX ScatterND: y = data, then each slice of updates written (or added,
/// or multiplied) at the data slice its index tuple (the last dim of
/// indices, k long) names.
KernelFn scatterND(KernelArgs &args) {
  requireArity(args, 3, 3, 1);
  Tensor data = args.in[0], indices = args.in[1], updates = args.in[2],
         y = args.out[0];
  require(data.dtype == y.dtype && updates.dtype == y.dtype,
          "data, updates and output must have one dtype");
  requireIndices(indices);
  require(y.shape == data.shape, "output " + shapeString(y.shape) +
                                     " should be " + shapeString(data.shape));
  require(!indices.shape.empty() &&
              indices.shape.back() <= static_cast<int64_t>(data.shape.size()),
          "the last dim of indices " + shapeString(indices.shape) +
              " must be at most data's rank");
  int64_t k = indices.shape.back();
  std::vector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
  expected.insert(expected.end(), data.shape.begin() + k, data.shape.end());
  require(updates.shape == expected, "updates " +
                                         shapeString(updates.shape) +
                                         " should be " + shapeString(expected));
  int64_t slice = product(data.shape, k, data.shape.size());
  int64_t tuples = product(indices.shape, 0, indices.shape.size() - 1);
  std::vector<int64_t> strides = stridesOf(data.shape);
  Combine how = combineOf(args, y.dtype);
  return withScatterType(y.dtype, how, [&](auto type) -> KernelFn {
    using T = decltype(type);
    return [=]() -> std::string {
      std::memmove(y.data, data.data, y.bytes());
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t at = 0;
        for (int64_t j = 0; j < k; ++j) {
          int64_t index = indexAt(indices, t * k + j);
          if (std::string error = normaliseIndex(index, data.shape[j]);
              !error.empty())
            return error;
          at += index * strides[j];
        }
        combine(how, y.as<T>() + at, updates.as<T>() + t * slice, slice);
      }
      return "";
    };
  });
}

/// ONNX CumSum: F32, F64, I64 or I32; the axis a parameter or the optional
/// second input (one I64 or I32 value).
KernelFn cumsum(KernelArgs &args) {
  requireArity(args, 1, 2, 1);
  const Tensor &x = args.in[0], &y = args.out[0];
  require(y.shape == x.shape && y.dtype == x.dtype,
          "output must have the input's shape and dtype");
  require(!x.shape.empty(), "takes a tensor of rank 1 or more");
  Tensor axisInput = args.in.size() == 2 ? args.in[1] : Tensor();
  int64_t axis = -1;
  if (args.in.size() == 2) {
    require(axisInput.dtype == FSDPRT_I64 || axisInput.dtype == FSDPRT_I32,
            "axis must be int64 or int32");
    require(axisInput.numel == 1, "axis must hold one value");
  } else {
    axis = args.attrs.getInt("axis", 0);
    require(axis >= 0 && axis < static_cast<int64_t>(x.shape.size()),
            "axis out of range");
  }
  bool exclusive = args.attrs.getInt("exclusive", 0) != 0;
  bool reverse = args.attrs.getInt("reverse", 0) != 0;
  switch (x.dtype) {
  case FSDPRT_F32:
    return cumsumOf<float>(x, y, axis, axisInput, exclusive, reverse);
  case FSDPRT_F64:
    return cumsumOf<double>(x, y, axis, axisInput, exclusive, reverse);
  case FSDPRT_I64:
    return cumsumOf<int64_t>(x, y, axis, axisInput, exclusive, reverse);
  case FSDPRT_I32:
    return cumsumOf<int32_t>(x, y, axis, axisInput, exclusive, reverse);
  default:
    throw KernelError(std::string("does not support ") +
                      fsdprt_dtype_name(x.dtype));
  }
}

} // namespace

uint64_t padFill(fsdprt_dtype_t dtype, double value) {
  uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (dtype) {
  case FSDPRT_F32:
    put(static_cast<float>(value));
    break;
  case FSDPRT_F64:
    put(value);
    break;
  case FSDPRT_I64:
    put(static_cast<int64_t>(value));
    break;
  case FSDPRT_I32:
    put(static_cast<int32_t>(value));
    break;
  case FSDPRT_I16:
    put(static_cast<int16_t>(value));
    break;
  case FSDPRT_I8:
  case FSDPRT_U8:
  case FSDPRT_BOOL:
    put(static_cast<uint8_t>(value));
    break;
  default:
    require(value == 0, std::string("a non-zero fill value for ") +
                            fsdprt_dtype_name(dtype) + " is not supported");
  }
  return bits;
}

bool isStridedRead(const std::string &op) {
  return op == "transpose" || op == "slice" || op == "expand";
}

StridedRead stridedRead(const std::string &op, const KernelArgs &args) {
  if (op == "transpose")
    return transposeRead(args);
  if (op == "slice")
    return sliceRead(args);
  return expandRead(args);
}

void registerData(Registry &r) {
  r["transpose"] = [](KernelArgs &a) {
    return stridedKernel(a, transposeRead(a));
  };
  r["slice"] = [](KernelArgs &a) { return stridedKernel(a, sliceRead(a)); };
  r["expand"] = [](KernelArgs &a) { return stridedKernel(a, expandRead(a)); };
  r["copy"] = copy;
  r["pad"] = pad;
  r["concat"] = [](KernelArgs &a) { return pieces(a, true); };
  r["split"] = [](KernelArgs &a) { return pieces(a, false); };
  r["gather"] = gather;
  r["trilu"] = trilu;
  r["cumsum"] = cumsum;
  r["gather_grad"] = gatherGrad;
  r["gather_elements"] = gatherElements;
  r["scatter_elements"] = scatterElements;
  r["scatter_nd"] = scatterND;
  r["pack"] = pack;
  r["all_gather"] = oneRankCollective;
  r["reduce_scatter"] = oneRankCollective;
  r["all_reduce"] = oneRankCollective;
}

} // namespace fsdprt::cpu
