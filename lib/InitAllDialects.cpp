//===- InitAllDialects.cpp - Register the dialects the fsdp tools use -----===//
//
/// Apart from the passes (InitAll.cpp), so that a library that only reads IR
/// (the plan translation) links the dialects and not every pass.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAll.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

void fsdp::registerAllDialects(mlir::DialectRegistry &registry) {
  // Only the dialects the project uses: all of MLIR's would cost every tool
  // ~45 s of compile time and start-up work it never needs.
  registry.insert<mlir::fsdp::FSDPDialect, mlir::onnxir::ONNXDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::mesh::MeshDialect, mlir::tensor::TensorDialect>();
}
