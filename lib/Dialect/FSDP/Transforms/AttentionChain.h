//===- AttentionChain.h - Attention as torch exports it ---------*- C++ -*-===//
//
/// The one matcher of decomposed attention, shared by fsdp-fuse (inference
/// and the lowering) and fsdp-autodiff (training, before the reverse sweep),
/// and the small matching helpers fsdp-fuse's other patterns use too.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ATTENTIONCHAIN_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ATTENTIONCHAIN_H

#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace mlir::fsdp {
class AttentionOp;
} // namespace mlir::fsdp

namespace mlir::fsdp::detail {

/// The value of a one-element floating-point constant.
std::optional<double> scalarOf(Value value);

/// `value`'s defining op when it is an `OpTy` and `value` has no other use.
template <typename OpTy> OpTy defOnce(Value value) {
  if (!value || !value.hasOneUse())
    return nullptr;
  return value.getDefiningOp<OpTy>();
}

/// fsdp-fuse's chains that fsdp-autodiff also forms before differentiating,
/// since their fused ops have fused gradients: GELU (erf and tanh forms),
/// SiLU and RMSNorm. The fused op keeps the chain's fsdp.module and
/// fsdp.unit marks.
void addTrainableChains(RewritePatternSet &patterns);

/// MatMul(Softmax(mask(MatMul(q, kt) * s)), v): what fsdp.attention needs.
struct AttentionChain {
  Value q, kt, v;
  /// The mask operand: null for `none` (and for `causal`).
  Value mask;
  StringRef kind = "none";
  double scale = 1.0, fill = 0.0;
  /// Every op of the chain, the final MatMul first; each one's result is
  /// used only by the next (the final MatMul's by anything).
  SmallVector<Operation *> ops;
  /// fsdp.attention's layout: "bshd" once foldHeadTransposes has taken q,
  /// kt and v from before the head split's transposes.
  StringRef layout = "bhsd";
  /// With layout "bshd": the head merge's Transpose after the final MatMul,
  /// whose result the fused op gives (the MatMul's only use).
  Operation *headMerge = nullptr;
};

/// The chain ending at `root`, each intermediate used only inside it; on
/// failure, `why` says what did not match.
FailureOr<AttentionChain> matchAttention(onnxir::MatMulOp root,
                                         std::string &why);

/// Turns a `fill` chain into `causal` (dropping its mask operand) when its
/// mask is a constant, possibly computed by Not, Slice and reshapes of
/// constants, that is true exactly where j > i over [..., L, L] and its fill
/// value is -inf: torch's `masked_fill(~tril(ones(L, L)), -inf)`. Returns
/// whether it did.
bool makeCausal(AttentionChain &chain);

/// Folds the head split and merge around `chain` into its layout when q and
/// v are Transpose(perm [0, 2, 1, 3]) of [B, L or S, H, D] tensors, kt their
/// Transpose(perm [0, 2, 3, 1]) (one Transpose or two that compose to it)
/// and the final MatMul's one use is Transpose(perm [0, 2, 1, 3]): the
/// chain then reads the tensors before the transposes and gives the head
/// merge's result, layout "bshd". Returns whether it did; on failure `why`
/// says what did not match. The transposes stay where other ops read them.
bool foldHeadTransposes(AttentionChain &chain, std::string &why);

/// Builds the fused op for `chain` at `root`'s position, with the lse result
/// when `withLse`.
AttentionOp buildAttention(OpBuilder &b, const AttentionChain &chain,
                           bool withLse);

} // namespace mlir::fsdp::detail

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_ATTENTIONCHAIN_H
