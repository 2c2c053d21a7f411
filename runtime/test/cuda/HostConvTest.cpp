//===- HostConvTest.cpp - Convolutions on the host ------------------------===//
//
// cuda-host: kernels/conv.h's bodies against the CPU backend's im2col +
// GEMM path (FSDPRT_DNNL=off), bit for bit
// (im2col through a conv whose weights pick one column row each, so its
// GEMM adds only exact zeros; col2im through a conv_grad_input with one
// output channel per group, so its GEMM is a single product per entry),
// and conv, conv_grad_input and conv_grad_weight on "fake-cuda:strict"
// (the backend's im2col, GEMMs and col2im) against the CPU backend: strides,
// asymmetric padding, dilations, groups (depthwise, with fewer and with
// more images than groups), 1-D convolutions, direct 1x1 ones, a batch of
// one, sizes that are no multiple of a block, a bias, and bf16 run widened.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/conv.h"
#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

constexpr const char *kStrict = "fake-cuda:strict";

/// The CUDA backend runs convolutions as the CPU backend's im2col + GEMM
/// path does; the CPU's default is oneDNN's primitives (other roundings),
/// so these tests take that path (FSDPRT_DNNL=off) as their reference.
void compareWithIm2col() { ASSERT_EQ(setenv("FSDPRT_DNNL", "off", 1), 0); }

struct ConvCase {
  const char *name;
  Shape x, w; // [N, C, (H,) W], [M, C / group, (kh,) kw]
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
};

// One case a line: name, x, w, strides, pads, dilations, group.
// clang-format off
const std::vector<ConvCase> kConvs = {
    {"3x3 same", {2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"ResNet stem 7x7 s2", {1, 3, 32, 32}, {8, 3, 7, 7}, {2, 2}, {3, 3, 3, 3},
     {1, 1}, 1},
    {"3x3 s2", {2, 4, 17, 17}, {6, 4, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
    {"dilated, asymmetric pads", {1, 2, 10, 11}, {4, 2, 3, 2}, {1, 2},
     {2, 0, 1, 1}, {2, 1}, 1},
    {"2 groups", {2, 4, 7, 7}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
    // Fewer images than groups: one GEMM per image, batched over groups.
    {"depthwise", {3, 5, 9, 9}, {5, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5},
    // More images than groups: one GEMM per group, batched over images.
    {"depthwise x2", {4, 2, 6, 6}, {4, 1, 3, 3}, {2, 1}, {1, 0, 1, 2}, {1, 1},
     2},
    {"1x1 direct", {2, 8, 5, 5}, {16, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1},
     1},
    {"1x1 s2", {2, 8, 7, 7}, {4, 8, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
    {"ViT patches", {2, 3, 32, 32}, {8, 3, 16, 16}, {16, 16}, {0, 0, 0, 0},
     {1, 1}, 1},
    {"one element", {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1},
     1},
    {"257 rows", {1, 3, 257, 3}, {2, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"1-D", {2, 3, 20}, {4, 3, 5}, {2}, {2, 1}, {1}, 1},
    {"1-D grouped, dilated", {1, 4, 33}, {4, 2, 3}, {1}, {3, 3}, {3}, 2},
    {"1-D direct", {3, 6, 7}, {2, 6, 1}, {1}, {0, 0}, {1}, 1},
};
// clang-format on

/// The output's shape (ONNX Conv, floor mode).
Shape outputShape(const ConvCase &c) {
  size_t sp = c.x.size() - 2;
  Shape y = {c.x[0], c.w[0]};
  for (size_t d = 0; d < sp; ++d) {
    int64_t span = c.x[2 + d] + c.pads[d] + c.pads[sp + d] -
                   c.dilations[d] * (c.w[2 + d] - 1) - 1;
    y.push_back(span / c.strides[d] + 1);
  }
  return y;
}

/// The case's window as the backend plans it: a 1-D one as one row.
cuda::ConvWindow windowOf(const ConvCase &c) {
  Shape y = outputShape(c);
  bool two = c.x.size() == 4;
  size_t sp = c.x.size() - 2;
  cuda::ConvWindow w{};
  w.channels = c.x[1];
  w.h = two ? c.x[2] : 1;
  w.w = c.x.back();
  w.kernel[0] = two ? c.w[2] : 1;
  w.kernel[1] = c.w.back();
  w.stride[0] = two ? c.strides[0] : 1;
  w.stride[1] = c.strides.back();
  w.dilation[0] = two ? c.dilations[0] : 1;
  w.dilation[1] = c.dilations.back();
  w.pad[0] = two ? c.pads[0] : 0;
  w.pad[1] = c.pads[sp - 1];
  w.oh = two ? y[2] : 1;
  w.ow = y.back();
  return w;
}

AttrList attrsOf(const ConvCase &c) {
  return {{"strides", c.strides},
          {"pads", c.pads},
          {"dilations", c.dilations},
          {"group", c.group}};
}

/// The weights of a conv whose output channel (k, r) of group k is column
/// row r of that group: one 1 and zeros, so y is im2col's output exactly.
std::vector<float> pickRows(const ConvCase &c, Shape &shape) {
  int64_t taps = numel(c.w) / c.w[0] / c.w[1];
  int64_t kdim = c.w[1] * taps; // column rows of a group
  shape = c.w;
  shape[0] = c.group * kdim;
  std::vector<float> w(numel(shape), 0.0f);
  for (int64_t o = 0; o < shape[0]; ++o)
    w[o * kdim + o % kdim] = 1.0f;
  return w;
}

TEST(CudaHost, Im2colEqualsTheCpuBackendBitForBit) {
  compareWithIm2col();
  unsigned seed = 2100;
  for (const ConvCase &c : kConvs) {
    SCOPED_TRACE(c.name);
    cuda::ConvWindow win = windowOf(c);
    std::vector<float> x = randomFloats(numel(c.x), seed++);
    std::vector<float> col(c.x[0] * win.rows() * win.oh * win.ow, NAN);
    cuda::hostForEach(cuda::Im2colBody{win, x.data(), col.data()},
                      static_cast<int64_t>(col.size()));
    Shape ws;
    std::vector<float> w = pickRows(c, ws);
    Shape y = outputShape(c);
    y[1] = ws[0];
    std::vector<float> want =
        cpu("conv", {f32(c.x, x), f32(ws, w)}, y, attrsOf(c));
    ASSERT_EQ(col.size(), want.size());
    EXPECT_EQ(std::memcmp(col.data(), want.data(), col.size() * sizeof(float)),
              0);
  }
}

TEST(CudaHost, Col2imEqualsTheCpuBackendBitForBit) {
  compareWithIm2col();
  unsigned seed = 2200;
  for (const ConvCase &c : kConvs) {
    SCOPED_TRACE(c.name);
    cuda::ConvWindow win = windowOf(c);
    // One output channel per group: the CPU's window gradients are single
    // products w[k, r] * dy[b, k, s], as the column matrix given here.
    Shape ws = c.w, dyShape = outputShape(c);
    ws[0] = dyShape[1] = c.group;
    std::vector<float> w = randomFloats(numel(ws), seed++);
    std::vector<float> dy = randomFloats(numel(dyShape), seed++);
    int64_t kdim = numel(ws) / c.group, spatial = win.oh * win.ow;
    std::vector<float> col(c.x[0] * win.rows() * spatial);
    for (int64_t b = 0; b < c.x[0]; ++b)
      for (int64_t k = 0; k < c.group; ++k)
        for (int64_t r = 0; r < kdim; ++r)
          for (int64_t s = 0; s < spatial; ++s)
            col[((b * c.group + k) * kdim + r) * spatial + s] =
                w[k * kdim + r] * dy[(b * c.group + k) * spatial + s];
    std::vector<float> dx(numel(c.x), NAN);
    cuda::hostForEach(cuda::Col2imBody{win, col.data(), dx.data()}, numel(c.x));
    std::vector<float> want =
        cpu("conv_grad_input", {f32(dyShape, dy), f32(ws, w)}, c.x, attrsOf(c));
    ASSERT_EQ(dx.size(), want.size());
    EXPECT_EQ(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(float)),
              0);
  }
}

/// Runs `op` on the CPU and on the strict fake device: both succeed and
/// the outputs are within `tol` (relative to 1 + |value|).
void expectLikeTheCpu(const std::string &op, const std::vector<Value> &ins,
                      plan::DType dtype, const Shape &out,
                      const AttrList &attrs, double tol) {
  SCOPED_TRACE(op);
  Result cpu = runOp(op, ins, {{dtype, out}}, attrs);
  Result fake = runOp(op, ins, {{dtype, out}}, attrs, 2, kStrict);
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  auto floats = [&](const Value &v) {
    if (dtype == F32)
      return v.as<float>();
    std::vector<float> wide;
    for (uint16_t h : v.as<uint16_t>())
      wide.push_back(fsdprt::halfToFloat(h, FSDPRT_BF16));
    return wide;
  };
  std::vector<float> want = floats(cpu.outputs[0]);
  expectClose(floats(fake.outputs[0]), want, tol);
  // Every output element was written (the fake device's memory starts
  // as whatever the allocator gives).
  for (float v : floats(fake.outputs[0]))
    ASSERT_FALSE(std::isnan(v));
}

Value asBf16(const Value &v) {
  std::vector<uint16_t> h;
  for (float f : v.as<float>())
    h.push_back(fsdprt::floatToHalf(f, FSDPRT_BF16));
  return valueOf(plan::DType::BF16, v.shape, h);
}

TEST(CudaHost, ConvAndItsGradientsOnTheStrictFakeDeviceEqualTheCpu) {
  compareWithIm2col();
  unsigned seed = 2300;
  for (const ConvCase &c : kConvs) {
    SCOPED_TRACE(c.name);
    Shape y = outputShape(c);
    Value x = f32(c.x, randomFloats(numel(c.x), seed++));
    Value w = f32(c.w, randomFloats(numel(c.w), seed++));
    Value bias = f32({c.w[0]}, randomFloats(c.w[0], seed++));
    Value dy = f32(y, randomFloats(numel(y), seed++));
    AttrList attrs = attrsOf(c);
    expectLikeTheCpu("conv", {x, w}, F32, y, attrs, 1e-5);
    expectLikeTheCpu("conv", {x, w, bias}, F32, y, attrs, 1e-5);
    expectLikeTheCpu("conv_grad_input", {dy, w}, F32, c.x, attrs, 1e-5);
    expectLikeTheCpu("conv_grad_weight", {x, dy}, F32, c.w, attrs, 1e-5);
    // bf16: the fp32 kernels between casts, as on the CPU; the results
    // may differ by the rounding of one bf16 ulp.
    const auto BF16 = plan::DType::BF16;
    expectLikeTheCpu("conv", {asBf16(x), asBf16(w), asBf16(bias)}, BF16, y,
                     attrs, 1e-2);
    expectLikeTheCpu("conv_grad_input", {asBf16(dy), asBf16(w)}, BF16, c.x,
                     attrs, 1e-2);
    expectLikeTheCpu("conv_grad_weight", {asBf16(x), asBf16(dy)}, BF16, c.w,
                     attrs, 1e-2);
  }
}

/// More images than one im2col scratch (64 MiB) holds: 25 MiB of columns
/// an image, so chunks of 2, 2, 2 and 1 images, the weight gradient summed
/// over all of them.
TEST(CudaHost, ConvInChunksOfImagesEqualsTheCpu) {
  compareWithIm2col();
  ConvCase c = {"chunks", {7, 64, 64, 64}, {2, 64, 5, 5},
                {1, 1},   {2, 2, 2, 2},    {1, 1},
                1};
  Shape y = outputShape(c);
  Value x = f32(c.x, randomFloats(numel(c.x), 2400));
  Value w = f32(c.w, randomFloats(numel(c.w), 2401));
  Value dy = f32(y, randomFloats(numel(y), 2402));
  AttrList attrs = attrsOf(c);
  expectLikeTheCpu("conv", {x, w}, F32, y, attrs, 1e-5);
  expectLikeTheCpu("conv_grad_input", {dy, w}, F32, c.x, attrs, 1e-5);
  expectLikeTheCpu("conv_grad_weight", {x, dy}, F32, c.w, attrs, 1e-4);
}

TEST(CudaHost, ConvMismatchIsNamedAsOnTheCpu) {
  compareWithIm2col();
  // Channels that do not match the weights' groups: the CPU's message.
  Value x = f32({1, 4, 5, 5}, randomFloats(100, 1));
  Value w = f32({2, 3, 3, 3}, randomFloats(54, 2));
  Result cpu = runOp("conv", {x, w}, {{F32, {1, 2, 3, 3}}});
  Result fake = runOp("conv", {x, w}, {{F32, {1, 2, 3, 3}}}, {}, 2, kStrict);
  EXPECT_NE(cpu.error.find("channels do not match"), std::string::npos)
      << cpu.error;
  EXPECT_EQ(fake.error, cpu.error);
}

} // namespace
