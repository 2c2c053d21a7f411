//===- Inference.cpp - Training-mode exports rewritten for inference ------===//
//
/// PyTorch's eval(): Dropout passes its input through, BatchNorm normalizes
/// with its running statistics instead of the batch's and updates nothing.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_INFERENCE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using mlir::fsdp::FSDPDialect;

namespace {

/// Whether `value` is a one-element constant equal to `expected`.
bool isConstant(Value value, double expected) {
  auto constant = value.getDefiningOp<onnxir::ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!dense || dense.getNumElements() != 1)
    return false;
  if (auto floats = dyn_cast<DenseFPElementsAttr>(dense))
    return (*floats.getValues<APFloat>().begin()).convertToDouble() == expected;
  APInt v = *cast<DenseIntElementsAttr>(dense).getValues<APInt>().begin();
  return (v.getBitWidth() == 1 ? double(v.getBoolValue())
                               : double(v.getSExtValue())) == expected;
}

/// An inference plan never drops, so a Dropout whose training_mode is
/// decided at run time (a graph input, or computed from one) would ignore
/// a true value silently; refuse it, unless its ratio is 0 (nothing is
/// dropped in either mode). A constant mode is what export fixed: TRAINING
/// exports are rewritten, as eval() does.
LogicalResult checkFixedMode(onnxir::DropoutOp dropout) {
  Value mode = dropout.getTrainingMode();
  if (isa<NoneType>(mode.getType()) ||
      mode.getDefiningOp<onnxir::ConstantOp>() ||
      (!isa<NoneType>(dropout.getRatio().getType()) &&
       isConstant(dropout.getRatio(), 0.0)))
    return success();
  std::string source = "a value computed at run time";
  if (auto arg = dyn_cast<BlockArgument>(mode)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto name = func ? func.getArgAttrOfType<StringAttr>(
                           arg.getArgNumber(),
                           FSDPDialect::NameAttrHelper::getNameStr())
                     : nullptr;
    source = name ? ("the run-time input '" + name.getValue() + "'").str()
                  : ("run-time input #" + Twine(arg.getArgNumber())).str();
  }
  return dropout.emitOpError("training_mode is ")
         << source
         << "; an inference plan never drops, so it would ignore a true "
            "value. Export with the mode fixed (torch.onnx.TrainingMode."
            "TRAINING, as fsdp_mlir.export does) or give the Dropout ratio 0";
}

struct InferencePass : mlir::fsdp::impl::InferenceBase<InferencePass> {
  void runOnOperation() override {
    mlir::fsdp::PassDiagnosticScope diagnostics(&getContext(), getArgument());
    SmallVector<onnxir::DropoutOp> dropouts;
    SmallVector<onnxir::BatchNormalizationOp> norms;
    getOperation().walk([&](Operation *op) {
      // A Dropout fsdp-autodiff kept (numbered) is a training step's: its
      // gradient reads its mask.
      if (auto dropout = dyn_cast<onnxir::DropoutOp>(op)) {
        if (!FSDPDialect::RandomOpAttrHelper(op->getContext())
                 .isAttrPresent(op))
          dropouts.push_back(dropout);
      }
      else if (auto norm = dyn_cast<onnxir::BatchNormalizationOp>(op))
        if (norm.getTrainingMode() != 0)
          norms.push_back(norm);
    });

    for (onnxir::DropoutOp dropout : dropouts) {
      if (failed(checkFixedMode(dropout)))
        return signalPassFailure();
      Value mask = dropout.getMask();
      if (!isa<NoneType>(mask.getType()) && !mask.use_empty()) {
        // Nothing is dropped: the mask is all true.
        OpBuilder b(dropout);
        auto type = cast<RankedTensorType>(mask.getType());
        Value ones = b.create<onnxir::ConstantOp>(
            dropout.getLoc(), DenseElementsAttr::get(type, true));
        mask.replaceAllUsesWith(ones);
      }
      dropout.getOutput().replaceAllUsesWith(dropout.getData());
      dropout.erase();
    }

    for (onnxir::BatchNormalizationOp norm : norms) {
      if (!norm.getRunningMean().use_empty() ||
          !norm.getRunningVar().use_empty()) {
        norm.emitOpError()
            << "updates running statistics that the graph reads; it cannot "
               "be rewritten for inference";
        return signalPassFailure();
      }
      OpBuilder b(norm);
      Type none = b.getNoneType();
      auto eval = b.create<onnxir::BatchNormalizationOp>(
          norm.getLoc(), TypeRange{norm.getY().getType(), none, none},
          norm.getX(), norm.getScale(), norm.getB(), norm.getInputMean(),
          norm.getInputVar(), norm.getEpsilonAttr(), norm.getMomentumAttr(),
          b.getI64IntegerAttr(0));
      eval->setDiscardableAttrs(norm->getDiscardableAttrDictionary());
      norm.getY().replaceAllUsesWith(eval.getY());
      norm.erase();
    }
  }
};

} // namespace
