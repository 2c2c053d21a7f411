//===- plan_check.cpp - Checking a plan's mesh, units and streams ---------===//
//
// What a loaded plan must satisfy before anything reads its sharding: the
// mesh has positive sizes and matches the world size, every unit's layout
// (re-derived through the layout library from its members) matches its
// stored size and its shard buffer, every collective runs on the
// communication stream over valid mesh axes with sizes that fit its group,
// and every kernel dependency points back to the other stream.
//
//===----------------------------------------------------------------------===//

#include "plan_internal.h"

#include "fsdp/layout/FlatLayout.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace fsdprt {

namespace {

std::vector<int64_t> meshOf(const plan::Plan &p) {
  std::vector<int64_t> mesh;
  if (p.mesh_shape())
    mesh.assign(p.mesh_shape()->begin(), p.mesh_shape()->end());
  return mesh;
}

/// Checks `axes` against the mesh; returns "" and the group size, or why.
std::string checkAxes(const std::vector<int64_t> &mesh,
                      const std::vector<int64_t> &axes, int64_t &size) {
  size = 1;
  std::vector<bool> seen(mesh.size());
  for (int64_t axis : axes) {
    if (axis < 0 || static_cast<size_t>(axis) >= mesh.size())
      return "mesh axis " + std::to_string(axis) + " is not an axis of the " +
             std::to_string(mesh.size()) + "-D mesh";
    if (seen[axis])
      return "mesh axis " + std::to_string(axis) + " is repeated";
    seen[axis] = true;
    size *= mesh[axis];
  }
  return "";
}

bool isCollective(const std::string &op) {
  return op == "all_gather" || op == "reduce_scatter" || op == "all_reduce";
}

const plan::Attr *findAttr(const plan::Kernel &k, const char *name) {
  if (k.attrs())
    for (const plan::Attr *a : *k.attrs())
      if (a->name()->str() == name)
        return a;
  return nullptr;
}

std::string kernelName(const plan::Kernel &k, size_t index) {
  std::string name = "kernel " + std::to_string(index) + " (" + k.op()->str();
  if (k.location() && k.location()->size())
    name += " at " + k.location()->str();
  return name + ")";
}

/// Whether `v`'s 8-byte elements are 8-byte aligned (an empty one has none
/// to read). FlatBuffers' verifier checks a vector's length (4 bytes)
/// only; the compiler's writer aligns the elements, a hostile file need
/// not.
template <class T> bool aligned(const flatbuffers::Vector<T> *v) {
  return !v || v->size() == 0 ||
         reinterpret_cast<uintptr_t>(v->Data()) % sizeof(T) == 0;
}

/// What the verifier leaves unchecked and every later read relies on:
/// dtypes within the enum (before anything casts them to fsdprt_dtype_t)
/// and [long]/[double] vectors on 8-byte boundaries. Returns "" or why not.
std::string checkEncoding(const plan::Plan &p) {
  auto unknown = [](plan::DType d) {
    return d > plan::DType::MAX
               ? " has an unknown dtype " + std::to_string(int(d))
               : std::string();
  };
  const std::string misaligned =
      "an 8-byte vector (a shape or an attribute's values) is not 8-byte "
      "aligned";
  if (!aligned(p.mesh_shape()))
    return misaligned;
  if (p.buffers())
    for (size_t i = 0; i < p.buffers()->size(); ++i) {
      const plan::Buffer *b = p.buffers()->Get(i);
      if (std::string why = unknown(b->dtype()); !why.empty())
        return "plan buffer " + std::to_string(i) + why;
      if (!aligned(b->shape()))
        return misaligned;
    }
  for (const auto *list : {p.inputs(), p.outputs()})
    if (list)
      for (const plan::TensorDesc *d : *list) {
        if (std::string why = unknown(d->dtype()); !why.empty())
          return "'" + d->name()->str() + "'" + why;
        if (!aligned(d->shape()))
          return misaligned;
      }
  if (p.units())
    for (const plan::Unit *u : *p.units()) {
      if (std::string why = unknown(u->dtype()); !why.empty())
        return "unit '" + u->name()->str() + "'" + why;
      if (u->params())
        for (const plan::UnitParam *param : *u->params())
          if (!aligned(param->shape()))
            return misaligned;
    }
  if (p.kernels())
    for (const plan::Kernel *k : *p.kernels())
      if (k->attrs())
        for (const plan::Attr *a : *k->attrs()) {
          const plan::IntsAttr *ints = a->value_as_IntsAttr();
          const plan::FloatsAttr *floats = a->value_as_FloatsAttr();
          if (!aligned(ints ? ints->values() : nullptr) ||
              !aligned(floats ? floats->values() : nullptr))
            return misaligned;
        }
  return "";
}

/// Whether the bytes of `shape` of `dtype` overflow int64 (negative
/// dimensions and unknown dtypes are the session's to refuse).
bool bytesOverflow(const flatbuffers::Vector<int64_t> *shape,
                   plan::DType dtype) {
  int64_t bytes = std::max<int64_t>(
      fsdprt_dtype_size(static_cast<fsdprt_dtype_t>(dtype)), 1);
  if (shape)
    for (int64_t d : *shape)
      if (d >= 0 && __builtin_mul_overflow(bytes, d, &bytes))
        return true;
  return false;
}

/// A compiler that wrapped a size would write a plan of huge shapes and
/// small buffers: every buffer's and declaration's bytes must be countable.
std::string checkSizes(const plan::Plan &p) {
  if (p.buffers())
    for (size_t i = 0; i < p.buffers()->size(); ++i)
      if (const plan::Buffer *b = p.buffers()->Get(i);
          bytesOverflow(b->shape(), b->dtype()))
        return "buffer " + std::to_string(i) +
               " has more bytes than int64 can count";
  for (const auto *list : {p.inputs(), p.outputs()})
    if (list)
      for (const plan::TensorDesc *d : *list)
        if (bytesOverflow(d->shape(), d->dtype()))
          return "'" + d->name()->str() +
                 "' has more bytes than int64 can count";
  return "";
}

std::string checkUnits(const plan::Plan &p, const std::vector<int64_t> &mesh) {
  if (!p.units())
    return "";
  size_t numBuffers = p.buffers() ? p.buffers()->size() : 0;
  for (const plan::Unit *u : *p.units()) {
    std::string name = "unit '" + u->name()->str() + "'";
    std::vector<int64_t> axes;
    if (u->mesh_axes())
      axes.assign(u->mesh_axes()->begin(), u->mesh_axes()->end());
    int64_t ranks;
    if (std::string why = checkAxes(mesh, axes, ranks); !why.empty())
      return name + ": " + why;
    size_t element = fsdprt_dtype_size(static_cast<fsdprt_dtype_t>(u->dtype()));
    if (!element)
      return name + " has an unknown dtype";
    std::vector<int64_t> numels;
    if (u->params())
      for (const plan::UnitParam *param : *u->params()) {
        int64_t numel = 1;
        if (param->shape())
          for (int64_t d : *param->shape()) {
            if (d < 0 || (d && numel > INT64_MAX / d))
              return name + ": member '" + param->fqn()->str() +
                     "' has an invalid shape";
            numel *= d;
          }
        uint64_t bytes;
        bool overflows = __builtin_mul_overflow(static_cast<uint64_t>(numel),
                                                element, &bytes);
        if (overflows || param->length() != bytes)
          return name + ": member '" + param->fqn()->str() + "' reads " +
                 std::to_string(param->length()) + " bytes but holds " +
                 (overflows ? "more than uint64 can count"
                            : std::to_string(bytes));
        numels.push_back(numel);
      }
    std::string error;
    auto layout = ::fsdp::layout::FlatLayout::create(numels, ranks,
                                                     u->alignment(), error);
    if (!layout)
      return name + ": " + error;
    if (layout->paddedNumel() != u->padded_numel())
      return name + " stores " + std::to_string(u->padded_numel()) +
             " elements, but its members' layout over " +
             std::to_string(ranks) + " ranks has " +
             std::to_string(layout->paddedNumel());
    if (u->shard() >= numBuffers)
      return name + " names shard buffer " + std::to_string(u->shard()) +
             " but the plan has " + std::to_string(numBuffers);
    const plan::Buffer *shard = p.buffers()->Get(u->shard());
    uint64_t shardBytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(layout->shardNumel()),
                               element, &shardBytes) ||
        shard->bytes() != shardBytes || shard->dtype() != u->dtype())
      return name + ": its shard buffer does not hold " +
             std::to_string(layout->shardNumel()) + " elements of its dtype";
    if (!p.arenas() || shard->arena() >= p.arenas()->size() ||
        p.arenas()->Get(shard->arena())->kind() != plan::ArenaKind::Weights)
      return name + ": its shard buffer is not in a weights arena";
  }
  return "";
}

std::string checkKernels(const plan::Plan &p,
                         const std::vector<int64_t> &mesh) {
  if (!p.kernels())
    return "";
  size_t numBuffers = p.buffers() ? p.buffers()->size() : 0;
  const auto &kernels = *p.kernels();
  for (size_t i = 0; i < kernels.size(); ++i) {
    const plan::Kernel &k = *kernels.Get(i);
    std::string name = kernelName(k, i);
    if (k.stream() > 1)
      return name + " runs on stream " + std::to_string(k.stream()) +
             "; plans have streams 0 (compute) and 1 (communication)";
    if (k.deps())
      for (uint32_t dep : *k.deps())
        if (dep >= i || kernels.Get(dep)->stream() == k.stream())
          return name + " depends on kernel " + std::to_string(dep) +
                 ", which is not an earlier kernel of the other stream";
    bool collective = isCollective(k.op()->str());
    if (collective != (k.stream() == 1))
      return name + (collective ? " is a collective on the compute stream"
                                : " computes on the communication stream");
    if (!collective)
      continue;
    // A union may carry its type with no value: the verifier accepts that.
    const plan::Attr *attr = findAttr(k, "mesh_axes");
    const plan::IntsAttr *ints = attr ? attr->value_as_IntsAttr() : nullptr;
    if (!ints)
      return name + " has no mesh_axes";
    std::vector<int64_t> axes;
    if (const auto *values = ints->values())
      axes.assign(values->begin(), values->end());
    int64_t group;
    if (std::string why = checkAxes(mesh, axes, group); !why.empty())
      return name + ": " + why;
    if (const plan::Attr *r = findAttr(k, "reduction")) {
      const plan::StringAttr *text = r->value_as_StringAttr();
      std::string reduction =
          text && text->value() ? text->value()->str() : std::string();
      if (reduction != "sum" && reduction != "avg")
        return name + " has reduction '" + reduction + "'; expected sum or avg";
    }
    if (!k.inputs() || !k.outputs() || k.inputs()->size() != 1 ||
        k.outputs()->size() != 1 || k.inputs()->Get(0) >= numBuffers ||
        k.outputs()->Get(0) >= numBuffers)
      return name + " needs one input and one output buffer";
    uint64_t in = p.buffers()->Get(k.inputs()->Get(0))->bytes();
    uint64_t out = p.buffers()->Get(k.outputs()->Get(0))->bytes();
    const std::string op = k.op()->str();
    uint64_t g = static_cast<uint64_t>(group);
    uint64_t scaled;
    if ((op == "all_gather" &&
         (__builtin_mul_overflow(in, g, &scaled) || out != scaled)) ||
        (op == "reduce_scatter" &&
         (__builtin_mul_overflow(out, g, &scaled) || in != scaled)) ||
        (op == "all_reduce" && in != out))
      return name + " over " + std::to_string(group) + " ranks reads " +
             std::to_string(in) + " bytes and writes " + std::to_string(out);
  }
  return "";
}

} // namespace

GroupPosition groupPosition(const std::vector<int64_t> &mesh,
                            const std::vector<int64_t> &axes, int64_t rank) {
  std::vector<int64_t> coord(mesh.size());
  for (size_t d = mesh.size(); d-- > 0;) {
    coord[d] = rank % mesh[d];
    rank /= mesh[d];
  }
  GroupPosition position{0, 1};
  for (int64_t axis : axes) {
    position.index = position.index * mesh[axis] + coord[axis];
    position.size *= mesh[axis];
  }
  return position;
}

uint64_t arenaBytes(const plan::Plan &p) {
  uint64_t total = 0;
  if (p.arenas())
    for (const plan::Arena *a : *p.arenas())
      total = a->bytes() > UINT64_MAX - total ? UINT64_MAX : total + a->bytes();
  return total;
}

std::string checkSharding(const plan::Plan &p) {
  if (std::string why = checkEncoding(p); !why.empty())
    return why;
  if (uint64_t arenas = arenaBytes(p);
      p.peak_bytes() && p.peak_bytes() != arenas)
    return "the plan states a peak of " + std::to_string(p.peak_bytes()) +
           " bytes per rank, but its arenas hold " + std::to_string(arenas);
  std::vector<int64_t> mesh = meshOf(p);
  int64_t world = 1;
  for (int64_t size : mesh) {
    if (size <= 0)
      return "the plan's mesh has a size " + std::to_string(size);
    if (__builtin_mul_overflow(world, size, &world))
      return "the plan's mesh has more ranks than int64 can count";
  }
  if (static_cast<int64_t>(p.world_size()) != world)
    return "the plan is for " + std::to_string(p.world_size()) +
           " ranks but its mesh has " + std::to_string(world);
  if (std::string why = checkSizes(p); !why.empty())
    return why;
  if (std::string why = checkUnits(p, mesh); !why.empty())
    return why;
  return checkKernels(p, mesh);
}

} // namespace fsdprt
