// Round trip of the activations, PRelu, Xor and Pad that ONNX's
// conformance suite and MobileNetV3-like models need; the zero Pad folds
// away, a real one stays.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --canonicalize | FileCheck %s --check-prefix=FOLD

// CHECK-LABEL: func.func @activations
func.func @activations(%x: tensor<2x3x4x4xf32>, %slope: tensor<3x1x1xf32>,
                       %p: tensor<4xi1>, %q: tensor<4xi1>) {
  // CHECK: onnx.HardSigmoid %{{.*}} {alpha = 0.166666672 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  %0 = onnx.HardSigmoid %x {alpha = 0.166666672 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.HardSwish
  %1 = onnx.HardSwish %0 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.PRelu %{{.*}}, %{{.*}} : (tensor<2x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %2 = onnx.PRelu %1, %slope : (tensor<2x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Elu %{{.*}} {alpha = 5.000000e-01 : f32}
  %3 = onnx.Elu %2 {alpha = 0.5 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Selu
  %4 = onnx.Selu %3 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Celu
  %5 = onnx.Celu %4 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.ThresholdedRelu
  %6 = onnx.ThresholdedRelu %5 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Shrink %{{.*}} {lambd = 1.000000e+00 : f32}
  %7 = onnx.Shrink %6 {lambd = 1.0 : f32} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Sign
  %8 = onnx.Sign %7 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Softsign
  %9 = onnx.Softsign %8 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.Xor %{{.*}}, %{{.*}} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %10 = onnx.Xor %p, %q : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: onnx.Hardmax %{{.*}} {axis = 1 : i64}
  %11 = onnx.Hardmax %x {axis = 1 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: onnx.IsInf %{{.*}} {detect_positive = 0 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  %12 = onnx.IsInf %x {detect_positive = 0 : i64} : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xi1>
  // CHECK: onnx.GlobalMaxPool
  %13 = onnx.GlobalMaxPool %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32>
  // CHECK: onnx.Acosh
  %14 = onnx.Acosh %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return
}

// CHECK-LABEL: func.func @pad
// FOLD-LABEL: func.func @pad
func.func @pad(%x: tensor<1x3x4x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x6x7xf32>) {
  %none = onnx.NoValue
  %zero = onnx.Constant dense<0> : tensor<8xi64>
  %pads = onnx.Constant dense<[0, 0, 1, 2, 0, 0, 1, 1]> : tensor<8xi64>
  // CHECK: onnx.Pad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x3x4x4xf32>, tensor<8xi64>, none) -> tensor<1x3x4x4xf32>
  // FOLD-NOT: onnx.Pad %arg0, %{{.*}} : (tensor<1x3x4x4xf32>, tensor<8xi64>, none) -> tensor<1x3x4x4xf32>
  %same = onnx.Pad %x, %zero, %none : (tensor<1x3x4x4xf32>, tensor<8xi64>, none) -> tensor<1x3x4x4xf32>
  // CHECK: onnx.Pad %{{.*}}, %{{.*}}, %{{.*}} {mode = "reflect"}
  // FOLD: %[[P:.*]] = onnx.Pad %arg0, %{{.*}}, %{{.*}} {mode = "reflect"}
  // FOLD: return %arg0, %[[P]]
  %padded = onnx.Pad %same, %pads, %none {mode = "reflect"} : (tensor<1x3x4x4xf32>, tensor<8xi64>, none) -> tensor<1x3x6x7xf32>
  return %same, %padded : tensor<1x3x4x4xf32>, tensor<1x3x6x7xf32>
}

// CHECK-LABEL: func.func @resize
func.func @resize(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  %none = onnx.NoValue
  %scales = onnx.Constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  // CHECK: onnx.Resize %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear"} : (tensor<1x3x4x4xf32>, none, tensor<4xf32>, none) -> tensor<1x3x8x8xf32>
  %y = onnx.Resize %x, %none, %scales, %none {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear"} : (tensor<1x3x4x4xf32>, none, tensor<4xf32>, none) -> tensor<1x3x8x8xf32>
  return %y : tensor<1x3x8x8xf32>
}
