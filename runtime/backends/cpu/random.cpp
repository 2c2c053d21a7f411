//===- random.cpp - Kernels that draw random numbers on the CPU -----------===//
//
// `dropout` keeps each element with probability 1 - ratio and scales what
// it keeps by 1 / (1 - ratio), as torch's training-mode Dropout does. Its
// draws are Philox-4x32-10 of the element's global index (philox.h): the
// same at every thread count and on every backend, and, since a rank's
// elements are numbered after those of the ranks before it, the same at
// every world size for the same global batch. The generators draw the same
// way: `random_uniform` (ONNX's RandomUniform and RandomUniformLike) writes
// low + (high - low) * u, u the top 24 bits of the element's word times
// 2^-24; `random_normal` (RandomNormal, RandomNormalLike) Box-Muller over
// pairs of words; `bernoulli` 1 where u < p (philox.h, drawValue).
//
//===----------------------------------------------------------------------===//

#include "kernels.h"

#include "../../src/philox.h"

#include <type_traits>

namespace fsdprt::cpu {
namespace {

/// Elements per chunk handed to one thread (a multiple of 4: one Philox
/// call serves four elements).
constexpr int64_t kChunk = 1 << 14;

/// A random kernel's draw attributes: op (its id in its plan) and the
/// plan's micro-batch `slot` of `slots` (gradient accumulation; 0 of 1
/// without); checked, with the session's random state.
struct Draw {
  uint32_t op;
  int64_t slot, slots;
};

Draw drawAttrs(const KernelArgs &args) {
  const int64_t op = args.attrs.getInt("op", -1);
  require(op >= 0 && op <= UINT32_MAX,
          "needs its id in the plan (attribute op, 0 to 2^32-1)");
  const int64_t slot = args.attrs.getInt("slot", 0);
  const int64_t slots = args.attrs.getInt("slots", 1);
  require(slots >= 1 && slot >= 0 && slot < slots,
          "micro-batch slot " + std::to_string(slot) + " of " +
              std::to_string(slots) + " is out of range");
  require(args.random != nullptr, "needs the session's random state");
  return {static_cast<uint32_t>(op), slot, slots};
}

/// Calls fn(i, words, w) for each of the n elements of this rank's tensor
/// in chunks over threads: element i is global element (rank * slots +
/// slot) * n + i, whose draw is word w of `words`, its Philox block (one
/// generator call per block of four).
template <typename Fn>
void forEachWord(const RandomState &random, const Draw &draw, int64_t n,
                 Fn fn) {
  const RandomStream stream{random.seed, random.step, draw.op};
  const uint64_t base =
      static_cast<uint64_t>((random.rank * draw.slots + draw.slot) * n);
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
      fn(i, words, static_cast<int>(element % 4));
    }
  });
}

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
  const Draw draw = drawAttrs(args);
  const RandomState *random = args.random;
  const uint64_t threshold = keepThreshold(1.0 - ratio);
  // torch's factor: 1 / (1 - p) computed in f32.
  const float scale = 1.0f / static_cast<float>(1.0 - ratio);
  const int64_t n = x.numel;
  return [=]() {
    const float *px = x.as<float>();
    float *py = y.as<float>();
    bool *pm = withMask ? mask.as<bool>() : nullptr;
    forEachWord(*random, draw, n,
                [&](int64_t i, const Philox4x32 &words, int w) {
                  bool keep = words.v[w] < threshold;
                  py[i] = keep ? px[i] * scale : 0.0f;
                  if (pm)
                    pm[i] = keep;
                });
    return std::string();
  };
}

/// The generators: `random_uniform` (in: none; attributes low < high, 0
/// and 1 by default), `random_normal` (in: none; mean and scale, 0 and 1 by
/// default) and `bernoulli` (in: p, f32 or f64, y's shape); out: y (f32 or
/// f64); and the draw attributes of dropout. Element i of this rank's y is
/// global element (rank * slots + slot) * numel(y) + i; its value is
/// drawValue of its word (philox.h).
KernelFn generate(KernelArgs &args, Distribution kind) {
  const bool bernoulli = kind == Distribution::Bernoulli;
  const size_t inputs = bernoulli ? 1 : 0;
  require(args.in.size() == inputs && args.out.size() == 1,
          "takes " + std::to_string(inputs) + " input" +
              (bernoulli ? "" : "s") + " and 1 output, not " +
              std::to_string(args.in.size()) + " and " +
              std::to_string(args.out.size()));
  const Tensor y = args.out[0];
  require(y.dtype == FSDPRT_F32 || y.dtype == FSDPRT_F64,
          std::string("y must be float32 or float64, not ") +
              fsdprt_dtype_name(y.dtype));
  const Tensor p = bernoulli ? args.in[0] : Tensor();
  if (bernoulli) {
    require(p.dtype == FSDPRT_F32 || p.dtype == FSDPRT_F64,
            std::string("p must be float32 or float64, not ") +
                fsdprt_dtype_name(p.dtype));
    require(p.shape == y.shape, "y " + shapeString(y.shape) +
                                    " must have p's shape " +
                                    shapeString(p.shape));
  }
  double a = 0, b = 1;
  if (kind == Distribution::Uniform) {
    a = args.attrs.getFloat("low", 0.0);
    b = args.attrs.getFloat("high", 1.0);
    require(a < b, "low " + std::to_string(a) + " must be less than high " +
                       std::to_string(b));
  } else if (kind == Distribution::Normal) {
    a = args.attrs.getFloat("mean", 0.0);
    b = args.attrs.getFloat("scale", 1.0);
    require(std::isfinite(a) && std::isfinite(b),
            "mean and scale must be finite");
  }
  const Draw draw = drawAttrs(args);
  const RandomState *random = args.random;
  const int64_t n = y.numel;
  return [=]() {
    auto fill = [&](auto *out) {
      using T = std::remove_pointer_t<decltype(out)>;
      forEachWord(*random, draw, n,
                  [&](int64_t i, const Philox4x32 &words, int w) {
                    double pi = !bernoulli              ? 0.0
                                : p.dtype == FSDPRT_F64 ? p.as<double>()[i]
                                                        : p.as<float>()[i];
                    out[i] = drawValue<T>(kind, words, w, a, b, pi);
                  });
    };
    if (y.dtype == FSDPRT_F64)
      fill(y.as<double>());
    else
      fill(y.as<float>());
    return std::string();
  };
}

} // namespace

void registerRandom(Registry &r) {
  r["dropout"] = dropout;
  r["random_uniform"] = [](KernelArgs &args) {
    return generate(args, Distribution::Uniform);
  };
  r["random_normal"] = [](KernelArgs &args) {
    return generate(args, Distribution::Normal);
  };
  r["bernoulli"] = [](KernelArgs &args) {
    return generate(args, Distribution::Bernoulli);
  };
}

} // namespace fsdprt::cpu
