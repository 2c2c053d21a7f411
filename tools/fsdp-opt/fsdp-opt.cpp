//===- fsdp-opt.cpp - The FSDP-MLIR optimizer driver ----------------------===//
//
// mlir-opt with the fsdp and onnx dialects, the upstream dialects they work
// with and the fsdp passes. An input ending in `.onnx` is imported first
// (ONNX checker, shape inference, parameters as symbols) and the pass
// pipeline then runs on the imported module.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOpTable.h"
#include "fsdp/Import/ImportONNX.h"
#include "fsdp/InitAll.h"
#include "fsdp/Support/CommandLine.h"
#include "fsdp/Support/Files.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>
#include <vector>

using namespace mlir;

namespace {

llvm::cl::OptionCategory onnxCategory("ONNX import options (for .onnx inputs)");
llvm::cl::OptionCategory outputCategory("Output options");

llvm::cl::opt<int64_t> batchSize(
    "batch-size",
    llvm::cl::desc("Size of dimension 0 of every graph input whose dimension "
                   "0 is dynamic (the per-rank micro-batch)"),
    llvm::cl::init(0), llvm::cl::cat(onnxCategory));

llvm::cl::list<std::string>
    dims("dim",
         llvm::cl::desc("Size of a dynamic dimension by its ONNX name: "
                        "--dim=seq=128 (repeatable)"),
         llvm::cl::cat(onnxCategory));

llvm::cl::opt<std::string> layoutJson(
    "fsdp-layout-json",
    llvm::cl::desc("After the pass pipeline, write every flat parameter's "
                   "layout as JSON to this file (fsdp-print-layout "
                   "format=json)"),
    llvm::cl::value_desc("file"), llvm::cl::init(""),
    llvm::cl::cat(outputCategory));

llvm::cl::opt<bool>
    noFold("onnx-no-fold",
           llvm::cl::desc("Keep shape computations unfolded (debugging)"),
           llvm::cl::init(false), llvm::cl::cat(onnxCategory));

llvm::cl::opt<bool> printOpTable(
    "print-op-table",
    llvm::cl::desc("Print the table of ONNX operators (docs/ops.md): which "
                   "import, which kernel runs each, which have a gradient; "
                   "fails if the table disagrees with the compiler"),
    llvm::cl::init(false), llvm::cl::cat(onnxCategory));

/// --print-op-table: the table, once checked against the compiler's
/// lowerings and gradient rules, to `output`.
LogicalResult printCheckedOpTable(StringRef output) {
  SmallVector<std::string> problems = mlir::fsdp::checkOpTable();
  for (const std::string &problem : problems)
    llvm::errs() << "error: ONNXOpTable.def: " << problem << "\n";
  if (!problems.empty())
    return failure();
  std::string error;
  if (!mlir::fsdp::writeFileAtomically(
          output,
          [](llvm::raw_ostream &os) {
            mlir::onnxir::printOpTableMarkdown(os);
            return true;
          },
          error)) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  return success();
}

/// The command line's configuration, with the layout report appended to the
/// pass pipeline when --fsdp-layout-json asks for it.
MlirOptMainConfig configFromCommandLine() {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (layoutJson.empty())
    return config;
  MlirOptMainConfig base = config;
  config.setPassPipelineSetupFn([base](PassManager &pm) -> LogicalResult {
    if (failed(base.setupPassPipeline(pm)))
      return failure();
    mlir::fsdp::PrintLayoutOptions options;
    options.format = "json";
    options.file = layoutJson;
    pm.addPass(mlir::fsdp::createPrintLayout(options));
    return success();
  });
  return config;
}

/// Runs the pass pipeline on the .mlir file `input`, as mlir-opt does.
LogicalResult runOnMLIR(StringRef input, StringRef output,
                        DialectRegistry &registry) {
  std::string error = mlir::fsdp::checkRegularFile(input);
  if (!error.empty()) {
    llvm::errs() << error << "\n";
    return failure();
  }
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << error << "\n";
    return failure();
  }
  // The output is written atomically: `-o` may name the input (the buffer
  // keeps the old file's contents) or a file a failed run must not remove.
  if (!mlir::fsdp::writeFileAtomically(
          output,
          [&](llvm::raw_ostream &os) {
            return succeeded(MlirOptMain(os, std::move(file), registry,
                                         configFromCommandLine()));
          },
          error)) {
    if (!error.empty())
      llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  return success();
}

/// Imports `input` and runs the command line's pass pipeline on it.
LogicalResult runOnONNX(StringRef input, StringRef output,
                        DialectRegistry &registry) {
  // MLIR text written over the model would lose it (and its external data
  // would no longer be referenced by anything).
  if (mlir::fsdp::sameFile(input, output)) {
    llvm::errs() << "error: the output '" << output
                 << "' is the input model; write the MLIR to another file\n";
    return failure();
  }
  MlirOptMainConfig config = configFromCommandLine();
  MLIRContext context(registry);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  // Warnings and notes too, in the format MLIR uses for errors.
  ScopedDiagnosticHandler printer(&context, [](Diagnostic &diag) {
    auto print = [](Diagnostic &d) {
      const char *severity =
          d.getSeverity() == DiagnosticSeverity::Error     ? "error"
          : d.getSeverity() == DiagnosticSeverity::Warning ? "warning"
          : d.getSeverity() == DiagnosticSeverity::Note    ? "note"
                                                           : "remark";
      llvm::errs() << d.getLocation() << ": " << severity << ": " << d << "\n";
    };
    print(diag);
    // The IR an import error points at is the importer's own; the ONNX
    // node's name in the location says more.
    for (Diagnostic &note : diag.getNotes())
      if (!StringRef(note.str()).starts_with("see current operation"))
        print(note);
    return success();
  });

  ::fsdp::ONNXImportOptions options;
  if (batchSize.getNumOccurrences()) {
    if (batchSize <= 0) {
      llvm::errs() << "error: --batch-size must be positive, got " << batchSize
                   << "\n";
      return failure();
    }
    options.batchSize = batchSize;
  }
  for (StringRef dim : dims) {
    auto [name, value] = dim.split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size <= 0) {
      llvm::errs()
          << "error: --dim expects NAME=SIZE with a positive size, got '" << dim
          << "'\n";
      return failure();
    }
    options.dims[name] = size;
  }
  options.fold = !noFold;

  OwningOpRef<ModuleOp> module = ::fsdp::importONNX(input, context, options);
  if (!module)
    return failure();

  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return failure();

  std::string error;
  if (!mlir::fsdp::writeFileAtomically(
          output,
          [&](llvm::raw_ostream &os) {
            module->print(os);
            os << "\n";
            return true;
          },
          error)) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  return success();
}

} // namespace

/// `--fsdp-timeline=PATH` is short for `--fsdp-timeline=file=PATH`: a
/// value without '=' is the trace's path, not a pass option.
std::vector<std::string> expandShorthands(int argc, char **argv) {
  std::vector<std::string> args(argv, argv + argc);
  const std::string flag = "--fsdp-timeline=";
  for (std::string &arg : args)
    if (StringRef(arg).starts_with(flag) &&
        arg.find('=', flag.size()) == std::string::npos)
      arg = flag + "file=" + arg.substr(flag.size());
  return args;
}

int main(int argc, char **argv) {
  mlir::fsdp::hideLibraryOptions({&onnxCategory, &outputCategory});
  std::vector<std::string> args = expandShorthands(argc, argv);
  std::vector<char *> pointers;
  for (std::string &arg : args)
    pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  argv = pointers.data();
  DialectRegistry registry;
  ::fsdp::registerAllDialects(registry);
  ::fsdp::registerAllPasses();
  auto [input, output] = registerAndParseCLIOptions(
      argc, argv,
      "FSDP-MLIR optimizer: sharding passes over the fsdp dialect.\n"
      "Reads .mlir, or imports .onnx (see the ONNX import options;\n"
      "--print-op-table lists the operators that import and run)\n",
      registry);
  if (printOpTable)
    return asMainReturnCode(printCheckedOpTable(output));
  if (StringRef(input).ends_with(".onnx"))
    return asMainReturnCode(runOnONNX(input, output, registry));
  return asMainReturnCode(runOnMLIR(input, output, registry));
}
