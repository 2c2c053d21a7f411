// RUN: fsdp-opt %s --fsdp-autodiff | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-inference --fsdp-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// A Dropout that drops stays in a training step, numbered in the function's
// order and with its mask as a result; its gradient is the cotangent where
// the mask kept, times 1 / (1 - p) (1 / 0.75 = 1.33333337 in f32), and 0
// elsewhere. One with ratio 0 is removed. fsdp-inference leaves the
// numbered ones; lowering makes them `dropout` kernels.

// CHECK-LABEL: func.func @forward
// CHECK: %[[Y0:.*]], %[[M0:.*]] = onnx.Dropout %{{.*}} {fsdp.random_op = 0 : i64} : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, tensor<8xi1>)
// CHECK: %[[Y1:.*]], %[[M1:.*]] = onnx.Dropout %[[Y0]], %{{.*}} {fsdp.random_op = 1 : i64} : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, tensor<8xi1>)
// CHECK: %[[SCALE1:.*]] = onnx.Constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[G1:.*]] = onnx.Mul %{{.*}}, %[[SCALE1]]
// CHECK: %[[D1:.*]] = onnx.Where %[[M1]], %[[G1]], %{{.*}}
// CHECK: %[[SCALE0:.*]] = onnx.Constant dense<1.33333337> : tensor<f32>
// CHECK: %[[G0:.*]] = onnx.Mul %[[D1]], %[[SCALE0]]
// CHECK: onnx.Where %[[M0]], %[[G0]], %{{.*}}

// LOWER-LABEL: func.func @forward
// LOWER: fsdp.kernel "dropout"(%{{.*}}) params {op = 0 : i64, ratio = 2.500000e-01 : f64, slot = 0 : i64, slots = 1 : i64}
// LOWER: fsdp.kernel "dropout"(%{{.*}}) params {op = 1 : i64, ratio = 5.000000e-01 : f64, slot = 0 : i64, slots = 1 : i64}
module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<8xf32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %quarter = onnx.Constant dense<0.25> : tensor<f32>
    %half = onnx.Constant dense<0.5> : tensor<f32>
    %zero = onnx.Constant dense<0.0> : tensor<f32>
    %train = onnx.Constant dense<true> : tensor<i1>
    %1, %m1 = onnx.Dropout %0, %quarter, %train : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, none)
    %2, %m2 = onnx.Dropout %1, %zero, %train : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, none)
    %3, %m3 = onnx.Dropout %2, %half, %train : (tensor<8xf32>, tensor<f32>, tensor<i1>) -> (tensor<8xf32>, tensor<8xi1>)
    %4 = onnx.ReduceMean %3 {keepdims = 0 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %4 : tensor<f32>
  }
}
