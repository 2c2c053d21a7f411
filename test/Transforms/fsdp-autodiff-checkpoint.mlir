// RUN: fsdp-opt %s --fsdp-autodiff=checkpoint-units=true | FileCheck %s --check-prefix=ALL
// RUN: fsdp-opt %s --fsdp-autodiff=checkpoint-classes=Block | FileCheck %s --check-prefix=BLOCK
// RUN: fsdp-opt %s --fsdp-autodiff="checkpoint-pattern=he.*" | FileCheck %s --check-prefix=HEAD
// RUN: fsdp-opt %s --fsdp-autodiff=checkpoint-min-num-params=8 | FileCheck %s --check-prefix=HEAD
// RUN: fsdp-opt %s --fsdp-autodiff="checkpoint-classes=Block checkpoint-pattern=head" | FileCheck %s --check-prefix=ALL

// Two units below the root: "blk" (Mul, Tanh; 4 parameters) and "head"
// (Concat, Mul, Sigmoid; 8 parameters). A checkpointed unit's forward is
// emitted again at the start of its backward (head's comes first) and its
// gradient rules read the copies: the Tanh rule squares the recomputed
// Tanh, so the forward's Tanh result is read only by the forward.
// ALL-LABEL: func.func @forward
// ALL: %[[M:.*]] = onnx.Mul %arg0, %{{.*}} {fsdp.unit = "blk"}
// ALL: %[[T:.*]] = onnx.Tanh %[[M]] {fsdp.unit = "blk"}
// ALL: onnx.Sigmoid
// ALL: onnx.Constant dense<1.000000e+00>
// ALL: onnx.Sigmoid
// ALL: %[[M2:.*]] = onnx.Mul %arg0, %{{.*}} {fsdp.unit = "blk"}
// ALL: %[[T2:.*]] = onnx.Tanh %[[M2]] {fsdp.unit = "blk"}
// ALL-NOT: %[[T]]{{[^0-9]}}
// ALL: onnx.Mul %[[T2]], %[[T2]]
// ALL-NOT: %[[T]]{{[^0-9]}}
// ALL: return

// BLOCK: onnx.Tanh
// BLOCK: onnx.Sigmoid
// BLOCK: onnx.Constant dense<1.000000e+00>
// BLOCK-NOT: onnx.Sigmoid
// BLOCK: onnx.Tanh
// BLOCK-NOT: onnx.Sigmoid
// BLOCK: return

// HEAD: onnx.Tanh
// HEAD: onnx.Sigmoid
// HEAD: onnx.Constant dense<1.000000e+00>
// HEAD-NOT: onnx.Tanh
// HEAD: onnx.Sigmoid
// HEAD-NOT: onnx.Tanh
// HEAD: return
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["blk", "head"]>,
  #fsdp.module<"blk", class = "Block", params = ["blk.w"], buffers = [], children = []>,
  #fsdp.module<"head", class = "Head", params = ["head.v"], buffers = [], children = []>],
  fsdp.units = [#fsdp.unit<"", params = []>, #fsdp.unit<"blk", params = [@"blk.w"]>,
                #fsdp.unit<"head", params = [@"head.v"]>]} {
  fsdp.param @"blk.w" : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  fsdp.param @"head.v" : tensor<8xf32> at <"m.onnx", offset = 16, length = 32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @"blk.w" : tensor<4xf32>
    %v = fsdp.get_param @"head.v" : tensor<8xf32>
    %m = onnx.Mul %x, %w {fsdp.unit = "blk"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %t = onnx.Tanh %m {fsdp.unit = "blk"} : (tensor<4xf32>) -> tensor<4xf32>
    %c = onnx.Concat %t, %t {axis = 0 : i64, fsdp.unit = "head"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    %h = onnx.Mul %c, %v {fsdp.unit = "head"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %s = onnx.Sigmoid %h {fsdp.unit = "head"} : (tensor<8xf32>) -> tensor<8xf32>
    %l = onnx.ReduceSum %s, %none {keepdims = 0 : i64, fsdp.unit = ""} : (tensor<8xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
