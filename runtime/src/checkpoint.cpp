//===- checkpoint.cpp - Full and sharded checkpoints ----------------------===//
//
// Full: one .safetensors file with every parameter and model buffer by its
// PyTorch FQN (flat units' members gathered whole from their groups),
// written by rank 0; any session of the model, at any world size, loads
// its part of it, as it loads the model's own files. Sharded: a directory
// with one .safetensors file per rank (what that rank holds: unit shards
// by unit name, optimizer state, buffers) and index.json (world size,
// mesh, step, each unit's layout, which rank holds which shard) written
// last; a session at another world size reads the pieces of old shards
// its new shard covers (resharding). Both are written to a temporary name
// and renamed, so a crash leaves the last good checkpoint.
//
//===----------------------------------------------------------------------===//

#include "safetensors.h"
#include "session_internal.h"

#include <filesystem>
#include <set>

using fsdprt::makeStatus;
namespace st = fsdprt::safetensors;
namespace plan = fsdprt::plan;

namespace {

fsdprt_status_t invalid(const std::string &message) {
  return makeStatus(FSDPRT_INVALID_ARGUMENT, message);
}

/// A collective agreement: every rank learns whether all succeeded (a
/// single rank: `ok` itself).
bool allOk(fsdprt_session_s &s, bool ok, std::string &error) {
  if (!s.comm)
    return ok;
  float flag = ok ? 0.0f : 1.0f, failures = 0;
  fsdprt::Tensor in{&flag, FSDPRT_F32, {1}, 1},
      out{&failures, FSDPRT_F32, {1}, 1};
  std::vector<int64_t> all;
  for (size_t d = 0; d < fsdprt::meshOf(*s.plan->root).size(); ++d)
    all.push_back(static_cast<int64_t>(d));
  if (std::string why = s.comm->addGroup(all); !why.empty()) {
    error = why;
    return false;
  }
  if (std::string why = s.comm->allReduce(all, in, out, fsdprt::Reduction::Sum,
                                          "checkpoint agreement");
      !why.empty()) {
    error = why;
    return false;
  }
  return ok && failures == 0;
}

/// The whole of member `index` of unit `u`, gathered from its group.
fsdprt_status_t gatherMember(fsdprt_session_s &s, const plan::Unit &u,
                             const ::fsdp::layout::FlatLayout &layout,
                             std::vector<char> &full) {
  const fsdprt::Tensor &shard = s.buffers[u.shard()];
  size_t element = fsdprt_dtype_size(shard.dtype);
  full.assign(layout.paddedNumel() * element, 0);
  if (!s.comm || layout.worldSize() == 1) {
    std::memcpy(full.data(), shard.data, shard.bytes());
    return nullptr;
  }
  fsdprt::Tensor gathered = shard;
  gathered.data = full.data();
  gathered.numel = layout.paddedNumel();
  gathered.shape = {gathered.numel};
  std::string error =
      s.comm->allGather(fsdprt::unitAxes(u), shard, gathered,
                        "gathering unit '" + u.name()->str() + "'");
  return error.empty() ? nullptr : makeStatus(FSDPRT_UNAVAILABLE, error);
}

std::string json(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? "," : "") + std::to_string(values[i]);
  return text + "]";
}

} // namespace

extern "C" {

fsdprt_status_t fsdprt_session_save_full_checkpoint(fsdprt_session_t *s,
                                                    const char *path) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !path)
      return invalid("fsdprt_session_save_full_checkpoint: NULL argument");
    if (!s->weightsLoaded)
      return invalid("fsdprt_session_save_full_checkpoint: the weights are "
                     "not loaded");
    std::vector<st::Source> tensors;
    std::vector<std::vector<char>> storage;
    std::set<std::string> names;
    // Flat units' members, gathered whole (every rank takes part).
    if (const auto *units = s->plan->root->units())
      for (const plan::Unit *u : *units) {
        auto layout = fsdprt::layoutOf(*u, fsdprt::meshOf(*s->plan->root));
        std::vector<char> full;
        if (fsdprt_status_t status = gatherMember(*s, *u, layout, full))
          return status;
        size_t element = fsdprt_dtype_size(s->buffers[u->shard()].dtype);
        for (size_t i = 0; i < layout.numParams(); ++i) {
          const plan::UnitParam *p = u->params()->Get(i);
          std::vector<int64_t> shape(p->shape()->begin(), p->shape()->end());
          auto begin = full.begin() + layout.paramRange(i).begin * element;
          storage.emplace_back(begin, begin + layout.paramNumel(i) * element);
          tensors.push_back({p->fqn()->str(), s->buffers[u->shard()].dtype,
                             shape, storage.back().data(),
                             storage.back().size()});
          names.insert(p->fqn()->str());
        }
      }
    // Replicated parameters and model buffers (not optimizer state, which
    // starts as zeros and is not part of a model's state dict).
    if (const auto *weights = s->plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        if (w->file()->size() == 0 || names.count(w->fqn()->str()))
          continue;
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        tensors.push_back(
            {w->fqn()->str(), t.dtype, t.shape, t.data, t.bytes()});
      }
    std::string error;
    bool ok = true;
    if (s->rank() == 0) {
      error = st::write(path, tensors,
                        {{"format", "fsdp-mlir-full"},
                         {"producer", "libfsdprt " FSDPRT_VERSION_STRING}});
      ok = error.empty();
    }
    std::string agreement;
    if (!allOk(*s, ok, agreement))
      return makeStatus(FSDPRT_IO_ERROR,
                        !error.empty() ? error
                        : !agreement.empty()
                            ? agreement
                            : "rank 0 could not write the checkpoint '" +
                                  std::string(path) + "'");
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_load_full_checkpoint(fsdprt_session_t *s,
                                                    const char *path) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !path)
      return invalid("fsdprt_session_load_full_checkpoint: NULL argument");
    st::Header header;
    if (std::string error = st::readHeader(path, header); !error.empty())
      return makeStatus(FSDPRT_IO_ERROR, error);
    auto locate = [&](const std::string &fqn, uint64_t bytes, std::string &file,
                      uint64_t &offset) -> fsdprt_status_t {
      auto it = header.tensors.find(fqn);
      if (it == header.tensors.end())
        return makeStatus(FSDPRT_NOT_FOUND,
                          "the checkpoint '" + std::string(path) +
                              "' has no tensor '" + fqn + "'");
      if (it->second.end - it->second.begin != bytes)
        return invalid("the checkpoint's '" + fqn + "' has " +
                       std::to_string(it->second.end - it->second.begin) +
                       " bytes, the plan's " + std::to_string(bytes));
      file = path;
      offset = header.dataStart + it->second.begin;
      return nullptr;
    };
    fsdprt::WeightReader reader{".", {}};
    s->weightsLoaded = false;
    if (const auto *weights = s->plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        if (w->file()->size() == 0) { // optimizer state: starts afresh
          std::memset(t.data, 0, t.bytes());
          continue;
        }
        std::string file;
        uint64_t offset = 0;
        if (fsdprt_status_t status =
                locate(w->fqn()->str(), t.bytes(), file, offset))
          return status;
        if (fsdprt_status_t status =
                reader.read(file, w->fqn()->str(), offset, t.bytes(), t.data))
          return status;
      }
    if (fsdprt_status_t status =
            fsdprt::loadShards(*s, reader, s->rank(), locate))
      return status;
    s->weightsLoaded = true;
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_save_sharded_checkpoint(fsdprt_session_t *s,
                                                       const char *dir,
                                                       int64_t step) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !dir)
      return invalid("fsdprt_session_save_sharded_checkpoint: NULL argument");
    if (!s->weightsLoaded)
      return invalid("fsdprt_session_save_sharded_checkpoint: the weights "
                     "are not loaded");
    namespace fs = std::filesystem;
    std::string target = dir, staging = target + ".tmp";
    std::error_code code;
    std::string error, agreement;
    bool ok = true;
    if (s->rank() == 0) {
      fs::remove_all(staging, code);
      fs::create_directories(staging, code);
      if (code) {
        ok = false;
        error = "cannot create '" + staging + "': " + code.message();
      }
    }
    if (!allOk(*s, ok, agreement))
      return makeStatus(FSDPRT_IO_ERROR,
                        !error.empty() ? error
                        : !agreement.empty()
                            ? agreement
                            : "rank 0 could not create '" + staging + "'");
    // What this rank holds.
    std::vector<st::Source> tensors;
    if (const auto *units = s->plan->root->units())
      for (const plan::Unit *u : *units) {
        const fsdprt::Tensor &t = s->buffers[u->shard()];
        tensors.push_back(
            {u->name()->str(), t.dtype, t.shape, t.data, t.bytes()});
      }
    if (const auto *weights = s->plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        tensors.push_back(
            {w->fqn()->str(), t.dtype, t.shape, t.data, t.bytes()});
      }
    int world = s->comm ? s->comm->size() : 1;
    error = st::write(staging + "/rank-" + std::to_string(s->rank()) +
                          ".safetensors",
                      tensors,
                      {{"format", "fsdp-mlir-sharded"},
                       {"rank", std::to_string(s->rank())},
                       {"world_size", std::to_string(world)}});
    if (!allOk(*s, error.empty(), agreement))
      return makeStatus(FSDPRT_IO_ERROR,
                        !error.empty() ? error
                        : !agreement.empty()
                            ? agreement
                            : "another rank could not write its shard of '" +
                                  target + "'");
    // The index, last: a directory without it is not a checkpoint.
    if (s->rank() == 0) {
      std::vector<int64_t> mesh = fsdprt::meshOf(*s->plan->root);
      if (mesh.empty())
        mesh = {1};
      std::string index =
          "{\"format\": \"fsdp-mlir-sharded\", \"world_size\": " +
          std::to_string(world) + ", \"mesh\": " + json(mesh) +
          ", \"step\": " + std::to_string(step) + ", \"units\": {";
      if (const auto *units = s->plan->root->units())
        for (size_t i = 0; i < units->size(); ++i) {
          const plan::Unit *u = units->Get(i);
          auto layout = fsdprt::layoutOf(*u, fsdprt::meshOf(*s->plan->root));
          // Which rank holds each of the unit's shards.
          std::vector<int64_t> holders(layout.worldSize(), -1);
          for (int r = world; r-- > 0;)
            holders[fsdprt::groupPosition(mesh, fsdprt::unitAxes(*u), r)
                        .index] = r;
          index +=
              (i ? ", " : "") + st::quote(u->name()->str()) +
              ": {\"padded_numel\": " + std::to_string(layout.paddedNumel()) +
              ", \"unpadded_numel\": " +
              std::to_string(layout.unpaddedNumel()) +
              ", \"shard_numel\": " + std::to_string(layout.shardNumel()) +
              ", \"holders\": " + json(holders) + "}";
        }
      index += "}}\n";
      std::string indexPath = staging + "/index.json";
      FILE *file = std::fopen(indexPath.c_str(), "w");
      ok = file &&
           std::fwrite(index.data(), 1, index.size(), file) == index.size();
      ok = file && std::fclose(file) == 0 && ok;
      // Swap the new checkpoint in; the old one goes only afterwards.
      std::string old = target + ".old";
      fs::remove_all(old, code);
      if (ok && fs::exists(target))
        fs::rename(target, old, code);
      if (ok && !code)
        fs::rename(staging, target, code);
      if (!ok || code)
        error = "cannot finish the checkpoint '" + target +
                "': " + (code ? code.message() : "cannot write index.json");
      else
        fs::remove_all(old, code);
    }
    if (!allOk(*s, error.empty(), agreement))
      return makeStatus(FSDPRT_IO_ERROR,
                        !error.empty() ? error
                        : !agreement.empty()
                            ? agreement
                            : "rank 0 could not finish '" + target + "'");
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_load_sharded_checkpoint(fsdprt_session_t *s,
                                                       const char *dir,
                                                       int64_t *step) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !dir)
      return invalid("fsdprt_session_load_sharded_checkpoint: NULL argument");
    std::string root = dir;
    std::string indexPath = root + "/index.json";
    FILE *file = std::fopen(indexPath.c_str(), "r");
    if (!file)
      return makeStatus(FSDPRT_NOT_FOUND,
                        "'" + root +
                            "' is not a complete sharded checkpoint (no "
                            "index.json: it was never finished, or a save "
                            "was interrupted)");
    std::string text;
    char chunk[4096];
    size_t got;
    while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0)
      text.append(chunk, got);
    std::fclose(file);
    st::Json index;
    if (std::string error = st::parseJson(text, index); !error.empty())
      return invalid("'" + indexPath + "' is malformed: " + error);
    const st::Json *worldJson = index.get("world_size"),
                   *units = index.get("units");
    if (!worldJson || !units || worldJson->asInt() < 1)
      return invalid("'" + indexPath + "' is not a sharded checkpoint index");
    int64_t oldWorld = worldJson->asInt();
    if (step)
      *step = index.get("step") ? index.get("step")->asInt() : 0;
    std::map<int64_t, st::Header> headers;
    auto headerOf = [&](int64_t rank,
                        const st::Header *&out) -> fsdprt_status_t {
      auto it = headers.find(rank);
      if (it == headers.end()) {
        st::Header header;
        std::string path =
            root + "/rank-" + std::to_string(rank) + ".safetensors";
        if (std::string error = st::readHeader(path, header); !error.empty())
          return makeStatus(FSDPRT_IO_ERROR, error);
        it = headers.emplace(rank, std::move(header)).first;
      }
      out = &it->second;
      return nullptr;
    };
    fsdprt::WeightReader reader{root, {}};
    /// Reads `bytes` of tensor `name` of rank `rank`'s file at `skip`.
    auto read = [&](int64_t rank, const std::string &name, uint64_t skip,
                    uint64_t bytes, void *data) -> fsdprt_status_t {
      const st::Header *header = nullptr;
      if (fsdprt_status_t status = headerOf(rank, header))
        return status;
      auto it = header->tensors.find(name);
      if (it == header->tensors.end() ||
          it->second.end - it->second.begin < skip + bytes)
        return invalid("the checkpoint '" + root +
                       "' does not match the "
                       "plan: rank " +
                       std::to_string(rank) + "'s file has " +
                       (it == header->tensors.end()
                            ? "no '" + name + "'"
                            : "too few bytes of '" + name + "'"));
      return reader.read("rank-" + std::to_string(rank) + ".safetensors", name,
                         header->dataStart + it->second.begin + skip, bytes,
                         data);
    };
    s->weightsLoaded = false;
    std::vector<int64_t> mesh = fsdprt::meshOf(*s->plan->root);
    // Copies this rank's part of a unit-laid-out tensor (`name` in the old
    // files) into `into`: the old shards covering the new shard's range.
    auto reshard = [&](const plan::Unit &u, const std::string &name,
                       const fsdprt::Tensor &into) -> fsdprt_status_t {
      const st::Json *old = units->get(u.name()->str());
      if (!old)
        return invalid("the checkpoint '" + root + "' has no unit '" +
                       u.name()->str() + "'");
      auto layout = fsdprt::layoutOf(u, mesh);
      int64_t oldShard =
          old->get("shard_numel") ? old->get("shard_numel")->asInt() : -1;
      int64_t unpadded =
          old->get("unpadded_numel") ? old->get("unpadded_numel")->asInt() : -1;
      const st::Json *holders = old->get("holders");
      if (oldShard < 1 || unpadded != layout.unpaddedNumel() || !holders)
        return invalid("the checkpoint's unit '" + u.name()->str() +
                       "' has another layout than the plan's (" +
                       std::to_string(unpadded) + " elements, not " +
                       std::to_string(layout.unpaddedNumel()) + ")");
      size_t element = fsdprt_dtype_size(into.dtype);
      std::memset(into.data, 0, into.bytes());
      int64_t index =
          fsdprt::groupPosition(mesh, fsdprt::unitAxes(u), s->rank()).index;
      int64_t lo = index * layout.shardNumel();
      int64_t hi = std::min(lo + layout.shardNumel(), layout.unpaddedNumel());
      for (int64_t at = lo; at < hi;) {
        int64_t j = at / oldShard;
        int64_t end = std::min(hi, (j + 1) * oldShard);
        if (j >= static_cast<int64_t>(holders->items.size()))
          return invalid("the checkpoint's unit '" + u.name()->str() +
                         "' has no shard " + std::to_string(j));
        if (fsdprt_status_t status =
                read(holders->items[j].asInt(), name,
                     (at - j * oldShard) * element, (end - at) * element,
                     static_cast<char *>(into.data) + (at - lo) * element))
          return status;
        at = end;
      }
      return nullptr;
    };
    std::map<std::string, const plan::Unit *> byName;
    if (const auto *planUnits = s->plan->root->units())
      for (const plan::Unit *u : *planUnits) {
        byName[u->name()->str()] = u;
        if (fsdprt_status_t status =
                reshard(*u, u->name()->str(), s->buffers[u->shard()]))
          return status;
      }
    int64_t own = s->rank() < oldWorld ? s->rank() : 0;
    if (const auto *weights = s->plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        auto unit =
            w->state_of() ? byName.find(w->state_of()->str()) : byName.end();
        fsdprt_status_t status =
            unit != byName.end()
                ? reshard(*unit->second, w->fqn()->str(), t)
                : read(own, w->fqn()->str(), 0, t.bytes(), t.data);
        if (status)
          return status;
      }
    s->weightsLoaded = true;
    return nullptr;
  });
}

} // extern "C"
