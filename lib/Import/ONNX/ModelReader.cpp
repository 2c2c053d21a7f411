//===- ModelReader.cpp - Read an ONNX model without its weights -----------===//
//
/// The protobuf library parses a message as a whole, copying every byte
/// field, so parsing a .onnx with embedded weights costs the weights' size in
/// memory and gives no file offsets. This reader walks the wire format with
/// protobuf's CodedInputStream instead, copying every field verbatim except
/// the large raw_data of graph initializers, whose offsets it records; the
/// resulting skeleton is then parsed normally.
//
//===----------------------------------------------------------------------===//

#include "ModelReader.h"

#include "fsdp/Support/Files.h"

#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <limits>

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

namespace fsdp::onnx_import {
namespace {

// Field numbers from onnx.proto.
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kTensorRawData = 9;

class Walker {
public:
  Walker(const uint8_t *file, std::vector<std::optional<EmbeddedBytes>> &found)
      : file(file), found(found) {}

  /// Copies the ModelProto in [begin, begin + size) into `out`.
  bool model(const uint8_t *begin, int size, std::string &out) {
    return message(begin, size, out, [&](int field, const uint8_t *data,
                                          int length, std::string &sub) {
      if (field != kModelGraph)
        return false;
      return graph(data, length, sub);
    });
  }

  /// Offset of the first malformed byte, for the error message.
  int64_t failedAt = 0;

private:
  /// Walks one message, calling `nested(field, data, length, out)` for each
  /// length-delimited field; when it returns true it has produced the field's
  /// replacement payload in `out`, else the field is copied verbatim.
  template <typename Nested>
  bool message(const uint8_t *begin, int size, std::string &out,
               Nested &&nested) {
    CodedInputStream input(begin, size);
    while (true) {
      int start = input.CurrentPosition();
      uint32_t tag = input.ReadTag();
      if (tag == 0)
        return input.CurrentPosition() == size || fail(begin, start);
      int field = WireFormatLite::GetTagFieldNumber(tag);
      if (WireFormatLite::GetTagWireType(tag) ==
          WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        uint32_t length;
        if (!input.ReadVarint32(&length))
          return fail(begin, input.CurrentPosition());
        int payload = input.CurrentPosition();
        if (length > static_cast<uint32_t>(size - payload))
          return fail(begin, payload);
        std::string replacement;
        bool replaced = nested(field, begin + payload,
                               static_cast<int>(length), replacement);
        if (failedAt)
          return false;
        if (replaced) {
          if (!replacement.empty() || field != kTensorRawData) {
            appendTag(out, tag);
            appendVarint(out, replacement.size());
            out += replacement;
          }
        } else {
          out.append(reinterpret_cast<const char *>(begin + start),
                     payload + length - start);
        }
        input.Skip(static_cast<int>(length));
        continue;
      }
      if (!WireFormatLite::SkipField(&input, tag))
        return fail(begin, start);
      out.append(reinterpret_cast<const char *>(begin + start),
                 input.CurrentPosition() - start);
    }
  }

  bool graph(const uint8_t *begin, int size, std::string &out) {
    return message(begin, size, out, [&](int field, const uint8_t *data,
                                         int length, std::string &sub) {
      if (field != kGraphInitializer)
        return false;
      found.emplace_back();
      return tensor(data, length, sub, found.back());
    });
  }

  bool tensor(const uint8_t *begin, int size, std::string &out,
              std::optional<EmbeddedBytes> &bytes) {
    return message(begin, size, out, [&](int field, const uint8_t *data,
                                         int length, std::string &sub) {
      if (field != kTensorRawData)
        return false;
      bytes = EmbeddedBytes{data - file, length, length > kStripThreshold};
      if (!bytes->stripped)
        sub.assign(reinterpret_cast<const char *>(data), length);
      return true;
    });
  }

  bool fail(const uint8_t *begin, int position) {
    if (!failedAt)
      failedAt = (begin - file) + position;
    return false;
  }

  static void appendVarint(std::string &out, uint64_t value) {
    while (value >= 0x80) {
      out.push_back(static_cast<char>(value | 0x80));
      value >>= 7;
    }
    out.push_back(static_cast<char>(value));
  }
  static void appendTag(std::string &out, uint32_t tag) {
    appendVarint(out, tag);
  }

  const uint8_t *file;
  std::vector<std::optional<EmbeddedBytes>> &found;
};

} // namespace

std::optional<ModelFile> readModel(const std::string &path, std::string &error) {
  if (std::string why = mlir::fsdp::checkRegularFile(path); !why.empty()) {
    error = why;
    return std::nullopt;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot open '" + path + "': " + buffer.getError().message();
    return std::nullopt;
  }
  ModelFile result;
  result.buffer = std::move(*buffer);
  const auto *data =
      reinterpret_cast<const uint8_t *>(result.buffer->getBufferStart());
  size_t size = result.buffer->getBufferSize();
  if (size == 0) {
    error = "'" + path + "' is empty, not an ONNX model";
    return std::nullopt;
  }
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    error = "'" + path +
            "' is larger than protobuf's 2 GiB limit; save the weights as "
            "external data (onnx.save_model(..., save_as_external_data=True))";
    return std::nullopt;
  }

  std::string skeleton;
  Walker walker(data, result.embedded);
  if (!walker.model(data, static_cast<int>(size), skeleton)) {
    error = "'" + path + "' is truncated or not an ONNX protobuf (malformed " +
            "at byte " + std::to_string(walker.failedAt) + ")";
    return std::nullopt;
  }
  if (!result.model.ParseFromString(skeleton)) {
    error = "'" + path + "' is not a valid ONNX model protobuf";
    return std::nullopt;
  }
  if (!result.model.has_graph()) {
    error = "'" + path + "' holds no graph; is it an ONNX model?";
    return std::nullopt;
  }
  if (result.embedded.size() !=
      static_cast<size_t>(result.model.graph().initializer_size())) {
    error = "'" + path + "': initializers were found twice or not at all";
    return std::nullopt;
  }

  // Stripped tensors point at their bytes in this file, as ONNX external
  // data does, so the checker and shape inference accept them.
  std::string self = llvm::sys::path::filename(path).str();
  for (int i = 0; i < result.model.graph().initializer_size(); ++i) {
    const std::optional<EmbeddedBytes> &bytes = result.embedded[i];
    if (!bytes || !bytes->stripped)
      continue;
    onnx::TensorProto *tensor =
        result.model.mutable_graph()->mutable_initializer(i);
    tensor->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      onnx::StringStringEntryProto *entry = tensor->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", self);
    add("offset", std::to_string(bytes->offset));
    add("length", std::to_string(bytes->length));
  }
  return result;
}

} // namespace fsdp::onnx_import
