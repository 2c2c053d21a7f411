// RUN: fsdp-opt %s --split-input-file --fsdp-fuse | FileCheck %s

// GELU, erf form, as torch 1.13 exports nn.GELU(): fires.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NEXT: %[[G:.*]] = fsdp.gelu %arg0 : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %0 = onnx.Div %x, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = onnx.Erf %0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = onnx.Add %1, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = onnx.Mul %x, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = onnx.Mul %3, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Near misses: dividing by 1.5 is not GELU; nor is adding 2; nor a chain
// whose Erf result is also returned.
// CHECK-LABEL: func.func @gelu_erf_near_misses
// CHECK-NOT: fsdp.gelu
// CHECK-COUNT-3: onnx.Erf
func.func @gelu_erf_near_misses(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %two = onnx.Constant dense<2.000000e+00> : tensor<f32>
  %c15 = onnx.Constant dense<1.500000e+00> : tensor<f32>
  %sqrt2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %a0 = onnx.Div %x, %c15 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a1 = onnx.Erf %a0 : (tensor<4xf32>) -> tensor<4xf32>
  %a2 = onnx.Add %a1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a3 = onnx.Mul %x, %a2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %a4 = onnx.Mul %a3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b0 = onnx.Div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b1 = onnx.Erf %b0 : (tensor<4xf32>) -> tensor<4xf32>
  %b2 = onnx.Add %b1, %two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b3 = onnx.Mul %x, %b2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b4 = onnx.Mul %b3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c0 = onnx.Div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c1 = onnx.Erf %c0 : (tensor<4xf32>) -> tensor<4xf32>
  %c2 = onnx.Add %c1, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %c3 = onnx.Mul %x, %c2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c4 = onnx.Mul %c3, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %a4, %b4, %c4, %c1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// GELU, tanh form (nn.GELU(approximate="tanh")): fires; with 0.05 instead
// of 0.044715 it does not.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[G:.*]] = fsdp.gelu %arg0 {approximate = "tanh"}
// CHECK: onnx.Tanh
// CHECK: return %[[G]], %{{.*}}
func.func @gelu_tanh(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %k = onnx.Constant dense<0.797884583> : tensor<f32>
  %c = onnx.Constant dense<4.471500e-02> : tensor<f32>
  %wrong = onnx.Constant dense<5.000000e-02> : tensor<f32>
  %0 = onnx.Mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %1 = onnx.Mul %x, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = onnx.Mul %c, %1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = onnx.Add %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = onnx.Mul %k, %3 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = onnx.Tanh %4 : (tensor<8xf32>) -> tensor<8xf32>
  %6 = onnx.Add %one, %5 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %7 = onnx.Mul %x, %6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %8 = onnx.Mul %half, %7 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %n0 = onnx.Mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %n1 = onnx.Mul %x, %n0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %n2 = onnx.Mul %wrong, %n1 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %n3 = onnx.Add %x, %n2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %n4 = onnx.Mul %k, %n3 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %n5 = onnx.Tanh %n4 : (tensor<8xf32>) -> tensor<8xf32>
  %n6 = onnx.Add %one, %n5 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %n7 = onnx.Mul %x, %n6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %n8 = onnx.Mul %half, %n7 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  return %8, %n8 : tensor<8xf32>, tensor<8xf32>
}

// -----

// SiLU fires on x * sigmoid(x), not on y * sigmoid(x).
// CHECK-LABEL: func.func @silu
// CHECK: %[[S:.*]] = fsdp.silu %arg0 : tensor<8xf32>
// CHECK: onnx.Sigmoid %arg0
// CHECK: onnx.Mul %arg1
func.func @silu(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = onnx.Sigmoid %x : (tensor<8xf32>) -> tensor<8xf32>
  %1 = onnx.Mul %x, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %2 = onnx.Sigmoid %x : (tensor<8xf32>) -> tensor<8xf32>
  %3 = onnx.Mul %y, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %1, %3 : tensor<8xf32>, tensor<8xf32>
}

// -----

// RMSNorm as LLaMA's module exports it, weight included; over a non-last
// axis it is not RMSNorm.
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[N:.*]] = fsdp.rms_norm %arg0, %arg1 {epsilon = 9.99999997E-7 : f32}
// CHECK: onnx.ReduceMean %{{.*}} {axes = array<i64: 1>}
// CHECK: return %[[N]]
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %two = onnx.Constant dense<2.000000e+00> : tensor<f32>
  %eps = onnx.Constant dense<9.99999997E-7> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %0 = onnx.Pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %1 = onnx.ReduceMean %0 {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %2 = onnx.Add %1, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %3 = onnx.Sqrt %2 : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %4 = onnx.Div %one, %3 : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %5 = onnx.Mul %x, %4 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %6 = onnx.Mul %5, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %m0 = onnx.Pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %m1 = onnx.ReduceMean %m0 {axes = array<i64: 1>} : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
  %m2 = onnx.Add %m1, %eps : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %m3 = onnx.Sqrt %m2 : (tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %m4 = onnx.Div %one, %m3 : (tensor<f32>, tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  %m5 = onnx.Mul %x, %m4 : (tensor<2x4x8xf32>, tensor<2x1x8xf32>) -> tensor<2x4x8xf32>
  return %6, %m5 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A decomposed LayerNorm with scale and bias becomes onnx.LayerNormalization;
// one whose centred value is also returned stays decomposed.
// CHECK-LABEL: func.func @layer_norm
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = onnx.LayerNormalization %arg0, %arg1, %arg2 {epsilon = 9.99999996E-13 : f32}
// CHECK: onnx.Sub
// CHECK: return %[[Y]]
func.func @layer_norm(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %two = onnx.Constant dense<2.000000e+00> : tensor<f32>
  %eps = onnx.Constant dense<9.99999996E-13> : tensor<f32>
  %0 = onnx.ReduceMean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %1 = onnx.Sub %x, %0 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %2 = onnx.Pow %1, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = onnx.ReduceMean %2 {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %4 = onnx.Add %3, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %5 = onnx.Sqrt %4 : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %6 = onnx.Div %1, %5 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %7 = onnx.Mul %6, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %8 = onnx.Add %7, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n0 = onnx.ReduceMean %x {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %n1 = onnx.Sub %x, %n0 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %n2 = onnx.Pow %n1, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %n3 = onnx.ReduceMean %n2 {axes = array<i64: -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %n4 = onnx.Add %n3, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %n5 = onnx.Sqrt %n4 : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n6 = onnx.Div %n1, %n5 : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %8, %n6, %n1 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Causal attention as GPT-2 exports it (masked_fill(-inf), scale by Mul):
// fires with the boolean mask; softmax over another axis does not.
// CHECK-LABEL: func.func @attention
// CHECK: %[[A:.*]] = fsdp.attention %arg0, %arg1, %arg2, %arg3 {fill_value = 0xFF800000 : f32, mask_kind = "fill", scale = 0.353553385 : f32}
// CHECK: onnx.Softmax %{{.*}} {axis = 2 : i64}
// CHECK: return %[[A]]
func.func @attention(%q: tensor<2x4x16x8xf32>, %kt: tensor<2x4x8x16xf32>, %v: tensor<2x4x16x8xf32>, %m: tensor<1x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %s = onnx.Constant dense<0.353553385> : tensor<f32>
  %ninf = onnx.Constant dense<0xFF800000> : tensor<f32>
  %0 = onnx.MatMul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %1 = onnx.Mul %0, %s : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %2 = onnx.Where %m, %ninf, %1 : (tensor<1x1x16x16xi1>, tensor<f32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %3 = onnx.Softmax %2 : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %4 = onnx.MatMul %3, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %n0 = onnx.MatMul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %n1 = onnx.Softmax %n0 {axis = 2 : i64} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %n2 = onnx.MatMul %n1, %v : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %4, %n2 : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// BERT's form: scale by Div, additive mask; q/k/v with different batch
// dims (broadcast keys) are left alone.
// CHECK-LABEL: func.func @attention_add
// CHECK: fsdp.attention %arg0, %arg1, %arg2, %arg3 {mask_kind = "add", scale = 2.500000e-01 : f32}
// CHECK: onnx.Softmax
func.func @attention_add(%q: tensor<2x16x8xf32>, %kt: tensor<2x8x16xf32>, %v: tensor<2x16x8xf32>, %m: tensor<2x1x16xf32>, %k1: tensor<1x8x16xf32>) -> (tensor<2x16x8xf32>, tensor<2x16x8xf32>) {
  %d = onnx.Constant dense<4.000000e+00> : tensor<f32>
  %0 = onnx.MatMul %q, %kt : (tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  %1 = onnx.Div %0, %d : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %2 = onnx.Add %1, %m : (tensor<2x16x16xf32>, tensor<2x1x16xf32>) -> tensor<2x16x16xf32>
  %3 = onnx.Softmax %2 : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %4 = onnx.MatMul %3, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  %n0 = onnx.MatMul %q, %k1 : (tensor<2x16x8xf32>, tensor<1x8x16xf32>) -> tensor<2x16x16xf32>
  %n1 = onnx.Softmax %n0 : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %n2 = onnx.MatMul %n1, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %4, %n2 : tensor<2x16x8xf32>, tensor<2x16x8xf32>
}

// -----

// The head split and merge around attention, as GPT-2 exports them
// (q and v Transpose(0, 2, 1, 3) of [B, S, H, D], keys a second Transpose
// of theirs, the output transposed back): folded into layout "bshd", the
// fused op reads the projections' [B, S, H, D] and gives [B, S, H, D]; no
// Transpose is left.
// CHECK-LABEL: func.func @attention_head_split
// CHECK-NOT: onnx.Transpose
// CHECK: %[[A:.*]] = fsdp.attention %arg0, %arg1, %arg2 {layout = "bshd", scale = 0.353553385 : f32} : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %[[A]]
func.func @attention_head_split(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %s = onnx.Constant dense<0.353553385> : tensor<f32>
  %qh = onnx.Transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %kh = onnx.Transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %kt = onnx.Transpose %kh {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
  %vh = onnx.Transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %0 = onnx.MatMul %qh, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %1 = onnx.Mul %0, %s : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %2 = onnx.Softmax %1 : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %3 = onnx.MatMul %2, %vh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = onnx.Transpose %3 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  return %y : tensor<2x16x4x8xf32>
}

// -----

// Transposes that are no head split stay, and the attention is fused
// head-first: keys split along another dim (perm 0, 2, 1, 3 then 0, 1, 2, 3
// is no k_t), and an output read by something besides the head merge.
// CHECK-LABEL: func.func @attention_not_head_split
// CHECK: onnx.Transpose %arg1 {perm = array<i64: 1, 2, 3, 0>}
// CHECK: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK: %[[Y:.*]] = fsdp.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK: onnx.Transpose %[[Y]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: return
func.func @attention_not_head_split(%q: tensor<2x16x4x8xf32>, %k: tensor<16x2x4x8xf32>, %v: tensor<2x16x4x8xf32>, %k2: tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>) {
  %s = onnx.Constant dense<0.353553385> : tensor<f32>
  %qh = onnx.Transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %vh = onnx.Transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  %kt = onnx.Transpose %k {perm = array<i64: 1, 2, 3, 0>} : (tensor<16x2x4x8xf32>) -> tensor<2x4x8x16xf32>
  %0 = onnx.MatMul %qh, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %1 = onnx.Mul %0, %s : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %2 = onnx.Softmax %1 : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %3 = onnx.MatMul %2, %vh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = onnx.Transpose %3 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  %kt2 = onnx.Transpose %k2 {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x16x4x8xf32>) -> tensor<2x4x8x16xf32>
  %4 = onnx.MatMul %qh, %kt2 : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %5 = onnx.Mul %4, %s : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %6 = onnx.Softmax %5 : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %7 = onnx.MatMul %6, %vh : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %y2 = onnx.Transpose %7 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x16x8xf32>) -> tensor<2x16x4x8xf32>
  return %y, %y2, %7 : tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// nn.Linear on a 3-D input: MatMul of the transposed weight, Add(bias,
// ...), then GELU: one fsdp.linear, the weight's Transpose gone. A 2-D
// "bias" is not a bias; an activation whose input has another user is not
// absorbed; Gemm with transB is nn.Linear on 2-D input.
// CHECK-LABEL: func.func @linear
// CHECK-NEXT: %[[A:.*]] = fsdp.linear %arg0, %arg1, %arg2 {activation = "gelu", transpose_weight}
// CHECK-NEXT: %[[B:.*]] = fsdp.linear %arg0, %arg1 {transpose_weight}
// CHECK-NEXT: %[[C:.*]] = onnx.Add %[[B]], %arg3
// CHECK-NEXT: %[[D:.*]] = fsdp.linear %arg0, %arg1, %arg2 {transpose_weight}
// CHECK-NEXT: %[[E:.*]] = onnx.Relu %[[D]]
// CHECK-NEXT: %[[F:.*]] = fsdp.linear %arg4, %arg1, %arg2 {activation = "tanh", transpose_weight}
// CHECK-NEXT: return %[[A]], %[[C]], %[[E]], %[[D]], %[[F]]
func.func @linear(%x: tensor<2x3x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>, %b2: tensor<3x8xf32>, %x2: tensor<2x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x8xf32>) {
  %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
  %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
  %sqrt2 = onnx.Constant dense<1.41421354> : tensor<f32>
  %none = onnx.NoValue
  %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %0 = onnx.MatMul %x, %t : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %1 = onnx.Add %b, %0 : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %2 = onnx.Div %1, %sqrt2 : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %3 = onnx.Erf %2 : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %4 = onnx.Add %3, %one : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %5 = onnx.Mul %1, %4 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %6 = onnx.Mul %5, %half : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %7 = onnx.MatMul %x, %t : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %8 = onnx.Add %7, %b2 : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %9 = onnx.MatMul %x, %t : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %10 = onnx.Add %9, %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %11 = onnx.Relu %10 : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %12 = onnx.Gemm %x2, %w, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %13 = onnx.Tanh %12 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %6, %8, %11, %10, %13 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x8xf32>
}

// -----

// The gradients of nn.Linear (forward MatMul(x, Transpose(w))): dx =
// g Transpose(Transpose(w)) reads w as stored (the Transposes cancel); dw =
// Transpose(MatMul(Transpose(x), g)) = g^T x is one Gemm reading g
// transposed, no Transpose left.
// CHECK-LABEL: func.func @linear_gradients
// CHECK-NOT: onnx.Transpose
// CHECK: %[[DX:.*]] = fsdp.linear %arg2, %arg1 :
// CHECK-NOT: onnx.Transpose
// CHECK: %[[DW:.*]] = onnx.Gemm %arg2, %arg0, %{{.*}} {transA = 1 : i64} : (tensor<6x8xf32>, tensor<6x4xf32>, none) -> tensor<8x4xf32>
// CHECK-NOT: onnx.Transpose
// CHECK: return %[[DX]], %[[DW]]
func.func @linear_gradients(%x: tensor<6x4xf32>, %w: tensor<8x4xf32>, %g: tensor<6x8xf32>) -> (tensor<6x4xf32>, tensor<8x4xf32>) {
  %wt = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %wtt = onnx.Transpose %wt {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %dx = onnx.MatMul %g, %wtt : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
  %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %dwt = onnx.MatMul %xt, %g : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %dw = onnx.Transpose %dwt {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %dx, %dw : tensor<6x4xf32>, tensor<8x4xf32>
}

// -----

// Both operands transposed: one Gemm with transA and transB. Transposes
// that compose to another permutation become one Transpose; a product
// used twice keeps its Transpose (the product is still needed); a
// Transpose of a 3-D product is left alone.
// CHECK-LABEL: func.func @transposed_operands
// CHECK: onnx.Gemm %arg0, %arg1, %{{.*}} {transA = 1 : i64, transB = 1 : i64} : (tensor<4x6xf32>, tensor<8x4xf32>, none) -> tensor<6x8xf32>
// CHECK: onnx.Transpose %arg2 {perm = array<i64: 2, 0, 1>} : (tensor<2x3x5xf32>) -> tensor<5x2x3xf32>
// CHECK-NOT: onnx.Transpose %{{.*}}perm = array<i64: 1, 0, 2>
// CHECK: %[[P:.*]] = fsdp.linear %arg3, %arg1 :
// CHECK: %[[PT:.*]] = onnx.Transpose %[[P]] {perm = array<i64: 1, 0>}
// CHECK: %[[Q:.*]] = onnx.MatMul %arg4, %arg4 : (tensor<2x3x3xf32>, tensor<2x3x3xf32>)
// CHECK: onnx.Transpose %[[Q]]
func.func @transposed_operands(%a: tensor<4x6xf32>, %b: tensor<8x4xf32>, %c: tensor<2x3x5xf32>, %d: tensor<3x8xf32>, %e: tensor<2x3x3xf32>) -> (tensor<6x8xf32>, tensor<5x2x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<2x3x3xf32>) {
  %at = onnx.Transpose %a {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %bt = onnx.Transpose %b {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %0 = onnx.MatMul %at, %bt : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %c1 = onnx.Transpose %c {perm = array<i64: 1, 0, 2>} : (tensor<2x3x5xf32>) -> tensor<3x2x5xf32>
  %c2 = onnx.Transpose %c1 {perm = array<i64: 2, 1, 0>} : (tensor<3x2x5xf32>) -> tensor<5x2x3xf32>
  %p = onnx.MatMul %d, %b : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %pt = onnx.Transpose %p {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %q = onnx.MatMul %e, %e : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %qt = onnx.Transpose %q {perm = array<i64: 0, 2, 1>} : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  return %0, %c2, %p, %pt, %qt : tensor<6x8xf32>, tensor<5x2x3xf32>, tensor<3x4xf32>, tensor<4x3xf32>, tensor<2x3x3xf32>
}

// -----

// float64 products never become Gemm (the gemm kernel takes f32, bf16 and
// f16): a's Transpose stays. The Transposes that cancel still go.
// CHECK-LABEL: func.func @f64_products
// CHECK: %[[T:.*]] = onnx.Transpose %arg0 {perm = array<i64: 1, 0>}
// CHECK-NOT: onnx.Gemm
// CHECK: return %{{.*}}, %arg1
func.func @f64_products(%a: tensor<4x6xf64>, %b: tensor<4x8xf64>) -> (tensor<6x8xf64>, tensor<4x8xf64>) {
  %at = onnx.Transpose %a {perm = array<i64: 1, 0>} : (tensor<4x6xf64>) -> tensor<6x4xf64>
  %0 = onnx.MatMul %at, %b : (tensor<6x4xf64>, tensor<4x8xf64>) -> tensor<6x8xf64>
  %bt = onnx.Transpose %b {perm = array<i64: 1, 0>} : (tensor<4x8xf64>) -> tensor<8x4xf64>
  %btt = onnx.Transpose %bt {perm = array<i64: 1, 0>} : (tensor<8x4xf64>) -> tensor<4x8xf64>
  return %0, %btt : tensor<6x8xf64>, tensor<4x8xf64>
}
