//===- Gradients.cpp - Attaching the ops' reverse-mode rules --------------===//

#include "Gradients.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

void mlir::fsdp::detail::registerGradientModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, onnxir::ONNXDialect *onnx) {
    attachElementwiseGradients(*ctx);
    attachMovementGradients(*ctx);
    attachReductionGradients(*ctx);
    attachMatMulGradients(*ctx);
    attachWindowGradients(*ctx);
    attachRecurrentGradients(*ctx);
    attachViewGradients(*onnx);
  });
  registry.addExtension(+[](MLIRContext *ctx, FSDPDialect *fsdp) {
    attachFusedGradients(*ctx);
    attachCrossEntropyGradient(*ctx);
    attachViewGradients(*fsdp);
  });
}
