// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff -verify-diagnostics -o /dev/null

module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<8xf32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.ThresholdedRelu' op no gradient rule for 'onnx.ThresholdedRelu' on the path from a trainable parameter to the loss}}
    %1 = onnx.ThresholdedRelu %0 : (tensor<8xf32>) -> tensor<8xf32>
    %2 = onnx.ReduceMean %1 {keepdims = 0 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// expected-error @+1 {{fsdp-autodiff: @forward must return one scalar loss, not 2 values (export with a loss_fn)}}
func.func @forward(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  return %x, %x : tensor<8xf32>, tensor<8xf32>
}

// -----

// expected-error @+1 {{fsdp-autodiff: the loss must be a floating-point scalar, not 'tensor<8xf32>'}}
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<8xf32>, %ratio: tensor<f32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %train = onnx.Constant dense<true> : tensor<i1>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.Dropout' op ratio must be a constant}}
    %1, %mask = onnx.Dropout %0, %ratio, %train : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, none)
    %2 = onnx.ReduceMean %1 {keepdims = 0 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<8xf32>, %train: tensor<i1>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %ratio = onnx.Constant dense<0.1> : tensor<f32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.Dropout' op training_mode must be a constant (the plan runs in one mode)}}
    %1, %mask = onnx.Dropout %0, %ratio, %train : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, none)
    %2 = onnx.ReduceMean %1 {keepdims = 0 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// An fsdp.attention written without its lse result (fsdp-fuse's inference
// form) cannot be differentiated: the gradient recomputes from lse.
module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-error @+1 {{fsdp-autodiff: 'fsdp.attention' op fsdp.attention needs its lse result to be differentiated}}
    %y = fsdp.attention %h, %h, %h {scale = 1.0 : f32} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %l = onnx.ReduceSum %y, %none {keepdims = 0 : i64} : (tensor<4x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-error @+1 {{fsdp-autodiff: 'fsdp.attention' op fsdp.attention gives its mask no gradient, but the mask depends on a trainable parameter}}
    %y, %lse = fsdp.attention %h, %h, %h, %w {scale = 1.0 : f32, mask_kind = "add"} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
    %l = onnx.ReduceSum %y, %none {keepdims = 0 : i64} : (tensor<4x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A scatter that multiplies: its updates' gradient would need the other
// factors landing on the same element.
module {
  fsdp.param @u : tensor<2x3xf32> at <"m.onnx", offset = 0, length = 24>
  func.func @forward(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>) -> tensor<f32> {
    %none = onnx.NoValue
    %u = fsdp.get_param @u : tensor<2x3xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.ScatterND' op no gradient rule for reduction 'mul' to its updates (only to its data)}}
    %0 = onnx.ScatterND %x, %i, %u {reduction = "mul"} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %1 = onnx.ReduceSum %0, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

module {
  fsdp.param @w : tensor<4x3xf32> at <"m.onnx", offset = 0, length = 48>
  func.func @forward(%e: tensor<2x3xi64>, %y: tensor<2x3xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x3xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.ScatterElements' op no gradient rule for reduction 'max'}}
    %0 = onnx.ScatterElements %w, %e, %y {reduction = "max"} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %1 = onnx.ReduceSum %0, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// Empty index tuples (each update is the whole of data).
module {
  fsdp.param @u : tensor<2x4x3xf32> at <"m.onnx", offset = 0, length = 96>
  func.func @forward(%x: tensor<4x3xf32>, %i: tensor<2x0xi64>) -> tensor<f32> {
    %none = onnx.NoValue
    %u = fsdp.get_param @u : tensor<2x4x3xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.ScatterND' op gradient to updates needs indices of static shape whose tuples index 1 or more static axes}}
    %0 = onnx.ScatterND %x, %i, %u : (tensor<4x3xf32>, tensor<2x0xi64>, tensor<2x4x3xf32>) -> tensor<4x3xf32>
    %1 = onnx.ReduceSum %0, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// A diagonal (a letter repeated within a term) has no gradient rule.
module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = fsdp.get_param @w : tensor<4x4xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.Einsum' op equation "ii,i->" repeats the letter 'i' within one operand's term (a diagonal), which has no gradient rule}}
    %y = onnx.Einsum %w, %x {equation = "ii,i->"} : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<f32>
    return %y : tensor<f32>
  }
}

// -----

module {
  fsdp.param @s : tensor<1x1x2x2x2x2xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<1x1x2x2x2x2xf32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<1x1x2x2x2x2xf32>
    %0 = onnx.Mul %x, %s : (tensor<1x1x2x2x2x2xf32>, tensor<1x1x2x2x2x2xf32>) -> tensor<1x1x2x2x2x2xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.AveragePool' op only 1-D, 2-D and 3-D pooling have a gradient rule, not a pool over rank 6}}
    %1 = onnx.AveragePool %0 {kernel_shape = array<i64: 2, 2, 2, 2>} : (tensor<1x1x2x2x2x2xf32>) -> tensor<1x1x1x1x1x1xf32>
    %2 = onnx.ReduceMean %1 {keepdims = 0 : i64} : (tensor<1x1x1x1x1x1xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}
