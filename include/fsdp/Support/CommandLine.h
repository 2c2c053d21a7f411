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
#include "llvm/Support/CommandLine.h"

namespace mlir::fsdp {

/// Hides every option registered so far (LLVM's own, from its libraries'
/// static initializers) that is in none of `keep` (the tool's categories)
/// or LLVM's generic one (--help, --version). Call it first in main:
/// MLIR's options and the passes, registered after it, stay listed. The
/// walk is LLVM's own (cl::HideUnrelatedOptions): calling members of
/// options libLLVM made, from code built with UBSan's vptr check, fails
/// it (libLLVM has no RTTI).
inline void
hideLibraryOptions(llvm::ArrayRef<const llvm::cl::OptionCategory *> keep) {
  llvm::cl::HideUnrelatedOptions(keep);
}

} // namespace mlir::fsdp

#endif // FSDP_SUPPORT_COMMANDLINE_H
