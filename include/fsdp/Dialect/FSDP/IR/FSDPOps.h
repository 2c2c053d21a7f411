//===- FSDPOps.h - fsdp dialect operations ----------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPOPS_H
#define FSDP_DIALECT_FSDP_IR_FSDPOPS_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Support/Types.h"
#include "fsdp/layout/FlatLayout.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

namespace mlir::fsdp {

/// Resolves `unit`'s member parameters, in flat order. Fails, with an error on
/// `unit`, if one is missing or is not an `fsdp.param`.
FailureOr<SmallVector<ParamOp>> resolveParams(FlatParamOp unit,
                                              SymbolTableCollection &symbols);

/// The number of ranks in the group formed by `axes` of the mesh `meshRef`
/// (1 without a mesh). Fails, with an error on `op`, if the mesh is missing
/// or an axis is invalid, repeated or dynamic.
FailureOr<int64_t> resolveGroupSize(Operation *op, FlatSymbolRefAttr meshRef,
                                    ArrayRef<int16_t> axes,
                                    SymbolTableCollection &symbols);

/// The number of ranks `unit` is sharded over: the product of the sizes of
/// the mesh axes it names, or 1 without a mesh. Fails, with an error on
/// `unit`, if the mesh is missing or an axis is invalid or dynamic.
FailureOr<int64_t> resolveWorldSize(FlatParamOp unit,
                                    SymbolTableCollection &symbols);

/// A collective's result type, or the type its future will hold.
Type collectiveValueType(Value result);

/// Set by fsdp-plan-memory on an optimizer kernel (`adamw`, `sgd`) whose
/// results are written over state it reads: per result, the index of the
/// input whose buffer holds it, or -1 (an activation as usual).
/// mlir-to-plan binds those results to the inputs' buffers and writes no
/// StateUpdate for them.
inline constexpr llvm::StringLiteral kInPlaceAttrName = "fsdp.in_place";

/// Computes `unit`'s layout with the project's layout library.
FailureOr<::fsdp::layout::FlatLayout>
computeLayout(FlatParamOp unit, SymbolTableCollection &symbols);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDPOPS_H
