// RUN: not fsdp-opt %s --split-input-file --fsdp-optimizer -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: fsdp-optimizer: @forward returns no gradients; run --fsdp-autodiff first (or nothing is trainable)
func.func @forward(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}

// -----

// CHECK: error: fsdp-optimizer: result 1 is neither a gradient nor a buffer update; @forward must be what --fsdp-autodiff returns
func.func @forward(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// CHECK: error: fsdp-optimizer: @w is 'tensor<4xbf16>'; only f32 parameters have an optimizer step yet
module {
  fsdp.param @w : tensor<4xbf16> at <"m.onnx", offset = 0, length = 8>
  func.func @forward(%x: tensor<4xbf16>) -> (tensor<f32>, tensor<4xbf16> {fsdp.grad_of = @w}) {
    %l = onnx.Constant dense<1.0> : tensor<f32>
    return %l, %x : tensor<f32>, tensor<4xbf16>
  }
}
