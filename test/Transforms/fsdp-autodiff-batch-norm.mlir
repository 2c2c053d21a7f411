// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff=fuse-batch-norm=false | FileCheck %s --check-prefix=DECOMPOSED

// Conv -> BatchNorm (training) -> Relu -> loss: BatchNorm becomes one
// fsdp.batch_norm_train (epsilon and ONNX's momentum kept), whose running
// statistics are returned as the buffers' updates after the gradients and
// whose num_batches_tracked counts the step; its gradient is one
// fsdp.batch_norm_grad from the saved mean and inverse std, which gives the
// conv's output, the scale and the bias theirs. No decomposed statistics.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @bn.weight, fsdp.name = "grad.bn.weight"},
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @bn.bias, fsdp.name = "grad.bn.bias"},
// CHECK-SAME: tensor<4xf32> {fsdp.name = "update.bn.running_mean", fsdp.update_of = @bn.running_mean},
// CHECK-SAME: tensor<4xf32> {fsdp.name = "update.bn.running_var", fsdp.update_of = @bn.running_var},
// CHECK-SAME: tensor<i64> {fsdp.name = "update.bn.num_batches_tracked", fsdp.update_of = @bn.num_batches_tracked})
// CHECK-NOT: onnx.ReduceMean
// CHECK: %[[Y:.*]] = onnx.Conv
// CHECK: %[[S:.*]] = fsdp.get_param @bn.weight
// CHECK: %[[N:.*]], %[[MEAN:.*]], %[[INVSTD:.*]], %[[RM:.*]], %[[RV:.*]] = fsdp.batch_norm_train %[[Y]], %[[S]], %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32, momentum = 8.000000e-01 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[COUNT:.*]] = onnx.Add
// CHECK: onnx.Relu %[[N]]
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DB:.*]] = fsdp.batch_norm_grad %{{.*}}, %[[Y]], %[[S]], %[[MEAN]], %[[INVSTD]] : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: fsdp.conv_grad_weight %arg0, %[[DX]]
// CHECK-NOT: onnx.ReduceMean
// CHECK: return %{{.*}}, %{{.*}}, %[[DS]], %[[DB]], %[[RM]], %[[RV]], %[[COUNT]]
// The decomposed form is kept with fuse-batch-norm=false.
// DECOMPOSED-LABEL: func.func @forward
// DECOMPOSED-NOT: fsdp.batch_norm_train
// DECOMPOSED: onnx.ReduceMean %{{.*}} {axes = array<i64: 0, 2, 3>}
// DECOMPOSED-NOT: fsdp.batch_norm_grad
module {
  fsdp.param @conv.weight : tensor<4x3x3x3xf32> at <"m.onnx", offset = 0, length = 432>
  fsdp.param @bn.weight : tensor<4xf32> at <"m.onnx", offset = 432, length = 16>
  fsdp.param @bn.bias : tensor<4xf32> at <"m.onnx", offset = 448, length = 16>
  fsdp.buffer @bn.running_mean : tensor<4xf32> at <"m.onnx", offset = 464, length = 16>
  fsdp.buffer @bn.running_var : tensor<4xf32> at <"m.onnx", offset = 480, length = 16>
  fsdp.buffer @bn.num_batches_tracked : tensor<i64> at <"m.onnx", offset = 496, length = 8>
  func.func @forward(%x: tensor<2x3x8x8xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @conv.weight : tensor<4x3x3x3xf32>
    %y = onnx.Conv %x, %w, %none {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<2x4x8x8xf32>
    %s = fsdp.get_param @bn.weight : tensor<4xf32>
    %t = fsdp.get_param @bn.bias : tensor<4xf32>
    %m = fsdp.get_buffer @bn.running_mean : tensor<4xf32>
    %v = fsdp.get_buffer @bn.running_var : tensor<4xf32>
    %n, %rm, %rv = onnx.BatchNormalization %y, %s, %t, %m, %v {epsilon = 1.0e-3 : f32, momentum = 0.8 : f32, training_mode = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    %r = onnx.Relu %n : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    %l = onnx.ReduceSum %r, %none {keepdims = 0 : i64} : (tensor<2x4x8x8xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// An eval-mode BatchNorm in a training step stays decomposed (the running
// statistics normalize): no fused op.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: fsdp.batch_norm_train
// CHECK: onnx.Reciprocal
// CHECK-NOT: fsdp.batch_norm_grad
// DECOMPOSED-LABEL: func.func @forward
module {
  fsdp.param @bn.weight : tensor<3xf32> at <"m.onnx", offset = 0, length = 12>
  fsdp.param @bn.bias : tensor<3xf32> at <"m.onnx", offset = 12, length = 12>
  fsdp.buffer @bn.running_mean : tensor<3xf32> at <"m.onnx", offset = 24, length = 12>
  fsdp.buffer @bn.running_var : tensor<3xf32> at <"m.onnx", offset = 36, length = 12>
  func.func @forward(%x: tensor<5x3xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %s = fsdp.get_param @bn.weight : tensor<3xf32>
    %t = fsdp.get_param @bn.bias : tensor<3xf32>
    %m = fsdp.get_buffer @bn.running_mean : tensor<3xf32>
    %v = fsdp.get_buffer @bn.running_var : tensor<3xf32>
    %n, %a, %b = onnx.BatchNormalization %x, %s, %t, %m, %v : (tensor<5x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<5x3xf32>, none, none)
    %l = onnx.ReduceSum %n, %none {keepdims = 0 : i64} : (tensor<5x3xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
