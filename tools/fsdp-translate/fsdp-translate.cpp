//===- fsdp-translate.cpp - Translations out of the fsdp dialects ---------===//
//
/// `fsdp-translate --mlir-to-plan model.mlir -o model.plan` writes the plan a
/// runtime executes, from a module lowered by fsdp-opt's
/// `--fsdp-lower-to-runtime --fsdp-plan-memory`.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAll.h"
#include "fsdp/Target/Plan/PlanTranslation.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  fsdp::registerToPlanTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "FSDP-MLIR translation tool"));
}
