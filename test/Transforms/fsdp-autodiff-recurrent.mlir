// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// An LSTM's gradient is one fsdp.recurrent_grad over the whole sequence:
// the forward's inputs (those of B, initial_h, initial_c present), then the
// cotangents of Y, Y_h and Y_c (zeros for Y_c, which the loss does not
// reach). W, R and B get theirs; X is no parameter's function, so the
// kernel's dX goes nowhere.
// CHECK-LABEL: func.func @forward
// CHECK: %[[ZC:.*]] = onnx.Constant dense<0.000000e+00> : tensor<1x2x4xf32>
// CHECK: %{{.*}}:6 = fsdp.recurrent_grad %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ZC]] {bias = 1 : i64, cell = "lstm", direction = "forward", hidden_size = 4 : i64, initial_c = 0 : i64, initial_h = 0 : i64, layout = 0 : i64, linear_before_reset = 0 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
module {
  fsdp.param @w : tensor<1x16x3xf32> at <"m.onnx", offset = 0, length = 192>
  fsdp.param @r : tensor<1x16x4xf32> at <"m.onnx", offset = 192, length = 256>
  fsdp.param @b : tensor<1x32xf32> at <"m.onnx", offset = 448, length = 128>
  func.func @forward(%x: tensor<5x2x3xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<1x16x3xf32>
    %r = fsdp.get_param @r : tensor<1x16x4xf32>
    %b = fsdp.get_param @b : tensor<1x32xf32>
    %y, %yh, %yc = onnx.LSTM %x, %w, %r, %b, %none, %none, %none, %none {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, none, none, none, none) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
    %sq = onnx.Mul %y, %y : (tensor<5x1x2x4xf32>, tensor<5x1x2x4xf32>) -> tensor<5x1x2x4xf32>
    %axes = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %s1 = onnx.ReduceSum %sq, %axes {keepdims = 0 : i64} : (tensor<5x1x2x4xf32>, tensor<4xi64>) -> tensor<f32>
    %axes3 = onnx.Constant dense<[0, 1, 2]> : tensor<3xi64>
    %s2 = onnx.ReduceSum %yh, %axes3 {keepdims = 0 : i64} : (tensor<1x2x4xf32>, tensor<3xi64>) -> tensor<f32>
    %loss = onnx.Add %s1, %s2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// GRU with a trainable initial state: linear_before_reset carried over,
// d initial_h its gradient.
// CHECK-LABEL: func.func @forward
// CHECK: fsdp.recurrent_grad {{.*}} {bias = 0 : i64, cell = "gru", direction = "bidirectional", hidden_size = 2 : i64, initial_c = 0 : i64, initial_h = 1 : i64, layout = 1 : i64, linear_before_reset = 1 : i64} : (tensor<1x3x2xf32>, tensor<2x6x2xf32>, tensor<2x6x2xf32>, tensor<1x2x2xf32>, tensor<1x3x2x2xf32>, tensor<1x2x2xf32>) -> (tensor<1x3x2xf32>, tensor<2x6x2xf32>, tensor<2x6x2xf32>, tensor<2x12xf32>, tensor<1x2x2xf32>)
module {
  fsdp.param @w : tensor<2x6x2xf32> at <"m.onnx", offset = 0, length = 96>
  fsdp.param @r : tensor<2x6x2xf32> at <"m.onnx", offset = 96, length = 96>
  fsdp.param @h0 : tensor<1x2x2xf32> at <"m.onnx", offset = 192, length = 16>
  func.func @forward(%x: tensor<1x3x2xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<2x6x2xf32>
    %r = fsdp.get_param @r : tensor<2x6x2xf32>
    %h0 = fsdp.get_param @h0 : tensor<1x2x2xf32>
    %y, %yh = onnx.GRU %x, %w, %r, %none, %none, %h0 {direction = "bidirectional", hidden_size = 2 : i64, layout = 1 : i64, linear_before_reset = 1 : i64} : (tensor<1x3x2xf32>, tensor<2x6x2xf32>, tensor<2x6x2xf32>, none, none, tensor<1x2x2xf32>) -> (tensor<1x3x2x2xf32>, none)
    %axes = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %loss = onnx.ReduceSum %y, %axes {keepdims = 0 : i64} : (tensor<1x3x2x2xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
