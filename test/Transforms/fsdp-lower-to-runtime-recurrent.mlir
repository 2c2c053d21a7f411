// RUN: fsdp-opt %s --split-input-file --fsdp-lower-to-runtime | FileCheck %s

// LSTM: X, W, R, then the optional inputs present (`bias`, `initial_h`,
// `initial_c` say which); the kernel writes Y, Y_h and Y_c even where the
// op leaves some out.
// CHECK-LABEL: func.func @lstm
// CHECK-NEXT: %[[K:.*]]:3 = fsdp.kernel "lstm"(%arg0, %arg1, %arg2, %arg3) params {bias = 0 : i64, direction = "forward", hidden_size = 4 : i64, initial_c = 1 : i64, initial_h = 0 : i64, layout = 1 : i64} : (tensor<2x5x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<2x1x4xf32>) -> (tensor<2x5x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>)
// CHECK-NEXT: return %[[K]]#1
func.func @lstm(%x: tensor<2x5x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %c0: tensor<2x1x4xf32>) -> tensor<2x1x4xf32> {
  %none = onnx.NoValue
  %y, %yh, %yc = onnx.LSTM %x, %w, %r, %none, %none, %none, %c0, %none {hidden_size = 4 : i64, layout = 1 : i64} : (tensor<2x5x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none, none, none, tensor<2x1x4xf32>, none) -> (none, tensor<2x1x4xf32>, none)
  return %yh : tensor<2x1x4xf32>
}

// -----

// GRU, bidirectional, with linear_before_reset; sequence_lens a constant
// of the full length is as if absent. RNN reversed.
// CHECK-LABEL: func.func @gru_rnn
// CHECK: fsdp.kernel "gru"(%arg0, %arg1, %arg2, %arg3, %arg4) params {bias = 1 : i64, direction = "bidirectional", hidden_size = 2 : i64, initial_h = 1 : i64, layout = 0 : i64, linear_before_reset = 1 : i64}
// CHECK-SAME: -> (tensor<3x2x1x2xf32>, tensor<2x1x2xf32>)
// CHECK: fsdp.kernel "rnn"(%arg0, %arg5, %arg6) params {bias = 0 : i64, direction = "reverse", hidden_size = 2 : i64, initial_h = 0 : i64, layout = 0 : i64}
func.func @gru_rnn(%x: tensor<3x1x2xf32>, %w: tensor<2x6x2xf32>, %r: tensor<2x6x2xf32>, %b: tensor<2x12xf32>, %h0: tensor<2x1x2xf32>,
                   %w1: tensor<1x2x2xf32>, %r1: tensor<1x2x2xf32>) -> (tensor<3x2x1x2xf32>, tensor<3x1x1x2xf32>) {
  %none = onnx.NoValue
  %lens = onnx.Constant dense<3> : tensor<1xi32>
  %y, %yh = onnx.GRU %x, %w, %r, %b, %lens, %h0 {direction = "bidirectional", hidden_size = 2 : i64, linear_before_reset = 1 : i64} : (tensor<3x1x2xf32>, tensor<2x6x2xf32>, tensor<2x6x2xf32>, tensor<2x12xf32>, tensor<1xi32>, tensor<2x1x2xf32>) -> (tensor<3x2x1x2xf32>, none)
  %y1, %yh1 = onnx.RNN %x, %w1, %r1, %none, %none, %none {direction = "reverse", hidden_size = 2 : i64} : (tensor<3x1x2xf32>, tensor<1x2x2xf32>, tensor<1x2x2xf32>, none, none, none) -> (tensor<3x1x1x2xf32>, none)
  return %y, %y1 : tensor<3x2x1x2xf32>, tensor<3x1x1x2xf32>
}

// -----

// The gradient op becomes <cell>_grad with its operands as they are.
// CHECK-LABEL: func.func @grad
// CHECK-NEXT: fsdp.kernel "rnn_grad"(%arg0, %arg1, %arg2, %arg3, %arg4) params {bias = 0 : i64, direction = "forward", hidden_size = 4 : i64, initial_c = 0 : i64, initial_h = 0 : i64, layout = 0 : i64, linear_before_reset = 0 : i64}
func.func @grad(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %dy: tensor<5x1x2x4xf32>, %dyh: tensor<1x2x4xf32>) -> tensor<5x2x3xf32> {
  %dx, %dw, %dr, %db, %dh0 = fsdp.recurrent_grad %x, %w, %r, %dy, %dyh {cell = "rnn", hidden_size = 4 : i64, direction = "forward", layout = 0 : i64, linear_before_reset = 0 : i64, bias = 0 : i64, initial_h = 0 : i64, initial_c = 0 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<5x1x2x4xf32>, tensor<1x2x4xf32>) -> (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<1x8xf32>, tensor<1x2x4xf32>)
  return %dx : tensor<5x2x3xf32>
}
