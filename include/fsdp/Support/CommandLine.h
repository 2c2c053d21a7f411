//===- CommandLine.h - The tools' --help ------------------------*- C++ -*-===//
//
// Debian's LLVM is one shared library, and loading it registers every
// backend's command-line options (AMDGPU, X86, WebAssembly, Polly: some
// 450 of them) before a tool's main runs. None means anything to the
// fsdp tools, and they buried the tools' own options in --help.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_SUPPORT_COMMANDLINE_H
#define FSDP_SUPPORT_COMMANDLINE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::fsdp {

/// Hides from --help every option registered so far (LLVM's own, from its
/// libraries' static initializers) except `keep` (the tool's) and
/// --help, --help-list, --version and --color. Call it first in main:
/// MLIR's options and the passes, registered after it, stay listed.
/// --help-hidden still lists everything.
inline void hideLibraryOptions(llvm::ArrayRef<const llvm::cl::Option *> keep) {
  static constexpr llvm::StringLiteral listed[] = {"help", "help-list",
                                                   "version", "color"};
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    if (llvm::is_contained(keep, option) ||
        llvm::is_contained(listed, entry.first()))
      continue;
    if (option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_COMMANDLINE_H
