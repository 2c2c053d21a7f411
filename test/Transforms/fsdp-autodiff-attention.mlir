// RUN: fsdp-opt %S/Inputs/attention-causal.mlir --fsdp-autodiff | FileCheck %s --check-prefix=CAUSAL
// RUN: fsdp-opt %S/Inputs/attention-causal.mlir --fsdp-autodiff=fuse-attention=false | FileCheck %s --check-prefix=OFF
// RUN: fsdp-opt %S/Inputs/attention-causal.mlir --fsdp-autodiff=checkpoint-units=true | FileCheck %s --check-prefix=CKPT
// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// Inputs/attention-causal.mlir: GPT-2's attention as torch exports it,
// masked_fill(~tril(ones), -inf) of the scaled scores. Differentiated,
// it becomes causal fsdp.attention with its lse, and fsdp.attention_grad
// reads q, k_t, v, the output and lse; the mask's ops are gone.
// CAUSAL-LABEL: func.func @forward
// CAUSAL-NOT: onnx.Not
// CAUSAL-NOT: onnx.Softmax %
// CAUSAL: %[[Y:[^ ,]+]], %[[LSE:[^ ,]+]] = fsdp.attention %[[Q:[^ ,]+]], %[[KT:[^ ,]+]], %[[V:[^ ,]+]] {fsdp.module = "attn", fsdp.unit = "attn", mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
// CAUSAL-NOT: onnx.Softmax %
// CAUSAL: %{{.*}}, %{{.*}}, %{{.*}} = fsdp.attention_grad %[[Q]], %[[KT]], %[[V]], %[[Y]], %[[LSE]], %{{.*}} {mask_kind = "causal", scale = 5.000000e-01 : f32}
// CAUSAL-NOT: onnx.Softmax %
// CAUSAL: return

// The opt-out keeps the decomposed chain and differentiates its ops.
// OFF-LABEL: func.func @forward
// OFF-NOT: fsdp.attention
// OFF: onnx.Not
// OFF: onnx.Where
// OFF: onnx.Softmax %
// OFF-NOT: fsdp.attention
// OFF: return

// Checkpointing the unit recomputes the fused forward in the backward, and
// the gradient reads the copies.
// CKPT-LABEL: func.func @forward
// CKPT: %[[Y1:[^ ,]+]], %[[LSE1:[^ ,]+]] = fsdp.attention
// CKPT: = fsdp.softmax_cross_entropy %
// CKPT: %[[Y2:[^ ,]+]], %[[LSE2:[^ ,]+]] = fsdp.attention
// CKPT-NOT: %[[LSE1]]{{[^0-9]}}
// CKPT: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[Y2]], %[[LSE2]], %{{.*}}
// CKPT-NOT: %[[LSE1]]{{[^0-9]}}
// CKPT: return

// A mask that is not causal (an input, or a constant that is not j > i)
// stays a `fill` mask operand; a Div scale and an additive mask too.
// CHECK-LABEL: func.func @forward
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %arg1 {fill_value = -1.000000e+04 : f32, mask_kind = "fill", scale = 2.500000e-01 : f32}
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {fill_value = 0xFF800000 : f32, mask_kind = "fill", scale = 1.000000e+00 : f32}
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %arg2 {mask_kind = "add", scale = 1.000000e+00 : f32}
// CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %arg2, %{{.*}}, %{{.*}}, %{{.*}} {mask_kind = "add", scale = 1.000000e+00 : f32}
// CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {fill_value = 0xFF800000 : f32, mask_kind = "fill"
// CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %arg1, %{{.*}}, %{{.*}}, %{{.*}} {fill_value = -1.000000e+04 : f32, mask_kind = "fill"
module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<4x4xf32>, %m: tensor<4x4xi1>, %a: tensor<4x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %s = onnx.MatMul %h, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %four = onnx.Constant dense<4.000000e+00> : tensor<f32>
    %d = onnx.Div %s, %four : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %fill = onnx.Constant dense<-1.000000e+04> : tensor<f32>
    %f = onnx.Where %m, %fill, %d : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p = onnx.Softmax %f {axis = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = onnx.MatMul %p, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    // The upper triangle without the diagonal masked, but j >= i: not causal.
    %triu = onnx.Constant dense<[[true, true, true, true], [false, true, true, true], [false, false, true, true], [false, false, false, true]]> : tensor<4x4xi1>
    %ninf = onnx.Constant dense<0xFF800000> : tensor<f32>
    %s2 = onnx.MatMul %y, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %f2 = onnx.Where %triu, %ninf, %s2 : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p2 = onnx.Softmax %f2 {axis = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y2 = onnx.MatMul %p2, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %s3 = onnx.MatMul %y2, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %f3 = onnx.Add %s3, %a : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p3 = onnx.Softmax %f3 {axis = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y3 = onnx.MatMul %p3, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %l = onnx.ReduceSum %y3, %none {keepdims = 0 : i64} : (tensor<4x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Not fused: an additive mask that depends on a trainable parameter (the
// fused gradient gives the mask none), and a chain whose probabilities are
// read elsewhere.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: fsdp.attention
// CHECK: onnx.Softmax %
// CHECK: onnx.Softmax %
// CHECK-NOT: fsdp.attention
// CHECK: return
module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  fsdp.param @bias : tensor<4x4xf32> at <"m.onnx", offset = 64, length = 64>
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %bias = fsdp.get_param @bias : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %s = onnx.MatMul %h, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %f = onnx.Add %s, %bias : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p = onnx.Softmax %f {axis = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = onnx.MatMul %p, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %s2 = onnx.MatMul %y, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %p2 = onnx.Softmax %s2 {axis = -1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y2 = onnx.MatMul %p2, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %both = onnx.Add %y2, %p2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %l = onnx.ReduceSum %both, %none {keepdims = 0 : i64} : (tensor<4x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// GPT-2's head split around the chain: q and v Transpose(0, 2, 1, 3) of
// [B, S, H, D], the keys Transpose(0, 2, 3, 1), the output transposed back.
// The transposes fold into layout "bshd", so neither the forward nor the
// backward has one: attention_grad gives the gradients in [B, S, H, D].
// CHECK-LABEL: func.func @forward
// CHECK-NOT: perm = array<i64: 0, 2
// CHECK: %[[Y:[^ ,]+]], %[[LSE:[^ ,]+]] = fsdp.attention %[[Q:[^ ,]+]], %[[K:[^ ,]+]], %[[V:[^ ,]+]] {layout = "bshd", mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> (tensor<1x4x2x4xf32>, tensor<1x2x4xf32>)
// CHECK-NOT: perm = array<i64: 0, 2
// CHECK: fsdp.attention_grad %[[Q]], %[[K]], %[[V]], %[[Y]], %[[LSE]], %{{.*}} {layout = "bshd", mask_kind = "causal", scale = 5.000000e-01 : f32} : {{.*}} -> (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>)
// CHECK-NOT: perm = array<i64: 0, 2
// CHECK: return
module {
  fsdp.param @w : tensor<8x8xf32> at <"m.onnx", offset = 0, length = 256>
  func.func @forward(%x: tensor<1x4x8xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<8x8xf32>
    %h = onnx.MatMul %x, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
    %shape = onnx.Constant dense<[1, 4, 2, 4]> : tensor<4xi64>
    %heads = onnx.Reshape %h, %shape : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
    %q = onnx.Transpose %heads {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %kt = onnx.Transpose %heads {perm = array<i64: 0, 2, 3, 1>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %v = onnx.Transpose %heads {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
    %s = onnx.MatMul %q, %kt : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
    %z = onnx.Mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
    %tril = onnx.Constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
    %ninf = onnx.Constant dense<0xFF800000> : tensor<f32>
    %f = onnx.Where %tril, %ninf, %z : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %p = onnx.Softmax %f {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %y = onnx.MatMul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %merged = onnx.Transpose %y {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
    %shape8 = onnx.Constant dense<[1, 4, 8]> : tensor<3xi64>
    %out = onnx.Reshape %merged, %shape8 : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
    %l = onnx.ReduceSum %out, %none {keepdims = 0 : i64} : (tensor<1x4x8xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
