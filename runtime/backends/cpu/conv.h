//===- conv.h - CPU convolutions: geometry and oneDNN primitives -*- C++
//-*-===//
//
// conv, conv_grad_input and conv_grad_weight share one geometry. Each runs
// as a oneDNN primitive where oneDNN has one for it (conv_dnnl.cpp) and as
// im2col + GEMM otherwise (linalg.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CPU_CONV_H
#define FSDPRT_BACKENDS_CPU_CONV_H

#include "kernels.h"

namespace fsdprt::cpu {

/// A 1-D or 2-D convolution of x [N, C, spatial] by w [M, C/group, k]
/// giving y [N, M, out], as a 2-D one (a 1-D convolution has height 1),
/// with ONNX's defaults filled in.
struct ConvGeometry {
  std::vector<int64_t> strides, pads, dil;
  int64_t n, c, h, wd, m, cg, kh, kw, oh, ow, group;
  int64_t mg, kdim, spatial;
  /// A 1x1 window with unit strides and no padding reads x as it is.
  bool direct;
};

/// The geometry of x, w and y under the kernel's attributes (checked:
/// KernelError).
ConvGeometry convGeometry(KernelArgs &args, const Tensor &x, const Tensor &w,
                          const Tensor &y);

/// Which of the three convolution kernels.
enum class ConvPass { Forward, GradInput, GradWeight };

/// The pass `pass` of the convolution `g` as a oneDNN primitive created
/// once, here, for `threads` threads, on the plan's NCHW / OIHW tensors (the
/// primitive's own layouts, when it has others, reordered to and from them
/// in `workspace`): y = conv(x, w) (+ bias), dx = conv_grad_input(dy, w) or
/// dw = conv_grad_weight(x, dy). `x`, `w` and `y` are the forward's
/// operands or their gradients. Returns an empty function where im2col +
/// GEMM should run instead: oneDNN has no primitive for the geometry, is
/// turned off (FSDPRT_DNNL=off), or is the slower of the two (a 1x1 weight
/// gradient over few windows on several threads).
KernelFn dnnlConv(ConvPass pass, const ConvGeometry &g, const Tensor &x,
                  const Tensor &w, const Tensor &y, const Tensor *bias,
                  int threads, Workspace *workspace);

} // namespace fsdprt::cpu

#endif // FSDPRT_BACKENDS_CPU_CONV_H
