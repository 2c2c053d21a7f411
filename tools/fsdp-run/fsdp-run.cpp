//===- fsdp-run.cpp - Run a plan on the CPU runtime -----------------------===//
//
// fsdp-run model.plan --input NAME=FILE.npy ... [--output-dir DIR] [--json]
//
// Links only libfsdprt (no MLIR): what any host of the runtime does, as a
// command. Inputs and outputs are NumPy .npy files.
//
//===----------------------------------------------------------------------===//

#include "fsdprt/fsdprt.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char *kUsage = R"(usage: fsdp-run PLAN [options]

Runs a compiled plan (fsdp-translate --mlir-to-plan) on the CPU runtime.

options:
  --input NAME=FILE.npy  bind a declared input (every input must be given)
  --output-dir DIR       write every output as DIR/<name>.npy
  --model-dir DIR        where the weight files are (default: the plan's)
  --threads N            threads for kernels (default 0: one per core)
  --warmup W             untimed runs before the timed ones (default 0)
  --repeat K             timed runs (default 1)
  --json                 print one JSON object (outputs, timings, memory)
  --help                 this text

Without --json it prints, per output, its dtype, shape, min/max/mean and
first values, then timings (weight loading, per-run mean and min) and
memory (activation, weight and constant arenas; peak RSS).
)";

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(fsdprt_status_t status, const std::string &what) {
  if (!status)
    return;
  std::string message = what + ": " + fsdprt_status_message(status);
  fsdprt_status_free(status);
  throw Error(message);
}

/// NumPy's descr for a plan dtype.
const char *descrOf(fsdprt_dtype_t dtype) {
  switch (dtype) {
  case FSDPRT_F32: return "<f4";
  case FSDPRT_F64: return "<f8";
  case FSDPRT_F16: return "<f2";
  case FSDPRT_I64: return "<i8";
  case FSDPRT_I32: return "<i4";
  case FSDPRT_I16: return "<i2";
  case FSDPRT_I8: return "|i1";
  case FSDPRT_U8: return "|u1";
  case FSDPRT_BOOL: return "|b1";
  default: return "";
  }
}

/// A Python tuple: "()", "(3,)", "(2, 3)".
std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string listText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

/// Reads a C-order .npy file (format versions 1-3).
Array readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open '" + path + "': " + std::strerror(errno));
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw Error("'" + path + "' is not a .npy file");
  uint32_t headerLength = 0;
  unsigned char bytes[4] = {0, 0, 0, 0};
  int width = magic[6] == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char *>(bytes), width))
    throw Error("'" + path + "' is truncated");
  for (int i = width - 1; i >= 0; --i)
    headerLength = headerLength << 8 | bytes[i];
  std::string header(headerLength, '\0');
  if (!in.read(header.data(), headerLength))
    throw Error("'" + path + "' is truncated");
  auto field = [&](const std::string &key) {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos)
      throw Error("'" + path + "' has no '" + key + "' in its header");
    return header.substr(header.find(':', at) + 1);
  };
  Array array;
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  array.descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    throw Error("'" + path + "' is in Fortran order; save it C-contiguous");
  std::string shape = field("shape");
  shape = shape.substr(shape.find('(') + 1, shape.find(')') - shape.find('(') - 1);
  std::stringstream dims(shape);
  std::string dim;
  while (std::getline(dims, dim, ','))
    if (dim.find_first_not_of(' ') != std::string::npos)
      array.shape.push_back(std::stoll(dim));
  int64_t numel = 1;
  for (int64_t d : array.shape)
    numel *= d;
  size_t size = std::stoul(array.descr.substr(2));
  array.data.resize(numel * size);
  if (!in.read(array.data.data(), array.data.size()))
    throw Error("'" + path + "' holds fewer than " + std::to_string(numel) +
                " elements");
  return array;
}

void writeNpy(const std::string &path, const char *descr,
              const std::vector<int64_t> &shape, const std::vector<char> &data) {
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " +
                       shapeText(shape) + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  uint16_t length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(length & 0xff));
  out.put(static_cast<char>(length >> 8));
  out << header;
  out.write(data.data(), data.size());
  if (!out)
    throw Error("cannot write '" + path + "'");
}

std::vector<int64_t> shapeOf(const fsdprt_tensor_desc_t &desc) {
  return std::vector<int64_t>(desc.shape, desc.shape + desc.rank);
}

double valueAt(const std::vector<char> &data, fsdprt_dtype_t dtype, size_t i) {
  const char *p = data.data();
  switch (dtype) {
  case FSDPRT_F32: return reinterpret_cast<const float *>(p)[i];
  case FSDPRT_F64: return reinterpret_cast<const double *>(p)[i];
  case FSDPRT_I64: return static_cast<double>(reinterpret_cast<const int64_t *>(p)[i]);
  case FSDPRT_I32: return reinterpret_cast<const int32_t *>(p)[i];
  case FSDPRT_I16: return reinterpret_cast<const int16_t *>(p)[i];
  case FSDPRT_I8: return reinterpret_cast<const int8_t *>(p)[i];
  case FSDPRT_U8: case FSDPRT_BOOL: return reinterpret_cast<const uint8_t *>(p)[i];
  default: return NAN;
  }
}

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
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Options {
  std::string plan, outputDir, modelDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, warmup = 0, repeat = 1;
  bool json = false;
};

int toInt(const std::string &flag, const std::string &value, int min) {
  try {
    size_t used;
    int v = std::stoi(value, &used);
    if (used == value.size() && v >= min)
      return v;
  } catch (...) {
  }
  throw Error(flag + " needs an integer >= " + std::to_string(min) + ", not '" +
              value + "'");
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos &&
          arg.substr(0, eq) != "--input")
        return arg.substr(eq + 1);
      if (i + 1 >= argc)
        throw Error(arg + " needs a value");
      return argv[++i];
    };
    std::string flag = arg.substr(0, arg.find('='));
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--input") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error("--input needs NAME=FILE.npy, not '" + v + "'");
      o.inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (flag == "--output-dir") {
      o.outputDir = value();
    } else if (flag == "--model-dir") {
      o.modelDir = value();
    } else if (flag == "--threads") {
      o.threads = toInt(flag, value(), 0);
    } else if (flag == "--warmup") {
      o.warmup = toInt(flag, value(), 0);
    } else if (flag == "--repeat") {
      o.repeat = toInt(flag, value(), 1);
    } else if (arg.rfind("-", 0) == 0) {
      throw Error("unknown option '" + arg + "' (see --help)");
    } else if (o.plan.empty()) {
      o.plan = arg;
    } else {
      throw Error("more than one plan given: '" + o.plan + "' and '" + arg + "'");
    }
  }
  if (o.plan.empty())
    throw Error("no plan given (see --help)");
  return o;
}

int run(const Options &o) {
  using Clock = std::chrono::steady_clock;
  fsdprt_plan_t *plan = nullptr;
  check(fsdprt_plan_load_file(o.plan.c_str(), &plan), "cannot load the plan");
  std::unique_ptr<fsdprt_plan_t, void (*)(fsdprt_plan_t *)> planOwner(
      plan, fsdprt_plan_destroy);

  std::vector<fsdprt_tensor_desc_t> inputs(fsdprt_plan_num_inputs(plan)),
      outputs(fsdprt_plan_num_outputs(plan));
  for (size_t i = 0; i < inputs.size(); ++i)
    check(fsdprt_plan_input(plan, i, &inputs[i]), "plan input");
  for (size_t i = 0; i < outputs.size(); ++i)
    check(fsdprt_plan_output(plan, i, &outputs[i]), "plan output");
  auto declared = [&]() {
    std::string text;
    for (const auto &d : inputs)
      text += std::string("\n  ") + d.name + " " + fsdprt_dtype_name(d.dtype) +
              " " + listText(shapeOf(d));
    return text;
  };

  // Every declared input exactly once, with its dtype and shape.
  std::map<std::string, Array> arrays;
  for (const auto &[name, path] : o.inputs) {
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const auto &d) { return name == d.name; });
    if (it == inputs.end())
      throw Error("the plan has no input '" + name + "'; its inputs:" + declared());
    if (arrays.count(name))
      throw Error("input '" + name + "' is given twice");
    Array array = readNpy(path);
    if (array.descr != descrOf(it->dtype) || array.shape != shapeOf(*it))
      throw Error("input '" + name + "' from '" + path + "' is " + array.descr +
                  " " + listText(array.shape) + " but the plan declares " +
                  descrOf(it->dtype) + " (" + fsdprt_dtype_name(it->dtype) +
                  ") " + listText(shapeOf(*it)));
    arrays[name] = std::move(array);
  }
  std::string missing;
  for (const auto &d : inputs)
    if (!arrays.count(d.name))
      missing += std::string(missing.empty() ? "" : ", ") + d.name;
  if (!missing.empty())
    throw Error("missing inputs: " + missing + "; the plan declares:" + declared());

  fsdprt_session_t *session = nullptr;
  check(fsdprt_session_create(plan, o.modelDir.empty() ? nullptr : o.modelDir.c_str(),
                              o.threads, &session),
        "cannot create a session");
  std::unique_ptr<fsdprt_session_t, void (*)(fsdprt_session_t *)> sessionOwner(
      session, fsdprt_session_destroy);
  auto start = Clock::now();
  check(fsdprt_session_load_weights(session), "cannot load weights");
  double loadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto &[name, array] : arrays)
    check(fsdprt_session_set_input(session, name.c_str(), array.data.data(),
                                   array.data.size()),
          "input '" + name + "'");

  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    auto begin = Clock::now();
    check(fsdprt_session_run(session), "run failed");
    if (i >= o.warmup)
      times.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
  }

  uint64_t act = 0, weights = 0, constants = 0;
  check(fsdprt_session_memory(session, &act, &weights, &constants), "memory");
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  uint64_t rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;

  if (!o.outputDir.empty())
    mkdir(o.outputDir.c_str(), 0777);
  std::ostringstream json, text;
  json << "{\"plan\": " << jsonString(o.plan) << ", \"inputs\": [";
  for (size_t i = 0; i < inputs.size(); ++i)
    json << (i ? ", " : "") << jsonString(inputs[i].name);
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
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    double mean = numel ? sum / numel : NAN;
    if (!o.outputDir.empty()) {
      if (!*descrOf(d.dtype))
        throw Error(std::string("output '") + d.name + "' has a dtype .npy cannot hold");
      writeNpy(o.outputDir + "/" + d.name + ".npy", descrOf(d.dtype), shape, data);
    }
    json << (i ? ", " : "") << "{\"name\": " << jsonString(d.name)
         << ", \"dtype\": \"" << fsdprt_dtype_name(d.dtype)
         << "\", \"shape\": " << listText(shape) << ", \"min\": " << number(lo)
         << ", \"max\": " << number(hi) << ", \"mean\": " << number(mean) << "}";
    text << "output " << d.name << ": " << fsdprt_dtype_name(d.dtype) << " "
         << listText(shape) << "  min " << number(lo) << "  max " << number(hi)
         << "  mean " << number(mean) << "\n  first values:";
    for (size_t j = 0; j < std::min<size_t>(numel, 6); ++j)
      text << " " << number(valueAt(data, d.dtype, j));
    text << (numel > 6 ? " ...\n" : "\n");
  }
  double mean = 0, min = INFINITY;
  for (double t : times) {
    mean += t / times.size();
    min = std::min(min, t);
  }
  json << "], \"load_seconds\": " << number(loadSeconds) << ", \"run_seconds\": [";
  for (size_t i = 0; i < times.size(); ++i)
    json << (i ? ", " : "") << number(times[i]);
  json << "], \"run_seconds_mean\": " << number(mean)
       << ", \"run_seconds_min\": " << number(min)
       << ", \"threads\": " << o.threads << ", \"memory\": {\"activation_bytes\": "
       << act << ", \"weight_bytes\": " << weights
       << ", \"constant_bytes\": " << constants << ", \"peak_rss_bytes\": " << rss
       << "}}\n";
  text << "weights loaded in " << number(loadSeconds * 1e3) << " ms; "
       << times.size() << " run(s): mean " << number(mean * 1e3) << " ms, min "
       << number(min * 1e3) << " ms\n"
       << "memory: activations " << act << " B, weights " << weights
       << " B, constants " << constants << " B; peak RSS " << rss << " B\n";
  std::cout << (o.json ? json.str() : text.str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception &e) {
    std::cerr << "fsdp-run: error: " << e.what() << "\n";
    return 1;
  }
}
