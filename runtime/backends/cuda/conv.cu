//===- conv.cu - Convolution's im2col and col2im on the device ------------===//
//
// The device launchers (launch.h) of kernels/conv.h's bodies.
//
//===----------------------------------------------------------------------===//

#include "launch.h"

#include "device.cuh"

namespace fsdprt::cuda {

cudaError_t launchIm2col(const ConvWindow &window, const float *x, float *col,
                         int64_t images, cudaStream_t s) {
  return elementwise(Im2colBody{window, x, col},
                     images * window.rows() * window.oh * window.ow, s);
}

cudaError_t launchCol2im(const ConvWindow &window, const float *col, float *x,
                         int64_t images, cudaStream_t s) {
  return elementwise(Col2imBody{window, col, x},
                     images * window.channels * window.h * window.w, s);
}

} // namespace fsdprt::cuda
