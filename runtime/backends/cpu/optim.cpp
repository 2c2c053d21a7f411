//===- optim.cpp - Fused optimizer steps on the CPU -----------------------===//
//
// `adamw` and `sgd` update a parameter (or a rank's flat shard) and its
// optimizer state in one pass: each element is read, updated and written
// once. They compute what fsdp-optimizer's decomposed form computes, in the
// same f32 operations and order (constants rounded to f32 the same way), so
// both forms give the same bits. The outputs may be the inputs' buffers
// (the plan binds them there, docs/runtime.md): element i is read before it
// is written, and by the same thread.
//
// The loops are compiled three times: for baseline x86-64, AVX2 and
// AVX-512F (function attributes; the file is built without FMA
// contraction, -ffp-contract=off, and sqrt and division are exact in every
// instruction set, so all three give the same bits), the widest the CPU
// runs chosen at run time with vmath's choice (FSDPRT_CPU_ISA caps both).
//
//===----------------------------------------------------------------------===//

#include "kernels.h"
#include "vmath.h"

#include <cstring>

namespace fsdprt::cpu {
namespace {

/// Elements per chunk handed to one thread.
constexpr int64_t kChunk = 1 << 14;

/// `base ^ exponent` as the `pow` kernel computes it (a square exactly), so
/// the bias corrections equal the decomposed form's.
float powLikeKernel(float base, float exponent) {
  return exponent == 2.0f ? base * base : std::pow(base, exponent);
}

/// Runs body(begin, end) over [0, n) in chunks spread over the threads.
template <typename Body> void forChunks(int64_t n, Body body) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
  parallelFor(chunks, kChunk, [&](int64_t c) {
    body(c * kChunk, std::min(n, (c + 1) * kChunk));
  });
}

/// The AdamW update of elements [begin, end).
struct AdamwStep {
  const float *p, *g, *m, *v;
  float *pOut, *mOut, *vOut;
  float coef, b1, b2, c1, c2, root2, eps, keep, stepSize;
};

[[gnu::always_inline]] inline void adamwRange(const AdamwStep &s, int64_t begin,
                                              int64_t end) {
  // Locals, so the compiler sees no aliasing between the step's fields and
  // the arrays.
  const float coef = s.coef, b1 = s.b1, b2 = s.b2, c1 = s.c1, c2 = s.c2;
  const float root2 = s.root2, eps = s.eps, keep = s.keep;
  const float stepSize = s.stepSize;
  const float *p = s.p, *g = s.g, *m = s.m, *v = s.v;
  float *pOut = s.pOut, *mOut = s.mOut, *vOut = s.vOut;
  // An output may be its input's buffer, but element i is only read and
  // written by iteration i: no dependence between iterations, which the
  // compiler cannot prove across seven pointers.
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    float grad = g[i] * coef;
    float mNext = m[i] * b1 + grad * c1;
    float vNext = v[i] * b2 + grad * grad * c2;
    float denom = std::sqrt(vNext) / root2 + eps;
    pOut[i] = p[i] * keep - mNext / denom * stepSize;
    mOut[i] = mNext;
    vOut[i] = vNext;
  }
}

void adamwBaseline(const AdamwStep &s, int64_t begin, int64_t end) {
  adamwRange(s, begin, end);
}
[[gnu::target("avx2")]] void adamwAvx2(const AdamwStep &s, int64_t begin,
                                       int64_t end) {
  adamwRange(s, begin, end);
}
[[gnu::target("avx512f")]] void adamwAvx512(const AdamwStep &s, int64_t begin,
                                            int64_t end) {
  adamwRange(s, begin, end);
}

/// The AdamW loop for the instruction set vmath chose.
auto adamwLoop() {
  const char *isa = vmath::isa();
  return !std::strcmp(isa, "avx512") ? adamwAvx512
         : !std::strcmp(isa, "avx2") ? adamwAvx2
                                     : adamwBaseline;
}

/// Checks that every tensor in `tensors` has the parameter's shape and that
/// every scalar operand is one element.
void requireStepShapes(const KernelArgs &args, size_t tensorsIn,
                       const char *names) {
  requireF32(args);
  const Tensor &param = args.in[0];
  for (size_t i = 1; i < tensorsIn; ++i)
    require(args.in[i].shape == param.shape,
            std::string(names) + " must all be " + shapeString(param.shape) +
                "; input " + std::to_string(i) + " is " +
                shapeString(args.in[i].shape));
  for (const Tensor &out : args.out)
    require(out.shape == param.shape, "outputs must be " +
                                          shapeString(param.shape) + ", not " +
                                          shapeString(out.shape));
  for (size_t i = tensorsIn; i < args.in.size(); ++i)
    require(args.in[i].numel == 1, "input " + std::to_string(i) +
                                       " (lr, step or clip) must be a scalar");
}

/// in: param, grad, exp_avg, exp_avg_sq, lr, step[, clip];
/// out: param, exp_avg, exp_avg_sq.
KernelFn adamw(KernelArgs &args) {
  requireArity(args, 6, 7, 3);
  requireStepShapes(args, 4, "param, grad, exp_avg and exp_avg_sq");
  double beta1 = args.attrs.getFloat("beta1", 0.9);
  double beta2 = args.attrs.getFloat("beta2", 0.999);
  // The decomposed form's f32 constants: each rounded from its f64 value.
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float c1 = static_cast<float>(1 - beta1);
  const float c2 = static_cast<float>(1 - beta2);
  const float eps = static_cast<float>(args.attrs.getFloat("eps", 1e-8));
  const float decay =
      static_cast<float>(args.attrs.getFloat("weight_decay", 0.01));
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    const float lr = *in[4].as<float>(), step = *in[5].as<float>();
    // Without clipping the gradient is scaled by 1, which changes no bit.
    const float coef = in.size() == 7 ? *in[6].as<float>() : 1.0f;
    const float keep = decay != 0 ? 1.0f - lr * decay : 1.0f;
    const float stepSize = lr / (1.0f - powLikeKernel(b1, step));
    const float root2 = std::sqrt(1.0f - powLikeKernel(b2, step));
    AdamwStep s;
    s.p = in[0].as<float>(), s.g = in[1].as<float>();
    s.m = in[2].as<float>(), s.v = in[3].as<float>();
    s.pOut = out[0].as<float>(), s.mOut = out[1].as<float>();
    s.vOut = out[2].as<float>();
    s.coef = coef, s.b1 = b1, s.b2 = b2, s.c1 = c1, s.c2 = c2;
    s.root2 = root2, s.eps = eps, s.keep = keep, s.stepSize = stepSize;
    auto loop = adamwLoop();
    forChunks(in[0].numel,
              [&](int64_t begin, int64_t end) { loop(s, begin, end); });
    return std::string();
  };
}

/// in: param, grad, lr, step[, momentum_buffer][, clip] (the buffer exactly
/// when momentum != 0); out: param[, momentum_buffer].
KernelFn sgd(KernelArgs &args) {
  const double momentumD = args.attrs.getFloat("momentum", 0);
  const bool stateful = momentumD != 0;
  requireArity(args, stateful ? 5 : 4, stateful ? 6 : 5, stateful ? 2 : 1);
  requireF32(args);
  const Tensor &param = args.in[0];
  require(args.in[1].shape == param.shape &&
              (!stateful || args.in[4].shape == param.shape),
          "grad and momentum_buffer must be " + shapeString(param.shape) +
              " like the parameter");
  for (const Tensor &out : args.out)
    require(out.shape == param.shape, "outputs must be " +
                                          shapeString(param.shape) + ", not " +
                                          shapeString(out.shape));
  const size_t clipAt = stateful ? 5 : 4;
  for (size_t i : {size_t(2), size_t(3), clipAt})
    require(i >= args.in.size() || args.in[i].numel == 1,
            "input " + std::to_string(i) +
                " (lr, step or clip) must be a scalar");
  const float momentum = static_cast<float>(momentumD);
  const double dampeningD = args.attrs.getFloat("dampening", 0);
  const bool damped = dampeningD != 0;
  const float keepGrad = static_cast<float>(1 - dampeningD);
  const bool nesterov = args.attrs.getInt("nesterov", 0) != 0;
  const float decay =
      static_cast<float>(args.attrs.getFloat("weight_decay", 0));
  std::vector<Tensor> in = args.in, out = args.out;
  return [=]() {
    const float lr = *in[2].as<float>(), step = *in[3].as<float>();
    const float coef = in.size() > clipAt ? *in[clipAt].as<float>() : 1.0f;
    // torch's first buffer is the gradient itself, not damped.
    const bool first = damped && step == 1.0f;
    const float *p = in[0].as<float>(), *g = in[1].as<float>();
    const float *buf = stateful ? in[4].as<float>() : nullptr;
    float *pOut = out[0].as<float>();
    float *bufOut = stateful ? out[1].as<float>() : nullptr;
    // Element i is read and written by iteration i alone (adamwRange).
    forChunks(in[0].numel, [&](int64_t begin, int64_t end) {
#pragma GCC ivdep
      for (int64_t i = begin; i < end; ++i) {
        float grad = g[i] * coef;
        if (decay != 0)
          grad = grad + p[i] * decay;
        float d = grad;
        if (stateful) {
          float next = buf[i] * momentum + (damped ? grad * keepGrad : grad);
          if (first)
            next = grad;
          bufOut[i] = next;
          d = nesterov ? grad + next * momentum : next;
        }
        pOut[i] = p[i] - d * lr;
      }
    });
    return std::string();
  };
}

} // namespace

void registerOptim(Registry &r) {
  r["adamw"] = adamw;
  r["sgd"] = sgd;
}

} // namespace fsdprt::cpu
