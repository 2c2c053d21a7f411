//===- Files.h - Reading and writing a user's files -------------*- C++ -*-===//
//
// A device (/dev/zero) is read until memory runs out and a FIFO blocks the
// open: the tools read a user's path only when it names a regular file.
// They write an output file atomically, so that a failed compile or a kill
// never leaves half a file or removes the file that was there.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_FILES_H
#define FSDP_SUPPORT_FILES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

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

/// Makes `path` through `write(file)` (false: it failed and said why),
/// which writes `file`: a temporary file beside `path`, renamed over it
/// only once `write` succeeded. mlir-opt's and mlir-translate's output
/// files truncated `path` first and removed it on failure, so a failed
/// compile deleted the file that was there, and the input itself when it
/// was also the output. "-" (standard output) and an existing path that is
/// not a regular file (/dev/null, a FIFO) are written in place; a symlink's
/// target is replaced, not the link. Returns false on failure, with `error`
/// set when the file was the cause.
inline bool
replaceFileAtomically(llvm::StringRef path,
                      llvm::function_ref<bool(llvm::StringRef file)> write,
                      std::string &error) {
  namespace fs = llvm::sys::fs;
  if (path == "-")
    return write(path);
  std::string target = path.str();
  fs::file_status status;
  if (!fs::status(path, status)) {
    if (fs::is_directory(status)) {
      error = ("cannot write '" + path + "': it is a directory").str();
      return false;
    }
    if (!fs::is_regular_file(status))
      return write(path);
    llvm::SmallString<256> real;
    if (!fs::real_path(path, real))
      target = real.str().str();
  }
  // TempFile also removes the temporary when a signal ends the process.
  llvm::Expected<fs::TempFile> temp = fs::TempFile::create(
      target + ".tmp-%%%%%%", fs::all_read | fs::all_write);
  if (!temp) {
    error = ("cannot write '" + path + "': " + llvm::toString(temp.takeError()))
                .str();
    return false;
  }
  if (!write(temp->TmpName)) {
    llvm::consumeError(temp->discard());
    return false;
  }
  if (llvm::Error e = temp->keep(target)) {
    error =
        ("cannot write '" + path + "': " + llvm::toString(std::move(e))).str();
    return false;
  }
  return true;
}

/// replaceFileAtomically with a stream: `write(os)` writes the file.
inline bool
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<bool(llvm::raw_ostream &)> write,
                    std::string &error) {
  return replaceFileAtomically(
      path,
      [&](llvm::StringRef file) {
        std::error_code code;
        llvm::raw_fd_ostream os(file, code);
        if (code) {
          error = ("cannot open '" + file + "': " + code.message()).str();
          return false;
        }
        bool ok = write(os);
        os.flush();
        // A write error left unchecked aborts the process in the stream's
        // destructor (a full disk).
        if (os.has_error()) {
          error =
              ("cannot write '" + path + "': " + os.error().message()).str();
          os.clear_error();
          return false;
        }
        return ok;
      },
      error);
}

/// Whether `a` and `b` name the same existing file (a tool that would
/// replace its own input, in another format, refuses).
inline bool sameFile(llvm::StringRef a, llvm::StringRef b) {
  bool result = false;
  return a != "-" && b != "-" && !llvm::sys::fs::equivalent(a, b, result) &&
         result;
}

/// Writes a pass's report `text` (a layout, a timeline) to `file`
/// atomically, refusing the model the module was imported from (its
/// `fsdp.source`): `--fsdp-layout-json=model.onnx` replaced the model with
/// JSON. Errors are emitted on `op`.
inline LogicalResult writeReport(Operation *op, llvm::StringRef file,
                                 llvm::StringRef text) {
  Operation *top = op;
  while (top->getParentOp())
    top = top->getParentOp();
  if (auto source = top->getAttrOfType<StringAttr>("fsdp.source"))
    if (sameFile(file, source.getValue()))
      return op->emitError()
             << "cannot write '" << file << "': it is the model '"
             << source.getValue() << "' this module was imported from";
  std::string error;
  if (!writeFileAtomically(
          file,
          [&](llvm::raw_ostream &os) {
            os << text;
            return true;
          },
          error))
    return op->emitError() << error;
  return success();
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_FILES_H
