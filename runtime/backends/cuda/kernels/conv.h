//===- conv.h - Convolution's im2col and col2im bodies ----------*- C++ -*-===//
//
// A convolution runs as the CPU backend runs it
// (runtime/backends/cpu/linalg.cpp): im2col, then GEMMs (the backend's
// Gemm: cuBLASLt on a GPU), and for the input gradient GEMMs, then
// col2im. Here are the two data-movement halves as elementwise bodies
// (hd.h) over whole images, all channels (a group's channels are a
// contiguous range of them, so one layout serves every group).
//
// col2im gathers instead of scattering: each input element sums the
// column entries that read it from 0, in the (kernel row, kernel column)
// order the CPU's col2im adds them in, so the sums are the CPU's bit for
// bit, with no atomics, every run.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_CONV_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_CONV_H

#include "hd.h"

namespace fsdprt::cuda {

/// A 2-D convolution's window over images of `channels` planes of h x w
/// giving oh x ow (a 1-D convolution has h = oh = 1 and a kernel of one
/// row): kernel, strides, dilations and the leading pads (top, left), in
/// (rows, columns) order; oh and ow as the CPU's checks give them.
struct ConvWindow {
  int64_t channels, h, w;
  int64_t kernel[2], stride[2], dilation[2], pad[2];
  int64_t oh, ow;

  /// The column rows of one image: (channel, kernel row, kernel column).
  FSDP_HD int64_t rows() const { return channels * kernel[0] * kernel[1]; }
  /// The input position along dim d that output o reads at kernel tap k
  /// (outside [0, size) in the padding).
  FSDP_HD int64_t input(int d, int64_t o, int64_t k) const {
    return o * stride[d] - pad[d] + k * dilation[d];
  }
  /// The output along dim d that reads input p at kernel tap k, or -1.
  FSDP_HD int64_t output(int d, int64_t p, int64_t k, int64_t size) const {
    int64_t at = p + pad[d] - k * dilation[d];
    if (at < 0 || at % stride[d] != 0 || at / stride[d] >= size)
      return -1;
    return at / stride[d];
  }
};

/// col [images, rows(), oh * ow] from x [images, channels, h, w]: each
/// window's input elements, zero in the padding.
struct Im2colBody {
  ConvWindow win;
  const float *x;
  float *col;

  FSDP_HD void operator()(int64_t i) const {
    int64_t spatial = win.oh * win.ow;
    int64_t s = i % spatial, r = i / spatial;
    int64_t kj = r % win.kernel[1], ki = r / win.kernel[1] % win.kernel[0];
    int64_t plane = r / (win.kernel[0] * win.kernel[1]); // image * C + c
    int64_t ih = win.input(0, s / win.ow, ki),
            iw = win.input(1, s % win.ow, kj);
    bool inside = ih >= 0 && ih < win.h && iw >= 0 && iw < win.w;
    col[i] = inside ? x[(plane * win.h + ih) * win.w + iw] : 0.0f;
  }
};

/// x [images, channels, h, w] from col [images, rows(), oh * ow]: each
/// element the sum of the column entries that read it (im2col's adjoint).
struct Col2imBody {
  ConvWindow win;
  const float *col;
  float *x;

  FSDP_HD void operator()(int64_t i) const {
    int64_t plane = i / (win.h * win.w), at = i % (win.h * win.w);
    int64_t ih = at / win.w, iw = at % win.w;
    int64_t taps = win.kernel[0] * win.kernel[1], spatial = win.oh * win.ow;
    const float *src = col + plane * taps * spatial;
    float sum = 0;
    for (int64_t ki = 0; ki < win.kernel[0]; ++ki) {
      int64_t oi = win.output(0, ih, ki, win.oh);
      if (oi < 0)
        continue;
      for (int64_t kj = 0; kj < win.kernel[1]; ++kj) {
        int64_t oj = win.output(1, iw, kj, win.ow);
        if (oj >= 0)
          sum += src[(ki * win.kernel[1] + kj) * spatial + oi * win.ow + oj];
      }
    }
    x[i] = sum;
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_CONV_H
