//===- OptimKernelTest.cpp - The fused optimizer kernels against torch ----===//
//
// The CPU kernels `adamw` and `sgd` stepped several times on the cases
// gen_optim_ref.py wrote with torch 1.13's AdamW and SGD (foreach=False):
// weight decay on and off, clipping coefficients, dampening, Nesterov, and
// sizes of one element, a non-multiple of the kernel's chunk and several
// chunks.
//
//===----------------------------------------------------------------------===//

#include "SessionHarness.h"

#include <fstream>
#include <map>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;

namespace {

constexpr plan::DType F32 = plan::DType::F32;

/// One case of gen_optim_ref.py's file.
struct OptimCase {
  std::string name, kernel;
  int steps = 0;
  double lr = 0, clip = 0;
  AttrList attrs;
  std::map<std::string, std::vector<float>> tensors;
};

std::vector<OptimCase> readOptimCases() {
  std::ifstream in(FSDP_OPTIM_REF);
  EXPECT_TRUE(in) << "cannot read " << FSDP_OPTIM_REF;
  std::vector<OptimCase> cases;
  std::string word;
  while (in >> word) {
    EXPECT_EQ(word, "case");
    OptimCase c;
    in >> c.name >> c.kernel >> c.steps >> c.lr >> c.clip;
    std::string name;
    while (in >> name && name != "end") {
      if (name == "attr") {
        std::string key;
        double value;
        in >> key >> value;
        if (key == "nesterov")
          c.attrs.push_back({key, static_cast<int64_t>(value)});
        else
          c.attrs.push_back({key, value});
        continue;
      }
      size_t n;
      in >> n;
      std::vector<float> values(n);
      for (float &x : values) {
        in >> word;
        x = std::strtof(word.c_str(), nullptr);
      }
      c.tensors[name] = std::move(values);
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<double> widen(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

TEST(Kernels, OptimizerStepsEqualTorch) {
  std::vector<OptimCase> cases = readOptimCases();
  ASSERT_EQ(cases.size(), 7u);
  for (const OptimCase &c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<float> &param0 = c.tensors.at("param");
    Shape shape = {static_cast<int64_t>(param0.size())};
    bool adam = c.kernel == "adamw";
    bool momentum = false;
    for (const auto &[key, value] : c.attrs)
      if (key == "momentum")
        momentum = std::get<double>(value) != 0;
    // The state the kernel carries from step to step, zero at first.
    std::vector<std::string> stateNames =
        adam       ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
        : momentum ? std::vector<std::string>{"momentum_buffer"}
                   : std::vector<std::string>{};
    Value param = f32(shape, param0);
    std::vector<Value> states(stateNames.size(),
                              f32(shape, std::vector<float>(param0.size())));
    for (int k = 1; k <= c.steps; ++k) {
      Value grad = f32(shape, c.tensors.at("grad" + std::to_string(k)));
      Value lr = f32({}, {static_cast<float>(c.lr)});
      Value step = f32({}, {static_cast<float>(k)});
      std::vector<Value> ins = {param, grad};
      if (adam) {
        ins.insert(ins.end(), {states[0], states[1], lr, step});
      } else {
        ins.insert(ins.end(), {lr, step});
        ins.insert(ins.end(), states.begin(), states.end());
      }
      if (c.clip != 0)
        ins.push_back(f32({}, {static_cast<float>(c.clip)}));
      std::vector<std::pair<plan::DType, Shape>> outs(1 + states.size(),
                                                      {F32, shape});
      Result r = runOp(c.kernel, ins, outs, c.attrs);
      ASSERT_EQ(r.error, "") << "step " << k;
      param = r.outputs[0];
      for (size_t i = 0; i < states.size(); ++i)
        states[i] = r.outputs[1 + i];
    }
    // torch computes its scalars (bias corrections, 1 - lr * decay) in
    // double, the kernel in f32 as the decomposed form does.
    expectNear(param.as<float>(), widen(c.tensors.at("want_param")), 1e-5);
    for (size_t i = 0; i < states.size(); ++i) {
      SCOPED_TRACE(stateNames[i]);
      expectNear(states[i].as<float>(),
                 widen(c.tensors.at("want_" + stateNames[i])), 1e-5);
    }
  }
}

TEST(Kernels, OptimizerStepsRejectBadOperands) {
  Value p = f32({4}, {1, 2, 3, 4}), s = f32({}, {1});
  AttrList adam = {
      {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}};
  Result r = runOp("adamw", {p, f32({3}, {1, 2, 3}), p, p, s, s},
                   {{F32, {4}}, {F32, {4}}, {F32, {4}}}, adam);
  EXPECT_NE(r.error.find("param, grad, exp_avg and exp_avg_sq must all be "
                         "[4]; input 1 is [3]"),
            std::string::npos)
      << r.error;
  r = runOp("adamw", {p, p, p, p, p, s}, {{F32, {4}}, {F32, {4}}, {F32, {4}}},
            adam);
  EXPECT_NE(r.error.find("input 4 (lr, step or clip) must be a scalar"),
            std::string::npos)
      << r.error;
  // With momentum the buffer is an input and an output.
  r = runOp("sgd", {p, p, s, s}, {{F32, {4}}}, {{"momentum", 0.9}});
  EXPECT_NE(r.error.find("sgd"), std::string::npos) << r.error;
  EXPECT_NE(r.error, "");
}

} // namespace
