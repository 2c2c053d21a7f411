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

/// What of an LSTM, GRU or RNN node the runtime's recurrent kernels do not
/// run, naming the attribute or input ("" when they run all of it): other
/// activations than the defaults, activation_alpha/beta, clip,
/// input_forget, peepholes (P) and sequence_lens that are not a constant
/// equal to the sequence length everywhere.
std::string recurrentUnsupported(Operation *op);

/// The types of an LSTM's, GRU's or RNN's results (Y, Y_h and LSTM's Y_c)
/// as the runtime's kernels write them, whether or not the op uses them.
llvm::SmallVector<Type> recurrentResultTypes(Operation *op);
} // namespace mlir::onnxir

#endif // FSDP_DIALECT_ONNX_IR_ONNXOPS_H
