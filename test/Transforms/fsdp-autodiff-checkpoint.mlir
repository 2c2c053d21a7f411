// RUN: fsdp-opt %s --fsdp-autodiff=checkpoint-units=true | FileCheck %s

// Unit "blk" (Mul, Tanh) is recomputed at the start of its backward: the
// Tanh rule reads the recomputed output, so the forward's Tanh result is
// read only by the root unit's ReduceSum.
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.*]] = onnx.Mul %arg0, %{{.*}} {fsdp.unit = "blk"}
// CHECK: %[[T:.*]] = onnx.Tanh %[[M]] {fsdp.unit = "blk"}
// CHECK: onnx.ReduceSum %[[T]]
// CHECK: onnx.Constant dense<1.000000e+00>
// CHECK: %[[M2:.*]] = onnx.Mul %arg0, %{{.*}} {fsdp.unit = "blk"}
// CHECK: %[[T2:.*]] = onnx.Tanh %[[M2]] {fsdp.unit = "blk"}
// CHECK-NOT: %[[T]]
// CHECK: onnx.Mul %[[T2]], %[[T2]]
// CHECK-NOT: %[[T]]
// CHECK: return
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4xf32>
    %m = onnx.Mul %x, %w {fsdp.unit = "blk"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %t = onnx.Tanh %m {fsdp.unit = "blk"} : (tensor<4xf32>) -> tensor<4xf32>
    %l = onnx.ReduceSum %t, %none {keepdims = 0 : i64, fsdp.unit = ""} : (tensor<4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
