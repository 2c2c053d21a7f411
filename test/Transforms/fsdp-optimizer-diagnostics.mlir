// fsdp-optimizer's errors about one input of the step point at that input.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-optimizer=accumulate=2 -o /dev/null

// The step's learning rate input would take a name the model uses already.
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>,
      // expected-error @+1 {{fsdp-optimizer: the step already has an input named 'lr'}}
      %lr: tensor<f32> {fsdp.name = "lr"})
      -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}) {
    %none = onnx.NoValue
    %l = onnx.ReduceSum %x, %none {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<4xf32>
  }
}

// -----

// Gradient accumulation slices every input along its batch dimension; a
// scalar input has none.
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>,
      // expected-error @+1 {{fsdp-optimizer: accumulate=2 slices every input along its first (batch) dimension, but input 1 is 'tensor<f32>'}}
      %scale: tensor<f32>)
      -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}) {
    %none = onnx.NoValue
    %m = onnx.Mul %x, %scale : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %l = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<4xf32>
  }
}
