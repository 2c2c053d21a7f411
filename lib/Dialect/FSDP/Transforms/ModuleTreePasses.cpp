//===- ModuleTree.cpp - Record and print the module hierarchy -------------===//
//
/// The passes around the module-tree analysis (Analysis/ModuleTree.cpp):
/// fsdp-module-tree records the recovered tree on the module so later passes
/// and the plan read one answer; fsdp-print-module-tree shows it.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/ModuleTree.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_MODULETREE
#define GEN_PASS_DEF_PRINTMODULETREE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct ModuleTreePass : mlir::fsdp::impl::ModuleTreeBase<ModuleTreePass> {
  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    FailureOr<SmallVector<ModuleAttr>> tree = recoverModuleTree(getOperation());
    if (failed(tree))
      return signalPassFailure();
    SmallVector<Attribute> entries(tree->begin(), tree->end());
    getOperation()->setAttr(kModulesAttrName,
                            ArrayAttr::get(&getContext(), entries));
  }
};

struct PrintModuleTreePass
    : mlir::fsdp::impl::PrintModuleTreeBase<PrintModuleTreePass> {
  using PrintModuleTreeBase::PrintModuleTreeBase;

  void runOnOperation() override {
    PassDiagnosticScope diagnostics(&getContext(), getArgument());
    if (format != "text" && format != "json") {
      emitError(getOperation().getLoc())
          << "format must be 'text' or 'json', got '" << format << "'";
      return signalPassFailure();
    }
    FailureOr<SmallVector<ModuleAttr>> tree = getModuleTree(getOperation());
    if (failed(tree))
      return signalPassFailure();
    if (format == "json")
      printJson(*tree);
    else
      printText(*tree);
    markAllAnalysesPreserved();
  }

  void printJson(ArrayRef<ModuleAttr> tree) {
    llvm::json::Array modules;
    for (ModuleAttr module : tree) {
      auto list = [](ArrayAttr array) {
        llvm::json::Array values;
        for (StringRef value : stringsOf(array))
          values.push_back(value);
        return values;
      };
      modules.push_back(
          llvm::json::Object{{"fqn", module.getFqn()},
                             {"class", module.getClassName()},
                             {"params", list(module.getParams())},
                             {"buffers", list(module.getBuffers())},
                             {"children", list(module.getChildren())}});
    }
    llvm::outs() << llvm::formatv("{0:2}",
                                  llvm::json::Value(std::move(modules)))
                 << "\n";
  }

  void printText(ArrayRef<ModuleAttr> tree) {
    raw_ostream &os = llvm::outs();
    for (ModuleAttr module : tree) {
      StringRef fqn = module.getFqn();
      size_t depth = fqn.empty() ? 0 : fqn.count('.') + 1;
      os.indent(2 * depth) << (fqn.empty() ? "(root)" : fqn);
      if (!module.getClassName().empty())
        os << " " << module.getClassName();
      SmallVector<StringRef> state = stringsOf(module.getParams());
      llvm::append_range(state, stringsOf(module.getBuffers()));
      if (!state.empty())
        os << ": " << llvm::join(state, ", ");
      os << "\n";
    }
  }
};

} // namespace
