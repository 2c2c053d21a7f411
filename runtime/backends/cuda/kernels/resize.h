//===- resize.h - ONNX Resize's taps, for the CPU and the GPU ---*- C++ -*-===//
//
// One definition of ONNX Resize's arithmetic for both backends: the CPU
// backend's resize (runtime/backends/cpu/nn.cpp) computes each axis's taps
// with resizeTap once per plan or run; the CUDA backend's ResizeBody
// (pool.h) computes them per output element, on the GPU or on the host.
// Only hd.h's host/device markers: no CUDA header reaches the CPU build.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_RESIZE_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_RESIZE_H

#include "hd.h"

#include <cstring>

namespace fsdprt::cuda {

/// ONNX Resize's modes (the CPU's names: mode, coordinate_transformation_
/// mode, nearest_mode).
enum class ResizeMode { Nearest, Linear, Cubic };
enum class ResizeTransform {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn
};
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

/// ONNX's attribute strings as the enums (host only): `value` is the
/// enumerator at the index of `s` in `names`; false for a string the
/// kernels do not run.
template <class E, int N>
inline bool enumOf(const char *s, const char *const (&names)[N], E &value) {
  for (int i = 0; i < N; ++i)
    if (strcmp(s, names[i]) == 0)
      return value = static_cast<E>(i), true;
  return false;
}
inline bool resizeModeOf(const char *s, ResizeMode &mode) {
  const char *const names[] = {"nearest", "linear", "cubic"};
  return enumOf(s, names, mode);
}
inline bool resizeTransformOf(const char *s, ResizeTransform &transform) {
  const char *const names[] = {"half_pixel", "pytorch_half_pixel",
                               "align_corners", "asymmetric",
                               "tf_half_pixel_for_nn"};
  return enumOf(s, names, transform);
}
inline bool nearestModeOf(const char *s, NearestMode &nearest) {
  const char *const names[] = {"round_prefer_floor", "round_prefer_ceil",
                               "floor", "ceil"};
  return enumOf(s, names, nearest);
}

/// A resize of x (dims `in`, strides `stride`) to y (dims `out`) by one
/// scale per axis.
struct ResizePlan {
  int rank;
  int64_t in[kMaxDims], out[kMaxDims], stride[kMaxDims];
  double scale[kMaxDims];
  ResizeMode mode;
  ResizeTransform transform;
  NearestMode nearest;
  double a; // cubic_coeff_a
  bool exclude;
};

/// One output index of one axis: the input indices it blends (1 for
/// nearest, 2 for linear, 4 for cubic) and their weights.
struct ResizeTap {
  int64_t at[4];
  double weight[4];
  int count;
};

/// Keys' cubic convolution weights, coefficient `a`, of the four samples
/// at -1, 0, 1 and 2 from a point `r` in [0, 1) past the second: Resize's
/// cubic mode (a given) and GridSample's bicubic one (torch's a = -0.75).
template <typename T> FSDP_HD inline void keysWeights(T a, T r, T weight[4]) {
  T s = 1 + r, t = 1 - r, u = 2 - r;
  weight[0] = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  weight[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
  weight[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
  weight[3] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
}

/// The derivatives of keysWeights' four weights with respect to `r`.
template <typename T> FSDP_HD inline void keysSlopes(T a, T r, T slope[4]) {
  T s = 1 + r, t = 1 - r, u = 2 - r;
  slope[0] = (3 * a * s - 10 * a) * s + 8 * a;
  slope[1] = (3 * (a + 2) * r - 2 * (a + 3)) * r;
  slope[2] = -(3 * (a + 2) * t - 2 * (a + 3)) * t;
  slope[3] = -((3 * a * u - 10 * a) * u + 8 * a);
}

/// Output index j of axis d's taps for `scale`, in double, as ONNX's
/// reference picks them: the source coordinate by the
/// transform (a length within 1e-6 of the output's taken as it), rounded by
/// the nearest mode, or the linear or Keys cubic weights of the rows
/// around it (an integer source takes the rows below it), clamped to the
/// edge or, with exclude, dropped and the rest renormalised.
FSDP_HD inline ResizeTap resizeTap(const ResizePlan &p, int d, int64_t j,
                                   double scale) {
  int64_t n = p.in[d], m = p.out[d];
  // ONNX's reference takes the resized length as n * scale, unrounded (a
  // scale 0.6 of 4 is 2.4 long, though 2 rows are computed); a scale made
  // from sizes gives back m, but for rounding.
  double length = n * scale;
  double mm = static_cast<double>(m > 1 ? m : 1);
  if (fabs(length - static_cast<double>(m)) < 1e-6 * mm)
    length = static_cast<double>(m);
  double x;
  switch (p.transform) {
  case ResizeTransform::AlignCorners:
    x = length == 1 ? 0.0 : static_cast<double>(j) * (n - 1) / (length - 1);
    break;
  case ResizeTransform::Asymmetric:
    x = j / scale;
    break;
  case ResizeTransform::TfHalfPixelForNn:
    x = (j + 0.5) / scale;
    break;
  case ResizeTransform::PytorchHalfPixel:
    x = length <= 1 ? 0.0 : (j + 0.5) / scale - 0.5;
    break;
  default:
    x = (j + 0.5) / scale - 0.5;
    break;
  }
  auto clamp = [n](int64_t i) { return i < 0 ? 0 : i > n - 1 ? n - 1 : i; };
  ResizeTap tap{};
  double lower = floor(x);
  if (p.mode == ResizeMode::Nearest) {
    double r;
    if (p.nearest == NearestMode::Floor)
      r = lower;
    else if (p.nearest == NearestMode::Ceil)
      r = ceil(x);
    else if (x - lower == 0.5)
      r = p.nearest == NearestMode::RoundPreferCeil ? lower + 1 : lower;
    else
      r = round(x);
    tap.at[0] = clamp(static_cast<int64_t>(r));
    tap.weight[0] = 1;
    tap.count = 1;
    return tap;
  }
  int64_t base = static_cast<int64_t>(lower);
  double r = x - lower;
  if (p.mode == ResizeMode::Linear) {
    tap.at[0] = clamp(base), tap.at[1] = clamp(base + 1);
    tap.weight[0] = 1 - r, tap.weight[1] = r;
    tap.count = 2;
    return tap;
  }
  if (r == 0) {
    --base;
    r = 1;
  }
  keysWeights(p.a, r, tap.weight);
  tap.count = 4;
  double kept = 0;
  for (int k = 0; k < 4; ++k) {
    int64_t row = base - 1 + k;
    if (p.exclude && (row < 0 || row >= n))
      tap.weight[k] = 0;
    kept += tap.weight[k];
    tap.at[k] = clamp(row);
  }
  if (p.exclude && kept != 0)
    for (int k = 0; k < 4; ++k)
      tap.weight[k] /= kept;
  return tap;
}

/// A scale read at run time that does not fit the plan (the CPU's checks,
/// axis by axis): kNonPositiveScale, or kBadScale + d when axis d's scale
/// does not give y's size floor(in * scale) (detail: the scale's double
/// bits); 0 when every scale fits.
constexpr int kNonPositiveScale = 1;
constexpr int kBadScale = 2;
FSDP_HD inline int resizeScaleFault(const ResizePlan &p, const double *scale,
                                    int64_t &detail) {
  for (int d = 0; d < p.rank; ++d) {
    if (!(scale[d] > 0))
      return kNonPositiveScale;
    if (static_cast<int64_t>(floor(p.in[d] * scale[d])) != p.out[d]) {
      memcpy(&detail, &scale[d], sizeof detail);
      return kBadScale + d;
    }
  }
  return 0;
}

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_RESIZE_H
