// RUN: not fsdp-opt %s --fsdp-autodiff=checkpoint-units=true -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: fsdp-autodiff: checkpoint-units needs FSDP units; run --fsdp-auto-wrap first
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4xf32>
    %m = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
