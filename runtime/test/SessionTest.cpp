//===- SessionTest.cpp - Kernels and sessions through the C API -----------===//
//
// Each test builds a one-kernel plan in memory (every buffer its own slice of
// one activation arena), runs it through the public C API and compares the
// output with a reference computed here by plain loops.
//
//===----------------------------------------------------------------------===//

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace plan = fsdprt::plan;

namespace {

using Shape = std::vector<int64_t>;
using AttrValue = std::variant<int64_t, double, std::string, Shape>;

struct Spec {
  std::string name;
  plan::DType dtype;
  Shape shape;
};

size_t elementSize(plan::DType t) {
  return fsdprt_dtype_size(static_cast<fsdprt_dtype_t>(t));
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// A plan with one kernel: inputs named in0, in1, ..., outputs out0, ...
std::vector<uint8_t>
kernelPlan(const std::string &op, const std::vector<Spec> &ins,
           const std::vector<Spec> &outs,
           const std::vector<std::pair<std::string, AttrValue>> &attrs,
           int64_t arenaSlack = 0, bool withWeight = false) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<plan::Buffer>> buffers;
  std::vector<flatbuffers::Offset<plan::TensorDesc>> inputs, outputs;
  std::vector<uint32_t> inIds, outIds;
  uint64_t offset = 0;
  auto add = [&](const Spec &s) {
    uint64_t bytes = numel(s.shape) * elementSize(s.dtype);
    buffers.push_back(plan::CreateBufferDirect(b, 0, offset, bytes, s.dtype, &s.shape));
    offset += (bytes + 63) / 64 * 64;
    return static_cast<uint32_t>(buffers.size() - 1);
  };
  for (const Spec &s : ins) {
    inIds.push_back(add(s));
    inputs.push_back(plan::CreateTensorDescDirect(b, s.name.c_str(), s.dtype,
                                                  &s.shape, inIds.back()));
  }
  for (const Spec &s : outs) {
    outIds.push_back(add(s));
    outputs.push_back(plan::CreateTensorDescDirect(b, s.name.c_str(), s.dtype,
                                                   &s.shape, outIds.back()));
  }
  std::vector<flatbuffers::Offset<plan::Attr>> attrList;
  for (const auto &[name, value] : attrs) {
    flatbuffers::Offset<plan::Attr> attr;
    if (auto *i = std::get_if<int64_t>(&value))
      attr = plan::CreateAttrDirect(b, name.c_str(), plan::AttrValue::IntAttr,
                                    plan::CreateIntAttr(b, *i).Union());
    else if (auto *f = std::get_if<double>(&value))
      attr = plan::CreateAttrDirect(b, name.c_str(), plan::AttrValue::FloatAttr,
                                    plan::CreateFloatAttr(b, *f).Union());
    else if (auto *s = std::get_if<std::string>(&value))
      attr = plan::CreateAttrDirect(
          b, name.c_str(), plan::AttrValue::StringAttr,
          plan::CreateStringAttrDirect(b, s->c_str()).Union());
    else
      attr = plan::CreateAttrDirect(
          b, name.c_str(), plan::AttrValue::IntsAttr,
          plan::CreateIntsAttrDirect(b, &std::get<Shape>(value)).Union());
    attrList.push_back(attr);
  }
  std::vector<flatbuffers::Offset<plan::Kernel>> kernels = {
      plan::CreateKernelDirect(b, op.c_str(), &inIds, &outIds, &attrList,
                               "node_1")};
  std::vector<flatbuffers::Offset<plan::Arena>> arenas = {plan::CreateArenaDirect(
      b, "activations", offset + arenaSlack, 64, plan::ArenaKind::Activations)};
  std::vector<flatbuffers::Offset<plan::WeightRef>> weights;
  if (withWeight) {
    // The weight is input 0's buffer, read from "w.bin".
    weights.push_back(plan::CreateWeightRefDirect(
        b, "w", plan::StateKind::Param, "w.bin", 4,
        numel(ins[0].shape) * elementSize(ins[0].dtype), 0));
  }
  auto root = plan::CreatePlanDirect(b, FSDPRT_PLAN_SCHEMA_VERSION, "test", ".",
                                     1, &arenas, &buffers, &inputs, &outputs,
                                     &kernels, &weights);
  plan::FinishPlanBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

/// Owns a plan and a session; reports statuses as strings ("" = success).
struct Runner {
  fsdprt_plan_t *plan = nullptr;
  fsdprt_session_t *session = nullptr;
  std::string error;

  explicit Runner(const std::vector<uint8_t> &bytes, const char *dir = nullptr) {
    error = take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &plan));
    if (error.empty())
      error = take(fsdprt_session_create(plan, dir, 2, &session));
  }
  ~Runner() {
    fsdprt_session_destroy(session);
    fsdprt_plan_destroy(plan);
  }
  static std::string take(fsdprt_status_t status) {
    std::string text = status ? fsdprt_status_message(status) : "";
    fsdprt_status_free(status);
    return text;
  }
  template <typename T> std::string set(const char *name, const std::vector<T> &v) {
    return take(fsdprt_session_set_input(session, name, v.data(), v.size() * sizeof(T)));
  }
  std::string run() { return take(fsdprt_session_run(session)); }
  template <typename T> std::vector<T> get(const char *name, size_t n) {
    std::vector<T> out(n);
    error = take(fsdprt_session_get_output(session, name, out.data(), n * sizeof(T)));
    return out;
  }
};

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

const auto F32 = plan::DType::F32;
const auto I64 = plan::DType::I64;
const auto BOOL = plan::DType::Bool;

/// Runs a one-kernel plan on float inputs and returns output 0.
std::vector<float> runFloat(const std::string &op, const std::vector<Shape> &inShapes,
                            const Shape &outShape,
                            const std::vector<std::vector<float>> &values,
                            const std::vector<std::pair<std::string, AttrValue>> &attrs) {
  std::vector<Spec> ins;
  for (size_t i = 0; i < inShapes.size(); ++i)
    ins.push_back({"in" + std::to_string(i), F32, inShapes[i]});
  Runner r(kernelPlan(op, ins, {{"out0", F32, outShape}}, attrs));
  EXPECT_EQ(r.error, "");
  if (!r.error.empty())
    return {};
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(r.set(("in" + std::to_string(i)).c_str(), values[i]), "");
  EXPECT_EQ(r.run(), "");
  return r.get<float>("out0", numel(outShape));
}

TEST(Kernels, AddBroadcastsLikeNumPy) {
  auto a = randomFloats(2 * 3 * 4, 1), b = randomFloats(3 * 1, 2);
  auto y = runFloat("add", {{2, 3, 4}, {3, 1}}, {2, 3, 4}, {a, b}, {});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        want.push_back(a[(i * 3 + j) * 4 + k] + b[j]);
  expectNear(y, want);
}

TEST(Kernels, MatMulBroadcastsBatchesAndTransposesB) {
  // a [2, 1, 3, 4] x b [3, 5, 4]^T -> [2, 3, 3, 5]
  auto a = randomFloats(2 * 3 * 4, 3), b = randomFloats(3 * 5 * 4, 4);
  auto y = runFloat("matmul", {{2, 1, 3, 4}, {3, 5, 4}}, {2, 3, 3, 5}, {a, b},
                    {{"trans_b", int64_t(1)}});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 5; ++n) {
          double s = 0;
          for (int k = 0; k < 4; ++k)
            s += a[(i * 3 + m) * 4 + k] * b[(j * 5 + n) * 4 + k];
          want.push_back(s);
        }
  expectNear(y, want);
}

TEST(Kernels, LinearFusesBiasAndGelu) {
  auto x = randomFloats(6 * 4, 5), w = randomFloats(3 * 4, 6), bias = randomFloats(3, 7);
  auto y = runFloat("linear", {{2, 3, 4}, {3, 4}, {3}}, {2, 3, 3}, {x, w, bias},
                    {{"trans_w", int64_t(1)}, {"activation", std::string("gelu")}});
  std::vector<double> want;
  for (int r = 0; r < 6; ++r)
    for (int n = 0; n < 3; ++n) {
      double s = bias[n];
      for (int k = 0; k < 4; ++k)
        s += x[r * 4 + k] * w[n * 4 + k];
      want.push_back(0.5 * s * (1 + std::erf(s / std::sqrt(2.0))));
    }
  expectNear(y, want);
}

TEST(Kernels, GemmWithTransposesAndBroadcastC) {
  auto a = randomFloats(4 * 2, 8), b = randomFloats(3 * 4, 9), c = randomFloats(3, 10);
  auto y = runFloat("gemm", {{4, 2}, {3, 4}, {3}}, {2, 3}, {a, b, c},
                    {{"trans_a", int64_t(1)}, {"trans_b", int64_t(1)},
                     {"alpha", 0.5}, {"beta", 2.0}});
  std::vector<double> want;
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 3; ++n) {
      double s = 0;
      for (int k = 0; k < 4; ++k)
        s += a[k * 2 + m] * b[n * 4 + k];
      want.push_back(0.5 * s + 2.0 * c[n]);
    }
  expectNear(y, want);
}

/// softmax((q kt) * scale + mask) v for one [L, D] x [D, S] x [S, Dv] head.
std::vector<double> attentionReference(const float *q, const float *kt,
                                       const float *v, int l, int d, int s,
                                       int dv, double scale,
                                       const std::function<double(int, int, double)> &mask) {
  std::vector<double> out;
  for (int i = 0; i < l; ++i) {
    std::vector<double> row(s);
    double max = -INFINITY;
    for (int j = 0; j < s; ++j) {
      double acc = 0;
      for (int k = 0; k < d; ++k)
        acc += q[i * d + k] * kt[k * s + j];
      row[j] = mask(i, j, acc * scale);
      max = std::max(max, row[j]);
    }
    double sum = 0;
    for (double &x : row)
      sum += (x = std::exp(x - max));
    for (int c = 0; c < dv; ++c) {
      double acc = 0;
      for (int j = 0; j < s; ++j)
        acc += row[j] / sum * v[j * dv + c];
      out.push_back(acc);
    }
  }
  return out;
}

TEST(Kernels, AttentionWithACausalFillMask) {
  const int B = 3, L = 5, D = 4, S = 5, DV = 2;
  auto q = randomFloats(B * L * D, 11), kt = randomFloats(B * D * S, 12),
       v = randomFloats(B * S * DV, 13);
  std::vector<uint8_t> mask(L * S);
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < S; ++j)
      mask[i * S + j] = j > i; // true = masked
  Runner r(kernelPlan("attention",
                      {{"q", F32, {B, L, D}}, {"kt", F32, {B, D, S}},
                       {"v", F32, {B, S, DV}}, {"m", BOOL, {1, L, S}}},
                      {{"y", F32, {B, L, DV}}},
                      {{"scale", 0.5}, {"mask_kind", std::string("fill")},
                       {"fill_value", -INFINITY}}));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.set("q", q) + r.set("kt", kt) + r.set("v", v) + r.set("m", mask), "");
  ASSERT_EQ(r.run(), "");
  auto y = r.get<float>("y", B * L * DV);
  std::vector<double> want;
  for (int b = 0; b < B; ++b) {
    auto head = attentionReference(
        &q[b * L * D], &kt[b * D * S], &v[b * S * DV], L, D, S, DV, 0.5,
        [&](int i, int j, double x) { return mask[i * S + j] ? -INFINITY : x; });
    want.insert(want.end(), head.begin(), head.end());
  }
  expectNear(y, want);
}

TEST(Kernels, AttentionWithAnAdditiveMask) {
  const int B = 2, L = 3, D = 4, S = 6, DV = 3;
  auto q = randomFloats(B * L * D, 14), kt = randomFloats(B * D * S, 15),
       v = randomFloats(B * S * DV, 16), m = randomFloats(B * S, 17);
  auto y = runFloat("attention", {{B, L, D}, {B, D, S}, {B, S, DV}, {B, 1, S}},
                    {B, L, DV}, {q, kt, v, m},
                    {{"scale", 0.25}, {"mask_kind", std::string("add")}});
  std::vector<double> want;
  for (int b = 0; b < B; ++b) {
    auto head = attentionReference(
        &q[b * L * D], &kt[b * D * S], &v[b * S * DV], L, D, S, DV, 0.25,
        [&](int, int j, double x) { return x + m[b * S + j]; });
    want.insert(want.end(), head.begin(), head.end());
  }
  expectNear(y, want);
}

TEST(Kernels, ConvWithPaddingStrideAndGroups) {
  // x [1, 4, 5, 5], w [6, 2, 3, 3], group 2, stride 2, pad 1 -> [1, 6, 3, 3]
  auto x = randomFloats(4 * 25, 18), w = randomFloats(6 * 2 * 9, 19), b = randomFloats(6, 20);
  auto y = runFloat("conv", {{1, 4, 5, 5}, {6, 2, 3, 3}, {6}}, {1, 6, 3, 3}, {x, w, b},
                    {{"strides", Shape{2, 2}}, {"pads", Shape{1, 1, 1, 1}},
                     {"dilations", Shape{1, 1}}, {"group", int64_t(2)}});
  std::vector<double> want;
  for (int o = 0; o < 6; ++o)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double s = b[o];
        int g = o / 3;
        for (int c = 0; c < 2; ++c)
          for (int a = 0; a < 3; ++a)
            for (int e = 0; e < 3; ++e) {
              int ih = i * 2 - 1 + a, iw = j * 2 - 1 + e;
              if (ih >= 0 && ih < 5 && iw >= 0 && iw < 5)
                s += x[((g * 2 + c) * 5 + ih) * 5 + iw] * w[((o * 2 + c) * 3 + a) * 3 + e];
            }
        want.push_back(s);
      }
  expectNear(y, want);
}

TEST(Kernels, MaxPoolIgnoresPadding) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i)
    x[i] = -1.0f - i; // all negative: a zero from padding would win
  auto y = runFloat("max_pool", {{1, 1, 4, 4}}, {1, 1, 2, 2}, {x},
                    {{"kernel_shape", Shape{3, 3}}, {"strides", Shape{2, 2}},
                     {"pads", Shape{1, 1, 1, 1}}, {"dilations", Shape{1, 1}}});
  expectNear(y, {-1, -2, -5, -6});
}

TEST(Kernels, NormsAndSoftmax) {
  auto x = randomFloats(2 * 5, 21), g = randomFloats(5, 22), b = randomFloats(5, 23);
  auto ln = runFloat("layer_norm", {{2, 5}, {5}, {5}}, {2, 5}, {x, g, b},
                     {{"axis", int64_t(1)}, {"epsilon", 1e-5}});
  auto rms = runFloat("rms_norm", {{2, 5}, {5}}, {2, 5}, {x, g}, {{"epsilon", 1e-6}});
  auto sm = runFloat("softmax", {{2, 5}}, {2, 5}, {x}, {{"axis", int64_t(0)}});
  std::vector<double> wantLn, wantRms, wantSm(10);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0, sq = 0;
    for (int j = 0; j < 5; ++j)
      mean += x[r * 5 + j] / 5.0;
    for (int j = 0; j < 5; ++j) {
      var += (x[r * 5 + j] - mean) * (x[r * 5 + j] - mean) / 5.0;
      sq += x[r * 5 + j] * x[r * 5 + j] / 5.0;
    }
    for (int j = 0; j < 5; ++j) {
      wantLn.push_back((x[r * 5 + j] - mean) / std::sqrt(var + 1e-5) * g[j] + b[j]);
      wantRms.push_back(x[r * 5 + j] / std::sqrt(sq + 1e-6) * g[j]);
    }
  }
  for (int j = 0; j < 5; ++j) {
    double e0 = std::exp(x[j]), e1 = std::exp(x[5 + j]);
    wantSm[j] = e0 / (e0 + e1);
    wantSm[5 + j] = e1 / (e0 + e1);
  }
  expectNear(ln, wantLn);
  expectNear(rms, wantRms);
  expectNear(sm, wantSm);
}

TEST(Kernels, DataMovement) {
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i)
    x[i] = static_cast<float>(i);
  // transpose [2, 3, 4] by [2, 0, 1] -> [4, 2, 3]
  auto t = runFloat("transpose", {{2, 3, 4}}, {4, 2, 3}, {x}, {{"perm", Shape{2, 0, 1}}});
  std::vector<double> want;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        want.push_back(x[(i * 3 + j) * 4 + k]);
  expectNear(t, want);
  // slice: the last dim reversed from index 3, the middle one from 1.
  auto s = runFloat("slice", {{2, 3, 4}}, {2, 2, 4}, {x},
                    {{"starts", Shape{0, 1, 3}}, {"steps", Shape{1, 1, -1}}});
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 1; j < 3; ++j)
      for (int k = 3; k >= 0; --k)
        want.push_back(x[(i * 3 + j) * 4 + k]);
  expectNear(s, want);
  // concat of x with itself along dim 1, then reduce_sum over it.
  auto c = runFloat("concat", {{2, 3, 4}, {2, 3, 4}}, {2, 6, 4}, {x, x}, {{"axis", int64_t(1)}});
  auto r = runFloat("reduce_sum", {{2, 6, 4}}, {2, 1, 4}, {c},
                    {{"axes", Shape{1}}, {"keepdims", int64_t(1)}});
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      double sum = 0;
      for (int j = 0; j < 3; ++j)
        sum += 2 * x[(i * 3 + j) * 4 + k];
      want.push_back(sum);
    }
  expectNear(r, want);
}

TEST(Kernels, GatherCountsNegativeIndicesFromTheEndAndRejectsOutOfRange) {
  auto table = randomFloats(5 * 3, 24);
  Runner r(kernelPlan("gather", {{"table", F32, {5, 3}}, {"ids", I64, {2}}},
                      {{"y", F32, {2, 3}}}, {{"axis", int64_t(0)}}));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.set("table", table), "");
  ASSERT_EQ(r.set("ids", std::vector<int64_t>{-1, 2}), "");
  ASSERT_EQ(r.run(), "");
  auto y = r.get<float>("y", 6);
  expectNear(y, {table[12], table[13], table[14], table[6], table[7], table[8]});
  ASSERT_EQ(r.set("ids", std::vector<int64_t>{0, 5}), "");
  std::string error = r.run();
  EXPECT_NE(error.find("kernel 0 (gather at 'node_1')"), std::string::npos) << error;
  EXPECT_NE(error.find("index 5 is out of range"), std::string::npos) << error;
}

TEST(Kernels, SoftmaxCrossEntropyMeanSkipsIgnoredLabels) {
  auto scores = randomFloats(3 * 4, 25);
  Runner r(kernelPlan("softmax_cross_entropy",
                      {{"scores", F32, {3, 4}}, {"labels", I64, {3}}},
                      {{"loss", F32, {}}},
                      {{"reduction", std::string("mean")}, {"ignore_index", int64_t(-100)}}));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.set("scores", scores) + r.set("labels", std::vector<int64_t>{2, -100, 0}), "");
  ASSERT_EQ(r.run(), "");
  double want = 0;
  for (int i : {0, 2}) {
    int label = i == 0 ? 2 : 0;
    double sum = 0;
    for (int j = 0; j < 4; ++j)
      sum += std::exp(scores[i * 4 + j]);
    want += (std::log(sum) - scores[i * 4 + label]) / 2;
  }
  expectNear(r.get<float>("loss", 1), {want});
}

TEST(Sessions, ShapeMismatchIsCaughtAtCreationNamingTheKernel) {
  Runner r(kernelPlan("matmul", {{"a", F32, {2, 3}}, {"b", F32, {4, 5}}},
                      {{"y", F32, {2, 5}}}, {}));
  EXPECT_NE(r.error.find("kernel 0 (matmul at 'node_1')"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("inner dimensions differ"), std::string::npos) << r.error;
}

TEST(Sessions, UnknownOpIsAnError) {
  Runner r(kernelPlan("frobnicate", {{"a", F32, {2}}}, {{"y", F32, {2}}}, {}));
  EXPECT_NE(r.error.find("frobnicate"), std::string::npos) << r.error;
}

TEST(Sessions, BufferOutsideItsArenaIsRefused) {
  Runner r(kernelPlan("relu", {{"a", F32, {64}}}, {{"y", F32, {64}}}, {},
                      /*arenaSlack=*/-64));
  EXPECT_NE(r.error.find("does not fit its shape or its arena"), std::string::npos)
      << r.error;
}

TEST(Sessions, InputsOutputsAndWeightsAreChecked) {
  std::string dir = ::testing::TempDir() + "/fsdprt_session_test";
  std::string mkdir = "mkdir -p " + dir;
  ASSERT_EQ(std::system(mkdir.c_str()), 0);
  std::remove((dir + "/w.bin").c_str());
  auto bytes = kernelPlan("relu", {{"w", F32, {4}}}, {{"y", F32, {4}}}, {}, 0,
                          /*withWeight=*/true);
  {
    Runner r(bytes, dir.c_str());
    ASSERT_EQ(r.error, "");
    // Running before the weights are loaded, or with no weight file.
    EXPECT_NE(r.run().find("weights are not loaded"), std::string::npos);
    std::string missing = Runner::take(fsdprt_session_load_weights(r.session));
    EXPECT_NE(missing.find("w.bin"), std::string::npos) << missing;
    EXPECT_NE(missing.find("'w'"), std::string::npos) << missing;
  }
  std::vector<float> file = {9, -1, 2, -3, 4};  // 4 bytes of header, then w
  FILE *f = std::fopen((dir + "/w.bin").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(file.data(), sizeof(float), 3, f); // too short
  std::fclose(f);
  {
    Runner r(bytes, dir.c_str());
    std::string shortFile = Runner::take(fsdprt_session_load_weights(r.session));
    EXPECT_NE(shortFile.find("file too short"), std::string::npos) << shortFile;
  }
  f = std::fopen((dir + "/w.bin").c_str(), "wb");
  std::fwrite(file.data(), sizeof(float), file.size(), f);
  std::fclose(f);
  Runner r(bytes, dir.c_str());
  ASSERT_EQ(Runner::take(fsdprt_session_load_weights(r.session)), "");
  ASSERT_EQ(r.run(), "");
  expectNear(r.get<float>("y", 4), {0, 2, 0, 4});
  // Sizes must match exactly; names must exist.
  EXPECT_NE(r.set("w", std::vector<float>(3)).find("holds 16 bytes, not 12"),
            std::string::npos);
  EXPECT_NE(r.set("nope", std::vector<float>(4)).find("no input named 'nope'"),
            std::string::npos);
  std::vector<float> small(2);
  std::string error = Runner::take(
      fsdprt_session_get_output(r.session, "y", small.data(), 8));
  EXPECT_NE(error.find("holds 16 bytes, not 8"), std::string::npos) << error;
}

} // namespace
