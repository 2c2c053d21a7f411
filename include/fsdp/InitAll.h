//===- InitAll.h - Register everything the fsdp tools use -------*- C++ -*-===//

#ifndef FSDP_INITALL_H
#define FSDP_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fsdp {

/// Adds the fsdp dialect and the upstream dialects the project uses to
/// `registry`. Every tool and binding calls this one function.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers the fsdp passes and the upstream passes fsdp pipelines use.
void registerAllPasses();

} // namespace fsdp

#endif // FSDP_INITALL_H
