//===- fake_device.cpp - The CUDA backend on a device made of host memory -===//
//
// Device "fake-cuda": the CUDA backend's host code (backend.cpp) on a
// Device (device.h) whose memory is host memory, so that CI runs it
// without a GPU. The host reaches that memory only through the backend's
// upload, download, copy and fill; every launch passes the hazard
// checker (hazards.h) with the bytes it reads and writes; the project's
// kernels run their bodies (kernels/) with the host launchers, in groups
// of 4 lanes; GEMMs run on OpenBLAS from the same Gemm description the
// GPU's cuBLASLt gets. Ops with no own kernel yet run the CPU backend's
// kernel on the same memory; "fake-cuda:strict" refuses them when the
// session is created, as a GPU does. "fake-cuda:cudnn" is the strict
// device with a host model of the cuDNN attention graphs the GPU device
// runs (cudnn_graphs.h: the same tensors, in the same order, the same
// workspace), so that the backend's routing to cuDNN (the transposes of
// the keys, the bindings) runs in CI too. Its memory is also not host
// addressable to the rest of the runtime, as a GPU's: a local group's
// ranks meet through download and upload, as they do on a GPU, and a copy
// whose device side is host memory fails as cudaMemcpy does.
//
//===----------------------------------------------------------------------===//

#include "../cpu/kernels.h"
#include "../../src/half.h"
#include "device.h"
#include "host_launch.h"
#include "kernels/rows.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace fsdprt::cuda {
namespace {

/// Lanes of a host group: more than one, so that the bodies' striding and
/// reductions run as on a block.
constexpr int kLanes = 4;

class FakeStream : public DeviceStream {
public:
  explicit FakeStream(int index) : index(index) {}
  int index;
};

class FakeEvent : public DeviceEvent {
public:
  explicit FakeEvent(std::vector<uint64_t> clock) : clock(std::move(clock)) {}
  std::vector<uint64_t> clock;
  /// The host's time at the record: the fake device runs a launch's work
  /// as it is launched, so that is when the stream reached the event.
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

template <class Body> std::string rows(const Body &body, int64_t count) {
  hostForEachRow(body, count, kLanes);
  return "";
}
template <class Body> std::string each(const Body &body, int64_t n) {
  hostForEach(body, n);
  return "";
}

/// f(T{}) with T the unsigned integer of `elementSize` bytes.
template <class F>
std::string bySize(size_t elementSize, const char *what, F f) {
  switch (elementSize) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  }
  return std::string("no ") + what + " of " + std::to_string(elementSize) +
         "-byte elements";
}

/// The pointers (void or const void) as T pointers.
template <typename T, typename P>
std::vector<T *> typed(P *const *pointers, size_t n) {
  std::vector<T *> out(n);
  for (size_t k = 0; k < n; ++k)
    out[k] = static_cast<T *>(pointers[k]);
  return out;
}

/// Element `i` of a matrix of `dtype`, widened to fp32.
float element(fsdprt_dtype_t dtype, const void *data, int64_t i) {
  if (dtype == FSDPRT_F32)
    return static_cast<const float *>(data)[i];
  return halfToFloat(static_cast<const uint16_t *>(data)[i], dtype);
}

/// An attention graph as cuDNN computes it, on the host: fp32 arithmetic
/// on the stored dtype's values, the workspace holding the graph's fp32
/// intermediates (the softmax sum, the dQ accumulator) as cuDNN's does.
struct FakeCudnnGraph : PreparedGraph {
  explicit FakeCudnnGraph(const cudnn::SdpaShape &shape) : shape(shape) {}
  int64_t workspaceBytes() const override {
    if (!shape.backward)
      return 0;
    int64_t rows = shape.batch * shape.heads * shape.seqQ;
    return (rows * 4 + 255) / 256 * 256 + rows * shape.headDim * 4;
  }
  std::string name() const override {
    return std::string("sdpa ") + (shape.backward ? "backward" : "forward") +
           " b" + std::to_string(shape.batch) + " h" +
           std::to_string(shape.heads) + " sq" + std::to_string(shape.seqQ) +
           " skv" + std::to_string(shape.seqKv) + " d" +
           std::to_string(shape.headDim) + (shape.causal ? " causal" : "") +
           (shape.headsInRows ? " bshd" : "") +
           " on fake-cuda:cudnn's host model";
  }
  std::string run(const std::vector<void *> &t, void *workspace) const;
  cudnn::SdpaShape shape;
};

std::string FakeCudnnGraph::run(const std::vector<void *> &t,
                                void *workspace) const {
  const cudnn::SdpaShape &x = shape;
  if (t.size() != (x.backward ? 9u : 5u))
    return "fake cuDNN: " + std::to_string(t.size()) + " tensors bound";
  fsdprt_dtype_t dtype =
      x.dtype == cudnn::DType::BF16 ? FSDPRT_BF16 : FSDPRT_F16;
  int64_t bh = x.batch * x.heads, l = x.seqQ, s = x.seqKv, d = x.headDim;
  auto get = [&](size_t k, int64_t i) { return element(dtype, t[k], i); };
  auto put = [&](size_t k, int64_t i, float v) {
    static_cast<uint16_t *>(t[k])[i] = floatToHalf(v, dtype);
  };
  std::vector<float> p(s);
  float *sum = static_cast<float *>(workspace);
  float *dqAcc = reinterpret_cast<float *>(
      static_cast<char *>(workspace) + (bh * l * 4 + 255) / 256 * 256);
  // Stats: the forward's 4th tensor, the backward's 5th.
  float *stats = static_cast<float *>(t[x.backward ? 5 : 4]);
  if (x.backward)
    for (int64_t k = 0; k < bh * s * d; ++k) {
      put(7, k, 0); // dK
      put(8, k, 0); // dV
    }
  std::vector<float> dk(bh * s * d, 0), dv(bh * s * d, 0);
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < l; ++i) {
      // row: the statistics' index; at: Q's, O's, dO's and dQ's.
      int64_t row = b * l + i, at = x.rowAt(b, i, l);
      auto key = [&](int64_t j) { return x.rowAt(b, j, s); };
      // Scaled scores of row i, causal columns j > i excluded.
      int64_t cols = x.causal ? std::min(s, i + 1) : s;
      float max = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) {
        float dot = 0;
        for (int64_t e = 0; e < d; ++e)
          dot += get(0, at + e) * get(1, key(j) + e);
        p[j] = dot * x.scale;
        max = std::max(max, p[j]);
      }
      if (!x.backward) {
        float total = 0;
        for (int64_t j = 0; j < cols; ++j)
          total += p[j] = std::exp(p[j] - max);
        stats[row] = max + std::log(total);
        for (int64_t e = 0; e < d; ++e) {
          float o = 0;
          for (int64_t j = 0; j < cols; ++j)
            o += p[j] / total * get(2, key(j) + e);
          put(3, at + e, o);
        }
        continue;
      }
      for (int64_t j = 0; j < cols; ++j)
        p[j] = std::exp(p[j] - stats[row]);
      sum[row] = 0;
      for (int64_t e = 0; e < d; ++e)
        sum[row] += get(4, at + e) * get(3, at + e);
      for (int64_t e = 0; e < d; ++e)
        dqAcc[row * d + e] = 0;
      for (int64_t j = 0; j < cols; ++j) {
        float dp = 0;
        for (int64_t e = 0; e < d; ++e) {
          dp += get(4, at + e) * get(2, key(j) + e);
          dv[(b * s + j) * d + e] += p[j] * get(4, at + e);
        }
        float ds = p[j] * (dp - sum[row]) * x.scale;
        for (int64_t e = 0; e < d; ++e) {
          dqAcc[row * d + e] += ds * get(1, key(j) + e);
          dk[(b * s + j) * d + e] += ds * get(0, at + e);
        }
      }
      for (int64_t e = 0; e < d; ++e)
        put(6, at + e, dqAcc[row * d + e]);
    }
  if (x.backward)
    for (int64_t b = 0; b < bh; ++b)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t e = 0; e < d; ++e) {
          int64_t k = (b * s + j) * d + e;
          put(7, x.rowAt(b, j, s) + e, dk[k]);
          put(8, x.rowAt(b, j, s) + e, dv[k]);
        }
  return "";
}

/// A convolution graph as cuDNN computes it, on the host: the direct sum
/// over the window in fp32, x, w and y bound as the GPU device binds them.
struct FakeConvGraph : PreparedGraph {
  explicit FakeConvGraph(const cudnn::ConvShape &shape) : shape(shape) {}
  int64_t workspaceBytes() const override { return 0; }
  std::string name() const override {
    static const char *passes[] = {"fprop", "dgrad", "wgrad"};
    return std::string("conv ") + passes[(int)shape.pass] +
           " on fake-cuda:cudnn's host model";
  }
  std::string run(const std::vector<void *> &t) const;
  cudnn::ConvShape shape;
};

std::string FakeConvGraph::run(const std::vector<void *> &t) const {
  const cudnn::ConvShape &x = shape;
  if (t.size() != 3)
    return "fake cuDNN: " + std::to_string(t.size()) + " tensors bound";
  fsdprt_dtype_t dtype = x.dtype == cudnn::DType::F32    ? FSDPRT_F32
                         : x.dtype == cudnn::DType::BF16 ? FSDPRT_BF16
                                                         : FSDPRT_F16;
  int64_t oh = x.outH(), ow = x.outW();
  int64_t sizes[3] = {x.n * x.c * x.h * x.w, x.k * x.c * x.r * x.s,
                      x.n * x.k * oh * ow};
  // The pass's output (x, w or y) accumulates; the other two are read.
  int out = x.pass == cudnn::ConvPass::Fprop   ? 2
            : x.pass == cudnn::ConvPass::Dgrad ? 0
                                               : 1;
  std::vector<float> v[3];
  for (int k = 0; k < 3; ++k) {
    v[k].assign(sizes[k], 0.0f);
    if (k != out)
      for (int64_t i = 0; i < sizes[k]; ++i)
        v[k][i] = element(dtype, t[k], i);
  }
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t k = 0; k < x.k; ++k)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t c = 0; c < x.c; ++c)
            for (int64_t r = 0; r < x.r; ++r)
              for (int64_t s = 0; s < x.s; ++s) {
                int64_t ih = i * x.stride - x.pad + r * x.dilation;
                int64_t iw = j * x.stride - x.pad + s * x.dilation;
                if (ih < 0 || ih >= x.h || iw < 0 || iw >= x.w)
                  continue;
                int64_t at[3] = {((n * x.c + c) * x.h + ih) * x.w + iw,
                                 ((k * x.c + c) * x.r + r) * x.s + s,
                                 ((n * x.k + k) * oh + i) * ow + j};
                int a = out == 0 ? 1 : 0, b = out == 2 ? 1 : 2;
                v[out][at[out]] += v[a][at[a]] * v[b][at[b]];
              }
  for (int64_t i = 0; i < sizes[out]; ++i) {
    if (dtype == FSDPRT_F32)
      static_cast<float *>(t[out])[i] = v[out][i];
    else
      static_cast<uint16_t *>(t[out])[i] = floatToHalf(v[out][i], dtype);
  }
  return "";
}

/// Batch norm as cuDNN's graphs compute it, on the host, bound as the GPU
/// binds them (cudnn_graphs.h). Inference: x, scale, bias, mean, inv std,
/// y in fp32, (x - mean) * invStd * scale + bias. Training forward: x,
/// scale, saved mean, saved inv std, y, bias, running mean and var, their
/// new values (cuDNN's factor f: running * (1 - f) + batch * f, the
/// variance unbiased). Backward: x, scale, mean, inv std, dy, dx, dscale,
/// dbias. x, y, dy and dx in the graph's dtype, the rest fp32; sums in
/// double.
struct FakeNormGraph : PreparedGraph {
  explicit FakeNormGraph(const cudnn::NormShape &shape) : shape(shape) {}
  int64_t workspaceBytes() const override { return 0; }
  std::string name() const override {
    return std::string("batchnorm ") +
           (shape.inference ? "inference"
            : shape.backward ? "backward"
                             : "forward") +
           " [" + std::to_string(shape.n) + "," + std::to_string(shape.c) +
           "," + std::to_string(shape.h) + "," + std::to_string(shape.w) +
           "] on fake-cuda:cudnn's host model";
  }
  std::string run(const std::vector<void *> &t) const;
  cudnn::NormShape shape;
};

std::string FakeNormGraph::run(const std::vector<void *> &t) const {
  const cudnn::NormShape &x = shape;
  size_t want = x.inference ? 6 : x.backward ? 8 : 10;
  if (t.size() != want)
    return "fake cuDNN: " + std::to_string(t.size()) + " tensors bound";
  fsdprt_dtype_t dtype = x.dtype == cudnn::DType::F32    ? FSDPRT_F32
                         : x.dtype == cudnn::DType::BF16 ? FSDPRT_BF16
                                                         : FSDPRT_F16;
  auto f32 = [&](size_t k) { return static_cast<float *>(t[k]); };
  auto get = [&](size_t k, int64_t i) { return element(dtype, t[k], i); };
  auto put = [&](size_t k, int64_t i, double v) {
    if (dtype == FSDPRT_F32)
      f32(k)[i] = static_cast<float>(v);
    else
      static_cast<uint16_t *>(t[k])[i] =
          floatToHalf(static_cast<float>(v), dtype);
  };
  int64_t inner = x.h * x.w, count = x.n * inner;
  auto at = [&](int64_t n, int64_t c, int64_t i) {
    return (n * x.c + c) * inner + i;
  };
  for (int64_t c = 0; c < x.c; ++c) {
    if (x.inference) {
      for (int64_t n = 0; n < x.n; ++n)
        for (int64_t i = 0; i < inner; ++i)
          put(5, at(n, c, i),
              (get(0, at(n, c, i)) - f32(3)[c]) * f32(4)[c] * f32(1)[c] +
                  f32(2)[c]);
      continue;
    }
    if (x.backward) {
      double mean = f32(2)[c], inv = f32(3)[c], sumDy = 0, sumDyXhat = 0;
      for (int64_t n = 0; n < x.n; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          double dy = get(4, at(n, c, i));
          sumDy += dy;
          sumDyXhat += dy * (get(0, at(n, c, i)) - mean) * inv;
        }
      for (int64_t n = 0; n < x.n; ++n)
        for (int64_t i = 0; i < inner; ++i) {
          double xhat = (get(0, at(n, c, i)) - mean) * inv;
          put(5, at(n, c, i),
              f32(1)[c] * inv *
                  (get(4, at(n, c, i)) - (sumDy + xhat * sumDyXhat) / count));
        }
      f32(6)[c] = static_cast<float>(sumDyXhat);
      f32(7)[c] = static_cast<float>(sumDy);
      continue;
    }
    double sum = 0, squares = 0;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < inner; ++i)
        sum += get(0, at(n, c, i));
    double mean = sum / count;
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        double d = get(0, at(n, c, i)) - mean;
        squares += d * d;
      }
    double var = squares / count, inv = 1.0 / std::sqrt(var + x.epsilon);
    for (int64_t n = 0; n < x.n; ++n)
      for (int64_t i = 0; i < inner; ++i)
        put(4, at(n, c, i),
            (get(0, at(n, c, i)) - mean) * inv * f32(1)[c] + f32(5)[c]);
    double f = x.momentum, unbias = count > 1 ? double(count) / (count - 1) : 1;
    f32(2)[c] = static_cast<float>(mean);
    f32(3)[c] = static_cast<float>(inv);
    f32(8)[c] = static_cast<float>(f32(6)[c] * (1 - f) + mean * f);
    f32(9)[c] = static_cast<float>(f32(7)[c] * (1 - f) + var * unbias * f);
  }
  return "";
}

struct FakeGemm : PreparedGemm {
  explicit FakeGemm(const Gemm &gemm) : gemm(gemm) {}
  Gemm gemm;
};

/// The Gemm as cuBLASLt computes it: fp32 products of the (widened)
/// operands, the bias and the activation on the fp32 result, one rounding
/// to the output's dtype.
void run(const Gemm &g, const void *a, const void *b, const void *bias,
         void *y);

class FakeDevice : public Device {
public:
  FakeDevice(bool strict, bool cudnn)
      : strict(strict || cudnn), cudnn(cudnn) {}
  std::string describe() const override {
    return cudnn ? "fake-cuda:cudnn" : strict ? "fake-cuda:strict" : "fake-cuda";
  }
  /// The strict device lends no CPU kernels: it refuses what a GPU does.
  bool hostMemory() const override { return !strict; }

  void *allocate(uint64_t bytes) override {
    uint64_t size = std::max<uint64_t>((bytes + 255) / 256 * 256, 256);
    void *memory = std::aligned_alloc(256, size);
    std::lock_guard<std::mutex> lock(mutex);
    if (memory)
      allocations[reinterpret_cast<uintptr_t>(memory)] = size;
    return memory;
  }
  void free(void *memory) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      allocations.erase(reinterpret_cast<uintptr_t>(memory));
    }
    std::free(memory);
  }
  bool owns(const void *p) override { return bytesFrom(p) > 0; }
  bool hostAddressable() const override { return !cudnn; }
  // Synchronous, as cudaMemcpy: the device is idle around them. The
  // device side must lie inside one allocation, as a GPU's driver checks
  // (cudaErrorInvalidValue there).
  void copy(void *dst, const void *src, uint64_t bytes,
            CopyKind kind) override {
    idle();
    if (kind != CopyKind::DeviceToHost)
      inside(dst, bytes, "cudaMemcpy's destination");
    if (kind != CopyKind::HostToDevice)
      inside(src, bytes, "cudaMemcpy's source");
    std::memmove(dst, src, bytes);
  }
  void fill(void *dst, uint8_t value, uint64_t bytes) override {
    idle();
    inside(dst, bytes, "cudaMemset");
    std::memset(dst, value, bytes);
  }
  /// The bytes from `p` to the end of the allocation holding it (0: none
  /// holds it).
  uint64_t bytesFrom(const void *p) {
    std::lock_guard<std::mutex> lock(mutex);
    auto at = reinterpret_cast<uintptr_t>(p);
    auto it = allocations.upper_bound(at);
    if (it == allocations.begin())
      return 0;
    uintptr_t end = std::prev(it)->first + std::prev(it)->second;
    return at < end ? end - at : 0;
  }
  /// Throws unless [p, p + bytes) lies in one allocation (0 bytes: any p).
  void inside(const void *p, uint64_t bytes, const char *what) {
    if (bytes && bytes > bytesFrom(p))
      throw DeviceError(std::string(what) + ": " + std::to_string(bytes) +
                        " bytes at " +
                        std::to_string(reinterpret_cast<uintptr_t>(p)) +
                        " are not inside one allocation of the fake device");
  }

  std::unique_ptr<DeviceStream> createStream() override {
    std::lock_guard<std::mutex> lock(mutex);
    return std::make_unique<FakeStream>(checker.addStream());
  }
  std::unique_ptr<DeviceEvent> record(DeviceStream &s) override {
    std::lock_guard<std::mutex> lock(mutex);
    return std::make_unique<FakeEvent>(checker.record(index(s)));
  }
  /// Work runs as it is launched: an event is reached once recorded.
  bool finished(const DeviceEvent &) override { return true; }
  double elapsed(const DeviceEvent &a, const DeviceEvent &b) override {
    return std::chrono::duration<double>(
               static_cast<const FakeEvent &>(b).at -
               static_cast<const FakeEvent &>(a).at)
        .count();
  }
  void wait(DeviceStream &s, const DeviceEvent &event) override {
    std::lock_guard<std::mutex> lock(mutex);
    checker.wait(index(s), static_cast<const FakeEvent &>(event).clock);
  }
  std::string synchronize(DeviceStream &) override {
    idle();
    std::lock_guard<std::mutex> lock(mutex);
    previous = std::move(current);
    current.clear();
    return "";
  }
  std::string admit(DeviceStream &s, const Work &work) override {
    std::lock_guard<std::mutex> lock(mutex);
    std::string entry = work.name;
    for (const auto *list : {&work.reads, &work.writes})
      for (const Range &r : *list)
        entry += " [" + std::to_string(r.begin) + ", " + std::to_string(r.end) + ")";
    current.push_back(std::move(entry));
    return checker.run(index(s), work);
  }
  const std::vector<std::string> *issued(bool last) const override {
    return last ? &previous : &current;
  }

  std::string unary(DeviceStream &, Unary op, const float *x, float *y,
                    int64_t n, UnaryParams p) override {
    return withUnary(op, [&](auto f) {
      return each(UnaryBody<decltype(f)::value>{x, y, p}, n);
    });
  }
  std::string floatClass(DeviceStream &, const FloatClassBody &body,
                         int64_t n) override {
    return each(body, n);
  }
  std::string cast(DeviceStream &, bool toHalf, fsdprt_dtype_t half,
                   const void *x, void *y, int64_t n) override {
    if (toHalf)
      return each(CastToHalf{static_cast<const float *>(x),
                             static_cast<uint16_t *>(y), half},
                  n);
    return each(CastFromHalf{static_cast<const uint16_t *>(x),
                             static_cast<float *>(y), half},
                n);
  }
  std::string anyCast(DeviceStream &, fsdprt_dtype_t from, fsdprt_dtype_t to,
                      const void *x, void *y, int64_t n) override {
    return each(AnyCast{x, y, from, to}, n);
  }
  std::string unary64(DeviceStream &, Unary op, const int64_t *x, int64_t *y,
                      int64_t n) override {
    return each(Unary64{op, x, y}, n);
  }
  std::string binary(DeviceStream &, Binary op, const Broadcast &plan,
                     const float *a, const float *b, float *y,
                     int64_t n) override {
    return binaryOf(op, plan, a, b, y, n);
  }
  std::string binary(DeviceStream &, Binary op, const Broadcast &plan,
                     const int64_t *a, const int64_t *b, int64_t *y,
                     int64_t n) override {
    if (op == Binary::Pow || op == Binary::PRelu)
      return std::string("no int64 ") + binaryName(op) + " kernel";
    return binaryOf(op, plan, a, b, y, n);
  }
  std::string integerBinary(DeviceStream &, Binary op, fsdprt_dtype_t dtype,
                            const Broadcast &plan, const void *a, const void *b,
                            void *y, int64_t n) override {
    std::string refused = std::string("no ") + fsdprt_dtype_name(dtype) + " " +
                          binaryName(op) + " kernel";
    if (op == Binary::Pow || op == Binary::PRelu)
      return refused;
    return withNarrowInteger(
        dtype,
        [&](auto t) {
          using T = decltype(t);
          return binaryOf(op, plan, static_cast<const T *>(a),
                          static_cast<const T *>(b), static_cast<T *>(y), n);
        },
        [&] { return refused; });
  }
  std::string powInt64(DeviceStream &, fsdprt_dtype_t exponent,
                       const Broadcast &plan, const int64_t *a, const void *b,
                       int64_t *y, int64_t n) override {
    return withPowExponent(
        exponent,
        [&](auto e) {
          using E = decltype(e);
          return each(PowInt64Body<E>{plan, a, static_cast<const E *>(b), y},
                      n);
        },
        [&] {
          return std::string("no int64 pow by ") + fsdprt_dtype_name(exponent);
        });
  }
  std::string pad(DeviceStream &, size_t elementSize, const PadShape &shape,
                  const void *x, void *y, int64_t n, uint64_t fill) override {
    return bySize(elementSize, "pad", [&](auto t) {
      using T = decltype(t);
      T value;
      std::memcpy(&value, &fill, sizeof value);
      return each(PadBody<T>{shape, static_cast<const T *>(x),
                             static_cast<T *>(y), value},
                  n);
    });
  }
  std::string trilu(DeviceStream &, size_t elementSize, const void *x, void *y,
                    int64_t n, int64_t rows, int64_t cols, int64_t k,
                    const int64_t *kInput, bool upper) override {
    return bySize(elementSize, "trilu", [&](auto t) {
      using T = decltype(t);
      return each(TriluBody<T>{static_cast<const T *>(x), static_cast<T *>(y),
                               rows, cols, k, kInput, upper},
                  n);
    });
  }
  std::string cumsum(DeviceStream &, fsdprt_dtype_t dtype, const void *x,
                     void *y, int64_t lines, int64_t dim, int64_t inner,
                     bool exclusive, bool reverse,
                     const CumsumAxisInput &axisInput) override {
    auto run = [&](auto t) {
      using T = decltype(t);
      return each(CumsumBody<T>{static_cast<const T *>(x), static_cast<T *>(y),
                                dim, inner, exclusive, reverse, axisInput},
                  lines);
    };
    switch (dtype) {
    case FSDPRT_F32: return run(float{});
    case FSDPRT_F64: return run(double{});
    case FSDPRT_I64: return run(int64_t{});
    case FSDPRT_I32: return run(int32_t{});
    default: return std::string("no cumsum of ") + fsdprt_dtype_name(dtype);
    }
  }
  std::string gatherElements(DeviceStream &, size_t elementSize, bool indices32,
                             const AxisWalk &walk, const void *data,
                             const void *indices, void *y, int64_t n,
                             ErrorSlot *error) override {
    return bySize(elementSize, "gather_elements", [&](auto t) {
      using T = decltype(t);
      auto run = [&](auto i) {
        using I = decltype(i);
        return each(GatherElementsBody<T, I>{walk, static_cast<const T *>(data),
                                             static_cast<const I *>(indices),
                                             static_cast<T *>(y), error},
                    n);
      };
      return indices32 ? run(int32_t{}) : run(int64_t{});
    });
  }
  std::string scatterElements(DeviceStream &, const ScatterArgs &args,
                              int64_t lines) override {
    return withScatterTypes(args, [&](auto t, auto i) {
      return each(scatterElementsBody<decltype(t), decltype(i)>(args), lines);
    });
  }
  std::string scatterND(DeviceStream &, const ScatterArgs &args) override {
    return withScatterTypes(args, [&](auto t, auto i) {
      return each(scatterNDBody<decltype(t), decltype(i)>(args), args.slice);
    });
  }
  std::string dropout(DeviceStream &, const DropoutBody &body) override {
    return each(body, body.blocks());
  }
  std::string draw(DeviceStream &, const DrawBody &body) override {
    return each(body, body.blocks());
  }
  std::string softmax(DeviceStream &, bool log, const float *x, float *y,
                      int64_t outer, int64_t n, int64_t inner) override {
    if (log)
      return rows(SoftmaxBody<true>{x, y, n, inner}, outer * inner);
    return rows(SoftmaxBody<false>{x, y, n, inner}, outer * inner);
  }
  std::string logic(DeviceStream &, Logic op, fsdprt_dtype_t dtype,
                    const Broadcast &plan, const void *a, const void *b,
                    uint8_t *y, int64_t n) override {
    switch (op) {
    case Logic::Equal: return compareOf<Logic::Equal>(dtype, plan, a, b, y, n);
    case Logic::Less: return compareOf<Logic::Less>(dtype, plan, a, b, y, n);
    case Logic::Greater:
      return compareOf<Logic::Greater>(dtype, plan, a, b, y, n);
    case Logic::GreaterOrEqual:
      return compareOf<Logic::GreaterOrEqual>(dtype, plan, a, b, y, n);
    case Logic::LessOrEqual:
      return compareOf<Logic::LessOrEqual>(dtype, plan, a, b, y, n);
    case Logic::And: return logicOf<Logic::And, uint8_t>(plan, a, b, y, n);
    case Logic::Or: return logicOf<Logic::Or, uint8_t>(plan, a, b, y, n);
    case Logic::Xor: return logicOf<Logic::Xor, uint8_t>(plan, a, b, y, n);
    }
    return "unknown logic function";
  }
  std::string logicalNot(DeviceStream &, const uint8_t *x, uint8_t *y,
                         int64_t n) override {
    return each(NotBody{x, y}, n);
  }
  std::string where(DeviceStream &, size_t elementSize, const Broadcast &plan,
                    const uint8_t *cond, const void *a, const void *b, void *y,
                    int64_t n) override {
    return bySize(elementSize, "where", [&](auto zero) {
      using T = decltype(zero);
      return each(WhereBody<T>{plan, cond, static_cast<const T *>(a),
                               static_cast<const T *>(b), static_cast<T *>(y)},
                  n);
    });
  }
  std::string reduce(DeviceStream &, Reduce kind, const ReducePlan &plan,
                     const float *x, float *y, float *scratch) override {
    HostLauncher launch{kLanes};
    cuda::reduce(launch, kind, plan, x, y, scratch);
    return "";
  }
  std::string integerReduce(DeviceStream &,
                            const IntegerReduceBody &body) override {
    return each(body, body.plan.rows);
  }
  std::string norm(DeviceStream &, bool rms, const float *x, const float *scale,
                   const float *bias, float *y, int64_t count, int64_t n,
                   float eps, RowStats stats) override {
    if (rms)
      return rows(NormBody<true>{x, scale, bias, y, n, eps, stats}, count);
    return rows(NormBody<false>{x, scale, bias, y, n, eps, stats}, count);
  }
  std::string gather(DeviceStream &, size_t elementSize, bool indices32,
                     const void *data, const void *indices, void *y,
                     int64_t outer, int64_t dim, int64_t count, int64_t inner,
                     ErrorSlot *error) override {
    int64_t n = outer * count * inner;
    switch (elementSize) {
    case 1: return gatherOf<uint8_t>(indices32, data, indices, y, n, dim, count, inner, error);
    case 2: return gatherOf<uint16_t>(indices32, data, indices, y, n, dim, count, inner, error);
    case 4: return gatherOf<uint32_t>(indices32, data, indices, y, n, dim, count, inner, error);
    case 8: return gatherOf<uint64_t>(indices32, data, indices, y, n, dim, count, inner, error);
    }
    return "no gather of " + std::to_string(elementSize) + "-byte elements";
  }
  std::string gatherGrad(DeviceStream &, bool indices32, const float *g,
                         const void *indices, float *y, int64_t outer,
                         int64_t dim, int64_t count, int64_t inner,
                         int64_t *scratch, ErrorSlot *error) override {
    HostLauncher launch{kLanes};
    if (indices32)
      cuda::gatherGrad(
          launch,
          GatherGradArgs<int32_t>{g, static_cast<const int32_t *>(indices), y,
                                  outer, dim, count, inner, error},
          scratch);
    else
      cuda::gatherGrad(
          launch,
          GatherGradArgs<int64_t>{g, static_cast<const int64_t *>(indices), y,
                                  outer, dim, count, inner, error},
          scratch);
    return "";
  }
  std::string maxPoolIndices(DeviceStream &, const MaxPoolIndicesBody &body,
                             int64_t planes) override {
    return each(body, planes * body.win.oh * body.win.ow);
  }
  std::string resize(DeviceStream &, const ResizeBody &body,
                     int64_t n) override {
    return each(body, n);
  }
  std::string gridSample(DeviceStream &, const GridSampleBody &body) override {
    return each(body, body.threads());
  }
  std::string globalMaxPool(DeviceStream &, const float *x, float *y,
                            int64_t planes, int64_t inner) override {
    return each(GlobalMaxPoolBody{x, y, inner}, planes);
  }
  std::string argExtreme(DeviceStream &, const ArgExtremeBody &body,
                         int64_t rows) override {
    return each(body, rows);
  }
  std::string hardmax(DeviceStream &, const float *x, float *y, int64_t outer,
                      int64_t n, int64_t inner) override {
    return each(HardmaxBody{x, y, n, inner}, outer * inner);
  }
  std::string pool(DeviceStream &, bool max, const PoolWindow &window,
                   const float *x, float *y, int64_t planes) override {
    int64_t n = planes * window.oh * window.ow;
    if (max)
      return each(PoolBody<true>{window, x, y}, n);
    return each(PoolBody<false>{window, x, y}, n);
  }
  std::string poolGrad(DeviceStream &, bool max, const PoolWindow &window,
                       const float *x, const float *g, float *dx,
                       int64_t planes) override {
    int64_t n = planes * window.h * window.w;
    if (max)
      return each(PoolGradBody<true>{window, x, g, dx}, n);
    return each(PoolGradBody<false>{window, x, g, dx}, n);
  }
  std::string batchNorm(DeviceStream &, const float *x, const float *scale,
                        const float *bias, const float *mean, const float *var,
                        float *y, int64_t n, int64_t channels, int64_t inner,
                        float eps) override {
    return each(
        BatchNormBody{x, scale, bias, mean, var, y, channels, inner, eps},
        n * channels * inner);
  }
  std::string batchNormTrain(DeviceStream &,
                             const BatchNormTrainBody &body) override {
    return each(body, body.channels);
  }
  std::string batchNormGrad(DeviceStream &,
                            const BatchNormGradBody &body) override {
    return each(body, body.channels);
  }
  std::string inverseStd(DeviceStream &, const float *var, float *invStd,
                         int64_t channels, float eps) override {
    return each(InverseStdBody{var, invStd, eps}, channels);
  }
  std::string recurrent(DeviceStream &, const RecurrentBody &body,
                        int64_t n) override {
    return each(body, n);
  }
  std::string activationGrad(DeviceStream &, const ActivationGradBody &body,
                             int64_t n) override {
    return each(body, n);
  }
  std::string normGrad(DeviceStream &, const NormGradArgs &args) override {
    HostLauncher launch{kLanes};
    cuda::normGrad(launch, args);
    return "";
  }
  std::string adamw(DeviceStream &, const AdamWBody &body, int64_t n) override {
    return each(body, n);
  }
  std::string sgd(DeviceStream &, const SGDBody &body, int64_t n) override {
    return each(body, n);
  }
  std::string im2col(DeviceStream &, const ConvWindow &window, const float *x,
                     float *col, int64_t images) override {
    return each(Im2colBody{window, x, col},
                images * window.rows() * window.oh * window.ow);
  }
  std::string col2im(DeviceStream &, const ConvWindow &window, const float *col,
                     float *x, int64_t images) override {
    return each(Col2imBody{window, col, x},
                images * window.channels * window.h * window.w);
  }
  std::string concat(DeviceStream &, size_t elementSize,
                     const void *const *pieces, void *whole,
                     const std::vector<Piece> &plan) override {
    return bySize(elementSize, "concat", [&](auto zero) {
      using T = decltype(zero);
      HostLauncher launch{kLanes};
      cuda::concat(launch, typed<const T>(pieces, plan.size()).data(),
                   static_cast<T *>(whole), plan);
      return std::string();
    });
  }
  std::string split(DeviceStream &, size_t elementSize, const void *whole,
                    void *const *pieces,
                    const std::vector<Piece> &plan) override {
    return bySize(elementSize, "split", [&](auto zero) {
      using T = decltype(zero);
      HostLauncher launch{kLanes};
      cuda::split(launch, static_cast<const T *>(whole),
                  typed<T>(pieces, plan.size()).data(), plan);
      return std::string();
    });
  }
  std::string copyElements(DeviceStream &, size_t elementSize, const void *x,
                           void *y, int64_t n) override {
    return bySize(elementSize, "copy", [&](auto zero) {
      using T = decltype(zero);
      return each(
          CopyRows<T>{static_cast<const T *>(x), static_cast<T *>(y), n, 0, 0},
          n);
    });
  }
  std::string pack(DeviceStream &, size_t elementSize,
                   const void *const *members, void *flat,
                   const PackPlan &plan) override {
    return bySize(elementSize, "pack", [&](auto zero) {
      using T = decltype(zero);
      HostLauncher launch{kLanes};
      cuda::pack(launch, typed<const T>(members, plan.members.size()).data(),
                 static_cast<T *>(flat), plan);
      return std::string();
    });
  }
  std::string stridedRead(DeviceStream &, size_t elementSize,
                          const Broadcast &plan, const void *x, void *y,
                          int64_t offset, int64_t n) override {
    switch (elementSize) {
    case 1: return stridedOf<uint8_t>(plan, x, y, offset, n);
    case 2: return stridedOf<uint16_t>(plan, x, y, offset, n);
    case 4: return stridedOf<uint32_t>(plan, x, y, offset, n);
    case 8: return stridedOf<uint64_t>(plan, x, y, offset, n);
    }
    return "no strided read of " + std::to_string(elementSize) + "-byte elements";
  }
  std::string nllLoss(DeviceStream &, const NllInputs &in, int64_t positions,
                      bool none, bool mean, float *scratch, float *y) override {
    HostLauncher launch{kLanes};
    cuda::nllLoss(launch, in, positions, none, mean, scratch, y);
    return "";
  }
  std::string nllLossGrad(DeviceStream &, const NllInputs &in,
                          int64_t positions, const float *g, bool none,
                          bool mean, float *scratch, float *y,
                          int64_t n) override {
    HostLauncher launch{kLanes};
    cuda::nllLossGrad(launch, in, positions, g, none, mean, scratch, y, n);
    return "";
  }
  std::string crossEntropy(DeviceStream &, const CrossEntropyInputs &in,
                           int64_t positions, bool none, bool mean,
                           float *scratch, float *y) override {
    HostLauncher launch{kLanes};
    cuda::crossEntropy(launch, in, positions, none, mean, scratch, y);
    return "";
  }
  std::string crossEntropyGrad(DeviceStream &, const CrossEntropyInputs &in,
                               int64_t positions, const float *g, bool none,
                               bool mean, float *scratch, float *y) override {
    HostLauncher launch{kLanes};
    cuda::crossEntropyGrad(launch, in, positions, g, none, mean, scratch, y);
    return "";
  }
  std::string attention(DeviceStream &, const AttentionArgs &args) override {
    AttentionTiles tiles = planAttentionTiles(args.shape.d, args.shape.dv);
    if (!tiles.fits)
      return "attention's head dims leave no tile in shared memory";
    HostLauncher launch{kLanes};
    cuda::attentionForward(launch, args, tiles);
    return "";
  }
  std::string attentionGrad(DeviceStream &,
                            const AttentionArgs &args) override {
    AttentionTiles tiles = planAttentionTiles(args.shape.d, args.shape.dv);
    if (!tiles.fits)
      return "attention's head dims leave no tile in shared memory";
    HostLauncher launch{kLanes};
    cuda::attentionGrad(launch, args, tiles);
    return "";
  }
  std::shared_ptr<PreparedGemm> prepareGemm(const Gemm &gemm,
                                            std::string &) override {
    return std::make_shared<FakeGemm>(gemm);
  }
  std::shared_ptr<PreparedGraph>
  prepareAttention(const cudnn::SdpaShape &shape, std::string &why) override {
    if (!cudnn)
      return Device::prepareAttention(shape, why);
    return std::make_shared<FakeCudnnGraph>(shape);
  }
  std::shared_ptr<PreparedGraph> prepareConv(const cudnn::ConvShape &shape,
                                             std::string &why) override {
    if (!cudnn)
      return Device::prepareConv(shape, why);
    return std::make_shared<FakeConvGraph>(shape);
  }
  /// Batch norm (the graphs FakeNormGraph models); off, as a GPU's cuDNN,
  /// under FSDPRT_CUDNN=off.
  std::shared_ptr<PreparedGraph> prepareNorm(const cudnn::NormShape &shape,
                                             std::string &why) override {
    if (!cudnn)
      return Device::prepareNorm(shape, why);
    if (const char *env = std::getenv("FSDPRT_CUDNN");
        env && std::string(env) == "off") {
      why = "cuDNN is turned off (FSDPRT_CUDNN=off)";
      return nullptr;
    }
    if (shape.kind != cudnn::NormKind::Batch ||
        (shape.inference && shape.dtype != cudnn::DType::F32)) {
      why = "fake-cuda:cudnn models only batch norm (fp32 in inference)";
      return nullptr;
    }
    return std::make_shared<FakeNormGraph>(shape);
  }
  std::string runGraph(DeviceStream &, PreparedGraph &graph,
                       const std::vector<void *> &tensors,
                       void *workspace) override {
    if (auto *conv = dynamic_cast<FakeConvGraph *>(&graph))
      return conv->run(tensors);
    if (auto *norm = dynamic_cast<FakeNormGraph *>(&graph))
      return norm->run(tensors);
    return static_cast<FakeCudnnGraph &>(graph).run(tensors, workspace);
  }
  std::string gemm(DeviceStream &, PreparedGemm &gemm, const void *a,
                   const void *b, const void *bias, void *y) override {
    run(static_cast<FakeGemm &>(gemm).gemm, a, b, bias, y);
    return "";
  }

private:
  int index(DeviceStream &s) const { return static_cast<FakeStream &>(s).index; }
  /// Every stream synchronised: the host may touch the memory.
  void idle() {
    std::lock_guard<std::mutex> lock(mutex);
    checker.synchronize();
  }

  template <Logic Op, typename T>
  std::string logicOf(const Broadcast &plan, const void *a, const void *b,
                      uint8_t *y, int64_t n) {
    return each(LogicBody<Op, T>{plan, static_cast<const T *>(a),
                                 static_cast<const T *>(b), y},
                n);
  }
  template <Logic Op>
  std::string compareOf(fsdprt_dtype_t dtype, const Broadcast &plan,
                        const void *a, const void *b, uint8_t *y, int64_t n) {
    switch (dtype) {
    case FSDPRT_F32: return logicOf<Op, float>(plan, a, b, y, n);
    case FSDPRT_I64: return logicOf<Op, int64_t>(plan, a, b, y, n);
    case FSDPRT_BOOL: return logicOf<Op, uint8_t>(plan, a, b, y, n);
    default:
      break;
    }
    return std::string("no comparison of ") + fsdprt_dtype_name(dtype);
  }
  template <typename T>
  std::string gatherOf(bool indices32, const void *data, const void *indices,
                       void *y, int64_t n, int64_t dim, int64_t count,
                       int64_t inner, ErrorSlot *error) {
    const T *d = static_cast<const T *>(data);
    T *out = static_cast<T *>(y);
    if (indices32)
      return each(GatherBody<T, int32_t>{d, static_cast<const int32_t *>(indices),
                                         out, dim, count, inner, error},
                  n);
    return each(GatherBody<T, int64_t>{d, static_cast<const int64_t *>(indices),
                                       out, dim, count, inner, error},
                n);
  }
  template <typename T>
  std::string binaryOf(Binary op, const Broadcast &plan, const T *a,
                       const T *b, T *y, int64_t n) {
    return withBinary(op, [&](auto f) {
      return each(BinaryBody<decltype(f)::value, T>{plan, a, b, y}, n);
    });
  }
  template <typename T>
  std::string stridedOf(const Broadcast &plan, const void *x, void *y,
                        int64_t offset, int64_t n) {
    return each(StridedReadBody<T>{plan, static_cast<const T *>(x),
                                   static_cast<T *>(y), offset},
                n);
  }

  bool strict, cudnn;
  HazardChecker checker;
  mutable std::mutex mutex;
  std::vector<std::string> current, previous; // work admitted (issued())
  std::map<uintptr_t, uint64_t> allocations;  // start -> bytes (owns())
};

void run(const Gemm &g, const void *a, const void *b, const void *bias,
         void *y) {
  size_t size = fsdprt_dtype_size(g.dtype);
  int64_t rowsA = g.transA ? g.k : g.m, rowsB = g.transB ? g.n : g.k;
  int64_t colsA = g.transA ? g.m : g.k, colsB = g.transB ? g.k : g.n;
  std::vector<float> wa(rowsA * g.lda), wb(rowsB * g.ldb), wy(g.m * g.n);
  for (int64_t i = 0; i < g.batch; ++i) {
    auto at = [&](const void *base, int64_t stride) {
      return static_cast<const char *>(base) + i * stride * size;
    };
    const char *ai = at(a, g.strideA), *bi = at(b, g.strideB);
    char *yi = static_cast<char *>(y) + i * g.strideY * size;
    for (int64_t r = 0; r < rowsA; ++r)
      for (int64_t col = 0; col < colsA; ++col)
        wa[r * g.lda + col] = element(g.dtype, ai, r * g.lda + col);
    for (int64_t r = 0; r < rowsB; ++r)
      for (int64_t col = 0; col < colsB; ++col)
        wb[r * g.ldb + col] = element(g.dtype, bi, r * g.ldb + col);
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.n; ++col)
        wy[r * g.n + col] = g.beta == 0 ? 0 : element(g.dtype, yi, r * g.ldy + col);
    cpu::sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, wa.data(), g.lda,
               wb.data(), g.ldb, g.beta, wy.data(), g.n);
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.n; ++col) {
        float v = wy[r * g.n + col];
        if (g.bias)
          v += element(g.dtype, bias, col);
        if (g.activation == GemmActivation::Relu)
          v = v > 0 ? v : 0.0f;
        else if (g.activation == GemmActivation::GeluTanh)
          v = cpu::geluTanh(v);
        int64_t at = r * g.ldy + col;
        if (g.dtype == FSDPRT_F32)
          reinterpret_cast<float *>(yi)[at] = v;
        else
          reinterpret_cast<uint16_t *>(yi)[at] = floatToHalf(v, g.dtype);
      }
  }
}

} // namespace
} // namespace fsdprt::cuda

namespace fsdprt {

std::unique_ptr<Backend> createFakeCudaBackend(bool strict, bool cudnn) {
  return cuda::createCudaBackend(
      std::make_unique<cuda::FakeDevice>(strict, cudnn));
}

} // namespace fsdprt
