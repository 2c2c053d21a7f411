//===- HostKernelTest.cpp - CUDA kernel bodies against the CPU backend ----===//
//
// The `cuda-host` tests: every kernel body of runtime/backends/cuda/kernels
// runs on the host (host_launch.h, the device's index space on CPU
// threads; row bodies in groups of 1, 4 and 32 lanes that meet at barriers
// as a block's threads do) and is compared with the CPU backend's kernel
// for the same op, run through the C API, on random inputs: sizes of 1,
// sizes that are not multiples of a block (256), rows longer than a block
// many times over, broadcasts. Tolerances: the bodies accumulate in fp32
// where the CPU backend accumulates in double.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/hazards.h"
#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/data.h"
#include "../../backends/cuda/kernels/elementwise.h"
#include "../../backends/cuda/kernels/grads.h"
#include "../../backends/cuda/kernels/losses.h"
#include "../../backends/cuda/kernels/rows.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

template <cuda::Unary Op> void checkUnary(const AttrList &attrs = {}) {
  SCOPED_TRACE(cuda::unaryName(Op));
  unsigned seed = 11 + static_cast<unsigned>(Op);
  for (int64_t n : kSizes) {
    std::vector<float> x = randomFloats(n, seed++);
    if (Op == cuda::Unary::Log || Op == cuda::Unary::Sqrt)
      for (float &v : x)
        v = std::fabs(v) + 1e-3f;
    std::vector<float> y(n);
    cuda::hostForEach(cuda::UnaryBody<Op>{x.data(), y.data()}, n);
    expectClose(y, cpu(cuda::unaryName(Op), {f32({n}, x)}, {n}, attrs), 2e-6);
  }
}

TEST(CudaHost, UnaryBodiesEqualTheCpuBackend) {
  checkUnary<cuda::Unary::Exp>();
  checkUnary<cuda::Unary::Log>();
  checkUnary<cuda::Unary::Sqrt>();
  checkUnary<cuda::Unary::Reciprocal>();
  checkUnary<cuda::Unary::Erf>();
  checkUnary<cuda::Unary::Tanh>();
  checkUnary<cuda::Unary::Sigmoid>();
  checkUnary<cuda::Unary::Relu>();
  checkUnary<cuda::Unary::Silu>();
  checkUnary<cuda::Unary::Gelu>();
  checkUnary<cuda::Unary::GeluTanh>({{"approximate", std::string("tanh")}});
  checkUnary<cuda::Unary::Neg>();
  checkUnary<cuda::Unary::Abs>();
}

template <cuda::Binary Op> void checkBinary() {
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{1}, {1}, {1}},
      {{257}, {257}, {257}},
      {{64, 1025}, {1025}, {64, 1025}},
      {{}, {3, 5}, {3, 5}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{2, 3, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}},
      {{1, 1, 1, 1, 1, 1, 1, 1, 1, 7}, {2, 1, 3, 1, 2, 1, 2, 1, 2, 1},
       {2, 1, 3, 1, 2, 1, 2, 1, 2, 7}}, // 10 dims, 6 after collapsing
  };
  SCOPED_TRACE(cuda::binaryName(Op));
  unsigned seed = 100 + static_cast<unsigned>(Op);
  for (const Case &c : cases) {
    std::vector<float> a = randomFloats(numel(c.a), seed++),
                       b = randomFloats(numel(c.b), seed++);
    if (Op == cuda::Binary::Pow) {
      for (float &v : a)
        v = std::fabs(v) + 0.5f;
      b[0] = 2.0f; // the exact square
    }
    std::vector<float> y(numel(c.out));
    cuda::Broadcast plan = cuda::planBroadcast(c.out, {c.a, c.b});
    EXPECT_LE(plan.rank, static_cast<int>(c.out.size()));
    cuda::hostForEach(cuda::BinaryBody<Op>{plan, a.data(), b.data(), y.data()},
                      numel(c.out));
    expectClose(y, cpu(cuda::binaryName(Op), {f32(c.a, a), f32(c.b, b)}, c.out),
                1e-6);
  }
}

TEST(CudaHost, BroadcastingBinaryBodiesEqualTheCpuBackend) {
  checkBinary<cuda::Binary::Add>();
  checkBinary<cuda::Binary::Sub>();
  checkBinary<cuda::Binary::Mul>();
  checkBinary<cuda::Binary::Div>();
  checkBinary<cuda::Binary::Pow>();
}

TEST(CudaHost, BroadcastPlansCollapseAndRefuse) {
  // Same shapes collapse to one dim; a row vector to two.
  cuda::Broadcast p = cuda::planBroadcast({4, 5, 6}, {{4, 5, 6}, {4, 5, 6}});
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.shape[0], 120);
  p = cuda::planBroadcast({4, 5, 6}, {{4, 5, 6}, {6}});
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.strides[1][0], 0);
  EXPECT_THROW(cuda::planBroadcast({4, 5}, {{4, 5}, {3}}), std::invalid_argument);
  EXPECT_THROW(cuda::planBroadcast({4}, {{2, 4}}), std::invalid_argument);
}

TEST(CudaHost, BroadcastOffsetsInThirtyTwoBitsEqualTheWideOnes) {
  // Interleaved broadcasts of 3 operands, a transposed read: every
  // element's offsets by 32-bit division equal those by 64-bit division.
  std::vector<cuda::Broadcast> plans = {
      cuda::planBroadcast({3, 1, 7, 5, 2},
                          {{3, 1, 1, 5, 1}, {7, 1, 2}, {3, 1, 7, 5, 2}}),
      cuda::planStrided({6, 4, 9}, {1, 54, 6})};
  for (cuda::Broadcast narrow : plans) {
    ASSERT_TRUE(narrow.narrow);
    ASSERT_GT(narrow.rank, 1);
    cuda::Broadcast wide = narrow;
    wide.narrow = false;
    int64_t n = 1;
    for (int d = 0; d < narrow.rank; ++d)
      n *= narrow.shape[d];
    for (int k = 0; k < 3; ++k)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(narrow.offset(k, i), wide.offset(k, i))
            << "operand " << k << " element " << i;
  }
  // 2^32 elements or more: 64-bit; an empty output is either.
  EXPECT_FALSE(
      cuda::planBroadcast({65536, 2, 32768}, {{65536, 1, 32768}}).narrow);
  EXPECT_TRUE(
      cuda::planBroadcast({65535, 2, 32768}, {{65535, 1, 32768}}).narrow);
  EXPECT_TRUE(cuda::planBroadcast({0, 2, 3}, {{0, 1, 3}}).narrow);
}

TEST(CudaHost, SoftmaxRowsEqualTheCpuBackendInAnyGroup) {
  struct Case {
    Shape x;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{1, 1}, 1}, {{3, 257}, 1}, {{2, 100003}, 1}, {{4, 33, 5}, 1}, {{6, 7}, 0}};
  unsigned seed = 300;
  for (bool log : {false, true})
    for (const Case &c : cases)
      for (int lanes : {1, 4, 32}) {
        SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " lanes " +
                     std::to_string(lanes) + " n " +
                     std::to_string(c.x[c.axis]));
        std::vector<float> x = randomFloats(numel(c.x), seed++);
        for (float &v : x)
          v *= 8; // large logits: the max shift matters
        int64_t n = c.x[c.axis], inner = 1, outer = 1;
        for (size_t d = 0; d < c.x.size(); ++d)
          (static_cast<int64_t>(d) < c.axis ? outer : d > size_t(c.axis) ? inner
                                                                         : n) *=
              d == size_t(c.axis) ? 1 : c.x[d];
        std::vector<float> y(x.size());
        if (log)
          cuda::hostForEachRow(cuda::SoftmaxBody<true>{x.data(), y.data(), n, inner},
                               outer * inner, lanes);
        else
          cuda::hostForEachRow(cuda::SoftmaxBody<false>{x.data(), y.data(), n, inner},
                               outer * inner, lanes);
        expectClose(y, cpu(log ? "log_softmax" : "softmax", {f32(c.x, x)}, c.x,
                           {{"axis", c.axis}}),
                    n > 10000 ? 2e-5 : 2e-6);
      }
}

TEST(CudaHost, SumsAndMeansEqualTheCpuBackendInAnyGroup) {
  struct Case {
    Shape x;
    std::vector<int64_t> axes;
    int64_t outer, n, inner;
  };
  const std::vector<Case> cases = {{{4, 300, 5}, {1}, 4, 300, 5},
                                   {{4, 300, 5}, {2}, 1200, 5, 1},
                                   {{4, 300, 5}, {0}, 1, 4, 1500},
                                   {{4, 300, 5}, {1, 2}, 4, 1500, 1},
                                   {{2, 100003}, {1}, 2, 100003, 1},
                                   {{1}, {0}, 1, 1, 1}};
  unsigned seed = 1100;
  for (bool mean : {false, true})
    for (const Case &c : cases)
      for (int lanes : {1, 4, 32}) {
        SCOPED_TRACE(std::string(mean ? "reduce_mean" : "reduce_sum") + " n " +
                     std::to_string(c.n) + " lanes " + std::to_string(lanes));
        std::vector<float> x = randomFloats(numel(c.x), seed++);
        std::vector<float> y(c.outer * c.inner);
        if (mean)
          cuda::hostForEachRow(cuda::SumRows<true>{x.data(), y.data(), c.n, c.inner},
                               c.outer * c.inner, lanes);
        else
          cuda::hostForEachRow(cuda::SumRows<false>{x.data(), y.data(), c.n, c.inner},
                               c.outer * c.inner, lanes);
        Shape out;
        for (size_t d = 0; d < c.x.size(); ++d)
          if (std::find(c.axes.begin(), c.axes.end(), int64_t(d)) == c.axes.end())
            out.push_back(c.x[d]);
        expectClose(y,
                    cpu(mean ? "reduce_mean" : "reduce_sum", {f32(c.x, x)}, out,
                        {{"axes", c.axes}, {"keepdims", int64_t(0)}}),
                    c.n > 10000 ? 2e-4 : 2e-5);
      }
}

TEST(CudaHost, NormRowsEqualTheCpuBackendInAnyGroup) {
  unsigned seed = 500;
  for (bool rms : {false, true})
    for (int64_t n : {1, 255, 4099})
      for (bool affine : {true, false})
        for (int lanes : {1, 4, 32}) {
          if (!rms && !affine)
            continue; // layer_norm takes a scale
          SCOPED_TRACE(std::string(rms ? "rms_norm" : "layer_norm") + " n " +
                       std::to_string(n) + " lanes " + std::to_string(lanes));
          const int64_t rows = 5;
          std::vector<float> x = randomFloats(rows * n, seed++),
                             s = randomFloats(n, seed++),
                             b = randomFloats(n, seed++);
          for (float &v : x)
            v = v * 3 + 2; // a mean away from 0
          std::vector<float> y(x.size());
          const float *scale = affine ? s.data() : nullptr;
          const float *bias = affine && !rms ? b.data() : nullptr;
          float eps = rms ? 1e-6f : 1e-5f;
          std::vector<Value> ins = {f32({rows, n}, x)};
          if (affine)
            ins.push_back(f32({n}, s));
          if (bias)
            ins.push_back(f32({n}, b));
          std::vector<float> want;
          if (rms) {
            cuda::hostForEachRow(
                cuda::NormBody<true>{x.data(), scale, bias, y.data(), n, eps},
                rows, lanes);
            want = cpu("rms_norm", ins, {rows, n});
          } else {
            cuda::hostForEachRow(
                cuda::NormBody<false>{x.data(), scale, bias, y.data(), n, eps},
                rows, lanes);
            want = cpu("layer_norm", ins, {rows, n}, {{"axis", int64_t(1)}});
          }
          expectClose(y, want, n == 1 ? 1e-3 : 2e-5);
        }
}

TEST(CudaHost, ActivationGradEqualsTheCpuBackend) {
  unsigned seed = 700;
  const std::pair<const char *, cuda::ActivationGrad> kinds[] = {
      {"gelu", cuda::ActivationGrad::Gelu},
      {"gelu_tanh", cuda::ActivationGrad::GeluTanh},
      {"silu", cuda::ActivationGrad::Silu}};
  for (const auto &[name, kind] : kinds)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(name) + " n " + std::to_string(n));
      std::vector<float> dy = randomFloats(n, seed++), x = randomFloats(n, seed++);
      for (float &v : x)
        v *= 3;
      std::vector<float> dx(n);
      cuda::hostForEach(
          cuda::ActivationGradBody{dy.data(), x.data(), dx.data(), kind}, n);
      expectClose(dx,
                  cpu("activation_grad", {f32({n}, dy), f32({n}, x)}, {n},
                      {{"activation", std::string(name)}}),
                  1e-5); // erf's and exp's last bits (SLEEF's or libm's)
    }
}

TEST(CudaHost, NormGradEqualsTheCpuBackendInAnyGroup) {
  unsigned seed = 800;
  for (bool rms : {false, true})
    for (int64_t n : {1, 255, 4099})
      for (bool scaled : {true, false})
        for (int lanes : {1, 4, 32}) {
          SCOPED_TRACE(std::string(rms ? "rms" : "layer") + " n " +
                       std::to_string(n) + " scaled " +
                       std::to_string(scaled) + " lanes " +
                       std::to_string(lanes));
          // The column sums over many rows: 4 whole chunks and a part.
          const int64_t rows = 4 * cuda::kNormGradChunkRows + 44;
          std::vector<float> dy = randomFloats(rows * n, seed++),
                             x = randomFloats(rows * n, seed++),
                             s = randomFloats(n, seed++);
          for (float &v : x)
            v = v * 3 + 2;
          std::vector<float> dx(x.size()), ds(n), db(n),
              scratch(cuda::normGradScratchFloats(rows, n));
          const float *scale = scaled ? s.data() : nullptr;
          cuda::HostLauncher launch{lanes};
          cuda::normGrad(launch,
                         {dy.data(), x.data(), scale, dx.data(), ds.data(),
                          db.data(), scratch.data(), rows, n, 1e-5f, rms});
          std::vector<Value> ins = {f32({rows, n}, dy), f32({rows, n}, x)};
          if (scaled)
            ins.push_back(f32({n}, s));
          Result want = runOp(rms ? "rms_norm_grad" : "layer_norm_grad", ins,
                              {{F32, {rows, n}}, {F32, {n}}, {F32, {n}}},
                              {{"axis", int64_t(1)}, {"epsilon", 1e-5}});
          ASSERT_EQ(want.error, "");
          // n == 1: a layer norm's dx is rounding noise around 0.
          expectClose(dx, want.outputs[0].as<float>(), n == 1 ? 1e-2 : 1e-4);
          expectClose(ds, want.outputs[1].as<float>(), 1e-4);
          expectClose(db, want.outputs[2].as<float>(), 1e-4);
        }
}

TEST(CudaHost, GatherEqualsTheCpuBackendAndRecordsBadIndices) {
  struct Case {
    Shape data, indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{64, 32}, {4, 16}, 0},   // an embedding
                                   {{3, 257, 5}, {7}, 1},    // an inner axis
                                   {{1}, {1}, 0},            // size 1
                                   {{2, 9}, {3, 2}, 1}};
  unsigned seed = 900;
  for (const Case &c : cases)
    for (bool i32 : {false, true}) {
      SCOPED_TRACE(std::to_string(c.data.size()) + "-D axis " +
                   std::to_string(c.axis) + (i32 ? " int32" : " int64"));
      int64_t dim = c.data[c.axis], outer = 1, inner = 1;
      for (int64_t d = 0; d < static_cast<int64_t>(c.data.size()); ++d)
        (d < c.axis ? outer : inner) *= d == c.axis ? 1 : c.data[d];
      std::mt19937 gen(seed++);
      std::vector<int64_t> idx(numel(c.indices));
      for (int64_t &v : idx) // negative ones count from the end
        v = static_cast<int64_t>(gen() % (2 * dim)) - dim;
      std::vector<int32_t> idx32(idx.begin(), idx.end());
      std::vector<float> data = randomFloats(numel(c.data), seed++);
      Shape out(c.data.begin(), c.data.begin() + c.axis);
      out.insert(out.end(), c.indices.begin(), c.indices.end());
      out.insert(out.end(), c.data.begin() + c.axis + 1, c.data.end());
      std::vector<float> y(numel(out));
      cuda::ErrorSlot error{0, 0};
      auto *d = reinterpret_cast<const uint32_t *>(data.data());
      auto *py = reinterpret_cast<uint32_t *>(y.data());
      int64_t count = numel(c.indices);
      if (i32)
        cuda::hostForEach(cuda::GatherBody<uint32_t, int32_t>{d, idx32.data(), py, dim,
                                                              count, inner, &error},
                          numel(out));
      else
        cuda::hostForEach(cuda::GatherBody<uint32_t, int64_t>{d, idx.data(), py, dim,
                                                              count, inner, &error},
                          numel(out));
      EXPECT_EQ(error.code, 0);
      Value indices = i32 ? fsdprt::test::i32(c.indices, idx32) : i64(c.indices, idx);
      expectClose(y, cpu("gather", {f32(c.data, data), indices}, out, {{"axis", c.axis}}),
                  0);
    }
  // An index outside [-dim, dim): recorded, as the CPU backend refuses it.
  std::vector<float> data = randomFloats(8 * 4, 1), y(3 * 4);
  std::vector<int64_t> idx = {1, 8, -2};
  cuda::ErrorSlot error{0, 0};
  cuda::hostForEach(
      cuda::GatherBody<uint32_t, int64_t>{reinterpret_cast<const uint32_t *>(data.data()),
                                          idx.data(), reinterpret_cast<uint32_t *>(y.data()),
                                          8, 3, 4, &error},
      12);
  EXPECT_EQ(error.code, cuda::kBadIndex);
  EXPECT_EQ(error.detail, 8);
  Result r = runOp("gather", {f32({8, 4}, data), i64({3}, idx)}, {{F32, {3, 4}}},
                   {{"axis", int64_t(0)}});
  EXPECT_NE(r.error.find("index 8 is out of range for a dimension of size 8"),
            std::string::npos)
      << r.error;
}

TEST(CudaHost, CastsToAndFromHalfPrecisionEqualTheCpuBackendBitForBit) {
  std::vector<float> x = randomFloats(5000, 41);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] *= std::pow(10.0f, static_cast<float>(static_cast<int>(i % 17) - 8));
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f,
                            65520.0f, 1e-8f, 6e-8f, 1.0f + 1.0f / 256};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  int64_t n = static_cast<int64_t>(x.size());
  for (plan::DType half : {plan::DType::BF16, plan::DType::F16}) {
    fsdprt_dtype_t dtype = half == plan::DType::BF16 ? FSDPRT_BF16 : FSDPRT_F16;
    SCOPED_TRACE(dtype == FSDPRT_BF16 ? "bf16" : "f16");
    std::vector<uint16_t> h(n);
    cuda::hostForEach(cuda::CastToHalf{x.data(), h.data(), dtype}, n);
    Result r = runOp("cast", {f32({n}, x)}, {{half, {n}}});
    ASSERT_EQ(r.error, "");
    EXPECT_EQ(h, r.outputs[0].as<uint16_t>());
    std::vector<float> back(n);
    cuda::hostForEach(cuda::CastFromHalf{h.data(), back.data(), dtype}, n);
    r = runOp("cast", {valueOf(half, {n}, h)}, {{F32, {n}}});
    ASSERT_EQ(r.error, "");
    std::vector<float> want = r.outputs[0].as<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(std::memcmp(&back[i], &want[i], 4) == 0 ||
                  (std::isnan(back[i]) && std::isnan(want[i])))
          << "at " << i;
  }
}

/// Runs StridedReadBody over `out` reading `x` at `strides` from `offset`.
std::vector<float> stridedRead(const std::vector<float> &x, const Shape &out,
                               const std::vector<int64_t> &strides,
                               int64_t offset) {
  std::vector<float> y(numel(out));
  cuda::Broadcast plan = cuda::planStrided(out, strides);
  cuda::hostForEach(
      cuda::StridedReadBody<uint32_t>{plan,
                                      reinterpret_cast<const uint32_t *>(x.data()),
                                      reinterpret_cast<uint32_t *>(y.data()), offset},
      numel(out));
  return y;
}

TEST(CudaHost, TransposeSliceAndExpandEqualTheCpuBackend) {
  // transpose [2, 3, 4, 5] by (2, 0, 3, 1): strides of x permuted.
  std::vector<float> x = randomFloats(2 * 3 * 4 * 5, 31);
  expectClose(stridedRead(x, {4, 2, 5, 3}, {5, 60, 1, 20}, 0),
              cpu("transpose", {f32({2, 3, 4, 5}, x)}, {4, 2, 5, 3},
                  {{"perm", std::vector<int64_t>{2, 0, 3, 1}}}),
              0);
  // slice [6, 300] rows 5, 3, 1 (step -2), columns 7.. step 3.
  std::vector<float> s = randomFloats(6 * 300, 32);
  expectClose(stridedRead(s, {3, 98}, {-2 * 300, 3}, 5 * 300 + 7),
              cpu("slice", {f32({6, 300}, s)}, {3, 98},
                  {{"starts", std::vector<int64_t>{5, 7}},
                   {"steps", std::vector<int64_t>{-2, 3}}}),
              0);
  // expand [3, 1] to [2, 3, 257]: stretched dims read with stride 0.
  std::vector<float> e = randomFloats(3, 33);
  expectClose(stridedRead(e, {2, 3, 257}, {0, 1, 0}, 0),
              cpu("expand", {f32({3, 1}, e)}, {2, 3, 257}), 0);
  // A contiguous read collapses to one dim.
  EXPECT_EQ(cuda::planStrided({4, 5, 6}, {30, 6, 1}).rank, 1);
  EXPECT_THROW(cuda::planStrided(Shape(9, 2), {1, 2, 4, 8, 16, 32, 64, 128, 256}),
               std::invalid_argument);
}

TEST(CudaHost, TheHazardCheckerFindsBytesTouchedWithoutAnEvent) {
  cuda::HazardChecker c;
  int compute = c.addStream(), comm = c.addStream();
  cuda::Range a{1000, 2000}, b{1500, 2500}, other{3000, 4000};
  // The same stream is ordered; reads of shared bytes never conflict.
  EXPECT_EQ(c.run(compute, {"matmul", {a}, {other}}), "");
  EXPECT_EQ(c.run(compute, {"relu", {other}, {other}}), "");
  EXPECT_EQ(c.run(comm, {"all_gather", {a}, {}}), "");
  // A write on one stream of bytes the other read, no event between.
  std::string hazard = c.run(comm, {"reduce_scatter", {}, {other}});
  EXPECT_NE(hazard.find("'reduce_scatter' on stream 1 writes 1000 bytes"),
            std::string::npos)
      << hazard;
  EXPECT_NE(hazard.find("that 'matmul' on stream 0 wrote"), std::string::npos)
      << hazard;
  // With the compute stream's event waited for, the same write is ordered.
  c.wait(comm, c.record(compute));
  EXPECT_EQ(c.run(comm, {"reduce_scatter", {}, {other}}), "");
  // The compute stream reading what comm writes, without waiting: a hazard
  // (an overlapping range, partly).
  EXPECT_EQ(c.run(comm, {"all_gather", {}, {b}}), "");
  hazard = c.run(compute, {"gelu", {a}, {}});
  EXPECT_NE(hazard.find("reads 500 bytes"), std::string::npos) << hazard;
  c.wait(compute, c.record(comm));
  EXPECT_EQ(c.run(compute, {"gelu", {a}, {}}), "");
  // A device synchronisation orders everything and forgets it.
  EXPECT_EQ(c.run(comm, {"all_reduce", {}, {other}}), "");
  c.synchronize();
  EXPECT_EQ(c.remembered(), 0u);
  EXPECT_EQ(c.run(compute, {"add", {other}, {other}}), "");
}

/// The cross-entropy kernels' sequences (kernels/losses.h) with host
/// launchers.
struct HostCrossEntropy {
  cuda::CrossEntropyInputs in;
  int64_t positions;
  int lanes;

  void loss(bool none, bool mean, float *y) const {
    std::vector<float> scratch(2 * positions + 1);
    cuda::HostLauncher launch{lanes};
    cuda::crossEntropy(launch, in, positions, none, mean, scratch.data(), y);
  }
  void grad(const float *g, bool none, bool mean, float *y) const {
    std::vector<float> scratch(positions + 1);
    cuda::HostLauncher launch{lanes};
    cuda::crossEntropyGrad(launch, in, positions, g, none, mean,
                           scratch.data(), y);
  }
};

TEST(CudaHost, CrossEntropyAndItsGradientEqualTheCpuBackend) {
  struct Case {
    Shape scores;
    bool weights, ignore;
  };
  const std::vector<Case> cases = {{{1, 1}, false, false},
                                   {{6, 5}, false, true},
                                   {{300, 257}, true, true},
                                   {{3, 7, 4}, true, false}, // [N, C, d]
                                   {{2, 50000}, false, false}};
  unsigned seed = 700;
  for (const Case &c : cases)
    for (const std::string reduction : {"mean", "sum", "none"})
      for (int lanes : {1, 4, 32}) {
        SCOPED_TRACE(reduction + " C " + std::to_string(c.scores[1]) +
                     " lanes " + std::to_string(lanes));
        int64_t classes = c.scores[1];
        Shape labelShape = c.scores;
        labelShape.erase(labelShape.begin() + 1);
        int64_t positions = numel(labelShape), inner = positions / c.scores[0];
        std::vector<float> scores = randomFloats(numel(c.scores), seed++),
                           weights = randomFloats(classes, seed++),
                           g = randomFloats(positions, seed++);
        for (float &w : weights)
          w = std::fabs(w) + 0.1f;
        std::mt19937 gen(seed++);
        std::vector<int64_t> labels(positions);
        for (int64_t &l : labels)
          l = static_cast<int64_t>(gen() % classes);
        if (c.ignore && positions > 1)
          labels[1] = -100;
        bool none = reduction == "none", mean = reduction == "mean";
        cuda::ErrorSlot error{0, 0};
        HostCrossEntropy host{{scores.data(), labels.data(),
                               c.weights ? weights.data() : nullptr, classes,
                               inner, c.ignore, -100, &error},
                              positions,
                              lanes};
        AttrList attrs = {{"reduction", reduction}};
        if (c.ignore)
          attrs.push_back({"ignore_index", int64_t(-100)});
        std::vector<Value> ins = {f32(c.scores, scores), i64(labelShape, labels)};
        std::vector<Value> gradIns = ins;
        gradIns.push_back(none ? f32(labelShape, g) : f32({}, {g[0]}));
        if (c.weights) {
          ins.push_back(f32({classes}, weights));
          gradIns.push_back(f32({classes}, weights));
        }
        Shape lossShape = none ? labelShape : Shape{};
        std::vector<float> loss(none ? positions : 1), grad(numel(c.scores));
        host.loss(none, mean, loss.data());
        expectClose(loss, cpu("softmax_cross_entropy", ins, lossShape, attrs),
                    classes > 10000 ? 2e-5 : 5e-6);
        host.grad(g.data(), none, mean, grad.data());
        expectClose(grad,
                    cpu("softmax_cross_entropy_grad", gradIns, c.scores, attrs),
                    2e-6);
        // The log-sum-exp the forward gives (lse = 1) is the CPU's, and the
        // gradient reading it equals the CPU's reading it and the one
        // recomputing it.
        std::vector<float> lse(positions), lseLoss(loss.size()),
            lseGrad(grad.size());
        HostCrossEntropy withLse = host;
        withLse.in.lse = lse.data();
        withLse.loss(none, mean, lseLoss.data());
        EXPECT_EQ(lseLoss, loss);
        AttrList lseAttrs = attrs;
        lseAttrs.push_back({"lse", int64_t(1)});
        Result cpuLse = runOp("softmax_cross_entropy", ins,
                              {{F32, lossShape}, {F32, labelShape}}, lseAttrs);
        ASSERT_EQ(cpuLse.error, "");
        expectClose(lse, cpuLse.outputs[1].as<float>(), 2e-6);
        withLse.grad(g.data(), none, mean, lseGrad.data());
        gradIns.push_back(cpuLse.outputs[1]);
        expectClose(
            lseGrad,
            cpu("softmax_cross_entropy_grad", gradIns, c.scores, lseAttrs),
            2e-6);
        expectClose(lseGrad, grad, 2e-6);
        EXPECT_EQ(error.code, 0);
      }
}

TEST(CudaHost, ALabelOutOfRangeIsRecordedInTheErrorSlot) {
  std::vector<float> scores = randomFloats(4 * 5, 9), loss(1), grad(20), g = {1};
  std::vector<int64_t> labels = {0, 7, 2, -3};
  for (int lanes : {1, 4}) {
    cuda::ErrorSlot error{0, 0};
    HostCrossEntropy host{{scores.data(), labels.data(), nullptr, 5, 1, false, 0,
                           &error},
                          4,
                          lanes};
    host.loss(false, true, loss.data());
    EXPECT_EQ(error.code, cuda::kBadLabel);
    EXPECT_TRUE(error.detail == 7 || error.detail == -3) << error.detail;
    error = {0, 0};
    host.grad(g.data(), false, true, grad.data());
    EXPECT_EQ(error.code, cuda::kBadLabel);
  }
  // The CPU backend refuses the same labels.
  Result r = runOp("softmax_cross_entropy",
                   {f32({4, 5}, scores), i64({4}, labels)}, {{F32, {}}});
  EXPECT_NE(r.error.find("is outside [0, 5)"), std::string::npos) << r.error;
}

} // namespace
