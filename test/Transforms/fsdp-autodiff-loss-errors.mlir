// RUN: not fsdp-opt %s --fsdp-autodiff="loss=cross-entropy" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not fsdp-opt %s --fsdp-autodiff="loss=cross-entropy logits=nope" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not fsdp-opt %s --fsdp-autodiff="loss=cross-entropy logits=output_1 labels=x" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TAKEN
// RUN: not fsdp-opt %s --fsdp-autodiff="loss=cross-entropy logits=output_0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not fsdp-opt %s --fsdp-autodiff="loss=mse" -o /dev/null 2>&1 | FileCheck %s --check-prefix=KIND

// MANY: error: fsdp-autodiff: the model returns 2 values (output_0, output_1); name the logits with logits=NAME
// NAME: error: fsdp-autodiff: no result is named 'nope' (results: output_0, output_1)
// TAKEN: error: fsdp-autodiff: the model already has an input named 'x'; choose another with labels=NAME
// RANK: error: fsdp-autodiff: cross-entropy needs floating-point logits [..., classes], not 'tensor<5xf32>' ('output_0')
// KIND: error: fsdp-autodiff: unknown loss 'mse' (supported: cross-entropy)
module {
  fsdp.param @w : tensor<4x5xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}, %v: tensor<5xf32>) -> (tensor<5xf32> {fsdp.name = "output_0"}, tensor<2x5xf32> {fsdp.name = "output_1"}) {
    %w = fsdp.get_param @w : tensor<4x5xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
    return %v, %y : tensor<5xf32>, tensor<2x5xf32>
  }
}
