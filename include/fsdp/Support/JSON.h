//===- JSON.h - Bounds on JSON read from users' files -----------*- C++ -*-===//
//
// llvm::json::parse recurses once per nesting level: 40,000 '[' in a model's
// metadata overflow the stack. Every JSON text the compiler reads from a
// user's file (the frontend's metadata, a policy file) is checked here
// first, by a scan that does not recurse.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_JSON_H
#define FSDP_SUPPORT_JSON_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace mlir::fsdp {

/// The deepest nesting of arrays and objects read (the frontend writes 3).
constexpr unsigned kMaxJSONDepth = 256;
/// The most bytes of one JSON text read.
constexpr size_t kMaxJSONBytes = size_t(64) << 20;

/// Why `text` is too large or nested too deeply to parse ("is N bytes, ...",
/// "nests deeper than ..."), or "" when llvm::json::parse may read it.
/// Brackets inside strings do not count.
inline std::string checkJSONBounds(llvm::StringRef text) {
  if (text.size() > kMaxJSONBytes)
    return ("is " + llvm::Twine(text.size()) +
            " bytes, more than the limit of " + llvm::Twine(kMaxJSONBytes))
        .str();
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJSONDepth)
        return ("nests deeper than the limit of " + llvm::Twine(kMaxJSONDepth) +
                " levels (at byte " + llvm::Twine(i) + ")")
            .str();
    } else if ((c == ']' || c == '}') && depth) {
      --depth;
    }
  }
  return "";
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_JSON_H
