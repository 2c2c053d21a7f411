//===- HostOptimTest.cpp - Fused optimizer bodies against the CPU ---------===//
//
// kernels/optim.h's adamw and sgd bodies, run on the host, give the CPU
// backend's bits (the same f32 operations in the same order), in place and
// not, at sizes of one element, non-multiples of a block and long buffers.
//
//===----------------------------------------------------------------------===//

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/optim.h"
#include "HostHarness.h"

namespace {

using namespace fsdprt;
using namespace fsdprt::test;

/// The CPU backend's outputs of `op`, all of the parameter's shape.
std::vector<std::vector<float>> cpuOutputs(const std::string &op,
                                           const std::vector<Value> &ins,
                                           const Shape &shape, size_t count,
                                           const AttrList &attrs) {
  Result r = runOp(
      op, ins, std::vector<std::pair<plan::DType, Shape>>(count, {F32, shape}),
      attrs);
  EXPECT_EQ(r.error, "");
  std::vector<std::vector<float>> outs;
  for (const Value &v : r.outputs)
    outs.push_back(v.as<float>());
  return outs;
}

TEST(CudaHost, AdamWBodyEqualsTheCpuBackendBitForBit) {
  for (int64_t n : kSizes) {
    for (bool clip : {false, true}) {
      for (double decay : {0.0, 0.01}) {
        SCOPED_TRACE(std::to_string(n) + (clip ? " clipped" : "") + " decay " +
                     std::to_string(decay));
        Shape shape = {n};
        std::vector<float> p = randomFloats(n, 1), g = randomFloats(n, 2),
                           m = randomFloats(n, 3), v = randomFloats(n, 4);
        for (float &x : v)
          x = std::fabs(x);
        // Step 2 takes the pow kernel's squaring path; 3 takes powf.
        for (float step : {2.0f, 3.0f}) {
          float lr = 1e-2f, coef = 0.37f;
          std::vector<Value> ins = {f32(shape, p), f32(shape, g),
                                    f32(shape, m), f32(shape, v),
                                    f32({}, {lr}), f32({}, {step})};
          if (clip)
            ins.push_back(f32({}, {coef}));
          AttrList attrs = {{"beta1", 0.9},
                            {"beta2", 0.999},
                            {"eps", 1e-8},
                            {"weight_decay", decay}};
          auto want = cpuOutputs("adamw", ins, shape, 3, attrs);
          // In place, as a plan binds it.
          std::vector<float> pp = p, mm = m, vv = v;
          cuda::AdamWConstants k{0.9f,           0.999f,
                                 float(1 - 0.9), float(1 - 0.999),
                                 1e-8f,          float(decay)};
          cuda::hostForEach(cuda::AdamWBody{pp.data(), g.data(), mm.data(),
                                            vv.data(), &lr, &step,
                                            clip ? &coef : nullptr, pp.data(),
                                            mm.data(), vv.data(), k},
                            n);
          expectClose(pp, want[0], 0);
          expectClose(mm, want[1], 0);
          expectClose(vv, want[2], 0);
        }
      }
    }
  }
}

TEST(CudaHost, SGDBodyEqualsTheCpuBackendBitForBit) {
  struct Case {
    double momentum, dampening, decay;
    bool nesterov, clip;
    float step;
  };
  const Case cases[] = {{0, 0, 0, false, false, 1},
                        {0, 0, 0.01, false, true, 2},
                        {0.9, 0, 0.01, true, false, 2},
                        {0.9, 0.3, 0, false, true, 1},
                        {0.9, 0.3, 0, false, false, 4}};
  for (int64_t n : kSizes) {
    for (const Case &c : cases) {
      SCOPED_TRACE(std::to_string(n) + " momentum " +
                   std::to_string(c.momentum) + " step " +
                   std::to_string(c.step));
      Shape shape = {n};
      bool stateful = c.momentum != 0;
      std::vector<float> p = randomFloats(n, 5), g = randomFloats(n, 6),
                         buf = randomFloats(n, 7);
      float lr = 0.05f, coef = 0.5f;
      std::vector<Value> ins = {f32(shape, p), f32(shape, g), f32({}, {lr}),
                                f32({}, {c.step})};
      if (stateful)
        ins.push_back(f32(shape, buf));
      if (c.clip)
        ins.push_back(f32({}, {coef}));
      AttrList attrs = {{"momentum", c.momentum},
                        {"dampening", c.dampening},
                        {"nesterov", int64_t(c.nesterov)},
                        {"weight_decay", c.decay}};
      auto want = cpuOutputs("sgd", ins, shape, stateful ? 2 : 1, attrs);
      std::vector<float> pOut(n), bufOut(n);
      cuda::SGDConstants k{float(c.momentum), float(1 - c.dampening),
                           float(c.decay), c.dampening != 0, c.nesterov};
      cuda::hostForEach(
          cuda::SGDBody{p.data(), g.data(), stateful ? buf.data() : nullptr,
                        &lr, &c.step, c.clip ? &coef : nullptr, pOut.data(),
                        stateful ? bufOut.data() : nullptr, k},
          n);
      expectClose(pOut, want[0], 0);
      if (stateful)
        expectClose(bufOut, want[1], 0);
    }
  }
}

} // namespace
