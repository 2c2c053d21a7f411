//===- SessionHarness.h - Running small plans through the C API -*- C++ -*-===//

#ifndef FSDPRT_TEST_SESSIONHARNESS_H
#define FSDPRT_TEST_SESSIONHARNESS_H

#include "PlanBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace fsdprt::test {

/// Takes a status: its message ("" for success); frees it.
inline std::string take(fsdprt_status_t status) {
  std::string text = status ? fsdprt_status_message(status) : "";
  fsdprt_status_free(status);
  return text;
}

/// Owns a plan and a session built from plan bytes; `error` holds the
/// first failure of loading or creating them.
struct Session {
  fsdprt_plan_t *plan = nullptr;
  fsdprt_session_t *session = nullptr;
  std::string error;

  /// `device`: the session's device option (nullptr: the CPU).
  explicit Session(const std::vector<uint8_t> &bytes, const char *dir = nullptr,
                   int threads = 2, const char *device = nullptr) {
    error = take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &plan));
    if (!error.empty())
      return;
    if (!device) {
      error = take(fsdprt_session_create(plan, dir, threads, &session));
      return;
    }
    fsdprt_session_options_t options;
    fsdprt_session_options_init(&options);
    options.model_dir = dir;
    options.num_threads = threads;
    options.device = device;
    error = take(fsdprt_session_create_with_options(plan, &options, &session));
  }
  ~Session() {
    fsdprt_session_destroy(session);
    fsdprt_plan_destroy(plan);
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  std::string set(const std::string &name, const std::vector<uint8_t> &bytes) {
    return take(fsdprt_session_set_input(session, name.c_str(), bytes.data(),
                                         bytes.size()));
  }
  std::string run() { return take(fsdprt_session_run(session)); }
  std::string get(const std::string &name, std::vector<uint8_t> &bytes) {
    return take(fsdprt_session_get_output(session, name.c_str(), bytes.data(),
                                          bytes.size()));
  }
};

/// Raw bytes read as elements of type T.
template <typename T> std::vector<T> as(const std::vector<uint8_t> &bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

/// A tensor given to or read from a kernel: dtype, shape and raw bytes.
struct Value {
  plan::DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;

  template <typename T> std::vector<T> as() const { return test::as<T>(bytes); }
};

template <typename T>
Value valueOf(plan::DType dtype, const Shape &shape, const std::vector<T> &v) {
  EXPECT_EQ(static_cast<int64_t>(v.size()), numel(shape));
  Value out{dtype, shape, std::vector<uint8_t>(v.size() * sizeof(T))};
  if (!v.empty()) // an empty vector's data() may be null
    std::memcpy(out.bytes.data(), v.data(), out.bytes.size());
  return out;
}
inline Value f32(const Shape &s, const std::vector<float> &v) {
  return valueOf(plan::DType::F32, s, v);
}
inline Value i64(const Shape &s, const std::vector<int64_t> &v) {
  return valueOf(plan::DType::I64, s, v);
}
inline Value i32(const Shape &s, const std::vector<int32_t> &v) {
  return valueOf(plan::DType::I32, s, v);
}
inline Value f64(const Shape &s, const std::vector<double> &v) {
  return valueOf(plan::DType::F64, s, v);
}
inline Value boolean(const Shape &s, const std::vector<uint8_t> &v) {
  return valueOf(plan::DType::Bool, s, v);
}

/// What a one-kernel run gives: the outputs, or the first failure.
struct Result {
  std::string error;
  std::vector<Value> outputs;
};

/// A plan of one kernel `op` on inputs in0, in1, ... producing outputs
/// out0, ... of the given dtypes and shapes.
inline std::vector<uint8_t>
kernelPlan(const std::string &op, const std::vector<Value> &inputs,
           const std::vector<std::pair<plan::DType, Shape>> &outputs,
           const AttrList &attrs) {
  PlanBuilder b;
  std::vector<uint32_t> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(
        b.input("in" + std::to_string(i), inputs[i].dtype, inputs[i].shape));
  for (size_t i = 0; i < outputs.size(); ++i)
    outs.push_back(b.output("out" + std::to_string(i), outputs[i].first,
                            outputs[i].second));
  b.kernel(op, ins, outs, attrs);
  return b.finish();
}

/// Runs one kernel `op` on `inputs` (named in0, in1, ...) producing outputs
/// of the given dtypes and shapes (out0, ...), through the C API, on
/// `device` (nullptr: the CPU).
inline Result runOp(const std::string &op, const std::vector<Value> &inputs,
                    const std::vector<std::pair<plan::DType, Shape>> &outputs,
                    const AttrList &attrs = {}, int threads = 2,
                    const char *device = nullptr) {
  Result result;
  Session s(kernelPlan(op, inputs, outputs, attrs), nullptr, threads, device);
  result.error = s.error;
  for (size_t i = 0; i < inputs.size() && result.error.empty(); ++i)
    result.error = s.set("in" + std::to_string(i), inputs[i].bytes);
  if (result.error.empty())
    result.error = s.run();
  for (size_t i = 0; i < outputs.size() && result.error.empty(); ++i) {
    Value v{outputs[i].first, outputs[i].second,
            std::vector<uint8_t>(bytesOf(outputs[i].first, outputs[i].second))};
    result.error = s.get("out" + std::to_string(i), v.bytes);
    result.outputs.push_back(std::move(v));
  }
  return result;
}

/// The outputs of the last of `runs` runs of one kernel `op` (a random
/// generator) on `inputs` (in0, ...) producing `outputs` (out0, ...), in a
/// session with `seed` and `threads` on `device` (nullptr: the CPU).
inline Result
runSeeded(const std::string &op, const std::vector<Value> &inputs,
          const std::vector<std::pair<plan::DType, Shape>> &outputs,
          const AttrList &attrs, uint64_t seed, int threads = 2, int runs = 1,
          const char *device = nullptr) {
  std::vector<uint8_t> bytes = kernelPlan(op, inputs, outputs, attrs);
  Result result;
  fsdprt_plan_t *p = nullptr;
  fsdprt_session_t *s = nullptr;
  result.error = take(fsdprt_plan_load_memory(bytes.data(), bytes.size(), &p));
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.num_threads = threads;
  options.seed = seed;
  options.device = device;
  if (result.error.empty())
    result.error = take(fsdprt_session_create_with_options(p, &options, &s));
  for (size_t i = 0; i < inputs.size() && result.error.empty(); ++i) {
    std::string name = "in" + std::to_string(i);
    result.error = take(fsdprt_session_set_input(
        s, name.c_str(), inputs[i].bytes.data(), inputs[i].bytes.size()));
  }
  for (int r = 0; r < runs && result.error.empty(); ++r)
    result.error = take(fsdprt_session_run(s));
  for (size_t i = 0; i < outputs.size() && result.error.empty(); ++i) {
    Value v{outputs[i].first, outputs[i].second,
            std::vector<uint8_t>(bytesOf(outputs[i].first, outputs[i].second))};
    std::string name = "out" + std::to_string(i);
    result.error = take(fsdprt_session_get_output(
        s, name.c_str(), v.bytes.data(), v.bytes.size()));
    result.outputs.push_back(std::move(v));
  }
  fsdprt_session_destroy(s);
  fsdprt_plan_destroy(p);
  return result;
}

inline std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// `values` of `shape` with its dims reordered as torch's permute: dim k of
/// the result is dim perm[k] of the input.
inline std::vector<float> permuted(const std::vector<float> &values,
                                   const Shape &shape,
                                   const std::vector<size_t> &perm) {
  size_t rank = shape.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t k = rank; k-- > 1;)
    strides[k - 1] = strides[k] * shape[k];
  std::vector<float> out(values.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), from = 0;
    for (size_t k = rank; k-- > 0;) {
      int64_t extent = shape[perm[k]];
      from += rest % extent * strides[perm[k]];
      rest /= extent;
    }
    out[i] = values[from];
  }
  return out;
}

/// |got - want| <= tol * (1 + |want|) elementwise; NaNs must match.
inline void expectNear(const std::vector<float> &got,
                       const std::vector<double> &want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
  }
}

/// Row-major strides of `shape`, and the flat index into an operand of
/// `shape` broadcast to `target` (NumPy) for flat index `i` of `target`.
inline int64_t broadcastIndex(int64_t i, const Shape &target,
                              const Shape &shape) {
  int64_t index = 0, stride = 1;
  for (size_t k = 0; k < target.size(); ++k) {
    size_t d = target.size() - 1 - k;
    int64_t coord = i % target[d];
    i /= target[d];
    if (k < shape.size()) {
      int64_t extent = shape[shape.size() - 1 - k];
      index += (extent == 1 ? 0 : coord) * stride;
      stride *= extent;
    }
  }
  return index;
}

} // namespace fsdprt::test

#endif // FSDPRT_TEST_SESSIONHARNESS_H
