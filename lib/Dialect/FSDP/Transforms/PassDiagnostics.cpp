//===- PassDiagnostics.cpp - Name the pass in its diagnostics -------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

using namespace mlir;

mlir::fsdp::PassDiagnosticScope::PassDiagnosticScope(MLIRContext *context,
                                                     StringRef passArgument)
    : ScopedDiagnosticHandler(context) {
  setHandler([prefix = passArgument.str()](Diagnostic &diag) {
    DiagnosticSeverity severity = diag.getSeverity();
    if (severity == DiagnosticSeverity::Error ||
        severity == DiagnosticSeverity::Warning) {
      // A diagnostic's text cannot be edited in place: rebuild it with the
      // prefix, notes and all.
      Diagnostic named(diag.getLocation(), severity);
      named << prefix << ": " << diag.str();
      for (Diagnostic &note : diag.getNotes())
        named.attachNote(note.getLocation()) << note.str();
      diag = std::move(named);
    }
    // Not handled: the next handler (the printer or the verifier) reports it.
    return failure();
  });
}
