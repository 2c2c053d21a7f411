// A Dropout whose training_mode is decided at run time: an inference plan
// never drops, so a true value would be ignored; refused, naming the input.
// RUN: fsdp-opt %s --split-input-file --fsdp-inference -verify-diagnostics

func.func @forward(%x: tensor<4xf32>, %train: tensor<i1> {fsdp.name = "training_mode"}) -> tensor<4xf32> {
  %ratio = onnx.Constant dense<0.5> : tensor<f32>
  // expected-error @+1 {{fsdp-inference: 'onnx.Dropout' op training_mode is the run-time input 'training_mode'; an inference plan never drops, so it would ignore a true value. Export with the mode fixed (torch.onnx.TrainingMode.TRAINING, as fsdp_mlir.export does) or give the Dropout ratio 0}}
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, none)
  return %y : tensor<4xf32>
}

// -----

func.func @forward(%x: tensor<4xf32>, %ratio: tensor<f32>, %eval: tensor<i1>) -> tensor<4xf32> {
  %train = onnx.Not %eval : (tensor<i1>) -> tensor<i1>
  // expected-error @+1 {{fsdp-inference: 'onnx.Dropout' op training_mode is a value computed at run time;}}
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, none)
  return %y : tensor<4xf32>
}

// -----

// A training graph that returns BatchNorm's updated running mean.
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{fsdp-inference: 'onnx.BatchNormalization' op updates running statistics that the graph reads; it cannot be rewritten for inference}}
  %y, %rm, %rv = onnx.BatchNormalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %rm : tensor<3xf32>
}
