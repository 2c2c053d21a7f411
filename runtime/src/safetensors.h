//===- safetensors.h - Reading and writing .safetensors files ----*- C++
//-*-===//
//
// The safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header mapping each tensor name to its dtype, shape
// and [begin, end) byte offsets into the data that follows, and an optional
// "__metadata__" object of strings. Checkpoints use it so that any tool
// (and torch, through the Python frontend) reads them without pickle.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_SRC_SAFETENSORS_H
#define FSDPRT_SRC_SAFETENSORS_H

#include "fsdprt/fsdprt.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdprt::safetensors {

struct Entry {
  fsdprt_dtype_t dtype = FSDPRT_F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // offsets into the data section
};

/// One tensor to write: its bytes are read from `data` when written.
struct Source {
  std::string name;
  fsdprt_dtype_t dtype;
  std::vector<int64_t> shape;
  const void *data;
  uint64_t bytes;
};

struct Header {
  std::map<std::string, Entry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t dataStart = 0; // file offset of the data section
};

/// Writes `tensors` and `metadata` to `path` atomically: to a temporary
/// file next to it, flushed, then renamed over `path`. Returns "" or why.
std::string write(const std::string &path, const std::vector<Source> &tensors,
                  const std::map<std::string, std::string> &metadata);

/// Reads and checks the header of `path` (every tensor's bytes inside the
/// file, sizes matching dtypes and shapes). Returns "" or why.
std::string readHeader(const std::string &path, Header &header);

/// A minimal JSON reader for the files checkpoints write: objects, arrays,
/// strings, integers. Values are kept as their JSON text (strings unquoted).
struct Json {
  enum Kind { Null, Number, String, Array, Object } kind = Null;
  std::string text; // a number's digits or a string's value
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;
  const Json *get(const std::string &key) const;
  int64_t asInt() const;
};
/// Parses `text`; returns "" or where it fails.
std::string parseJson(const std::string &text, Json &out);
/// `s` as a JSON string literal.
std::string quote(const std::string &s);

} // namespace fsdprt::safetensors

#endif // FSDPRT_SRC_SAFETENSORS_H
