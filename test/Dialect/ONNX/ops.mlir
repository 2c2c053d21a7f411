// Round trip of onnx ops: one per family, custom and generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK-LABEL: func.func @ops
func.func @ops(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>,
               %ids: tensor<2x3xi64>, %img: tensor<2x3x8x8xf32>,
               %k: tensor<4x3x3x3xf32>) {
  // CHECK: %[[NONE:.*]] = onnx.NoValue
  %none = onnx.NoValue
  // CHECK: onnx.Constant dense<[2, 8]> : tensor<2xi64>
  %shape = onnx.Constant dense<[2, 8]> : tensor<2xi64>
  // CHECK: onnx.Gemm %{{.*}}, %{{.*}}, %{{.*}} {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = onnx.Gemm %x, %w, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.Transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %wt = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  // CHECK: onnx.MatMul %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %m = onnx.MatMul %x, %wt : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.Add %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %a = onnx.Add %m, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.Erf %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = onnx.Erf %a : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.Softmax %{{.*}} {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = onnx.Softmax %e {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.LayerNormalization %{{.*}}, %{{.*}}, %[[NONE]] {epsilon = {{.*}} : f32} : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, none, none)
  %ln:3 = onnx.LayerNormalization %s, %b, %none {epsilon = 1.0e-6 : f32} : (tensor<2x8xf32>, tensor<8xf32>, none) -> (tensor<2x8xf32>, none, none)
  // CHECK: onnx.Reshape %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  %r = onnx.Reshape %ln#0, %shape : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  // CHECK: onnx.Gather %{{.*}}, %{{.*}} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %g = onnx.Gather %w, %ids : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: onnx.Concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  %c = onnx.Concat %g, %g {axis = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<4x3x4xf32>
  // CHECK: onnx.Conv %{{.*}}, %{{.*}}, %[[NONE]] {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<2x4x8x8xf32>
  %conv = onnx.Conv %img, %k, %none {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<2x4x8x8xf32>
  // CHECK: onnx.Dropout %{{.*}}, %[[NONE]], %[[NONE]] : (tensor<2x8xf32>, none, none) -> (tensor<2x8xf32>, none)
  %d:2 = onnx.Dropout %r, %none, %none : (tensor<2x8xf32>, none, none) -> (tensor<2x8xf32>, none)
  // CHECK: onnx.RandomUniformLike %{{.*}} {high = 2.000000e+00 : f32, seed = 3.000000e+00 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %rand = onnx.RandomUniformLike %r {high = 2.0 : f32, seed = 3.0 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.RandomUniform {dtype = 11 : i64, shape = array<i64: 3>} : () -> tensor<3xf64>
  %uniform = onnx.RandomUniform {dtype = 11 : i64, shape = array<i64: 3>} : () -> tensor<3xf64>
  // CHECK: onnx.RandomNormalLike %{{.*}} {mean = 1.000000e+00 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %normal = onnx.RandomNormalLike %r {mean = 1.0 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: onnx.RandomNormal {scale = 2.000000e+00 : f32, shape = array<i64: 3>} : () -> tensor<3xf32>
  %normal2 = onnx.RandomNormal {scale = 2.0 : f32, shape = array<i64: 3>} : () -> tensor<3xf32>
  // CHECK: onnx.Bernoulli %{{.*}} {dtype = 11 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf64>
  %coin = onnx.Bernoulli %r {dtype = 11 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf64>
  // CHECK: onnx.SoftmaxCrossEntropyLoss %{{.*}}, %{{.*}}, %[[NONE]] {ignore_index = -100 : i64} : (tensor<2x8xf32>, tensor<2xi64>, none) -> (tensor<f32>, none)
  %labels = onnx.Constant dense<[1, 3]> : tensor<2xi64>
  %loss:2 = onnx.SoftmaxCrossEntropyLoss %d#0, %labels, %none {ignore_index = -100 : i64} : (tensor<2x8xf32>, tensor<2xi64>, none) -> (tensor<f32>, none)
  return
}

// CHECK-LABEL: func.func @gather_nd
func.func @gather_nd(%data: tensor<2x3xf32>, %idx: tensor<2x1x1xi64>) -> tensor<2x1xf32> {
  // CHECK: onnx.GatherND %{{.*}}, %{{.*}} {batch_dims = 1 : i64} : (tensor<2x3xf32>, tensor<2x1x1xi64>) -> tensor<2x1xf32>
  %y = onnx.GatherND %data, %idx {batch_dims = 1 : i64} : (tensor<2x3xf32>, tensor<2x1x1xi64>) -> tensor<2x1xf32>
  return %y : tensor<2x1xf32>
}
