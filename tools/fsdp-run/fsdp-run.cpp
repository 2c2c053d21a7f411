//===- fsdp-run.cpp - Run a plan on the runtime (CPU or CUDA) ------------===//
//
// fsdp-run model.plan --input NAME=FILE.npy ... [--output-dir DIR] [--json]
//
// Links only libfsdprt (no MLIR): what any host of the runtime does, as a
// command. Inputs and outputs are NumPy .npy files.
//
//===----------------------------------------------------------------------===//

#include "npy.h"

#include "fsdprt/fsdprt.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

// The C API of MPI only (not the deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <thread>

namespace {

namespace npy = fsdp::npy;

const char *kUsage = R"(usage: fsdp-run PLAN [options]

Runs a compiled plan (fsdp-translate --mlir-to-plan) on the CPU, or on a
CUDA GPU with --device cuda.

options:
  --input NAME=FILE.npy  bind the declared input NAME to a C-order .npy file
                         of its dtype and shape (every input must be given);
                         a NAME holding '=' splits at the '=' whose left
                         side is a declared input
  --output-dir DIR       write every output as DIR/<name>.npy (DIR is created;
                         under mpirun each rank's as DIR/rank<r>/<name>.npy)
  --model-dir DIR        where the weight files are (default: the plan's)
  --threads N            threads for kernels (default 0: one per core; at
                         most 1024); idle ones sleep (OMP_WAIT_POLICY=PASSIVE
                         unless the environment sets it)
  --seed S               the seed of training-mode Dropout's masks, 0 to
                         2^64-1 (default 0): the same seed gives the same
                         masks, hence losses, at any --threads and any
                         number of ranks for the same global batch
  --warmup W             untimed runs before the timed ones (default 0)
  --repeat K             timed runs (default 1)
  --steps K              training: run the step K times on the same inputs,
                         printing "step <k> loss <value>" after each (the
                         plan's state updates carry over from step to step)
  --lr VALUE             the learning rate, a finite number >= 0 (within
                         float32's range), for a plan with an input 'lr'
                         (fsdp-optimizer's); required by such a plan
  --save-state DIR       after the last run, write every parameter, buffer
                         and optimizer state as DIR/<fqn>.npy
  --json                 print one JSON object instead of the summary
  --save-checkpoint DIR  after the last step, write a sharded training
                         checkpoint (every rank's shards, optimizer state,
                         index.json with the step); atomic; replaces only a
                         checkpoint (DIR.tmp, DIR.old the same)
  --resume DIR           start from a sharded checkpoint (written at any
                         world size: resharded on load) and number steps on
                         from its step; checked (rank files, checksums,
                         dtypes and shapes); without DIR/index.json, the
                         finished DIR.tmp or DIR.old an interrupted save left
  --save-full FILE       after the last run, write the model's state dict
                         (every parameter by FQN) as one .safetensors file;
                         replaces only a full checkpoint fsdp-run wrote
  --load-full FILE       start from a full .safetensors state dict instead of
                         the model's own weights
  --timeout SECONDS      multi-rank: the deadline of every collective, a
                         finite number (default 300; 0, or over a century:
                         none); a dead or stalled rank ends every rank with
                         a message instead of a hang
  --device DEVICE        where the kernels run: cpu (default), cuda or
                         cuda:N where the runtime has a CUDA backend;
                         fake-cuda (tests): the CUDA backend's host code on
                         host memory, with a stream hazard checker (ops with
                         no CUDA kernel run the CPU's); fake-cuda:strict: the
                         same, refusing those ops as a GPU does;
                         fake-cuda:cudnn: strict, with attention through the
                         backend's cuDNN path on a host model of cuDNN
  --no-cuda-graph        run every step directly: by default a single-rank
                         plan on cuda (or fake-cuda) runs step 1 directly,
                         captures step 2 into a CUDA graph and replays it
  --local-ranks N        run a plan sharded over N ranks as N threads of
                         this process, one session each, whose collectives
                         meet in memory (one device holds every rank: a
                         GPU, the CPU or fake-cuda); not under mpirun.
                         --timeout bounds each collective; a failed rank
                         stops the others
  --nccl STORE --rank R --world-size W
                         run rank R of W processes on GPUs (--device cuda:N)
                         that meet over NCCL without MPI; NCCL's id goes
                         through STORE: file:PATH (rank 0 writes it, the
                         others wait for it) or env:NAME (256 hex digits the
                         launcher set on every rank); --timeout is every
                         collective's deadline
  --memory-budget BYTES  refuse to start if the plan needs more than BYTES
                         per rank (suffixes K, M, G, T: powers of 1024); the
                         message names the plan's peak and its parts
  --describe             read and check the plan, print what it holds (world
                         size and mesh, units and their shards, kernels per
                         stream, collectives, bytes per rank) and run nothing;
                         works for plans of any world size
  --help                 print this text

Without --json it prints, per output, its dtype, shape, min/max/mean and
first values, then timings (weight loading, per-run mean and min) and
memory (activation, weight and constant arenas, kernel workspace; peak RSS
and RSS before the session). With --json it prints one object with the
keys plan, inputs, outputs (name, dtype, shape, min, max, mean),
load_seconds, run_seconds, run_seconds_mean, run_seconds_min, threads and
memory (activation_bytes, weight_bytes, constant_bytes, workspace_bytes,
rss_before_session_bytes, peak_rss_bytes: this process's own peak, VmHWM
of /proc/self/status, not a launching parent's), and with --steps the
losses.

Under mpirun (mpirun -np N fsdp-run PLAN ...) every rank runs its part of
a plan sharded over N ranks: each loads only its shards, an input file
whose first dimension is N times the plan's is split so rank r takes the
r-th slice (the global batch), and rank 0 prints the losses averaged over
the ranks (the global batch's) and the summary.

Where it writes is checked before anything runs: --output-dir and
--save-state may name a new directory or one holding only files of the
names this run writes there (<name>.npy, rank<r>/), which are overwritten;
anything else in it is refused, and so is a tensor name that is not a
plain file name (with '/', '..' or a control character). Nothing fsdp-run
did not write is deleted or overwritten.

A plan with an input named 'step' (fsdp-optimizer's step count) gets
1, 2, ... on successive runs unless --input gives it. Outputs are the last
run's. Files read (the plan, .npy inputs, --load-full) must be regular
files: a FIFO or a device is refused. Errors print "fsdp-run: error: ..."
(under mpirun "fsdp-run: rank <r>: error: ...", one line per rank) and exit
with status 1.
)";

struct Error : std::runtime_error {
  explicit Error(const std::string &message,
                 fsdprt_status_code_t code = FSDPRT_OK, bool agreed = false)
      : std::runtime_error(message), code(code), agreed(agreed) {}
  /// The runtime's status code when the runtime said it, else FSDPRT_OK.
  fsdprt_status_code_t code;
  /// Every rank fails the same call (fsdprt_status_agreed).
  bool agreed;
};

void check(fsdprt_status_t status, const std::string &what) {
  if (!status)
    return;
  std::string message = what + ": " + fsdprt_status_message(status);
  fsdprt_status_code_t code = fsdprt_status_code(status);
  bool agreed = fsdprt_status_agreed(status) != 0;
  fsdprt_status_free(status);
  throw Error(message, code, agreed);
}

/// `name` (of a tensor in the plan) as a file name; refused if it could
/// name a file outside the directory: empty, with '/', '..' or a control
/// character (NUL included, which the plan's strings may hold).
std::string fileNameOf(const std::string &name, const std::string &what) {
  bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (name.empty() || name == "." || name.find('/') != std::string::npos ||
      name.find("..") != std::string::npos || control) {
    std::string shown;
    for (char c : name) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char escape[8];
        std::snprintf(escape, sizeof escape, "\\x%02x", c & 0xff);
        shown += escape;
      } else {
        shown += c;
      }
    }
    throw Error(what + " '" + shown +
                "' cannot be a file name: a name with '/', '..' or a control "
                "character would write outside the directory you named");
  }
  return name + ".npy";
}

/// `path` without trailing separators ("out/" and "out" are one directory).
std::string withoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

/// Refuses, before anything runs, a directory `flag` names that holds
/// anything this run would not write there: it may be absent (its nearest
/// existing parent writable) or hold only `files` (paths relative to it)
/// and the directories on their way, which the run overwrites.
void checkOwnDirectory(const std::string &flag, const std::string &dir,
                       const std::set<std::string> &files) {
  namespace fs = std::filesystem;
  std::error_code code;
  fs::file_status status = fs::symlink_status(dir, code);
  if (fs::exists(status) && !fs::is_directory(status))
    throw Error(flag + " '" + dir + "' exists and is not a directory");
  if (!fs::exists(status)) {
    fs::path parent = fs::path(dir).parent_path();
    while (!parent.empty() && !fs::exists(parent, code))
      parent = parent.parent_path();
    std::string where = parent.empty() ? "." : parent.string();
    if (::access(where.c_str(), W_OK | X_OK) != 0)
      throw Error(flag + " '" + dir + "' cannot be created: '" + where +
                  "' is not writable (" + std::strerror(errno) + ")");
    return;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(flag + " '" + dir +
                "' is not writable: " + std::strerror(errno));
  std::set<std::string> dirs;
  for (const std::string &file : files)
    for (fs::path p = fs::path(file).parent_path(); !p.empty();
         p = p.parent_path())
      dirs.insert(p.string());
  for (auto it = fs::recursive_directory_iterator(dir, code);
       !code && it != fs::recursive_directory_iterator(); it.increment(code)) {
    std::string relative =
        fs::path(it->path()).lexically_relative(dir).string();
    fs::file_status entry = it->symlink_status(code);
    // A temporary of a file it writes, which a killed run left, is its own.
    bool ownFile = files.count(relative) > 0;
    for (const std::string &file : files)
      ownFile = ownFile || npy::temporaryOf(file) == relative;
    bool own = fs::is_directory(entry)      ? dirs.count(relative) > 0
               : fs::is_regular_file(entry) ? ownFile
                                            : false;
    if (!own)
      throw Error(flag + " '" + dir + "' holds '" + relative +
                  "', which this run would not write: fsdp-run writes into an "
                  "existing directory only if it holds nothing but files of "
                  "the names it writes (see --help); choose a new or empty "
                  "directory");
  }
  if (code)
    throw Error("cannot list " + flag + " '" + dir + "': " + code.message());
}

std::string listText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::vector<int64_t> shapeOf(const fsdprt_tensor_desc_t &desc) {
  return std::vector<int64_t>(desc.shape, desc.shape + desc.rank);
}

/// The process's resident bytes now (/proc/self/statm), 0 if unknown.
uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident))
    return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

/// This process's own peak resident bytes since it started: VmHWM of
/// /proc/self/status, which starts afresh with the address space exec
/// made. getrusage's ru_maxrss is kept across exec, so a launcher's peak
/// (a 1.4 GB Python process) would be reported as ours; it is only the
/// fallback where /proc is missing.
uint64_t peakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024; // kB
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
}

/// A number as JSON (and the summary) print it; NaN and infinities as
/// Python's json module writes them.
std::string number(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "Infinity" : "-Infinity";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// Element i of `data` (of `dtype`) as a double.
double valueAt(const std::vector<char> &data, fsdprt_dtype_t dtype, size_t i) {
  const char *p = data.data();
  switch (dtype) {
  case FSDPRT_F32:
    return reinterpret_cast<const float *>(p)[i];
  case FSDPRT_F64:
    return reinterpret_cast<const double *>(p)[i];
  case FSDPRT_I64:
    return static_cast<double>(reinterpret_cast<const int64_t *>(p)[i]);
  case FSDPRT_I32:
    return reinterpret_cast<const int32_t *>(p)[i];
  case FSDPRT_I16:
    return reinterpret_cast<const int16_t *>(p)[i];
  case FSDPRT_I8:
    return reinterpret_cast<const int8_t *>(p)[i];
  case FSDPRT_U8:
  case FSDPRT_BOOL:
    return reinterpret_cast<const uint8_t *>(p)[i];
  default:
    return NAN;
  }
}

struct Options {
  std::string plan, outputDir, modelDir, device;
  /// --input's values as given (NAME=FILE), split once the plan's inputs
  /// are known, into `inputs`.
  std::vector<std::string> inputArgs;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, warmup = 0, repeat = 1, steps = 0;
  bool json = false, timing = false, describe = false;
  double timeout = 300;
  uint64_t memoryBudget = 0;
  uint64_t seed = 0;
  /// This process's place among the ranks mpirun started (0 of 1 alone),
  /// or, with --local-ranks, this thread's among the local group's.
  int rank = 0, world = 1;
  int localRanks = 0;
  fsdprt_local_group_t *group = nullptr;
  /// --nccl STORE --rank R --world-size W: an NCCL rank without MPI.
  std::string ncclStore;
  int ncclRank = -1, ncclWorld = 0;
  bool noGraph = false;
  std::string lr, saveState, saveCheckpoint, resume, saveFull, loadFull;
};

/// A byte count: digits with an optional K, M, G or T (powers of 1024).
uint64_t toBytes(const std::string &flag, const std::string &value) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit((unsigned char)value[digits]))
    ++digits;
  std::string suffix = value.substr(digits);
  const std::string units = "KMGT";
  size_t unit = suffix.size() == 1 ? units.find(suffix[0]) : std::string::npos;
  uint64_t bytes = 0;
  bool ok = digits > 0 && digits <= 19 &&
            (suffix.empty() || unit != std::string::npos);
  if (ok) {
    bytes = std::stoull(value.substr(0, digits));
    int shift = suffix.empty() ? 0 : 10 * (int(unit) + 1);
    ok = bytes > 0 && bytes <= (UINT64_MAX >> shift);
    bytes <<= shift;
  }
  if (!ok)
    throw Error(flag +
                " needs a byte count > 0 such as 1073741824 or 1G, not '" +
                value + "'");
  return bytes;
}

int toInt(const std::string &flag, const std::string &value, int min,
          int max = INT_MAX) {
  try {
    size_t used;
    int v = std::stoi(value, &used);
    if (used == value.size() && v >= min && v <= max)
      return v;
  } catch (const std::exception &) {
  }
  throw Error(flag + " needs an integer >= " + std::to_string(min) +
              (max == INT_MAX ? "" : " and <= " + std::to_string(max)) +
              ", not '" + value + "'");
}

/// A finite number >= `min`: NaN and the infinities are refused (a NaN
/// learning rate trains into NaN, a NaN deadline is none).
double toFinite(const std::string &flag, const std::string &value, double min,
                const std::string &what) {
  try {
    size_t used;
    double v = std::stod(value, &used);
    if (used == value.size() && std::isfinite(v) && v >= min)
      return v;
  } catch (const std::exception &) {
  }
  throw Error(flag + " needs " + what + ", not '" + value + "'");
}

/// Refuses a path that exists but is not a regular file (a FIFO, a device:
/// reading /dev/zero never ends); a missing one or a directory is left to
/// the reader, which names it.
void requireRegularFile(const std::string &what, const std::string &path) {
  struct stat info;
  if (stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode) &&
      !S_ISDIR(info.st_mode))
    throw Error(what + " '" + path + "': not a regular file");
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // --flag=value or --flag value.
    size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    std::string flag = arg.substr(0, eq);
    auto value = [&]() -> std::string {
      if (eq == std::string::npos && i + 1 >= argc)
        throw Error(flag + " needs a value (see --help)");
      std::string v = eq != std::string::npos ? arg.substr(eq + 1) : argv[++i];
      // An empty value (`--output-dir "$UNSET"`) read as no option at all:
      // the run succeeded and wrote nothing.
      if (v.empty())
        throw Error(flag + " needs a value, not '' (see --help)");
      return v;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--describe") {
      o.describe = true;
    } else if (flag == "--input") {
      std::string v = value();
      size_t sep = v.find('=');
      if (sep == std::string::npos || sep == 0 || v.back() == '=')
        throw Error("--input needs NAME=FILE.npy, not '" + v + "'");
      o.inputArgs.push_back(v);
    } else if (flag == "--output-dir") {
      o.outputDir = withoutTrailingSlashes(value());
    } else if (flag == "--model-dir") {
      o.modelDir = value();
    } else if (flag == "--threads") {
      o.threads = toInt(flag, value(), 0, FSDPRT_MAX_THREADS);
    } else if (flag == "--seed") {
      std::string v = value();
      bool digits = !v.empty() && v.size() <= 20 &&
                    std::all_of(v.begin(), v.end(), [](unsigned char c) {
                      return std::isdigit(c);
                    });
      errno = 0;
      o.seed = digits ? std::strtoull(v.c_str(), nullptr, 10) : 0;
      if (!digits || errno == ERANGE)
        throw Error("--seed needs an integer from 0 to 2^64-1, not '" + v +
                    "'");
    } else if (flag == "--warmup") {
      o.warmup = toInt(flag, value(), 0);
      o.timing = true;
    } else if (flag == "--repeat") {
      o.repeat = toInt(flag, value(), 1);
      o.timing = true;
    } else if (flag == "--steps") {
      o.steps = toInt(flag, value(), 1);
    } else if (flag == "--lr") {
      o.lr = value();
      // >= 0 as torch's optimizers require; finite in float32, the 'lr'
      // input's dtype (1e39 became inf and the step NaN).
      double lr = toFinite(flag, o.lr, 0, "a finite number >= 0");
      if (!std::isfinite(static_cast<float>(lr)))
        throw Error("--lr " + o.lr + " is beyond float32's range");
    } else if (flag == "--save-state") {
      o.saveState = withoutTrailingSlashes(value());
    } else if (flag == "--save-checkpoint") {
      o.saveCheckpoint = withoutTrailingSlashes(value());
    } else if (flag == "--resume") {
      o.resume = withoutTrailingSlashes(value());
    } else if (flag == "--save-full") {
      o.saveFull = value();
    } else if (flag == "--load-full") {
      o.loadFull = value();
    } else if (flag == "--timeout") {
      o.timeout = toFinite(flag, value(), 0, "finite seconds >= 0");
    } else if (flag == "--memory-budget") {
      o.memoryBudget = toBytes(flag, value());
    } else if (flag == "--device") {
      o.device = value();
    } else if (arg == "--no-cuda-graph") {
      o.noGraph = true;
    } else if (flag == "--nccl") {
      o.ncclStore = value();
    } else if (flag == "--rank") {
      o.ncclRank = toInt(flag, value(), 0, 1 << 20);
    } else if (flag == "--world-size") {
      o.ncclWorld = toInt(flag, value(), 1, 1 << 20);
    } else if (flag == "--local-ranks") {
      o.localRanks = toInt(flag, value(), 1, 4096);
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw Error("unknown option '" + arg + "' (see --help)");
    } else if (o.plan.empty()) {
      o.plan = arg;
    } else {
      throw Error("more than one plan given: '" + o.plan + "' and '" + arg +
                  "'");
    }
  }
  if (o.plan.empty())
    throw Error("no plan given (see --help)");
  if (!o.resume.empty() && !o.loadFull.empty())
    throw Error("--resume and --load-full both say where the state comes "
                "from; give one");
  if (o.steps && o.timing)
    throw Error("--steps runs the training step K times; it does not combine "
                "with --warmup or --repeat");
  if (o.steps) {
    o.warmup = 0;
    o.repeat = o.steps;
  }
  return o;
}

/// The threads a session uses for `requested` (0: one per available core).
int effectiveThreads(int requested) {
  if (requested > 0)
    return requested;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(CPU_COUNT(&set), 1);
  return 1;
}

/// A one-element array of `desc`'s dtype and shape holding `value`.
npy::Array scalarArray(const fsdprt_tensor_desc_t &desc, double value) {
  std::vector<int64_t> shape = shapeOf(desc);
  size_t numel = 1;
  for (int64_t s : shape)
    numel *= s;
  if (numel != 1)
    throw Error(std::string("input '") + desc.name +
                "' should be a scalar, "
                "but the plan declares " +
                listText(shape));
  npy::Array array{npy::descrOf(desc.dtype), shape,
                   std::vector<char>(fsdprt_dtype_size(desc.dtype))};
  auto put = [&](auto v) { std::memcpy(array.data.data(), &v, sizeof v); };
  switch (desc.dtype) {
  case FSDPRT_F32:
    put(static_cast<float>(value));
    break;
  case FSDPRT_F64:
    put(value);
    break;
  case FSDPRT_I64:
    put(static_cast<int64_t>(value));
    break;
  case FSDPRT_I32:
    put(static_cast<int32_t>(value));
    break;
  default:
    throw Error(std::string("input '") + desc.name + "' is " +
                fsdprt_dtype_name(desc.dtype) +
                "; fsdp-run sets it only as f32, f64, i64 or i32");
  }
  return array;
}

/// Writes one state tensor, read from the session by name, as DIR/<name>.npy.
void saveTensor(const fsdprt_session_t *session,
                const fsdprt_tensor_desc_t &desc, const std::string &dir) {
  std::vector<int64_t> shape = shapeOf(desc);
  size_t numel = 1;
  for (int64_t s : shape)
    numel *= s;
  std::vector<char> data(numel * fsdprt_dtype_size(desc.dtype));
  check(fsdprt_session_read_state(session, desc.name, data.data(), data.size()),
        std::string("state '") + desc.name + "'");
  if (!*npy::descrOf(desc.dtype))
    throw Error(std::string("state '") + desc.name + "' is " +
                fsdprt_dtype_name(desc.dtype) + ", which .npy cannot hold");
  npy::write(dir + "/" + fileNameOf(desc.name, "state"),
             {npy::descrOf(desc.dtype), shape, data});
}

/// Writes every parameter, buffer and optimizer state as DIR/<fqn>.npy; for
/// a flat unit, its members by FQN and the rank's shard by the unit's name.
void saveState(const fsdprt_plan_t *plan, const fsdprt_session_t *session,
               const std::string &top) {
  int rank = fsdprt_session_rank(session);
  int world = fsdprt_session_world_size(session);
  // Several ranks: each writes what it holds under DIR/rank<r>, rank 0
  // also every unit member, gathered whole, under DIR.
  std::string dir = world > 1 ? top + "/rank" + std::to_string(rank) : top;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    throw Error("cannot create '" + dir + "': " + error.message());
  if (world > 1)
    for (size_t i = 0; i < fsdprt_plan_num_units(plan); ++i) {
      fsdprt_unit_desc_t unit;
      check(fsdprt_plan_unit(plan, i, &unit), "plan unit");
      for (size_t p = 0; p < unit.num_params; ++p) {
        fsdprt_tensor_desc_t member;
        check(fsdprt_plan_unit_param(plan, i, p, &member), "plan unit member");
        std::vector<int64_t> shape = shapeOf(member);
        size_t numel = 1;
        for (int64_t d : shape)
          numel *= d;
        std::vector<char> data(numel * fsdprt_dtype_size(member.dtype));
        check(fsdprt_session_read_full_state(session, member.name, data.data(),
                                             data.size()),
              std::string("gathering '") + member.name + "'");
        if (rank == 0)
          npy::write(top + "/" + fileNameOf(member.name, "state"),
                     {npy::descrOf(member.dtype), shape, data});
      }
    }
  for (size_t i = 0; i < fsdprt_plan_num_weights(plan); ++i) {
    fsdprt_tensor_desc_t desc;
    check(fsdprt_plan_weight_desc(plan, i, &desc), "plan weight");
    saveTensor(session, desc, dir);
  }
  for (size_t i = 0; i < fsdprt_plan_num_units(plan); ++i) {
    fsdprt_unit_desc_t unit;
    check(fsdprt_plan_unit(plan, i, &unit), "plan unit");
    int64_t shape[1] = {unit.shard_numel};
    saveTensor(session, {unit.name, unit.dtype, 1, shape}, dir);
    for (size_t p = 0; world == 1 && p < unit.num_params; ++p) {
      fsdprt_tensor_desc_t member;
      check(fsdprt_plan_unit_param(plan, i, p, &member), "plan unit member");
      saveTensor(session, member, dir);
    }
  }
}

/// The files saveState writes under its directory, relative to it (their
/// names checked).
std::set<std::string> stateFiles(const fsdprt_plan_t *plan, int world) {
  std::set<std::string> files;
  std::vector<std::string> dirs;
  for (int r = 0; r < world; ++r)
    dirs.push_back(world > 1 ? "rank" + std::to_string(r) + "/" : "");
  for (size_t i = 0; i < fsdprt_plan_num_weights(plan); ++i) {
    fsdprt_tensor_desc_t desc;
    check(fsdprt_plan_weight_desc(plan, i, &desc), "plan weight");
    for (const std::string &dir : dirs)
      files.insert(dir + fileNameOf(desc.name, "state"));
  }
  for (size_t i = 0; i < fsdprt_plan_num_units(plan); ++i) {
    fsdprt_unit_desc_t unit;
    check(fsdprt_plan_unit(plan, i, &unit), "plan unit");
    for (const std::string &dir : dirs)
      files.insert(dir + fileNameOf(unit.name, "unit"));
    for (size_t p = 0; p < unit.num_params; ++p) {
      fsdprt_tensor_desc_t member;
      check(fsdprt_plan_unit_param(plan, i, p, &member), "plan unit member");
      files.insert(fileNameOf(member.name, "state"));
    }
  }
  return files;
}

/// Refuses two destinations of one run that are the same path or one
/// inside the other: an output and a state of one name overwrote each
/// other; a state or an output written into the checkpoint's directory made
/// the save refuse it after the training (or the next save refuse it).
void checkDestinationsApart(const Options &o) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> places = {
      {"--output-dir", o.outputDir},
      {"--save-state", o.saveState},
      {"--save-checkpoint", o.saveCheckpoint},
      {"--save-full", o.saveFull}};
  auto within = [](const fs::path &inner, const fs::path &outer) {
    auto i = inner.begin(), j = outer.begin();
    for (; j != outer.end(); ++i, ++j)
      if (i == inner.end() || *i != *j)
        return false;
    return true;
  };
  for (size_t a = 0; a < places.size(); ++a)
    for (size_t b = a + 1; b < places.size(); ++b) {
      const auto &[flagA, pathA] = places[a];
      const auto &[flagB, pathB] = places[b];
      if (pathA.empty() || pathB.empty())
        continue;
      std::error_code code;
      fs::path p = fs::weakly_canonical(pathA, code),
               q = fs::weakly_canonical(pathB, code);
      for (fs::path *x : {&p, &q})
        if (x->filename().empty()) // "dir/"
          *x = x->parent_path();
      if (p == q)
        throw Error(flagA + " and " + flagB + " both name '" + pathA +
                    "'; give them different places");
      if (within(p, q) || within(q, p)) {
        bool aInside = within(p, q);
        throw Error((aInside ? flagA : flagB) + " '" +
                    (aInside ? pathA : pathB) + "' lies inside " +
                    (aInside ? flagB : flagA) + " '" +
                    (aInside ? pathB : pathA) + "'; give them places apart");
      }
    }
}

/// Splits each --input NAME=FILE at the '=' whose left side is a declared
/// input, so a name may hold '='; where none is, at the first '=' (the
/// reader then says the plan has no such input).
std::vector<std::pair<std::string, std::string>>
splitInputs(const std::vector<std::string> &args,
            const std::vector<fsdprt_tensor_desc_t> &inputs) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string &arg : args) {
    size_t split = arg.find('=');
    int matches = 0;
    for (size_t sep = split; sep != std::string::npos;
         sep = arg.find('=', sep + 1))
      if (sep + 1 < arg.size() &&
          std::any_of(inputs.begin(), inputs.end(), [&](const auto &d) {
            return arg.compare(0, sep, d.name) == 0 &&
                   std::strlen(d.name) == sep;
          })) {
        split = sep;
        ++matches;
      }
    if (matches > 1)
      throw Error("--input '" + arg +
                  "' is ambiguous: it splits into more than one declared "
                  "input and a file");
    out.emplace_back(arg.substr(0, split), arg.substr(split + 1));
  }
  return out;
}

/// Reads every declared input from the files given for it, checked against
/// the plan's dtype and shape.
std::map<std::string, npy::Array>
readInputs(const Options &o, const std::vector<fsdprt_tensor_desc_t> &inputs,
           std::map<std::string, npy::Array> arrays) {
  auto declared = [&]() {
    std::string text;
    for (const auto &d : inputs)
      text += std::string("\n  ") + d.name + " " + fsdprt_dtype_name(d.dtype) +
              " " + listText(shapeOf(d));
    return text.empty() ? std::string(" none") : text;
  };
  for (const auto &[name, path] : o.inputs) {
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const auto &d) { return name == d.name; });
    if (it == inputs.end())
      throw Error("the plan has no input '" + name +
                  "'; its inputs:" + declared());
    if (arrays.count(name))
      throw Error("input '" + name + "' is given twice");
    npy::Array array = npy::read(path);
    const char *descr = npy::descrOf(it->dtype);
    std::vector<int64_t> want = shapeOf(*it);
    if (o.world > 1 && array.descr == descr && !want.empty() &&
        array.shape.size() == want.size() &&
        array.shape[0] == want[0] * o.world &&
        std::equal(want.begin() + 1, want.end(), array.shape.begin() + 1)) {
      // The global batch: this rank's slice of the first dimension.
      size_t slice = array.data.size() / o.world;
      array.data = std::vector<char>(array.data.begin() + slice * o.rank,
                                     array.data.begin() + slice * (o.rank + 1));
      array.shape = want;
    }
    if (array.descr != descr || array.shape != shapeOf(*it))
      throw Error("input '" + name + "' from '" + path + "' is " + array.descr +
                  " " + listText(array.shape) + " but the plan declares " +
                  descr + " (" + fsdprt_dtype_name(it->dtype) + ") " +
                  listText(shapeOf(*it)));
    arrays[name] = std::move(array);
  }
  std::string missing;
  for (const auto &d : inputs)
    if (!arrays.count(d.name))
      missing += std::string(missing.empty() ? "" : ", ") + d.name;
  if (!missing.empty())
    throw Error("missing inputs: " + missing +
                "; the plan declares:" + declared());
  return arrays;
}

/// --describe: the plan as the runtime reads it, without running it.
int describe(const fsdprt_plan_t *plan, const Options &o) {
  std::ostringstream text, json;
  int64_t world = fsdprt_plan_world_size(plan);
  std::string mesh;
  for (size_t axis = 0; axis < fsdprt_plan_mesh_rank(plan); ++axis)
    mesh +=
        (axis ? "x" : "") + std::to_string(fsdprt_plan_mesh_dim(plan, axis));
  text << "plan " << o.plan << ": schema " << fsdprt_plan_schema_version(plan)
       << ", " << world << " rank" << (world == 1 ? "" : "s")
       << (mesh.empty() ? "" : " (mesh " + mesh + ")") << ", "
       << fsdprt_plan_peak_bytes(plan) << " bytes per rank\n";
  json << "{\"plan\": " << jsonString(o.plan)
       << ", \"schema_version\": " << fsdprt_plan_schema_version(plan)
       << ", \"world_size\": " << world << ", \"mesh\": [";
  for (size_t axis = 0; axis < fsdprt_plan_mesh_rank(plan); ++axis)
    json << (axis ? ", " : "") << fsdprt_plan_mesh_dim(plan, axis);
  json << "], \"peak_bytes\": " << fsdprt_plan_peak_bytes(plan)
       << ", \"units\": [";
  size_t units = fsdprt_plan_num_units(plan);
  text << units << " unit" << (units == 1 ? "" : "s") << "\n";
  for (size_t i = 0; i < units; ++i) {
    fsdprt_unit_desc_t u;
    check(fsdprt_plan_unit(plan, i, &u), "plan unit");
    text << "  " << u.name << ": " << u.num_params << " params, "
         << fsdprt_dtype_name(u.dtype) << "[" << u.padded_numel << "] over "
         << u.group_size << " ranks, shard " << u.shard_numel << "\n";
    json << (i ? ", " : "") << "{\"name\": " << jsonString(u.name)
         << ", \"module\": " << jsonString(u.module)
         << ", \"params\": " << u.num_params
         << ", \"dtype\": " << jsonString(fsdprt_dtype_name(u.dtype))
         << ", \"padded_numel\": " << u.padded_numel
         << ", \"group_size\": " << u.group_size
         << ", \"shard_numel\": " << u.shard_numel << ", \"members\": [";
    for (size_t p = 0; p < u.num_params; ++p) {
      fsdprt_tensor_desc_t member;
      check(fsdprt_plan_unit_param(plan, i, p, &member), "plan unit member");
      json << (p ? ", " : "") << jsonString(member.name);
    }
    json << "]}";
  }
  std::map<std::string, size_t> collectives;
  size_t kernels = fsdprt_plan_num_kernels(plan), compute = 0, deps = 0;
  for (size_t i = 0; i < kernels; ++i) {
    fsdprt_kernel_desc_t k;
    check(fsdprt_plan_kernel(plan, i, &k), "plan kernel");
    if (k.stream == 0)
      ++compute;
    else
      ++collectives[k.op];
    deps += k.num_deps;
  }
  text << kernels << " kernels: " << compute << " compute, "
       << kernels - compute << " collective";
  json << "], \"kernels\": " << kernels << ", \"compute_kernels\": " << compute
       << ", \"dependencies\": " << deps << ", \"collectives\": {";
  bool first = true;
  for (auto &[op, n] : collectives) {
    text << (first ? " (" : ", ") << n << " " << op;
    json << (first ? "" : ", ") << jsonString(op) << ": " << n;
    first = false;
  }
  text << (first ? "" : ")") << "; " << deps << " cross-stream dependencies\n";
  json << "}}\n";
  std::cout << (o.json ? json.str() : text.str());
  return 0;
}

int run(Options o) {
  using Clock = std::chrono::steady_clock;
  fsdprt_plan_t *plan = nullptr;
  check(fsdprt_plan_load_file(o.plan.c_str(), &plan), "cannot load the plan");
  std::unique_ptr<fsdprt_plan_t, void (*)(fsdprt_plan_t *)> planOwner(
      plan, fsdprt_plan_destroy);
  if (o.describe)
    return describe(plan, o);
  int64_t planWorld = fsdprt_plan_world_size(plan);
  if (o.localRanks && planWorld != o.world)
    throw Error("the plan is for " + std::to_string(planWorld) +
                " ranks; run it with --local-ranks " + std::to_string(planWorld) +
                ", not " + std::to_string(o.world));
  if (planWorld > 1 && planWorld != o.world)
    throw Error(
        "the plan is for " + std::to_string(planWorld) +
        " ranks; launch it with mpirun -np " + std::to_string(planWorld) +
        " or run it with --local-ranks " + std::to_string(planWorld) +
        (o.world > 1 ? " (this job has " + std::to_string(o.world) + " ranks)"
                     : ""));

  std::vector<fsdprt_tensor_desc_t> inputs(fsdprt_plan_num_inputs(plan)),
      outputs(fsdprt_plan_num_outputs(plan));
  for (size_t i = 0; i < inputs.size(); ++i)
    check(fsdprt_plan_input(plan, i, &inputs[i]), "plan input");
  for (size_t i = 0; i < outputs.size(); ++i)
    check(fsdprt_plan_output(plan, i, &outputs[i]), "plan output");
  o.inputs = splitInputs(o.inputArgs, inputs);
  if (!o.loadFull.empty())
    requireRegularFile("--load-full", o.loadFull);
  // The learning rate and step count of a training step, unless given.
  auto declared = [&](const char *name) -> const fsdprt_tensor_desc_t * {
    for (const auto &d : inputs)
      if (std::string(d.name) == name)
        return &d;
    return nullptr;
  };
  auto given = [&](const char *name) {
    return std::any_of(o.inputs.begin(), o.inputs.end(),
                       [&](const auto &input) { return input.first == name; });
  };
  std::map<std::string, npy::Array> supplied;
  const fsdprt_tensor_desc_t *lrInput = declared("lr");
  if (!o.lr.empty()) {
    if (!lrInput)
      throw Error("--lr given but the plan has no input 'lr'");
    if (given("lr"))
      throw Error("the learning rate is given twice (--lr and --input lr=...)");
    supplied["lr"] = scalarArray(*lrInput, std::stod(o.lr));
  } else if (lrInput && !given("lr")) {
    throw Error("the plan takes a learning rate input 'lr'; pass --lr");
  }
  const fsdprt_tensor_desc_t *stepInput =
      given("step") ? nullptr : declared("step");
  if (stepInput)
    supplied["step"] = scalarArray(*stepInput, 1);
  std::map<std::string, npy::Array> arrays = readInputs(o, inputs, supplied);
  if (o.steps &&
      !std::any_of(outputs.begin(), outputs.end(), [](const auto &d) {
        return std::string(d.name) == "loss" && d.dtype == FSDPRT_F32;
      }))
    throw Error("--steps prints each step's loss, but the plan has no f32 "
                "output named 'loss'");
  if (!o.outputDir.empty())
    for (const auto &d : outputs)
      if (!*npy::descrOf(d.dtype))
        throw Error(std::string("output '") + d.name + "' is " +
                    fsdprt_dtype_name(d.dtype) + ", which .npy cannot hold");

  // Where the run writes is checked now, not after the training: names
  // that would leave the directory, foreign files, unwritable places.
  checkDestinationsApart(o);
  if (!o.outputDir.empty()) {
    std::set<std::string> files;
    for (int r = 0; r < o.world; ++r)
      for (const auto &d : outputs)
        files.insert((o.world > 1 ? "rank" + std::to_string(r) + "/" : "") +
                     fileNameOf(d.name, "output"));
    checkOwnDirectory("--output-dir", o.outputDir, files);
  }
  if (!o.saveState.empty())
    checkOwnDirectory("--save-state", o.saveState, stateFiles(plan, o.world));
  if (o.rank == 0 && !o.saveCheckpoint.empty())
    check(fsdprt_checkpoint_check_destination(o.saveCheckpoint.c_str(), 1),
          "--save-checkpoint");
  if (o.rank == 0 && !o.saveFull.empty())
    check(fsdprt_checkpoint_check_destination(o.saveFull.c_str(), 0),
          "--save-full");

  uint64_t rssBefore = residentBytes();
  fsdprt_session_t *session = nullptr;
  const char *modelDir = o.modelDir.empty() ? nullptr : o.modelDir.c_str();
  fsdprt_session_options_t options;
  fsdprt_session_options_init(&options);
  options.model_dir = modelDir;
  options.num_threads = o.threads;
  options.seed = o.seed;
  options.memory_budget_bytes = o.memoryBudget;
  options.device = o.device.empty() ? nullptr : o.device.c_str();
  options.disable_graphs = o.noGraph;
  fsdprt_mpi_options_t mpi = {1, 0, o.timeout};
  if (o.group) {
    options.local_group = o.group;
    options.local_rank = o.rank;
  } else if (!o.ncclStore.empty()) {
    options.nccl_id_store = o.ncclStore.c_str();
    options.nccl_rank = o.rank;
    options.nccl_world_size = o.world;
    options.nccl_timeout_seconds = o.timeout;
  } else if (o.world > 1 || fsdprt_plan_world_size(plan) > 1) {
    options.mpi = &mpi;
  }
  check(fsdprt_session_create_with_options(plan, &options, &session),
        "cannot create a session");
  std::unique_ptr<fsdprt_session_t, void (*)(fsdprt_session_t *)> sessionOwner(
      session, fsdprt_session_destroy);
  auto start = Clock::now();
  int64_t firstStep = 1;
  if (!o.resume.empty()) {
    int64_t saved = 0;
    check(fsdprt_session_load_sharded_checkpoint(session, o.resume.c_str(),
                                                 &saved),
          "cannot resume from '" + o.resume + "'");
    namespace fs = std::filesystem;
    std::error_code code;
    if (o.rank == 0 && !fs::exists(o.resume + "/index.json", code))
      std::cerr << "fsdp-run: note: '" << o.resume
                << "' has no index.json (a save was interrupted); resumed "
                   "from the finished '"
                << o.resume
                << (fs::exists(o.resume + ".tmp/index.json", code) ? ".tmp"
                                                                   : ".old")
                << "' at step " << saved << std::endl;
    if (saved > INT64_MAX - 1 - o.warmup - o.repeat)
      throw Error("the checkpoint '" + o.resume + "' is at step " +
                  std::to_string(saved) + ": " +
                  std::to_string(o.warmup + o.repeat) + " more step" +
                  (o.warmup + o.repeat == 1 ? "" : "s") +
                  " would overflow the step count");
    firstStep = saved + 1;
  } else if (!o.loadFull.empty()) {
    check(fsdprt_session_load_full_checkpoint(session, o.loadFull.c_str()),
          "cannot load '" + o.loadFull + "'");
  } else {
    check(fsdprt_session_load_weights(session), "cannot load weights");
  }
  double loadSeconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto &[name, array] : arrays)
    check(fsdprt_session_set_input(session, name.c_str(), array.data.data(),
                                   array.data.size()),
          "input '" + name + "'");

  std::vector<double> times, losses;
  double computeTotal = 0, communicationTotal = 0, exposedTotal = 0;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    if (stepInput) {
      npy::Array step = scalarArray(*stepInput, firstStep + i);
      check(fsdprt_session_set_input(session, "step", step.data.data(),
                                     step.data.size()),
            "input 'step'");
    }
    auto begin = Clock::now();
    check(fsdprt_session_run(session),
          o.steps ? "step " + std::to_string(i + 1) + " failed" : "run failed");
    if (i >= o.warmup) {
      times.push_back(
          std::chrono::duration<double>(Clock::now() - begin).count());
      double compute = 0, communication = 0, exposed = 0;
      check(fsdprt_session_timings(session, &compute, nullptr), "timings");
      check(fsdprt_session_overlap(session, &communication, &exposed), "timings");
      computeTotal += compute;
      communicationTotal += communication;
      exposedTotal += exposed;
    }
    if (o.steps) {
      float local;
      check(fsdprt_session_get_output(session, "loss", &local, sizeof local),
            "output 'loss'");
      // Each rank's is its slice's: the global batch's is their mean (in
      // double, as every host that calls the API gets it).
      double loss = local;
      check(fsdprt_session_mean_over_ranks(session, &loss), "the mean loss");
      losses.push_back(loss);
      if (!o.json && o.rank == 0)
        std::cout << "step " << firstStep + i << " loss " << number(loss)
                  << std::endl;
    }
  }
  if (!o.saveState.empty())
    saveState(plan, session, o.saveState);
  if (!o.saveCheckpoint.empty())
    check(fsdprt_session_save_sharded_checkpoint(
              session, o.saveCheckpoint.c_str(),
              firstStep - 1 + o.warmup + o.repeat),
          "cannot save the checkpoint '" + o.saveCheckpoint + "'");
  if (!o.saveFull.empty())
    check(fsdprt_session_save_full_checkpoint(session, o.saveFull.c_str()),
          "cannot save '" + o.saveFull + "'");
  double mean = 0, min = INFINITY, runTotal = 0;
  for (double t : times) {
    mean += t / times.size();
    min = std::min(min, t);
    runTotal += t;
  }

  uint64_t activations = 0, weights = 0, constants = 0;
  check(fsdprt_session_memory(session, &activations, &weights, &constants),
        "memory");
  uint64_t workspace = 0;
  check(fsdprt_session_workspace_bytes(session, &workspace), "memory");
  uint64_t rss = peakResidentBytes();

  // Under mpirun each rank's outputs are its slice's: DIR/rank<r>/.
  std::string outputDir = o.outputDir.empty() || o.world == 1
                              ? o.outputDir
                              : o.outputDir + "/rank" + std::to_string(o.rank);
  if (!outputDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(outputDir, error);
    if (error)
      throw Error("cannot create '" + outputDir + "': " + error.message());
  }
  std::ostringstream json, text;
  json << "{\"plan\": " << jsonString(o.plan) << ", \"inputs\": [";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const fsdprt_tensor_desc_t &d = inputs[i];
    std::string file;
    for (const auto &[name, path] : o.inputs)
      if (name == d.name)
        file = path;
    json << (i ? ", " : "") << "{\"name\": " << jsonString(d.name)
         << ", \"dtype\": \"" << fsdprt_dtype_name(d.dtype)
         << "\", \"shape\": " << listText(shapeOf(d))
         << ", \"file\": " << jsonString(file) << "}";
  }
  json << "], \"outputs\": [";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const fsdprt_tensor_desc_t &d = outputs[i];
    std::vector<int64_t> shape = shapeOf(d);
    size_t numel = 1;
    for (int64_t s : shape)
      numel *= s;
    std::vector<char> data(numel * fsdprt_dtype_size(d.dtype));
    check(fsdprt_session_get_output(session, d.name, data.data(), data.size()),
          std::string("output '") + d.name + "'");
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t j = 0; j < numel; ++j) {
      double v = valueAt(data, d.dtype, j);
      lo = std::isnan(v) || std::isnan(lo) ? NAN : std::min(lo, v);
      hi = std::isnan(v) || std::isnan(hi) ? NAN : std::max(hi, v);
      sum += v;
    }
    // An empty output has no statistics.
    std::string lows = numel ? number(lo) : "null",
                highs = numel ? number(hi) : "null",
                means = numel ? number(sum / numel) : "null";
    if (!outputDir.empty())
      npy::write(outputDir + "/" + fileNameOf(d.name, "output"),
                 {npy::descrOf(d.dtype), shape, data});
    json << (i ? ", " : "") << "{\"name\": " << jsonString(d.name)
         << ", \"dtype\": \"" << fsdprt_dtype_name(d.dtype)
         << "\", \"shape\": " << listText(shape) << ", \"min\": " << lows
         << ", \"max\": " << highs << ", \"mean\": " << means << "}";
    text << "output " << d.name << ": " << fsdprt_dtype_name(d.dtype) << " "
         << listText(shape) << "  min " << lows << "  max " << highs
         << "  mean " << means << "\n  first values:";
    for (size_t j = 0; j < std::min<size_t>(numel, 6); ++j)
      text << " " << number(valueAt(data, d.dtype, j));
    text << (numel > 6 ? " ...\n" : "\n");
  }
  // Throughput over the global batch: the first dimension of the first
  // batched input, times the ranks.
  int64_t samples = 0;
  for (const auto &d : inputs)
    if (d.rank > 0 && samples == 0)
      samples = d.shape[0] * o.world;
  double total = 0;
  for (double t : times)
    total += t;
  double perSecond = total > 0 ? samples * times.size() / total : 0;
  uint64_t perRank = fsdprt_plan_peak_bytes(plan);
  json << "], \"world_size\": " << o.world
       << ", \"samples_per_second\": " << number(perSecond)
       << ", \"compute_seconds\": " << number(computeTotal)
       << ", \"communication_seconds\": " << number(communicationTotal)
       << ", \"exposed_communication_seconds\": " << number(exposedTotal)
       << ", \"exposed_fraction\": "
       << number(runTotal > 0 ? exposedTotal / runTotal : 0.0)
       << ", \"plan_bytes_per_rank\": " << perRank;
  json << ", \"load_seconds\": " << number(loadSeconds)
       << ", \"run_seconds\": [";
  for (size_t i = 0; i < times.size(); ++i)
    json << (i ? ", " : "") << number(times[i]);
  json << "], \"run_seconds_mean\": " << number(mean)
       << ", \"run_seconds_min\": " << number(min)
       << ", \"threads\": " << effectiveThreads(o.threads)
       << ", \"memory\": {\"activation_bytes\": " << activations
       << ", \"weight_bytes\": " << weights
       << ", \"constant_bytes\": " << constants
       << ", \"workspace_bytes\": " << workspace
       << ", \"rss_before_session_bytes\": " << rssBefore
       << ", \"peak_rss_bytes\": " << rss << "}";
  if (o.steps) {
    json << ", \"losses\": [";
    for (size_t i = 0; i < losses.size(); ++i)
      json << (i ? ", " : "") << number(losses[i]);
    json << "]";
  }
  json << "}\n";
  text << "weights loaded in " << number(loadSeconds * 1e3) << " ms; "
       << times.size() << " run(s): mean " << number(mean * 1e3) << " ms, min "
       << number(min * 1e3) << " ms; " << effectiveThreads(o.threads)
       << " thread(s)\n"
       << "memory: activations " << activations << " B, weights " << weights
       << " B, constants " << constants << " B, kernel workspace "
       << workspace << " B; peak RSS " << rss << " B (" << rssBefore
       << " B before the session)\n";
  if (o.world > 1 || samples)
    text << o.world << " rank(s): " << number(perSecond)
         << " samples/s over the global batch; compute "
         << number(computeTotal * 1e3) << " ms, communication "
         << number(communicationTotal * 1e3) << " ms, of which exposed "
         << number(exposedTotal * 1e3) << " ms (rank 0); plan " << perRank
         << " B per rank\n";
  if (o.rank == 0)
    std::cout << (o.json ? json.str() : text.str());
  return 0;
}

} // namespace

/// Whether mpirun (Open MPI, or a PMI launcher) started this process.
bool launchedByMpi() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(name))
      return true;
  return false;
}

/// Makes OpenMP's idle threads sleep rather than spin, unless the user chose
/// a policy. A spinning thread takes the core its team-mate needs as soon as
/// anything else runs on the machine: with two builds running beside it, a
/// 2-thread training step of the corpus GPT-2 took 800 ms where 1 thread
/// took 0.5 ms, and 0.8 ms with PASSIVE (torch shows the same, which is why
/// bench/cpu_train times it both ways). libgomp reads OMP_WAIT_POLICY once,
/// when it is loaded, before main: so the variable is set and fsdp-run runs
/// itself again, before MPI starts. If that exec fails, it goes on as it is.
void preferSleepingOpenMPThreads(char **argv) {
  if (std::getenv("OMP_WAIT_POLICY"))
    return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
}

/// One line on stderr for a failed rank (one write: ranks share stderr).
void reportFailure(int rank, int world, const std::string &what) {
  std::string line = "fsdp-run: " +
                     (world > 1 ? "rank " + std::to_string(rank) + ": " : std::string()) +
                     "error: " + what + "\n";
  std::cout.flush();
  if (::write(STDERR_FILENO, line.data(), line.size()) < 0)
    std::perror("fsdp-run");
}

/// --local-ranks N: the plan's N ranks as N threads of this process, one
/// session each, in a local group (collectives in memory). A failed rank
/// aborts the group, so the others stop too; the exit status is the
/// first failure's.
int runLocalRanks(Options o) {
  fsdprt_local_group_t *group = nullptr;
  if (fsdprt_status_t status = fsdprt_local_group_create(o.localRanks, o.timeout, &group)) {
    reportFailure(0, 1, fsdprt_status_message(status));
    fsdprt_status_free(status);
    return 1;
  }
  std::vector<int> statuses(o.localRanks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.localRanks; ++r)
    threads.emplace_back([&, r]() {
      Options mine = o;
      mine.rank = r;
      mine.world = o.localRanks;
      mine.group = group;
      try {
        statuses[r] = run(mine);
      } catch (const std::exception &e) {
        reportFailure(r, o.localRanks, e.what());
        statuses[r] = 1;
      }
      if (statuses[r] != 0)
        fsdprt_local_group_abort(group, ("rank " + std::to_string(r) + " failed").c_str());
    });
  for (std::thread &t : threads)
    t.join();
  fsdprt_local_group_destroy(group);
  for (int status : statuses)
    if (status != 0)
      return status;
  return 0;
}

int main(int argc, char **argv) {
  preferSleepingOpenMPThreads(argv);
  bool mpi = launchedByMpi();
  int rank = 0, world = 1;
  if (mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  }
  try {
    Options o = parse(argc, argv);
    o.rank = rank;
    o.world = world;
    if (o.localRanks && mpi)
      throw Error("--local-ranks runs every rank in this process; do not "
                  "start it under mpirun");
    if (!o.ncclStore.empty()) {
      if (mpi || o.localRanks)
        throw Error("--nccl starts an NCCL rank without MPI: not under mpirun, "
                    "not with --local-ranks");
      if (o.ncclRank < 0 || o.ncclWorld < 1 || o.ncclRank >= o.ncclWorld)
        throw Error("--nccl needs --rank R and --world-size W with 0 <= R < W");
      o.rank = o.ncclRank;
      o.world = o.ncclWorld;
    } else if (o.ncclRank >= 0 || o.ncclWorld > 0) {
      throw Error("--rank and --world-size go with --nccl STORE");
    }
    int status = o.localRanks ? runLocalRanks(o) : run(o);
    if (mpi)
      MPI_Finalize();
    return status;
  } catch (const std::exception &e) {
    // One write per line: the ranks share stderr, and a line written in
    // pieces interleaves with the others' ("fsdp-run: fsdp-run: rank 0").
    std::string line =
        "fsdp-run: " +
        (world > 1 ? "rank " + std::to_string(rank) + ": " : std::string()) +
        "error: " + e.what() + "\n";
    std::cout.flush();
    if (::write(STDERR_FILENO, line.data(), line.size()) < 0)
      std::perror("fsdp-run");
    // Every rank ends: the others may be waiting on this one, so the job is
    // aborted. Except when every rank fails this same call, having learned
    // of it in a collective they all completed (fsdprt_status_agreed): then
    // each ends normally with status 1, and mpirun reports it. Aborting
    // there is worse than needless: two ranks aborting while the others
    // finalize can crash or hang Open MPI's mpirun (4.1, in
    // PMIx_server_finalize), and an abort could kill a rank before its
    // message, the one that says why, is written.
    const auto *error = dynamic_cast<const Error *>(&e);
    bool agreed = error && error->agreed;
    if (world > 1 && !agreed)
      MPI_Abort(MPI_COMM_WORLD, 1);
    if (mpi)
      MPI_Finalize();
    return 1;
  }
}
