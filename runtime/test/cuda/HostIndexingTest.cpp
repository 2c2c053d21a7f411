//===- HostIndexingTest.cpp - Trilu, CumSum and the scatters on the host --===//
//
// cuda-host: kernels/indexing.h's bodies against the CPU backend's pad
// (every mode), trilu, cumsum, gather_elements, scatter_elements and
// scatter_nd, bit for bit:
// every element size they move (1, 2, 4 and 8 bytes) and every dtype they
// add in, int32 and int64 indices counted from the end too, repeated
// indices (the CPU's order of updates), reductions none, add and mul,
// every axis, sizes of 1 and rows longer than a block. Then the ops
// through the backend on "fake-cuda:strict" (own kernels only) in fp32,
// bf16 and f16, trilu's k and cumsum's axis as inputs, and a bad index or
// axis reported as the CPU reports it.
//
//===----------------------------------------------------------------------===//

#include "HostHarness.h"

#include "../../backends/cuda/host_launch.h"
#include "../../backends/cuda/kernels/indexing.h"

#include "../../src/half.h"

using namespace fsdprt::test;
namespace cuda = fsdprt::cuda;
namespace plan = fsdprt::plan;

namespace {

/// n random elements of T (any bits for the unsigned movers, small values
/// for the arithmetic types so that sums and products stay exact-ish).
template <typename T> std::vector<T> values(int64_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::vector<T> v(n);
  for (T &x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = static_cast<T>((static_cast<int>(gen() % 2001) - 1000) / 97.0);
    else if constexpr (std::is_signed_v<T>)
      x = static_cast<T>(static_cast<int64_t>(gen()) >> (gen() % 64));
    else
      x = static_cast<T>(gen());
  }
  return v;
}

/// The dtype a value of T stands for in these tests.
template <typename T> plan::DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return plan::DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return plan::DType::F64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return plan::DType::I64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return plan::DType::I32;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return plan::DType::BF16;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return plan::DType::U8;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return plan::DType::F32; // only moved: any bits
  else
    return plan::DType::I64;
}

template <typename T>
void expectSameBits(const std::vector<T> &got, const Value &want) {
  ASSERT_EQ(got.size() * sizeof(T), want.bytes.size());
  EXPECT_EQ(std::memcmp(got.data(), want.bytes.data(), want.bytes.size()), 0);
}

template <typename T> void checkTrilu() {
  SCOPED_TRACE("element size " + std::to_string(sizeof(T)));
  const std::vector<Shape> shapes = {{1, 1}, {3, 5, 7}, {2, 257, 300}, {4, 1}};
  unsigned seed = 10;
  for (const Shape &shape : shapes)
    for (int64_t k : {-300, -2, 0, 1, 3, 299})
      for (bool upper : {true, false}) {
        SCOPED_TRACE("rank " + std::to_string(shape.size()) + " k " +
                     std::to_string(k) + (upper ? " upper" : " lower"));
        std::vector<T> x = values<T>(numel(shape), seed++), y(x.size());
        int64_t rows = shape[shape.size() - 2], cols = shape.back();
        cuda::hostForEach(cuda::TriluBody<T>{x.data(), y.data(), rows, cols, k,
                                             nullptr, upper},
                          numel(shape));
        Result r = runOp("trilu", {valueOf(dtypeOf<T>(), shape, x)},
                         {{dtypeOf<T>(), shape}},
                         {{"k", k}, {"upper", int64_t(upper)}});
        ASSERT_EQ(r.error, "");
        expectSameBits(y, r.outputs[0]);
      }
}

template <typename T> void checkPad(double value) {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtypeOf<T>())));
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
  };
  const std::vector<Case> cases = {
      {{}, {}},
      {{1}, {0, 0}},
      {{5}, {3, 4}},
      {{3, 257}, {1, 2, 2, 0}},
      {{2, 3, 4, 5}, {0, 1, 2, 3, 1, 0, 3, 4}},
      {{2, 100003}, {0, 2, 1, 3}},
  };
  unsigned seed = 20;
  for (const Case &c : cases)
    for (const char *mode : {"constant", "reflect", "edge"}) {
      SCOPED_TRACE(std::string(mode) + " rank " + std::to_string(c.x.size()));
      size_t rank = c.x.size();
      Shape out = c.x;
      cuda::PadShape shape{};
      shape.rank = static_cast<int>(rank);
      shape.mode = std::string(mode) == "reflect" ? cuda::PadMode::Reflect
                   : std::string(mode) == "edge"  ? cuda::PadMode::Edge
                                                  : cuda::PadMode::Constant;
      int64_t stride = 1;
      for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
        out[d] += c.pads[d] + c.pads[d + rank];
        shape.shape[d] = out[d];
        shape.from[d] = c.x[d];
        shape.stride[d] = stride;
        shape.before[d] = c.pads[d];
        stride *= c.x[d];
      }
      std::vector<T> x = values<T>(numel(c.x), seed++), y(numel(out));
      T fill = static_cast<T>(value);
      cuda::hostForEach(cuda::PadBody<T>{shape, x.data(), y.data(), fill},
                        numel(out));
      Result r = runOp("pad", {valueOf(dtypeOf<T>(), c.x, x)},
                       {{dtypeOf<T>(), out}},
                       {{"pads", c.pads},
                        {"mode", std::string(mode)},
                        {"value", value}});
      ASSERT_EQ(r.error, "");
      expectSameBits(y, r.outputs[0]);
    }
}

TEST(CudaHost, PadEqualsTheCpuBackendInEveryMode) {
  checkPad<float>(-2.5);
  checkPad<double>(0.25);
  checkPad<int64_t>(-7);
  checkPad<int32_t>(3);
  checkPad<uint8_t>(1);
}

TEST(CudaHost, TriluEqualsTheCpuBackendForEveryElementSize) {
  checkTrilu<uint8_t>();
  checkTrilu<uint16_t>();
  checkTrilu<uint32_t>();
  checkTrilu<uint64_t>();
}

template <typename T> void checkCumsum() {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtypeOf<T>())));
  struct Case {
    Shape x;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{1}, 0},       {{100003}, 0},
                                   {{3, 257}, 0},  {{3, 257}, 1},
                                   {{2, 5, 7}, 1}, {{2, 5, 7}, 2}};
  unsigned seed = 30;
  for (const Case &c : cases)
    for (int flags = 0; flags < 4; ++flags) {
      bool exclusive = flags & 1, reverse = flags & 2;
      SCOPED_TRACE("axis " + std::to_string(c.axis) + " of rank " +
                   std::to_string(c.x.size()) + " flags " +
                   std::to_string(flags));
      std::vector<T> x = values<T>(numel(c.x), seed++), y(x.size());
      int64_t dim = c.x[c.axis];
      int64_t inner = 1;
      for (size_t d = c.axis + 1; d < c.x.size(); ++d)
        inner *= c.x[d];
      cuda::hostForEach(
          cuda::CumsumBody<T>{x.data(), y.data(), dim, inner, exclusive, reverse},
          numel(c.x) / dim);
      Result r = runOp("cumsum", {valueOf(dtypeOf<T>(), c.x, x)},
                       {{dtypeOf<T>(), c.x}},
                       {{"axis", c.axis},
                        {"exclusive", int64_t(exclusive)},
                        {"reverse", int64_t(reverse)}});
      ASSERT_EQ(r.error, "");
      expectSameBits(y, r.outputs[0]);
    }
}

TEST(CudaHost, CumsumEqualsTheCpuBackendBitForBit) {
  checkCumsum<float>();
  checkCumsum<double>();
  checkCumsum<int64_t>();
  checkCumsum<int32_t>();
}

/// cumsum with its axis as an input: the body reading the axis (I64 and
/// I32, counted from the end too) over its maxLines() threads against the
/// CPU's cumsum, bit for bit, in every axis and flag.
template <typename T> void checkCumsumAxisInput() {
  SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtypeOf<T>())));
  const std::vector<Shape> shapes = {{1},       {100003},  {3, 257},
                                     {2, 5, 7}, {4, 1, 3}, {1, 1, 2, 1, 3}};
  unsigned seed = 60;
  for (const Shape &shape : shapes) {
    int64_t rank = static_cast<int64_t>(shape.size());
    cuda::CumsumAxisInput axisInput;
    axisInput.rank = static_cast<int>(rank);
    std::copy(shape.begin(), shape.end(), axisInput.shape);
    for (int64_t axis = -rank; axis < rank; ++axis)
      for (int flags = 0; flags < 8; ++flags) {
        bool exclusive = flags & 1, reverse = flags & 2, is32 = flags & 4;
        SCOPED_TRACE("axis " + std::to_string(axis) + " of rank " +
                     std::to_string(rank) + " flags " + std::to_string(flags));
        std::vector<T> x = values<T>(numel(shape), seed++), y(x.size());
        int64_t axis64 = axis;
        int32_t axis32 = static_cast<int32_t>(axis);
        axisInput.axis = is32 ? static_cast<const void *>(&axis32) : &axis64;
        axisInput.is32 = is32;
        cuda::hostForEach(cuda::CumsumBody<T>{x.data(), y.data(), 0, 0,
                                              exclusive, reverse, axisInput},
                          axisInput.maxLines());
        Value axisValue = is32 ? i32({}, {axis32}) : i64({}, {axis64});
        Result r = runOp(
            "cumsum", {valueOf(dtypeOf<T>(), shape, x), axisValue},
            {{dtypeOf<T>(), shape}},
            {{"exclusive", int64_t(exclusive)}, {"reverse", int64_t(reverse)}});
        ASSERT_EQ(r.error, "");
        expectSameBits(y, r.outputs[0]);
      }
  }
}

TEST(CudaHost, CumsumWithAnAxisInputEqualsTheCpuBackendBitForBit) {
  checkCumsumAxisInput<float>();
  checkCumsumAxisInput<double>();
  checkCumsumAxisInput<int64_t>();
  checkCumsumAxisInput<int32_t>();
}

TEST(CudaHost, CumsumReportsABadAxisInputOnceFromLineZero) {
  cuda::CumsumAxisInput axisInput;
  axisInput.rank = 2;
  axisInput.shape[0] = 3, axisInput.shape[1] = 4;
  EXPECT_EQ(axisInput.maxLines(), 4);
  for (int64_t bad : {int64_t(2), int64_t(-3), int64_t(INT64_MIN)}) {
    cuda::ErrorSlot slot{};
    axisInput.axis = &bad;
    axisInput.error = &slot;
    std::vector<float> x(12, 1.0f), y(12, -7.0f);
    cuda::hostForEach(cuda::CumsumBody<float>{x.data(), y.data(), 0, 0, false,
                                              false, axisInput},
                      axisInput.maxLines());
    EXPECT_EQ(slot.code, cuda::kBadAxis);
    EXPECT_EQ(slot.detail, bad);
    EXPECT_EQ(y, std::vector<float>(12, -7.0f)) << "nothing written";
  }
  // An empty x still launches one thread, which reports a bad axis.
  axisInput.shape[1] = 0;
  EXPECT_EQ(axisInput.maxLines(), 1);
}

/// The walk of data and indices along `axis`, as the backend plans it.
cuda::AxisWalk walkOf(const Shape &data, const Shape &indices, int64_t axis) {
  cuda::AxisWalk w;
  w.rank = static_cast<int>(data.size());
  w.axis = static_cast<int>(axis);
  int64_t ds = 1, is = 1;
  for (int d = w.rank - 1; d >= 0; --d) {
    w.data[d] = d == axis ? 1 : data[d];
    w.index[d] = indices[d];
    w.dataStride[d] = ds;
    w.indexStride[d] = is;
    ds *= data[d];
    is *= indices[d];
  }
  w.dim = data[axis];
  w.axisStride = w.dataStride[axis];
  w.count = indices[axis];
  return w;
}

/// Indices into a dim of size `dim`, from the end half the time, with
/// repeats.
template <typename I> std::vector<I> indicesInto(int64_t dim, int64_t n,
                                                 unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<I> v(n);
  for (I &x : v) {
    int64_t i = gen() % dim;
    x = static_cast<I>(gen() % 2 ? i - dim : i);
  }
  return v;
}

struct AxisCase {
  Shape data, indices;
  int64_t axis;
};

const std::vector<AxisCase> kAxisCases = {
    {{1}, {1}, 0},
    {{300}, {1000}, 0},           // repeats
    {{4, 5}, {7, 3}, 0},
    {{4, 5}, {2, 9}, 1},
    {{3, 4, 257}, {2, 4, 100}, 2},
    {{3, 4, 5}, {3, 2, 5}, 1},
};

template <typename T, typename I> void checkGatherElements() {
  SCOPED_TRACE("element size " + std::to_string(sizeof(T)) + " indices " +
               std::to_string(sizeof(I)));
  unsigned seed = 50;
  for (const AxisCase &c : kAxisCases) {
    std::vector<T> data = values<T>(numel(c.data), seed++);
    std::vector<I> idx = indicesInto<I>(c.data[c.axis], numel(c.indices), seed++);
    std::vector<T> y(numel(c.indices));
    cuda::ErrorSlot slot{0, 0};
    cuda::hostForEach(
        cuda::GatherElementsBody<T, I>{walkOf(c.data, c.indices, c.axis),
                                       data.data(), idx.data(), y.data(), &slot},
        numel(c.indices));
    EXPECT_EQ(slot.code, 0);
    plan::DType it = sizeof(I) == 4 ? plan::DType::I32 : plan::DType::I64;
    Result r = runOp("gather_elements",
                     {valueOf(dtypeOf<T>(), c.data, data), valueOf(it, c.indices, idx)},
                     {{dtypeOf<T>(), c.indices}}, {{"axis", c.axis}});
    ASSERT_EQ(r.error, "");
    expectSameBits(y, r.outputs[0]);
  }
}

TEST(CudaHost, GatherElementsEqualsTheCpuBackend) {
  checkGatherElements<uint8_t, int64_t>();
  checkGatherElements<uint16_t, int32_t>();
  checkGatherElements<uint32_t, int64_t>();
  checkGatherElements<uint64_t, int32_t>();
  // A bad index: recorded, its element 0.
  std::vector<float> data = {1, 2, 3};
  std::vector<int64_t> idx = {0, 3};
  std::vector<float> y(2, 7);
  cuda::ErrorSlot slot{0, 0};
  cuda::hostForEach(cuda::GatherElementsBody<float, int64_t>{
                        walkOf({3}, {2}, 0), data.data(), idx.data(), y.data(),
                        &slot},
                    2);
  EXPECT_EQ(slot.code, cuda::kBadIndex);
  EXPECT_EQ(slot.detail, 3);
  EXPECT_EQ(y, (std::vector<float>{1, 0}));
}

const char *reductionName(cuda::Combine how) {
  return how == cuda::Combine::Add   ? "add"
         : how == cuda::Combine::Mul ? "mul"
                                     : "none";
}

template <typename T, typename I> void checkScatterElements(cuda::Combine how) {
  SCOPED_TRACE(std::string(reductionName(how)) + " element size " +
               std::to_string(sizeof(T)));
  unsigned seed = 70;
  for (const AxisCase &c : kAxisCases) {
    Shape updatesShape = c.indices;
    // Indices no larger than data off the axis.
    for (size_t d = 0; d < c.data.size(); ++d)
      if (static_cast<int64_t>(d) != c.axis)
        updatesShape[d] = std::min(c.indices[d], c.data[d]);
    std::vector<T> data = values<T>(numel(c.data), seed++);
    std::vector<I> idx =
        indicesInto<I>(c.data[c.axis], numel(updatesShape), seed++);
    std::vector<T> updates = values<T>(numel(updatesShape), seed++);
    std::vector<T> y(data.size());
    cuda::ErrorSlot slot{0, 0};
    cuda::AxisWalk walk = walkOf(c.data, updatesShape, c.axis);
    cuda::hostForEach(
        cuda::ScatterElementsBody<T, I>{walk, data.data(), idx.data(),
                                        updates.data(), y.data(), how, &slot},
        numel(c.data) / c.data[c.axis]);
    EXPECT_EQ(slot.code, 0);
    plan::DType it = sizeof(I) == 4 ? plan::DType::I32 : plan::DType::I64;
    Result r = runOp("scatter_elements",
                     {valueOf(dtypeOf<T>(), c.data, data),
                      valueOf(it, updatesShape, idx),
                      valueOf(dtypeOf<T>(), updatesShape, updates)},
                     {{dtypeOf<T>(), c.data}},
                     {{"axis", c.axis}, {"reduction", std::string(reductionName(how))}});
    ASSERT_EQ(r.error, "");
    expectSameBits(y, r.outputs[0]);
  }
}

TEST(CudaHost, ScatterElementsEqualsTheCpuBackendInItsOrder) {
  using C = cuda::Combine;
  checkScatterElements<uint8_t, int64_t>(C::Assign);
  checkScatterElements<uint16_t, int32_t>(C::Assign);
  checkScatterElements<uint64_t, int64_t>(C::Assign);
  checkScatterElements<float, int64_t>(C::Add);
  checkScatterElements<float, int32_t>(C::Mul);
  checkScatterElements<double, int64_t>(C::Add);
  checkScatterElements<int64_t, int64_t>(C::Add);
  checkScatterElements<int32_t, int64_t>(C::Mul);
}

template <typename T, typename I> void checkScatterND(cuda::Combine how) {
  SCOPED_TRACE(std::string(reductionName(how)) + " element size " +
               std::to_string(sizeof(T)));
  struct Case {
    Shape data, indices; // indices [..., k]
  };
  const std::vector<Case> cases = {
      {{1}, {1, 1}},
      {{300}, {1000, 1}},       // k = rank: one-element slices, repeats
      {{5, 257}, {7, 1}},       // rows of 257
      {{4, 5, 6}, {3, 2, 2}},   // k = 2
      {{4, 5, 6}, {2, 3}},      // k = rank
      {{2, 3}, {4, 0}},         // k = 0: the whole tensor, 4 times
  };
  unsigned seed = 90;
  for (const Case &c : cases) {
    int64_t k = c.indices.back();
    Shape updatesShape(c.indices.begin(), c.indices.end() - 1);
    updatesShape.insert(updatesShape.end(), c.data.begin() + k, c.data.end());
    std::vector<T> data = values<T>(numel(c.data), seed++);
    std::vector<I> idx(numel(c.indices));
    std::mt19937 gen(seed++);
    for (size_t t = 0; k && t < idx.size(); ++t) {
      int64_t dim = c.data[t % k], i = gen() % dim;
      idx[t] = static_cast<I>(gen() % 2 ? i - dim : i);
    }
    std::vector<T> updates = values<T>(numel(updatesShape), seed++);
    cuda::ScatterArgs a{};
    a.k = k;
    a.slice = 1;
    for (size_t d = k; d < c.data.size(); ++d)
      a.slice *= c.data[d];
    a.tuples = numel(c.indices) / std::max<int64_t>(k, 1);
    if (k == 0)
      a.tuples = numel(updatesShape) / a.slice;
    int64_t stride = numel(c.data);
    for (int64_t d = 0; d < k; ++d) {
      stride /= c.data[d];
      a.shape[d] = c.data[d];
      a.strides[d] = stride;
    }
    std::vector<T> y = data; // the backend copies data first
    cuda::ErrorSlot slot{0, 0};
    a.indices = idx.data(), a.updates = updates.data(), a.y = y.data();
    a.how = how, a.error = &slot;
    cuda::hostForEach(cuda::scatterNDBody<T, I>(a), a.slice);
    EXPECT_EQ(slot.code, 0);
    plan::DType it = sizeof(I) == 4 ? plan::DType::I32 : plan::DType::I64;
    Result r = runOp("scatter_nd",
                     {valueOf(dtypeOf<T>(), c.data, data),
                      valueOf(it, c.indices, idx),
                      valueOf(dtypeOf<T>(), updatesShape, updates)},
                     {{dtypeOf<T>(), c.data}},
                     {{"reduction", std::string(reductionName(how))}});
    ASSERT_EQ(r.error, "");
    expectSameBits(y, r.outputs[0]);
  }
}

TEST(CudaHost, ScatterNDEqualsTheCpuBackendInItsOrder) {
  using C = cuda::Combine;
  checkScatterND<uint8_t, int64_t>(C::Assign);
  checkScatterND<uint16_t, int32_t>(C::Assign);
  checkScatterND<uint32_t, int64_t>(C::Assign);
  checkScatterND<float, int64_t>(C::Add);
  checkScatterND<double, int32_t>(C::Mul);
  checkScatterND<int64_t, int64_t>(C::Add);
  checkScatterND<int32_t, int64_t>(C::Mul);
}

//===----------------------------------------------------------------------===//
// Through the backend on the strict fake device
//===----------------------------------------------------------------------===//

constexpr const char *kStrict = "fake-cuda:strict";
using Outputs = std::vector<std::pair<plan::DType, Shape>>;

Value floats(plan::DType dtype, const Shape &shape, const std::vector<float> &v) {
  if (dtype == plan::DType::F32)
    return f32(shape, v);
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = fsdprt::floatToHalf(v[i], static_cast<fsdprt_dtype_t>(dtype));
  return valueOf(dtype, shape, h);
}

void expectSameBytes(const std::string &op, const std::vector<Value> &ins,
                     const Outputs &outs, const AttrList &attrs = {}) {
  SCOPED_TRACE(op);
  Result cpu = runOp(op, ins, outs, attrs);
  Result fake = runOp(op, ins, outs, attrs, 2, kStrict);
  ASSERT_EQ(cpu.error, "");
  ASSERT_EQ(fake.error, "");
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_EQ(fake.outputs[i].bytes, cpu.outputs[i].bytes) << "output " << i;
}

TEST(CudaHost, IndexingOpsRunOnTheStrictFakeDeviceInEveryFloatType) {
  for (plan::DType dtype :
       {plan::DType::F32, plan::DType::BF16, plan::DType::F16}) {
    SCOPED_TRACE(fsdprt_dtype_name(static_cast<fsdprt_dtype_t>(dtype)));
    Value x = floats(dtype, {2, 5, 7}, randomFloats(70, 1));
    expectSameBytes("trilu", {x}, {{dtype, {2, 5, 7}}},
                    {{"k", int64_t(-1)}, {"upper", int64_t(0)}});
    expectSameBytes("trilu", {x, i64({}, {2})}, {{dtype, {2, 5, 7}}});
    for (const char *mode : {"constant", "reflect", "edge"})
      expectSameBytes("pad", {x}, {{dtype, {3, 8, 7}}},
                      {{"pads", Shape{1, 2, 0, 0, 1, 0}},
                       {"mode", std::string(mode)}});
    expectSameBytes("cumsum", {x}, {{dtype, {2, 5, 7}}},
                    {{"axis", int64_t(1)}, {"reverse", int64_t(1)}});
    expectSameBytes("cumsum", {x, i64({}, {-1})}, {{dtype, {2, 5, 7}}},
                    {{"exclusive", int64_t(1)}});
    expectSameBytes("cumsum", {x, i32({}, {0})}, {{dtype, {2, 5, 7}}},
                    {{"reverse", int64_t(1)}});
    Value idx = i64({2, 3, 7}, {0, 4, -1, 2, 2, 3, 1, 0, 0, 4, -5, 3, 2, 1,
                                4, 4, 4, 0, 1, 2, 3, 0, 1, 2, 3, 4, -1, -2,
                                1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0});
    expectSameBytes("gather_elements", {x, idx}, {{dtype, {2, 3, 7}}},
                    {{"axis", int64_t(1)}});
    Value updates = floats(dtype, {2, 3, 7}, randomFloats(42, 2));
    for (const char *reduction : {"none", "add", "mul"})
      expectSameBytes("scatter_elements", {x, idx, updates},
                      {{dtype, {2, 5, 7}}},
                      {{"axis", int64_t(1)},
                       {"reduction", std::string(reduction)}});
    Value tuples = i64({3, 2}, {1, 4, 0, -1, 1, 4});
    Value rows = floats(dtype, {3, 7}, randomFloats(21, 3));
    for (const char *reduction : {"none", "add"})
      expectSameBytes("scatter_nd", {x, tuples, rows}, {{dtype, {2, 5, 7}}},
                      {{"reduction", std::string(reduction)}});
  }
}

TEST(CudaHost, PadFillsWithTheConstantInTheTensorsDtype) {
  // The backend converts the constant as the CPU does.
  expectSameBytes("pad", {f32({2, 3}, randomFloats(6, 11))}, {{F32, {4, 4}}},
                  {{"pads", Shape{1, 0, 1, 1}}, {"value", -1.25}});
  expectSameBytes("pad", {i64({3}, {4, 5, 6})}, {{plan::DType::I64, {6}}},
                  {{"pads", Shape{2, 1}}, {"value", -3.0}});
  expectSameBytes("pad", {boolean({2}, {1, 0})}, {{plan::DType::Bool, {4}}},
                  {{"pads", Shape{1, 1}}, {"value", 1.0}});
}

TEST(CudaHost, BadIndicesAreReportedAsTheCpuReportsThem) {
  auto expectAlike = [](const std::string &op, const std::vector<Value> &ins,
                        const Shape &out, const AttrList &attrs,
                        const std::string &says) {
    Result cpu = runOp(op, ins, {{F32, out}}, attrs);
    Result fake = runOp(op, ins, {{F32, out}}, attrs, 2, kStrict);
    EXPECT_NE(cpu.error.find(says), std::string::npos) << cpu.error;
    EXPECT_EQ(fake.error, cpu.error);
  };
  Value x = f32({4, 3}, randomFloats(12, 4));
  expectAlike("gather_elements", {x, i64({2, 3}, {0, 1, 2, 3, 9, 0})}, {2, 3},
              {{"axis", int64_t(0)}},
              "index 9 is out of range for a dimension of size 4");
  expectAlike("scatter_elements",
              {x, i64({1, 3}, {0, -4, 1}), f32({1, 3}, {1, 2, 3})}, {4, 3},
              {{"axis", int64_t(1)}},
              "index -4 is out of range for a dimension of size 3");
  // cumsum's axis input out of range: named as on the CPU.
  expectAlike("cumsum", {x, i64({}, {2})}, {4, 3}, {},
              "axis 2 is out of range for rank 2");
  expectAlike("cumsum", {x, i32({}, {-3})}, {4, 3}, {},
              "axis -3 is out of range for rank 2");
  // The second of two dims: its own size named.
  expectAlike("scatter_nd", {x, i64({1, 2}, {1, 5}), f32({1}, {1})}, {4, 3},
              {}, "index 5 is out of range for a dimension of size 3");
}

} // namespace
