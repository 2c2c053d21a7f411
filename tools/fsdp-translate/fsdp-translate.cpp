//===- fsdp-translate.cpp - Translations out of the fsdp dialects ---------===//
//
/// `fsdp-translate --mlir-to-plan model.mlir -o model.plan` writes the plan a
/// runtime executes, from a module lowered by fsdp-opt's
/// `--fsdp-lower-to-runtime --fsdp-plan-memory`.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAll.h"
#include "fsdp/Support/CommandLine.h"
#include "fsdp/Support/Files.h"
#include "fsdp/Target/Plan/PlanTranslation.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <utility>
#include <vector>

int main(int argc, char **argv) {
  mlir::fsdp::hideLibraryOptions({});
  // The input is the one positional argument (a value of -o follows it as
  // the next word); mlirTranslateMain would read a device or FIFO forever.
  std::vector<std::string> args(argv, argv + argc);
  std::string input, output;
  // Where -o's value is in `args`, and whether that word is `-o=VALUE`.
  std::vector<std::pair<size_t, bool>> outputArgs;
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == "-o" || arg == "--o") {
      if (++i < args.size()) {
        output = args[i];
        outputArgs.push_back({i, false});
      }
      continue;
    }
    if (arg.consume_front("-o=") || arg.consume_front("--o=")) {
      output = arg.str();
      outputArgs.push_back({i, true});
      continue;
    }
    if (arg.starts_with("-"))
      continue;
    input = arg.str();
    if (std::string why = mlir::fsdp::checkRegularFile(arg); !why.empty()) {
      llvm::errs() << "fsdp-translate: " << why << "\n";
      return 1;
    }
  }
  // A plan written over the module it comes from would lose it.
  if (!input.empty() && mlir::fsdp::sameFile(input, output)) {
    llvm::errs() << "fsdp-translate: the output '" << output
                 << "' is the input; write the plan to another file\n";
    return 1;
  }
  fsdp::registerToPlanTranslation();
  auto translate = [&](llvm::StringRef into) {
    std::vector<std::string> copy = args;
    for (auto [i, joined] : outputArgs)
      copy[i] = (joined ? "-o=" : "") + into.str();
    std::vector<char *> pointers;
    for (std::string &arg : copy)
      pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    return mlir::succeeded(
        mlir::mlirTranslateMain(static_cast<int>(copy.size()), pointers.data(),
                                "FSDP-MLIR translation tool"));
  };
  if (output.empty() || output == "-")
    return translate(output.empty() ? "-" : output) ? 0 : 1;
  // mlirTranslateMain truncates -o's file first and removes it on failure
  // (the input too, when -o named it): it writes a temporary file instead,
  // which replaces the output only when the translation succeeded.
  std::string error;
  if (mlir::fsdp::replaceFileAtomically(output, translate, error))
    return 0;
  if (!error.empty())
    llvm::errs() << "fsdp-translate: " << error << "\n";
  return 1;
}
