// RUN: fsdp-opt %s --split-input-file --fsdp-lower-to-runtime | FileCheck %s

// GridSample is one grid_sample kernel with every attribute explicit (the
// ONNX defaults: bilinear, zeros, align_corners 0); its gradient one
// grid_sample_grad kernel giving d(X) and d(grid).

// CHECK-LABEL: func.func @grid_sample
// CHECK: fsdp.kernel "grid_sample"(%arg0, %arg1) params {align_corners = 0 : i64, mode = "bilinear", padding_mode = "zeros"} : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) -> tensor<2x3x5x6xf32>
// CHECK: fsdp.kernel "grid_sample"(%arg0, %arg1) params {align_corners = 1 : i64, mode = "bicubic", padding_mode = "reflection"} : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) -> tensor<2x3x5x6xf32>
// CHECK: fsdp.kernel "grid_sample_grad"(%arg0, %arg1, %{{.*}}) params {align_corners = 0 : i64, mode = "nearest", padding_mode = "border"} : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>, tensor<2x3x5x6xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>)
func.func @grid_sample(%x: tensor<2x3x8x8xf32>, %grid: tensor<2x5x6x2xf32>)
    -> (tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) {
  %y = onnx.GridSample %x, %grid : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) -> tensor<2x3x5x6xf32>
  %c = onnx.GridSample %x, %grid {align_corners = 1 : i64, mode = "bicubic", padding_mode = "reflection"} : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) -> tensor<2x3x5x6xf32>
  %gx, %ggrid = fsdp.grid_sample_grad %x, %grid, %y {mode = "nearest", padding_mode = "border", align_corners = 0 : i64} : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>, tensor<2x3x5x6xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>)
  return %y, %c, %gx, %ggrid : tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32>, tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>
}

// -----

// float64 runs as it is.
// CHECK-LABEL: func.func @f64
// CHECK: fsdp.kernel "grid_sample"(%arg0, %arg1) params {align_corners = 0 : i64, mode = "nearest", padding_mode = "zeros"} : (tensor<1x1x1x1xf64>, tensor<1x2x3x2xf64>) -> tensor<1x1x2x3xf64>
func.func @f64(%x: tensor<1x1x1x1xf64>, %grid: tensor<1x2x3x2xf64>) -> tensor<1x1x2x3xf64> {
  %y = onnx.GridSample %x, %grid {mode = "nearest"} : (tensor<1x1x1x1xf64>, tensor<1x2x3x2xf64>) -> tensor<1x1x2x3xf64>
  return %y : tensor<1x1x2x3xf64>
}
