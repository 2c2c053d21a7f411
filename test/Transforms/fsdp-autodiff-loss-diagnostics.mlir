// fsdp-autodiff's loss errors about one input point at that input.
// RUN: fsdp-opt %s -verify-diagnostics --fsdp-autodiff="loss=cross-entropy logits=output_1 labels=x" -o /dev/null

module {
  fsdp.param @w : tensor<4x5xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(
      // expected-error @+1 {{fsdp-autodiff: the model already has an input named 'x'; choose another with labels=NAME}}
      %x: tensor<2x4xf32> {fsdp.name = "x"},
      %v: tensor<5xf32>)
      -> (tensor<5xf32> {fsdp.name = "output_0"}, tensor<2x5xf32> {fsdp.name = "output_1"}) {
    %w = fsdp.get_param @w : tensor<4x5xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
    return %v, %y : tensor<5xf32>, tensor<2x5xf32>
  }
}
