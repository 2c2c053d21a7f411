// RUN: fsdp-opt %s --split-input-file --verify-diagnostics --fsdp-lower-to-runtime

func.func @no_kernel(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.GatherND' op has no runtime kernel (docs/plan-format.md lists the supported ops)}}
  %y = onnx.GatherND %x, %i : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Clip's bounds become the kernel's attributes, so they must be known.
func.func @clip_bound_at_run_time(%x: tensor<2xf32>, %lo: tensor<f32>) -> tensor<2xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Clip' op min must be a constant float scalar to run on the runtime}}
  %y = onnx.Clip %x, %lo, %none : (tensor<2xf32>, tensor<f32>, none) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// An input the runtime cannot take: at the argument.
func.func @dynamic(
    // expected-error @+1 {{fsdp-lower-to-runtime: input 0 of @dynamic has type 'tensor<?x4xf32>'; the runtime needs static shapes of a supported element type}}
    %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'onnx.Relu' op has a dynamic shape 'tensor<?x4xf32>'; import with --batch-size (and --dim) to make it static}}
  %y = onnx.Relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @training_bn(%x: tensor<2x4xf32>, %s: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'onnx.BatchNormalization' op in training mode cannot run as inference; run --fsdp-inference first}}
  %y, %m, %v = onnx.BatchNormalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dropout(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Dropout' op is a training-mode Dropout; run --fsdp-inference first}}
  %y, %mask = onnx.Dropout %x, %none, %none : (tensor<2x4xf32>, none, none) -> (tensor<2x4xf32>, none)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dynamic_slice(%x: tensor<4xf32>, %start: tensor<1xi64>) -> tensor<2xf32> {
  %end = onnx.Constant dense<3> : tensor<1xi64>
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Slice' op starts must be a constant to run on the runtime}}
  %y = onnx.Slice %x, %start, %end, %none, %none : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @stats(%x: tensor<2x4xf32>, %s: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  // expected-error @+1 {{'onnx.LayerNormalization' op Mean and InvStdDev outputs are not supported}}
  %y, %m, %i = onnx.LayerNormalization %x, %s, %s : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %m : tensor<2x4xf32>, tensor<2x1xf32>
}

// -----

// expected-error @+1 {{input 0 of @complex has type 'tensor<2xcomplex<f32>>'}}
func.func @complex(%x: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  // expected-error @+1 {{'onnx.Neg' op has a value of type 'tensor<2xcomplex<f32>>', which the runtime does not support}}
  %y = onnx.Neg %x : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
  return %y : tensor<2xcomplex<f32>>
}
