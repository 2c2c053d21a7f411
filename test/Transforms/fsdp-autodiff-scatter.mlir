// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// ScatterND and ScatterElements with reduction none: data's cotangent is g
// with the written positions zeroed (the same scatter of zeros), the
// updates' is g read back at them. ScatterND's k = 1 tuples are a Gather's
// indices as they are; its k = 2 tuples, known only at run time, become
// rows of g flattened over the two axes (index wrapped by a Gather from
// 0..size-1, times stride).
// ScatterElements reads back with GatherElements along the non-negative
// axis.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[I:[^:]*]]: tensor<2x1xi64>, %[[J:[^:]*]]: tensor<2x2xi64>, %[[E:[^:]*]]: tensor<1x3xi64>
// CHECK: onnx.Expand
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0
// CHECK: %[[Z1:.*]] = onnx.Constant dense<0.000000e+00> : tensor<1x3xf32>
// CHECK: %[[G1:.*]] = onnx.ScatterElements %[[G]], %[[E]], %[[Z1]] : (tensor<4x3xf32>
// CHECK: onnx.GatherElements %[[G]], %[[E]] : (tensor<4x3xf32>, tensor<1x3xi64>) -> tensor<1x3xf32>
// CHECK: %[[Z2:.*]] = onnx.Constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: %[[G2:.*]] = onnx.ScatterND %[[G1]], %[[J]], %[[Z2]] : (
// CHECK: %[[C0:.*]] = onnx.Gather %[[J]], %{{.*}} {axis = 1 : i64} : (tensor<2x2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK: %[[IOTA4:.*]] = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK: %[[R0:.*]] = onnx.Gather %[[IOTA4]], %[[C0]] : (tensor<4xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[THREE:.*]] = onnx.Constant dense<3> : tensor<i64>
// CHECK: %[[S0:.*]] = onnx.Mul %[[R0]], %[[THREE]]
// CHECK: %[[C1:.*]] = onnx.Gather %[[J]], %{{.*}} {axis = 1 : i64}
// CHECK: %[[IOTA3:.*]] = onnx.Constant dense<[0, 1, 2]> : tensor<3xi64>
// CHECK: %[[R1:.*]] = onnx.Gather %[[IOTA3]], %[[C1]]
// CHECK: %[[ROWS:.*]] = onnx.Add %[[S0]], %[[R1]]
// CHECK: %[[FLAT:.*]] = onnx.Reshape %[[G1]], %{{.*}} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<12xf32>
// CHECK: %[[GV:.*]] = onnx.Gather %[[FLAT]], %[[ROWS]] : (tensor<12xf32>, tensor<2xi64>) -> tensor<2xf32>
// CHECK: %[[GW:.*]] = onnx.ScatterND %[[G2]], %[[I]], %{{.*}}
// CHECK: %[[TUPLES:.*]] = onnx.Reshape %[[I]], %{{.*}} : (tensor<2x1xi64>, tensor<1xi64>) -> tensor<2xi64>
// CHECK: onnx.Gather %[[G2]], %[[TUPLES]] : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: return %{{.*}}, %[[GW]], %{{.*}}, %[[GV]], %{{.*}} :
module {
  fsdp.param @w : tensor<4x3xf32> at <"m.onnx", offset = 0, length = 48>
  fsdp.param @u : tensor<2x3xf32> at <"m.onnx", offset = 48, length = 24>
  fsdp.param @v : tensor<2xf32> at <"m.onnx", offset = 72, length = 8>
  fsdp.param @r : tensor<1x3xf32> at <"m.onnx", offset = 80, length = 12>
  func.func @forward(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %j: tensor<2x2xi64>, %e: tensor<1x3xi64>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x3xf32>
    %u = fsdp.get_param @u : tensor<2x3xf32>
    %v = fsdp.get_param @v : tensor<2xf32>
    %r = fsdp.get_param @r : tensor<1x3xf32>
    %a = onnx.ScatterND %w, %i, %u : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %b = onnx.ScatterND %a, %j, %v : (tensor<4x3xf32>, tensor<2x2xi64>, tensor<2xf32>) -> tensor<4x3xf32>
    %c = onnx.ScatterElements %b, %e, %r {axis = -2 : i64} : (tensor<4x3xf32>, tensor<1x3xi64>, tensor<1x3xf32>) -> tensor<4x3xf32>
    %m = onnx.Mul %c, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Constant k = 2 tuples (a negative index counts from the end): their rows
// are computed at compile time, [3, -1] -> 3 * 3 + 2, [0, 1] -> 1.
// CHECK-LABEL: func.func @forward
// CHECK: %[[ROWS:.*]] = onnx.Constant dense<[11, 1]> : tensor<2xi64>
// CHECK-NEXT: onnx.Constant dense<12> : tensor<1xi64>
// CHECK-NEXT: %[[FLAT:.*]] = onnx.Reshape
// CHECK-NEXT: onnx.Gather %[[FLAT]], %[[ROWS]] : (tensor<12xf32>, tensor<2xi64>) -> tensor<2xf32>
module {
  fsdp.param @v : tensor<2xf32> at <"m.onnx", offset = 0, length = 8>
  func.func @forward(%x: tensor<4x3xf32>, %w: tensor<4x3xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %v = fsdp.get_param @v : tensor<2xf32>
    %j = onnx.Constant dense<[[3, -1], [0, 1]]> : tensor<2x2xi64>
    %b = onnx.ScatterND %w, %j, %v : (tensor<4x3xf32>, tensor<2x2xi64>, tensor<2xf32>) -> tensor<4x3xf32>
    %m = onnx.Mul %b, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Reduction add: data's cotangent is g itself, the updates' g read back.
// Reduction mul: data's is g times the updates scattered into ones (their
// product where an index repeats); the updates here are not trainable.
// CHECK-LABEL: func.func @forward
// CHECK: onnx.Expand
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0
// CHECK: %[[ONES:.*]] = onnx.Constant dense<1.000000e+00> : tensor<4x3xf32>
// CHECK: %[[PRODUCT:.*]] = onnx.ScatterND %[[ONES]], %arg1, %arg2 {reduction = "mul"}
// CHECK: %[[G1:.*]] = onnx.Mul %[[G]], %[[PRODUCT]]
// CHECK: %[[GU:.*]] = onnx.GatherElements %[[G1]], %arg3 {axis = 1 : i64}
// CHECK: return %{{.*}}, %[[G1]], %[[GU]] :
module {
  fsdp.param @w : tensor<4x3xf32> at <"m.onnx", offset = 0, length = 48>
  fsdp.param @u : tensor<4x2xf32> at <"m.onnx", offset = 48, length = 32>
  func.func @forward(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %y: tensor<2x3xf32>, %e: tensor<4x2xi64>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x3xf32>
    %u = fsdp.get_param @u : tensor<4x2xf32>
    %a = onnx.ScatterElements %w, %e, %u {axis = 1 : i64, reduction = "add"} : (tensor<4x3xf32>, tensor<4x2xi64>, tensor<4x2xf32>) -> tensor<4x3xf32>
    %b = onnx.ScatterND %a, %i, %y {reduction = "mul"} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %m = onnx.Mul %b, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4x3xf32>, none) -> tensor<f32>
    return %s : tensor<f32>
  }
}
