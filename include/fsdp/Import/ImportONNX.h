//===- ImportONNX.h - ONNX models into the fsdp/onnx dialects ---*- C++ -*-===//

#ifndef FSDP_IMPORT_IMPORTONNX_H
#define FSDP_IMPORT_IMPORTONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace fsdp {

/// How to specialise and import a model.
struct ONNXImportOptions {
  /// The size of dimension 0 of every graph input whose dimension 0 is
  /// dynamic (the per-rank micro-batch). Unset: a dynamic batch is an error.
  std::optional<int64_t> batchSize;
  /// Sizes of dynamic dimensions by their ONNX `dim_param` name.
  llvm::StringMap<int64_t> dims;
  /// Fold shape computations (Shape -> Gather -> Concat -> Reshape, ...) once
  /// shapes are static. Off only to debug the importer.
  bool fold = true;
};

/// Imports the ONNX model at `path`: runs ONNX's checker and shape inference,
/// turns parameters and buffers into `fsdp.param` / `fsdp.buffer` symbols that
/// reference their bytes (never reading them), and the graph into a
/// `func.func @forward` of `onnx` ops located at their ONNX node names.
/// Reports errors through `context`'s diagnostics and returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp> importONNX(llvm::StringRef path,
                                             mlir::MLIRContext &context,
                                             const ONNXImportOptions &options);

} // namespace fsdp

#endif // FSDP_IMPORT_IMPORTONNX_H
