// RUN: fsdp-opt %s --fsdp-autodiff | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff=checkpoint-units=true | FileCheck %s --check-prefix=CKPT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-lower-to-runtime | FileCheck %s --check-prefix=LOWER

// Stochastic depth as Hugging Face's drop_path exports it: a
// RandomUniformLike of the activation (numbers of its shape, not of its
// values), floor(keep + rand) as the mask, x / keep * mask. The random
// numbers carry no gradient (the op table's NotDifferentiable): the step
// differentiates through the Mul and the Div only, and its backward reads
// the forward's mask. The random ops are numbered with the Dropout in the
// function's order; a checkpointed unit's recomputation is a clone with the
// same id, so it draws the same numbers. Lowering makes them
// `random_uniform` kernels with no input.

// CHECK-LABEL: func.func @forward
// CHECK: %[[R:.*]] = onnx.RandomUniformLike %{{.*}} {fsdp.random_op = 0 : i64, fsdp.unit = "blk", seed = 3.000000e+00 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[K:.*]] = onnx.Add %{{.*}}, %[[R]]
// CHECK: %[[MASK:.*]] = onnx.Floor %[[K]]
// CHECK: onnx.Dropout {{.*}}fsdp.random_op = 1 : i64
// CHECK: onnx.RandomUniform {fsdp.random_op = 2 : i64, high = 3.000000e+00 : f32, low = -1.000000e+00 : f32, shape = array<i64: 2, 4>}
// CHECK-NOT: onnx.RandomUniform
// CHECK: onnx.Mul %{{.*}}, %[[MASK]]
// CHECK-NOT: onnx.RandomUniform
// CHECK: return

// CKPT-LABEL: func.func @forward
// CKPT: onnx.RandomUniformLike %{{.*}} {fsdp.random_op = 0 : i64, fsdp.unit = "blk", seed = 3.000000e+00 : f32}
// CKPT: onnx.RandomUniform {fsdp.random_op = 2 : i64, high = 3.000000e+00 : f32, low = -1.000000e+00 : f32, shape = array<i64: 2, 4>}
// CKPT: %[[R2:.*]] = onnx.RandomUniformLike %{{.*}} {fsdp.random_op = 0 : i64, fsdp.unit = "blk", seed = 3.000000e+00 : f32}
// CKPT: %[[K2:.*]] = onnx.Add %{{.*}}, %[[R2]]
// CKPT: %[[MASK2:.*]] = onnx.Floor %[[K2]]
// CKPT: onnx.Mul %{{.*}}, %[[MASK2]]
// CKPT: return

// LOWER-LABEL: func.func @forward
// LOWER: fsdp.kernel "random_uniform"() params {high = 1.000000e+00 : f64, low = 0.000000e+00 : f64, op = 0 : i64, slot = 0 : i64, slots = 1 : i64} : () -> tensor<2x4xf32>
// LOWER: fsdp.kernel "dropout"
// LOWER: fsdp.kernel "random_uniform"() params {high = 3.000000e+00 : f64, low = -1.000000e+00 : f64, op = 2 : i64, slot = 0 : i64, slots = 1 : i64} : () -> tensor<2x4xf32>
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["blk"]>,
  #fsdp.module<"blk", class = "Block", params = ["blk.w"], buffers = [], children = []>],
  fsdp.units = [#fsdp.unit<"", params = []>, #fsdp.unit<"blk", params = [@"blk.w"]>]} {
  fsdp.param @"blk.w" : tensor<2x4xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @"blk.w" : tensor<2x4xf32>
    %keep = onnx.Constant dense<0.9> : tensor<f32>
    %h = onnx.Mul %x, %w {fsdp.unit = "blk"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %r = onnx.RandomUniformLike %h {fsdp.unit = "blk", seed = 3.0 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %k = onnx.Add %keep, %r {fsdp.unit = "blk"} : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %mask = onnx.Floor %k {fsdp.unit = "blk"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %scaled = onnx.Div %h, %keep {fsdp.unit = "blk"} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %y = onnx.Mul %scaled, %mask {fsdp.unit = "blk"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %ratio = onnx.Constant dense<0.5> : tensor<f32>
    %train = onnx.Constant dense<true> : tensor<i1>
    %d, %m = onnx.Dropout %y, %ratio, %train : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, none)
    %u = onnx.RandomUniform {high = 3.0 : f32, low = -1.0 : f32, shape = array<i64: 2, 4>} : () -> tensor<2x4xf32>
    %z = onnx.Add %d, %u : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = onnx.ReduceSum %z, %none {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
