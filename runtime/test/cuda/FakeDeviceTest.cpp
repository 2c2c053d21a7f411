//===- FakeDeviceTest.cpp - The backend's kernel table on the fake device -===//
//
// cuda-host: one-kernel plans run through the C API on "fake-cuda:strict"
// (the CUDA backend's host code, own kernels only: an op without one is
// refused) give the CPU backend's outputs: the comparisons, logic and
// where; reductions over interleaved axes and global_average_pool;
// pooling, its gradient and batch norm; concat, split, copy and pack;
// gather_grad, and its bad index reported as the CPU reports it; and
// bf16 through the fp32 kernels (widened), bit for bit, with a bad label
// in a widened cross-entropy reported too. On "fake-cuda:cudnn", bf16
// attention and attention_grad run through the backend's cuDNN path (keys
// transposed through the workspace, the graph's bindings) on the host
// model of cuDNN's graphs, and give the CPU's results; so do fp32 and bf16
// convolutions and their gradients, and fp32 batch norm with given
// statistics (FSDPRT_CUDNN=off: the own kernel, as the profile says).
// int64 arithmetic wraps and truncates
// as the CPU's does.
//
//===----------------------------------------------------------------------===//

#include "../SessionHarness.h"

#include "../../src/half.h"

#include <limits>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

const auto F32 = plan::DType::F32;
const auto BF16 = plan::DType::BF16;
const auto I64 = plan::DType::I64;
const auto BOOL = plan::DType::Bool;

constexpr const char *kStrict = "fake-cuda:strict";

using Outputs = std::vector<std::pair<plan::DType, Shape>>;

/// Runs `op` on the CPU and on the strict fake device: both succeed, and
/// the outputs' bytes are equal (`tol` 0) or their floats within `tol`.
void expectLikeTheCpu(const std::string &op, const std::vector<Value> &ins,
                      const Outputs &outs, const AttrList &attrs = {},
                      double tol = 0) {
  SCOPED_TRACE(op);
  Result cpu = runOp(op, ins, outs, attrs);
  Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (tol == 0 || outs[i].first != F32) {
      EXPECT_EQ(fake.outputs[i].bytes, cpu.outputs[i].bytes) << "output " << i;
      continue;
    }
    std::vector<float> want = cpu.outputs[i].as<float>();
    expectNear(fake.outputs[i].as<float>(),
               std::vector<double>(want.begin(), want.end()), tol);
  }
}

std::vector<uint8_t> randomBools(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t &b : v)
    b = gen() % 2;
  return v;
}

Value bf16(const Shape &shape, const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], FSDPRT_BF16);
  return valueOf(BF16, shape, h);
}

/// bf16 values of `v` as floats (what a bf16 tensor holds).
std::vector<float> bf16Floats(const Value &v) {
  std::vector<float> out(v.bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, &v.bytes[2 * i], 2);
    out[i] = fsdprt::halfToFloat(h, FSDPRT_BF16);
  }
  return out;
}

TEST(FakeDevice, AttentionThroughTheCudnnPath) {
  // [batch 2, heads 3, L, D] against S keys, with and without the causal
  // mask, L == S and L != S; in layout bshd ([2, L, 3, D], keys [2, S, 3,
  // D]: the graph binds them through strides) too.
  for (auto [l, s, kind, layout] :
       std::vector<std::tuple<int64_t, int64_t, std::string, std::string>>{
           {5, 5, "causal", "bhsd"},
           {4, 7, "none", "bhsd"},
           {6, 3, "causal", "bhsd"},
           {5, 5, "causal", "bshd"},
           {4, 7, "none", "bshd"}}) {
    SCOPED_TRACE(kind + " L " + std::to_string(l) + " S " + std::to_string(s) +
                 " " + layout);
    int64_t d = 8;
    bool bshd = layout == "bshd";
    Shape qs = bshd ? Shape{2, l, 3, d} : Shape{2, 3, l, d},
          kts = bshd ? Shape{2, s, 3, d} : Shape{2, 3, d, s},
          vs = bshd ? Shape{2, s, 3, d} : Shape{2, 3, s, d}, lses = {2, 3, l};
    Value q = bf16(qs, randomFloats(2 * 3 * l * d, 21));
    Value kt = bf16(kts, randomFloats(2 * 3 * d * s, 22));
    Value v = bf16(vs, randomFloats(2 * 3 * s * d, 23));
    AttrList attrs = {
        {"scale", 0.35f}, {"mask_kind", kind}, {"layout", layout}};
    Outputs fwdOuts = {{BF16, qs}, {F32, lses}};
    Result cpu = runOp("attention", {q, kt, v}, fwdOuts, attrs);
    Result fake =
        runOp("attention", {q, kt, v}, fwdOuts, attrs, 2, "fake-cuda:cudnn");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    std::vector<float> y = bf16Floats(cpu.outputs[0]);
    expectNear(bf16Floats(fake.outputs[0]), {y.begin(), y.end()}, 1e-2);
    std::vector<float> lse = cpu.outputs[1].as<float>();
    expectNear(fake.outputs[1].as<float>(), {lse.begin(), lse.end()}, 1e-5);

    Value dy = bf16(qs, randomFloats(2 * 3 * l * d, 24));
    std::vector<Value> gradIns = {q, kt, v, cpu.outputs[0], cpu.outputs[1], dy};
    Outputs gradOuts = {{BF16, qs}, {BF16, kts}, {BF16, vs}};
    Result cpuGrad = runOp("attention_grad", gradIns, gradOuts, attrs);
    Result fakeGrad = runOp("attention_grad", gradIns, gradOuts, attrs, 2,
                            "fake-cuda:cudnn");
    ASSERT_EQ(cpuGrad.error, "");
    ASSERT_EQ(fakeGrad.error, "");
    for (size_t i = 0; i < 3; ++i) {
      std::vector<float> want = bf16Floats(cpuGrad.outputs[i]);
      expectNear(bf16Floats(fakeGrad.outputs[i]), {want.begin(), want.end()},
                 2e-2);
    }
  }
}

TEST(FakeDevice, ConvolutionsThroughTheCudnnPath) {
  // 3x3, stride 2, padding 1 over [2, 3, 7, 6] into 4 channels; with a bias
  // (fp32: cuDNN, then the broadcast add), its gradients, and bf16.
  Shape xs = {2, 3, 7, 6}, ws = {4, 3, 3, 3}, ys = {2, 4, 4, 3};
  AttrList window = {{"strides", Shape{2, 2}},
                     {"pads", Shape{1, 1, 1, 1}},
                     {"kernel_shape", Shape{3, 3}}};
  std::vector<float> x = randomFloats(2 * 3 * 7 * 6, 31),
                     w = randomFloats(4 * 3 * 3 * 3, 32),
                     dy = randomFloats(2 * 4 * 4 * 3, 33);
  struct Case {
    std::string op;
    std::vector<Value> ins;
    Shape out;
  };
  std::vector<Case> cases = {
      {"conv", {f32(xs, x), f32(ws, w), f32({4}, randomFloats(4, 34))}, ys},
      {"conv", {f32(xs, x), f32(ws, w)}, ys},
      {"conv_grad_input", {f32(ys, dy), f32(ws, w)}, xs},
      {"conv_grad_weight", {f32(xs, x), f32(ys, dy)}, ws}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op + " with " + std::to_string(c.ins.size()) + " inputs");
    Result cpu = runOp(c.op, c.ins, {{F32, c.out}}, window);
    Result fake =
        runOp(c.op, c.ins, {{F32, c.out}}, window, 2, "fake-cuda:cudnn");
    ASSERT_EQ(cpu.error, "");
    ASSERT_EQ(fake.error, "");
    std::vector<float> want = cpu.outputs[0].as<float>();
    expectNear(fake.outputs[0].as<float>(), {want.begin(), want.end()}, 1e-5);
  }
  Result cpu = runOp("conv", {bf16(xs, x), bf16(ws, w)}, {{BF16, ys}}, window);
  Result fake = runOp("conv", {bf16(xs, x), bf16(ws, w)}, {{BF16, ys}}, window,
                      2, "fake-cuda:cudnn");
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  std::vector<float> want = bf16Floats(cpu.outputs[0]);
  expectNear(bf16Floats(fake.outputs[0]), {want.begin(), want.end()}, 1e-2);
}

/// Runs `op` on fake-cuda:cudnn under FSDPRT_PROFILE (and FSDPRT_CUDNN=off
/// when `cudnnOff`): the outputs, and what the backend said runs it.
Result runProfiled(const std::string &op, const std::vector<Value> &ins,
                   const Outputs &outs, const AttrList &attrs, bool cudnnOff,
                   std::string &said) {
  ::setenv("FSDPRT_PROFILE", "1", 1);
  if (cudnnOff)
    ::setenv("FSDPRT_CUDNN", "off", 1);
  testing::internal::CaptureStderr();
  Result r = runOp(op, ins, outs, attrs, 2, "fake-cuda:cudnn");
  said = testing::internal::GetCapturedStderr();
  ::unsetenv("FSDPRT_PROFILE");
  ::unsetenv("FSDPRT_CUDNN");
  return r;
}

TEST(FakeDevice, HeadSplitAttentionRunsOnTheCudnnGraph) {
  // Layout bshd goes to cuDNN as it is (no transposes around the graph),
  // forward and backward, and the graph's name says so.
  Shape qs = {2, 5, 3, 8}, lses = {2, 3, 5};
  Value q = bf16(qs, randomFloats(240, 51)),
        k = bf16(qs, randomFloats(240, 52)),
        v = bf16(qs, randomFloats(240, 53)),
        dy = bf16(qs, randomFloats(240, 54));
  AttrList attrs = {{"scale", 0.35f},
                    {"mask_kind", std::string("causal")},
                    {"layout", std::string("bshd")}};
  std::string said;
  Result fwd = runProfiled("attention", {q, k, v}, {{BF16, qs}, {F32, lses}},
                           attrs, false, said);
  ASSERT_EQ(fwd.error, "");
  EXPECT_NE(said.find("cuDNN, sdpa forward b2 h3 sq5 skv5 d8 causal bshd on "
                      "fake-cuda:cudnn's host model"),
            std::string::npos)
      << said;
  Result grad = runProfiled(
      "attention_grad", {q, k, v, fwd.outputs[0], fwd.outputs[1], dy},
      {{BF16, qs}, {BF16, qs}, {BF16, qs}}, attrs, false, said);
  ASSERT_EQ(grad.error, "");
  EXPECT_NE(said.find("cuDNN, sdpa backward b2 h3 sq5 skv5 d8 causal bshd on "
                      "fake-cuda:cudnn's host model"),
            std::string::npos)
      << said;
}

TEST(FakeDevice, BatchNormThroughTheCudnnPath) {
  // Given statistics over NCHW, [N, C, L] and BatchNorm1d's [N, C], epsilon
  // as given: cuDNN's inference graph (x as [N, C, inner, 1]) on its host
  // model gives the CPU's y; under FSDPRT_CUDNN=off the own kernel does.
  struct Case {
    Shape x;
    std::string graph;
  };
  std::vector<Case> cases = {{{2, 3, 4, 5}, "batchnorm inference [2,3,20,1]"},
                             {{3, 4, 7}, "batchnorm inference [3,4,7,1]"},
                             {{5, 6}, "batchnorm inference [5,6,1,1]"}};
  for (const Case &c : cases) {
    int64_t channels = c.x[1], numel = 1;
    for (int64_t d : c.x)
      numel *= d;
    std::vector<float> var = randomFloats(channels, 45);
    for (float &v : var)
      v = std::abs(v) + 0.25f; // a variance is positive
    std::vector<Value> ins = {f32(c.x, randomFloats(numel, 41)),
                              f32({channels}, randomFloats(channels, 42)),
                              f32({channels}, randomFloats(channels, 43)),
                              f32({channels}, randomFloats(channels, 44)),
                              f32({channels}, var)};
    AttrList attrs = {{"epsilon", 1e-3}};
    SCOPED_TRACE(c.graph);
    Result cpu = runOp("batch_norm", ins, {{F32, c.x}}, attrs);
    ASSERT_EQ(cpu.error, "");
    std::vector<float> want = cpu.outputs[0].as<float>();
    for (bool off : {false, true}) {
      std::string said;
      Result fake = runProfiled("batch_norm", ins, {{F32, c.x}}, attrs, off,
                                said);
      ASSERT_EQ(fake.error, "");
      expectNear(fake.outputs[0].as<float>(), {want.begin(), want.end()},
                 1e-5);
      // "fsdprt: kernel 0 (batch_norm at 'node_1'): ...", once.
      std::string runs =
          off ? "the backend's own kernel: cuDNN is turned off "
                "(FSDPRT_CUDNN=off)"
              : "cuDNN, " + c.graph + " on fake-cuda:cudnn's host model";
      std::string line = "(batch_norm at 'node_1'): " + runs + "\n";
      EXPECT_NE(said.find(line), std::string::npos) << said;
    }
  }
}

TEST(FakeDevice, TrainingBatchNormThroughTheCudnnPath) {
  // batch_norm_train and batch_norm_grad on cuDNN's training graphs (x as
  // [N, C, inner, 1], the factor 1 - momentum) on their host model: the
  // CPU's outputs, fp32 and bf16 x/y/dy/dx with fp32 statistics; under
  // FSDPRT_CUDNN=off the own kernels run.
  Shape xs = {2, 3, 9, 8}, cs = {3};
  std::vector<float> x = randomFloats(2 * 3 * 9 * 8, 61),
                     dy = randomFloats(2 * 3 * 9 * 8, 62);
  std::vector<Value> perChannel = {
      f32(cs, randomFloats(3, 63)), f32(cs, randomFloats(3, 64)),
      f32(cs, randomFloats(3, 65)), f32(cs, {0.5f, 1.5f, 2.0f})};
  AttrList attrs = {{"epsilon", 1e-3}, {"momentum", 0.8}};
  for (bool half : {false, true})
    for (bool off : {false, true}) {
      SCOPED_TRACE(std::string(half ? "bf16" : "fp32") +
                   (off ? ", FSDPRT_CUDNN=off" : ""));
      plan::DType type = half ? BF16 : F32;
      Value xv = half ? bf16(xs, x) : f32(xs, x),
            dyv = half ? bf16(xs, dy) : f32(xs, dy);
      std::vector<Value> ins = {xv};
      ins.insert(ins.end(), perChannel.begin(), perChannel.end());
      Outputs outs = {{type, xs}, {F32, cs}, {F32, cs}, {F32, cs}, {F32, cs}};
      Result cpu = runOp("batch_norm_train", ins, outs, attrs);
      ASSERT_EQ(cpu.error, "");
      std::string said;
      Result fake =
          runProfiled("batch_norm_train", ins, outs, attrs, off, said);
      ASSERT_EQ(fake.error, "");
      auto floats = [&](const Value &v, plan::DType t) {
        return t == BF16 ? bf16Floats(v) : v.as<float>();
      };
      for (size_t k = 0; k < outs.size(); ++k) {
        std::vector<float> want = floats(cpu.outputs[k], outs[k].first);
        expectNear(floats(fake.outputs[k], outs[k].first),
                   {want.begin(), want.end()}, half && k == 0 ? 1e-2 : 1e-5);
      }
      std::string runs =
          off ? "the backend's own kernel: cuDNN is turned off "
                "(FSDPRT_CUDNN=off)"
              : "cuDNN, batchnorm forward [2,3,72,1] on fake-cuda:cudnn's "
                "host model";
      EXPECT_NE(said.find("(batch_norm_train at 'node_1'): " + runs + "\n"),
                std::string::npos)
          << said;

      std::vector<Value> gradIns = {dyv, xv, perChannel[0], cpu.outputs[1],
                                    cpu.outputs[2]};
      Outputs gradOuts = {{type, xs}, {F32, cs}, {F32, cs}};
      Result cpuGrad = runOp("batch_norm_grad", gradIns, gradOuts, attrs);
      ASSERT_EQ(cpuGrad.error, "");
      Result fakeGrad =
          runProfiled("batch_norm_grad", gradIns, gradOuts, attrs, off, said);
      ASSERT_EQ(fakeGrad.error, "");
      for (size_t k = 0; k < gradOuts.size(); ++k) {
        std::vector<float> want = floats(cpuGrad.outputs[k], gradOuts[k].first);
        expectNear(floats(fakeGrad.outputs[k], gradOuts[k].first),
                   {want.begin(), want.end()}, half && k == 0 ? 1e-2 : 1e-5);
      }
      runs = off ? "the backend's own kernel: cuDNN is turned off "
                   "(FSDPRT_CUDNN=off)"
                 : "cuDNN, batchnorm backward [2,3,72,1] on "
                   "fake-cuda:cudnn's host model";
      EXPECT_NE(said.find("(batch_norm_grad at 'node_1'): " + runs + "\n"),
                std::string::npos)
          << said;
    }
}

TEST(FakeDevice, Int64ArithmeticWrapsAndTruncatesAsTheCpu) {
  // Overflow wraps, division truncates toward zero, x / 0 is 0 and
  // INT64_MIN / -1 wraps, broadcasting a row against a column.
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const int64_t hi = std::numeric_limits<int64_t>::max();
  Value a = i64({6, 1}, {7, -7, hi, lo, 0, 123456789012});
  Value b = i64({4}, {2, -1, 0, 3});
  for (const char *op : {"add", "sub", "mul", "div"})
    expectLikeTheCpu(op, {a, b}, {{I64, {6, 4}}});
  // num_batches_tracked += 1, as a training step counts it.
  expectLikeTheCpu("add", {i64({}, {5}), i64({}, {1})}, {{I64, {}}});
  for (const char *op : {"neg", "abs"})
    expectLikeTheCpu(op, {i64({5}, {3, -4, 0, lo, hi})}, {{I64, {5}}});
}

TEST(FakeDevice, CastsBetweenAnyTwoDtypesAsTheCpu) {
  // Values every dtype holds: fractions and negatives truncate toward zero
  // into integers, wrap into narrower ones (300 into u8 and i8), zero and
  // non-zero into bool; halves round to nearest-even.
  std::vector<float> values = {0.0f, 1.0f, -2.75f, 3.5f, 300.0f, -129.0f,
                               1e-3f, 65504.0f};
  const plan::DType all[] = {F32,
                             plan::DType::F64,
                             plan::DType::F16,
                             BF16,
                             I64,
                             plan::DType::I32,
                             plan::DType::I16,
                             plan::DType::I8,
                             plan::DType::U8,
                             BOOL};
  Shape shape = {int64_t(values.size())};
  for (plan::DType from : all) {
    // The values in `from`, made by the CPU's own cast.
    Result source = runOp("cast", {f32(shape, values)}, {{from, shape}});
    ASSERT_EQ(source.error, "");
    for (plan::DType to : all) {
      SCOPED_TRACE(std::to_string(int(from)) + " to " + std::to_string(int(to)));
      expectLikeTheCpu("cast", {source.outputs[0]}, {{to, shape}});
    }
  }
}

TEST(FakeDevice, ComparisonsLogicAndWhereBroadcast) {
  std::vector<float> a = randomFloats(6 * 5, 1), b = randomFloats(5, 2);
  b[1] = a[1]; // one equal pair
  for (const char *op : {"equal", "less", "greater"})
    expectLikeTheCpu(op, {f32({6, 5}, a), f32({5}, b)}, {{BOOL, {6, 5}}});
  std::vector<int64_t> ia = {1, -2, 3, 4, 5, 6}, ib = {4, -2};
  expectLikeTheCpu("less", {i64({3, 2}, ia), i64({2}, ib)}, {{BOOL, {3, 2}}});
  Value p = boolean({4, 1, 3}, randomBools(12, 3));
  Value q = boolean({5, 1}, randomBools(5, 4));
  for (const char *op : {"and", "or"})
    expectLikeTheCpu(op, {p, q}, {{BOOL, {4, 5, 3}}});
  expectLikeTheCpu("not", {p}, {{BOOL, {4, 1, 3}}});
  expectLikeTheCpu(
      "where",
      {q, f32({5, 7}, randomFloats(35, 5)), f32({7}, randomFloats(7, 6))},
      {{F32, {5, 7}}});
  expectLikeTheCpu(
      "where", {boolean({2, 1}, {1, 0}), i64({3}, {7, 8, 9}), i64({1}, {-1})},
      {{I64, {2, 3}}});
}

TEST(FakeDevice, ReductionsOverAnyAxesAndGlobalAveragePool) {
  Value x = f32({3, 4, 5, 6}, randomFloats(360, 7));
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    expectLikeTheCpu(op, {x}, {{F32, {3, 1, 5, 1}}},
                     {{"axes", Shape{1, 3}}, {"keepdims", int64_t(1)}}, 1e-6);
    expectLikeTheCpu(op, {x}, {{F32, {4, 6}}},
                     {{"axes", Shape{0, 2}}, {"keepdims", int64_t(0)}}, 1e-6);
    expectLikeTheCpu(op, {x}, {{F32, {}}}, {{"keepdims", int64_t(0)}}, 1e-6);
  }
  expectLikeTheCpu("global_average_pool", {x}, {{F32, {3, 4, 1, 1}}}, {}, 1e-6);
}

TEST(FakeDevice, PoolingItsGradientAndBatchNorm) {
  Value x = f32({2, 3, 9, 8}, randomFloats(2 * 3 * 9 * 8, 8));
  AttrList window = {{"kernel_shape", Shape{3, 3}},
                     {"strides", Shape{2, 2}},
                     {"pads", Shape{1, 1, 1, 0}}};
  Shape pooled = {2, 3, 5, 4};
  expectLikeTheCpu("max_pool", {x}, {{F32, pooled}}, window);
  AttrList average = window;
  average.push_back({"count_include_pad", int64_t(1)});
  expectLikeTheCpu("average_pool", {x}, {{F32, pooled}}, average, 1e-6);
  Value g = f32(pooled, randomFloats(2 * 3 * 5 * 4, 9));
  for (const char *mode : {"max", "average"}) {
    AttrList grad = average;
    grad.push_back({"mode", std::string(mode)});
    expectLikeTheCpu("pool_grad", {x, g}, {{F32, {2, 3, 9, 8}}}, grad, 1e-6);
  }
  std::vector<float> var = randomFloats(3, 10);
  for (float &v : var)
    v = std::fabs(v);
  expectLikeTheCpu("batch_norm",
                   {x, f32({3}, randomFloats(3, 11)),
                    f32({3}, randomFloats(3, 12)),
                    f32({3}, randomFloats(3, 13)), f32({3}, var)},
                   {{F32, {2, 3, 9, 8}}}, {}, 1e-6);
}

TEST(FakeDevice, ConcatSplitCopyAndPack) {
  Value a = f32({2, 3, 4}, randomFloats(24, 14));
  Value b = f32({2, 1, 4}, randomFloats(8, 15));
  expectLikeTheCpu("concat", {a, b}, {{F32, {2, 4, 4}}},
                   {{"axis", int64_t(1)}});
  expectLikeTheCpu("split", {a}, {{F32, {2, 3, 1}}, {F32, {2, 3, 3}}},
                   {{"axis", int64_t(2)}});
  expectLikeTheCpu("copy", {bf16({5, 3}, randomFloats(15, 16))},
                   {{BF16, {5, 3}}});
  expectLikeTheCpu("pack", {a, b}, {{F32, {40}}}, {{"offsets", Shape{2, 30}}});
}

TEST(FakeDevice, GatherGradSumsRepeatsAndReportsABadIndex) {
  Value g = f32({2, 6, 3}, randomFloats(36, 17));
  Value idx = i64({6}, {4, 0, -1, 4, 2, 4});
  expectLikeTheCpu("gather_grad", {g, idx}, {{F32, {2, 5, 3}}},
                   {{"axis", int64_t(1)}});
  Value bad = i64({6}, {4, 0, 9, 4, 2, 4});
  Result cpu = runOp("gather_grad", {g, bad}, {{F32, {2, 5, 3}}},
                     {{"axis", int64_t(1)}});
  Result fake = runOp("gather_grad", {g, bad}, {{F32, {2, 5, 3}}},
                      {{"axis", int64_t(1)}}, 2, kStrict);
  EXPECT_NE(cpu.error.find("index 9 is out of range for a dimension of size 5"),
            std::string::npos)
      << cpu.error;
  EXPECT_EQ(fake.error, cpu.error);
}

// The training batch norm and its gradient through the backend: fp32, and
// bf16 x, y, dy and dx (widened) with fp32 statistics, scale and bias.
TEST(FakeDevice, TrainingBatchNormAndItsGradientLikeTheCpu) {
  Shape xs = {2, 3, 9, 8}, cs = {3};
  std::vector<float> x = randomFloats(2 * 3 * 9 * 8, 51),
                     dy = randomFloats(2 * 3 * 9 * 8, 52);
  std::vector<Value> perChannel = {
      f32(cs, randomFloats(3, 53)), f32(cs, randomFloats(3, 54)),
      f32(cs, randomFloats(3, 55)), f32(cs, {0.5f, 1.5f, 2.0f})};
  AttrList attrs = {{"epsilon", 1e-3}, {"momentum", 0.8}};
  for (bool half : {false, true}) {
    SCOPED_TRACE(half ? "bf16" : "fp32");
    plan::DType type = half ? BF16 : F32;
    Value xv = half ? bf16(xs, x) : f32(xs, x),
          dyv = half ? bf16(xs, dy) : f32(xs, dy);
    std::vector<Value> ins = {xv};
    ins.insert(ins.end(), perChannel.begin(), perChannel.end());
    expectLikeTheCpu("batch_norm_train", ins,
                     {{type, xs}, {F32, cs}, {F32, cs}, {F32, cs}, {F32, cs}},
                     attrs);
    Result fwd = runOp("batch_norm_train", ins,
                       {{type, xs}, {F32, cs}, {F32, cs}, {F32, cs}, {F32, cs}},
                       attrs);
    ASSERT_EQ(fwd.error, "");
    expectLikeTheCpu(
        "batch_norm_grad",
        {dyv, xv, perChannel[0], fwd.outputs[1], fwd.outputs[2]},
        {{type, xs}, {F32, cs}, {F32, cs}}, attrs);
  }
}

TEST(FakeDevice, HalfPrecisionRunsWidenedLikeTheCpu) {
  Value x = bf16({4, 33}, randomFloats(132, 18));
  Value y = bf16({33}, randomFloats(33, 19));
  expectLikeTheCpu("softmax", {x}, {{BF16, {4, 33}}}, {{"axis", int64_t(1)}});
  expectLikeTheCpu("mul", {x, y}, {{BF16, {4, 33}}});
  expectLikeTheCpu("reduce_sum", {x}, {{BF16, {4, 1}}}, {{"axes", Shape{1}}});
  expectLikeTheCpu("less", {x, y}, {{BOOL, {4, 33}}});
  Value idx = i64({4}, {0, 2, 2, 1});
  expectLikeTheCpu("gather_grad", {x, idx}, {{BF16, {3, 33}}});
  // A label out of range in a widened cross-entropy: reported from the
  // error slot it was given when prepared.
  Value scores = bf16({4, 6}, randomFloats(24, 20));
  expectLikeTheCpu("softmax_cross_entropy", {scores, i64({4}, {0, 5, 2, 1})},
                   {{BF16, {}}});
  Value labels = i64({4}, {0, 5, 7, 1});
  Result cpu = runOp("softmax_cross_entropy", {scores, labels}, {{BF16, {}}});
  Result fake = runOp("softmax_cross_entropy", {scores, labels}, {{BF16, {}}},
                      {}, 2, kStrict);
  EXPECT_NE(cpu.error.find("label 7 is outside [0, 6)"), std::string::npos)
      << cpu.error;
  EXPECT_EQ(fake.error, cpu.error);
}

} // namespace
