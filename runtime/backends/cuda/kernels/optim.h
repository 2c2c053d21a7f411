//===- optim.h - Fused optimizer step bodies ---------------------*- C++
//-*-===//
//
// adamw and sgd (docs/plan-format.md) as elementwise kernel bodies (hd.h):
// one pass over a parameter (or flat shard) and its state, the same f32
// operations in the same order as the CPU kernels (backends/cpu/optim.cpp)
// and fsdp-optimizer's decomposed form. The learning rate, the step count
// and the clipping coefficient are read from device memory (the step's
// inputs); the scalars derived from them are recomputed per element, which
// costs nothing next to the seven loads and stores. Products go through
// mulRn so nvcc does not contract them into fused multiply-adds, whose
// single rounding would differ from the CPU's. Outputs may be the inputs'
// buffers: element i is read before it is written, by the same thread.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_BACKENDS_CUDA_KERNELS_OPTIM_H
#define FSDPRT_BACKENDS_CUDA_KERNELS_OPTIM_H

#include "hd.h"

namespace fsdprt::cuda {

/// a * b rounded on its own (never part of a fused multiply-add).
FSDP_HD inline float mulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

/// base ^ exponent as the pow kernel computes it (a square exactly).
FSDP_HD inline float powLikeKernel(float base, float exponent) {
  return exponent == 2.0f ? mulRn(base, base) : powf(base, exponent);
}

/// The f32 constants of an AdamW step, each rounded from its f64 value.
struct AdamWConstants {
  float b1, b2, c1, c2, eps, decay; // c = 1 - beta, rounded once
};

struct AdamWBody {
  const float *p, *g, *m, *v, *lr, *step, *clip; // clip: null for none
  float *pOut, *mOut, *vOut;
  AdamWConstants k;

  FSDP_HD void operator()(int64_t i) const {
    float rate = *lr, t = *step;
    float keep = k.decay != 0 ? 1.0f - mulRn(rate, k.decay) : 1.0f;
    float stepSize = rate / (1.0f - powLikeKernel(k.b1, t));
    float root2 = sqrtf(1.0f - powLikeKernel(k.b2, t));
    float grad = clip ? mulRn(g[i], *clip) : g[i];
    float mNext = mulRn(m[i], k.b1) + mulRn(grad, k.c1);
    float vNext = mulRn(v[i], k.b2) + mulRn(mulRn(grad, grad), k.c2);
    float denom = sqrtf(vNext) / root2 + k.eps;
    pOut[i] = mulRn(p[i], keep) - mulRn(mNext / denom, stepSize);
    mOut[i] = mNext;
    vOut[i] = vNext;
  }
};

/// The f32 constants of an SGD step.
struct SGDConstants {
  float momentum, keepGrad, decay; // keepGrad = 1 - dampening, rounded once
  bool damped, nesterov;
};

struct SGDBody {
  const float *p, *g, *buf, *lr, *step, *clip; // buf: null without momentum
  float *pOut, *bufOut;
  SGDConstants k;

  FSDP_HD void operator()(int64_t i) const {
    float grad = clip ? mulRn(g[i], *clip) : g[i];
    if (k.decay != 0)
      grad = grad + mulRn(p[i], k.decay);
    float d = grad;
    if (buf) {
      float next = mulRn(buf[i], k.momentum) +
                   (k.damped ? mulRn(grad, k.keepGrad) : grad);
      if (k.damped && *step == 1.0f) // torch's first buffer: the gradient
        next = grad;
      bufOut[i] = next;
      d = k.nesterov ? grad + mulRn(next, k.momentum) : next;
    }
    pOut[i] = p[i] - mulRn(d, *lr);
  }
};

} // namespace fsdprt::cuda

#endif // FSDPRT_BACKENDS_CUDA_KERNELS_OPTIM_H
