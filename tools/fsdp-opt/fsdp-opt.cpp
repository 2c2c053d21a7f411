//===- fsdp-opt.cpp - The FSDP-MLIR optimizer driver ----------------------===//
//
// mlir-opt with the fsdp dialect, the upstream dialects it works with and
// the fsdp passes.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  fsdp::registerAllDialects(registry);
  fsdp::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "FSDP-MLIR optimizer: sharding passes over the fsdp dialect\n",
      registry));
}
