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
/// file next to it, flushed, then renamed over `path`. The metadata also
/// gets each tensor's CRC-32 (zlib's) as "crc32:<name>" (8 hex digits),
/// which checkedRead verifies. Returns "" or why.
std::string write(const std::string &path, const std::vector<Source> &tensors,
                  const std::map<std::string, std::string> &metadata);

/// Reads and checks the header of `path` (every tensor's bytes inside the
/// file, sizes matching dtypes and shapes, the tensors tiling the data
/// section without overlaps or gaps, as huggingface/safetensors requires).
/// Returns "" or why.
std::string readHeader(const std::string &path, Header &header);

/// Opens `path` for reading if it is a regular file (a FIFO would block
/// the open, a device like /dev/zero never end); nullptr with `error` set
/// otherwise. A directory is named as one.
FILE *openRegular(const std::string &path, std::string &error);

/// The CRC-32 of `bytes` bytes at `data` (zlib's crc32).
uint32_t checksum(const void *data, uint64_t bytes);

/// The CRC-32 the header records for tensor `name`; false if none.
bool recordedChecksum(const Header &header, const std::string &name,
                      uint32_t &out);

/// "dtype [d0, d1, ...]", as messages name a tensor's type.
std::string typeText(fsdprt_dtype_t dtype, const std::vector<int64_t> &shape);

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
