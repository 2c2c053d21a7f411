//===- ModelReader.h - Read an ONNX model without its weights ---*- C++ -*-===//

#ifndef FSDP_LIB_IMPORT_ONNX_MODELREADER_H
#define FSDP_LIB_IMPORT_ONNX_MODELREADER_H

#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::onnx_import {

/// Where an initializer's raw bytes lie inside the .onnx file itself.
struct EmbeddedBytes {
  int64_t offset = 0;
  int64_t length = 0;
  /// The bytes were left out of the parsed model (they are large); the
  /// initializer was rewritten to point at them as external data.
  bool stripped = false;
};

/// An ONNX model parsed without copying its large embedded weights.
struct ModelFile {
  onnx::ModelProto model;
  /// The memory-mapped .onnx file; weight bytes are only touched on demand.
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  /// For each graph initializer (in order), where its raw_data lies in the
  /// file, if it has embedded raw_data.
  std::vector<std::optional<EmbeddedBytes>> embedded;
};

/// Raw data larger than this stays in the file; smaller initializers (shape
/// vectors, scalars) are parsed so shape inference can read their values.
constexpr int64_t kStripThreshold = 1024;

/// Reads the model at `path`. The file is memory-mapped and its protobuf
/// wire format walked once: every initializer's raw_data is located by byte
/// offset, and those above kStripThreshold are skipped without being read, then
/// described to ONNX as external data in this same file, so a model with
/// gigabytes of embedded weights parses in the memory of its graph. Returns
/// std::nullopt and sets `error` (one line) on failure.
std::optional<ModelFile> readModel(const std::string &path, std::string &error);

} // namespace fsdp::onnx_import

#endif // FSDP_LIB_IMPORT_ONNX_MODELREADER_H
