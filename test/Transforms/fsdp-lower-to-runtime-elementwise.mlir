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

// The activations with constants carry them all, defaults made explicit;
// PRelu and Xor are broadcasting binary kernels; Pad's constant pads and
// fill value become parameters.
// CHECK-LABEL: func.func @activations
// CHECK-NEXT: %[[HS:.*]] = fsdp.kernel "hard_sigmoid"(%arg0) params {alpha = 0.166666672 : f32, beta = 5.000000e-01 : f32}
// CHECK-NEXT: %[[HW:.*]] = fsdp.kernel "hard_swish"(%[[HS]])
// CHECK-NEXT: %[[P:.*]] = fsdp.kernel "prelu"(%[[HW]], %arg1)
// CHECK-NEXT: %[[E:.*]] = fsdp.kernel "elu"(%[[P]]) params {alpha = 1.000000e+00 : f32}
// CHECK-NEXT: %[[S:.*]] = fsdp.kernel "selu"(%[[E]]) params {alpha = 1.67326319 : f32, gamma = 1.05070102 : f32}
// CHECK-NEXT: %[[C:.*]] = fsdp.kernel "celu"(%[[S]]) params {alpha = 2.000000e+00 : f32}
// CHECK-NEXT: %[[T:.*]] = fsdp.kernel "thresholded_relu"(%[[C]]) params {alpha = 1.000000e+00 : f32}
// CHECK-NEXT: %[[SH:.*]] = fsdp.kernel "shrink"(%[[T]]) params {bias = 0.000000e+00 : f32, lambd = 5.000000e-01 : f32}
// CHECK-NEXT: %[[SG:.*]] = fsdp.kernel "sign"(%[[SH]])
// CHECK-NEXT: %[[SS:.*]] = fsdp.kernel "softsign"(%[[SG]])
// CHECK-NEXT: %[[PAD:.*]] = fsdp.kernel "pad"(%[[SS]]) params {mode = "edge", pads = array<i64: 0, 0, 1, 2, 0, 0, 0, 1>, value = 0.000000e+00 : f64}
// CHECK-NEXT: %[[PADC:.*]] = fsdp.kernel "pad"(%[[SS]]) params {mode = "constant", pads = array<i64: 0, 0, 1, 2, 0, 0, 0, 1>, value = 1.500000e+00 : f64}
// CHECK-NEXT: %[[X:.*]] = fsdp.kernel "xor"(%arg2, %arg3)
// CHECK-NEXT: return %[[PAD]], %[[PADC]], %[[X]]
func.func @activations(%x: tensor<2x3x4x4xf32>, %slope: tensor<3x1x1xf32>,
                       %p: tensor<4xi1>, %q: tensor<4xi1>) -> (tensor<2x3x7x5xf32>, tensor<2x3x7x5xf32>, tensor<4xi1>) {
  %none = onnx.NoValue
  %pads = onnx.Constant dense<[0, 0, 1, 2, 0, 0, 0, 1]> : tensor<8xi64>
  %fill = onnx.Constant dense<1.5> : tensor<f32>
  %0 = onnx.HardSigmoid %x {alpha = 0.166666672 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %1 = onnx.HardSwish %0 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %2 = onnx.PRelu %1, %slope : (tensor<2x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %3 = onnx.Elu %2 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %4 = onnx.Selu %3 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %5 = onnx.Celu %4 {alpha = 2.0 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %6 = onnx.ThresholdedRelu %5 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %7 = onnx.Shrink %6 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %8 = onnx.Sign %7 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %9 = onnx.Softsign %8 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %10 = onnx.Pad %9, %pads, %none {mode = "edge"} : (tensor<2x3x4x4xf32>, tensor<8xi64>, none) -> tensor<2x3x7x5xf32>
  %11 = onnx.Pad %9, %pads, %fill : (tensor<2x3x4x4xf32>, tensor<8xi64>, tensor<f32>) -> tensor<2x3x7x5xf32>
  %12 = onnx.Xor %p, %q : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %10, %11, %12 : tensor<2x3x7x5xf32>, tensor<2x3x7x5xf32>, tensor<4xi1>
}

// Resize: the scales from `scales`, or from `sizes` over the input's sizes.
// CHECK-LABEL: func.func @resize
// CHECK-NEXT: fsdp.kernel "resize"(%arg0) params {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00>}
// CHECK-NEXT: fsdp.kernel "resize"(%arg0) params {coordinate_transformation_mode = "align_corners", mode = "linear", nearest_mode = "round_prefer_floor", scales = array<f64: 1.000000e+00, 1.000000e+00, 1.500000e+00, 7.500000e-01>}
func.func @resize(%x: tensor<1x3x4x4xf32>) -> (tensor<1x3x8x8xf32>, tensor<1x3x6x3xf32>) {
  %none = onnx.NoValue
  %scales = onnx.Constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  %sizes = onnx.Constant dense<[1, 3, 6, 3]> : tensor<4xi64>
  %empty = onnx.Constant dense<> : tensor<0xf32>
  %a = onnx.Resize %x, %none, %scales, %none {coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<1x3x4x4xf32>, none, tensor<4xf32>, none) -> tensor<1x3x8x8xf32>
  %b = onnx.Resize %x, %none, %empty, %sizes {coordinate_transformation_mode = "align_corners", mode = "linear"} : (tensor<1x3x4x4xf32>, none, tensor<0xf32>, tensor<4xi64>) -> tensor<1x3x6x3xf32>
  return %a, %b : tensor<1x3x8x8xf32>, tensor<1x3x6x3xf32>
}

// Hardmax keeps its (non-negative) axis, IsInf its flags; the
// trigonometric functions, Round and GlobalMaxPool have no parameters.
// CHECK-LABEL: func.func @more_unary
// CHECK-NEXT: fsdp.kernel "hardmax"(%arg0) params {axis = 3 : i64}
// CHECK-NEXT: fsdp.kernel "is_inf"(%arg0) params {detect_negative = 0 : i64, detect_positive = 1 : i64}
// CHECK-NEXT: fsdp.kernel "round"(%arg0)
// CHECK-NEXT: fsdp.kernel "atanh"(%arg0)
// CHECK-NEXT: fsdp.kernel "global_max_pool"(%arg0)
func.func @more_unary(%x: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4x4xi1>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>) {
  %h = onnx.Hardmax %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %i = onnx.IsInf %x {detect_negative = 0 : i64} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xi1>
  %r = onnx.Round %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %a = onnx.Atanh %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %g = onnx.GlobalMaxPool %x : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  return %h, %i, %r, %a, %g : tensor<1x3x4x4xf32>, tensor<1x3x4x4xi1>, tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x3x1x1xf32>
}

// ConvTranspose: conv_grad_input under the window of the convolution it
// transposes (its end pads sized so it maps Y back to X), the bias added
// per channel through a view. With output_shape
// [10, 8] (strides 3, 2; 3x3 kernel on 3x3) ONNX derives pads whose end
// is negative: the kernel's end pads are 0, the extra rows stay zero.
// CHECK-LABEL: func.func @conv_transpose
// CHECK-NEXT: %[[T:.*]] = fsdp.kernel "conv_grad_input"(%arg0, %arg1) params {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>}
// CHECK-NEXT: %[[B:.*]] = fsdp.view %arg2 : tensor<2xf32> to tensor<2x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = fsdp.kernel "add"(%[[T]], %[[B]])
// CHECK-NEXT: fsdp.kernel "conv_grad_input"(%arg3, %arg4) params {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 2>}
func.func @conv_transpose(%x: tensor<1x3x3x3xf32>, %w: tensor<3x2x3x3xf32>, %b: tensor<2xf32>,
                          %x2: tensor<1x1x3x3xf32>, %w2: tensor<1x2x3x3xf32>) -> (tensor<1x2x6x6xf32>, tensor<1x2x10x8xf32>) {
  %none = onnx.NoValue
  %y = onnx.ConvTranspose %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x3x3x3xf32>, tensor<3x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x6x6xf32>
  %y2 = onnx.ConvTranspose %x2, %w2, %none {strides = array<i64: 3, 2>, output_shape = array<i64: 10, 8>} : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>, none) -> tensor<1x2x10x8xf32>
  return %y, %y2 : tensor<1x2x6x6xf32>, tensor<1x2x10x8xf32>
}

// -----

// Mod on tensors (over constants it folds at import) keeps its fmod flag.
// CHECK-LABEL: func.func @mod
// CHECK-NEXT: fsdp.kernel "mod"(%arg0, %arg1) params {fmod = 0 : i64}
// CHECK-NEXT: fsdp.kernel "mod"(%arg2, %arg3) params {fmod = 1 : i64}
func.func @mod(%a: tensor<4xi32>, %b: tensor<4xi32>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %m = onnx.Mod %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %f = onnx.Mod %x, %y {fmod = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %m, %f : tensor<4xi32>, tensor<4xf32>
}
