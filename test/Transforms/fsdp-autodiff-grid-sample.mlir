// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// GridSample: one fsdp.grid_sample_grad with the forward's attributes
// gives the image and the grid their gradients (the grid's through the Add
// of its offset, summed over the rows it was broadcast along).
// CHECK-LABEL: func.func @forward
// CHECK: %[[DX:.*]], %[[DGRID:.*]] = fsdp.grid_sample_grad %{{.*}}, %{{.*}}, %{{.*}} {align_corners = 1 : i64, mode = "bicubic", padding_mode = "reflection"} : (tensor<1x2x4x5xf32>, tensor<1x3x3x2xf32>, tensor<1x2x3x3xf32>) -> (tensor<1x2x4x5xf32>, tensor<1x3x3x2xf32>)
// CHECK: onnx.ReduceSum %[[DGRID]], %{{.*}} : (tensor<1x3x3x2xf32>, tensor<1xi64>) -> tensor<1x1x3x2xf32>
// CHECK: return
module {
  fsdp.param @image : tensor<1x2x4x5xf32> at <"m.onnx", offset = 0, length = 160>
  fsdp.param @offset : tensor<1x1x3x2xf32> at <"m.onnx", offset = 160, length = 24>
  func.func @forward(%points: tensor<1x3x3x2xf32>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %image = fsdp.get_param @image : tensor<1x2x4x5xf32>
    %offset = fsdp.get_param @offset : tensor<1x1x3x2xf32>
    %grid = onnx.Add %points, %offset : (tensor<1x3x3x2xf32>, tensor<1x1x3x2xf32>) -> tensor<1x3x3x2xf32>
    %y = onnx.GridSample %image, %grid {align_corners = 1 : i64, mode = "bicubic", padding_mode = "reflection"} : (tensor<1x2x4x5xf32>, tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xf32>
    %axes = onnx.Constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %loss = onnx.ReduceSum %y, %axes {keepdims = 0 : i64} : (tensor<1x2x3x3xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
