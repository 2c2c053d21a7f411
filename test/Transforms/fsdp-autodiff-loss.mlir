// RUN: fsdp-opt %s --fsdp-autodiff="loss=cross-entropy logits=output_1" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff="loss=cross-entropy logits=output_1 labels=targets ignore-index=0" | FileCheck %s --check-prefix=NAMED

// A model that returns logits [2, 3, 5] (and another output): the attached
// loss takes labels [2, 3] as a new input, flattens both to rows and
// returns the mean cross-entropy in place of the outputs. The loss keeps
// each row's log-sum-exp, which its gradient reads.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2x3xi64> {fsdp.name = "labels"}
// CHECK-SAME: -> (tensor<f32> {fsdp.name = "loss"}, tensor<4x5xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"})
// CHECK: %[[ROWS:.*]] = onnx.Reshape %{{.*}} : (tensor<2x3x5xf32>, tensor<2xi64>) -> tensor<6x5xf32>
// CHECK: %[[FLAT:.*]] = onnx.Reshape %[[LABELS]], %{{.*}} : (tensor<2x3xi64>, tensor<1xi64>) -> tensor<6xi64>
// CHECK: %[[LOSS:.*]], %[[LSE:.*]] = fsdp.softmax_cross_entropy %[[ROWS]], %[[FLAT]] {ignore_index = -100 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
// CHECK-NOT: onnx.SoftmaxCrossEntropyLoss
// CHECK: fsdp.softmax_cross_entropy_grad %[[ROWS]], %[[FLAT]], %{{.*}} lse(%[[LSE]]) {ignore_index = -100 : i64} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>, tensor<6xf32>) -> tensor<6x5xf32>
// CHECK: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<4x5xf32>

// NAMED: %{{.*}}: tensor<2x3xi64> {fsdp.name = "targets"}
// NAMED: fsdp.softmax_cross_entropy {{.*}} {ignore_index = 0 : i64}
module {
  fsdp.param @w : tensor<4x5xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(%x: tensor<2x3x4xf32> {fsdp.name = "x"}) -> (tensor<2x3x4xf32> {fsdp.name = "output_0"}, tensor<2x3x5xf32> {fsdp.name = "output_1"}) {
    %w = fsdp.get_param @w : tensor<4x5xf32>
    %y = onnx.MatMul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    return %x, %y : tensor<2x3x4xf32>, tensor<2x3x5xf32>
  }
}
