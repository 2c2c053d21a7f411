//===- pool.cu - Pooling and batch norm on the device ---------------------===//
//
// The device launchers (launch.h) of kernels/pool.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchPool(bool max, const PoolWindow &window, const float *x,
                       float *y, int64_t planes, cudaStream_t s) {
  int64_t n = planes * window.oh * window.ow;
  if (max)
    return elementwise(PoolBody<true>{window, x, y}, n, s);
  return elementwise(PoolBody<false>{window, x, y}, n, s);
}

cudaError_t launchMaxPoolIndices(const MaxPoolIndicesBody &body,
                                 int64_t planes, cudaStream_t s) {
  return elementwise(body, planes * body.win.oh * body.win.ow, s);
}

cudaError_t launchResize(const ResizeBody &body, int64_t n, cudaStream_t s) {
  return elementwise(body, n, s);
}

/// grid_sample's step in T, a kernel per step (GridSampleStepBody).
template <typename T>
cudaError_t launchGridSampleIn(const GridSampleBody &body, cudaStream_t s) {
  using Step = GridSampleStep;
  int64_t n = body.threads();
  if (body.step == Step::Forward)
    return elementwise(GridSampleStepBody<T, Step::Forward>{body}, n, s);
  if (body.step == Step::InputGrad)
    return elementwise(GridSampleStepBody<T, Step::InputGrad>{body}, n, s);
  return elementwise(GridSampleStepBody<T, Step::GridGrad>{body}, n, s);
}

cudaError_t launchGridSample(const GridSampleBody &body, cudaStream_t s) {
  return body.dtype == FSDPRT_F64 ? launchGridSampleIn<double>(body, s)
                                  : launchGridSampleIn<float>(body, s);
}

cudaError_t launchGlobalMaxPool(const float *x, float *y, int64_t planes,
                                int64_t inner, cudaStream_t s) {
  return elementwise(GlobalMaxPoolBody{x, y, inner}, planes, s);
}

cudaError_t launchPoolGrad(bool max, const PoolWindow &window, const float *x,
                           const float *g, float *dx, int64_t planes,
                           cudaStream_t s) {
  int64_t n = planes * window.h * window.w;
  if (max)
    return elementwise(PoolGradBody<true>{window, x, g, dx}, n, s);
  return elementwise(PoolGradBody<false>{window, x, g, dx}, n, s);
}

cudaError_t launchBatchNorm(const float *x, const float *scale,
                            const float *bias, const float *mean,
                            const float *var, float *y, int64_t n,
                            int64_t channels, int64_t inner, float eps,
                            cudaStream_t s) {
  return elementwise(
      BatchNormBody{x, scale, bias, mean, var, y, channels, inner, eps},
      n * channels * inner, s);
}

cudaError_t launchBatchNormTrain(const BatchNormTrainBody &body,
                                 cudaStream_t s) {
  return elementwise(body, body.channels, s);
}

cudaError_t launchBatchNormGrad(const BatchNormGradBody &body,
                                cudaStream_t s) {
  return elementwise(body, body.channels, s);
}

cudaError_t launchInverseStd(const float *var, float *invStd, int64_t channels,
                             float eps, cudaStream_t s) {
  return elementwise(InverseStdBody{var, invStd, eps}, channels, s);
}

} // namespace fsdprt::cuda
