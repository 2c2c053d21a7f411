//===- DeviceKernelTest.cu - The CUDA kernels on a GPU against the host ---===//
//
// Label `cuda`: each device launcher of runtime/backends/cuda/launch.h runs
// on the GPU and its output is compared with the same kernel body run on
// the host (host_launch.h), which the cuda-host tests compare with the CPU
// backend. Sizes as there: 1, not multiples of a block, long rows (and
// the integer reductions and arg_max/arg_min of int32 and int64). Without
// a usable GPU it says why and exits 77 (ctest: skipped).
//
//===----------------------------------------------------------------------===//

#include "host_launch.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/grid_sample.h"
#include "kernels/pool.h"
#include "kernels/recurrent.h"
#include "kernels/rows.h"
#include "launch.h"

#include "../../src/philox.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cuda = fsdprt::cuda;

namespace {

constexpr int kSkipped = 77;
int failures = 0, checks = 0;

std::vector<float> random(size_t n, unsigned seed, float scale = 1) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen) * scale;
  return v;
}

/// n elements of all-ones bytes (NaN, 255, -1): what a kernel must
/// overwrite, so that an output it left alone fails the comparison.
template <typename T> std::vector<T> poison(size_t n) {
  std::vector<T> v(n);
  std::memset(v.data(), 0xff, n * sizeof(T));
  return v;
}

/// A device copy of a host vector, freed at scope end.
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<float> &host) : n(host.size()) {
    cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(float));
    cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(data); }
  std::vector<float> read() const {
    std::vector<float> host(n);
    cudaMemcpy(host.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost);
    return host;
  }
  float *data = nullptr;
  size_t n;
};

/// Compares `output` (read once the device is synchronised: a launch in
/// the same call's arguments may run after the arguments are evaluated)
/// with the host's values.
void expect(const std::string &what, cudaError_t launched,
            const DeviceBuffer &output, const std::vector<float> &want,
            double tol) {
  ++checks;
  cudaError_t synced = cudaDeviceSynchronize();
  if (launched != cudaSuccess || synced != cudaSuccess) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what.c_str(),
                 cudaGetErrorString(launched != cudaSuccess ? launched : synced));
    ++failures;
    return;
  }
  std::vector<float> got = output.read();
  for (size_t i = 0; i < want.size(); ++i) {
    bool same = std::isnan(want[i]) ? std::isnan(got[i])
                : got[i] == want[i] // infinities too
                    ? true
                    : std::fabs(got[i] - want[i]) <=
                          tol * (1 + std::fabs(want[i]));
    if (!same) {
      std::fprintf(stderr, "FAIL: %s: at %zu the GPU gives %.9g, the host %.9g\n",
                   what.c_str(), i, got[i], want[i]);
      ++failures;
      return;
    }
  }
}

template <cuda::Unary Op> void unary(int64_t n, unsigned seed) {
  std::vector<float> x = random(n, seed, 2), want(n);
  if (Op == cuda::Unary::Log || Op == cuda::Unary::Sqrt)
    for (float &v : x)
      v = std::fabs(v) + 1e-3f;
  cuda::hostForEach(cuda::UnaryBody<Op>{x.data(), want.data()}, n);
  DeviceBuffer dx(x), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchUnary(Op, {}, dx.data, dy.data, n, nullptr);
  cudaDeviceSynchronize();
  expect(std::string(cuda::unaryName(Op)) + " n=" + std::to_string(n), e,
         dy, want, 4e-6);
}

/// A unary function with its attributes (the cuda-host tests' values),
/// its inputs in its domain and the values that matter among them.
void unaryWith(cuda::Unary op, cuda::UnaryParams params, int64_t n,
               unsigned seed) {
  std::vector<float> x = random(n, seed, 3), want(n);
  for (float &v : x)
    if (op == cuda::Unary::Asin || op == cuda::Unary::Acos ||
        op == cuda::Unary::Atanh)
      v = std::tanh(v);
    else if (op == cuda::Unary::Acosh)
      v = 1 + std::fabs(v);
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.5f, 2.5f,
                           -2.5f, 1.0f, -1.0f, 6.0f, -6.0f};
  for (size_t i = 0; i < sizeof special / sizeof *special && i < x.size(); ++i)
    x[i] = special[i];
  cuda::withUnary(op, [&](auto f) {
    cuda::hostForEach(
        cuda::UnaryBody<decltype(f)::value>{x.data(), want.data(), params}, n);
  });
  DeviceBuffer dx(x), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchUnary(op, params, dx.data, dy.data, n, nullptr);
  expect(std::string(cuda::unaryName(op)) + " n=" + std::to_string(n), e,
         dy, want, 4e-6);
}

template <cuda::Binary Op>
void binary(const std::vector<int64_t> &as, const std::vector<int64_t> &bs,
            const std::vector<int64_t> &out, unsigned seed) {
  auto count = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  std::vector<float> a = random(count(as), seed), b = random(count(bs), seed + 1),
                     want(count(out));
  if (Op == cuda::Binary::Pow)
    for (float &v : a)
      v = std::fabs(v) + 0.5f;
  cuda::Broadcast plan = cuda::planBroadcast(out, {as, bs});
  cuda::hostForEach(cuda::BinaryBody<Op>{plan, a.data(), b.data(), want.data()},
                    count(out));
  DeviceBuffer da(a), db(b), dy(poison<float>(want.size()));
  cudaError_t e =
      cuda::launchBinary(Op, plan, da.data, db.data, dy.data, count(out), nullptr);
  expect(std::string(cuda::binaryName(Op)) + " broadcast", e, dy, want, 1e-6);
}

template <cuda::Binary Op> void binaries(unsigned &seed) {
  binary<Op>({257}, {257}, {257}, seed++);
  binary<Op>({64, 1025}, {1025}, {64, 1025}, seed++);
  binary<Op>({2, 3, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}, seed++);
}

void softmax(bool log, int64_t outer, int64_t n, int64_t inner, unsigned seed) {
  std::vector<float> x = random(outer * n * inner, seed, 8), want(x.size());
  if (log)
    cuda::hostForEachRow(cuda::SoftmaxBody<true>{x.data(), want.data(), n, inner},
                         outer * inner, 1);
  else
    cuda::hostForEachRow(cuda::SoftmaxBody<false>{x.data(), want.data(), n, inner},
                         outer * inner, 1);
  DeviceBuffer dx(x), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchSoftmax(log, dx.data, dy.data, outer, n, inner, nullptr);
  expect(std::string(log ? "log_softmax" : "softmax") + " n=" + std::to_string(n) +
             " inner=" + std::to_string(inner),
         e, dy, want, n > 10000 ? 2e-5 : 2e-6);
}

void sum(bool mean, int64_t outer, int64_t n, int64_t inner, unsigned seed) {
  std::vector<float> x = random(outer * n * inner, seed), want(outer * inner);
  if (mean)
    cuda::hostForEachRow(cuda::SumRows<true>{x.data(), want.data(), n, inner},
                         outer * inner, 1);
  else
    cuda::hostForEachRow(cuda::SumRows<false>{x.data(), want.data(), n, inner},
                         outer * inner, 1);
  DeviceBuffer dx(x), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchSum(mean, dx.data, dy.data, outer, n, inner, nullptr);
  expect(std::string(mean ? "reduce_mean" : "reduce_sum") + " n=" + std::to_string(n), e,
         dy, want, n > 10000 ? 2e-4 : 2e-5);
}

void norm(bool rms, int64_t rows, int64_t n, unsigned seed) {
  std::vector<float> x = random(rows * n, seed, 3), s = random(n, seed + 1),
                     b = random(n, seed + 2), want(x.size());
  const float *bias = rms ? nullptr : b.data();
  if (rms)
    cuda::hostForEachRow(cuda::NormBody<true>{x.data(), s.data(), bias, want.data(), n, 1e-6f}, rows, 1);
  else
    cuda::hostForEachRow(cuda::NormBody<false>{x.data(), s.data(), bias, want.data(), n, 1e-5f}, rows, 1);
  DeviceBuffer dx(x), ds(s), db(b), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchNorm(rms, dx.data, ds.data, rms ? nullptr : db.data,
                                   dy.data, rows, n, rms ? 1e-6f : 1e-5f, {}, nullptr);
  expect(std::string(rms ? "rms_norm" : "layer_norm") + " n=" + std::to_string(n), e,
         dy, want, 2e-5);
  if (!rms) { // with the mean and inverse std outputs
    std::vector<float> mean(rows), inv(rows), y2(x.size());
    cuda::hostForEachRow(cuda::NormBody<false>{x.data(), s.data(), bias, y2.data(), n,
                                               1e-5f, {mean.data(), inv.data()}},
                         rows, 1);
    DeviceBuffer dm(poison<float>(rows)), di(poison<float>(rows));
    e = cuda::launchNorm(false, dx.data, ds.data, db.data, dy.data, rows, n, 1e-5f,
                         {dm.data, di.data}, nullptr);
    expect("layer_norm mean n=" + std::to_string(n), e, dm, mean, 2e-5);
    expect("layer_norm inv_std_dev n=" + std::to_string(n), e, di, inv, 2e-5);
  }
  // A one-value scale, as the backend runs it: expanded to a row by a
  // strided read (stride 0), then the norm reading the row.
  std::vector<float> one = {s[0]}, row(n, s[0]), wantOne(x.size());
  if (rms)
    cuda::hostForEachRow(cuda::NormBody<true>{x.data(), row.data(), nullptr, wantOne.data(), n, 1e-6f}, rows, 1);
  else
    cuda::hostForEachRow(cuda::NormBody<false>{x.data(), row.data(), bias, wantOne.data(), n, 1e-5f}, rows, 1);
  DeviceBuffer dOne(one), dRow(poison<float>(n)), dyOne(poison<float>(x.size()));
  e = cuda::launchStridedRead(4, cuda::planStrided({n}, {0}), dOne.data,
                              dRow.data, 0, n, nullptr);
  if (e == cudaSuccess)
    e = cuda::launchNorm(rms, dx.data, dRow.data, rms ? nullptr : db.data,
                         dyOne.data, rows, n, rms ? 1e-6f : 1e-5f, {}, nullptr);
  expect(std::string(rms ? "rms_norm" : "layer_norm") + " one-value scale n=" +
             std::to_string(n),
         e, dyOne, wantOne, 2e-5);
}

/// activation_grad against its body run on the host.
void activationGrad(cuda::ActivationGrad kind, int64_t n, unsigned seed) {
  std::vector<float> dy = random(n, seed), x = random(n, seed + 1, 3), want(n);
  cuda::ActivationGradBody body{dy.data(), x.data(), want.data(), kind};
  cuda::hostForEach(body, n);
  DeviceBuffer ddy(dy), dxin(x), ddx(poison<float>(n));
  cudaError_t e = cuda::launchActivationGrad(
      cuda::ActivationGradBody{ddy.data, dxin.data, ddx.data, kind}, n, nullptr);
  expect("activation_grad " + std::to_string(static_cast<int>(kind)) +
             " n=" + std::to_string(n),
         e, ddx, want, 1e-5);
}

/// layer_norm_grad / rms_norm_grad (dx, dscale, dbias) against the bodies
/// run on the host.
void normGrad(bool rms, int64_t rows, int64_t n, unsigned seed) {
  int64_t floats = cuda::normGradScratchFloats(rows, n);
  std::vector<float> dy = random(rows * n, seed),
                     x = random(rows * n, seed + 1, 3), s = random(n, seed + 2),
                     dx(x.size()), ds(n), db(n), scratch(floats);
  cuda::HostLauncher host;
  cuda::normGrad(host, {dy.data(), x.data(), s.data(), dx.data(), ds.data(),
                        db.data(), scratch.data(), rows, n, 1e-5f, rms});
  DeviceBuffer ddy(dy), dxin(x), dsc(s), ddx(poison<float>(dx.size())),
      dds(poison<float>(n)), ddb(poison<float>(n)),
      dscratch(poison<float>(floats));
  cudaError_t e =
      cuda::launchNormGrad({ddy.data, dxin.data, dsc.data, ddx.data, dds.data,
                            ddb.data, dscratch.data, rows, n, 1e-5f, rms},
                           nullptr);
  std::string what = std::string(rms ? "rms_norm_grad" : "layer_norm_grad") +
                     " n=" + std::to_string(n);
  expect(what + " dx", e, ddx, dx, 2e-5);
  expect(what + " dscale", e, dds, ds, 1e-4);
  expect(what + " dbias", e, ddb, db, 1e-4);
}

/// Device copies of a host array of any type, freed at scope end.
template <typename T> struct DeviceArray {
  explicit DeviceArray(const std::vector<T> &host) : n(host.size()) {
    cudaMalloc(&data, std::max<size_t>(n, 1) * sizeof(T));
    cudaMemcpy(data, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(data); }
  T read(size_t i) const {
    T v;
    cudaMemcpy(&v, data + i, sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  std::vector<T> readAll() const {
    std::vector<T> host(n);
    cudaMemcpy(host.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  T *data = nullptr;
  size_t n;
};

/// Like expect, for outputs that must equal the host's bit for bit.
template <typename T>
void expectSame(const std::string &what, cudaError_t launched,
                const DeviceArray<T> &got, const std::vector<T> &want) {
  ++checks;
  cudaError_t synced = cudaDeviceSynchronize();
  if (launched != cudaSuccess || synced != cudaSuccess) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what.c_str(),
                 cudaGetErrorString(launched != cudaSuccess ? launched : synced));
    ++failures;
    return;
  }
  std::vector<T> host = got.readAll();
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&host[i], &want[i], sizeof(T)) != 0) {
      std::fprintf(stderr, "FAIL: %s: element %zu differs from the host's\n",
                   what.c_str(), i);
      ++failures;
      return;
    }
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// n random bytes as elements of T.
template <typename T> std::vector<T> randomBits(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (T &x : v)
    x = static_cast<T>(gen() % 3); // a few values: equal ones are common
  return v;
}

template <cuda::Logic Op, typename T>
void logic(fsdprt_dtype_t dtype, const std::vector<int64_t> &as,
           const std::vector<int64_t> &bs, const std::vector<int64_t> &out,
           unsigned seed) {
  std::vector<T> a = randomBits<T>(count(as), seed), b = randomBits<T>(count(bs), seed + 1);
  std::vector<uint8_t> want(count(out));
  cuda::Broadcast plan = cuda::planBroadcast(out, {as, bs});
  cuda::hostForEach(cuda::LogicBody<Op, T>{plan, a.data(), b.data(), want.data()},
                    count(out));
  DeviceArray<T> da(a), db(b);
  DeviceArray<uint8_t> dy(poison<uint8_t>(want.size()));
  cudaError_t e = cuda::launchLogic(Op, dtype, plan, da.data, db.data, dy.data,
                                    count(out), nullptr);
  const char *type = dtype == FSDPRT_F32 ? "f32" : dtype == FSDPRT_I64 ? "i64" : "bool";
  expectSame(std::string(cuda::logicName(Op)) + " of " + type +
                 " n=" + std::to_string(count(out)),
             e, dy, want);
}

template <cuda::Logic Op, typename T> void logics(fsdprt_dtype_t dtype, unsigned &seed) {
  logic<Op, T>(dtype, {1}, {1}, {1}, seed++);
  logic<Op, T>(dtype, {257}, {}, {257}, seed++);
  logic<Op, T>(dtype, {64, 1025}, {1025}, {64, 1025}, seed++);
  logic<Op, T>(dtype, {2, 3, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}, seed++);
  logic<Op, T>(dtype, {5000000}, {5000000}, {5000000}, seed++);
}

void notOf(int64_t n, unsigned seed) {
  std::vector<uint8_t> x = randomBits<uint8_t>(n, seed), want(n);
  cuda::hostForEach(cuda::NotBody{x.data(), want.data()}, n);
  DeviceArray<uint8_t> dx(x), dy(poison<uint8_t>(n));
  expectSame("not n=" + std::to_string(n), cuda::launchNot(dx.data, dy.data, n, nullptr),
             dy, want);
}

template <typename T>
void where(const std::vector<int64_t> &cs, const std::vector<int64_t> &as,
           const std::vector<int64_t> &bs, const std::vector<int64_t> &out,
           unsigned seed) {
  std::vector<uint8_t> cond = randomBits<uint8_t>(count(cs), seed);
  std::vector<T> a = randomBits<T>(count(as), seed + 1),
                 b = randomBits<T>(count(bs), seed + 2), want(count(out));
  for (T &v : b)
    v += 3; // unequal to every a
  cuda::Broadcast plan = cuda::planBroadcast(out, {cs, as, bs});
  cuda::hostForEach(cuda::WhereBody<T>{plan, cond.data(), a.data(), b.data(), want.data()},
                    count(out));
  DeviceArray<uint8_t> dc(cond);
  DeviceArray<T> da(a), db(b), dy(poison<T>(want.size()));
  cudaError_t e = cuda::launchWhere(sizeof(T), plan, dc.data, da.data, db.data, dy.data,
                                    count(out), nullptr);
  expectSame("where of " + std::to_string(sizeof(T)) + "-byte elements n=" +
                 std::to_string(count(out)),
             e, dy, want);
}

template <typename T> void wheres(unsigned &seed) {
  where<T>({1}, {1}, {1}, {1}, seed++);
  where<T>({257}, {257}, {}, {257}, seed++);
  where<T>({2, 1, 4}, {3, 1}, {4}, {2, 3, 4}, seed++);
  where<T>({5000000}, {5000000}, {1}, {5000000}, seed++);
}

/// is_inf (both flags) or isnan, bit for bit.
void floatClass(bool nan, int64_t n, unsigned seed) {
  std::vector<float> x = random(n, seed);
  for (size_t i = 0; i < x.size(); i += 3)
    x[i] = i % 2 ? INFINITY : i % 5 ? -INFINITY : NAN;
  std::vector<uint8_t> want(n);
  cuda::FloatClassBody host{x.data(), want.data(), nan, true, false};
  cuda::hostForEach(host, n);
  DeviceArray<float> dx(x);
  DeviceArray<uint8_t> dy(poison<uint8_t>(n));
  cuda::FloatClassBody body{dx.data, dy.data, nan, true, false};
  expectSame(std::string(nan ? "isnan" : "is_inf") + " n=" + std::to_string(n),
             cuda::launchFloatClass(body, n, nullptr), dy, want);
}

/// int64 sign, neg and abs, bit for bit.
void unary64(cuda::Unary op, int64_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> x(n), want(n);
  for (int64_t &v : x)
    v = static_cast<int64_t>(gen()) >> (gen() % 64);
  x[0] = INT64_MIN;
  cuda::hostForEach(cuda::Unary64{op, x.data(), want.data()}, n);
  DeviceArray<int64_t> dx(x), dy(poison<int64_t>(n));
  expectSame("int64 " + std::string(cuda::unaryName(op)) +
                 " n=" + std::to_string(n),
             cuda::launchUnary64(op, dx.data, dy.data, n, nullptr), dy, want);
}

/// A broadcasting binary function on float or int64 operands of small
/// values, bit for bit (int64 zero divisors among them; no float ones,
/// whose NaN's sign bit the host's libm and the GPU's choose alike only
/// by chance).
template <cuda::Binary Op, typename T>
void exactBinary(const std::vector<int64_t> &as, const std::vector<int64_t> &bs,
                 const std::vector<int64_t> &out, unsigned seed) {
  std::mt19937 gen(seed);
  auto draw = [&](int64_t n) {
    std::vector<T> v(n);
    for (T &x : v)
      x = std::is_same_v<T, float>
              ? static_cast<T>((int(gen() % 800) - 400) / 37.0f + 0.5f / 37)
              : static_cast<T>(int(gen() % 41) - 20);
    return v;
  };
  std::vector<T> a = draw(count(as)), b = draw(count(bs)), want(count(out));
  cuda::Broadcast plan = cuda::planBroadcast(out, {as, bs});
  cuda::hostForEach(cuda::BinaryBody<Op, T>{plan, a.data(), b.data(), want.data()},
                    count(out));
  DeviceArray<T> da(a), db(b), dy(poison<T>(want.size()));
  cudaError_t e =
      cuda::launchBinary(Op, plan, da.data, db.data, dy.data, count(out), nullptr);
  expectSame(std::string(cuda::binaryName(Op)) +
                 (std::is_same_v<T, float> ? " of f32" : " of i64") +
                 (Op == cuda::Binary::FloorMod ? " (floor)" : "") +
                 " n=" + std::to_string(count(out)),
             e, dy, want);
}

/// A broadcasting binary function on a narrow integer T (computed in
/// int64, wrapped to T): small values with T's extremes, -1 and zero
/// divisors among them, bit for bit.
template <cuda::Binary Op, typename T>
void narrowBinary(fsdprt_dtype_t dtype, const char *name, unsigned seed) {
  const std::vector<int64_t> as = {64, 1025}, bs = {1025}, out = {64, 1025};
  std::mt19937 gen(seed);
  auto draw = [&](int64_t n) {
    std::vector<T> v(n);
    for (T &x : v)
      x = static_cast<T>(int(gen() % 41) - 20);
    v[1] = std::numeric_limits<T>::min(), v[2] = std::numeric_limits<T>::max();
    v[3] = static_cast<T>(-1);
    return v;
  };
  std::vector<T> a = draw(count(as)), b = draw(count(bs)), want(count(out));
  cuda::Broadcast plan = cuda::planBroadcast(out, {as, bs});
  cuda::hostForEach(cuda::BinaryBody<Op, T>{plan, a.data(), b.data(), want.data()},
                    count(out));
  DeviceArray<T> da(a), db(b), dy(poison<T>(want.size()));
  cudaError_t e = cuda::launchIntegerBinary(Op, dtype, plan, da.data, db.data,
                                            dy.data, count(out), nullptr);
  expectSame(std::string(cuda::binaryName(Op)) + " of " + name +
                 (Op == cuda::Binary::FloorMod ? " (floor)" : ""),
             e, dy, want);
}

template <typename T>
void narrowBinaries(fsdprt_dtype_t dtype, const char *name, unsigned &seed) {
  using B = cuda::Binary;
  narrowBinary<B::Add, T>(dtype, name, seed++);
  narrowBinary<B::Sub, T>(dtype, name, seed++);
  narrowBinary<B::Mul, T>(dtype, name, seed++);
  narrowBinary<B::Div, T>(dtype, name, seed++);
  narrowBinary<B::Mod, T>(dtype, name, seed++);
  narrowBinary<B::FloorMod, T>(dtype, name, seed++);
  narrowBinary<B::Max, T>(dtype, name, seed++);
  narrowBinary<B::Min, T>(dtype, name, seed++);
}

/// pow of int64 bases in [1, 20] by exponents of E in [0, 12] (powers
/// int64 holds, integers in floating point too, so that the GPU's pow
/// must be exact where the host's is), bit for bit.
template <typename E>
void powInt64(fsdprt_dtype_t exponent, const char *name, unsigned seed) {
  const std::vector<int64_t> as = {300, 1}, bs = {1, 257}, out = {300, 257};
  std::mt19937 gen(seed);
  std::vector<int64_t> a(count(as)), want(count(out));
  std::vector<E> b(count(bs));
  for (int64_t &x : a)
    x = static_cast<int64_t>(gen() % 20) + 1;
  for (E &x : b)
    x = static_cast<E>(gen() % 13);
  cuda::Broadcast plan = cuda::planBroadcast(out, {as, bs});
  cuda::hostForEach(cuda::PowInt64Body<E>{plan, a.data(), b.data(), want.data()},
                    count(out));
  DeviceArray<int64_t> da(a), dy(poison<int64_t>(want.size()));
  DeviceArray<E> db(b);
  expectSame(std::string("int64 pow by ") + name,
             cuda::launchPowInt64(exponent, plan, da.data, db.data, dy.data,
                                  count(out), nullptr),
             dy, want);
}

template <cuda::Binary Op, typename T> void exactBinaries(unsigned &seed) {
  exactBinary<Op, T>({1}, {1}, {1}, seed++);
  exactBinary<Op, T>({257}, {}, {257}, seed++);
  exactBinary<Op, T>({64, 1025}, {1025}, {64, 1025}, seed++);
  exactBinary<Op, T>({2, 3, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}, seed++);
  exactBinary<Op, T>({5000000}, {5000000}, {5000000}, seed++);
}

void crossEntropy(int64_t n, int64_t classes, bool mean, bool badLabel,
                  unsigned seed) {
  std::vector<float> scores = random(n * classes, seed, 3), g = {0.5f};
  std::vector<int64_t> labels(n);
  for (int64_t p = 0; p < n; ++p)
    labels[p] = (p * 7919) % classes;
  if (badLabel)
    labels[n / 2] = classes + 3;
  // The host: the same kernels in the same order (launch.h), one lane, or
  // for long rows 32 (one lane's fp32 sum of 50,257 terms is itself too
  // far from the GPU's tree of sums for the tolerance).
  cuda::ErrorSlot hostError{0, 0};
  cuda::CrossEntropyInputs in{scores.data(), labels.data(), nullptr, classes, 1,
                              false, 0, &hostError};
  std::vector<float> hostScratch(2 * n + 1), wantLoss(1), wantGrad(n * classes);
  cuda::HostLauncher host{classes > 10000 ? 32 : 1};
  cuda::crossEntropy(host, in, n, false, mean, hostScratch.data(), wantLoss.data());
  cuda::crossEntropyGrad(host, in, n, g.data(), false, mean, hostScratch.data(),
                         wantGrad.data());
  // The device.
  DeviceBuffer ds(scores), dg(g), dy(poison<float>(1)), dgrad(poison<float>(wantGrad.size())),
      scratch(std::vector<float>(2 * n + 1));
  DeviceArray<int64_t> dl(labels);
  DeviceArray<cuda::ErrorSlot> error(std::vector<cuda::ErrorSlot>{{0, 0}});
  cuda::CrossEntropyInputs din{ds.data, dl.data, nullptr, classes, 1, false, 0,
                               error.data};
  std::string what = "cross-entropy n=" + std::to_string(n) + " C=" +
                     std::to_string(classes) + (mean ? " mean" : " sum");
  cudaError_t e = cuda::launchCrossEntropy(din, n, false, mean, scratch.data, dy.data, nullptr);
  expect(what, e, dy, wantLoss, 1e-5);
  e = cuda::launchCrossEntropyGrad(din, n, dg.data, false, mean, scratch.data, dgrad.data,
                                   nullptr);
  expect(what + " grad", e, dgrad, wantGrad, 1e-5);
  cuda::ErrorSlot got = error.read(0);
  ++checks;
  if (got.code != hostError.code || (badLabel && got.detail != classes + 3)) {
    std::fprintf(stderr, "FAIL: %s: error slot %d/%lld, the host's %d/%lld\n",
                 what.c_str(), got.code, got.detail, hostError.code,
                 hostError.detail);
    ++failures;
  }
}

void gather(int64_t outer, int64_t dim, int64_t count, int64_t inner, bool bad,
            unsigned seed) {
  std::vector<float> data = random(outer * dim * inner, seed), want(outer * count * inner);
  std::vector<int64_t> idx(count);
  for (int64_t k = 0; k < count; ++k)
    idx[k] = (k * 7919) % (2 * dim) - dim;
  if (bad)
    idx[count / 2] = dim + 5;
  cuda::ErrorSlot hostError{0, 0};
  cuda::hostForEach(cuda::GatherBody<uint32_t, int64_t>{
                        reinterpret_cast<const uint32_t *>(data.data()), idx.data(),
                        reinterpret_cast<uint32_t *>(want.data()), dim, count, inner,
                        &hostError},
                    outer * count * inner);
  DeviceBuffer dd(data), dy(poison<float>(want.size()));
  DeviceArray<int64_t> di(idx);
  DeviceArray<cuda::ErrorSlot> error(std::vector<cuda::ErrorSlot>{{0, 0}});
  std::string what = "gather dim=" + std::to_string(dim) + " count=" + std::to_string(count);
  cudaError_t e = cuda::launchGather(4, false, dd.data, di.data, dy.data, outer, dim, count,
                                     inner, error.data, nullptr);
  expect(what, e, dy, want, 0);
  cuda::ErrorSlot got = error.read(0);
  ++checks;
  if (got.code != hostError.code || got.detail != hostError.detail) {
    std::fprintf(stderr, "FAIL: %s: error slot %d/%lld, the host's %d/%lld\n", what.c_str(),
                 got.code, got.detail, hostError.code, hostError.detail);
    ++failures;
  }
}

void stridedRead(const std::vector<int64_t> &out, const std::vector<int64_t> &strides,
                 int64_t offset, size_t source, unsigned seed) {
  std::vector<float> x = random(source, seed);
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  std::vector<float> want(n);
  cuda::Broadcast plan = cuda::planStrided(out, strides);
  cuda::hostForEach(cuda::StridedReadBody<uint32_t>{
                        plan, reinterpret_cast<const uint32_t *>(x.data()),
                        reinterpret_cast<uint32_t *>(want.data()), offset},
                    n);
  DeviceBuffer dx(x), dy(poison<float>(want.size()));
  cudaError_t e = cuda::launchStridedRead(4, plan, dx.data, dy.data, offset, n, nullptr);
  expect("strided read of " + std::to_string(n), e, dy, want, 0);
}

template <cuda::Reduce Kind>
void reduce(const std::vector<int64_t> &shape, const std::vector<int64_t> &axes,
            unsigned seed) {
  std::vector<float> x = random(count(shape), seed);
  if ((Kind == cuda::Reduce::Max || Kind == cuda::Reduce::Min) && x.size() > 1000)
    x[x.size() / 3] = NAN; // one output is NaN
  cuda::ReducePlan plan = cuda::planReduce(shape, axes);
  int64_t floats = cuda::reduceScratchFloats(Kind, plan);
  std::vector<float> want(plan.rows), scratch(floats);
  // A row of millions in 32 lanes: one lane's fp32 sum is far from exact.
  cuda::HostLauncher host{plan.count > 1000000 ? 32 : 1};
  cuda::reduce(host, Kind, plan, x.data(), want.data(), scratch.data());
  DeviceBuffer dx(x), dy(poison<float>(want.size())), ds(poison<float>(floats));
  cudaError_t e =
      cuda::launchReduce(Kind, plan, dx.data, dy.data, ds.data, nullptr);
  expect(std::string(cuda::reduceName(Kind)) + " of " + std::to_string(x.size()) +
             " into " + std::to_string(plan.rows),
         e, dy, want,
         Kind == cuda::Reduce::Max || Kind == cuda::Reduce::Min ? 0
         : plan.count > 10000                                  ? 2e-4
                                                               : 2e-5);
}

template <cuda::Reduce Kind> void reductions(unsigned &seed) {
  reduce<Kind>({1}, {0}, seed++);
  reduce<Kind>({4, 6, 5, 7}, {0, 2}, seed++);
  reduce<Kind>({4, 6, 5, 7}, {1, 3}, seed++);
  reduce<Kind>({2, 100003}, {1}, seed++);
  reduce<Kind>({100003, 3}, {0}, seed++);
  reduce<Kind>({8, 1024, 768}, {0, 1},
               seed++);                     // by columns: GPT-2's bias gradient
  reduce<Kind>({70000, 3, 2}, {1}, seed++); // more rows than blocks
  reduce<Kind>({5000000}, {}, seed++);
}

/// An integer reduction (IntegerReduceBody) of T spread over T's range, so
/// that sums and products wrap, bit for bit as on the host.
template <typename T>
void integerReduce(cuda::Reduce kind, const std::vector<int64_t> &shape,
                   const std::vector<int64_t> &axes, unsigned seed) {
  std::mt19937_64 draw(seed);
  std::vector<T> x(count(shape));
  for (T &v : x)
    v = static_cast<T>(draw());
  cuda::ReducePlan plan = cuda::planReduce(shape, axes);
  fsdprt_dtype_t dtype = sizeof(T) == 4 ? FSDPRT_I32 : FSDPRT_I64;
  std::vector<T> want(plan.rows);
  cuda::IntegerReduceBody body{plan, x.data(), want.data(), dtype, kind};
  cuda::hostForEach(body, plan.rows);
  DeviceArray<T> dx(x), dy(poison<T>(want.size()));
  body.x = dx.data, body.y = dy.data;
  expectSame(std::string(cuda::reduceName(kind)) + " of " +
                 std::to_string(x.size()) +
                 (sizeof(T) == 4 ? " int32" : " int64"),
             cuda::launchIntegerReduce(body, nullptr), dy, want);
}

void integerReductions(unsigned &seed) {
  for (cuda::Reduce kind :
       {cuda::Reduce::Sum, cuda::Reduce::Prod, cuda::Reduce::SumSquare,
        cuda::Reduce::Max, cuda::Reduce::Min}) {
    integerReduce<int64_t>(kind, {4, 6, 5, 7}, {0, 2}, seed++);
    integerReduce<int64_t>(kind, {70000, 3, 2}, {1}, seed++);
    integerReduce<int32_t>(kind, {2, 100003}, {1}, seed++);
    integerReduce<int32_t>(kind, {1}, {0}, seed++);
  }
}

/// arg_max and arg_min (select_last_index) of T with ties, bit for bit as
/// on the host.
template <typename T>
void integerArgExtremes(int64_t outer, int64_t n, int64_t inner,
                        unsigned seed) {
  std::mt19937 draw(seed);
  std::vector<T> x(outer * n * inner);
  for (T &v : x)
    v = static_cast<T>(draw() % 7) - 3; // ties
  fsdprt_dtype_t dtype = sizeof(T) == 4 ? FSDPRT_I32 : FSDPRT_I64;
  DeviceArray<T> dx(x);
  for (bool max : {true, false}) {
    std::vector<int64_t> want(outer * inner);
    cuda::ArgExtremeBody body{x.data(), want.data(), n,    inner,
                              max,      !max,        dtype};
    cuda::hostForEach(body, outer * inner);
    DeviceArray<int64_t> dy(poison<int64_t>(want.size()));
    body.x = dx.data, body.y = dy.data;
    expectSame(std::string(max ? "arg_max" : "arg_min (last)") +
                   (sizeof(T) == 4 ? " of int32" : " of int64"),
               cuda::launchArgExtreme(body, outer * inner, nullptr), dy, want);
  }
}

/// concat then split back, on both sides, of elements of type T.
template <typename T>
void concatAndSplit(const std::vector<int64_t> &whole, int64_t axis,
                    const std::vector<int64_t> &sizes, unsigned seed) {
  std::vector<cuda::Piece> plan = cuda::planPieces(whole, axis, sizes);
  std::vector<std::vector<T>> pieces;
  std::vector<std::unique_ptr<DeviceArray<T>>> devicePieces;
  std::vector<const T *> hostIn;
  std::vector<const void *> deviceIn;
  std::vector<void *> deviceOut;
  for (size_t k = 0; k < sizes.size(); ++k) {
    pieces.push_back(randomBits<T>(plan[k].rows * plan[k].width, seed + k));
    hostIn.push_back(pieces.back().data());
    devicePieces.push_back(std::make_unique<DeviceArray<T>>(pieces.back()));
    deviceIn.push_back(devicePieces.back()->data);
  }
  std::vector<T> want(count(whole));
  cuda::HostLauncher host;
  cuda::concat(host, hostIn.data(), want.data(), plan);
  DeviceArray<T> dw(poison<T>(want.size()));
  std::string what = "concat of " + std::to_string(sizes.size()) + " along axis " +
                     std::to_string(axis) + " into " + std::to_string(want.size());
  expectSame(what, cuda::launchConcat(sizeof(T), deviceIn.data(), dw.data, plan, nullptr),
             dw, want);
  // Split the device's whole into zeroed pieces: the pieces come back.
  for (size_t k = 0; k < sizes.size(); ++k) {
    devicePieces[k] = std::make_unique<DeviceArray<T>>(poison<T>(pieces[k].size()));
    deviceOut.push_back(devicePieces[k]->data);
  }
  cudaError_t e = cuda::launchSplit(sizeof(T), dw.data, deviceOut.data(), plan, nullptr);
  for (size_t k = 0; k < sizes.size(); ++k)
    expectSame("split of " + what + ", piece " + std::to_string(k), e, *devicePieces[k],
               pieces[k]);
}

template <typename T> void copyAndPack(unsigned seed) {
  for (int64_t n : {1, 257, 5000000}) {
    std::vector<T> x = randomBits<T>(n, seed++);
    DeviceArray<T> dx(x), dy(poison<T>(n));
    expectSame("copy of " + std::to_string(n), cuda::launchCopy(sizeof(T), dx.data, dy.data, n, nullptr),
               dy, x);
  }
  std::vector<int64_t> numels = {15, 1, 100003}, offsets = {1, 16, 32};
  int64_t total = 100040;
  cuda::PackPlan plan = cuda::planPack(offsets, numels, total);
  std::vector<std::vector<T>> members;
  std::vector<std::unique_ptr<DeviceArray<T>>> deviceMembers;
  std::vector<const T *> hostIn;
  std::vector<const void *> deviceIn;
  for (int64_t n : numels) {
    members.push_back(randomBits<T>(n, seed++));
    hostIn.push_back(members.back().data());
    deviceMembers.push_back(std::make_unique<DeviceArray<T>>(members.back()));
    deviceIn.push_back(deviceMembers.back()->data);
  }
  std::vector<T> stale = randomBits<T>(total, seed++), want = stale;
  cuda::HostLauncher host;
  cuda::pack(host, hostIn.data(), want.data(), plan);
  DeviceArray<T> dflat(stale);
  expectSame("pack of " + std::to_string(sizeof(T)) + "-byte elements",
             cuda::launchPack(sizeof(T), deviceIn.data(), dflat.data, plan, nullptr), dflat,
             want);
}

template <typename T> void copies(unsigned &seed) {
  concatAndSplit<T>({1}, 0, {1}, seed++);
  concatAndSplit<T>({3, 257, 5}, 1, {100, 1, 156}, seed++);
  concatAndSplit<T>({2, 100003}, 1, {50000, 50003}, seed++);
  concatAndSplit<T>({4096, 768}, 0, {1024, 3072}, seed++);
  copyAndPack<T>(seed++);
}

/// gather_grad on the device: the host's bits, twice over (deterministic).
void gatherGrad(int64_t outer, int64_t dim, int64_t count, int64_t inner, bool bad,
                unsigned seed) {
  std::vector<float> g = random(outer * count * inner, seed), want(outer * dim * inner);
  std::vector<int64_t> idx(count);
  for (int64_t k = 0; k < count; ++k) // repeats: a Zipf-like head of rows
    idx[k] = (k * 7919) % (k % 3 ? dim : std::min<int64_t>(dim, 8)) - (k % 5 ? 0 : dim);
  if (bad)
    idx[count / 2] = dim + 5;
  cuda::ErrorSlot hostError{0, 0};
  std::vector<int64_t> hostScratch(cuda::gatherGradScratch(count, dim));
  cuda::HostLauncher host;
  cuda::gatherGrad(host,
                   cuda::GatherGradArgs<int64_t>{g.data(), idx.data(), want.data(), outer,
                                                 dim, count, inner, &hostError},
                   hostScratch.data());
  DeviceBuffer dg(g);
  DeviceArray<int64_t> di(idx), scratch(poison<int64_t>(hostScratch.size()));
  DeviceArray<float> dy(poison<float>(want.size()));
  DeviceArray<cuda::ErrorSlot> error(std::vector<cuda::ErrorSlot>{{0, 0}});
  std::string what = "gather_grad dim=" + std::to_string(dim) + " count=" +
                     std::to_string(count) + " inner=" + std::to_string(inner);
  for (int run = 0; run < 2; ++run)
    expectSame(what + " run " + std::to_string(run),
               cuda::launchGatherGrad(false, dg.data, di.data, dy.data, outer, dim, count,
                                      inner, scratch.data, error.data, nullptr),
               dy, want);
  cuda::ErrorSlot got = error.read(0);
  ++checks;
  if (got.code != hostError.code || got.detail != hostError.detail) {
    std::fprintf(stderr, "FAIL: %s: error slot %d/%lld, the host's %d/%lld\n", what.c_str(),
                 got.code, got.detail, hostError.code, hostError.detail);
    ++failures;
  }
}

/// max or average pooling and its gradient over planes [planes, h, w].
void pool(bool max, int64_t planes, const cuda::PoolWindow &w, unsigned seed) {
  std::vector<float> x = random(planes * w.h * w.w, seed), g = random(planes * w.oh * w.ow, seed + 1);
  std::vector<float> want(g.size()), wantGrad(x.size());
  std::string what = std::string(max ? "max" : "average") + " pool of " + std::to_string(planes) +
                     " planes " + std::to_string(w.h) + "x" + std::to_string(w.w);
  if (max) {
    cuda::hostForEach(cuda::PoolBody<true>{w, x.data(), want.data()}, want.size());
    cuda::hostForEach(cuda::PoolGradBody<true>{w, x.data(), g.data(), wantGrad.data()}, x.size());
  } else {
    cuda::hostForEach(cuda::PoolBody<false>{w, x.data(), want.data()}, want.size());
    cuda::hostForEach(cuda::PoolGradBody<false>{w, x.data(), g.data(), wantGrad.data()}, x.size());
  }
  DeviceBuffer dx(x), dg(g), dy(poison<float>(want.size())), ddx(poison<float>(x.size()));
  expect(what, cuda::launchPool(max, w, dx.data, dy.data, planes, nullptr), dy, want, 1e-6);
  if (max) { // with the Indices output, column-major
    std::vector<float> wantY(want.size());
    std::vector<int64_t> wantIndices(want.size());
    cuda::hostForEach(cuda::MaxPoolIndicesBody{w, x.data(), wantY.data(),
                                               wantIndices.data(), true},
                      want.size());
    DeviceArray<float> iy(poison<float>(want.size()));
    DeviceArray<int64_t> ii(poison<int64_t>(want.size()));
    cudaError_t e = cuda::launchMaxPoolIndices(
        cuda::MaxPoolIndicesBody{w, dx.data, iy.data, ii.data, true}, planes,
        nullptr);
    expectSame(what + " (y beside indices)", e, iy, wantY);
    expectSame(what + " (indices)", cudaSuccess, ii, wantIndices);
  }
  expect(what + " grad", cuda::launchPoolGrad(max, w, dx.data, dg.data, ddx.data, planes, nullptr),
         ddx, wantGrad, 0);
}

cuda::PoolWindow window(int64_t k, int64_t stride, int64_t pad, int64_t h, int64_t w) {
  cuda::PoolWindow win{{k, k}, {stride, stride}, {1, 1}, {pad, pad, pad, pad}, false, h, w, 0, 0};
  win.oh = (h + 2 * pad - k) / stride + 1;
  win.ow = (w + 2 * pad - k) / stride + 1;
  return win;
}

/// im2col and col2im of `images` images (col2im: the host's sums in the
/// host's order, bit for bit).
void conv(int64_t images, const cuda::ConvWindow &w, unsigned seed) {
  int64_t cols = images * w.rows() * w.oh * w.ow;
  std::vector<float> x = random(images * w.channels * w.h * w.w, seed),
                     c = random(cols, seed + 1);
  std::vector<float> wantCol(cols), wantX(x.size());
  cuda::hostForEach(cuda::Im2colBody{w, x.data(), wantCol.data()}, cols);
  cuda::hostForEach(cuda::Col2imBody{w, c.data(), wantX.data()}, x.size());
  DeviceBuffer dx(x), dc(c), dcol(poison<float>(cols)),
      ddx(poison<float>(x.size()));
  std::string what =
      "conv of " + std::to_string(images) + "x" + std::to_string(w.channels) +
      "x" + std::to_string(w.h) + "x" + std::to_string(w.w) + " kernel " +
      std::to_string(w.kernel[0]) + "x" + std::to_string(w.kernel[1]);
  expect(what + " im2col",
         cuda::launchIm2col(w, dx.data, dcol.data, images, nullptr),
         dcol, wantCol, 0);
  expect(what + " col2im",
         cuda::launchCol2im(w, dc.data, ddx.data, images, nullptr), ddx,
         wantX, 0);
}

/// A square window of k x k, stride and padding on every side, over h x w.
cuda::ConvWindow convWindow(int64_t channels, int64_t h, int64_t w, int64_t k,
                            int64_t stride, int64_t pad, int64_t dilation) {
  cuda::ConvWindow win{
      channels,   h, w, {k, k}, {stride, stride}, {dilation, dilation},
      {pad, pad}, 0, 0};
  win.oh = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  win.ow = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  return win;
}

void batchNorm(int64_t n, int64_t channels, int64_t inner, unsigned seed) {
  std::vector<float> x = random(n * channels * inner, seed), s = random(channels, seed + 1),
                     b = random(channels, seed + 2), m = random(channels, seed + 3),
                     v = random(channels, seed + 4), want(x.size());
  for (float &var : v)
    var = std::fabs(var) + 0.1f;
  cuda::hostForEach(cuda::BatchNormBody{x.data(), s.data(), b.data(), m.data(), v.data(),
                                        want.data(), channels, inner, 1e-5f},
                    x.size());
  DeviceBuffer dx(x), ds(s), db(b), dm(m), dv(v), dy(poison<float>(x.size()));
  expect("batch_norm of " + std::to_string(x.size()),
         cuda::launchBatchNorm(dx.data, ds.data, db.data, dm.data, dv.data, dy.data, n, channels,
                               inner, 1e-5f, nullptr),
         dy, want, 1e-6);
  // The inverse standard deviation cuDNN's inference-phase batch norm reads.
  std::vector<float> inv(channels);
  cuda::hostForEach(cuda::InverseStdBody{v.data(), inv.data(), 1e-5f}, channels);
  // Training batch norm and its gradient, one thread per channel.
  int64_t count = n * inner;
  std::vector<float> hy(x.size()), hm(channels), hi(channels), hnm(channels), hnv(channels);
  cuda::BatchNormTrainBody train{x.data(), s.data(),  b.data(),   m.data(),   v.data(),
                                 hy.data(), hm.data(), hi.data(), hnm.data(), hnv.data(),
                                 n,         channels,  inner,     1e-5,       0.9,
                                 count > 1 ? double(count) / double(count - 1) : 1.0};
  cuda::hostForEach(train, channels);
  DeviceBuffer ty(poison<float>(x.size())), tm(poison<float>(channels)),
      ti(poison<float>(channels)), tnm(poison<float>(channels)), tnv(poison<float>(channels));
  cuda::BatchNormTrainBody onDevice = train;
  onDevice.x = dx.data, onDevice.scale = ds.data, onDevice.bias = db.data;
  onDevice.runningMean = dm.data, onDevice.runningVar = dv.data;
  onDevice.y = ty.data, onDevice.mean = tm.data, onDevice.invStd = ti.data;
  onDevice.nextMean = tnm.data, onDevice.nextVar = tnv.data;
  cudaError_t launched = cuda::launchBatchNormTrain(onDevice, nullptr);
  expect("batch_norm_train y of " + std::to_string(x.size()), launched, ty, hy, 1e-6);
  expect("batch_norm_train statistics", launched, ti, hi, 1e-6);
  expect("batch_norm_train running var", launched, tnv, hnv, 1e-6);
  std::vector<float> hdx(x.size()), hds(channels), hdb(channels);
  cuda::BatchNormGradBody grad{want.data(), x.data(), s.data(), hm.data(), hi.data(),
                               hdx.data(),  hds.data(), hdb.data(), n, channels, inner};
  cuda::hostForEach(grad, channels);
  DeviceBuffer gdy(want), gm(hm), gi(hi), gdx(poison<float>(x.size())),
      gds(poison<float>(channels)), gdb(poison<float>(channels));
  cuda::BatchNormGradBody gradOnDevice{gdy.data, dx.data,  ds.data,  gm.data, gi.data,
                                       gdx.data, gds.data, gdb.data, n,       channels,
                                       inner};
  launched = cuda::launchBatchNormGrad(gradOnDevice, nullptr);
  expect("batch_norm_grad dx of " + std::to_string(x.size()), launched, gdx, hdx, 1e-6);
  expect("batch_norm_grad dscale", launched, gds, hds, 1e-6);
  DeviceBuffer dinv(poison<float>(channels));
  expect("inverse std of " + std::to_string(channels),
         cuda::launchInverseStd(dv.data, dinv.data, channels, 1e-5f, nullptr), dinv, inv,
         1e-6);
}

/// attention and attention_grad of `batch` heads ([batch, L, S] masks of
/// `kind`, an f32 add mask or a bool fill mask with its first `padded`
/// keys masked in every row), against the tile bodies on one host lane
/// (the same bits as on more: the cuda-host tests check it).
void attention(cuda::MaskKind kind, int64_t batch, int64_t l, int64_t s,
               int64_t d, int64_t dv, int64_t padded, unsigned seed) {
  cuda::AttentionShape g;
  g.batch = batch, g.l = l, g.s = s, g.d = d, g.dv = dv;
  g.scale = 1.0f / std::sqrt(static_cast<float>(d));
  g.fill = -INFINITY;
  g.mask = kind;
  g.batchDims = 1;
  g.batchSize[0] = batch;
  g.maskStride[0] = l * s, g.maskStrideL = s, g.maskStrideS = 1;
  std::vector<float> q = random(batch * l * d, seed),
                     kt = random(batch * d * s, seed + 1),
                     v = random(batch * s * dv, seed + 2),
                     dy = random(batch * l * dv, seed + 3),
                     mask = random(batch * l * s, seed + 4);
  // A fill mask as bytes in a float buffer (its first batch * l * s bytes).
  if (kind == cuda::MaskKind::Fill) {
    std::vector<uint8_t> bytes(mask.size());
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = mask[i] > 0.8f || static_cast<int64_t>(i) % s < padded;
    std::memcpy(mask.data(), bytes.data(), bytes.size());
  }
  cuda::AttentionTiles tiles = cuda::planAttentionTiles(d, dv);
  std::vector<float> y(batch * l * dv), lse(batch * l), dq(q.size()),
      dkt(kt.size()), dvs(v.size());
  cuda::AttentionArgs a;
  a.shape = g;
  a.q = q.data(), a.kt = kt.data(), a.v = v.data(), a.mask = mask.data();
  a.y = y.data(), a.lse = lse.data(), a.dy = dy.data();
  a.dq = dq.data(), a.dkt = dkt.data(), a.dv = dvs.data();
  cuda::HostLauncher host{1};
  cuda::attentionForward(host, a, tiles);
  cuda::attentionGrad(host, a, tiles);

  std::string what = "attention of " + std::to_string(batch) + " heads " +
                     std::to_string(l) + "x" + std::to_string(s) + " d" +
                     std::to_string(d) + " dv" + std::to_string(dv);
  DeviceBuffer bq(q), bkt(kt), bv(v), bdy(dy), bmask(mask),
      by(poison<float>(y.size())), blse(poison<float>(lse.size())),
      bdq(poison<float>(dq.size())), bdkt(poison<float>(dkt.size())),
      bdv(poison<float>(dvs.size()));
  cuda::AttentionArgs da = a;
  da.q = bq.data, da.kt = bkt.data, da.v = bv.data, da.mask = bmask.data;
  da.y = by.data, da.lse = blse.data, da.dy = bdy.data;
  cudaError_t e = cuda::launchAttention(da, nullptr);
  expect(what, e, by, y, 2e-5);
  expect(what + " lse", e, blse, lse, 2e-5);
  // The gradient from the host's y and lse, so that only it is compared.
  DeviceBuffer hy(y), hlse(lse);
  da.y = hy.data, da.lse = hlse.data;
  da.dq = bdq.data, da.dkt = bdkt.data, da.dv = bdv.data;
  e = cuda::launchAttentionGrad(da, nullptr);
  expect(what + " dq", e, bdq, dq, 1e-4);
  expect(what + " dk_t", e, bdkt, dkt, 1e-4);
  expect(what + " dv", e, bdv, dvs, 1e-4);
}

/// Philox-4x32-10 on the device: each thread's four words of element
/// block i of a stream, equal bit for bit to the host's (philox.h, whose
/// host results the runtime's tests check against Random123's vectors).
__global__ void philoxBlocks(fsdprt::RandomStream stream, uint32_t *out,
                             int64_t blocks) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= blocks)
    return;
  fsdprt::Philox4x32 words = stream.block(static_cast<uint64_t>(i));
  for (int w = 0; w < 4; ++w)
    out[4 * i + w] = words.v[w];
}

void philox(int64_t blocks) {
  ++checks;
  fsdprt::RandomStream stream{0x0123456789abcdefull, 3, 9};
  uint32_t *device = nullptr;
  cudaMalloc(&device, blocks * 4 * sizeof(uint32_t));
  philoxBlocks<<<(blocks + 255) / 256, 256>>>(stream, device, blocks);
  cudaError_t e = cudaDeviceSynchronize();
  std::vector<uint32_t> got(blocks * 4);
  cudaMemcpy(got.data(), device, got.size() * sizeof(uint32_t),
             cudaMemcpyDeviceToHost);
  cudaFree(device);
  for (int64_t i = 0; e == cudaSuccess && i < blocks * 4; ++i)
    if (got[i] != stream.bits(static_cast<uint64_t>(i))) {
      std::fprintf(stderr, "FAIL: philox: word %lld differs from the host's\n",
                   static_cast<long long>(i));
      ++failures;
      return;
    }
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FAIL: philox: %s\n", cudaGetErrorString(e));
    ++failures;
  }
}

} // namespace

/// dropout over n elements from global element `base`, mask and y bit
/// for bit as the host body's (which the cuda-host tests compare with the
/// CPU backend's).
void dropout(int64_t n, uint64_t base, double ratio, uint32_t step) {
  std::vector<float> x = random(n, static_cast<unsigned>(n + base)), want(n);
  std::vector<uint8_t> wantMask(n);
  cuda::DropoutBody host{{0x0123456789abcdefull, step, 7},
                         base,
                         fsdprt::keepThreshold(1.0 - ratio),
                         1.0f / static_cast<float>(1.0 - ratio),
                         x.data(),
                         want.data(),
                         wantMask.data(),
                         n};
  cuda::hostForEach(host, host.blocks());
  DeviceArray<float> dx(x), dy(poison<float>(n));
  DeviceArray<uint8_t> dm(poison<uint8_t>(n));
  cuda::DropoutBody body = host;
  body.x = dx.data, body.y = dy.data, body.mask = dm.data;
  std::string what = "dropout n=" + std::to_string(n) + " base=" +
                     std::to_string(base) + " ratio=" + std::to_string(ratio);
  expectSame(what + " (mask)", cuda::launchDropout(body, nullptr), dm, wantMask);
  expectSame(what + " (y)", cudaSuccess, dy, want);
}

/// The walk of data [a, dim, b] and indices [a, count, b] along dim 1.
cuda::AxisWalk walk3(int64_t a, int64_t dim, int64_t count, int64_t b) {
  cuda::AxisWalk w;
  w.rank = 3, w.axis = 1;
  int64_t data[3] = {a, 1, b}, index[3] = {a, count, b};
  int64_t dataStride[3] = {dim * b, b, 1}, indexStride[3] = {count * b, b, 1};
  for (int d = 0; d < 3; ++d) {
    w.data[d] = data[d], w.index[d] = index[d];
    w.dataStride[d] = dataStride[d], w.indexStride[d] = indexStride[d];
  }
  w.dim = dim, w.axisStride = b, w.count = count;
  return w;
}

/// trilu, cumsum, gather_elements, scatter_elements and scatter_nd of
/// float elements (indices with repeats and negatives), bit for bit.
void indexing(int64_t a, int64_t dim, int64_t count, int64_t b, unsigned seed) {
  std::string shape = " [" + std::to_string(a) + ", " + std::to_string(dim) +
                      ", " + std::to_string(b) + "]";
  std::vector<float> x = random(a * dim * b, seed);
  {
    std::vector<float> want(x.size());
    cuda::hostForEach(cuda::TriluBody<float>{x.data(), want.data(), dim, b, -1,
                                             nullptr, true},
                      x.size());
    DeviceArray<float> dx(x), dy(poison<float>(x.size()));
    expectSame("trilu" + shape,
               cuda::launchTrilu(4, dx.data, dy.data, x.size(), dim, b, -1,
                                 nullptr, true, nullptr),
               dy, want);
  }
  {
    std::vector<float> want(x.size());
    cuda::hostForEach(cuda::CumsumBody<float>{x.data(), want.data(), dim, b,
                                              false, true},
                      a * b);
    DeviceArray<float> dx(x), dy(poison<float>(x.size()));
    expectSame("cumsum" + shape,
               cuda::launchCumsum(FSDPRT_F32, dx.data, dy.data, a * b, dim, b,
                                  false, true, nullptr),
               dy, want);
  }
  // The axis as an input in device memory (counted from the end; int32),
  // then out of range: reported in the slot, nothing written.
  for (int64_t axis : {int64_t(-2), int64_t(2), int64_t(5)}) {
    int32_t axis32 = static_cast<int32_t>(axis);
    cuda::CumsumAxisInput in;
    in.rank = 3, in.shape[0] = a, in.shape[1] = dim, in.shape[2] = b;
    in.axis = &axis32, in.is32 = true;
    cuda::ErrorSlot hostError{0, 0};
    in.error = &hostError;
    std::vector<float> want = poison<float>(x.size());
    cuda::hostForEach(cuda::CumsumBody<float>{x.data(), want.data(), 0, 0,
                                              true, false, in},
                      in.maxLines());
    DeviceArray<float> dx(x), dy(poison<float>(x.size()));
    DeviceArray<int32_t> dAxis(std::vector<int32_t>{axis32});
    DeviceArray<cuda::ErrorSlot> error(std::vector<cuda::ErrorSlot>{{0, 0}});
    in.axis = dAxis.data, in.error = error.data;
    std::string what = "cumsum axis input " + std::to_string(axis) + shape;
    expectSame(what,
               cuda::launchCumsum(FSDPRT_F32, dx.data, dy.data, in.maxLines(),
                                  0, 0, true, false, nullptr, in),
               dy, want);
    cuda::ErrorSlot got = error.read(0);
    ++checks;
    if (got.code != hostError.code || got.detail != hostError.detail) {
      std::fprintf(stderr, "FAIL: %s: error slot %d/%lld, the host's %d/%lld\n",
                   what.c_str(), got.code, got.detail, hostError.code,
                   hostError.detail);
      ++failures;
    }
  }
  for (cuda::PadMode mode :
       {cuda::PadMode::Constant, cuda::PadMode::Reflect, cuda::PadMode::Edge}) {
    // One element before and after each dim (reflect: where it has two).
    cuda::PadShape p{};
    p.rank = 3, p.mode = mode;
    int64_t from[3] = {a, dim, b}, stride[3] = {dim * b, b, 1};
    int64_t n = 1;
    for (int d = 0; d < 3; ++d) {
      int64_t pad = mode == cuda::PadMode::Reflect && from[d] < 2 ? 0 : 1;
      p.shape[d] = from[d] + 2 * pad, p.from[d] = from[d];
      p.stride[d] = stride[d], p.before[d] = pad;
      n *= p.shape[d];
    }
    float fill = 1.5f;
    uint32_t bits;
    std::memcpy(&bits, &fill, 4);
    std::vector<float> want(n);
    cuda::hostForEach(cuda::PadBody<float>{p, x.data(), want.data(), fill}, n);
    DeviceArray<float> dx(x), dy(poison<float>(n));
    expectSame("pad mode " + std::to_string(static_cast<int>(mode)) + shape,
               cuda::launchPad(4, p, dx.data, dy.data, n, bits, nullptr), dy,
               want);
  }
  std::mt19937 gen(seed);
  std::vector<int64_t> idx(a * count * b);
  for (int64_t &v : idx)
    v = static_cast<int64_t>(gen() % dim) - (gen() % 2 ? dim : 0);
  std::vector<float> updates = random(idx.size(), seed + 1);
  cuda::AxisWalk walk = walk3(a, dim, count, b);
  DeviceArray<float> dx(x), du(updates);
  DeviceArray<int64_t> di(idx);
  DeviceArray<cuda::ErrorSlot> slot(std::vector<cuda::ErrorSlot>(1, {0, 0}));
  cuda::ErrorSlot hostSlot{0, 0};
  {
    std::vector<float> want(idx.size());
    cuda::hostForEach(cuda::GatherElementsBody<float, int64_t>{
                          walk, x.data(), idx.data(), want.data(), &hostSlot},
                      idx.size());
    DeviceArray<float> dy(poison<float>(idx.size()));
    expectSame("gather_elements" + shape,
               cuda::launchGatherElements(4, false, walk, dx.data, di.data,
                                          dy.data, idx.size(), slot.data,
                                          nullptr),
               dy, want);
  }
  for (cuda::Combine how : {cuda::Combine::Assign, cuda::Combine::Add}) {
    std::vector<float> want(x.size());
    cuda::ScatterArgs args{};
    args.dtype = FSDPRT_F32, args.elementSize = 4, args.how = how;
    args.walk = walk;
    args.data = x.data(), args.indices = idx.data();
    args.updates = updates.data(), args.y = want.data(), args.error = &hostSlot;
    cuda::hostForEach(cuda::scatterElementsBody<float, int64_t>(args), a * b);
    DeviceArray<float> dy(poison<float>(x.size()));
    args.data = dx.data, args.indices = di.data, args.updates = du.data;
    args.y = dy.data, args.error = slot.data;
    expectSame(std::string("scatter_elements ") +
                   (how == cuda::Combine::Add ? "add" : "none") + shape,
               cuda::launchScatterElements(args, a * b, nullptr), dy, want);
  }
  {
    // scatter_nd into data [a * dim, b] with `count` one-index tuples.
    std::vector<int64_t> rows(count);
    for (int64_t &v : rows)
      v = static_cast<int64_t>(gen() % (a * dim));
    std::vector<float> want = x, part = random(count * b, seed + 2);
    cuda::ScatterArgs args{};
    args.dtype = FSDPRT_F32, args.elementSize = 4, args.how = cuda::Combine::Add;
    args.k = 1, args.tuples = count, args.slice = b;
    args.shape[0] = a * dim, args.strides[0] = b;
    args.indices = rows.data(), args.updates = part.data(), args.y = want.data();
    args.error = &hostSlot;
    cuda::hostForEach(cuda::scatterNDBody<float, int64_t>(args), b);
    DeviceArray<int64_t> dr(rows);
    DeviceArray<float> dp(part), dy(x);
    args.indices = dr.data, args.updates = dp.data, args.y = dy.data;
    args.error = slot.data;
    expectSame("scatter_nd add" + shape, cuda::launchScatterND(args, nullptr),
               dy, want);
  }
  if (slot.read(0).code != 0 || hostSlot.code != 0) {
    std::fprintf(stderr, "FAIL: indexing%s: a good index reported bad\n",
                 shape.c_str());
    ++failures;
  }
}

/// nll_loss (within fp32 rounding of the host's sum) and its gradient
/// (bit for bit: whole weights, an exact divisor), an ignored class 0.
void nll(int64_t n, int64_t classes, int64_t inner, bool none, bool mean,
         unsigned seed) {
  int64_t positions = n * inner, numel = n * classes * inner;
  std::vector<float> x = random(numel, seed), w(classes);
  std::mt19937 gen(seed);
  std::vector<int64_t> t(positions);
  for (int64_t &v : t)
    v = gen() % classes;
  for (float &v : w)
    v = static_cast<float>(gen() % 5 + 1);
  std::vector<float> g = random(none ? positions : 1, seed + 1);
  int64_t outs = none ? positions : 1;
  cuda::NllInputs host{x.data(), t.data(), false, w.data(), classes,
                       inner,    true,     0,     nullptr};
  std::vector<float> scratch(2 * positions + 1), want(outs), wantGrad(numel);
  cuda::HostLauncher launch{1};
  cuda::nllLoss(launch, host, positions, none, mean, scratch.data(), want.data());
  cuda::nllLossGrad(launch, host, positions, g.data(), none, mean,
                    scratch.data(), wantGrad.data(), numel);
  DeviceArray<float> dx(x), dw(w), dg(g), ds(scratch);
  DeviceArray<int64_t> dt(t);
  DeviceArray<cuda::ErrorSlot> slot(std::vector<cuda::ErrorSlot>(1, {0, 0}));
  DeviceBuffer dy(poison<float>(outs));
  DeviceArray<float> ddx(poison<float>(numel));
  cuda::NllInputs in{dx.data, dt.data, false, dw.data, classes,
                     inner,   true,    0,     slot.data};
  std::string what = std::string("nll_loss ") +
                     (none ? "none" : mean ? "mean" : "sum") +
                     " positions=" + std::to_string(positions) +
                     " C=" + std::to_string(classes);
  expect(what,
         cuda::launchNllLoss(in, positions, none, mean, ds.data, dy.data,
                             nullptr),
         dy, want, positions > 10000 ? 1e-4 : 1e-5);
  expectSame(what + " grad",
             cuda::launchNllLossGrad(in, positions, dg.data, none, mean,
                                     ds.data, ddx.data, numel, nullptr),
             ddx, wantGrad);
  if (slot.read(0).code != 0) {
    std::fprintf(stderr, "FAIL: %s: a good target reported bad\n", what.c_str());
    ++failures;
  }
}

/// global_max_pool, hardmax, arg_max and arg_min (one thread per plane or
/// row), bit for bit.
void maxes(int64_t outer, int64_t n, int64_t inner, unsigned seed) {
  std::vector<float> x = random(outer * n * inner, seed);
  for (float &v : x)
    v = std::round(v * 2); // ties
  x[x.size() / 2] = NAN;
  std::vector<float> wantPool(outer), wantHard(x.size());
  cuda::hostForEach(cuda::GlobalMaxPoolBody{x.data(), wantPool.data(), n * inner},
                    outer);
  cuda::hostForEach(cuda::HardmaxBody{x.data(), wantHard.data(), n, inner},
                    outer * inner);
  DeviceArray<float> dx(x), dp(poison<float>(outer)), dh(poison<float>(x.size()));
  std::string what = " [" + std::to_string(outer) + ", " + std::to_string(n) +
                     ", " + std::to_string(inner) + "]";
  expectSame("global_max_pool" + what,
             cuda::launchGlobalMaxPool(dx.data, dp.data, outer, n * inner, nullptr),
             dp, wantPool);
  expectSame("hardmax" + what,
             cuda::launchHardmax(dx.data, dh.data, outer, n, inner, nullptr), dh,
             wantHard);
  for (bool max : {true, false}) {
    std::vector<int64_t> wantArg(outer * inner);
    cuda::ArgExtremeBody body{x.data(), wantArg.data(), n, inner, max, !max};
    cuda::hostForEach(body, outer * inner);
    DeviceArray<int64_t> da(poison<int64_t>(wantArg.size()));
    body.x = dx.data, body.y = da.data;
    expectSame(std::string(max ? "arg_max" : "arg_min (last)") + what,
               cuda::launchArgExtreme(body, outer * inner, nullptr), da, wantArg);
  }
}

/// resize of x [2, 3, h, w] by (1, 1, sh, sw) in `mode` (nvcc may fuse the
/// double multiply-adds the host rounds twice: within fp32 rounding).
void resize(cuda::ResizeMode mode, int64_t h, int64_t w, double sh, double sw,
            unsigned seed) {
  cuda::ResizePlan p{};
  p.rank = 4;
  int64_t in[4] = {2, 3, h, w};
  double scales[4] = {1, 1, sh, sw};
  int64_t stride = 1, n = 1;
  for (int d = 3; d >= 0; --d) {
    p.in[d] = in[d], p.scale[d] = scales[d], p.stride[d] = stride;
    p.out[d] = static_cast<int64_t>(std::floor(in[d] * scales[d]));
    stride *= in[d];
    n *= p.out[d];
  }
  p.mode = mode, p.transform = cuda::ResizeTransform::HalfPixel;
  p.nearest = cuda::NearestMode::RoundPreferFloor, p.a = -0.75;
  std::vector<float> x = random(2 * 3 * h * w, seed), want(n);
  cuda::hostForEach(cuda::ResizeBody{p, x.data(), want.data()}, n);
  DeviceBuffer dx(x), dy(poison<float>(n));
  cudaError_t e =
      cuda::launchResize(cuda::ResizeBody{p, dx.data, dy.data}, n, nullptr);
  std::string what = "resize mode " + std::to_string(static_cast<int>(mode)) +
                     " of " + std::to_string(h) + "x" + std::to_string(w);
  expect(what, e, dy, want, 1e-6);
  // The scales as an input in device memory (the plan's ignored), then
  // one that does not give the plan's size: reported, nothing written.
  for (bool fits : {true, false}) {
    std::vector<float> given = {1, 1, static_cast<float>(sh),
                                static_cast<float>(fits ? sw : sw + 1)};
    cuda::ResizePlan q = p;
    for (double &s : q.scale)
      s = NAN;
    cuda::ErrorSlot hostError{0, 0};
    std::vector<float> wantRun = poison<float>(n);
    cuda::hostForEach(cuda::ResizeBody{q, x.data(), wantRun.data(),
                                       given.data(), &hostError},
                      n);
    DeviceBuffer dScales(given), dRun(poison<float>(n));
    DeviceArray<cuda::ErrorSlot> error(std::vector<cuda::ErrorSlot>{{0, 0}});
    std::string run = what + (fits ? " run-time scales" : " bad run-time scale");
    expect(run,
           cuda::launchResize(cuda::ResizeBody{q, dx.data, dRun.data,
                                               dScales.data, error.data},
                              n, nullptr),
           dRun, wantRun, 1e-6);
    cuda::ErrorSlot got = error.read(0);
    ++checks;
    if (got.code != hostError.code || got.detail != hostError.detail ||
        (hostError.code != 0) == fits) {
      std::fprintf(stderr, "FAIL: %s: error slot %d/%lld, the host's %d/%lld\n",
                   run.c_str(), got.code, got.detail, hostError.code,
                   hostError.detail);
      ++failures;
    }
  }
}

/// grid_sample's three steps on x [2, 3, h, w] at a grid [2, ho, wo, 2]
/// (points in [-1.5, 1.5]) in T, against the body on the host (within
/// rounding: nvcc may fuse multiply-adds; d(x) adds a plane's points in
/// the host's order).
template <typename T>
void gridSample(cuda::GridSampleMode mode, cuda::GridPadding padding,
                bool align, int64_t h, int64_t w, int64_t ho, int64_t wo,
                unsigned seed) {
  cuda::GridSamplePlan p{2, 3, h, w, ho, wo, mode, padding, align};
  auto values = [](int64_t n, unsigned seed, float scale) {
    std::vector<float> f = random(n, seed, scale);
    return std::vector<T>(f.begin(), f.end());
  };
  std::vector<T> x = values(2 * 3 * h * w, seed, 1),
                 grid = values(2 * ho * wo * 2, seed + 1, 0.8f),
                 dy = values(2 * 3 * ho * wo, seed + 2, 1);
  DeviceArray<T> dx(x), dgrid(grid), ddy(dy);
  fsdprt_dtype_t dtype = sizeof(T) == 8 ? FSDPRT_F64 : FSDPRT_F32;
  std::string what = "grid_sample mode " + std::to_string(int(mode)) +
                     " padding " + std::to_string(int(padding)) + " align " +
                     std::to_string(align) + " " + std::to_string(h) + "x" +
                     std::to_string(w) + " at " + std::to_string(ho) + "x" +
                     std::to_string(wo) + (sizeof(T) == 8 ? " f64" : " f32");
  const cuda::GridSampleStep steps[] = {cuda::GridSampleStep::Forward,
                                        cuda::GridSampleStep::InputGrad,
                                        cuda::GridSampleStep::GridGrad};
  const int64_t sizes[] = {2 * 3 * ho * wo, 2 * 3 * h * w, 2 * ho * wo * 2};
  for (int k = 0; k < 3; ++k) {
    std::vector<T> want(sizes[k]);
    cuda::GridSampleBody host{p,           steps[k],  dtype,      x.data(),
                              grid.data(), dy.data(), want.data()};
    cuda::hostForEach(host, host.threads());
    DeviceArray<T> out(poison<T>(sizes[k]));
    cuda::GridSampleBody device{p,          steps[k], dtype,   dx.data,
                                dgrid.data, ddy.data, out.data};
    cudaError_t e = cuda::launchGridSample(device, nullptr);
    ++checks;
    cudaError_t synced = cudaDeviceSynchronize();
    std::string step = what + " step " + std::to_string(k);
    if (e != cudaSuccess || synced != cudaSuccess) {
      std::fprintf(stderr, "FAIL: %s: %s\n", step.c_str(),
                   cudaGetErrorString(e != cudaSuccess ? e : synced));
      ++failures;
      continue;
    }
    std::vector<T> got = out.readAll();
    for (size_t i = 0; i < want.size(); ++i)
      if (!(std::fabs(double(got[i]) - double(want[i])) <=
            1e-4 * (1 + std::fabs(double(want[i]))))) {
        std::fprintf(stderr,
                     "FAIL: %s: at %zu the GPU gives %.9g, the host %.9g\n",
                     step.c_str(), i, double(got[i]), double(want[i]));
        ++failures;
        break;
      }
  }
}

/// One piece of a recurrent step (kernels/recurrent.h) of direction 1 at
/// time 1 over random buffers, against the body run on the host: every
/// buffer it may write (all of them are given) compared.
void recurrentStep(cuda::RecurrentCell cell, bool linearBeforeReset,
                   bool batchFirst, cuda::RecurrentStep step, int64_t batch,
                   int64_t hidden, unsigned seed) {
  int64_t gates = cell == cuda::RecurrentCell::Lstm  ? 4
                  : cell == cuda::RecurrentCell::Gru ? 3
                                                     : 1;
  cuda::RecurrentShape rc{cell,  3,          batch,     5, hidden,
                          2,     gates,      batchFirst, false,
                          linearBeforeReset};
  int64_t gh = rc.gh(), nh = batch * hidden, states = rc.dirs * nh;
  using Field = float *cuda::RecurrentBody::*;
  using B = cuda::RecurrentBody;
  const std::vector<std::pair<Field, int64_t>> fields = {
      {&B::proj, rc.seq * batch * gh}, {&B::q, batch * gh},
      {&B::h, nh},     {&B::c, nh},    {&B::hOut, nh},  {&B::cOut, nh},
      {&B::act, batch * gh},           {&B::qh, nh},    {&B::m, nh},
      {&B::dm, nh},    {&B::dh, nh},   {&B::dc, nh},    {&B::dprev, nh},
      {&B::wb, gh},    {&B::rb, gh},   {&B::y, rc.seq * states},
      {&B::yh, states}, {&B::yc, states}, {&B::h0, states}, {&B::c0, states}};
  cuda::RecurrentBody host{}, device{};
  host.step = device.step = step;
  host.rc = device.rc = rc;
  host.d = device.d = 1;
  host.t = device.t = 1;
  std::vector<std::vector<float>> values;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  values.reserve(fields.size());
  for (size_t k = 0; k < fields.size(); ++k) {
    // Activated gates in (0, 1), as the forward saves them.
    values.push_back(random(fields[k].second, seed + k, 0.5f));
    buffers.push_back(std::make_unique<DeviceBuffer>(values.back()));
    host.*fields[k].first = values.back().data();
    device.*fields[k].first = buffers.back()->data;
  }
  int64_t n = step == cuda::RecurrentStep::Bias       ? rc.seq * batch * gh
              : step == cuda::RecurrentStep::GradBias ? gh
                                                      : nh;
  cuda::hostForEach(host, n);
  cudaError_t e = cuda::launchRecurrent(device, n, nullptr);
  std::string what = "recurrent cell " + std::to_string(int(cell)) + " step " +
                     std::to_string(int(step)) + " lbr " +
                     std::to_string(linearBeforeReset) + " batch " +
                     std::to_string(batch) + " hidden " + std::to_string(hidden);
  for (size_t k = 0; k < fields.size(); ++k)
    expect(what + " buffer " + std::to_string(k), e, *buffers[k], values[k],
           1e-5);
}

int main() {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no usable GPU (%s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "no devices");
    return kSkipped;
  }
  unsigned seed = 1;
  philox(100003);
  indexing(1, 1, 1, 1, seed++);
  indexing(3, 257, 300, 5, seed++);
  indexing(2, 100003, 1000, 1, seed++); // a long line
  indexing(64, 33, 7, 1000, seed++);
  for (double ratio : {0.1, 0.5})
    for (uint32_t step : {0u, 5u}) {
      dropout(1, 0, ratio, step);
      dropout(257, 3, ratio, step); // starts and ends mid-block
      dropout(5000001, 5000001, ratio, step);
    }
  for (int64_t n : {1, 7, 256, 257, 100003, 5000000}) {
    unary<cuda::Unary::Exp>(n, seed++);
    unary<cuda::Unary::Log>(n, seed++);
    unary<cuda::Unary::Sqrt>(n, seed++);
    unary<cuda::Unary::Reciprocal>(n, seed++);
    unary<cuda::Unary::Erf>(n, seed++);
    unary<cuda::Unary::Tanh>(n, seed++);
    unary<cuda::Unary::Sigmoid>(n, seed++);
    unary<cuda::Unary::Relu>(n, seed++);
    unary<cuda::Unary::Silu>(n, seed++);
    unary<cuda::Unary::Gelu>(n, seed++);
    unary<cuda::Unary::GeluTanh>(n, seed++);
    unary<cuda::Unary::Neg>(n, seed++);
    unary<cuda::Unary::Abs>(n, seed++);
  }
  {
    using U = cuda::Unary;
    const std::pair<U, cuda::UnaryParams> attributed[] = {
        {U::Floor, {}},           {U::Ceil, {}},
        {U::Round, {}},           {U::Sign, {}},
        {U::Softsign, {}},        {U::Softplus, {}},
        {U::HardSigmoid, {0.3f, 0.25f}},
        {U::HardSwish, {}},       {U::Elu, {0.7f}},
        {U::Selu, {1.5f, 2.0f}},  {U::Celu, {0.4f}},
        {U::LeakyRelu, {0.2f}},   {U::ThresholdedRelu, {0.4f}},
        {U::Shrink, {0.25f, 1.5f}}, {U::Clip, {-0.5f, 1.5f}},
        {U::Sin, {}},             {U::Cos, {}},
        {U::Tan, {}},             {U::Sinh, {}},
        {U::Cosh, {}},            {U::Asin, {}},
        {U::Acos, {}},            {U::Atan, {}},
        {U::Asinh, {}},           {U::Acosh, {}},
        {U::Atanh, {}}};
    for (int64_t n : {1, 257, 100003, 5000000})
      for (const auto &[op, params] : attributed)
        unaryWith(op, params, n, seed++);
    for (int64_t n : {1, 257, 5000000}) {
      floatClass(false, n, seed++);
      floatClass(true, n, seed++);
      for (U op : {U::Sign, U::Neg, U::Abs})
        unary64(op, n, seed++);
    }
  }
  exactBinaries<cuda::Binary::Mod, float>(seed);
  exactBinaries<cuda::Binary::Mod, int64_t>(seed);
  exactBinaries<cuda::Binary::FloorMod, int64_t>(seed);
  exactBinaries<cuda::Binary::Max, float>(seed);
  exactBinaries<cuda::Binary::Min, float>(seed);
  exactBinaries<cuda::Binary::Max, int64_t>(seed);
  exactBinaries<cuda::Binary::Min, int64_t>(seed);
  exactBinaries<cuda::Binary::PRelu, float>(seed);
  narrowBinaries<int32_t>(FSDPRT_I32, "i32", seed);
  narrowBinaries<int16_t>(FSDPRT_I16, "i16", seed);
  narrowBinaries<int8_t>(FSDPRT_I8, "i8", seed);
  narrowBinaries<uint8_t>(FSDPRT_U8, "u8", seed);
  powInt64<int64_t>(FSDPRT_I64, "i64", seed++);
  powInt64<int32_t>(FSDPRT_I32, "i32", seed++);
  powInt64<float>(FSDPRT_F32, "f32", seed++);
  powInt64<double>(FSDPRT_F64, "f64", seed++);
  binaries<cuda::Binary::Add>(seed);
  binaries<cuda::Binary::Sub>(seed);
  binaries<cuda::Binary::Mul>(seed);
  binaries<cuda::Binary::Div>(seed);
  binaries<cuda::Binary::Pow>(seed);
  for (bool log : {false, true}) {
    softmax(log, 1, 1, 1, seed++);
    softmax(log, 3, 257, 1, seed++);
    softmax(log, 2, 100003, 1, seed++);
    softmax(log, 4, 33, 5, seed++);
    softmax(log, 70000, 8, 1, seed++); // more rows than blocks
  }
  for (bool rms : {false, true})
    for (int64_t n : {1, 255, 4099})
      norm(rms, 5, n, seed++);
  for (auto cell : {cuda::RecurrentCell::Lstm, cuda::RecurrentCell::Gru,
                    cuda::RecurrentCell::Rnn})
    for (bool lbr : {false, true})
      for (int step = 0; step <= int(cuda::RecurrentStep::Zero); ++step) {
        bool gru = cell == cuda::RecurrentCell::Gru;
        auto piece = cuda::RecurrentStep(step);
        // linear_before_reset and the reset gate's pieces are GRU's only.
        if (!gru && (lbr || piece == cuda::RecurrentStep::ResetGate ||
                     piece == cuda::RecurrentStep::GradReset))
          continue;
        for (auto [batch, hidden] : {std::pair<int64_t, int64_t>{1, 1},
                                     {3, 5}, {70, 300}})
          recurrentStep(cell, lbr, batch == 3, piece, batch, hidden, seed++);
      }
  for (auto kind : {cuda::ActivationGrad::Gelu, cuda::ActivationGrad::GeluTanh,
                    cuda::ActivationGrad::Silu})
    for (int64_t n : {1, 257, 5000000})
      activationGrad(kind, n, seed++);
  for (bool rms : {false, true})
    for (int64_t n : {1, 255, 4099})
      normGrad(rms, 300, n, seed++);
  normGrad(false, 1, 64, seed++);     // one row: one partial chunk
  normGrad(false, 4096, 768, seed++); // GPT-2's rows: 64 chunks of 768 columns
  for (cuda::ResizeMode mode : {cuda::ResizeMode::Nearest,
                                 cuda::ResizeMode::Linear,
                                 cuda::ResizeMode::Cubic}) {
    resize(mode, 1, 1, 3, 2, seed++);
    resize(mode, 224, 224, 0.5, 0.5, seed++);
    resize(mode, 17, 257, 1.5, 0.6, seed++);
  }
  for (int mode = 0; mode < 3; ++mode)
    for (int padding = 0; padding < 3; ++padding)
      for (bool align : {false, true}) {
        auto m = static_cast<cuda::GridSampleMode>(mode);
        auto pad = static_cast<cuda::GridPadding>(padding);
        gridSample<float>(m, pad, align, 1, 1, 3, 2, seed++);
        gridSample<float>(m, pad, align, 37, 45, 19, 23, seed++);
        gridSample<double>(m, pad, align, 5, 7, 64, 65, seed++);
      }
  maxes(1, 1, 1, seed++);
  maxes(6, 257, 5, seed++);
  maxes(2, 100003, 1, seed++);
  maxes(70000, 49, 1, seed++);
  for (bool mean : {false, true}) {
    sum(mean, 4, 300, 5, seed++);
    sum(mean, 2, 100003, 1, seed++);
    sum(mean, 70000, 3, 1, seed++);
  }
  for (int reduction = 0; reduction < 3; ++reduction) {
    bool none = reduction == 0, mean = reduction == 2;
    nll(1, 1, 1, none, mean, seed++);
    nll(300, 257, 1, none, mean, seed++);
    nll(4, 10, 33, none, mean, seed++);
    nll(70000, 10, 1, none, mean, seed++);
  }
  for (bool mean : {false, true}) {
    crossEntropy(1, 1, mean, false, seed++);
    crossEntropy(300, 257, mean, false, seed++);
    crossEntropy(4, 50257, mean, false, seed++);
    crossEntropy(70000, 10, mean, true, seed++);
  }
  stridedRead({4, 2, 5, 3}, {5, 60, 1, 20}, 0, 120, seed++);      // a transpose
  stridedRead({3, 98}, {-600, 3}, 1507, 1800, seed++);             // a reversed slice
  stridedRead({2, 3, 257}, {0, 1, 0}, 0, 3, seed++);               // an expand
  stridedRead({768, 4096}, {1, 768}, 0, 768 * 4096, seed++);       // a large transpose
  gather(1, 50257, 4096, 768, false, seed++);  // GPT-2's embedding
  gather(3, 257, 7, 5, false, seed++);
  gather(1, 64, 100, 32, true, seed++);
  logics<cuda::Logic::Equal, float>(FSDPRT_F32, seed);
  logics<cuda::Logic::Equal, int64_t>(FSDPRT_I64, seed);
  logics<cuda::Logic::Equal, uint8_t>(FSDPRT_BOOL, seed);
  logics<cuda::Logic::Less, float>(FSDPRT_F32, seed);
  logics<cuda::Logic::Less, int64_t>(FSDPRT_I64, seed);
  logics<cuda::Logic::Less, uint8_t>(FSDPRT_BOOL, seed);
  logics<cuda::Logic::Greater, float>(FSDPRT_F32, seed);
  logics<cuda::Logic::Greater, int64_t>(FSDPRT_I64, seed);
  logics<cuda::Logic::Greater, uint8_t>(FSDPRT_BOOL, seed);
  logics<cuda::Logic::GreaterOrEqual, float>(FSDPRT_F32, seed);
  logics<cuda::Logic::GreaterOrEqual, int64_t>(FSDPRT_I64, seed);
  logics<cuda::Logic::LessOrEqual, float>(FSDPRT_F32, seed);
  logics<cuda::Logic::LessOrEqual, int64_t>(FSDPRT_I64, seed);
  logics<cuda::Logic::And, uint8_t>(FSDPRT_BOOL, seed);
  logics<cuda::Logic::Or, uint8_t>(FSDPRT_BOOL, seed);
  logics<cuda::Logic::Xor, uint8_t>(FSDPRT_BOOL, seed);
  for (int64_t n : {1, 257, 5000000})
    notOf(n, seed++);
  wheres<uint8_t>(seed);
  wheres<uint16_t>(seed);
  wheres<uint32_t>(seed);
  wheres<uint64_t>(seed);
  reductions<cuda::Reduce::Sum>(seed);
  reductions<cuda::Reduce::Mean>(seed);
  reductions<cuda::Reduce::Max>(seed);
  reductions<cuda::Reduce::Min>(seed);
  reductions<cuda::Reduce::SumSquare>(seed);
  reductions<cuda::Reduce::LogSumExp>(seed);
  reductions<cuda::Reduce::Prod>(seed);
  integerReductions(seed);
  integerArgExtremes<int32_t>(3, 257, 5, seed++);
  integerArgExtremes<int64_t>(70000, 49, 1, seed++);
  gatherGrad(1, 1, 1, 1, false, seed++);
  gatherGrad(1, 50257, 4096, 768, false, seed++); // GPT-2's embedding
  gatherGrad(3, 257, 1000, 5, false, seed++);
  gatherGrad(1, 64, 100003, 3, true, seed++);
  for (bool max : {true, false}) {
    pool(max, 1, window(1, 1, 0, 1, 1), seed++);
    pool(max, 6, window(2, 2, 0, 8, 8), seed++);
    pool(max, 64, window(3, 2, 1, 112, 112), seed++); // ResNet's stem pool
    pool(max, 3, window(3, 1, 1, 7, 257), seed++);
  }
  conv(1, convWindow(1, 1, 1, 1, 1, 0, 1), seed++);
  conv(2, convWindow(3, 32, 32, 7, 2, 3, 1),
       seed++); // ResNet's stem (corpus size)
  conv(32, convWindow(64, 56, 56, 3, 1, 1, 1),
       seed++); // ResNet's 3x3 (ImageNet size)
  conv(3, convWindow(5, 17, 257, 3, 2, 2, 2),
       seed++); // dilated, no multiple of a block
  conv(2, convWindow(3, 224, 224, 16, 16, 0, 1), seed++); // ViT-B/16's patches
  {
    cuda::ConvWindow oneD =
        convWindow(4, 1, 33, 1, 1, 0, 1); // a 1-D one: one row
    oneD.kernel[1] = 5, oneD.pad[1] = 2, oneD.dilation[1] = 3,
    oneD.ow = 33 + 4 - 12;
    conv(2, oneD, seed++);
  }
  batchNorm(1, 1, 1, seed++);
  batchNorm(32, 64, 112 * 112, seed++);
  batchNorm(8, 32, 1, seed++);
  using Mask = cuda::MaskKind;
  attention(Mask::None, 1, 1, 1, 1, 1, 0, seed++);
  attention(Mask::Causal, 6, 257, 257, 64, 64, 0, seed++);
  attention(Mask::Causal, 2, 100, 37, 80, 80, 0, seed++); // L > S
  attention(Mask::Add, 3, 100, 300, 128, 128, 0, seed++);
  attention(Mask::Fill, 2, 65, 200, 8, 80, 70, seed++); // left padding
  attention(Mask::None, 1, 64, 4096, 128, 128, 0, seed++); // long rows
  attention(Mask::Causal, 40000, 33, 33, 8, 8, 0, seed++); // > 65535 tiles
  copies<uint8_t>(seed);
  copies<uint16_t>(seed);
  copies<uint32_t>(seed);
  copies<uint64_t>(seed);
  std::printf("%d of %d GPU kernel checks passed\n", checks - failures, checks);
  return failures ? 1 : 0;
}
