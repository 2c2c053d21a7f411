//===- reduce.h - Reductions over any axes ----------------------*- C++ -*-===//
//
// reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_sum_square,
// reduce_log_sum, reduce_log_sum_exp and reduce_prod over any set of
// axes, reduced
// and kept dims interleaved or not, as a row body (hd.h): one row per
// output element, whose `count` reduced elements the group's lanes stride
// over, accumulating in fp32. The read is planned on the host
// (planReduce): the kept dims and the reduced dims, each collapsed as a
// strided read (data.h), so the body needs no knowledge of the axes.
// global_average_pool is reduce_mean over the spatial dims.
//
// A sum, mean or sum of squares over the outer dims of x, the kept dims
// inner (a bias's gradient: [rows, n] to [n]), goes by columns instead
// (reduce()): a group per output read the column with a stride of n
// floats, one sector per element, and a step of GPT-2 spent 7% of its
// kernel time there. Each item of ColumnPartials sums a chunk of rows of
// one column, neighbouring items neighbouring floats, and ColumnTotals
// adds the chunks' sums in order (scratch: reduceScratchFloats).
//
// reduce_max and reduce_min propagate NaN as the CPU backend (and
// PyTorch) do; the lanes count the NaNs they met, since a group's max need
// not keep one. reduce_log_sum_exp shifts by the row's max before exp (the
// CPU sums exp(x) in double, which does not overflow where fp32 would).
// reduce_prod has no group product: the group's first lane multiplies its
// row in double, in order, as the CPU does (which splits a product of
// everything into up to 64 pieces past 8192 elements: there, equal but
// for rounding).
//
// Integers (I32, I64) reduce by sum, product, sum of squares, max and min,
// one thread per row (IntegerReduceBody): the rows these reduce are masks
// and lengths, short, and an integer group sum would need its own
// combining.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_REDUCE_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_REDUCE_H

#include "data.h"

namespace fsdprt::cuda {

enum class Reduce { Sum, Mean, Max, Min, SumSquare, LogSum, LogSumExp, Prod };

inline const char *reduceName(Reduce kind) {
  static const char *const names[] = {
      "reduce_sum",        "reduce_mean",    "reduce_max",
      "reduce_min",        "reduce_sum_square", "reduce_log_sum",
      "reduce_log_sum_exp", "reduce_prod"};
  return names[static_cast<int>(kind)];
}

/// Calls f(std::integral_constant<Reduce, kind>{}): the launchers' one
/// switch from a Reduce to its body's instantiation.
template <class F> decltype(auto) withReduce(Reduce kind, F &&f) {
  switch (kind) {
  case Reduce::Sum: return f(std::integral_constant<Reduce, Reduce::Sum>{});
  case Reduce::Mean: return f(std::integral_constant<Reduce, Reduce::Mean>{});
  case Reduce::Max: return f(std::integral_constant<Reduce, Reduce::Max>{});
  case Reduce::Min: return f(std::integral_constant<Reduce, Reduce::Min>{});
  case Reduce::SumSquare:
    return f(std::integral_constant<Reduce, Reduce::SumSquare>{});
  case Reduce::LogSum:
    return f(std::integral_constant<Reduce, Reduce::LogSum>{});
  case Reduce::LogSumExp:
    return f(std::integral_constant<Reduce, Reduce::LogSumExp>{});
  case Reduce::Prod: break;
  }
  return f(std::integral_constant<Reduce, Reduce::Prod>{});
}

/// Output element `row` (of `rows`) reduces the `count` elements of x at
/// kept.offset(0, row) + reduced.offset(0, j), j in [0, count).
/// `columns`: every reduced dim is outside every kept dim, so element j of
/// output `row` is x[j * rows + row].
struct ReducePlan {
  Broadcast kept, reduced;
  int64_t rows = 1, count = 1;
  bool columns = false;
};

/// y[row] = the reduction of row `row`'s elements (plan: planReduce).
template <Reduce Kind> struct ReduceBody {
  ReducePlan plan;
  const float *x;
  float *y;

  FSDP_GROUP_BODY
  template <class Group>
  FSDP_HD void operator()(Group &g, int64_t row) const {
    const float *px = x + plan.kept.offset(0, row);
    if constexpr (Kind == Reduce::Prod) {
      if (g.lane() == 0) {
        double acc = 1;
        for (int64_t j = 0; j < plan.count; ++j)
          acc *= px[plan.reduced.offset(0, j)];
        y[row] = static_cast<float>(acc);
      }
      return;
    }
    constexpr bool extreme = Kind == Reduce::Max || Kind == Reduce::Min ||
                             Kind == Reduce::LogSumExp;
    // The max (of -x for min) with the NaNs counted apart; else the sum.
    float acc = extreme ? -INFINITY : 0.0f, nans = 0;
    for (int64_t j = g.lane(); j < plan.count; j += g.size()) {
      float v = px[plan.reduced.offset(0, j)];
      if (!extreme)
        acc += Kind == Reduce::SumSquare ? v * v : v;
      else if (v != v) // NaN
        nans += 1;
      else
        acc = fmaxf(acc, Kind == Reduce::Min ? -v : v);
    }
    if (extreme) {
      acc = g.max(acc);
      if (g.sum(nans) > 0)
        acc = NAN;
    } else {
      acc = g.sum(acc);
    }
    if (Kind == Reduce::LogSumExp) {
      // log(sum(exp(x - max))) + max; an infinite max (or NaN) is the
      // result, as the CPU's double sum gives it.
      float max = acc, sum = 0;
      bool finite = max - max == 0;
      for (int64_t j = g.lane(); j < plan.count && finite; j += g.size())
        sum += expf(px[plan.reduced.offset(0, j)] - max);
      sum = g.sum(sum);
      acc = finite ? logf(sum) + max : max;
    }
    if (g.lane() == 0)
      y[row] = Kind == Reduce::Mean     ? acc / static_cast<float>(plan.count)
               : Kind == Reduce::Min    ? -acc
               : Kind == Reduce::LogSum ? logf(acc)
                                        : acc;
  }
};

/// The reduced elements one ColumnPartials item sums.
constexpr int64_t kColumnChunk = 64;

/// Whether reduce() sums `plan` by columns.
inline bool byColumns(Reduce kind, const ReducePlan &plan) {
  bool sum =
      kind == Reduce::Sum || kind == Reduce::Mean || kind == Reduce::SumSquare;
  return sum && plan.columns && plan.rows > 1 && plan.count > 1;
}

/// The floats of scratch reduce() needs for `plan`.
inline int64_t reduceScratchFloats(Reduce kind, const ReducePlan &plan) {
  return byColumns(kind, plan)
             ? (plan.count + kColumnChunk - 1) / kColumnChunk * plan.rows
             : 0;
}

/// Item chunk * rows + row: the sum (of squares) of x[j * rows + row] over
/// the chunk's j.
template <Reduce Kind> struct ColumnPartials {
  const float *x;
  float *partials;
  int64_t rows, count;

  FSDP_HD void operator()(int64_t item) const {
    int64_t chunk = item / rows, row = item % rows;
    int64_t first = chunk * kColumnChunk,
            end = first + kColumnChunk < count ? first + kColumnChunk : count;
    float acc = 0;
    for (int64_t j = first; j < end; ++j) {
      float v = x[j * rows + row];
      acc += Kind == Reduce::SumSquare ? v * v : v;
    }
    partials[item] = acc;
  }
};

/// y[row] = the chunks' sums of column `row` added in order (a mean's
/// divided by count).
template <Reduce Kind> struct ColumnTotals {
  const float *partials;
  float *y;
  int64_t rows, count, chunks;

  FSDP_HD void operator()(int64_t row) const {
    float acc = 0;
    for (int64_t c = 0; c < chunks; ++c)
      acc += partials[c * rows + row];
    y[row] = Kind == Reduce::Mean ? acc / static_cast<float>(count) : acc;
  }
};

/// A reduction's kernels, through `launch` (a launcher: `elementwise(body,
/// n)` and `rowwise(body, rows)` return an error, false when there is
/// none): by columns where byColumns says so, in `scratch`
/// (reduceScratchFloats), else one group per output.
template <class Launcher>
auto reduce(Launcher &launch, Reduce kind, const ReducePlan &plan,
            const float *x, float *y, float *scratch) {
  return withReduce(kind, [&](auto k) {
    constexpr Reduce Kind = decltype(k)::value;
    if (!byColumns(Kind, plan))
      return launch.rowwise(ReduceBody<Kind>{plan, x, y}, plan.rows);
    int64_t chunks = (plan.count + kColumnChunk - 1) / kColumnChunk;
    if (auto e = launch.elementwise(
            ColumnPartials<Kind>{x, scratch, plan.rows, plan.count},
            chunks * plan.rows))
      return e;
    return launch.elementwise(
        ColumnTotals<Kind>{scratch, y, plan.rows, plan.count, chunks},
        plan.rows);
  });
}

/// The largest value of the integer type T.
template <class T> FSDP_HD constexpr T largestInteger() {
  return static_cast<T>((uint64_t(1) << (8 * sizeof(T) - 1)) - 1);
}

/// reduce_sum, reduce_prod, reduce_sum_square, reduce_max or reduce_min of
/// integers (x and y I32 or I64, as `dtype` says; XLM's lengths are
/// (ids != pad).sum(1)): y[row] from row `row`'s elements in order, one
/// thread a row. Sums and products wrap around as the type's two's
/// complement does (computed in uint64_t), so they equal the CPU's, which
/// adds partial results in another order; an empty max (min) is the
/// type's lowest (largest) value.
struct IntegerReduceBody {
  ReducePlan plan;
  const void *x;
  void *y;
  fsdprt_dtype_t dtype;
  Reduce kind;

  template <class T> FSDP_HD T reduce(const T *px) const {
    if (kind == Reduce::Max || kind == Reduce::Min) {
      bool max = kind == Reduce::Max;
      T best = max ? -largestInteger<T>() - 1 : largestInteger<T>();
      for (int64_t j = 0; j < plan.count; ++j) {
        T v = px[plan.reduced.offset(0, j)];
        if (max ? v > best : v < best)
          best = v;
      }
      return best;
    }
    uint64_t acc = kind == Reduce::Prod ? 1 : 0;
    for (int64_t j = 0; j < plan.count; ++j) {
      // Sign-extended, so that the unsigned arithmetic is the signed one.
      uint64_t v = static_cast<uint64_t>(
          static_cast<int64_t>(px[plan.reduced.offset(0, j)]));
      acc = kind == Reduce::Prod        ? acc * v
            : kind == Reduce::SumSquare ? acc + v * v
                                        : acc + v;
    }
    return static_cast<T>(acc);
  }

  FSDP_HD void operator()(int64_t row) const {
    int64_t at = plan.kept.offset(0, row);
    if (dtype == FSDPRT_I32)
      static_cast<int32_t *>(y)[row] =
          reduce(static_cast<const int32_t *>(x) + at);
    else
      static_cast<int64_t *>(y)[row] =
          reduce(static_cast<const int64_t *>(x) + at);
  }
};

/// Plans a reduction of a contiguous x of `shape` over `axes` (none: every
/// dim, as the ops' attribute says). Throws std::invalid_argument for an
/// axis out of range, or when the kept or the reduced dims need more than
/// kMaxDims dims after collapsing.
inline ReducePlan planReduce(const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &axes) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < 0 || a >= rank)
      throw std::invalid_argument("axis " + std::to_string(a) +
                                  " is out of range for rank " +
                                  std::to_string(rank));
    reduced[a] = true;
  }
  std::vector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  std::vector<int64_t> keptShape, keptStrides, redShape, redStrides;
  ReducePlan plan;
  plan.columns = true;
  bool keptSeen = false;
  for (int64_t d = 0; d < rank; ++d) {
    (reduced[d] ? redShape : keptShape).push_back(shape[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
    (reduced[d] ? plan.count : plan.rows) *= shape[d];
    if (shape[d] == 1)
      continue; // a dim of 1 is anywhere
    if (!reduced[d])
      keptSeen = true;
    else if (keptSeen)
      plan.columns = false;
  }
  plan.kept = planStrided(keptShape, keptStrides);
  plan.reduced = planStrided(redShape, redStrides);
  return plan;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_REDUCE_H
