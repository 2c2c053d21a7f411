// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff=fuse-batch-norm=false | FileCheck %s

// Conv -> BatchNorm (training) -> Relu -> MaxPool -> GlobalAveragePool:
// with fuse-batch-norm=false (fsdp-autodiff-batch-norm.mlir has the fused
// form) BatchNorm becomes the ops it computes (batch statistics) plus its running
// statistics' updates, returned after the gradients; Conv's gradients are
// fsdp.conv_grad_input / conv_grad_weight with the window's defaults filled
// in; pooling's is fsdp.pool_grad; the global average's is a scaled Expand.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {fsdp.name = "loss"},
// CHECK-SAME: tensor<4x3x3x3xf32> {fsdp.grad_of = @conv.weight, fsdp.name = "grad.conv.weight"},
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @conv.bias, fsdp.name = "grad.conv.bias"},
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @bn.weight, fsdp.name = "grad.bn.weight"},
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @bn.bias, fsdp.name = "grad.bn.bias"},
// CHECK-SAME: tensor<4xf32> {fsdp.name = "update.bn.running_mean", fsdp.update_of = @bn.running_mean},
// CHECK-SAME: tensor<4xf32> {fsdp.name = "update.bn.running_var", fsdp.update_of = @bn.running_var})
// The forward: batch mean and (biased) variance over N, H, W.
// CHECK: %[[Y:.*]] = onnx.Conv
// CHECK: %[[MEAN:.*]] = onnx.ReduceMean %[[Y]] {axes = array<i64: 0, 2, 3>} : (tensor<2x4x8x8xf32>) -> tensor<1x4x1x1xf32>
// CHECK: %[[D:.*]] = onnx.Sub %[[Y]], %[[MEAN]]
// CHECK: %[[VAR:.*]] = onnx.ReduceMean %{{.*}} {axes = array<i64: 0, 2, 3>}
// CHECK: onnx.Reciprocal
// CHECK: %[[XHAT:.*]] = onnx.Mul %[[D]], %{{.*}} : (tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32>)
// Running statistics: running * 0.9 + batch * (1 - 0.9), the variance
// unbiased (times 128 / 127).
// CHECK: onnx.Constant dense<0.100000024> : tensor<f32>
// CHECK: onnx.Constant dense<0.899999976> : tensor<f32>
// CHECK: %[[NEWMEAN:.*]] = onnx.Add
// CHECK: onnx.Constant dense<0.100787424> : tensor<f32>
// CHECK: %[[NEWVAR:.*]] = onnx.Add
// CHECK: onnx.MaxPool
// CHECK: onnx.GlobalAveragePool
// Backward: GlobalAveragePool (1/16 spread over 4x4), MaxPool, Relu, the
// BatchNorm ops, then Conv.
// CHECK: onnx.Constant dense<6.250000e-02> : tensor<f32>
// CHECK: onnx.Expand %{{.*}} : (tensor<2x4x1x1xf32>, tensor<4xi64>) -> tensor<2x4x4x4xf32>
// CHECK: fsdp.pool_grad %{{.*}}, %{{.*}} {ceil_mode = 0 : i64, count_include_pad = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 2, 2>, mode = "max", pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK: onnx.Where
// CHECK: %[[GW:.*]] = fsdp.conv_grad_weight %arg0, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
// CHECK: %[[GB:.*]] = onnx.ReduceSum %{{.*}} : (tensor<2x4x8x8xf32>, tensor<3xi64>) -> tensor<1x4x1x1xf32>
// The input needs no gradient: no conv_grad_input.
// CHECK-NOT: fsdp.conv_grad_input
// CHECK: return %{{.*}}, %[[GW]], %{{.*}}, %{{.*}}, %{{.*}}, %[[NEWMEAN]], %[[NEWVAR]]
module {
  fsdp.param @conv.weight : tensor<4x3x3x3xf32> at <"m.onnx", offset = 0, length = 432>
  fsdp.param @conv.bias : tensor<4xf32> at <"m.onnx", offset = 432, length = 16>
  fsdp.param @bn.weight : tensor<4xf32> at <"m.onnx", offset = 448, length = 16>
  fsdp.param @bn.bias : tensor<4xf32> at <"m.onnx", offset = 464, length = 16>
  fsdp.buffer @bn.running_mean : tensor<4xf32> at <"m.onnx", offset = 480, length = 16>
  fsdp.buffer @bn.running_var : tensor<4xf32> at <"m.onnx", offset = 496, length = 16>
  func.func @forward(%x: tensor<2x3x8x8xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %w = fsdp.get_param @conv.weight : tensor<4x3x3x3xf32>
    %b = fsdp.get_param @conv.bias : tensor<4xf32>
    %y = onnx.Conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
    %s = fsdp.get_param @bn.weight : tensor<4xf32>
    %t = fsdp.get_param @bn.bias : tensor<4xf32>
    %m = fsdp.get_buffer @bn.running_mean : tensor<4xf32>
    %v = fsdp.get_buffer @bn.running_var : tensor<4xf32>
    %n, %rm, %rv = onnx.BatchNormalization %y, %s, %t, %m, %v {training_mode = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    %r = onnx.Relu %n : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    %p, %i = onnx.MaxPool %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> (tensor<2x4x4x4xf32>, none)
    %g = onnx.GlobalAveragePool %p : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x1xf32>
    %none = onnx.NoValue
    %l = onnx.ReduceSum %g, %none {keepdims = 0 : i64} : (tensor<2x4x1x1xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A Conv whose input needs a gradient too (stride 2, groups 2); average
// pooling; a Dropout that drops nothing (ratio 0 in training) passes through.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: onnx.Dropout
// CHECK: fsdp.pool_grad %{{.*}}, %{{.*}} {{{.*}}count_include_pad = 1 : i64{{.*}}mode = "average"
// CHECK: fsdp.conv_grad_input %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x4x3x3xf32>, tensor<4x2x2x2xf32>) -> tensor<1x4x6x6xf32>
// CHECK: fsdp.conv_grad_weight
module {
  fsdp.param @a : tensor<4x4x1x1xf32> at <"m.onnx", offset = 0, length = 64>
  fsdp.param @w : tensor<4x2x2x2xf32> at <"m.onnx", offset = 64, length = 128>
  func.func @forward(%x: tensor<1x4x6x6xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %a = fsdp.get_param @a : tensor<4x4x1x1xf32>
    %h = onnx.Conv %x, %a, %none : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>, none) -> tensor<1x4x6x6xf32>
    %ratio = onnx.Constant dense<0.0> : tensor<f32>
    %train = onnx.Constant dense<true> : tensor<i1>
    %d, %mask = onnx.Dropout %h, %ratio, %train : (tensor<1x4x6x6xf32>, tensor<f32>, tensor<i1>) -> (tensor<1x4x6x6xf32>, none)
    %w = fsdp.get_param @w : tensor<4x2x2x2xf32>
    %y = onnx.Conv %d, %w, %none {group = 2 : i64, strides = array<i64: 2, 2>} : (tensor<1x4x6x6xf32>, tensor<4x2x2x2xf32>, none) -> tensor<1x4x3x3xf32>
    %p = onnx.AveragePool %y {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = 1 : i64} : (tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
    %l = onnx.ReduceSum %p, %none {keepdims = 0 : i64} : (tensor<1x4x3x3xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// auto_pad is resolved to the explicit pads the lowering gives the forward
// (SAME_UPPER, 8 wide, kernel 3, stride 2: 4 outputs, one pad at the end of
// each spatial axis), so the gradients carry [0, 0, 1, 1]: the pooling's
// (its kernel 3, stride 2 over the 8 x 8 input too) and the Conv's.
// CHECK-LABEL: func.func @forward
// CHECK: fsdp.pool_grad %{{.*}}, %{{.*}} {{{.*}}kernel_shape = array<i64: 3, 3>, mode = "max", pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32>
// CHECK: fsdp.conv_grad_input %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
// CHECK: fsdp.conv_grad_weight %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>}
module {
  fsdp.param @a : tensor<3x3x1x1xf32> at <"m.onnx", offset = 0, length = 36>
  fsdp.param @w : tensor<4x3x3x3xf32> at <"m.onnx", offset = 36, length = 432>
  func.func @forward(%x: tensor<2x3x8x8xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %a = fsdp.get_param @a : tensor<3x3x1x1xf32>
    %none = onnx.NoValue
    %h = onnx.Conv %x, %a, %none : (tensor<2x3x8x8xf32>, tensor<3x3x1x1xf32>, none) -> tensor<2x3x8x8xf32>
    %w = fsdp.get_param @w : tensor<4x3x3x3xf32>
    %y = onnx.Conv %h, %w, %none {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<2x4x4x4xf32>
    %p, %i = onnx.MaxPool %h {auto_pad = "SAME_UPPER", kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>, none)
    %lp = onnx.ReduceSum %p, %none {keepdims = 0 : i64} : (tensor<2x3x4x4xf32>, none) -> tensor<f32>
    %ly = onnx.ReduceSum %y, %none {keepdims = 0 : i64} : (tensor<2x4x4x4xf32>, none) -> tensor<f32>
    %l = onnx.Add %lp, %ly : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// 1-D and 3-D pooling have gradient rules too (SEW's squeeze AvgPool1d; a
// 3-D max): fsdp.pool_grad with one window entry per spatial dim.
// CHECK-LABEL: func.func @forward
// CHECK-DAG: fsdp.pool_grad %{{.*}}, %{{.*}} {{{.*}}kernel_shape = array<i64: 2>, mode = "average", pads = array<i64: 0, 0>, strides = array<i64: 2>} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
// CHECK-DAG: fsdp.pool_grad %{{.*}}, %{{.*}} {{{.*}}kernel_shape = array<i64: 2, 2, 2>, mode = "max", pads = array<i64: 0, 0, 0, 0, 0, 0>, strides = array<i64: 2, 2, 2>} : (tensor<2x1x2x2x8xf32>, tensor<2x1x1x1x4xf32>) -> tensor<2x1x2x2x8xf32>
module {
  fsdp.param @a : tensor<4x4x1xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %a = fsdp.get_param @a : tensor<4x4x1xf32>
    %h = onnx.Conv %x, %a, %none : (tensor<2x4x8xf32>, tensor<4x4x1xf32>, none) -> tensor<2x4x8xf32>
    %p = onnx.AveragePool %h {kernel_shape = array<i64: 2>, strides = array<i64: 2>} : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
    %shape = onnx.Constant dense<[2, 1, 2, 2, 8]> : tensor<5xi64>
    %v = onnx.Reshape %h, %shape : (tensor<2x4x8xf32>, tensor<5xi64>) -> tensor<2x1x2x2x8xf32>
    %m, %i = onnx.MaxPool %v {kernel_shape = array<i64: 2, 2, 2>, strides = array<i64: 2, 2, 2>} : (tensor<2x1x2x2x8xf32>) -> (tensor<2x1x1x1x4xf32>, none)
    %lp = onnx.ReduceSum %p, %none {keepdims = 0 : i64} : (tensor<2x4x4xf32>, none) -> tensor<f32>
    %lm = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<2x1x1x1x4xf32>, none) -> tensor<f32>
    %l = onnx.Add %lp, %lm : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
