//===- onnx_import_fuzzer.cpp - libFuzzer target: the ONNX importer -------===//
//
// Feeds arbitrary bytes to fsdp::importONNX as a .onnx file (the wire-format
// walk, ONNX's checker and shape inference, the import into the onnx/fsdp
// dialects and the shape folding) and verifies whatever module comes back.
// Whatever the bytes, the importer must report a diagnostic and return
// null, or return a module that verifies; never crash, hang or read out of
// bounds (the project's sources are built with AddressSanitizer and
// UndefinedBehaviorSanitizer; ONNX and MLIR themselves are not
// instrumented).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"
#include "fsdp/Import/ImportONNX.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

/// The file each input is written to: the importer reads models by path
/// (memory-mapped), as fsdp-opt does. One per process so -jobs can share a
/// directory.
const std::string &scratchPath() {
  static const std::string path = [] {
    const char *dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/fsdp-import-fuzz-" +
           std::to_string(getpid()) + ".onnx";
  }();
  static const bool removeAtExit =
      std::atexit([] { std::remove(path.c_str()); }) == 0;
  (void)removeAtExit;
  return path;
}

bool writeFile(const std::string &path, const uint8_t *data, size_t size) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = scratchPath();
  if (!writeFile(path, data, size)) {
    std::perror(path.c_str());
    std::abort();
  }
  mlir::DialectRegistry registry;
  registry.insert<mlir::fsdp::FSDPDialect, mlir::onnxir::ONNXDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::tensor::TensorDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  // Errors are the expected outcome for most inputs; keep the output quiet.
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  fsdp::ONNXImportOptions options;
  options.batchSize = 2;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      fsdp::importONNX(path, context, options);
  if (module && mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr,
                 "the importer returned a module that does not verify\n");
    std::abort();
  }
  return 0;
}
