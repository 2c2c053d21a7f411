//===- Inference.cpp - Training-mode exports rewritten for inference ------===//
//
/// PyTorch's eval(): Dropout passes its input through, BatchNorm normalizes
/// with its running statistics instead of the batch's and updates nothing.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_INFERENCE
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;

namespace {

struct InferencePass : mlir::fsdp::impl::InferenceBase<InferencePass> {
  void runOnOperation() override {
    SmallVector<onnxir::DropoutOp> dropouts;
    SmallVector<onnxir::BatchNormalizationOp> norms;
    getOperation().walk([&](Operation *op) {
      if (auto dropout = dyn_cast<onnxir::DropoutOp>(op))
        dropouts.push_back(dropout);
      else if (auto norm = dyn_cast<onnxir::BatchNormalizationOp>(op))
        if (norm.getTrainingMode() != 0)
          norms.push_back(norm);
    });

    for (onnxir::DropoutOp dropout : dropouts) {
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
