// Training-mode exports rewritten for inference (PyTorch's eval()).
// RUN: fsdp-opt %s --split-input-file --fsdp-inference | FileCheck %s
// RUN: fsdp-opt %corpus/resnet18.onnx --batch-size=2 --fsdp-inference | FileCheck %s --check-prefix=RESNET --implicit-check-not=training_mode
// RUN: fsdp-opt %corpus/vit.onnx --batch-size=2 --fsdp-inference | FileCheck %s --check-prefix=VIT --implicit-check-not=onnx.Dropout

// CHECK-LABEL: func.func @dropout
// CHECK-NOT: onnx.Dropout
// CHECK: %[[ONES:.*]] = onnx.Constant dense<true> : tensor<4xi1>
// CHECK: return %arg0, %[[ONES]]
func.func @dropout(%x: tensor<4xf32>, %ratio: tensor<f32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %train = onnx.Constant dense<true> : tensor<i1>
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, tensor<4xi1>)
  return %y, %mask : tensor<4xf32>, tensor<4xi1>
}

// -----

// A ratio of 0 drops nothing in either mode: a run-time training_mode is
// harmless.
// CHECK-LABEL: func.func @dropout_ratio_zero
// CHECK-NOT: onnx.Dropout
// CHECK: return %arg0
func.func @dropout_ratio_zero(%x: tensor<4xf32>, %train: tensor<i1>) -> tensor<4xf32> {
  %ratio = onnx.Constant dense<0.0> : tensor<f32>
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<4xf32>, tensor<f32>, tensor<i1>) -> (tensor<4xf32>, none)
  return %y : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @batch_norm
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = onnx.BatchNormalization %arg0, %arg1, %arg2, %arg3, %arg4 {epsilon = 1.000000e-03 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, none, none)
// CHECK: return %[[Y]]
func.func @batch_norm(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3xf32> {
  %y, %rm, %rv = onnx.BatchNormalization %x, %s, %b, %m, %v {epsilon = 1.0e-3 : f32, training_mode = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3xf32>
}

// RESNET: onnx.BatchNormalization {{.*}} -> (tensor<2x64x16x16xf32>, none, none)
// VIT: func.func @forward

