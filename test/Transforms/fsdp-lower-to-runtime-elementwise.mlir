// RUN: fsdp-opt %s --fsdp-lower-to-runtime | FileCheck %s

// The elementwise ops and reductions ONNX's conformance suite needed
// (test/conformance): Clip's constant bounds become attributes (an absent
// one is left out), Max and Min of one input are that input and of two the
// binary kernel, LeakyRelu keeps its slope, every reduction its axes.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[C:.*]] = fsdp.kernel "clip"(%arg0) params {max = 2.500000e-01 : f32, min = -5.000000e-01 : f32}
// CHECK-NEXT: %[[C2:.*]] = fsdp.kernel "clip"(%[[C]]) params {max = 1.000000e+00 : f32}
// CHECK-NEXT: %[[M:.*]] = fsdp.kernel "max"(%[[C2]], %arg1)
// CHECK-NEXT: %[[N:.*]] = fsdp.kernel "min"(%[[M]], %arg0)
// CHECK-NEXT: %[[L:.*]] = fsdp.kernel "leaky_relu"(%[[N]]) params {alpha = 2.000000e-01 : f32}
// CHECK-NEXT: %[[GE:.*]] = fsdp.kernel "greater_or_equal"(%[[L]], %arg0)
// CHECK-NEXT: %[[R:.*]] = fsdp.kernel "reduce_l2"(%[[L]]) params {axes = array<i64: 1>, keepdims = 0 : i64}
// CHECK-NEXT: %[[LSE:.*]] = fsdp.kernel "reduce_log_sum_exp"(%[[L]]) params {axes = array<i64>, keepdims = 1 : i64}
// CHECK-NEXT: return %[[L]], %[[GE]], %[[R]], %[[LSE]]
// CHECK-NOT:  onnx.
func.func @forward(%x: tensor<2x3xf32>, %y: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2xf32>, tensor<1x1xf32>) {
  %lo = onnx.Constant dense<-5.000000e-01> : tensor<f32>
  %hi = onnx.Constant dense<2.500000e-01> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %none = onnx.NoValue
  %c = onnx.Clip %x, %lo, %hi : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  %c2 = onnx.Clip %c, %none, %one : (tensor<2x3xf32>, none, tensor<f32>) -> tensor<2x3xf32>
  %same = onnx.Max %c2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %m = onnx.Max %same, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %n = onnx.Min %m, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = onnx.LeakyRelu %n {alpha = 2.000000e-01 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %ge = onnx.GreaterOrEqual %l, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %r = onnx.ReduceL2 %l {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
  %lse = onnx.ReduceLogSumExp %l : (tensor<2x3xf32>) -> tensor<1x1xf32>
  return %l, %ge, %r, %lse : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2xf32>, tensor<1x1xf32>
}

// ArgMax and ArgMin: the axis made non-negative, the flags kept.
// CHECK-LABEL: func.func @arg
// CHECK-NEXT: fsdp.kernel "arg_max"(%arg0) params {axis = 1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64}
// CHECK-NEXT: fsdp.kernel "arg_min"(%arg0) params {axis = 0 : i64, keepdims = 1 : i64, select_last_index = 0 : i64}
func.func @arg(%x: tensor<2x3xf32>) -> (tensor<2xi64>, tensor<1x3xi64>) {
  %a = onnx.ArgMax %x {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  %b = onnx.ArgMin %x : (tensor<2x3xf32>) -> tensor<1x3xi64>
  return %a, %b : tensor<2xi64>, tensor<1x3xi64>
}
