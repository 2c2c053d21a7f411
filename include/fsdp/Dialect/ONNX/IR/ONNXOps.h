//===- ONNXOps.h - The onnx dialect -----------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_ONNX_IR_ONNXOPS_H
#define FSDP_DIALECT_ONNX_IR_ONNXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "fsdp/Dialect/ONNX/IR/ONNXOpsDialect.h.inc"

namespace mlir::onnxir {
/// `values`, or `count` times `fill` when the attribute is absent: how the
/// ops' accessors apply ONNX's defaults.
inline llvm::SmallVector<int64_t>
valuesOrDefault(std::optional<llvm::ArrayRef<int64_t>> values, size_t count,
                int64_t fill) {
  return values ? llvm::SmallVector<int64_t>(*values)
                : llvm::SmallVector<int64_t>(count, fill);
}
} // namespace mlir::onnxir

#define GET_OP_CLASSES
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h.inc"

namespace mlir::onnxir {
/// The pads of the convolution a ConvTranspose transposes (begins, then
/// ends): the begins from `pads`, or from `output_shape` as ONNX derives
/// them; the ends such that that convolution of Y's size gives X's size
/// (rows past the last window, output_padding's, are never read). Fails,
/// saying why, when Y's size cannot come from X's (auto_pad, a negative
/// begin, more output padding than the stride).
llvm::FailureOr<llvm::SmallVector<int64_t>>
convolutionPads(ConvTransposeOp op, std::string &why);

/// The explicit pads (begins, then ends) of a window of `kernel` over X of
/// shape `input` (N, C, spatial...): `pads` under auto_pad NOTSET; none
/// under VALID; under SAME_UPPER and SAME_LOWER so that each spatial output
/// is ceil(input / stride), the odd pad at the end (UPPER) or at the
/// beginning (LOWER). Fails, saying why, on another auto_pad or when
/// strides, pads or dilations do not match the kernel's rank.
llvm::FailureOr<llvm::SmallVector<int64_t>>
windowPads(llvm::StringRef autoPad, llvm::ArrayRef<int64_t> pads,
           llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> dilations,
           llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> kernel,
           std::string &why);

/// An Einsum equation split into one letter string per input and the
/// output's. Spaces are ignored (torch passes a user's string, as MaxViT's
/// "B G H I D, B G H J D -> B G H I J"); without "->" the output is the
/// letters used once, in ASCII order. With `ranks` (one per input) an
/// ellipsis becomes letters the equation does not use, as many as its
/// input's dims the term's letters leave, aligned from the right across the
/// inputs as NumPy broadcasts them; the output's ellipsis (an implicit
/// output's, in front) has the most. Without `ranks` an ellipsis fails;
/// what the letters may be is the caller's to check.
struct EinsumTerms {
  llvm::SmallVector<std::string> inputs;
  std::string output;
};
llvm::FailureOr<EinsumTerms> einsumTerms(llvm::StringRef equation,
                                         llvm::ArrayRef<int64_t> ranks = {});

/// ONNX NonZero of a constant: the int64 [rank, n] coordinates of its n
/// nonzero elements, in row-major order; null for a scalar, a tensor over
/// the folders' size limit or a non-numeric element type.
DenseElementsAttr nonZeroIndices(DenseElementsAttr input);

/// What of an LSTM, GRU or RNN node the runtime's recurrent kernels do not
/// run, naming the attribute or input ("" when they run all of it): other
/// activations than the defaults, activation_alpha/beta, clip,
/// input_forget, peepholes (P) and sequence_lens that are not a constant
/// equal to the sequence length everywhere.
std::string recurrentUnsupported(Operation *op);

/// The types of an LSTM's, GRU's or RNN's results (Y, Y_h and LSTM's Y_c)
/// as the runtime's kernels write them, whether or not the op uses them.
llvm::SmallVector<Type> recurrentResultTypes(Operation *op);

/// The row of each index tuple of `indices` (static shape, tuples along its
/// last axis, of length sizes.size()) in a tensor flattened over axes of
/// `sizes`: the sum of each index, wrapped into [0, size) as ONNX's
/// GatherND and ScatterND read negative ones, times its axis's row-major
/// stride. Built at `b`'s insertion point, int64 of `indices`' shape less
/// its last axis: a constant when `indices` is one (wrapped by `%`
/// unchecked: both callers check constant indices first, GatherND at
/// import and ScatterND's forward kernel), else integer Cast,
/// Gather, Mul and Add: each index column is wrapped by a Gather from the
/// constant 0..size-1, whose kernel stops the run on an index out of range,
/// naming it and the axis's size (an axis over 2^20 long is wrapped by Mod,
/// unchecked; GatherND's expansion and ScatterND's gradient share it).
Value buildTupleRows(OpBuilder &b, Location loc, Value indices,
                     llvm::ArrayRef<int64_t> sizes);

/// Whether `op` draws from the session's random stream (Dropout,
/// Bernoulli, RandomNormal(Like), RandomUniform(Like)): each carries an
/// `fsdp.random_op` id, a micro-batch slot, and its clones draw the same
/// numbers.
bool drawsRandom(Operation *op);
} // namespace mlir::onnxir

#endif // FSDP_DIALECT_ONNX_IR_ONNXOPS_H
