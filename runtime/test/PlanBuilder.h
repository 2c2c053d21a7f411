//===- PlanBuilder.h - Small plans for tests, built in memory ---*- C++ -*-===//
//
// Tests of the runtime and of fsdp-run write plans with the FlatBuffers
// builder, as the compiler does: buffers placed one after the other in an
// activations (or weights, or constants) arena, declared inputs and
// outputs, kernels with attributes, weight references and constants.
//
//===----------------------------------------------------------------------===//

#ifndef FSDPRT_TEST_PLANBUILDER_H
#define FSDPRT_TEST_PLANBUILDER_H

#include "fsdprt/fsdprt.h"
#include "fsdprt/plan_generated.h"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fsdprt::test {

using Shape = std::vector<int64_t>;
using AttrValue =
    std::variant<int64_t, double, std::string, Shape, std::vector<double>>;
using AttrList = std::vector<std::pair<std::string, AttrValue>>;

inline int64_t numel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

inline uint64_t bytesOf(plan::DType dtype, const Shape &shape) {
  return numel(shape) * fsdprt_dtype_size(static_cast<fsdprt_dtype_t>(dtype));
}

class PlanBuilder {
public:
  /// Arenas: 0 activations, 1 weights, 2 constants.
  enum Arena : uint32_t { Activations = 0, Weights = 1, Constants = 2 };

  /// A buffer of `shape` placed after the previous ones of `arena`
  /// (64-byte aligned); returns its id.
  uint32_t buffer(plan::DType dtype, const Shape &shape,
                  Arena arena = Activations) {
    uint64_t bytes = bytesOf(dtype, shape);
    uint32_t id = raw(arena, sizes[arena], bytes, dtype, shape);
    sizes[arena] += (bytes + 63) / 64 * 64;
    return id;
  }

  /// A buffer exactly as given, checked by nothing (for corrupt plans).
  uint32_t raw(uint32_t arena, uint64_t offset, uint64_t bytes,
               plan::DType dtype, const Shape &shape) {
    buffers.push_back({arena, offset, bytes, dtype, shape});
    return static_cast<uint32_t>(buffers.size() - 1);
  }

  /// The byte offset of buffer `id` in its arena.
  uint64_t offsetOf(uint32_t id) const { return buffers[id].offset; }

  /// A new buffer declared as input `name`; returns its id.
  uint32_t input(const std::string &name, plan::DType dtype,
                 const Shape &shape) {
    uint32_t id = buffer(dtype, shape);
    inputs.push_back({name, dtype, shape, id});
    return id;
  }
  uint32_t output(const std::string &name, plan::DType dtype,
                  const Shape &shape) {
    uint32_t id = buffer(dtype, shape);
    outputs.push_back({name, dtype, shape, id});
    return id;
  }
  /// Declares an existing buffer (its dtype and shape may disagree).
  void declareInput(const std::string &name, plan::DType dtype,
                    const Shape &shape, uint32_t id) {
    inputs.push_back({name, dtype, shape, id});
  }

  void kernel(const std::string &op, std::vector<uint32_t> ins,
              std::vector<uint32_t> outs, AttrList attrs = {},
              const std::string &location = "node_1") {
    kernels.push_back(
        {op, std::move(ins), std::move(outs), std::move(attrs), location});
  }

  void weight(const std::string &fqn, const std::string &file, uint64_t offset,
              uint64_t length, uint32_t id) {
    weights.push_back({fqn, file, offset, length, id});
  }

  /// After each run, copy buffer `source` over buffer `target`.
  void update(uint32_t source, uint32_t target) {
    updates.emplace_back(source, target);
  }

  void constant(uint32_t id, std::vector<uint8_t> data) {
    constants.push_back({id, std::move(data)});
  }

  /// Added to (or, negative, taken from) the activations arena's size.
  void arenaSlack(int64_t bytes) { slack = bytes; }
  void modelDir(const std::string &dir) { model = dir; }
  /// The peak the plan states (0: none; the runtime then sums the arenas).
  void statedPeak(uint64_t bytes) { peak = bytes; }
  /// A plan for `ranks` ranks on a 1-D mesh (no units or collectives).
  void worldSize(uint32_t ranks) { world = ranks; }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<plan::Arena>> arenas;
    const char *names[] = {"activations", "weights", "constants"};
    for (uint32_t i = 0; i < 3; ++i)
      arenas.push_back(plan::CreateArenaDirect(
          b, names[i], sizes[i] + (i == Activations ? slack : 0), 64,
          static_cast<plan::ArenaKind>(i)));
    std::vector<flatbuffers::Offset<plan::Buffer>> bufs;
    for (const BufferSpec &s : buffers)
      bufs.push_back(plan::CreateBufferDirect(b, s.arena, s.offset, s.bytes,
                                              s.dtype, &s.shape));
    auto descs = [&](const std::vector<Desc> &list) {
      std::vector<flatbuffers::Offset<plan::TensorDesc>> out;
      for (const Desc &d : list)
        out.push_back(plan::CreateTensorDescDirect(b, d.name.c_str(), d.dtype,
                                                   &d.shape, d.id));
      return out;
    };
    auto ins = descs(inputs), outs = descs(outputs);
    std::vector<flatbuffers::Offset<plan::Kernel>> ks;
    for (const KernelSpec &k : kernels) {
      std::vector<flatbuffers::Offset<plan::Attr>> attrs;
      for (const auto &[name, value] : k.attrs)
        attrs.push_back(attr(b, name, value));
      ks.push_back(plan::CreateKernelDirect(b, k.op.c_str(), &k.ins, &k.outs,
                                            &attrs, k.location.c_str()));
    }
    std::vector<flatbuffers::Offset<plan::WeightRef>> ws;
    for (const WeightSpec &w : weights)
      ws.push_back(plan::CreateWeightRefDirect(
          b, w.fqn.c_str(), plan::StateKind::Param, w.file.c_str(), w.offset,
          w.length, w.id));
    std::vector<flatbuffers::Offset<plan::ConstantData>> cs;
    for (const auto &[id, data] : constants)
      cs.push_back(plan::CreateConstantDataDirect(b, id, &data));
    std::vector<int64_t> mesh = {world};
    auto root = plan::CreatePlanDirect(
        b, FSDPRT_PLAN_SCHEMA_VERSION, "test", model.c_str(), world, &arenas,
        &bufs, &ins, &outs, &ks, &ws, &cs, &updates,
        world > 1 ? &mesh : nullptr, nullptr, peak);
    plan::FinishPlanBuffer(b, root);
    return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
  }

private:
  static flatbuffers::Offset<plan::Attr> attr(flatbuffers::FlatBufferBuilder &b,
                                              const std::string &name,
                                              const AttrValue &value) {
    if (auto *i = std::get_if<int64_t>(&value))
      return plan::CreateAttrDirect(b, name.c_str(), plan::AttrValue::IntAttr,
                                    plan::CreateIntAttr(b, *i).Union());
    if (auto *f = std::get_if<double>(&value))
      return plan::CreateAttrDirect(b, name.c_str(), plan::AttrValue::FloatAttr,
                                    plan::CreateFloatAttr(b, *f).Union());
    if (auto *s = std::get_if<std::string>(&value))
      return plan::CreateAttrDirect(
          b, name.c_str(), plan::AttrValue::StringAttr,
          plan::CreateStringAttrDirect(b, s->c_str()).Union());
    if (auto *fs = std::get_if<std::vector<double>>(&value))
      return plan::CreateAttrDirect(
          b, name.c_str(), plan::AttrValue::FloatsAttr,
          plan::CreateFloatsAttrDirect(b, fs).Union());
    return plan::CreateAttrDirect(
        b, name.c_str(), plan::AttrValue::IntsAttr,
        plan::CreateIntsAttrDirect(b, &std::get<Shape>(value)).Union());
  }

  struct BufferSpec {
    uint32_t arena;
    uint64_t offset, bytes;
    plan::DType dtype;
    Shape shape;
  };
  struct Desc {
    std::string name;
    plan::DType dtype;
    Shape shape;
    uint32_t id;
  };
  struct KernelSpec {
    std::string op;
    std::vector<uint32_t> ins, outs;
    AttrList attrs;
    std::string location;
  };
  struct WeightSpec {
    std::string fqn, file;
    uint64_t offset, length;
    uint32_t id;
  };

  uint64_t sizes[3] = {0, 0, 0};
  int64_t slack = 0;
  uint64_t peak = 0;
  uint32_t world = 1;
  std::string model = ".";
  std::vector<BufferSpec> buffers;
  std::vector<Desc> inputs, outputs;
  std::vector<KernelSpec> kernels;
  std::vector<WeightSpec> weights;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> constants;
  std::vector<plan::StateUpdate> updates;
};

} // namespace fsdprt::test

#endif // FSDPRT_TEST_PLANBUILDER_H
