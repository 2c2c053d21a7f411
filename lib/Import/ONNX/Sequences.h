//===- Sequences.h - ONNX sequences resolved at import ----------*- C++ -*-===//
//
// The compiler has tensors only. An ONNX sequence whose elements and
// positions are known at import (a list built from tensors, split at
// constant sizes, read at constant positions) is resolved here into the
// tensors it holds: torch's exporter writes such sequences for
// tensor_split, split into a list, and lists built in a forward.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_IMPORT_ONNX_SEQUENCES_H
#define FSDP_LIB_IMPORT_ONNX_SEQUENCES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace fsdp::onnx_import {

/// Turns `node` into a Constant node holding `value` (its inputs and
/// attributes dropped): the sequence rewrites' and the importer's folds'.
void makeConstant(onnx::NodeProto &node, onnx::TensorProto value);

/// Whether `opType` (of the default domain) makes or reads a sequence.
bool isSequenceOp(llvm::StringRef opType);

/// The node to blame for a sequence left after resolving, and why (a
/// position that is not constant, a SplitToSequence of unknown sizes; else
/// the first sequence op): null when none is left.
const onnx::NodeProto *unresolvedSequence(const onnx::GraphProto &graph,
                                          std::string &why);

/// One round of resolving `graph`'s sequences, given the values folded so
/// far (`constants`) and the inferred types (`types`):
///  - SequenceEmpty, SequenceConstruct, SequenceInsert and SequenceErase
///    (positions constant) give a sequence its list of tensors;
///  - SplitToSequence (split sizes constant or absent, the axis's size
///    static) becomes a Split (and a Squeeze per piece without keepdims)
///    and the SequenceConstruct of its pieces;
///  - SequenceAt (a constant position) becomes the Identity of its element,
///    SequenceLength the constant length, ConcatFromSequence a Concat (of
///    Unsqueezes for new_axis);
///  - a sequence no node reads any more is removed with its producers.
/// What is not known yet is left for a later round (folding may make a
/// position constant); what is never known is refused by the importer,
/// naming the node. Returns how many nodes it added when it changed the
/// graph, -1 when it changed nothing, or failure (an out-of-range
/// position, split sizes that do not add up: emitted at `locate(node)`).
mlir::FailureOr<int> resolveSequences(
    onnx::GraphProto &graph,
    const llvm::StringMap<mlir::DenseElementsAttr> &constants,
    const llvm::StringMap<onnx::TypeProto> &types,
    llvm::function_ref<mlir::Location(const onnx::NodeProto &)> locate);

} // namespace fsdp::onnx_import

#endif // FSDP_LIB_IMPORT_ONNX_SEQUENCES_H
