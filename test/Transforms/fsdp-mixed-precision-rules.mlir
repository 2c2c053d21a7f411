// The compute rules, on hand-written per-rank programs (as fsdp-shard
// leaves them) run through fsdp-mixed-precision alone.
// RUN: fsdp-opt %s --split-input-file --fsdp-mixed-precision | FileCheck %s

// Integers and booleans are never cast; a ConstantOfShape keeps its value's
// dtype and is cast where a bf16 op uses it; float constants are re-emitted
// in the op's dtype; an ignored (replicated, fp32) parameter promotes the op
// reading it to fp32; the model's own casts keep their `to`.
// CHECK-LABEL: func.func @f
// CHECK: %[[X:.*]] = onnx.Cast %arg0 {to = 16 : i64} : (tensor<3x2xf32>) -> tensor<3x2xbf16>
// CHECK-NOT: onnx.Cast %arg1
// CHECK: %[[Y:.*]] = onnx.MatMul %[[X]], %{{.*}} : (tensor<3x2xbf16>, tensor<2x2xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: %[[SHAPE:.*]] = onnx.Shape %[[Y]] : (tensor<3x2xbf16>) -> tensor<2xi64>
// CHECK-NEXT: %[[ONE:.*]] = onnx.ConstantOfShape %[[SHAPE]] {value = dense<1.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[ONEH:.*]] = onnx.Cast %[[ONE]] {to = 16 : i64} : (tensor<3x2xf32>) -> tensor<3x2xbf16>
// CHECK-NEXT: %[[Z:.*]] = onnx.Add %[[Y]], %[[ONEH]] : (tensor<3x2xbf16>, tensor<3x2xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: %[[ZERO:.*]] = onnx.Constant dense<0.000000e+00> : tensor<bf16>
// CHECK-NEXT: %[[POS:.*]] = onnx.Greater %[[Z]], %[[ZERO]] : (tensor<3x2xbf16>, tensor<bf16>) -> tensor<3x2xi1>
// CHECK-NEXT: %[[R:.*]] = onnx.Where %[[POS]], %[[Z]], %[[ZERO]] : (tensor<3x2xi1>, tensor<3x2xbf16>, tensor<bf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: %[[R32:.*]] = onnx.Cast %[[R]] {to = 1 : i64} : (tensor<3x2xbf16>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[I:.*]] = onnx.Cast %arg1 {to = 1 : i64} : (tensor<3xi64>) -> tensor<3xf32>
// CHECK: %[[G:.*]] = fsdp.get_param @ign : tensor<2xf32>
// CHECK-NEXT: %[[Q:.*]] = onnx.Mul %[[R32]], %[[G]] : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: onnx.Cast %[[Q]] {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
module {
  fsdp.param @w : tensor<2x2xf32>
  fsdp.param @ign : tensor<2xf32>
  fsdp.flat_param @"unit:" params [@w] {fsdp.config = #fsdp.unit_config<param_dtype = bf16>, module = ""} : tensor<4xf32>
  func.func @f(%x: tensor<3x2xf32>, %ids: tensor<3xi64>) -> tensor<3x2xf32> {
    %s = fsdp.get_shard @"unit:" : tensor<4xf32>
    %w = fsdp.unflatten %s of @"unit:" : tensor<4xf32> -> tensor<2x2xf32>
    %y = onnx.MatMul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %shape = onnx.Shape %y : (tensor<3x2xf32>) -> tensor<2xi64>
    %one = onnx.ConstantOfShape %shape {value = dense<1.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<3x2xf32>
    %z = onnx.Add %y, %one : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %zero = onnx.Constant dense<0.0> : tensor<f32>
    %pos = onnx.Greater %z, %zero : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xi1>
    %r = onnx.Where %pos, %z, %zero : (tensor<3x2xi1>, tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
    %i = onnx.Cast %ids {to = 1 : i64} : (tensor<3xi64>) -> tensor<3xf32>
    %one_ax = onnx.Constant dense<1> : tensor<1xi64>
    %i2 = onnx.Unsqueeze %i, %one_ax : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %g = fsdp.get_param @ign : tensor<2xf32>
    %q = onnx.Mul %r, %g : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
    %k = onnx.Cast %q {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %p = onnx.Add %k, %i2 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    return %p : tensor<3x2xf32>
  }
}

// -----

// One rank: the shard is cast once where compute reads it (before its
// unflatten); the optimizer's update reads the fp32 master shard.
// CHECK-LABEL: func.func @step
// CHECK: %[[S:.*]] = fsdp.get_shard @"unit:" : tensor<4xf32>
// CHECK-NEXT: %[[SH:.*]] = onnx.Cast %[[S]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: fsdp.unflatten %[[SH]] of @"unit:" : tensor<4xbf16> -> tensor<2x2xbf16>
// CHECK: %[[Y:.*]] = onnx.MatMul {{.*}} -> tensor<3x2xbf16>
// CHECK-NEXT: %[[Y32:.*]] = onnx.Cast %[[Y]] {to = 1 : i64} : (tensor<3x2xbf16>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[D:.*]] = onnx.Mul %[[S]], %arg1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = onnx.Sub %[[S]], %[[D]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[Y32]], %[[U]] : tensor<3x2xf32>, tensor<4xf32>
module {
  fsdp.param @w : tensor<2x2xf32>
  fsdp.flat_param @"unit:" params [@w] {fsdp.config = #fsdp.unit_config<param_dtype = bf16>, module = ""} : tensor<4xf32>
  func.func @step(%x: tensor<3x2xf32>, %lr: tensor<f32> {fsdp.name = "lr"}) -> (tensor<3x2xf32>, tensor<4xf32> {fsdp.update_of = @"unit:"}) {
    %s = fsdp.get_shard @"unit:" : tensor<4xf32>
    %w = fsdp.unflatten %s of @"unit:" : tensor<4xf32> -> tensor<2x2xf32>
    %y = onnx.MatMul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %d = onnx.Mul %s, %lr : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %u = onnx.Sub %s, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y, %u : tensor<3x2xf32>, tensor<4xf32>
  }
}

// -----

// Fused attention computes in the unit's bf16, but its row log-sum-exp stays
// f32 from the forward into attention_grad (never cast, never retyped), and
// an additive mask computed in bf16 is cast to f32 (the kernels' contract).
// CHECK-LABEL: func.func @attention
// CHECK: %[[Y:.*]], %[[LSE:.*]] = fsdp.attention %{{.*}} : (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
// CHECK-NOT: onnx.Cast %[[LSE]]
// CHECK: fsdp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[Y]], %[[LSE]], %{{.*}} {fsdp.unit = "", mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>)
// CHECK: %[[M:.*]] = onnx.MatMul {{.*}} -> tensor<2x4x4xbf16>
// CHECK-NEXT: %[[M32:.*]] = onnx.Cast %[[M]] {to = 1 : i64} : (tensor<2x4x4xbf16>) -> tensor<2x4x4xf32>
// CHECK-NEXT: fsdp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M32]] {{.*}} : (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>, tensor<2x4x4xf32>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>)
module {
  fsdp.param @w : tensor<8x8xf32>
  fsdp.flat_param @"unit:" params [@w] {fsdp.config = #fsdp.unit_config<param_dtype = bf16>, module = ""} : tensor<64xf32>
  func.func @attention(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>) {
    %s = fsdp.get_shard @"unit:" : tensor<64xf32>
    %w = fsdp.unflatten %s of @"unit:" : tensor<64xf32> -> tensor<8x8xf32>
    %q = onnx.MatMul %x, %w {fsdp.unit = ""} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %kt = onnx.Transpose %q {fsdp.unit = "", perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
    %y, %lse = fsdp.attention %q, %kt, %q {fsdp.unit = "", scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %y, %lse, %g {fsdp.unit = "", scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>)
    %m = onnx.MatMul %q, %kt {fsdp.unit = ""} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %y2, %lse2 = fsdp.attention %q, %kt, %q, %m {fsdp.unit = "", scale = 0.5 : f32, mask_kind = "add"} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
    return %y2, %dkt : tensor<2x4x8xf32>, tensor<2x8x4xf32>
  }
}
