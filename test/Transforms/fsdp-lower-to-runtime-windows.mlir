// RUN: fsdp-opt %s --split-input-file --fsdp-lower-to-runtime | FileCheck %s

// Operands given at run time whose values the static shapes settle, or which
// broadcasting kernels read: Clip's bounds, ReduceSum's axes (keepdims 1),
// Resize's sizes, Tile's repeats; Resize's scales, which its kernel reads.

// CHECK-LABEL: func.func @run_time_operands
// CHECK: %[[LO:.*]] = fsdp.kernel "max"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: fsdp.kernel "min"(%[[LO]], %arg2) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: fsdp.kernel "reduce_sum"(%arg0) params {axes = array<i64: 1>, keepdims = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK: fsdp.kernel "resize"(%arg4) {{.*}}scales = array<f64: 1.000000e+00, 1.000000e+00, 2.000000e+00, 1.500000e+00>
// CHECK: %[[V:.*]] = fsdp.view %arg0 : tensor<2x3xf32> to tensor<1x2x1x3xf32>
// CHECK: %[[E:.*]] = fsdp.kernel "expand"(%[[V]]) : (tensor<1x2x1x3xf32>) -> tensor<2x2x3x3xf32>
// CHECK: fsdp.view %[[E]] : tensor<2x2x3x3xf32> to tensor<4x9xf32>
// CHECK: fsdp.kernel "resize"(%arg4, %arg7) params {coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -5.000000e-01 : f64, exclude_outside = 1 : i64, mode = "cubic", nearest_mode = "round_prefer_floor"} : (tensor<1x1x2x2xf32>, tensor<4xf32>) -> tensor<1x1x4x4xf32>
func.func @run_time_operands(%x: tensor<2x3xf32>, %lo: tensor<f32>, %hi: tensor<f32>,
                             %axes: tensor<1xi64>, %img: tensor<1x1x2x2xf32>,
                             %sizes: tensor<4xi64>, %repeats: tensor<2xi64>,
                             %scales: tensor<4xf32>)
    -> (tensor<2x3xf32>, tensor<2x1xf32>, tensor<1x1x4x3xf32>, tensor<4x9xf32>,
        tensor<1x1x4x4xf32>) {
  %none = onnx.NoValue
  %c = onnx.Clip %x, %lo, %hi : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  %s = onnx.ReduceSum %x, %axes : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  %r = onnx.Resize %img, %none, %none, %sizes : (tensor<1x1x2x2xf32>, none, none, tensor<4xi64>) -> tensor<1x1x4x3xf32>
  %t = onnx.Tile %x, %repeats : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x9xf32>
  %q = onnx.Resize %img, %none, %scales, %none {cubic_coeff_a = -0.5 : f32, exclude_outside = 1 : i64, mode = "cubic"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return %c, %s, %r, %t, %q : tensor<2x3xf32>, tensor<2x1xf32>, tensor<1x1x4x3xf32>, tensor<4x9xf32>, tensor<1x1x4x4xf32>
}

// -----

// auto_pad resolves to explicit pads: SAME_UPPER puts the odd one at the end,
// SAME_LOWER at the beginning; VALID pads nothing.

// CHECK-LABEL: func.func @auto_pad
// CHECK: fsdp.kernel "max_pool"(%arg0) {{.*}}pads = array<i64: 1, 1, 2, 2>
// CHECK: fsdp.kernel "average_pool"(%arg0) {{.*}}pads = array<i64: 2, 2, 1, 1>
// CHECK: fsdp.kernel "conv"(%arg0, %arg1) {{.*}}pads = array<i64: 0, 0, 0, 0>
// CHECK: fsdp.kernel "conv_grad_input"(%arg2, %arg3) {{.*}}pads = array<i64: 0, 0, 1, 1>
func.func @auto_pad(%x: tensor<1x1x5x5xf32>, %w: tensor<1x1x3x3xf32>,
                    %tx: tensor<1x1x3x3xf32>, %tw: tensor<1x2x3x3xf32>)
    -> (tensor<1x1x5x5xf32>, tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>,
        tensor<1x2x6x6xf32>) {
  %none = onnx.NoValue
  %m, %i = onnx.MaxPool %x {auto_pad = "SAME_UPPER", kernel_shape = array<i64: 4, 4>} : (tensor<1x1x5x5xf32>) -> (tensor<1x1x5x5xf32>, none)
  %a = onnx.AveragePool %x {auto_pad = "SAME_LOWER", kernel_shape = array<i64: 4, 4>} : (tensor<1x1x5x5xf32>) -> tensor<1x1x5x5xf32>
  %c = onnx.Conv %x, %w, %none {auto_pad = "VALID", pads = array<i64: 1, 1, 1, 1>} : (tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>, none) -> tensor<1x1x3x3xf32>
  %t = onnx.ConvTranspose %tx, %tw, %none {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>, none) -> tensor<1x2x6x6xf32>
  return %m, %a, %c, %t : tensor<1x1x5x5xf32>, tensor<1x1x5x5xf32>, tensor<1x1x3x3xf32>, tensor<1x2x6x6xf32>
}

// -----

// 1-D pooling is 2-D pooling one row high; 3-D pooling is a 2-D pool over
// (H, W), then one over D.

// CHECK-LABEL: func.func @pool_ranks
// CHECK: %[[R:.*]] = fsdp.view %arg0 : tensor<1x2x8xf32> to tensor<1x2x1x8xf32>
// CHECK: %[[P:.*]]:2 = fsdp.kernel "max_pool"(%[[R]]) {{.*}}kernel_shape = array<i64: 1, 3>, pads = array<i64: 0, 1, 0, 1>{{.*}}strides = array<i64: 1, 2>} : (tensor<1x2x1x8xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x1x4xi64>)
// CHECK: fsdp.view %[[P]]#0 : tensor<1x2x1x4xf32> to tensor<1x2x4xf32>
// CHECK: fsdp.view %[[P]]#1 : tensor<1x2x1x4xi64> to tensor<1x2x4xi64>
// CHECK: %[[PL:.*]] = fsdp.view %arg1 : tensor<1x2x4x6x6xf32> to tensor<1x8x6x6xf32>
// CHECK: %[[HW:.*]] = fsdp.kernel "average_pool"(%[[PL]]) {{.*}}kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 3, 3>} : (tensor<1x8x6x6xf32>) -> tensor<1x8x2x2xf32>
// CHECK: %[[DV:.*]] = fsdp.view %[[HW]] : tensor<1x8x2x2xf32> to tensor<1x2x4x4xf32>
// CHECK: %[[D:.*]] = fsdp.kernel "average_pool"(%[[DV]]) {{.*}}kernel_shape = array<i64: 2, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 1>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x4xf32>
// CHECK: fsdp.view %[[D]] : tensor<1x2x2x4xf32> to tensor<1x2x2x2x2xf32>
func.func @pool_ranks(%x: tensor<1x2x8xf32>, %v: tensor<1x2x4x6x6xf32>)
    -> (tensor<1x2x4xf32>, tensor<1x2x4xi64>, tensor<1x2x2x2x2xf32>) {
  %m, %i = onnx.MaxPool %x {kernel_shape = array<i64: 3>, pads = array<i64: 1, 1>, strides = array<i64: 2>} : (tensor<1x2x8xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xi64>)
  %a = onnx.AveragePool %v {kernel_shape = array<i64: 2, 3, 3>, strides = array<i64: 2, 3, 3>} : (tensor<1x2x4x6x6xf32>) -> tensor<1x2x2x2x2xf32>
  return %m, %i, %a : tensor<1x2x4xf32>, tensor<1x2x4xi64>, tensor<1x2x2x2x2xf32>
}

// -----

// Pooling gradients as the forward pools: 1-D one row high; 3-D as the
// depth pool's gradient (over the (H, W) pool, computed again) then the
// (H, W) pool's; 2-D as it is, a ceil_mode window wider than the map too.

// CHECK-LABEL: func.func @pool_grad_ranks
// CHECK: %[[X1:.*]] = fsdp.view %arg0 : tensor<1x2x8xf32> to tensor<1x2x1x8xf32>
// CHECK: %[[G1:.*]] = fsdp.view %arg1 : tensor<1x2x4xf32> to tensor<1x2x1x4xf32>
// CHECK: %[[D1:.*]] = fsdp.kernel "pool_grad"(%[[X1]], %[[G1]]) params {{{.*}}kernel_shape = array<i64: 1, 3>, mode = "max", pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 2>} : (tensor<1x2x1x8xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x1x8xf32>
// CHECK: fsdp.view %[[D1]] : tensor<1x2x1x8xf32> to tensor<1x2x8xf32>
// CHECK: %[[PL:.*]] = fsdp.view %arg2 : tensor<1x2x4x6x6xf32> to tensor<1x8x6x6xf32>
// CHECK: %[[HW:.*]] = fsdp.kernel "max_pool"(%[[PL]]) params {{{.*}}kernel_shape = array<i64: 3, 3>{{.*}}strides = array<i64: 3, 3>} : (tensor<1x8x6x6xf32>) -> tensor<1x8x2x2xf32>
// CHECK: %[[DX:.*]] = fsdp.view %[[HW]] : tensor<1x8x2x2xf32> to tensor<1x2x4x4xf32>
// CHECK: %[[DG:.*]] = fsdp.view %arg3 : tensor<1x2x2x2x2xf32> to tensor<1x2x2x4xf32>
// CHECK: %[[DD:.*]] = fsdp.kernel "pool_grad"(%[[DX]], %[[DG]]) params {{{.*}}kernel_shape = array<i64: 2, 1>, mode = "max", pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 1>} : (tensor<1x2x4x4xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[RG:.*]] = fsdp.view %[[DD]] : tensor<1x2x4x4xf32> to tensor<1x8x2x2xf32>
// CHECK: %[[D3:.*]] = fsdp.kernel "pool_grad"(%[[PL]], %[[RG]]) params {{{.*}}kernel_shape = array<i64: 3, 3>, mode = "max"{{.*}}} : (tensor<1x8x6x6xf32>, tensor<1x8x2x2xf32>) -> tensor<1x8x6x6xf32>
// CHECK: fsdp.view %[[D3]] : tensor<1x8x6x6xf32> to tensor<1x2x4x6x6xf32>
// CHECK: fsdp.kernel "average_pool"({{.*}}) params {ceil_mode = 1 : i64, count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 3, 3>}
// CHECK: fsdp.kernel "pool_grad"({{.*}}) params {ceil_mode = 1 : i64, count_include_pad = 1 : i64, {{.*}}kernel_shape = array<i64: 2, 1>, mode = "average", pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 1>}
// CHECK: fsdp.kernel "pool_grad"({{.*}}) params {ceil_mode = 1 : i64, count_include_pad = 1 : i64, {{.*}}kernel_shape = array<i64: 3, 3>, mode = "average", pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 3, 3>}
// CHECK: fsdp.kernel "pool_grad"(%arg4, %arg5) params {{{.*}}kernel_shape = array<i64: 7, 7>, mode = "average"{{.*}}} : (tensor<1x2x5x5xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x5x5xf32>
func.func @pool_grad_ranks(%x: tensor<1x2x8xf32>, %g: tensor<1x2x4xf32>,
                           %v: tensor<1x2x4x6x6xf32>, %gv: tensor<1x2x2x2x2xf32>,
                           %p: tensor<1x2x5x5xf32>, %gp: tensor<1x2x1x1xf32>)
    -> (tensor<1x2x8xf32>, tensor<1x2x4x6x6xf32>, tensor<1x2x4x6x6xf32>, tensor<1x2x5x5xf32>) {
  %d1 = fsdp.pool_grad %x, %g {mode = "max", kernel_shape = array<i64: 3>, strides = array<i64: 2>, pads = array<i64: 1, 1>, dilations = array<i64: 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : (tensor<1x2x8xf32>, tensor<1x2x4xf32>) -> tensor<1x2x8xf32>
  %d3 = fsdp.pool_grad %v, %gv {mode = "max", kernel_shape = array<i64: 2, 3, 3>, strides = array<i64: 2, 3, 3>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : (tensor<1x2x4x6x6xf32>, tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x6x6xf32>
  %a3 = fsdp.pool_grad %v, %gv {mode = "average", kernel_shape = array<i64: 2, 3, 3>, strides = array<i64: 2, 3, 3>, pads = array<i64: 0, 1, 1, 0, 1, 1>, dilations = array<i64: 1, 1, 1>, ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x2x4x6x6xf32>, tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x6x6xf32>
  %w = fsdp.pool_grad %p, %gp {mode = "average", kernel_shape = array<i64: 7, 7>, strides = array<i64: 7, 7>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x5x5xf32>
  return %d1, %d3, %a3, %w : tensor<1x2x8xf32>, tensor<1x2x4x6x6xf32>, tensor<1x2x4x6x6xf32>, tensor<1x2x5x5xf32>
}
