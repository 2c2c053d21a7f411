// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// Gemm + Relu + cross-entropy: the backward of each op, the gradient of a
// tied parameter summed over its two reads, none for the frozen one.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {fsdp.name = "loss"}, tensor<4x4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}, tensor<4xf32> {fsdp.grad_of = @b, fsdp.name = "grad.b"})
// CHECK: %[[LOSS:.*]], %{{.*}} = onnx.SoftmaxCrossEntropyLoss
// CHECK: %[[SEED:.*]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DS:.*]] = fsdp.softmax_cross_entropy_grad %{{.*}}, %arg1, %[[SEED]] :
// Second Gemm (transB = 1): dA = g B, dB = g^T A, dC = sum over rows.
// CHECK: onnx.MatMul %[[DS]], %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: onnx.MatMul %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK: onnx.ReduceSum %[[DS]], %{{.*}} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
// Relu: where(x > 0, g, 0).
// CHECK: onnx.Greater
// CHECK: onnx.Where
// The tied weight's two gradients are added; the frozen @f gets nothing.
// CHECK: %[[GW:.*]] = onnx.Add %{{.*}}, %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: return %[[LOSS]], %[[GW]], %{{.*}} : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>
module {
  fsdp.param @f : tensor<4x4xf32> frozen at <"m.onnx", offset = 0, length = 64>
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 64, length = 64>
  fsdp.param @b : tensor<4xf32> at <"m.onnx", offset = 128, length = 16>
  func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %f = fsdp.get_param @f : tensor<4x4xf32>
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %b = fsdp.get_param @b : tensor<4xf32>
    %h = onnx.Gemm %x, %f, %none {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
    %y1 = onnx.Gemm %h, %w, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = onnx.Relu %y1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %w2 = fsdp.get_param @w : tensor<4x4xf32>
    %y2 = onnx.Gemm %r, %w2, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %loss, %lp = onnx.SoftmaxCrossEntropyLoss %y2, %labels, %none : (tensor<2x4xf32>, tensor<2xi64>, none) -> (tensor<f32>, none)
    return %loss : tensor<f32>
  }
}

// -----

// Broadcasting is undone by summation; Tanh and Sigmoid use their outputs.
// CHECK-LABEL: func.func @forward
// CHECK: onnx.Tanh
// CHECK: onnx.Sigmoid
// CHECK: onnx.ReduceMean
// The mean's backward: reshape, scale by 1/count, expand back.
// CHECK: onnx.Constant dense<6.250000e-02> : tensor<f32>
// CHECK: onnx.Expand
// d(x * s)/ds for s [8] broadcast over [2, 8]: summed over axis 0.
// CHECK: onnx.ReduceSum %{{.*}} : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
// CHECK: onnx.Reshape %{{.*}} : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<8xf32>
module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %1 = onnx.Tanh %0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %2 = onnx.Sigmoid %1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %3 = onnx.ReduceMean %2 {keepdims = 0 : i64} : (tensor<2x8xf32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}
