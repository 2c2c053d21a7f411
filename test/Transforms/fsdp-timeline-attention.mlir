// RUN: rm -f %t.json
// RUN: fsdp-opt %s --fsdp-timeline=%t.json -o /dev/null
// RUN: %python %S/Inputs/check_trace.py %t.json --compute | FileCheck %s

// The cost model's FLOPs of fused attention, per head (2 here) with
// L = 3, S = 5, D = 4, Dv = 6: the forward's scores and weighted sum,
// 2 L S (D + Dv) = 300; the gradient's recomputed scores, dP, dq, dk_t and
// dv, 2 L S (3 D + 2 Dv) = 720. Bytes: every operand and result (lse
// included) read or written once.
// CHECK: fsdp.attention flops 600 bytes 664
// CHECK-NEXT: fsdp.attention_grad flops 1440 bytes 1304
func.func @forward(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>, %v: tensor<2x5x6xf32>, %g: tensor<2x3x6xf32>) -> tensor<2x3x4xf32> {
  %y, %lse = fsdp.attention %q, %kt, %v {scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> (tensor<2x3x6xf32>, tensor<2x3xf32>)
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %v, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<2x3x6xf32>, tensor<2x3xf32>, tensor<2x3x6xf32>) -> (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>)
  return %dq : tensor<2x3x4xf32>
}
