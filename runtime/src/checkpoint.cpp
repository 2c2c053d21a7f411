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
// What a save replaces, and what a load believes, is spelled out in
// docs/robustness.md: a save replaces only what a save wrote; every rank
// file records its rank, the world size, the step, the shard of each unit
// it holds and each tensor's CRC-32, and a load checks them all against
// the file's name, index.json and the plan.
//
//===----------------------------------------------------------------------===//

#include "safetensors.h"
#include "session_internal.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <unistd.h>

using fsdprt::makeStatus;
using fsdprt::markAgreed;
namespace st = fsdprt::safetensors;
namespace plan = fsdprt::plan;

namespace fs = std::filesystem;

namespace {

/// The version of the sharded format: 2 added the rank files' rank, world
/// size, step, shard positions and checksums.
constexpr int kShardedVersion = 2;

fsdprt_status_t invalid(const std::string &message) {
  return makeStatus(FSDPRT_INVALID_ARGUMENT, message);
}

/// `path` without trailing separators: "ck/" and "ck" are one checkpoint.
std::string withoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

/// Whether `name` is a file a sharded save writes: index.json,
/// rank-<r>.safetensors, or a temporary of either (<file>.tmp.<pid>).
bool isOwnFileName(const std::string &name) {
  std::string base = name.substr(0, name.find(".tmp."));
  if (base == "index.json")
    return true;
  const std::string prefix = "rank-", suffix = ".safetensors";
  if (base.size() <= prefix.size() + suffix.size() ||
      base.compare(0, prefix.size(), prefix) != 0 ||
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  std::string digits =
      base.substr(prefix.size(), base.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

/// Reads and parses `dir`/index.json; returns "" or why not.
std::string readIndex(const std::string &dir, st::Json &index) {
  std::string path = dir + "/index.json", error;
  std::unique_ptr<FILE, int (*)(FILE *)> file(st::openRegular(path, error),
                                              &std::fclose);
  if (!file)
    return error;
  std::string text;
  char chunk[4096];
  size_t got;
  constexpr size_t kMaxIndexBytes = size_t(64) << 20;
  while ((got = std::fread(chunk, 1, sizeof chunk, file.get())) > 0) {
    text.append(chunk, got);
    if (text.size() > kMaxIndexBytes)
      return "'" + path + "' is larger than " +
             std::to_string(kMaxIndexBytes >> 20) + " MiB: not an index";
  }
  if (std::ferror(file.get()))
    return "cannot read '" + path + "': " + std::strerror(errno);
  if (std::string error = st::parseJson(text, index); !error.empty())
    return "'" + path + "' is malformed: " + error;
  if (index.kind != st::Json::Object || !index.get("world_size") ||
      !index.get("units"))
    return "'" + path + "' is not a sharded checkpoint index";
  return "";
}

/// "" if `dir` is absent or a directory holding only files a sharded save
/// writes (which a save may delete), else why not.
std::string foreignContent(const std::string &dir) {
  std::error_code code;
  fs::file_status status = fs::symlink_status(dir, code);
  if (!fs::exists(status))
    return "";
  if (!fs::is_directory(status))
    return "'" + dir + "' exists and is not a directory";
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, code)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(code) || entry.is_symlink(code) ||
        !isOwnFileName(name))
      return "'" + dir + "' holds '" + name +
             "', which no checkpoint save wrote";
    // A save writes index.json whole (through a temporary): one that is
    // not an index is the user's (a save replaced it).
    st::Json index;
    if (name == "index.json" && !readIndex(dir, index).empty())
      return "'" + dir +
             "' holds 'index.json', which is not a sharded checkpoint's "
             "index (no checkpoint save wrote it)";
  }
  if (code)
    return "cannot list '" + dir + "': " + code.message();
  return "";
}

/// Whether `dir` holds a finished sharded checkpoint (an index that parses).
bool isFinished(const std::string &dir) {
  st::Json index;
  return readIndex(dir, index).empty();
}

/// "" if this process may write in the directory holding `path`, else why
/// not. Where `create` says that directory is made when missing, the
/// nearest one that exists must be writable.
std::string parentWritable(const std::string &path, bool create) {
  fs::path parent = fs::path(path).parent_path();
  std::error_code code;
  while (create && !parent.empty() && !fs::exists(parent, code))
    parent = parent.parent_path();
  std::string where = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(where, code))
    return "its directory '" + where + "' does not exist";
  if (::access(where.c_str(), W_OK | X_OK) != 0)
    return "its directory '" + where +
           "' is not writable: " + std::strerror(errno);
  return "";
}

/// "" if a sharded save may write `target` (absent, or a directory of only
/// what a save writes; its .tmp and .old the same), else why not.
std::string checkShardedTarget(const std::string &target) {
  if (target.empty())
    return "an empty path is not a checkpoint directory";
  if (std::string why = parentWritable(target, true); !why.empty())
    return "cannot save a checkpoint as '" + target + "': " + why;
  for (const std::string &dir : {target, target + ".tmp", target + ".old"})
    if (std::string why = foreignContent(dir); !why.empty())
      return "refusing to save the checkpoint '" + target + "': " + why +
             " (a save replaces only a checkpoint it wrote; choose another "
             "path or move it away)";
  return "";
}

/// "" if a full save may write `path` (absent, or a full checkpoint this
/// runtime wrote), else why not.
std::string checkFullTarget(const std::string &path) {
  if (path.empty() || path.back() == '/')
    return "'" + path + "' names a directory; a full checkpoint is one file";
  if (std::string why = parentWritable(path, false); !why.empty())
    return "cannot save a full checkpoint as '" + path + "': " + why;
  std::error_code code;
  fs::file_status status = fs::symlink_status(path, code);
  if (!fs::exists(status))
    return "";
  st::Header header;
  std::string why = !fs::is_regular_file(status) ? "it is not a regular file"
                                                 : st::readHeader(path, header);
  if (why.empty() && header.metadata["format"] != "fsdp-mlir-full")
    why = "it is not a full checkpoint fsdp-mlir wrote";
  if (why.empty())
    return "";
  return "refusing to overwrite '" + path + "': " + why +
         " (a save replaces only a full checkpoint it wrote; choose another "
         "path or move it away)";
}

/// The finished checkpoint `dir` names: `dir` itself; where a save was
/// interrupted between its renames and left no finished `dir`, the newer
/// `dir`.tmp when finished (its index is written last), else `dir`.old.
/// Returns "" (setting `found`) or why none is.
std::string findSharded(const std::string &dir, std::string &found) {
  std::error_code code;
  if (fs::exists(dir, code) && !fs::is_directory(dir, code))
    return "'" + dir + "' is a file, not a sharded checkpoint directory";
  for (const std::string &candidate : {dir, dir + ".tmp", dir + ".old"}) {
    if (isFinished(candidate)) {
      found = candidate;
      return "";
    }
    if (candidate == dir && fs::exists(dir + "/index.json", code)) {
      st::Json index;
      return readIndex(dir, index);
    }
  }
  return "'" + dir +
         "' is not a complete sharded checkpoint (no index.json: it was never "
         "finished, or a save was interrupted), and there is no finished '" +
         dir + ".tmp' or '" + dir + ".old' beside it";
}

/// Whether `text` (a JSON number) is a step: 0 <= step < INT64_MAX, so
/// that the next step is still an int64.
bool isStep(const st::Json &value, int64_t &step) {
  if (value.kind != st::Json::Number || value.text.empty() ||
      value.text.find_first_not_of("0123456789") != std::string::npos ||
      value.text.size() > 19)
    return false;
  step = value.asInt();
  return step >= 0 && step < INT64_MAX;
}

/// A collective agreement: every rank learns whether all succeeded (a
/// single rank: `ok` itself).
/// A rank file's digest: the CRC-32 of its tensors' names and recorded
/// CRC-32s, in name order. The index records each file's, so a file from
/// another run (self-consistent, of the right rank, world and step) is
/// still told apart.
uint32_t fileDigest(const st::Header &h) {
  std::string text;
  for (const auto &[name, entry] : h.tensors) {
    uint32_t crc = 0;
    st::recordedChecksum(h, name, crc);
    text += name + "=" + std::to_string(crc) + ";";
  }
  return st::checksum(text.data(), text.size());
}

/// Every rank's `digest`, by rank (one rank: its own).
std::string gatherDigests(fsdprt_session_s &s, uint32_t digest,
                          std::vector<uint32_t> &out) {
  int world = s.comm ? s.comm->size() : 1;
  out.assign(world, 0);
  if (!s.comm) {
    out[0] = digest;
    return "";
  }
  std::vector<int64_t> all;
  for (size_t d = 0; d < fsdprt::meshOf(*s.plan->root).size(); ++d)
    all.push_back(static_cast<int64_t>(d));
  if (std::string why = s.comm->addGroup(all); !why.empty())
    return why;
  // (rank, digest) pairs: exact in doubles, whatever the group's order.
  double mine[2] = {static_cast<double>(s.rank()), static_cast<double>(digest)};
  std::vector<double> pairs(2 * static_cast<size_t>(world));
  fsdprt::Tensor in{mine, FSDPRT_F64, {2}, 2},
      gathered{pairs.data(), FSDPRT_F64, {2 * world}, 2 * world};
  if (std::string why =
          s.comm->allGather(all, in, gathered, "checkpoint file digests");
      !why.empty())
    return why;
  for (int r = 0; r < world; ++r)
    out.at(static_cast<size_t>(pairs[2 * r])) =
        static_cast<uint32_t>(pairs[2 * r + 1]);
  return "";
}

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

/// `t`'s bytes where the host can read them: the buffer itself when the
/// backend's memory is host memory, else a copy downloaded into `storage`.
const void *hostBytes(fsdprt_session_s &s, const fsdprt::Tensor &t,
                      std::vector<std::vector<char>> &storage) {
  if (s.backend->hostAccessible())
    return t.data;
  storage.emplace_back(t.bytes());
  s.backend->download(storage.back().data(), t.data, t.bytes());
  return storage.back().data();
}

/// The whole of member `index` of unit `u`, gathered from its group.
fsdprt_status_t gatherMember(fsdprt_session_s &s, const plan::Unit &u,
                             const ::fsdp::layout::FlatLayout &layout,
                             std::vector<char> &full) {
  const fsdprt::Tensor &shard = s.buffers[u.shard()];
  size_t element = fsdprt_dtype_size(shard.dtype);
  full.assign(layout.paddedNumel() * element, 0);
  if (!s.comm || layout.worldSize() == 1) {
    s.backend->download(full.data(), shard.data, shard.bytes());
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

/// Every rank's outcome: a failure on any rank fails them all (the others
/// say that another rank failed; that rank's message says why).
fsdprt_status_t agreed(fsdprt_session_s &s, fsdprt_status_t status,
                       const std::string &what) {
  std::string agreement;
  if (allOk(s, !status, agreement))
    return nullptr;
  if (status)
    return agreement.empty() ? markAgreed(status) : status;
  if (!agreement.empty())
    return makeStatus(FSDPRT_IO_ERROR, agreement);
  return makeStatus(FSDPRT_PEER_FAILED, "another rank could not " + what);
}

/// The failure after an agreement (allOk) that failed: this rank's `error`,
/// else the agreement's own, else `elsewhere` (another rank's failure).
/// Agreed (fsdprt_status_agreed) when the agreement itself completed.
fsdprt_status_t disagreed(fsdprt_status_code_t code, const std::string &error,
                          const std::string &agreement,
                          const std::string &elsewhere) {
  if (!agreement.empty())
    return makeStatus(code, error.empty() ? agreement : error);
  return markAgreed(makeStatus(code, error.empty() ? elsewhere : error));
}

/// Loads the full checkpoint at `path` into `s` (this rank's part).
fsdprt_status_t loadFull(fsdprt_session_s &s, const std::string &path) {
  st::Header header;
  if (std::string error = st::readHeader(path, header); !error.empty())
    return makeStatus(FSDPRT_IO_ERROR, error);
  fsdprt::WeightReader reader{".", {}};
  // Rank 0 reads the whole file once, as its writer did, to check every
  // tensor's checksum (a file that records none, e.g. one torch wrote, is
  // taken as it is); every rank reads only its own parts below.
  if (s.rank() == 0)
    for (const auto &[name, entry] : header.tensors) {
      uint32_t expected = 0;
      if (!st::recordedChecksum(header, name, expected))
        continue;
      std::vector<char> bytes(entry.end - entry.begin);
      if (fsdprt_status_t status =
              reader.read(path, name, header.dataStart + entry.begin,
                          bytes.size(), bytes.data()))
        return status;
      if (st::checksum(bytes.data(), bytes.size()) != expected)
        return makeStatus(FSDPRT_IO_ERROR,
                          "'" + path + "': tensor '" + name +
                              "' fails its CRC-32 check: the file is corrupt");
    }
  auto locate = [&](const std::string &fqn, fsdprt_dtype_t dtype,
                    const std::vector<int64_t> &shape, std::string &file,
                    uint64_t &offset) -> fsdprt_status_t {
    auto it = header.tensors.find(fqn);
    if (it == header.tensors.end())
      return makeStatus(FSDPRT_NOT_FOUND, "the checkpoint '" + path +
                                              "' has no tensor '" + fqn + "'");
    if (it->second.dtype != dtype || it->second.shape != shape)
      return invalid("the checkpoint '" + path + "' holds '" + fqn + "' as " +
                     st::typeText(it->second.dtype, it->second.shape) +
                     ", the plan as " + st::typeText(dtype, shape));
    file = path;
    offset = header.dataStart + it->second.begin;
    return nullptr;
  };
  if (const auto *weights = s.plan->root->weights())
    for (const plan::WeightRef *w : *weights) {
      const fsdprt::Tensor &t = s.buffers[w->buffer()];
      if (w->file()->size() == 0) { // optimizer state: starts afresh
        s.backend->fill(t.data, 0, t.bytes());
        continue;
      }
      std::string file;
      uint64_t offset = 0;
      if (fsdprt_status_t status =
              locate(w->fqn()->str(), t.dtype, t.shape, file, offset))
        return status;
      if (fsdprt_status_t status =
              reader.readInto(*s.backend, file, w->fqn()->str(), offset,
                              t.bytes(), t.data))
        return status;
    }
  return fsdprt::loadShards(s, reader, s.rank(), locate);
}

/// Reads a sharded checkpoint's pieces for one session, checking each
/// rank file against its name and the index, and each tensor against the
/// plan and its checksum.
struct ShardedReader {
  fsdprt_session_s &s;
  std::string root, indexPath;
  st::Json index;
  int64_t world = 0, step = 0;
  std::map<int64_t, st::Header> headers;
  fsdprt::WeightReader reader{"", {}};

  std::string fileOf(int64_t rank) const {
    return root + "/rank-" + std::to_string(rank) + ".safetensors";
  }

  /// Reads and checks index.json.
  fsdprt_status_t open() {
    indexPath = root + "/index.json";
    reader.modelDir = root;
    if (std::string error = readIndex(root, index); !error.empty())
      return invalid(error);
    const st::Json *format = index.get("format"),
                   *version = index.get("version");
    if (!format || format->text != "fsdp-mlir-sharded")
      return invalid("'" + indexPath + "' is not a sharded checkpoint index");
    if (!version || version->asInt() != kShardedVersion)
      return invalid(
          "'" + indexPath + "' is of sharded format version " +
          (version ? version->text : std::string("1")) +
          "; this runtime reads " + std::to_string(kShardedVersion) +
          " (which adds checksums): load it with the runtime that wrote it "
          "and save a full checkpoint to carry the model over");
    world = index.get("world_size")->asInt();
    if (world < 1 || world > (1 << 24))
      return invalid("'" + indexPath + "' has world_size '" +
                     index.get("world_size")->text + "'");
    const st::Json *stepJson = index.get("step");
    if (!stepJson || !isStep(*stepJson, step))
      return invalid("'" + indexPath + "' has step " +
                     (!stepJson ? std::string("none")
                      : stepJson->kind == st::Json::String
                          ? st::quote(stepJson->text) + " (a string)"
                          : "'" + stepJson->text + "'") +
                     ": a step is an integer from 0 to 2^63-2");
    return nullptr;
  }

  /// The header of `rank`'s file, checked against its name and the index.
  fsdprt_status_t header(int64_t rank, const st::Header *&out) {
    auto it = headers.find(rank);
    if (it == headers.end()) {
      st::Header h;
      std::string path = fileOf(rank);
      if (std::string error = st::readHeader(path, h); !error.empty())
        return makeStatus(FSDPRT_IO_ERROR, error);
      std::string want = "rank " + std::to_string(rank) + " of " +
                         std::to_string(world) + " at step " +
                         std::to_string(step);
      std::string says = "rank " + h.metadata["rank"] + " of " +
                         h.metadata["world_size"] + " at step " +
                         h.metadata["step"];
      if (h.metadata["format"] != "fsdp-mlir-sharded" || says != want)
        return invalid("'" + path + "' says it is " + says +
                       ", but its name and '" + indexPath + "' say " + want +
                       " (a file swapped, or copied from another checkpoint)");
      const st::Json *files = index.get("files");
      const st::Json *recorded =
          files ? files->get("rank-" + std::to_string(rank) + ".safetensors")
                : nullptr;
      char hex[9];
      std::snprintf(hex, sizeof hex, "%08x", fileDigest(h));
      if (!recorded)
        return invalid("'" + indexPath + "' records no digest for '" + path +
                       "'");
      if (recorded->text != hex)
        return invalid("'" + path + "' is not the file '" + indexPath +
                       "' was written with (its tensors' checksums give " +
                       hex + ", the index " + recorded->text +
                       "): a file from another run or checkpoint");
      it = headers.emplace(rank, std::move(h)).first;
    }
    out = &it->second;
    return nullptr;
  }

  /// The whole of tensor `name` of `rank`'s file into `bytes`, checked to
  /// be of `dtype` and `shape` and against its checksum.
  fsdprt_status_t readWhole(int64_t rank, const std::string &name,
                            fsdprt_dtype_t dtype,
                            const std::vector<int64_t> &shape,
                            std::vector<char> &bytes) {
    const st::Header *h = nullptr;
    if (fsdprt_status_t status = header(rank, h))
      return status;
    std::string path = fileOf(rank);
    auto it = h->tensors.find(name);
    if (it == h->tensors.end())
      return invalid("the checkpoint '" + root +
                     "' does not match the plan: '" + path + "' has no '" +
                     name + "'");
    const st::Entry &e = it->second;
    if (e.dtype != dtype || e.shape != shape)
      return invalid("'" + path + "' holds '" + name + "' as " +
                     st::typeText(e.dtype, e.shape) + ", the plan as " +
                     st::typeText(dtype, shape));
    uint32_t expected = 0;
    if (!st::recordedChecksum(*h, name, expected))
      return invalid("'" + path + "' records no checksum for '" + name + "'");
    bytes.resize(e.end - e.begin);
    if (fsdprt_status_t status =
            reader.read("rank-" + std::to_string(rank) + ".safetensors", name,
                        h->dataStart + e.begin, bytes.size(), bytes.data()))
      return status;
    if (st::checksum(bytes.data(), bytes.size()) != expected)
      return makeStatus(FSDPRT_IO_ERROR,
                        "'" + path + "': tensor '" + name +
                            "' fails its CRC-32 check: the file is corrupt");
    return nullptr;
  }

  /// Copies this rank's part of a unit-laid-out tensor (`name` in the old
  /// files) into `into`: the old shards covering the new shard's range.
  fsdprt_status_t reshard(const plan::Unit &u, const std::string &name,
                          const fsdprt::Tensor &into) {
    std::string unit = u.name()->str();
    const st::Json *units = index.get("units");
    const st::Json *old = units->get(unit);
    if (!old)
      return invalid("the checkpoint '" + root + "' has no unit '" + unit +
                     "'");
    std::vector<int64_t> mesh = fsdprt::meshOf(*s.plan->root);
    auto layout = fsdprt::layoutOf(u, mesh);
    const st::Json *shardJson = old->get("shard_numel"),
                   *unpaddedJson = old->get("unpadded_numel"),
                   *holders = old->get("holders");
    if (!shardJson || !unpaddedJson || !holders ||
        holders->kind != st::Json::Array)
      return invalid("'" + indexPath + "' describes unit '" + unit +
                     "' without its shard_numel, unpadded_numel and holders");
    int64_t oldShard = shardJson->asInt(), unpadded = unpaddedJson->asInt();
    if (unpadded != layout.unpaddedNumel())
      return invalid("the checkpoint's unit '" + unit + "' holds " +
                     unpaddedJson->text + " elements, the plan's " +
                     std::to_string(layout.unpaddedNumel()) +
                     " (another model, or another wrapping)");
    int64_t shards = static_cast<int64_t>(holders->items.size());
    if (oldShard < 1 || shards < 1 || shards > world ||
        unpadded / oldShard + (unpadded % oldShard != 0) > shards)
      return invalid("'" + indexPath + "': unit '" + unit + "' has " +
                     std::to_string(shards) + " holders of shards of " +
                     shardJson->text + " elements, which do not cover its " +
                     unpaddedJson->text + " elements over " +
                     std::to_string(world) + " ranks");
    std::set<int64_t> distinct;
    for (const st::Json &h : holders->items)
      if (h.asInt() < 0 || h.asInt() >= world ||
          !distinct.insert(h.asInt()).second)
        return invalid("'" + indexPath + "': unit '" + unit + "' has holders " +
                       "that are not distinct ranks below " +
                       std::to_string(world) + " (rank '" + h.text + "')");
    size_t element = fsdprt_dtype_size(into.dtype);
    s.backend->fill(into.data, 0, into.bytes());
    int64_t position =
        fsdprt::groupPosition(mesh, fsdprt::unitAxes(u), s.rank()).index;
    int64_t lo = position * layout.shardNumel();
    int64_t hi = std::min(lo + layout.shardNumel(), layout.unpaddedNumel());
    std::vector<char> piece;
    for (int64_t at = lo; at < hi;) {
      int64_t j = at / oldShard;
      int64_t end = std::min(hi, (j + 1) * oldShard);
      int64_t rank = holders->items[j].asInt();
      const st::Header *h = nullptr;
      if (fsdprt_status_t status = header(rank, h))
        return status;
      auto says = h->metadata.find("shard:" + unit);
      if (says == h->metadata.end() || says->second != std::to_string(j))
        return invalid(
            "'" + fileOf(rank) + "' holds shard " +
            (says == h->metadata.end() ? std::string("(none)") : says->second) +
            " of unit '" + unit + "', but '" + indexPath + "' says shard " +
            std::to_string(j) + " (holders permuted or duplicated)");
      if (fsdprt_status_t status =
              readWhole(rank, name, into.dtype, {oldShard}, piece))
        return status;
      s.backend->upload(static_cast<char *>(into.data) + (at - lo) * element,
                        piece.data() + (at - j * oldShard) * element,
                        (end - at) * element);
      at = end;
    }
    return nullptr;
  }

  /// Fills every buffer of the session.
  fsdprt_status_t load() {
    std::map<std::string, const plan::Unit *> byName;
    if (const auto *planUnits = s.plan->root->units())
      for (const plan::Unit *u : *planUnits) {
        byName[u->name()->str()] = u;
        if (fsdprt_status_t status =
                reshard(*u, u->name()->str(), s.buffers[u->shard()]))
          return status;
      }
    int64_t own = s.rank() < world ? s.rank() : 0;
    std::vector<char> bytes;
    if (const auto *weights = s.plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        const fsdprt::Tensor &t = s.buffers[w->buffer()];
        auto unit =
            w->state_of() ? byName.find(w->state_of()->str()) : byName.end();
        if (unit != byName.end()) {
          if (fsdprt_status_t status =
                  reshard(*unit->second, w->fqn()->str(), t))
            return status;
          continue;
        }
        if (fsdprt_status_t status =
                readWhole(own, w->fqn()->str(), t.dtype, t.shape, bytes))
          return status;
        s.backend->upload(t.data, bytes.data(), t.bytes());
      }
    return nullptr;
  }
};

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
    std::string error, agreement;
    if (s->rank() == 0)
      error = checkFullTarget(path);
    if (!allOk(*s, error.empty(), agreement))
      return error.empty() && agreement.empty()
                 ? makeStatus(FSDPRT_PEER_FAILED,
                              "rank 0 cannot write '" + std::string(path) + "'")
                 : disagreed(FSDPRT_INVALID_ARGUMENT, error, agreement, "");
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
        tensors.push_back({w->fqn()->str(), t.dtype, t.shape,
                           hostBytes(*s, t, storage), t.bytes()});
      }
    bool ok = true;
    if (s->rank() == 0) {
      error = st::write(path, tensors,
                        {{"format", "fsdp-mlir-full"},
                         {"producer", "libfsdprt " FSDPRT_VERSION_STRING}});
      ok = error.empty();
    }
    if (!allOk(*s, ok, agreement))
      return disagreed(FSDPRT_IO_ERROR, error, agreement,
                       "rank 0 could not write the checkpoint '" +
                           std::string(path) + "'");
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_load_full_checkpoint(fsdprt_session_t *s,
                                                    const char *path) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !path)
      return invalid("fsdprt_session_load_full_checkpoint: NULL argument");
    s->weightsLoaded = false;
    if (fsdprt_status_t status =
            agreed(*s, loadFull(*s, path), "load '" + std::string(path) + "'"))
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
    if (step < 0 || step == INT64_MAX)
      return invalid("fsdprt_session_save_sharded_checkpoint: step " +
                     std::to_string(step) + " is not from 0 to 2^63-2");
    std::string target = withoutTrailingSlashes(dir), staging = target + ".tmp",
                old = target + ".old";
    std::error_code code;
    std::string error, agreement;
    if (s->rank() == 0) {
      error = checkShardedTarget(target);
      // A save interrupted between its two renames left no `target` but a
      // finished .tmp or .old: put that back first, so that nothing below
      // deletes the only good checkpoint.
      if (error.empty() && !fs::exists(target, code)) {
        if (isFinished(staging))
          fs::rename(staging, target, code);
        else if (isFinished(old))
          fs::rename(old, target, code);
      }
      if (error.empty() && !code)
        fs::remove_all(staging, code);
      if (error.empty() && !code)
        fs::create_directories(staging, code);
      if (error.empty() && code)
        error = "cannot create '" + staging + "': " + code.message();
    }
    if (!allOk(*s, error.empty(), agreement))
      return disagreed(FSDPRT_IO_ERROR, error, agreement,
                       "rank 0 could not create '" + staging + "'");
    // What this rank holds, and which shard of each unit.
    std::vector<int64_t> mesh = fsdprt::meshOf(*s->plan->root);
    int world = s->comm ? s->comm->size() : 1;
    std::map<std::string, std::string> metadata = {
        {"format", "fsdp-mlir-sharded"},
        {"rank", std::to_string(s->rank())},
        {"world_size", std::to_string(world)},
        {"step", std::to_string(step)}};
    std::vector<st::Source> tensors;
    std::vector<std::vector<char>> storage;
    if (const auto *units = s->plan->root->units())
      for (const plan::Unit *u : *units) {
        const fsdprt::Tensor &t = s->buffers[u->shard()];
        tensors.push_back({u->name()->str(), t.dtype, t.shape,
                           hostBytes(*s, t, storage), t.bytes()});
        metadata["shard:" + u->name()->str()] = std::to_string(
            fsdprt::groupPosition(mesh, fsdprt::unitAxes(*u), s->rank()).index);
      }
    if (const auto *weights = s->plan->root->weights())
      for (const plan::WeightRef *w : *weights) {
        const fsdprt::Tensor &t = s->buffers[w->buffer()];
        tensors.push_back({w->fqn()->str(), t.dtype, t.shape,
                           hostBytes(*s, t, storage), t.bytes()});
      }
    std::string rankFile =
        staging + "/rank-" + std::to_string(s->rank()) + ".safetensors";
    error = st::write(rankFile, tensors, metadata);
    st::Header written;
    if (error.empty())
      error = st::readHeader(rankFile, written);
    std::vector<uint32_t> digests;
    if (std::string why = gatherDigests(*s, error.empty() ? fileDigest(written)
                                                           : 0,
                                        digests);
        !why.empty() && error.empty())
      error = why;
    if (!allOk(*s, error.empty(), agreement))
      return error.empty() && agreement.empty()
                 ? makeStatus(FSDPRT_PEER_FAILED,
                              "another rank could not write its shard of '" +
                                  target + "'")
                 : disagreed(FSDPRT_IO_ERROR, error, agreement, "");
    // The index, last: a directory without it is not a checkpoint.
    if (s->rank() == 0) {
      if (mesh.empty())
        mesh = {1};
      std::string index = "{\"format\": \"fsdp-mlir-sharded\", \"version\": " +
                          std::to_string(kShardedVersion) +
                          ", \"world_size\": " + std::to_string(world) +
                          ", \"mesh\": " + json(mesh) +
                          ", \"step\": " + std::to_string(step) +
                          ", \"units\": {";
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
      index += "}, \"files\": {";
      for (int r = 0; r < world; ++r) {
        char hex[9];
        std::snprintf(hex, sizeof hex, "%08x", digests[r]);
        index += (r ? ", " : "") +
                 st::quote("rank-" + std::to_string(r) + ".safetensors") +
                 ": \"" + hex + "\"";
      }
      index += "}}\n";
      std::string indexPath = staging + "/index.json";
      FILE *file = std::fopen(indexPath.c_str(), "w");
      bool ok = file && std::fwrite(index.data(), 1, index.size(), file) ==
                            index.size();
      ok = ok && std::fflush(file) == 0 && ::fsync(fileno(file)) == 0;
      ok = file && std::fclose(file) == 0 && ok;
      // Swap the new checkpoint in. At every moment a finished checkpoint
      // is `target`, or `old` with a finished `staging` (which a load and
      // the next save take): the old one goes only afterwards.
      if (ok && fs::exists(target, code)) {
        if (isFinished(target)) {
          fs::remove_all(old, code);
          if (!code)
            fs::rename(target, old, code);
        } else {
          fs::remove_all(target, code); // an empty or unfinished one
        }
      }
      if (ok && !code)
        fs::rename(staging, target, code);
      if (!ok || code)
        error = "cannot finish the checkpoint '" + target +
                "': " + (code ? code.message() : "cannot write index.json");
      else
        fs::remove_all(old, code);
    }
    if (!allOk(*s, error.empty(), agreement))
      return disagreed(FSDPRT_IO_ERROR, error, agreement,
                       "rank 0 could not finish '" + target + "'");
    return nullptr;
  });
}

fsdprt_status_t fsdprt_session_load_sharded_checkpoint(fsdprt_session_t *s,
                                                       const char *dir,
                                                       int64_t *step) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!s || !dir)
      return invalid("fsdprt_session_load_sharded_checkpoint: NULL argument");
    s->weightsLoaded = false;
    ShardedReader reader{*s, {}, {}, {}, 0, 0, {}, {}};
    fsdprt_status_t status = nullptr;
    if (std::string why = findSharded(withoutTrailingSlashes(dir), reader.root);
        !why.empty())
      status = makeStatus(FSDPRT_NOT_FOUND, why);
    if (!status)
      status = reader.open();
    if (!status)
      status = reader.load();
    if ((status = agreed(*s, status, "load '" + std::string(dir) + "'")))
      return status;
    if (step)
      *step = reader.step;
    // Training goes on where it stopped: the next run draws step `step`'s
    // random masks, as it would have without the checkpoint.
    s->random.step = static_cast<uint32_t>(reader.step);
    s->weightsLoaded = true;
    return nullptr;
  });
}

fsdprt_status_t fsdprt_checkpoint_check_destination(const char *path,
                                                    int sharded) {
  return fsdprt::guarded(__func__, [&]() -> fsdprt_status_t {
    if (!path)
      return invalid("fsdprt_checkpoint_check_destination: NULL argument");
    std::string why = sharded ? checkShardedTarget(withoutTrailingSlashes(path))
                              : checkFullTarget(path);
    return why.empty() ? nullptr : invalid(why);
  });
}

} // extern "C"
