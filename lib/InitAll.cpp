//===- InitAll.cpp - Register everything the fsdp tools use ---------------===//

#include "fsdp/InitAll.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void fsdp::registerAllDialects(mlir::DialectRegistry &registry) {
  // Only the dialects the project uses: all of MLIR's would cost every tool
  // ~45 s of compile time and start-up work it never needs.
  registry.insert<mlir::fsdp::FSDPDialect, mlir::onnxir::ONNXDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect,
                  mlir::mesh::MeshDialect, mlir::tensor::TensorDialect>();
}

void fsdp::registerAllPasses() {
  mlir::fsdp::registerFSDPPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();

  // The whole single-rank inference compile in one flag.
  mlir::PassPipelineRegistration<>(
      "fsdp-inference-pipeline",
      "Compile an imported model for single-rank inference: fsdp-inference, "
      "fsdp-fuse, fsdp-lower-to-runtime, fsdp-plan-memory (then "
      "fsdp-translate --mlir-to-plan writes the plan)",
      [](mlir::OpPassManager &pm) {
        pm.addPass(mlir::fsdp::createInference());
        pm.addPass(mlir::fsdp::createFuse());
        pm.addPass(mlir::fsdp::createLowerToRuntime());
        pm.addPass(mlir::fsdp::createPlanMemory());
      });

  // The memory plan printed over the step (plans again: same offsets).
  mlir::PassPipelineRegistration<>(
      "fsdp-memory-timeline",
      "Print one rank's memory over the step (fsdp-plan-memory=timeline): "
      "gathered parameters, flat and reduced gradients, activations, the "
      "rank's state and constants, and the peak per rank",
      [](mlir::OpPassManager &pm) {
        mlir::fsdp::PlanMemoryOptions options;
        options.timeline = true;
        pm.addPass(mlir::fsdp::createPlanMemory(options));
      });
}
