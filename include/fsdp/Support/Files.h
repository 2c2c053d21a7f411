//===- Files.h - Refusing files that are not regular ------------*- C++ -*-===//
//
// A device (/dev/zero) is read until memory runs out and a FIFO blocks the
// open: the tools read a user's path only when it names a regular file.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_FILES_H
#define FSDP_SUPPORT_FILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <string>

namespace mlir::fsdp {

/// "'<path>' is not a regular file" when `path` exists and is something else
/// (a FIFO, a device, a socket), otherwise "" (a missing file or a directory
/// is left to the reader's own message; "-" is standard input).
inline std::string checkRegularFile(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (path == "-" || llvm::sys::fs::status(path, status) ||
      llvm::sys::fs::is_regular_file(status) ||
      llvm::sys::fs::is_directory(status))
    return "";
  return ("'" + path + "' is not a regular file").str();
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_FILES_H
