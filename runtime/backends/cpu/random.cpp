//===- random.cpp - Kernels that draw random numbers on the CPU -----------===//
//
// `dropout` keeps each element with probability 1 - ratio and scales what
// it keeps by 1 / (1 - ratio), as torch's training-mode Dropout does. Its
// draws are Philox-4x32-10 of the element's global index (philox.h): the
// same at every thread count and on every backend, and, since a rank's
// elements are numbered after those of the ranks before it, the same at
// every world size for the same global batch.
//
//===----------------------------------------------------------------------===//

#include "kernels.h"

#include "../../src/philox.h"

namespace fsdprt::cpu {
namespace {

/// Elements per chunk handed to one thread (a multiple of 4: one Philox
/// call serves four elements).
constexpr int64_t kChunk = 1 << 14;

/// in: x (f32); out: y (x's shape)[, mask (bool, x's shape)]. Attributes:
/// ratio (in [0, 1)), op (the op's id in its plan), and the plan's
/// micro-batch `slot` of `slots` (gradient accumulation; 0 of 1 without).
/// Element i of this rank's x is global element
/// (rank * slots + slot) * numel(x) + i.
KernelFn dropout(KernelArgs &args) {
  require(args.in.size() == 1 && (args.out.size() == 1 || args.out.size() == 2),
          "takes 1 input and 1 or 2 outputs (y, mask), not " +
              std::to_string(args.in.size()) + " and " +
              std::to_string(args.out.size()));
  const Tensor x = args.in[0], y = args.out[0];
  requireDtype(x, FSDPRT_F32, "x");
  requireDtype(y, FSDPRT_F32, "y");
  require(y.shape == x.shape, "y " + shapeString(y.shape) +
                                  " must have x's shape " +
                                  shapeString(x.shape));
  const bool withMask = args.out.size() == 2;
  const Tensor mask = withMask ? args.out[1] : Tensor();
  if (withMask) {
    requireDtype(mask, FSDPRT_BOOL, "the mask");
    require(mask.shape == x.shape, "the mask " + shapeString(mask.shape) +
                                       " must have x's shape " +
                                       shapeString(x.shape));
  }
  const double ratio = args.attrs.getFloat("ratio", 0.5);
  require(ratio >= 0 && ratio < 1,
          "ratio must be in [0, 1), not " + std::to_string(ratio));
  const int64_t op = args.attrs.getInt("op", -1);
  require(op >= 0 && op <= UINT32_MAX,
          "needs its id in the plan (attribute op, 0 to 2^32-1)");
  const int64_t slot = args.attrs.getInt("slot", 0);
  const int64_t slots = args.attrs.getInt("slots", 1);
  require(slots >= 1 && slot >= 0 && slot < slots,
          "micro-batch slot " + std::to_string(slot) + " of " +
              std::to_string(slots) + " is out of range");
  require(args.random != nullptr, "needs the session's random state");
  const RandomState *random = args.random;
  const uint64_t threshold = keepThreshold(1.0 - ratio);
  // torch's factor: 1 / (1 - p) computed in f32.
  const float scale = 1.0f / static_cast<float>(1.0 - ratio);
  const int64_t n = x.numel;
  return [=]() {
    RandomStream stream{random->seed, random->step, static_cast<uint32_t>(op)};
    const uint64_t base =
        static_cast<uint64_t>((random->rank * slots + slot) * n);
    const float *px = x.as<float>();
    float *py = y.as<float>();
    bool *pm = withMask ? mask.as<bool>() : nullptr;
    int64_t chunks = (n + kChunk - 1) / kChunk;
    parallelFor(chunks, kChunk * 4, [&](int64_t c) {
      int64_t end = std::min(n, (c + 1) * kChunk);
      Philox4x32 words{};
      uint64_t block = UINT64_MAX;
      for (int64_t i = c * kChunk; i < end; ++i) {
        uint64_t element = base + static_cast<uint64_t>(i);
        if (element / 4 != block) {
          block = element / 4;
          words = stream.block(block);
        }
        bool keep = words.v[element % 4] < threshold;
        py[i] = keep ? px[i] * scale : 0.0f;
        if (pm)
          pm[i] = keep;
      }
    });
    return std::string();
  };
}

} // namespace

void registerRandom(Registry &r) { r["dropout"] = dropout; }

} // namespace fsdprt::cpu
