//===- HostAttentionTest.cpp - Fused attention on the host ----------------===//
//
// cuda-host: kernels/attention.h's tile bodies against the CPU backend's
// attention and attention_grad on random inputs, in both layouts (bshd:
// the head split's strides): every mask kind (an add
// mask with -inf entries, fill masks broadcast over heads, a fully masked
// row), causal with L != S, D != Dv, size 1, sizes that are no multiple of
// the tiles, rows of 4096 keys, head dims 8 to 128; with the planned tiles
// and with odd ones, on 1, 3 and 4 lanes. Then whole one-kernel plans on
// "fake-cuda:strict" in f32 and bf16 (widened through the fp32 kernels),
// and the errors the backend gives.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/attention.h"
#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

constexpr const char *kStrict = "fake-cuda:strict";

struct AttentionCase {
  std::string name;
  Shape batch;
  int64_t l, s, d, dv;
  std::string kind = "none";
  Shape mask = {}; // add and fill: the mask's shape, broadcast to scores
  /// fill: the first keys masked in every row (left padding): whole key
  /// tiles before the first score the online softmax keeps.
  int64_t maskedKeys = 0;
  /// fill: query row 0 masked entirely (y NaN, lse -inf).
  bool maskedRow = false;
  double scale = 0.125, fill = -INFINITY;
  /// layout "bshd": batch {B, H}, q [B, L, H, D], keys untransposed
  /// [B, S, H, D], v [B, S, H, Dv], y [B, L, H, Dv].
  bool bshd = false;
};

const std::vector<AttentionCase> kCases = {
    {"no mask", {2, 3}, 7, 13, 8, 5},
    {"causal square", {2}, 37, 37, 64, 64, "causal"},
    {"causal L < S", {1}, 5, 9, 8, 8, "causal"},
    {"causal L > S", {3}, 41, 6, 16, 8, "causal"},
    {"add over heads", {2, 2}, 9, 33, 80, 80, "add", {1, 9, 33}},
    {"fill per batch", {2, 3}, 11, 19, 8, 16, "fill", {2, 1, 1, 19}},
    {"finite fill", {2}, 6, 40, 8, 8, "fill", {2, 6, 40}, 0, false, 0.3, -7.5},
    {"masked row", {2}, 5, 7, 4, 4, "fill", {5, 7}, 0, true},
    {"left padding", {2}, 9, 100, 8, 8, "fill", {2, 1, 100}, 70},
    {"size 1", {}, 1, 1, 1, 1},
    {"D 128 Dv 128", {2}, 33, 65, 128, 128, "causal"},
    {"D 8 Dv 80", {1}, 17, 23, 8, 80},
    {"D 128 Dv 8", {1}, 17, 23, 128, 8, "add", {17, 23}},
    {"long rows", {1}, 3, 4096, 64, 64, "add", {1, 1, 4096}},
    {"bshd causal",
     {2, 3},
     37,
     37,
     16,
     16,
     "causal",
     {},
     0,
     false,
     0.125,
     -INFINITY,
     true},
    {"bshd add L != S",
     {2, 2},
     9,
     33,
     8,
     5,
     "add",
     {2, 1, 9, 33},
     0,
     false,
     0.125,
     -INFINITY,
     true},
    {"bshd fill",
     {1, 4},
     11,
     19,
     64,
     64,
     "fill",
     {1, 1, 11, 19},
     3,
     false,
     0.125,
     -INFINITY,
     true},
};

/// The case's shapes: q, k_t, v, mask (when it has one), y, lse.
struct Shapes {
  Shape q, kt, v, y, lse;
};
Shapes shapesOf(const AttentionCase &c) {
  auto with = [&](std::vector<int64_t> tail) {
    Shape s = c.batch;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  if (c.bshd) {
    int64_t b = c.batch[0], h = c.batch[1];
    return {{b, c.l, h, c.d},
            {b, c.s, h, c.d},
            {b, c.s, h, c.dv},
            {b, c.l, h, c.dv},
            with({c.l})};
  }
  return {with({c.l, c.d}), with({c.d, c.s}), with({c.s, c.dv}),
          with({c.l, c.dv}), with({c.l})};
}

AttrList attrsOf(const AttentionCase &c) {
  return {{"scale", c.scale},
          {"mask_kind", c.kind},
          {"fill_value", c.fill},
          {"layout", std::string(c.bshd ? "bshd" : "bhsd")}};
}

/// q, k_t, v and the mask (when the case has one), random.
std::vector<Value> inputsOf(const AttentionCase &c, unsigned seed) {
  Shapes sh = shapesOf(c);
  std::vector<Value> in = {f32(sh.q, randomFloats(numel(sh.q), seed)),
                           f32(sh.kt, randomFloats(numel(sh.kt), seed + 1)),
                           f32(sh.v, randomFloats(numel(sh.v), seed + 2))};
  std::vector<float> r = randomFloats(numel(c.mask), seed + 3);
  if (c.kind == "add") {
    for (size_t i = 0; i < r.size(); i += 7)
      r[i] = -INFINITY; // excluded entries, never a whole row
    in.push_back(f32(c.mask, r));
  } else if (c.kind == "fill") {
    std::vector<uint8_t> m(r.size());
    for (size_t i = 0; i < r.size(); ++i)
      m[i] = r[i] > 0.8f; // about a fifth
    if (c.maskedRow)
      for (int64_t j = 0; j < c.s; ++j)
        m[j] = 1;
    for (size_t i = 0; i < m.size(); ++i)
      if (static_cast<int64_t>(i) % c.s < c.maskedKeys)
        m[i] = 1;
    in.push_back(boolean(c.mask, m));
  }
  return in;
}

/// The case's AttentionShape, with the mask read as the backend reads it.
cuda::AttentionShape attentionShapeOf(const AttentionCase &c) {
  cuda::AttentionShape g;
  g.batch = numel(c.batch);
  g.l = c.l, g.s = c.s, g.d = c.d, g.dv = c.dv;
  g.scale = static_cast<float>(c.scale);
  g.fill = static_cast<float>(c.fill);
  g.mask = c.kind == "add"      ? cuda::MaskKind::Add
           : c.kind == "fill"   ? cuda::MaskKind::Fill
           : c.kind == "causal" ? cuda::MaskKind::Causal
                                : cuda::MaskKind::None;
  g.headsInRows = c.bshd;
  if (c.bshd)
    g.heads = c.batch[1];
  g.batchDims = static_cast<int>(c.batch.size());
  for (size_t k = 0; k < c.batch.size(); ++k)
    g.batchSize[k] = c.batch[k];
  if (!c.mask.empty()) {
    Shape scores = c.batch;
    scores.push_back(c.l);
    scores.push_back(c.s);
    // NumPy broadcasting: 0 along the dims the mask stretches.
    std::vector<int64_t> strides(scores.size(), 0);
    int64_t stride = 1;
    for (size_t k = 0; k < c.mask.size(); ++k) {
      size_t at = scores.size() - 1 - k;
      int64_t extent = c.mask[c.mask.size() - 1 - k];
      strides[at] = extent == 1 ? 0 : stride;
      stride *= extent;
    }
    for (size_t k = 0; k < c.batch.size(); ++k)
      g.maskStride[k] = strides[k];
    g.maskStrideL = strides[c.batch.size()];
    g.maskStrideS = strides[c.batch.size() + 1];
  }
  return g;
}

/// The CPU backend's y, lse, then dq, dk_t and dv for `dy`.
std::vector<std::vector<float>> cpuAttention(const AttentionCase &c,
                                             const std::vector<Value> &in,
                                             const Value &dy,
                                             const char *device = nullptr) {
  Shapes sh = shapesOf(c);
  Result fwd = runOp("attention", in, {{F32, sh.y}, {F32, sh.lse}}, attrsOf(c),
                     2, device);
  EXPECT_EQ(fwd.error, "");
  if (!fwd.error.empty())
    return {};
  std::vector<Value> gradIn = in;
  gradIn.push_back(fwd.outputs[0]);
  gradIn.push_back(fwd.outputs[1]);
  gradIn.push_back(dy);
  Result grad =
      runOp("attention_grad", gradIn, {{F32, sh.q}, {F32, sh.kt}, {F32, sh.v}},
            attrsOf(c), 2, device);
  EXPECT_EQ(grad.error, "");
  if (!grad.error.empty())
    return {};
  return {fwd.outputs[0].as<float>(), fwd.outputs[1].as<float>(),
          grad.outputs[0].as<float>(), grad.outputs[1].as<float>(),
          grad.outputs[2].as<float>()};
}

/// The bodies' y, lse, dq, dk_t and dv on `lanes` host lanes with `tiles`.
/// The gradient runs from the CPU's y and lse (`want`), as a training
/// plan's gradient runs from its forward's.
std::vector<std::vector<float>>
bodiesAttention(const AttentionCase &c, const std::vector<Value> &in,
                const Value &dy, const std::vector<std::vector<float>> &want,
                int lanes, const cuda::AttentionTiles &tiles) {
  Shapes sh = shapesOf(c);
  std::vector<std::vector<float>> got = {std::vector<float>(numel(sh.y), NAN),
                                         std::vector<float>(numel(sh.lse), NAN),
                                         std::vector<float>(numel(sh.q), NAN),
                                         std::vector<float>(numel(sh.kt), NAN),
                                         std::vector<float>(numel(sh.v), NAN)};
  std::vector<float> q = in[0].as<float>(), kt = in[1].as<float>(),
                     v = in[2].as<float>(), dys = dy.as<float>();
  cuda::AttentionArgs a;
  a.shape = attentionShapeOf(c);
  a.q = q.data(), a.kt = kt.data(), a.v = v.data();
  if (in.size() == 4)
    a.mask = in[3].bytes.data();
  a.y = got[0].data(), a.lse = got[1].data();
  cuda::HostLauncher launch{lanes};
  cuda::attentionForward(launch, a, tiles);
  std::vector<float> y = want[0], lse = want[1];
  a.y = y.data(), a.lse = lse.data(), a.dy = dys.data();
  a.dq = got[2].data(), a.dkt = got[3].data(), a.dv = got[4].data();
  cuda::attentionGrad(launch, a, tiles);
  return got;
}

const char *kOutputs[] = {"y", "lse", "dq", "dk_t", "dv"};

void expectAllClose(const std::vector<std::vector<float>> &got,
                    const std::vector<std::vector<float>> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE(kOutputs[k]);
    expectClose(got[k], want[k], k < 2 ? 2e-5 : 1e-4);
  }
}

TEST(CudaHost, AttentionBodiesEqualTheCpuBackend) {
  unsigned seed = 4100;
  for (const AttentionCase &c : kCases) {
    SCOPED_TRACE(c.name);
    std::vector<Value> in = inputsOf(c, seed);
    Shapes sh = shapesOf(c);
    Value dy = f32(sh.y, randomFloats(numel(sh.y), seed + 9));
    seed += 10;
    std::vector<std::vector<float>> want = cpuAttention(c, in, dy);
    ASSERT_EQ(want.size(), 5u);
    cuda::AttentionTiles planned = cuda::planAttentionTiles(c.d, c.dv);
    ASSERT_TRUE(planned.fits);
    // Tiles of odd sizes: partial tiles at every edge.
    cuda::AttentionTiles odd{5, 7, 3, 11, 6, 5, true};
    for (int lanes : {1, 3, 4}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes");
      expectAllClose(bodiesAttention(c, in, dy, want, lanes, planned), want);
    }
    expectAllClose(bodiesAttention(c, in, dy, want, 4, odd), want);
    if (c.maskedRow) { // the CPU's NaN y and -inf lse for it
      EXPECT_TRUE(std::isnan(want[0][0]));
      EXPECT_EQ(want[1][0], -INFINITY);
    }
  }
}

TEST(CudaHost, AttentionBodiesGiveTheSameBitsOnAnyLaneCount) {
  // Each output element is summed by one lane in one order.
  const AttentionCase &c = kCases[4]; // an add mask over heads
  std::vector<Value> in = inputsOf(c, 4300);
  Value dy = f32(shapesOf(c).y, randomFloats(numel(shapesOf(c).y), 4309));
  std::vector<std::vector<float>> want = cpuAttention(c, in, dy);
  ASSERT_EQ(want.size(), 5u);
  cuda::AttentionTiles tiles = cuda::planAttentionTiles(c.d, c.dv);
  std::vector<std::vector<float>> one =
      bodiesAttention(c, in, dy, want, 1, tiles);
  std::vector<std::vector<float>> four =
      bodiesAttention(c, in, dy, want, 4, tiles);
  for (size_t k = 0; k < one.size(); ++k)
    EXPECT_EQ(0, std::memcmp(one[k].data(), four[k].data(),
                             one[k].size() * sizeof(float)))
        << kOutputs[k];
}

TEST(CudaHost, AttentionTilesFitSharedMemory) {
  for (int64_t d : {8, 64, 80, 128, 256, 1000})
    for (int64_t dv : {8, 64, 128, 512}) {
      cuda::AttentionTiles t = cuda::planAttentionTiles(d, dv);
      ASSERT_TRUE(t.fits) << d << " " << dv;
      cuda::AttentionArgs a;
      a.shape.d = d, a.shape.dv = dv;
      EXPECT_LE(cuda::AttentionForwardBody({a, t.forwardRows, t.forwardKeys})
                    .sharedFloats(),
                cuda::kAttentionSharedFloats);
      EXPECT_LE(cuda::AttentionGradQBody({a, t.gradQRows, t.gradQKeys})
                    .sharedFloats(),
                cuda::kAttentionSharedFloats);
      EXPECT_LE(cuda::AttentionGradKVBody({a, t.gradKVRows, t.gradKVKeys})
                    .sharedFloats(),
                cuda::kAttentionSharedFloats);
    }
  // Head dims up to 128: the full 32 x 32 tiles.
  cuda::AttentionTiles t = cuda::planAttentionTiles(128, 128);
  EXPECT_EQ(t.forwardRows * t.forwardKeys, 32 * 32);
  EXPECT_EQ(t.gradKVRows * t.gradKVKeys, 32 * 32);
  EXPECT_FALSE(cuda::planAttentionTiles(8192, 8192).fits);
}

//===----------------------------------------------------------------------===//
// Whole kernels on the strict fake device
//===----------------------------------------------------------------------===//

TEST(CudaHost, AttentionRunsOnTheStrictFakeDeviceAsOnTheCpu) {
  unsigned seed = 4500;
  for (size_t i : {0, 1, 4, 5, 7, 8, 12, 14, 15}) {
    const AttentionCase &c = kCases[i];
    SCOPED_TRACE(c.name);
    std::vector<Value> in = inputsOf(c, seed);
    Value dy = f32(shapesOf(c).y, randomFloats(numel(shapesOf(c).y), seed + 9));
    seed += 10;
    std::vector<std::vector<float>> want = cpuAttention(c, in, dy);
    std::vector<std::vector<float>> got = cpuAttention(c, in, dy, kStrict);
    expectAllClose(got, want);
    // Without the lse output, the same y (NaNs too).
    Result yOnly =
        runOp("attention", in, {{F32, shapesOf(c).y}}, attrsOf(c), 2, kStrict);
    ASSERT_EQ(yOnly.error, "");
    ASSERT_EQ(yOnly.outputs[0].bytes.size(), got[0].size() * sizeof(float));
    EXPECT_EQ(0, std::memcmp(yOnly.outputs[0].bytes.data(), got[0].data(),
                             got[0].size() * sizeof(float)));
  }
}

/// bf16 q, k_t, v, y and dy (lse f32) run widened through the fp32 kernels,
/// as the CPU runs them: the same results but for the fp32 sums' order,
/// rounded to bf16 (one bf16 step apart at most).
TEST(CudaHost, Bf16AttentionRunsWidenedOnTheStrictFakeDevice) {
  const AttentionCase &c = kCases[1]; // causal, head dim 64
  Shapes sh = shapesOf(c);
  auto bf16 = [](const Shape &shape, unsigned seed) {
    std::vector<float> v = randomFloats(numel(shape), seed);
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      h[i] = fsdprt::floatToHalf(v[i], FSDPRT_BF16);
    return valueOf(plan::DType::BF16, shape, h);
  };
  std::vector<Value> in = {bf16(sh.q, 4600), bf16(sh.kt, 4601),
                           bf16(sh.v, 4602)};
  Value dy = bf16(sh.y, 4603);
  const auto BF16 = plan::DType::BF16;
  auto run = [&](const char *device) {
    Result fwd = runOp("attention", in, {{BF16, sh.y}, {F32, sh.lse}},
                       attrsOf(c), 2, device);
    EXPECT_EQ(fwd.error, "");
    std::vector<Value> gradIn = in;
    gradIn.push_back(fwd.outputs.at(0));
    gradIn.push_back(fwd.outputs.at(1));
    gradIn.push_back(dy);
    Result grad = runOp("attention_grad", gradIn,
                        {{BF16, sh.q}, {BF16, sh.kt}, {BF16, sh.v}}, attrsOf(c),
                        2, device);
    EXPECT_EQ(grad.error, "");
    std::vector<Value> all = fwd.outputs;
    all.insert(all.end(), grad.outputs.begin(), grad.outputs.end());
    return all;
  };
  std::vector<Value> want = run(nullptr), got = run(kStrict);
  ASSERT_EQ(got.size(), 5u);
  ASSERT_EQ(want.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    SCOPED_TRACE(kOutputs[k]);
    if (k == 1) { // lse stays f32
      expectClose(got[k].as<float>(), want[k].as<float>(), 2e-5);
      continue;
    }
    std::vector<uint16_t> g = got[k].as<uint16_t>(), w = want[k].as<uint16_t>();
    ASSERT_EQ(g.size(), w.size());
    size_t equal = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      float a = fsdprt::halfToFloat(g[i], FSDPRT_BF16);
      float b = fsdprt::halfToFloat(w[i], FSDPRT_BF16);
      ASSERT_NEAR(a, b, (std::fabs(b) + 1e-3) / 128) << "at " << i;
      equal += g[i] == w[i];
    }
    EXPECT_GE(equal, g.size() * 9 / 10); // mostly the very same bits
  }
}

TEST(CudaHost, AttentionWithABf16AddMaskRunsWidened) {
  // f32 q, k_t and v with a bf16 additive mask: the mask is widened, not
  // read as f32.
  AttentionCase c = kCases[4];
  std::vector<Value> in = inputsOf(c, 4650);
  std::vector<float> mask = in[3].as<float>();
  std::vector<uint16_t> half(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) {
    half[i] = fsdprt::floatToHalf(mask[i], FSDPRT_BF16);
    mask[i] = fsdprt::halfToFloat(half[i], FSDPRT_BF16);
  }
  std::vector<Value> halfIn = in, wideIn = in;
  halfIn[3] = valueOf(plan::DType::BF16, c.mask, half);
  wideIn[3] = f32(c.mask, mask);
  Shapes sh = shapesOf(c);
  Result got = runOp("attention", halfIn, {{F32, sh.y}, {F32, sh.lse}},
                     attrsOf(c), 2, kStrict);
  ASSERT_EQ(got.error, "");
  Result want =
      runOp("attention", wideIn, {{F32, sh.y}, {F32, sh.lse}}, attrsOf(c));
  ASSERT_EQ(want.error, "");
  for (size_t k = 0; k < 2; ++k)
    expectClose(got.outputs[k].as<float>(), want.outputs[k].as<float>(), 2e-5);
}

TEST(CudaHost, AttentionErrorsNameTheOp) {
  AttentionCase c = kCases[0];
  std::vector<Value> in = inputsOf(c, 4700);
  Shapes sh = shapesOf(c);
  // k_t of the wrong head dim: the CPU's check, named on the fake device.
  Value badKt =
      f32({2, 3, c.d + 1, c.s}, randomFloats(2 * 3 * (c.d + 1) * c.s, 1));
  Result r = runOp("attention", {in[0], badKt, in[2]}, {{F32, sh.y}},
                   attrsOf(c), 2, kStrict);
  EXPECT_NE(r.error.find("attention"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("shapes do not chain"), std::string::npos) << r.error;
  // Head dims whose tiles cannot fit in shared memory.
  AttentionCase huge{"huge", {}, 1, 1, 8192, 8192};
  std::vector<Value> hugeIn = inputsOf(huge, 4710);
  r = runOp("attention", hugeIn, {{F32, shapesOf(huge).y}}, attrsOf(huge), 2,
            kStrict);
  EXPECT_NE(r.error.find("attention"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("too large for the CUDA attention kernels"),
            std::string::npos)
      << r.error;
  // A causal attention given a mask.
  AttentionCase causal = kCases[1];
  std::vector<Value> withMask = inputsOf(causal, 4720);
  withMask.push_back(boolean({causal.l, causal.s},
                             std::vector<uint8_t>(causal.l * causal.s, 0)));
  r = runOp("attention", withMask, {{F32, shapesOf(causal).y}}, attrsOf(causal),
            2, kStrict);
  EXPECT_NE(r.error.find("mask_kind causal takes no mask"), std::string::npos)
      << r.error;
}

} // namespace
