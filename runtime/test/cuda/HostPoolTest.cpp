//===- HostPoolTest.cpp - Pooling and batch norm on the host --------------===//
//
// cuda-host: kernels/pool.h's bodies against the CPU backend's max_pool
// (with its Indices output too, both storage orders), average_pool,
// pool_grad (both modes: bit for bit, as both sum in the same order),
// global_max_pool and batch_norm: strides, dilations, asymmetric padding,
// count_include_pad, ceil_mode (windows wider than the input too), planes
// of 1 element and rows of 257; and
// rows.h's hardmax, arg_max and arg_min along every axis, with ties and
// NaN (select_last_index too), of float32, float64, int32 and int64;
// resize in every
// mode, coordinate transform and nearest mode, cubic with and without
// exclude_outside, scales up, down and fractional, bit for bit, the
// scales a parameter or an input read at run time (scales that do not fit
// the plan reported as the CPU reports them). Then those ops on
// "fake-cuda:strict" in fp32, bf16 and f16.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/pool.h"
#include "../../backends/cuda/kernels/rows.h"

#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

struct PoolCase {
  Shape x; // [N, C, H, W]
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool includePad, ceil;
};

const std::vector<PoolCase> kPools = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false},
    // ResNet's stem pool: 3x3, stride 2, padding 1
    {{2, 4, 17, 17}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
    {{1, 2, 9, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}, false, false},
    {{1, 3, 10, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},
    {{1, 3, 10, 11}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, true},
    {{2, 2, 7, 257}, {2, 3}, {1, 2}, {0, 1, 2, 0}, {1, 1}, true, false},
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false},
    {{2, 5, 6, 6}, {6, 6}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, false},
    // ceil_mode windows wider than the (padded) input: one window each
    // (EfficientNet's AvgPool2d(hidden_dim, ceil_mode=True) on a 1x1 map).
    {{2, 3, 1, 1}, {5, 5}, {5, 5}, {0, 0, 0, 0}, {1, 1}, true, true},
    {{1, 2, 3, 4}, {6, 6}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},
    {{1, 2, 3, 4}, {6, 6}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},
};

/// ONNX's output size along one dim (the CPU backend's windowOutput).
int64_t outputSize(int64_t in, int64_t padBegin, int64_t padEnd, int64_t k,
                   int64_t stride, int64_t dilation, bool ceil) {
  int64_t span = in + padBegin + padEnd - dilation * (k - 1) - 1;
  if (!ceil)
    return span / stride + 1;
  // Rounded to minus infinity: a window may be wider than the input.
  int64_t reach = span + stride - 1;
  int64_t out =
      (reach >= 0 ? reach / stride : -((stride - 1 - reach) / stride)) + 1;
  if ((out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

cuda::PoolWindow windowOf(const PoolCase &c) {
  cuda::PoolWindow w{};
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = c.kernel[d];
    w.stride[d] = c.strides[d];
    w.dilation[d] = c.dilations[d];
  }
  for (int d = 0; d < 4; ++d)
    w.pads[d] = c.pads[d];
  w.includePad = c.includePad;
  w.h = c.x[2], w.w = c.x[3];
  w.oh = outputSize(w.h, c.pads[0], c.pads[2], c.kernel[0], c.strides[0],
                    c.dilations[0], c.ceil);
  w.ow = outputSize(w.w, c.pads[1], c.pads[3], c.kernel[1], c.strides[1],
                    c.dilations[1], c.ceil);
  return w;
}

AttrList attrsOf(const PoolCase &c) {
  return {{"kernel_shape", c.kernel},
          {"strides", c.strides},
          {"pads", c.pads},
          {"dilations", c.dilations},
          {"count_include_pad", int64_t(c.includePad)},
          {"ceil_mode", int64_t(c.ceil)}};
}

TEST(CudaHost, PoolingEqualsTheCpuBackend) {
  unsigned seed = 1700;
  for (const PoolCase &c : kPools)
    for (bool max : {true, false}) {
      SCOPED_TRACE(std::string(max ? "max_pool" : "average_pool") + " of " +
                   std::to_string(c.x[2]) + "x" + std::to_string(c.x[3]) +
                   " kernel " + std::to_string(c.kernel[0]));
      cuda::PoolWindow w = windowOf(c);
      std::vector<float> x = randomFloats(numel(c.x), seed++);
      x[x.size() / 2] = NAN; // max: the window holding it is NaN
      int64_t planes = c.x[0] * c.x[1];
      Shape out = {c.x[0], c.x[1], w.oh, w.ow};
      std::vector<float> y(numel(out));
      if (max)
        cuda::hostForEach(cuda::PoolBody<true>{w, x.data(), y.data()},
                          numel(out));
      else
        cuda::hostForEach(cuda::PoolBody<false>{w, x.data(), y.data()},
                          numel(out));
      expectClose(y,
                  cpu(max ? "max_pool" : "average_pool", {f32(c.x, x)}, out,
                      attrsOf(c)),
                  max ? 0 : 1e-6);
      EXPECT_EQ(numel(out), planes * w.oh * w.ow);
    }
}

TEST(CudaHost, PoolGradEqualsTheCpuBackendBitForBit) {
  unsigned seed = 1800;
  for (const PoolCase &c : kPools)
    for (bool max : {true, false}) {
      SCOPED_TRACE(std::string(max ? "max" : "average") + " of " +
                   std::to_string(c.x[2]) + "x" + std::to_string(c.x[3]) +
                   " kernel " + std::to_string(c.kernel[0]));
      cuda::PoolWindow w = windowOf(c);
      std::vector<float> x = randomFloats(numel(c.x), seed++);
      for (size_t i = 0; i < x.size(); i += 5)
        x[i] = 0.5f; // ties: the first maximal element wins
      x[x.size() / 3] = NAN;
      Shape gShape = {c.x[0], c.x[1], w.oh, w.ow};
      std::vector<float> g = randomFloats(numel(gShape), seed++);
      std::vector<float> dx(x.size(), NAN);
      if (max)
        cuda::hostForEach(
            cuda::PoolGradBody<true>{w, x.data(), g.data(), dx.data()},
            numel(c.x));
      else
        cuda::hostForEach(
            cuda::PoolGradBody<false>{w, x.data(), g.data(), dx.data()},
            numel(c.x));
      AttrList attrs = attrsOf(c);
      attrs.push_back({"mode", std::string(max ? "max" : "average")});
      std::vector<float> want =
          cpu("pool_grad", {f32(c.x, x), f32(gShape, g)}, c.x, attrs);
      ASSERT_EQ(dx.size(), want.size());
      EXPECT_EQ(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(float)),
                0);
    }
}

// 1 / sqrt(var + eps), against the CPU's batch_norm of ones with mean 0,
// scale 1 and bias 0 (which computes exactly that), in one channel, in
// 5, and in more than a block's worth.
TEST(CudaHost, InverseStdEqualsTheCpuBackend) {
  for (int64_t channels : {int64_t(1), int64_t(5), int64_t(1025)}) {
    std::vector<float> v = randomFloats(channels, 8);
    for (float &var : v)
      var = std::fabs(var) * 4;
    v[0] = 0; // eps alone
    std::vector<float> inv(channels);
    float eps = 1e-3f;
    cuda::hostForEach(cuda::InverseStdBody{v.data(), inv.data(), eps},
                      channels);
    Shape c = {channels}, x = {1, channels};
    expectClose(inv,
                cpu("batch_norm",
                    {f32(x, std::vector<float>(channels, 1.0f)),
                     f32(c, std::vector<float>(channels, 1.0f)),
                     f32(c, std::vector<float>(channels, 0.0f)),
                     f32(c, std::vector<float>(channels, 0.0f)), f32(c, v)},
                    x, {{"epsilon", double(eps)}}),
                2e-6);
  }
}

// batch_norm_train and batch_norm_grad, one channel per item, give the CPU
// backend's outputs bit for bit (both sum each channel in double, in the
// same order): NCHW, [N, C], one value per channel (no unbiasing), a
// channel of 100003 values and more channels than a block has threads.
TEST(CudaHost, BatchNormTrainAndGradEqualTheCpuBackend) {
  for (const Shape &shape : {Shape{2, 3, 5, 7}, Shape{8, 32}, Shape{1, 2, 1},
                             Shape{1, 2, 100003}, Shape{2, 1025}}) {
    SCOPED_TRACE(std::to_string(shape[0]) + " x " + std::to_string(shape[1]) +
                 " x " + std::to_string(numel(shape) / shape[0] / shape[1]));
    int64_t n = shape[0], channels = shape[1];
    int64_t inner = numel(shape) / n / channels, count = n * inner;
    Shape c = {channels};
    std::vector<float> x = randomFloats(numel(shape), 21),
                       dy = randomFloats(numel(shape), 22),
                       s = randomFloats(channels, 23),
                       b = randomFloats(channels, 24),
                       rm = randomFloats(channels, 25),
                       rv = randomFloats(channels, 26);
    for (float &v : rv)
      v = std::fabs(v) + 0.1f;
    std::vector<float> y(x.size()), mean(channels), inv(channels),
        nextMean(channels), nextVar(channels);
    double eps = 1e-5, momentum = 0.9;
    cuda::hostForEach(
        cuda::BatchNormTrainBody{
            x.data(), s.data(), b.data(), rm.data(), rv.data(), y.data(),
            mean.data(), inv.data(), nextMean.data(), nextVar.data(), n,
            channels, inner, eps, momentum,
            count > 1 ? double(count) / double(count - 1) : 1.0},
        channels);
    AttrList attrs = {{"epsilon", eps}, {"momentum", momentum}};
    Result want = runOp(
        "batch_norm_train",
        {f32(shape, x), f32(c, s), f32(c, b), f32(c, rm), f32(c, rv)},
        {{F32, shape}, {F32, c}, {F32, c}, {F32, c}, {F32, c}}, attrs);
    ASSERT_EQ(want.error, "");
    const std::vector<float> *got[] = {&y, &mean, &inv, &nextMean, &nextVar};
    for (int k = 0; k < 5; ++k)
      EXPECT_EQ(*got[k], want.outputs[k].as<float>()) << "output " << k;

    std::vector<float> dx(x.size()), dscale(channels), dbias(channels);
    cuda::hostForEach(
        cuda::BatchNormGradBody{dy.data(), x.data(), s.data(), mean.data(),
                                inv.data(), dx.data(), dscale.data(),
                                dbias.data(), n, channels, inner},
        channels);
    Result wantGrad = runOp(
        "batch_norm_grad",
        {f32(shape, dy), f32(shape, x), f32(c, s), f32(c, mean), f32(c, inv)},
        {{F32, shape}, {F32, c}, {F32, c}}, attrs);
    ASSERT_EQ(wantGrad.error, "");
    const std::vector<float> *gotGrad[] = {&dx, &dscale, &dbias};
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(*gotGrad[k], wantGrad.outputs[k].as<float>())
          << "gradient output " << k;
  }
}

TEST(CudaHost, BatchNormEqualsTheCpuBackend) {
  for (const Shape &shape :
       {Shape{2, 3, 5, 7}, Shape{8, 32}, Shape{1, 1, 1}, Shape{2, 4, 100003}}) {
    int64_t channels = shape[1], inner = numel(shape) / shape[0] / channels;
    std::vector<float> x = randomFloats(numel(shape), 3),
                       s = randomFloats(channels, 4),
                       b = randomFloats(channels, 5),
                       m = randomFloats(channels, 6),
                       v = randomFloats(channels, 7);
    for (float &var : v)
      var = std::fabs(var) + 0.1f;
    std::vector<float> y(x.size());
    float eps = 1e-3f;
    cuda::hostForEach(cuda::BatchNormBody{x.data(), s.data(), b.data(),
                                          m.data(), v.data(), y.data(),
                                          channels, inner, eps},
                      numel(shape));
    Shape c = {channels};
    expectClose(y,
                cpu("batch_norm",
                    {f32(shape, x), f32(c, s), f32(c, b), f32(c, m), f32(c, v)},
                    shape, {{"epsilon", double(eps)}}),
                2e-6);
  }
}

TEST(CudaHost, MaxPoolIndicesEqualTheCpuBackendInBothStorageOrders) {
  unsigned seed = 2100;
  for (const PoolCase &c : kPools)
    for (bool columns : {false, true}) {
      SCOPED_TRACE(std::to_string(c.x[2]) + "x" + std::to_string(c.x[3]) +
                   " kernel " + std::to_string(c.kernel[0]) +
                   (columns ? " column-major" : " row-major"));
      cuda::PoolWindow w = windowOf(c);
      std::vector<float> x = randomFloats(numel(c.x), seed++);
      for (size_t i = 0; i < x.size(); i += 5)
        x[i] = 0.5f; // ties: the first maximal element wins
      x[x.size() / 2] = NAN;
      Shape out = {c.x[0], c.x[1], w.oh, w.ow};
      std::vector<float> y(numel(out));
      std::vector<int64_t> indices(numel(out), -7);
      cuda::hostForEach(cuda::MaxPoolIndicesBody{w, x.data(), y.data(),
                                                 indices.data(), columns},
                        numel(out));
      AttrList attrs = attrsOf(c);
      attrs.push_back({"storage_order", int64_t(columns)});
      Result r = runOp("max_pool", {f32(c.x, x)},
                       {{F32, out}, {plan::DType::I64, out}}, attrs);
      ASSERT_EQ(r.error, "");
      EXPECT_EQ(std::memcmp(y.data(), r.outputs[0].bytes.data(),
                            y.size() * sizeof(float)),
                0);
      EXPECT_EQ(indices, r.outputs[1].as<int64_t>());
    }
}

TEST(CudaHost, GlobalMaxPoolEqualsTheCpuBackend) {
  const std::vector<Shape> shapes = {{1, 1, 1}, {2, 3, 5, 5}, {2, 2, 100003},
                                     {3, 4, 2, 3, 2}};
  unsigned seed = 2200;
  for (const Shape &shape : shapes) {
    SCOPED_TRACE("rank " + std::to_string(shape.size()) + ", " +
                 std::to_string(numel(shape)) + " elements");
    std::vector<float> x = randomFloats(numel(shape), seed++);
    int64_t planes = shape[0] * shape[1], inner = numel(shape) / planes;
    if (planes > 1) {
      x[inner + inner / 2] = NAN; // the second plane's max is NaN
      x[inner + inner - 1] = INFINITY;
    }
    Shape out(shape.size(), 1);
    out[0] = shape[0], out[1] = shape[1];
    std::vector<float> y(planes);
    cuda::hostForEach(cuda::GlobalMaxPoolBody{x.data(), y.data(), inner},
                      planes);
    std::vector<float> want = cpu("global_max_pool", {f32(shape, x)}, out);
    ASSERT_EQ(want.size(), y.size());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0);
    EXPECT_TRUE(planes == 1 || std::isnan(y[1]));
  }
}

TEST(CudaHost, HardmaxEqualsTheCpuBackendAlongEveryAxis) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{1}, 0},        {{7}, 0},
                                   {{3, 257}, 1},   {{4, 33, 5}, 1},
                                   {{2, 100003}, 1}, {{6, 7}, 0},
                                   {{4, 33, 5}, 2}};
  unsigned seed = 2300;
  for (const Case &c : cases) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + " of rank " +
                 std::to_string(c.x.size()));
    std::vector<float> x = randomFloats(numel(c.x), seed++);
    for (float &v : x)
      v = std::round(v * 2); // ties
    if (x.size() > 3)
      x[2] = NAN;
    int64_t n = c.x[c.axis], inner = 1;
    for (size_t d = c.axis + 1; d < c.x.size(); ++d)
      inner *= c.x[d];
    std::vector<float> y(x.size(), NAN);
    cuda::hostForEach(cuda::HardmaxBody{x.data(), y.data(), n, inner},
                      numel(c.x) / n);
    EXPECT_EQ(y, cpu("hardmax", {f32(c.x, x)}, c.x, {{"axis", c.axis}}));
  }
}

Value floats(plan::DType dtype, const Shape &shape, const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

TEST(CudaHost, MaxOpsRunOnTheStrictFakeDeviceInEveryFloatType) {
  const char *strict = "fake-cuda:strict";
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16}) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    Value x = floats(dtype, {2, 3, 9, 8}, randomFloats(432, 5));
    const PoolCase &c = kPools[1];
    cuda::PoolWindow w = windowOf({{2, 3, 9, 8}, c.kernel, c.strides, c.pads,
                                   c.dilations, false, false});
    Shape pooled = {2, 3, w.oh, w.ow};
    struct Run {
      const char *op;
      std::vector<std::pair<plan::DType, Shape>> outs;
      AttrList attrs;
    };
    AttrList poolAttrs = attrsOf(c);
    poolAttrs.push_back({"storage_order", int64_t(1)});
    for (const Run &run :
         {Run{"max_pool", {{dtype, pooled}, {plan::DType::I64, pooled}}, poolAttrs},
          Run{"global_max_pool", {{dtype, {2, 3, 1, 1}}}, {}},
          Run{"hardmax", {{dtype, {2, 3, 9, 8}}}, {{"axis", int64_t(2)}}}}) {
      SCOPED_TRACE(run.op);
      Result cpu = runOp(run.op, {x}, run.outs, run.attrs);
      Result fake = runOp(run.op, {x}, run.outs, run.attrs, 2, strict);
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      for (size_t i = 0; i < run.outs.size(); ++i)
        EXPECT_EQ(fake.outputs[i].bytes, cpu.outputs[i].bytes) << "output " << i;
    }
  }
}

TEST(CudaHost, ResizeEqualsTheCpuBackendBitForBit) {
  struct Case {
    Shape x;
    std::vector<double> scales;
  };
  const std::vector<Case> cases = {
      {{1, 1, 4, 4}, {1, 1, 2, 2}},     {{1, 2, 5, 7}, {1, 1, 0.6, 1.5}},
      {{2, 3, 9}, {1, 1, 3.0}},         {{13}, {0.5}},
      {{1, 1, 1, 1}, {1, 1, 3, 2}},     {{2, 4, 3, 5}, {1, 0.5, 2.5, 0.8}},
  };
  const char *transforms[] = {"half_pixel", "pytorch_half_pixel",
                              "align_corners", "asymmetric",
                              "tf_half_pixel_for_nn"};
  const char *nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                            "ceil"};
  unsigned seed = 2400;
  for (const Case &c : cases)
    for (const char *mode : {"nearest", "linear", "cubic"})
      for (const char *transform : transforms)
        for (int variant = 0; variant < 4; ++variant) {
          std::string m = mode;
          if ((m == "linear" && variant > 0) || (m == "cubic" && variant > 1))
            continue;
          SCOPED_TRACE(m + " " + transform + " variant " +
                       std::to_string(variant) + " rank " +
                       std::to_string(c.x.size()));
          Shape out;
          for (size_t d = 0; d < c.x.size(); ++d)
            out.push_back(static_cast<int64_t>(std::floor(c.x[d] * c.scales[d])));
          AttrList attrs = {{"mode", m},
                            {"coordinate_transformation_mode",
                             std::string(transform)},
                            {"scales", c.scales}};
          cuda::ResizePlan p{};
          p.rank = static_cast<int>(c.x.size());
          int64_t stride = 1;
          for (int d = p.rank - 1; d >= 0; --d) {
            p.in[d] = c.x[d], p.out[d] = out[d], p.stride[d] = stride;
            p.scale[d] = c.scales[d];
            stride *= c.x[d];
          }
          p.mode = m == "nearest"  ? cuda::ResizeMode::Nearest
                   : m == "linear" ? cuda::ResizeMode::Linear
                                   : cuda::ResizeMode::Cubic;
          p.transform = static_cast<cuda::ResizeTransform>(
              std::find(std::begin(transforms), std::end(transforms),
                        std::string(transform)) -
              std::begin(transforms));
          p.a = -0.75;
          if (m == "nearest") {
            attrs.push_back({"nearest_mode", std::string(nearests[variant])});
            p.nearest = static_cast<cuda::NearestMode>(variant);
          }
          if (m == "cubic" && variant == 1) {
            attrs.push_back({"exclude_outside", int64_t(1)});
            attrs.push_back({"cubic_coeff_a", -0.5});
            p.exclude = true, p.a = -0.5;
          }
          std::vector<float> x = randomFloats(numel(c.x), seed++),
                             y(numel(out), NAN);
          cuda::hostForEach(cuda::ResizeBody{p, x.data(), y.data()}, numel(out));
          std::vector<float> want = cpu("resize", {f32(c.x, x)}, out, attrs);
          ASSERT_EQ(want.size(), y.size());
          EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)),
                    0);
        }
}

TEST(CudaHost, ResizeRunsOnTheStrictFakeDeviceInEveryFloatType) {
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16})
    for (const char *mode : {"nearest", "linear", "cubic"}) {
      SCOPED_TRACE(std::string(mode) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      Value x = floats(dtype, {1, 2, 5, 6}, randomFloats(60, 31));
      AttrList attrs = {{"mode", std::string(mode)},
                        {"scales", std::vector<double>{1, 1, 1.6, 0.5}}};
      std::vector<std::pair<plan::DType, Shape>> outs = {{dtype, {1, 2, 8, 3}}};
      Result cpu = runOp("resize", {x}, outs, attrs);
      Result fake = runOp("resize", {x}, outs, attrs, 2, "fake-cuda:strict");
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
    }
}

/// resize with its scales as an input: the body reading them (in place of
/// the plan's) over y's elements against the CPU's resize reading them,
/// bit for bit, in every mode; then through the backend on the strict
/// fake device, and scales that do not fit the plan reported as the CPU
/// reports them.
TEST(CudaHost, ResizeWithRunTimeScalesEqualsTheCpuBackend) {
  struct Case {
    Shape x, y;
    std::vector<float> scales;
  };
  const std::vector<Case> cases = {
      {{1, 1, 4, 4}, {1, 1, 8, 8}, {1, 1, 2, 2}},
      {{1, 2, 5, 7}, {1, 2, 3, 10}, {1, 1, 0.6f, 1.5f}},
      {{13}, {6}, {0.5f}},
      {{2, 1, 1, 3}, {2, 1, 3, 1}, {1, 1, 3, 0.34f}},
      // A scale made from sizes (3 / 7): the length is taken as 3.
      {{1, 7}, {1, 3}, {1, 3.0f / 7}}};
  unsigned seed = 2450;
  for (const Case &c : cases)
    for (const char *mode : {"nearest", "linear", "cubic"})
      for (const char *transform : {"half_pixel", "align_corners"}) {
        SCOPED_TRACE(std::string(mode) + " " + transform + " rank " +
                     std::to_string(c.x.size()));
        AttrList attrs = {
            {"mode", std::string(mode)},
            {"coordinate_transformation_mode", std::string(transform)}};
        std::vector<float> x = randomFloats(numel(c.x), seed++);
        Value xv = f32(c.x, x), sv = f32({int64_t(c.x.size())}, c.scales);
        Result want = runOp("resize", {xv, sv}, {{F32, c.y}}, attrs);
        ASSERT_EQ(want.error, "");
        Result fake = runOp("resize", {xv, sv}, {{F32, c.y}}, attrs, 2,
                            "fake-cuda:strict");
        ASSERT_EQ(fake.error, "");
        EXPECT_EQ(fake.outputs[0].bytes, want.outputs[0].bytes);
        // The body itself, its plan as the backend makes it.
        cuda::ResizePlan p{};
        p.rank = static_cast<int>(c.x.size());
        int64_t stride = 1;
        for (int d = p.rank - 1; d >= 0; --d) {
          p.in[d] = c.x[d], p.out[d] = c.y[d], p.stride[d] = stride;
          p.scale[d] = NAN; // never read: the body reads the input
          stride *= c.x[d];
        }
        p.mode = std::string(mode) == "nearest"  ? cuda::ResizeMode::Nearest
                 : std::string(mode) == "linear" ? cuda::ResizeMode::Linear
                                                 : cuda::ResizeMode::Cubic;
        p.transform = std::string(transform) == "half_pixel"
                          ? cuda::ResizeTransform::HalfPixel
                          : cuda::ResizeTransform::AlignCorners;
        p.a = -0.75;
        cuda::ErrorSlot slot{};
        std::vector<float> y(numel(c.y), NAN);
        cuda::hostForEach(
            cuda::ResizeBody{p, x.data(), y.data(), c.scales.data(), &slot},
            numel(c.y));
        EXPECT_EQ(slot.code, 0);
        EXPECT_EQ(std::memcmp(y.data(), want.outputs[0].bytes.data(),
                              y.size() * sizeof(float)),
                  0);
      }
  // In bf16: run widened, the scales input still read at run time.
  Value xh = floats(plan::DType::BF16, {1, 2, 5, 6}, randomFloats(60, 32));
  Value sv = f32({4}, {1, 1, 1.6f, 0.5f});
  Result cpu = runOp("resize", {xh, sv}, {{plan::DType::BF16, {1, 2, 8, 3}}},
                     {{"mode", std::string("linear")}});
  Result fake = runOp("resize", {xh, sv}, {{plan::DType::BF16, {1, 2, 8, 3}}},
                      {{"mode", std::string("linear")}}, 2, "fake-cuda:strict");
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
}

TEST(CudaHost, ResizeReportsRunTimeScalesThatDoNotFitAsTheCpuDoes) {
  Value x = f32({1, 2, 4, 4}, randomFloats(32, 33));
  struct Case {
    std::vector<float> scales;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{1, 1, 2, 2.5f},
       "scale 2.500000 of dimension 3 resizes 4 to 10, "
       "not the plan's 8"},
      {{1, 1, 0, 2}, "scales must be positive"},
      {{1, 1, 2, NAN}, "scales must be positive"},
      {{1, 0.5f, 2, 2}, "scale 0.500000 of dimension 1 resizes 2 to 1"}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.says);
    Value sv = f32({4}, c.scales);
    Result cpu = runOp("resize", {x, sv}, {{F32, {1, 2, 8, 8}}});
    Result fake = runOp("resize", {x, sv}, {{F32, {1, 2, 8, 8}}}, {}, 2,
                        "fake-cuda:strict");
    EXPECT_NE(cpu.error.find(c.says), std::string::npos) << cpu.error;
    EXPECT_EQ(fake.error, cpu.error);
  }
  // An empty y: the one thread launched still checks the scales.
  Value empty = f32({1, 0}, {});
  Result cpu = runOp("resize", {empty, f32({2}, {1, -1})}, {{F32, {1, 0}}});
  Result fake = runOp("resize", {empty, f32({2}, {1, -1})}, {{F32, {1, 0}}}, {},
                      2, "fake-cuda:strict");
  EXPECT_NE(cpu.error.find("scales must be positive"), std::string::npos)
      << cpu.error;
  EXPECT_EQ(fake.error, cpu.error);
}

TEST(CudaHost, ArgMaxAndArgMinEqualTheCpuBackend) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{1}, 0},         {{7}, 0},
                                   {{3, 257}, 1},    {{4, 33, 5}, 1},
                                   {{2, 100003}, 1}, {{6, 7}, 0},
                                   {{4, 33, 5}, 2}};
  unsigned seed = 2500;
  for (const Case &c : cases)
    for (bool max : {true, false})
      for (bool last : {false, true}) {
        SCOPED_TRACE(std::string(max ? "arg_max" : "arg_min") + " axis " +
                     std::to_string(c.axis) + " of rank " +
                     std::to_string(c.x.size()) + (last ? " last" : ""));
        std::vector<float> x = randomFloats(numel(c.x), seed++);
        for (float &v : x)
          v = std::round(v * 2); // ties
        if (x.size() > 3)
          x[2] = NAN, x[0] = NAN; // one at a row's front, one inside
        int64_t n = c.x[c.axis], inner = 1;
        for (size_t d = c.axis + 1; d < c.x.size(); ++d)
          inner *= c.x[d];
        Shape out = c.x;
        out[c.axis] = 1;
        std::vector<int64_t> y(numel(out), -5);
        cuda::hostForEach(cuda::ArgExtremeBody{x.data(), y.data(), n, inner,
                                               max, last, FSDPRT_F32},
                          numel(out));
        Result r = runOp(max ? "arg_max" : "arg_min", {f32(c.x, x)},
                         {{plan::DType::I64, out}},
                         {{"axis", c.axis},
                          {"select_last_index", int64_t(last)}});
        ASSERT_EQ(r.error, "");
        EXPECT_EQ(y, r.outputs[0].as<int64_t>());
      }
}

/// arg_max and arg_min of T (int32, int64, float64) along `axis`, with
/// ties, on the host against the CPU and on "fake-cuda:strict".
template <typename T> void expectArgExtremesLikeTheCpu(plan::DType dtype) {
  const Shape shape = {4, 33, 5};
  std::vector<float> r = randomFloats(numel(shape), 2600);
  std::vector<T> x(r.size());
  for (size_t i = 0; i < r.size(); ++i)
    x[i] = static_cast<T>(std::round(r[i] * 3)); // ties
  for (int64_t axis : {0, 1, 2})
    for (bool max : {true, false})
      for (bool last : {false, true}) {
        const char *op = max ? "arg_max" : "arg_min";
        SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis) +
                     (last ? " last " : " ") +
                     fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
        int64_t inner = 1;
        for (size_t d = axis + 1; d < shape.size(); ++d)
          inner *= shape[d];
        Shape out = shape;
        out[axis] = 1;
        std::vector<int64_t> y(numel(out), -5);
        cuda::hostForEach(
            cuda::ArgExtremeBody{x.data(), y.data(), shape[axis], inner, max,
                                 last, static_cast<fsdprt_dtype_t>(dtype)},
            numel(out));
        AttrList attrs = {{"axis", axis}, {"select_last_index", int64_t(last)}};
        std::vector<std::pair<plan::DType, Shape>> outs = {
            {plan::DType::I64, out}};
        Result cpu = runOp(op, {valueOf(dtype, shape, x)}, outs, attrs);
        ASSERT_EQ(cpu.error, "");
        EXPECT_EQ(y, cpu.outputs[0].as<int64_t>());
        Result fake = runOp(op, {valueOf(dtype, shape, x)}, outs, attrs, 2,
                            "fake-cuda:strict");
        ASSERT_EQ(fake.error, "");
        EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
      }
}

TEST(CudaHost, ArgMaxAndArgMinOfIntegersAndFloat64EqualTheCpuBackend) {
  expectArgExtremesLikeTheCpu<int32_t>(plan::DType::I32);
  expectArgExtremesLikeTheCpu<int64_t>(plan::DType::I64);
  expectArgExtremesLikeTheCpu<double>(plan::DType::F64);
}

TEST(CudaHost, ArgExtremesRunOnTheStrictFakeDeviceInEveryFloatType) {
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16})
    for (const char *op : {"arg_max", "arg_min"}) {
      SCOPED_TRACE(std::string(op) + " " +
                   fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
      Value x = floats(dtype, {3, 8, 5}, randomFloats(120, 41));
      AttrList attrs = {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}};
      std::vector<std::pair<plan::DType, Shape>> outs = {
          {plan::DType::I64, {3, 5}}};
      Result cpu = runOp(op, {x}, outs, attrs);
      Result fake = runOp(op, {x}, outs, attrs, 2, "fake-cuda:strict");
      ASSERT_EQ(cpu.error, "");
      ASSERT_EQ(fake.error, "");
      EXPECT_EQ(fake.outputs[0].bytes, cpu.outputs[0].bytes);
    }
}

} // namespace
