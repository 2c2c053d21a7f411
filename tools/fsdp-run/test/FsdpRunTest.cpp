//===- FsdpRunTest.cpp - fsdp-run on a plan written here ------------------===//
//
// Writes a small plan (a linear layer with weights from a file and a bias
// constant, a comparison, a gather), its weight file and .npy inputs, runs
// the fsdp-run binary, and checks its outputs, report and error messages.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilder.h"
#include "npy.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

using namespace fsdprt::test;
namespace plan = fsdprt::plan;
namespace npy = fsdp::npy;

namespace {

struct Outcome {
  int status;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T> std::vector<char> bytesOf(const std::vector<T> &v) {
  std::vector<char> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <typename T> std::vector<T> valuesOf(const npy::Array &a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), a.data.size());
  return out;
}

class FsdpRun : public ::testing::Test {
protected:
  void SetUp() override {
    dir = ::testing::TempDir() + "/fsdp_run_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(
        std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
        0);
    // model.bin: 8 bytes of header, then fc.weight [4, 3].
    std::vector<float> file = {0, 0};
    for (int i = 0; i < 12; ++i)
      file.push_back(0.25f * (i - 5));
    std::ofstream(dir + "/model.bin", std::ios::binary)
        .write(reinterpret_cast<const char *>(file.data()), file.size() * 4);
    weight.assign(file.begin() + 2, file.end());

    PlanBuilder b;
    b.modelDir(dir);
    uint32_t x = b.input("x", plan::DType::F32, {2, 3});
    uint32_t ids = b.input("ids", plan::DType::I64, {2});
    uint32_t w = b.buffer(plan::DType::F32, {4, 3}, PlanBuilder::Weights);
    uint32_t biasId = b.buffer(plan::DType::F32, {4}, PlanBuilder::Constants);
    b.weight("fc.weight", "model.bin", 8, 48, w);
    std::vector<char> biasBytes = bytesOf(bias);
    b.constant(biasId,
               std::vector<uint8_t>(biasBytes.begin(), biasBytes.end()));
    uint32_t y = b.output("y", plan::DType::F32, {2, 4});
    b.kernel("linear", {x, w, biasId}, {y},
             {{"trans_w", int64_t(1)}, {"activation", std::string("relu")}},
             "fc");
    b.kernel("greater", {y, biasId},
             {b.output("mask", plan::DType::Bool, {2, 4})}, {}, "gt");
    b.kernel("gather", {y, ids}, {b.output("picked", plan::DType::F32, {2, 4})},
             {{"axis", int64_t(0)}}, "pick");
    std::vector<uint8_t> bytes = b.finish();
    std::ofstream(dir + "/model.plan", std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());

    npy::write(dir + "/x.npy", {"<f4", {2, 3}, bytesOf(xs)});
    npy::write(dir + "/ids.npy",
               {"<i8", {2}, bytesOf(std::vector<int64_t>{1, -2})});
  }

  /// Runs fsdp-run with `args` (shell words) and captures everything; a
  /// hang ends after 60 s (status 124).
  Outcome run(const std::string &args) {
    std::string out = dir + "/stdout", err = dir + "/stderr";
    std::string command = "timeout 60 " + std::string(FSDP_RUN_PATH) + " " +
                          args + " > '" + out + "' 2> '" + err + "'";
    int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out),
            slurp(err)};
  }

  std::string inputs() const {
    return "--input x=" + dir + "/x.npy --input ids=" + dir + "/ids.npy";
  }

  /// relu(x @ weight^T + bias), by loops.
  std::vector<float> expectedY() const {
    std::vector<float> y;
    for (int r = 0; r < 2; ++r)
      for (int n = 0; n < 4; ++n) {
        double s = bias[n];
        for (int k = 0; k < 3; ++k)
          s += double(xs[r * 3 + k]) * weight[n * 3 + k];
        y.push_back(static_cast<float>(s > 0 ? s : 0));
      }
    return y;
  }

  std::string dir;
  std::vector<float> xs = {1, -2, 0.5f, 3, 1, -1}, bias = {0.5f, -0.25f, 0, 1},
                     weight;
};

TEST_F(FsdpRun, WritesOutputsAndASummary) {
  Outcome o = run(dir + "/model.plan " + inputs() + " --output-dir " + dir +
                  "/out/nested --repeat 2");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.err, "");
  std::vector<float> y = expectedY();
  npy::Array got = npy::read(dir + "/out/nested/y.npy");
  EXPECT_EQ(got.descr, "<f4");
  EXPECT_EQ(got.shape, (std::vector<int64_t>{2, 4}));
  std::vector<float> values = valuesOf<float>(got);
  ASSERT_EQ(values.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(values[i], y[i], 1e-6) << "at " << i;
  npy::Array mask = npy::read(dir + "/out/nested/mask.npy");
  EXPECT_EQ(mask.descr, "|b1");
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(mask.data[i], y[i] > bias[i % 4]) << "at " << i;
  // ids [1, -2]: row 1, then row 0.
  std::vector<float> picked =
      valuesOf<float>(npy::read(dir + "/out/nested/picked.npy"));
  ASSERT_EQ(picked.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(picked[i], values[4 + i]);
    EXPECT_EQ(picked[4 + i], values[i]);
  }
  // One directory for outputs and state: names could collide, and the next
  // run refused the directory this one wrote.
  Outcome same = run(dir + "/model.plan " + inputs() + " --output-dir " + dir +
                     "/both --save-state " + dir + "/./both/");
  EXPECT_EQ(same.status, 1);
  EXPECT_EQ(same.err, "fsdp-run: error: --output-dir and --save-state both "
                      "name '" +
                          dir +
                          "/both'; give them different "
                          "places\n");
  // Outputs are written as <name>.npy.tmp and renamed; a temporary that a
  // killed run left belongs to the directory, and the next run replaces it.
  std::ofstream(dir + "/out/nested/y.npy.tmp") << "half";
  Outcome again = run(dir + "/model.plan " + inputs() + " --output-dir " + dir +
                      "/out/nested");
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(valuesOf<float>(npy::read(dir + "/out/nested/y.npy")), values);
  EXPECT_FALSE(std::ifstream(dir + "/out/nested/y.npy.tmp").good());
  EXPECT_NE(o.out.find("output y: float32 [2, 4]  min "), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("output mask: bool [2, 4]"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  first values: "), std::string::npos) << o.out;
  EXPECT_TRUE(
      std::regex_search(o.out, std::regex("weights loaded in [0-9.e-]+ ms; 2 "
                                          "run\\(s\\): mean [0-9.e-]+ ms, min "
                                          "[0-9.e-]+ ms")))
      << o.out;
  EXPECT_TRUE(std::regex_search(
      o.out, std::regex("memory: activations 320 B, weights 64 B, constants "
                        "64 B, kernel workspace 0 B; peak RSS [0-9]+ B "
                        "\\([0-9]+ B before the session\\)")))
      << o.out;
}

TEST_F(FsdpRun, PrintsOneJsonObject) {
  Outcome o = run(dir + "/model.plan " + inputs() +
                  " --json --repeat=3 --warmup 1 --threads 1");
  ASSERT_EQ(o.status, 0) << o.err;
  // One line, one object, with every key.
  EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << o.out;
  EXPECT_EQ(o.out.front(), '{');
  for (const char *key :
       {"\"plan\": ",
        "\"inputs\": [{\"name\": \"x\", \"dtype\": \"float32\", "
        "\"shape\": [2, 3], \"file\": ",
        "\"outputs\": [{\"name\": \"y\", \"dtype\": \"float32\", \"shape\": "
        "[2, 4], "
        "\"min\": ",
        "\"load_seconds\": ", "\"run_seconds_mean\": ", "\"run_seconds_min\": ",
        "\"threads\": 1, ",
        "\"memory\": {\"activation_bytes\": 320, \"weight_bytes\": 64, "
        "\"constant_bytes\": 64, \"workspace_bytes\": 0, "
        "\"rss_before_session_bytes\": ",
        "\"peak_rss_bytes\": "})
    EXPECT_NE(o.out.find(key), std::string::npos) << key << "\n" << o.out;
  EXPECT_TRUE(std::regex_search(
      o.out,
      std::regex("\"run_seconds\": \\[[0-9.e-]+, [0-9.e-]+, [0-9.e-]+\\]")))
      << o.out;
}

TEST_F(FsdpRun, InputErrorsNameTheInputTheFileAndBothTypes) {
  Outcome o = run(dir + "/model.plan --input x=" + dir + "/x.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: missing inputs: ids; the plan declares:\n"
                   "  x float32 [2, 3]\n"
                   "  ids int64 [2]\n");
  o = run(dir + "/model.plan " + inputs() + " --input labels=" + dir +
          "/x.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err.rfind("fsdp-run: error: the plan has no input 'labels'; its "
                        "inputs:\n  x float32 [2, 3]\n",
                        0),
            0u)
      << o.err;
  o = run(dir + "/model.plan " + inputs() + " --input x=" + dir + "/x.npy");
  EXPECT_EQ(o.err, "fsdp-run: error: input 'x' is given twice\n");

  npy::write(dir + "/x64.npy", {"<f8", {2, 3}, std::vector<char>(48)});
  o = run(dir + "/model.plan --input x=" + dir + "/x64.npy --input ids=" + dir +
          "/ids.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: input 'x' from '" + dir +
                       "/x64.npy' is <f8 [2, 3] but the plan declares <f4 "
                       "(float32) [2, 3]\n");
  npy::write(dir + "/x23.npy", {"<f4", {3, 2}, std::vector<char>(24)});
  o = run(dir + "/model.plan --input x=" + dir + "/x23.npy --input ids=" + dir +
          "/ids.npy");
  EXPECT_EQ(o.err, "fsdp-run: error: input 'x' from '" + dir +
                       "/x23.npy' is <f4 [3, 2] but the plan declares <f4 "
                       "(float32) [2, 3]\n");
  std::ofstream(dir + "/bad.npy") << "not numpy";
  o = run(dir + "/model.plan --input x=" + dir + "/bad.npy --input ids=" + dir +
          "/ids.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err,
            "fsdp-run: error: '" + dir + "/bad.npy' is not a .npy file\n");
  o = run(dir + "/model.plan --input x=" + dir +
          "/none.npy --input ids=" + dir + "/ids.npy");
  EXPECT_EQ(o.err, "fsdp-run: error: cannot open '" + dir +
                       "/none.npy': No such file or directory\n");
}

TEST_F(FsdpRun, RuntimeErrorsComeBackWithTheirMessages) {
  npy::write(dir + "/far.npy",
             {"<i8", {2}, bytesOf(std::vector<int64_t>{0, 7})});
  Outcome o = run(dir + "/model.plan --input x=" + dir +
                  "/x.npy --input ids=" + dir + "/far.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: run failed: kernel 2 (gather at 'pick'): "
                   "index 7 is out of range for a dimension of size 2\n");
  o = run(dir + "/model.plan " + inputs() + " --model-dir " + dir +
          "/elsewhere");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: cannot load weights: cannot open '" + dir +
                       "/elsewhere/model.bin' for 'fc.weight': No such file or "
                       "directory\n");
  o = run(dir + "/x.npy");
  EXPECT_EQ(o.err.rfind("fsdp-run: error: cannot load the plan: '" + dir +
                            "/x.npy' is not an FSDP-MLIR plan",
                        0),
            0u)
      << o.err;
}

TEST_F(FsdpRun, AMemoryBudgetThePlanDoesNotFitRefusesToStart) {
  fsdprt_plan_t *p = nullptr;
  ASSERT_EQ(fsdprt_plan_load_file((dir + "/model.plan").c_str(), &p), nullptr);
  uint64_t peak = fsdprt_plan_peak_bytes(p);
  fsdprt_plan_destroy(p);
  Outcome o = run(dir + "/model.plan " + inputs() + " --memory-budget " +
                  std::to_string(peak - 1));
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err.rfind("fsdp-run: error: cannot create a session: the plan "
                        "needs " +
                            std::to_string(peak) + " bytes per rank (",
                        0),
            0u)
      << o.err;
  EXPECT_NE(o.err.find("more than the memory budget of " +
                       std::to_string(peak - 1) + " bytes"),
            std::string::npos)
      << o.err;
  o = run(dir + "/model.plan " + inputs() + " --memory-budget 1M");
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST_F(FsdpRun, CommandLineErrorsAndHelp) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "no plan given (see --help)"},
      {"a.plan b.plan", "more than one plan given: 'a.plan' and 'b.plan'"},
      {"a.plan --bogus", "unknown option '--bogus' (see --help)"},
      {"a.plan --threads", "--threads needs a value (see --help)"},
      // An empty path was taken as no option: the run wrote nothing.
      {"a.plan --output-dir=", "--output-dir needs a value, not '' (see "
                               "--help)"},
      {"a.plan --save-full=", "--save-full needs a value, not '' (see "
                              "--help)"},
      {"a.plan --threads two",
       "--threads needs an integer >= 0 and <= 1024, not 'two'"},
      // OpenMP crashed starting 65536 threads.
      {"a.plan --threads 65536",
       "--threads needs an integer >= 0 and <= 1024, not '65536'"},
      // A NaN learning rate trains into NaN; a NaN deadline is none.
      {"a.plan --lr nan", "--lr needs a finite number >= 0, not 'nan'"},
      {"a.plan --lr inf", "--lr needs a finite number >= 0, not 'inf'"},
      {"a.plan --lr -inf", "--lr needs a finite number >= 0, not '-inf'"},
      {"a.plan --lr 1e999", "--lr needs a finite number >= 0, not '1e999'"},
      {"a.plan --lr -1", "--lr needs a finite number >= 0, not '-1'"},
      {"a.plan --lr 1e39", "--lr 1e39 is beyond float32's range"},
      {"a.plan --timeout nan",
       "--timeout needs finite seconds >= 0, not 'nan'"},
      {"a.plan --timeout inf",
       "--timeout needs finite seconds >= 0, not 'inf'"},
      {"a.plan --timeout -1", "--timeout needs finite seconds >= 0, not '-1'"},
      {"a.plan --input x=", "--input needs NAME=FILE.npy, not 'x='"},
      {"a.plan --repeat 0", "--repeat needs an integer >= 1, not '0'"},
      {"a.plan --input x.npy", "--input needs NAME=FILE.npy, not 'x.npy'"},
      {"a.plan --memory-budget 1X",
       "--memory-budget needs a byte count > 0 such as 1073741824 or 1G, not "
       "'1X'"},
      {"a.plan --memory-budget 0",
       "--memory-budget needs a byte count > 0 such as 1073741824 or 1G, not "
       "'0'"},
      {"a.plan --seed -1",
       "--seed needs an integer from 0 to 2^64-1, not '-1'"},
      {"a.plan --seed 18446744073709551616",
       "--seed needs an integer from 0 to 2^64-1, not "
       "'18446744073709551616'"},
      {"a.plan --seed 1e3",
       "--seed needs an integer from 0 to 2^64-1, not '1e3'"},
      {"a.plan --memory-budget 20000000000T",
       "--memory-budget needs a byte count > 0 such as 1073741824 or 1G, not "
       "'20000000000T'"},
  };
  for (const auto &[args, message] : cases) {
    Outcome o = run(args);
    EXPECT_EQ(o.status, 1) << args;
    EXPECT_EQ(o.err, "fsdp-run: error: " + message + "\n") << args;
  }
  Outcome o = run("--help");
  EXPECT_EQ(o.status, 0);
  for (const char *flag :
       {"--input NAME=FILE.npy", "--output-dir DIR", "--model-dir DIR",
        "--threads N", "--warmup W", "--repeat K", "--json",
        "--memory-budget BYTES", "--seed S", "--help"})
    EXPECT_NE(o.out.find(flag), std::string::npos) << flag;
}

/// A plan like the fixture's linear layer, with a weight and an output of
/// the names given (as a hostile model file would name them).
void writeNamedPlan(const std::string &dir, const std::string &weightName,
                    const std::string &outputName) {
  PlanBuilder b;
  b.modelDir(dir);
  uint32_t x = b.input("x", plan::DType::F32, {2, 3});
  uint32_t w = b.buffer(plan::DType::F32, {4, 3}, PlanBuilder::Weights);
  b.weight(weightName, "model.bin", 8, 48, w);
  uint32_t y = b.output(outputName, plan::DType::F32, {2, 4});
  b.kernel("linear", {x, w}, {y}, {{"trans_w", int64_t(1)}}, "fc");
  std::vector<uint8_t> bytes = b.finish();
  std::ofstream(dir + "/named.plan", std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

bool exists(const std::string &path) { return std::ifstream(path).good(); }

TEST_F(FsdpRun, NamesThatWouldLeaveTheDirectoryAreRefused) {
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/a/b'").c_str()), 0);
  writeNamedPlan(dir, "fc.weight", "../../escaped");
  Outcome o = run(dir + "/named.plan --input x=" + dir +
                  "/x.npy --output-dir " + dir + "/a/b/out");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: output '../../escaped' cannot be a file "
                   "name: a name with '/', '..' or a control character would "
                   "write outside the directory you named\n");
  EXPECT_FALSE(exists(dir + "/a/escaped.npy"));
  EXPECT_FALSE(exists(dir + "/a/b/out"));
  writeNamedPlan(dir, "../x", "y");
  o = run(dir + "/named.plan --input x=" + dir + "/x.npy --save-state " + dir +
          "/a/b/state");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("state '../x' cannot be a file name"), std::string::npos)
      << o.err;
  EXPECT_FALSE(exists(dir + "/a/b/x.npy"));
  writeNamedPlan(dir, "fc.weight", "a\nb");
  o = run(dir + "/named.plan --input x=" + dir + "/x.npy --output-dir " + dir +
          "/a/b/out");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("output 'a\\x0ab' cannot be a file name"),
            std::string::npos)
      << o.err;
  // Dots inside a name (FQNs) are fine.
  writeNamedPlan(dir, "layer.0.fc.weight", "y.out");
  o = run(dir + "/named.plan --input x=" + dir + "/x.npy --output-dir " + dir +
          "/a/b/out --save-state " + dir + "/a/b/state");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_TRUE(exists(dir + "/a/b/out/y.out.npy"));
  EXPECT_TRUE(exists(dir + "/a/b/state/layer.0.fc.weight.npy"));
}

TEST_F(FsdpRun, SavesNeverReplaceWhatTheyDidNotWrite) {
  std::string plan = dir + "/model.plan " + inputs();
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/experiment'").c_str()), 0);
  std::ofstream(dir + "/experiment/notes.txt") << "x";
  std::ofstream(dir + "/mine.safetensors") << "mine";
  // Refused before anything runs: the state directory stays unwritten.
  for (std::string flag :
       {"--output-dir", "--save-state", "--save-checkpoint"}) {
    Outcome o = run(plan + " --save-state " + dir + "/state-first " + flag +
                    " " + dir + "/experiment/");
    EXPECT_EQ(o.status, 1) << flag;
    EXPECT_NE(o.err.find("'" + dir + "/experiment' holds 'notes.txt'"),
              std::string::npos)
        << o.err;
    EXPECT_EQ(o.out, "") << flag;
    EXPECT_FALSE(exists(dir + "/state-first")) << flag;
  }
  EXPECT_EQ(slurp(dir + "/experiment/notes.txt"), "x");
  Outcome o = run(plan + " --save-checkpoint " + dir + "/mine.safetensors");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("'" + dir +
                       "/mine.safetensors' exists and is not a directory"),
            std::string::npos)
      << o.err;
  o = run(plan + " --save-full " + dir + "/mine.safetensors");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(
      o.err.rfind("fsdp-run: error: --save-full: refusing to overwrite '" +
                      dir + "/mine.safetensors': '" + dir +
                      "/mine.safetensors' is not a safetensors file",
                  0),
      0u)
      << o.err;
  EXPECT_EQ(slurp(dir + "/mine.safetensors"), "mine");
  // What a run wrote, a run replaces; a trailing slash names the same place.
  for (int i = 0; i < 2; ++i) {
    o = run(plan + " --output-dir " + dir + "/out/ --save-state " + dir +
            "/state --save-full " + dir + "/full.safetensors" +
            " --save-checkpoint " + dir + "/ck/");
    EXPECT_EQ(o.status, 0) << o.err;
  }
  EXPECT_TRUE(exists(dir + "/ck/index.json"));
  EXPECT_FALSE(exists(dir + "/ck.old/index.json"));
  o = run(plan + " --resume " + dir + "/ck/");
  EXPECT_EQ(o.status, 0) << o.err;
  o = run(plan + " --load-full " + dir + "/full.safetensors");
  EXPECT_EQ(o.status, 0) << o.err;
}

TEST_F(FsdpRun, DirectoriesWhereFilesAreExpectedAreNamed) {
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/d'").c_str()), 0);
  Outcome o = run(dir + "/d " + inputs());
  EXPECT_EQ(o.err, "fsdp-run: error: cannot load the plan: cannot read plan '" +
                       dir + "/d': it is a directory, not a plan\n");
  o = run(dir + "/model.plan --input x=" + dir + "/d --input ids=" + dir +
          "/ids.npy");
  EXPECT_EQ(o.err, "fsdp-run: error: '" + dir +
                       "/d' is a directory, not a .npy file\n");
  o = run(dir + "/model.plan " + inputs() + " --load-full " + dir + "/d");
  EXPECT_EQ(o.err, "fsdp-run: error: cannot load '" + dir + "/d': '" + dir +
                       "/d' is a directory, not a safetensors file\n");
  o = run(dir + "/model.plan " + inputs() + " --resume " + dir + "/x.npy");
  EXPECT_EQ(o.err, "fsdp-run: error: cannot resume from '" + dir +
                       "/x.npy': '" + dir +
                       "/x.npy' is a file, not a sharded checkpoint "
                       "directory\n");
}

TEST_F(FsdpRun, FilesThatAreNotRegularAreRefused) {
  // /dev/zero was read until memory ran out; a FIFO blocked the open.
  std::string fifo = dir + "/fifo";
  ASSERT_EQ(std::system(("mkfifo '" + fifo + "'").c_str()), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero",
       "cannot load the plan: cannot load plan '/dev/zero': not a regular "
       "file"},
      {fifo, "cannot load the plan: cannot load plan '" + fifo +
                 "': not a regular file"},
      {dir + "/model.plan --input x=/dev/zero --input ids=" + dir + "/ids.npy",
       "cannot read '/dev/zero': not a regular file"},
      {dir + "/model.plan --input x=" + fifo + " --input ids=" + dir +
           "/ids.npy",
       "cannot read '" + fifo + "': not a regular file"},
      {dir + "/model.plan " + inputs() + " --load-full /dev/zero",
       "--load-full '/dev/zero': not a regular file"},
  };
  for (const auto &[args, message] : cases) {
    Outcome o = run(args);
    EXPECT_EQ(o.status, 1) << args;
    EXPECT_EQ(o.err, "fsdp-run: error: " + message + "\n") << args;
  }
  // A checkpoint whose index or rank file is a FIFO or a device.
  std::filesystem::create_directories(dir + "/ck");
  ASSERT_EQ(std::system(("mkfifo '" + dir + "/ck/index.json'").c_str()), 0);
  Outcome o = run(dir + "/model.plan " + inputs() + " --resume " + dir + "/ck");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("'" + dir + "/ck/index.json': not a regular file"),
            std::string::npos)
      << o.err;
}

TEST_F(FsdpRun, TheDeviceIsAnOption) {
  Outcome o = run(dir + "/model.plan " + inputs() + " --device cpu");
  EXPECT_EQ(o.status, 0) << o.err;
  o = run(dir + "/model.plan " + inputs() + " --device tpu");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("unknown device 'tpu'; expected cpu, cuda or cuda:N"),
            std::string::npos)
      << o.err;
  // No GPU has number 999: refused, naming the device (and why: no GPU or
  // driver here, no such GPU there, or a build without the CUDA plugin).
  o = run(dir + "/model.plan " + inputs() + " --device cuda:999");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("device 'cuda:999': "), std::string::npos) << o.err;
}

TEST_F(FsdpRun, InputNamesMayHoldEquals) {
  PlanBuilder b;
  uint32_t x = b.input("x=1", plan::DType::F32, {2, 3});
  b.kernel("relu", {x}, {b.output("y", plan::DType::F32, {2, 3})});
  std::vector<uint8_t> bytes = b.finish();
  std::ofstream(dir + "/eq.plan", std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  // Split at the '=' whose left side is a declared input, not the first.
  Outcome o = run(dir + "/eq.plan --input x=1=" + dir + "/x.npy --json");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("\"name\": \"x=1\""), std::string::npos) << o.out;
  o = run(dir + "/eq.plan --input x=" + dir + "/x.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: the plan has no input 'x'; its inputs:\n"
                   "  x=1 float32 [2, 3]\n");
}

TEST_F(FsdpRun, AMultiRankPlanAloneAsksForMpirun) {
  PlanBuilder b;
  uint32_t x = b.input("x", plan::DType::F32, {2, 3});
  b.kernel("relu", {x}, {b.output("y", plan::DType::F32, {2, 3})});
  b.worldSize(2);
  std::vector<uint8_t> bytes = b.finish();
  std::ofstream(dir + "/two.plan", std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  // Open MPI's own abort before: "MPI_Comm_c2f() was called before MPI_INIT".
  Outcome o = run(dir + "/two.plan --input x=" + dir + "/x.npy");
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err, "fsdp-run: error: the plan is for 2 ranks; launch it with "
                   "mpirun -np 2 or run it with --local-ranks 2\n");
  // As a local group of the wrong size: the size it needs.
  o = run(dir + "/two.plan --input x=" + dir + "/x.npy --local-ranks 3");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("the plan is for 2 ranks; run it with --local-ranks 2, not 3"),
            std::string::npos)
      << o.err;
  // --describe reads plans of any world size.
  o = run(dir + "/two.plan --describe");
  EXPECT_EQ(o.status, 0) << o.err;
}

} // namespace
