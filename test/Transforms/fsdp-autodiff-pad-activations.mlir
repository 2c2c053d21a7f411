// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// Pad: constant mode's gradient is a Slice of g; reflect and edge scatter
// g back to the positions each output read (fsdp.gather_grad per padded
// axis, repeats accumulating). PRelu: the slope's gradient is summed over
// the dimensions it was broadcast along.
// CHECK-LABEL: func.func @forward
// HardSigmoid (y inside (0, 1)) then HardSwish (x against -3 and 3):
// where-masks, as torch's backward.
// CHECK: onnx.And
// CHECK: onnx.LessOrEqual
// CHECK: onnx.Less
// Reflect [2, 3] -> [2, 6] along axis 1 (pads 1 before, 2 after): the
// positions [1, 0, 1, 2, 1, 0].
// CHECK: %[[POS:.*]] = onnx.Constant dense<[1, 0, 1, 2, 1, 0]> : tensor<6xi64>
// CHECK: fsdp.gather_grad %{{.*}}, %[[POS]] {axis = 1 : i64} : (tensor<2x6xf32>, tensor<6xi64>) -> tensor<2x3xf32>
// Constant [2, 3] -> [3, 3] (pads 1 before on axis 0): a Slice from row 1.
// CHECK: %[[STARTS:.*]] = onnx.Constant dense<[1, 0]> : tensor<2xi64>
// CHECK: %[[ENDS:.*]] = onnx.Constant dense<3> : tensor<2xi64>
// CHECK: onnx.Slice %{{.*}}, %[[STARTS]], %[[ENDS]], %{{.*}}, %{{.*}} : (tensor<3x3xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: onnx.ReduceSum %{{.*}} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
// CHECK: return
module {
  fsdp.param @w : tensor<2x3xf32> at <"m.onnx", offset = 0, length = 24>
  fsdp.param @s : tensor<3xf32> at <"m.onnx", offset = 24, length = 12>
  func.func @forward(%x: tensor<2x3xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<2x3xf32>
    %s = fsdp.get_param @s : tensor<3xf32>
    %h = onnx.Mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %p = onnx.PRelu %h, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %pads = onnx.Constant dense<[1, 0, 0, 0]> : tensor<4xi64>
    %k = onnx.Pad %p, %pads, %none : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<3x3xf32>
    %rp = onnx.Constant dense<[0, 1, 0, 2]> : tensor<4xi64>
    %r = onnx.Pad %p, %rp, %none {mode = "reflect"} : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<2x6xf32>
    %hs = onnx.HardSwish %r : (tensor<2x6xf32>) -> tensor<2x6xf32>
    %hg = onnx.HardSigmoid %hs : (tensor<2x6xf32>) -> tensor<2x6xf32>
    %axes = onnx.Constant dense<[0, 1]> : tensor<2xi64>
    %l1 = onnx.ReduceSum %hg, %axes {keepdims = 0 : i64} : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<f32>
    %l2 = onnx.ReduceSum %k, %axes {keepdims = 0 : i64} : (tensor<3x3xf32>, tensor<2xi64>) -> tensor<f32>
    %loss = onnx.Add %l1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Resize: per resized axis, nearest scatters g back to the row each output
// read; linear scatters g (1 - w) to the lower and g w to the upper
// neighbour (the backward runs in reverse, so the linear Resize first).
// CHECK-LABEL: func.func @forward
// Linear (pytorch_half_pixel) along axis 3, [2] -> [4]: the sources -0.25,
// 0.25, 0.75, 1.25 between neighbours [0, 0, 0, 1] and [0, 1, 1, 1].
// CHECK: onnx.Constant dense<{{\[\[\[\[}}2.500000e-01, 7.500000e-01, 2.500000e-01, 7.500000e-01]]]]> : tensor<1x1x1x4xf32>
// CHECK: onnx.Constant dense<[0, 0, 0, 1]> : tensor<4xi64>
// CHECK: onnx.Constant dense<{{\[\[\[\[}}7.500000e-01, 2.500000e-01, 7.500000e-01, 2.500000e-01]]]]> : tensor<1x1x1x4xf32>
// CHECK: onnx.Constant dense<[0, 1, 1, 1]> : tensor<4xi64>
// CHECK: onnx.Add
// Nearest [1, 1, 2, 2] -> [1, 1, 4, 4] by 2 (asymmetric, floor): rows
// [0, 0, 1, 1] on axes 2 and 3.
// CHECK: %[[ROWS:.*]] = onnx.Constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK: fsdp.gather_grad %{{.*}}, %[[ROWS]] {axis = 2 : i64} : (tensor<1x1x4x4xf32>, tensor<4xi64>) -> tensor<1x1x2x4xf32>
// CHECK: fsdp.gather_grad %{{.*}}, %{{.*}} {axis = 3 : i64} : (tensor<1x1x2x4xf32>, tensor<4xi64>) -> tensor<1x1x2x2xf32>
module {
  fsdp.param @w : tensor<1x1x2x2xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<1x1x2x2xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<1x1x2x2xf32>
    %h = onnx.Mul %x, %w : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
    %scales = onnx.Constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
    %n = onnx.Resize %h, %none, %scales, %none {coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
    %s2 = onnx.Constant dense<[1.0, 1.0, 1.0, 2.0]> : tensor<4xf32>
    %l = onnx.Resize %h, %none, %s2, %none {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x2x4xf32>
    %axes = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %l1 = onnx.ReduceSum %n, %axes {keepdims = 0 : i64} : (tensor<1x1x4x4xf32>, tensor<4xi64>) -> tensor<f32>
    %sq = onnx.Mul %l, %l : (tensor<1x1x2x4xf32>, tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
    %l2 = onnx.ReduceSum %sq, %axes {keepdims = 0 : i64} : (tensor<1x1x2x4xf32>, tensor<4xi64>) -> tensor<f32>
    %loss = onnx.Add %l1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// ConvTranspose: dX is the convolution it transposes applied to g, dW that
// convolution's weight gradient with g as its input, dB the sum of g.
// CHECK-LABEL: func.func @forward
// CHECK: fsdp.conv_grad_weight %{{.*}}, %arg0 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x6x6xf32>, tensor<1x3x3x3xf32>) -> tensor<3x2x3x3xf32>
// CHECK: onnx.ReduceSum %{{.*}} : (tensor<1x2x6x6xf32>, tensor<3xi64>) -> tensor<1x2x1x1xf32>
module {
  fsdp.param @w : tensor<3x2x3x3xf32> at <"m.onnx", offset = 0, length = 216>
  fsdp.param @b : tensor<2xf32> at <"m.onnx", offset = 216, length = 8>
  func.func @forward(%x: tensor<1x3x3x3xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %w = fsdp.get_param @w : tensor<3x2x3x3xf32>
    %b = fsdp.get_param @b : tensor<2xf32>
    %y = onnx.ConvTranspose %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>} : (tensor<1x3x3x3xf32>, tensor<3x2x3x3xf32>, tensor<2xf32>) -> tensor<1x2x6x6xf32>
    %sq = onnx.Mul %y, %y : (tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
    %axes = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %loss = onnx.ReduceSum %sq, %axes {keepdims = 0 : i64} : (tensor<1x2x6x6xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
