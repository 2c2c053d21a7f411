//===- grid_sample.h - GridSample and its gradient, CPU and GPU -*- C++ -*-===//
//
// ONNX GridSample (opset 16), which is torch's F.grid_sample on 4-D input,
// as kernel bodies (hd.h) that the CPU backend runs too: one definition of
// the arithmetic for both backends. x [N, C, H, W] is read at the points
// of grid [N, Ho, Wo, 2] (x, y in [-1, 1]) into y [N, C, Ho, Wo].
//
// Each grid point and axis becomes a GridAxis, computed in the tensors'
// type as torch computes it: the coordinate unnormalised to an input index
// (by align_corners), padded (border clips it, reflection mirrors it into
// the input, then clips), then its taps: 1 rounded half to even
// (nearest), 2 (bilinear) or 4 around the unpadded coordinate, each tap
// padded on its own (bicubic, Keys' a = -0.75), with their weights, the
// weights' derivatives and the coordinate's derivative by the grid's.
// A tap outside the input reads 0.
//
// Three steps, one body:
//  - Forward: a thread per element of y, the sum of its taps.
//  - InputGrad: d(x). A point's taps land anywhere in its plane, so one
//    thread per (n, c) plane zeroes it and adds every point's share in
//    order: the CPU's order, the same bits on every device and every run,
//    with no atomics (as gather_grad, scatter.h).
//  - GridGrad: d(grid), a thread per grid point summing over the channels;
//    nearest gives the grid no gradient (zeros), as torch.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_GRID_SAMPLE_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_GRID_SAMPLE_H

#include "resize.h"

#include "fsdprt/fsdprt.h"

namespace fsdprt::cuda {

/// GridSample's modes and padding modes (ONNX's and torch's names).
enum class GridSampleMode { Bilinear, Nearest, Bicubic };
enum class GridPadding { Zeros, Border, Reflection };

inline bool gridSampleModeOf(const char *s, GridSampleMode &mode) {
  const char *const names[] = {"bilinear", "nearest", "bicubic"};
  return enumOf(s, names, mode);
}
inline bool gridPaddingOf(const char *s, GridPadding &padding) {
  const char *const names[] = {"zeros", "border", "reflection"};
  return enumOf(s, names, padding);
}

/// x [n, c, h, w] sampled at grid [n, ho, wo, 2].
struct GridSamplePlan {
  int64_t n, c, h, w, ho, wo;
  GridSampleMode mode;
  GridPadding padding;
  bool alignCorners;
};

/// One grid coordinate's taps along one axis of the input.
template <typename T> struct GridAxis {
  int64_t at[4]; // each tap's index along the axis, -1 outside the input
  T weight[4];
  T slope[4]; // d weight / d (the unnormalised coordinate)
  T scale;    // d (the unnormalised coordinate) / d (the grid's)
  int count;
};

/// a * b rounded on its own, never fused by nvcc into a multiply-add with
/// what follows (the CPU, baseline x86-64, does not fuse either).
template <typename T> FSDP_HD inline T gridMulRn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    return __dmul_rn(a, b);
  else
    return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

/// torch's grid_sampler_unnormalize: [-1, 1] to the input's index range,
/// the corners' centres (align) or their outer edges; `grad` its slope.
/// The product is rounded on its own on both backends: an ulp of the
/// result moves bicubic's d(grid) by up to ~1e-3 (its second derivative
/// times `grad`, with the coordinate near 64 an ulp is 4e-6 in f32).
template <typename T>
FSDP_HD inline T gridUnnormalize(T coord, int64_t size, bool align, T &grad) {
  if (align) {
    grad = static_cast<T>(size - 1) / 2;
    return gridMulRn((coord + 1) / 2, static_cast<T>(size - 1));
  }
  grad = static_cast<T>(size) / 2;
  return (gridMulRn(coord + 1, static_cast<T>(size)) - 1) / 2;
}

/// torch's clip_coordinates: into [0, size - 1] (NaN to size - 1, as
/// std::min(size - 1, std::max(x, 0)) gives); `grad` 1 strictly inside.
template <typename T> FSDP_HD inline T gridClip(T x, int64_t size, T &grad) {
  T high = static_cast<T>(size - 1);
  grad = x > 0 && x < high ? T(1) : T(0);
  T low = x < 0 ? T(0) : x;
  return low < high ? low : high;
}

/// torch's reflect_coordinates: x mirrored at twiceLow / 2 and twiceHigh /
/// 2 until it lies between them; `grad` +-1 by the number of mirrorings.
template <typename T>
FSDP_HD inline T gridReflect(T x, int64_t twiceLow, int64_t twiceHigh,
                             T &grad) {
  if (twiceLow == twiceHigh) {
    grad = 0;
    return 0;
  }
  T low = static_cast<T>(twiceLow) / 2;
  T span = static_cast<T>(twiceHigh - twiceLow) / 2;
  T d = x - low, sign = 1;
  if (d < 0)
    d = -d, sign = -1;
  // floor and fmod are exact, in double as in T.
  T extra = static_cast<T>(fmod(static_cast<double>(d), double(span)));
  T flips = static_cast<T>(floor(static_cast<double>(d / span)));
  if (fmod(static_cast<double>(flips), 2.0) == 0) {
    grad = sign;
    return extra + low;
  }
  grad = -sign;
  return span - extra + low;
}

/// torch's compute_coordinates: the padding mode applied to an index, then
/// torch's safe_downgrade_to_int_range (NaN, infinities and values past an
/// int's range become -100, outside any input); `grad` its slope.
template <typename T>
FSDP_HD inline T gridPad(const GridSamplePlan &p, T x, int64_t size, T &grad) {
  grad = 1;
  if (p.padding == GridPadding::Border) {
    x = gridClip(x, size, grad);
  } else if (p.padding == GridPadding::Reflection) {
    x = p.alignCorners ? gridReflect(x, 0, 2 * (size - 1), grad)
                       : gridReflect(x, -1, 2 * size - 1, grad);
    T clipped;
    x = gridClip(x, size, clipped);
    grad *= clipped;
  }
  return x >= static_cast<T>(-2147483648.0) && x <= static_cast<T>(2147483646.0)
             ? x
             : static_cast<T>(-100);
}

/// An integral index `i` in T, or -1 when outside [0, size).
template <typename T> FSDP_HD inline int64_t gridIndex(T i, int64_t size) {
  return i >= 0 && i < static_cast<T>(size) ? static_cast<int64_t>(i) : -1;
}

/// Grid coordinate `coord`'s taps along an axis of `size` input elements.
template <typename T>
FSDP_HD inline GridAxis<T> gridAxis(const GridSamplePlan &p, T coord,
                                    int64_t size) {
  GridAxis<T> a{};
  T unnormalised;
  T at = gridUnnormalize(coord, size, p.alignCorners, unnormalised);
  if (p.mode == GridSampleMode::Bicubic) {
    // The taps around the unpadded coordinate, each padded on its own
    // (torch's get_value_bounded); the grid's gradient ignores the padding.
    T base = static_cast<T>(floor(static_cast<double>(at))), r = at - base;
    keysWeights(static_cast<T>(-0.75), r, a.weight);
    keysSlopes(static_cast<T>(-0.75), r, a.slope);
    for (int k = 0; k < 4; ++k) {
      T ignored;
      T tap = gridPad(p, base - 1 + static_cast<T>(k), size, ignored);
      a.at[k] = gridIndex(static_cast<T>(static_cast<int64_t>(tap)), size);
    }
    a.scale = unnormalised;
    a.count = 4;
    return a;
  }
  T padded;
  at = gridPad(p, at, size, padded);
  if (p.mode == GridSampleMode::Nearest) {
    // rint rounds half to even, as torch's std::nearbyint.
    a.at[0] = gridIndex(static_cast<T>(rint(static_cast<double>(at))), size);
    a.weight[0] = 1;
    a.count = 1;
    return a;
  }
  T base = static_cast<T>(floor(static_cast<double>(at)));
  a.at[0] = gridIndex(base, size);
  a.at[1] = gridIndex(base + 1, size);
  a.weight[0] = base + 1 - at;
  a.weight[1] = at - base;
  a.slope[0] = -1;
  a.slope[1] = 1;
  a.scale = unnormalised * padded;
  a.count = 2;
  return a;
}

/// Which part of grid_sample or grid_sample_grad a GridSampleBody runs.
enum class GridSampleStep { Forward, InputGrad, GridGrad };

/// grid_sample (Forward: out is y) or one output of grid_sample_grad from
/// the output gradient dy [n, c, ho, wo] (InputGrad: out is d(x);
/// GridGrad: out is d(grid)); x, grid, dy and out of `dtype`, F32 or F64.
struct GridSampleBody {
  GridSamplePlan p;
  GridSampleStep step;
  fsdprt_dtype_t dtype;
  const void *x, *grid, *dy;
  void *out;

  /// The threads the step runs: y's elements, the planes, the points.
  FSDP_HD int64_t threads() const {
    int64_t points = p.ho * p.wo;
    return step == GridSampleStep::Forward     ? p.n * p.c * points
           : step == GridSampleStep::InputGrad ? p.n * p.c
                                               : p.n * points;
  }

  FSDP_HD void operator()(int64_t i) const {
    if (dtype == FSDPRT_F64)
      run<double>(i);
    else
      run<float>(i);
  }

  template <typename T> FSDP_HD void run(int64_t i) const {
    if (step == GridSampleStep::Forward)
      forward<T>(i);
    else if (step == GridSampleStep::InputGrad)
      inputGrad<T>(i);
    else
      gridGrad<T>(i);
  }

  /// Point `point` (of n * ho * wo) of the grid's taps along W and H.
  template <typename T>
  FSDP_HD void taps(int64_t point, GridAxis<T> &ax, GridAxis<T> &ay) const {
    const T *g = static_cast<const T *>(grid) + 2 * point;
    ax = gridAxis(p, g[0], p.w);
    ay = gridAxis(p, g[1], p.h);
  }

  template <typename T> FSDP_HD void forward(int64_t i) const {
    int64_t points = p.ho * p.wo, plane = i / points, q = i % points;
    GridAxis<T> ax, ay;
    taps<T>(plane / p.c * points + q, ax, ay);
    const T *xp = static_cast<const T *>(x) + plane * p.h * p.w;
    T sum = 0;
    for (int j = 0; j < 4 && j < ay.count; ++j)
      for (int k = 0; k < 4 && k < ax.count; ++k)
        if (ay.at[j] >= 0 && ax.at[k] >= 0)
          sum += xp[ay.at[j] * p.w + ax.at[k]] * (ax.weight[k] * ay.weight[j]);
    static_cast<T *>(out)[i] = sum;
  }

  template <typename T> FSDP_HD void inputGrad(int64_t plane) const {
    int64_t points = p.ho * p.wo, n = plane / p.c;
    T *dx = static_cast<T *>(out) + plane * p.h * p.w;
    for (int64_t e = 0; e < p.h * p.w; ++e)
      dx[e] = 0;
    const T *g = static_cast<const T *>(dy) + plane * points;
    for (int64_t q = 0; q < points; ++q) {
      GridAxis<T> ax, ay;
      taps<T>(n * points + q, ax, ay);
      for (int j = 0; j < 4 && j < ay.count; ++j)
        for (int k = 0; k < 4 && k < ax.count; ++k)
          if (ay.at[j] >= 0 && ax.at[k] >= 0)
            dx[ay.at[j] * p.w + ax.at[k]] += ax.weight[k] * ay.weight[j] * g[q];
    }
  }

  template <typename T> FSDP_HD void gridGrad(int64_t point) const {
    T *dgrid = static_cast<T *>(out) + 2 * point;
    T gx = 0, gy = 0;
    if (p.mode != GridSampleMode::Nearest) {
      int64_t points = p.ho * p.wo, n = point / points, q = point % points;
      GridAxis<T> ax, ay;
      taps<T>(point, ax, ay);
      for (int64_t c = 0; c < p.c; ++c) {
        int64_t plane = n * p.c + c;
        const T *xp = static_cast<const T *>(x) + plane * p.h * p.w;
        T g = static_cast<const T *>(dy)[plane * points + q];
        for (int j = 0; j < 4 && j < ay.count; ++j)
          for (int k = 0; k < 4 && k < ax.count; ++k)
            if (ay.at[j] >= 0 && ax.at[k] >= 0) {
              T v = xp[ay.at[j] * p.w + ax.at[k]] * g;
              gx += v * ax.slope[k] * ay.weight[j];
              gy += v * ax.weight[k] * ay.slope[j];
            }
      }
      gx *= ax.scale;
      gy *= ay.scale;
    }
    dgrid[0] = gx;
    dgrid[1] = gy;
  }
};

/// One step of a GridSampleBody in one type T: the device launcher runs
/// each as a kernel of its own, holding only its own step's registers.
template <typename T, GridSampleStep S> struct GridSampleStepBody {
  GridSampleBody body;

  FSDP_HD void operator()(int64_t i) const {
    if constexpr (S == GridSampleStep::Forward)
      body.template forward<T>(i);
    else if constexpr (S == GridSampleStep::InputGrad)
      body.template inputGrad<T>(i);
    else
      body.template gridGrad<T>(i);
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_GRID_SAMPLE_H
