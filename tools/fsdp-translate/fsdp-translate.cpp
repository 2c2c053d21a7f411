//===- fsdp-translate.cpp - Translations out of the fsdp dialects ---------===//
//
/// `fsdp-translate --mlir-to-plan model.mlir -o model.plan` writes the plan a
/// runtime executes, from a module lowered by fsdp-opt's
/// `--fsdp-lower-to-runtime --fsdp-plan-memory`.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAll.h"
#include "fsdp/Support/Files.h"
#include "fsdp/Target/Plan/PlanTranslation.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  // The input is the one positional argument (a value of -o follows it as
  // the next word); mlirTranslateMain would read a device or FIFO forever.
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-o" || arg == "--o") {
      ++i;
      continue;
    }
    if (arg.starts_with("-"))
      continue;
    if (std::string why = mlir::fsdp::checkRegularFile(arg); !why.empty()) {
      llvm::errs() << "fsdp-translate: " << why << "\n";
      return 1;
    }
  }
  fsdp::registerToPlanTranslation();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "FSDP-MLIR translation tool"));
}
