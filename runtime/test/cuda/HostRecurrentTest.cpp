//===- HostRecurrentTest.cpp - LSTM, GRU and RNN on the host --------------===//
//
// cuda-host: lstm, gru, rnn and their gradients on "fake-cuda:strict" (the
// backend's GEMMs per step and kernels/recurrent.h's bodies) against the
// CPU backend, every output: each cell, forward, reverse and
// bidirectional, both layouts, GRU's linear_before_reset 0 and 1, with and
// without b, initial_h and initial_c, sizes that are no multiple of
// anything (and a hidden size of one, a batch of one, one step); and a
// bad operand named as the CPU names it.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

constexpr const char *kStrict = "fake-cuda:strict";

struct RecurrentCase {
  std::string cell, direction;
  int64_t layout, linearBeforeReset;
  bool bias, h0, c0;
  int64_t seq, batch, input, hidden;
};

// One case a line: cell, direction, layout, linear_before_reset, b,
// initial_h, initial_c, seq, batch, input, hidden.
// clang-format off
const std::vector<RecurrentCase> kCases = {
    {"lstm", "forward",       0, 0, true,  true,  true,  5, 3, 7, 5},
    {"lstm", "reverse",       1, 0, false, true,  false, 4, 2, 3, 6},
    {"lstm", "bidirectional", 0, 0, true,  false, true,  6, 3, 5, 3},
    {"lstm", "bidirectional", 1, 0, false, false, false, 1, 1, 2, 1},
    {"gru",  "forward",       0, 0, true,  true,  false, 5, 3, 7, 5},
    {"gru",  "reverse",       1, 1, true,  false, false, 4, 2, 3, 6},
    {"gru",  "bidirectional", 0, 1, false, true,  false, 6, 3, 5, 3},
    {"gru",  "bidirectional", 1, 0, true,  true,  false, 3, 1, 4, 7},
    {"gru",  "forward",       0, 1, true,  false, false, 2, 5, 1, 1},
    {"rnn",  "forward",       0, 0, true,  true,  false, 5, 3, 7, 5},
    {"rnn",  "reverse",       0, 0, false, false, false, 4, 2, 3, 6},
    {"rnn",  "bidirectional", 1, 0, true,  true,  false, 6, 3, 5, 3},
};
// clang-format on

std::string nameOf(const RecurrentCase &c) {
  return c.cell + " " + c.direction + " layout " + std::to_string(c.layout) +
         " lbr " + std::to_string(c.linearBeforeReset) + (c.bias ? " b" : "") +
         (c.h0 ? " h0" : "") + (c.c0 ? " c0" : "") + " [" +
         std::to_string(c.seq) + ", " + std::to_string(c.batch) + ", " +
         std::to_string(c.input) + ", " + std::to_string(c.hidden) + "]";
}

/// A case's operands and shapes, the forward's and the gradient's.
struct RecurrentRun {
  AttrList attrs;
  std::vector<Value> ins, gradIns;
  std::vector<std::pair<plan::DType, Shape>> outs, gradOuts;
};

RecurrentRun runOf(const RecurrentCase &c, unsigned seed) {
  int64_t gates = c.cell == "lstm" ? 4 : c.cell == "gru" ? 3 : 1;
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  int64_t gh = gates * c.hidden;
  bool lstm = c.cell == "lstm";
  Shape x = c.layout ? Shape{c.batch, c.seq, c.input}
                     : Shape{c.seq, c.batch, c.input};
  Shape state = c.layout ? Shape{c.batch, dirs, c.hidden}
                         : Shape{dirs, c.batch, c.hidden};
  Shape y = c.layout ? Shape{c.batch, c.seq, dirs, c.hidden}
                     : Shape{c.seq, dirs, c.batch, c.hidden};
  std::vector<Shape> shapes = {x, {dirs, gh, c.input}, {dirs, gh, c.hidden}};
  if (c.bias)
    shapes.push_back({dirs, 2 * gh});
  if (c.h0)
    shapes.push_back(state);
  if (c.c0)
    shapes.push_back(state);
  RecurrentRun run;
  run.attrs = {
      {"hidden_size", c.hidden},   {"direction", c.direction},
      {"layout", c.layout},        {"linear_before_reset", c.linearBeforeReset},
      {"bias", int64_t(c.bias)},   {"initial_h", int64_t(c.h0)},
      {"initial_c", int64_t(c.c0)}};
  for (const Shape &s : shapes) {
    std::vector<float> v = randomFloats(numel(s), seed++);
    for (float &f : v)
      f *= 0.6f; // gates away from saturation: gradients that matter
    run.ins.push_back(f32(s, v));
  }
  run.outs = {{F32, y}, {F32, state}};
  if (lstm)
    run.outs.push_back({F32, state});
  run.gradIns = run.ins;
  for (const auto &o : run.outs)
    run.gradIns.push_back(f32(o.second, randomFloats(numel(o.second), seed++)));
  run.gradOuts = {{F32, shapes[0]},
                  {F32, shapes[1]},
                  {F32, shapes[2]},
                  {F32, {dirs, 2 * gh}},
                  {F32, state}};
  if (lstm)
    run.gradOuts.push_back({F32, state});
  return run;
}

/// Runs `op` on the CPU and on the strict fake device: every output within
/// `tol` (relative to 1 + |value|), and none left unwritten.
void expectLikeTheCpu(const std::string &op, const std::vector<Value> &ins,
                      const std::vector<std::pair<plan::DType, Shape>> &outs,
                      const AttrList &attrs, double tol) {
  SCOPED_TRACE(op);
  Result cpu = runOp(op, ins, outs, attrs);
  Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  for (size_t o = 0; o < outs.size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o));
    std::vector<float> got = fake.outputs[o].as<float>();
    expectClose(got, cpu.outputs[o].as<float>(), tol);
    for (float v : got)
      ASSERT_FALSE(std::isnan(v));
  }
}

TEST(CudaHost, RecurrentLayersOnTheStrictFakeDeviceEqualTheCpu) {
  unsigned seed = 4100;
  for (const RecurrentCase &c : kCases) {
    SCOPED_TRACE(nameOf(c));
    RecurrentRun run = runOf(c, seed);
    seed += 20;
    expectLikeTheCpu(c.cell, run.ins, run.outs, run.attrs, 1e-5);
  }
}

TEST(CudaHost, RecurrentGradientsOnTheStrictFakeDeviceEqualTheCpu) {
  unsigned seed = 4500;
  for (const RecurrentCase &c : kCases) {
    SCOPED_TRACE(nameOf(c));
    RecurrentRun run = runOf(c, seed);
    seed += 20;
    expectLikeTheCpu(c.cell + "_grad", run.gradIns, run.gradOuts, run.attrs,
                     1e-5);
  }
}

TEST(CudaHost, RecurrentMismatchIsNamedAsOnTheCpu) {
  // w with 3 gates' rows for an LSTM (4 gates).
  std::vector<Value> ins = {f32({3, 2, 4}, randomFloats(24, 1)),
                            f32({1, 6, 4}, randomFloats(24, 2)),
                            f32({1, 8, 2}, randomFloats(16, 3))};
  std::vector<std::pair<plan::DType, Shape>> outs = {
      {F32, {3, 1, 2, 2}}, {F32, {1, 2, 2}}, {F32, {1, 2, 2}}};
  AttrList attrs = {{"hidden_size", int64_t(2)}};
  Result cpu = runOp("lstm", ins, outs, attrs);
  Result fake = runOp("lstm", ins, outs, attrs, 2, kStrict);
  EXPECT_NE(cpu.error.find("w [1, 6, 4] should be [1, 8, 4]"),
            std::string::npos)
      << cpu.error;
  EXPECT_NE(fake.error.find("w [1, 6, 4] should be [1, 8, 4]"),
            std::string::npos)
      << fake.error;
}

} // namespace
