//===- HostGridSampleTest.cpp - GridSample's bodies on the host -----------===//
//
// cuda-host: kernels/grid_sample.h's body, run by the host launcher over
// each step's threads (y's elements, the planes, the grid points), against
// the CPU backend's grid_sample and grid_sample_grad, bit for bit, in every
// mode, padding mode and align_corners, float32 and float64: 1x1 inputs and
// outputs, one-element-wide axes, grid points far outside [-1, 1], on the
// corners, halfway between elements (nearest's ties), NaN and infinities.
// Then both kernels through the CUDA backend on "fake-cuda:strict" in
// float32, float64, bfloat16 and float16 (the halves widened), and the
// CPU's refusals in its words.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/grid_sample.h"

#include "../../src/half.h"

#include <limits>

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

constexpr const char *kStrict = "fake-cuda:strict";
const char *const kModes[] = {"bilinear", "nearest", "bicubic"};
const char *const kPaddings[] = {"zeros", "border", "reflection"};

/// x [n, c, h, w] sampled at grid [n, ho, wo, 2].
struct Case {
  int64_t n, c, h, w, ho, wo;
  Shape x() const { return {n, c, h, w}; }
  Shape grid() const { return {n, ho, wo, 2}; }
  Shape y() const { return {n, c, ho, wo}; }
};

const std::vector<Case> kCases = {{1, 1, 1, 1, 1, 1},    {1, 1, 1, 1, 3, 4},
                                  {2, 3, 5, 6, 4, 7},    {1, 2, 7, 1, 5, 3},
                                  {1, 1, 1, 9, 2, 2},    {1, 1, 4, 4, 1, 1},
                                  {3, 2, 9, 13, 17, 11}, {1, 1, 2, 3, 64, 65}};

/// Grid coordinates in [-2.5, 2.5] (many outside the input), with the
/// corners, the centre, halfway points of a 4-wide axis, huge values, NaN
/// and infinities among them.
std::vector<float> gridValues(size_t n, unsigned seed) {
  std::vector<float> v = randomFloats(n, seed);
  for (float &g : v)
    g = 2.5f * std::tanh(g);
  const float special[] = {-1.0f, 1.0f,     0.0f,      -0.75f, 0.25f,
                           -0.5f, 1.5f,     -3.0f,     1e30f,  -1e30f,
                           NAN,   INFINITY, -INFINITY, 0.5f};
  for (size_t i = 0; i < n; i += 3)
    v[i] = special[(i / 3) % (sizeof special / sizeof *special)];
  return v;
}

template <typename T> std::vector<T> converted(const std::vector<float> &v) {
  return std::vector<T>(v.begin(), v.end());
}

/// A tensor of `dtype` (F32, F64, BF16 or F16) holding `v`.
Value floats(plan::DType dtype, const Shape &shape,
             const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  if (dtype == plan::DType::F64)
    return f64(shape, converted<double>(v));
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

AttrList attrsOf(const char *mode, const char *padding, int64_t align) {
  return {{"mode", std::string(mode)},
          {"padding_mode", std::string(padding)},
          {"align_corners", align}};
}

template <typename T>
bool sameBytes(const std::vector<T> &got, const Value &v) {
  return got.size() * sizeof(T) == v.bytes.size() &&
         (got.empty() ||
          std::memcmp(got.data(), v.bytes.data(), v.bytes.size()) == 0);
}

/// The body's three steps on the host against the CPU backend's kernels.
template <typename T>
void expectBodiesLikeTheCpu(const Case &c, int mode, int padding, int align,
                            unsigned seed) {
  plan::DType dtype = sizeof(T) == 8 ? plan::DType::F64 : F32;
  fsdprt_dtype_t dt = static_cast<fsdprt_dtype_t>(dtype);
  std::vector<T> x = converted<T>(randomFloats(numel(c.x()), seed)),
                 grid = converted<T>(gridValues(numel(c.grid()), seed + 1)),
                 dy = converted<T>(randomFloats(numel(c.y()), seed + 2));
  cuda::GridSamplePlan p{c.n,
                         c.c,
                         c.h,
                         c.w,
                         c.ho,
                         c.wo,
                         static_cast<cuda::GridSampleMode>(mode),
                         static_cast<cuda::GridPadding>(padding),
                         align == 1};
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> y(x.size() ? numel(c.y()) : 0, nan), dx(x.size(), nan),
      dgrid(grid.size(), nan);
  cuda::GridSampleBody body{p,           cuda::GridSampleStep::Forward,
                            dt,          x.data(),
                            grid.data(), nullptr,
                            y.data()};
  cuda::hostForEach(body, body.threads());
  body.step = cuda::GridSampleStep::InputGrad, body.dy = dy.data(),
  body.out = dx.data();
  cuda::hostForEach(body, body.threads());
  body.step = cuda::GridSampleStep::GridGrad, body.out = dgrid.data();
  cuda::hostForEach(body, body.threads());

  AttrList attrs = attrsOf(kModes[mode], kPaddings[padding], align);
  Value xv = valueOf(dtype, c.x(), x), gv = valueOf(dtype, c.grid(), grid),
        dyv = valueOf(dtype, c.y(), dy);
  Result forward = runOp("grid_sample", {xv, gv}, {{dtype, c.y()}}, attrs);
  ASSERT_EQ(forward.error, "");
  EXPECT_TRUE(sameBytes(y, forward.outputs[0]));
  Result grad = runOp("grid_sample_grad", {xv, gv, dyv},
                      {{dtype, c.x()}, {dtype, c.grid()}}, attrs);
  ASSERT_EQ(grad.error, "");
  EXPECT_TRUE(sameBytes(dx, grad.outputs[0]));
  EXPECT_TRUE(sameBytes(dgrid, grad.outputs[1]));
  if (mode == 1) { // nearest gives the grid no gradient
    for (T v : dgrid)
      EXPECT_EQ(v, T(0));
  }
}

TEST(CudaHost, GridSampleBodiesEqualTheCpuBackend) {
  unsigned seed = 3100;
  for (const Case &c : kCases)
    for (int mode = 0; mode < 3; ++mode)
      for (int padding = 0; padding < 3; ++padding)
        for (int align = 0; align < 2; ++align) {
          SCOPED_TRACE(std::string(kModes[mode]) + " " + kPaddings[padding] +
                       " align_corners " + std::to_string(align) + " x " +
                       std::to_string(c.h) + "x" + std::to_string(c.w) +
                       " grid " + std::to_string(c.ho) + "x" +
                       std::to_string(c.wo));
          expectBodiesLikeTheCpu<float>(c, mode, padding, align, seed);
          expectBodiesLikeTheCpu<double>(c, mode, padding, align, seed);
          seed += 3;
        }
}

/// The CPU's values in a few points, worked out by hand as torch's
/// F.grid_sample defines them (align_corners 0: x = ((g + 1) * size - 1) / 2).
TEST(CudaHost, GridSampleGivesTorchsValuesInHandWorkedPoints) {
  // x [1, 1, 2, 3] = [[0, 1, 2], [3, 4, 5]]; the points (g_x, g_y):
  //   (0, 0) -> (1, 0.5): bilinear (1 + 4) / 2 = 2.5; nearest rounds 0.5 to
  //   even, row 0: 1.
  //   (1, -1) -> (2.5, -0.5): zeros, bilinear: half of half of x[0][2] = 0.5,
  //   nearest rounds to (2, -0), inside: 2;
  //   border clips to (2, 0): 2; reflection mirrors to (2, 0): 2.
  Value x = f32({1, 1, 2, 3}, {0, 1, 2, 3, 4, 5});
  Value grid = f32({1, 1, 2, 2}, {0, 0, 1, -1});
  struct Expected {
    const char *mode, *padding;
    std::vector<float> y;
  };
  const Expected cases[] = {{"bilinear", "zeros", {2.5f, 0.5f}},
                            {"bilinear", "border", {2.5f, 2.0f}},
                            {"bilinear", "reflection", {2.5f, 2.0f}},
                            {"nearest", "zeros", {1.0f, 2.0f}},
                            {"nearest", "border", {1.0f, 2.0f}}};
  for (const Expected &e : cases) {
    SCOPED_TRACE(std::string(e.mode) + " " + e.padding);
    Result r = runOp("grid_sample", {x, grid}, {{F32, {1, 1, 1, 2}}},
                     attrsOf(e.mode, e.padding, 0));
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(r.outputs[0].as<float>(), e.y);
  }
}

TEST(CudaHost, GridSampleRunsOnTheStrictFakeDeviceInEveryFloatType) {
  const Case c{2, 3, 5, 6, 4, 7};
  unsigned seed = 3300;
  for (plan::DType dtype : {plan::DType::F32, plan::DType::F64,
                            plan::DType::BF16, plan::DType::F16})
    for (int mode = 0; mode < 3; ++mode)
      for (int padding = 0; padding < 3; ++padding)
        for (int align = 0; align < 2; ++align) {
          SCOPED_TRACE(std::string(kModes[mode]) + " " + kPaddings[padding] +
                       " align_corners " + std::to_string(align) + " " +
                       fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
          AttrList attrs = attrsOf(kModes[mode], kPaddings[padding], align);
          Value x = floats(dtype, c.x(), randomFloats(numel(c.x()), seed)),
                grid = floats(dtype, c.grid(),
                              gridValues(numel(c.grid()), seed + 1)),
                dy = floats(dtype, c.y(), randomFloats(numel(c.y()), seed + 2));
          seed += 3;
          for (bool grad : {false, true}) {
            std::string op = grad ? "grid_sample_grad" : "grid_sample";
            std::vector<Value> ins = {x, grid};
            std::vector<std::pair<plan::DType, Shape>> outs = {{dtype, c.y()}};
            if (grad) {
              ins.push_back(dy);
              outs = {{dtype, c.x()}, {dtype, c.grid()}};
            }
            Result cpu = runOp(op, ins, outs, attrs);
            Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
            ASSERT_EQ(cpu.error, "");
            ASSERT_EQ(fake.error, "");
            for (size_t i = 0; i < outs.size(); ++i)
              EXPECT_EQ(fake.outputs[i].bytes, cpu.outputs[i].bytes) << op;
          }
        }
}

TEST(CudaHost, GridSampleRefusesWhatTheCpuRefusesInItsWords) {
  struct Refusal {
    std::vector<Value> ins;
    Shape y;
    AttrList attrs;
    std::string says;
  };
  Value x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Value grid = f32({1, 1, 1, 2}, {0, 0});
  const Refusal cases[] = {
      {{x, grid},
       {1, 1, 1, 1},
       attrsOf("linear", "zeros", 0),
       "mode must be bilinear, nearest or bicubic, not linear"},
      {{x, grid},
       {1, 1, 1, 1},
       attrsOf("bilinear", "mirror", 0),
       "padding_mode must be zeros, border or reflection, not mirror"},
      {{x, grid},
       {1, 1, 1, 1},
       attrsOf("bilinear", "zeros", 2),
       "align_corners must be 0 or 1, not 2"},
      {{f32({1, 1, 1, 2, 2}, {1, 2, 3, 4}), grid},
       {1, 1, 1, 1},
       {},
       "x must be [N, C, H, W], not [1, 1, 1, 2, 2]"},
      {{x, f32({1, 1, 1, 3}, {0, 0, 0})},
       {1, 1, 1, 1},
       {},
       "grid [1, 1, 1, 3] must be [N, Ho, Wo, 2] for x [1, 1, 2, 2]"},
      {{x, grid}, {1, 1, 1, 2}, {}, "y [1, 1, 1, 2] must be [1, 1, 1, 1]"},
      {{i64({1, 1, 2, 2}, {1, 2, 3, 4}), grid},
       {1, 1, 1, 1},
       {},
       "x must be float32 or float64, not int64"}};
  for (const Refusal &r : cases) {
    SCOPED_TRACE(r.says);
    plan::DType dtype = r.ins[0].dtype;
    Result cpu = runOp("grid_sample", r.ins, {{dtype, r.y}}, r.attrs);
    Result fake =
        runOp("grid_sample", r.ins, {{dtype, r.y}}, r.attrs, 2, kStrict);
    EXPECT_NE(cpu.error.find(r.says), std::string::npos) << cpu.error;
    EXPECT_NE(fake.error.find(r.says), std::string::npos) << fake.error;
  }
}

} // namespace
