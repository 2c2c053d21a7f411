// Round trip of every fsdp op and attribute, in custom and generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

mesh.mesh @world(shape = 4)
mesh.mesh @hybrid(shape = 2x4)

// CHECK-LABEL: fsdp.param @fc.weight : tensor<2x3xf32> at <"model.onnx.data", offset = 0, length = 24>
fsdp.param @"fc.weight" : tensor<2x3xf32> at #fsdp.data_ref<"model.onnx.data", offset = 0, length = 24>
// CHECK: fsdp.param @fc.bias : tensor<2xf32> at <"model.onnx.data", offset = 24, length = 8>
fsdp.param @"fc.bias" : tensor<2xf32> at #fsdp.data_ref<"model.onnx.data", offset = 24, length = 8>
// CHECK: fsdp.param @embed.weight : tensor<10x4xbf16> frozen{{$}}
fsdp.param @"embed.weight" : tensor<10x4xbf16> frozen
// A parameter without a data reference is initialised by the host.
// CHECK: fsdp.param @head.weight : tensor<5xf32>{{$}}
fsdp.param @"head.weight" : tensor<5xf32>
// Booleans and sub-byte types take whole bytes on disk.
// CHECK: fsdp.param @mask : tensor<3xi1> frozen at <"m.bin", offset = 7, length = 3>
fsdp.param @mask : tensor<3xi1> frozen at #fsdp.data_ref<"m.bin", offset = 7, length = 3>

// 8 elements on 4 ranks: no padding.
// CHECK: fsdp.flat_param @fc params [@fc.weight, @fc.bias] on @world axes [0] : tensor<8xf32>
fsdp.flat_param @fc params [@"fc.weight", @"fc.bias"] on @world axes [0] : tensor<8xf32>
// 5 elements on the 4-rank inner axis of a 2x4 mesh: padded to 8.
// CHECK: fsdp.flat_param @head params [@head.weight] on @hybrid axes [1] : tensor<8xf32>
fsdp.flat_param @head params [@"head.weight"] on @hybrid axes [1] : tensor<8xf32>
// Both axes: world size 8.
// CHECK: fsdp.flat_param @head_all params [@head.weight] on @hybrid axes [0, 1] : tensor<8xf32>
fsdp.flat_param @head_all params [@"head.weight"] on @hybrid axes [0, 1] : tensor<8xf32>
// Unsharded, aligned to 4 elements: fc.bias starts at 8, so 10 elements.
// CHECK: fsdp.flat_param @aligned params [@fc.weight, @fc.bias] {alignment = 4 : i64} : tensor<10xf32>
fsdp.flat_param @aligned params [@"fc.weight", @"fc.bias"] {alignment = 4 : i64} : tensor<10xf32>
// CHECK: fsdp.flat_param @embed params [@embed.weight] on @world axes [0] : tensor<40xbf16>
fsdp.flat_param @embed params [@"embed.weight"] on @world axes [0] : tensor<40xbf16>

// CHECK-LABEL: func.func @forward
func.func @forward(%flat: tensor<8xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>) {
  // CHECK: %[[W:.*]] = fsdp.get_param @fc.weight : tensor<2x3xf32>
  %w0 = fsdp.get_param @"fc.weight" : tensor<2x3xf32>
  // CHECK: %[[V:.*]]:2 = fsdp.unflatten %{{.*}} of @fc : tensor<8xf32> -> tensor<2x3xf32>, tensor<2xf32>
  %w, %b = fsdp.unflatten %flat of @fc : tensor<8xf32> -> tensor<2x3xf32>, tensor<2xf32>
  // CHECK: fsdp.pack %[[V]]#0, %[[V]]#1 into @fc : tensor<2x3xf32>, tensor<2xf32> -> tensor<8xf32>
  %packed = fsdp.pack %w, %b into @fc : tensor<2x3xf32>, tensor<2xf32> -> tensor<8xf32>
  // CHECK: fsdp.get_flat_param @fc : tensor<8xf32>
  %full = fsdp.get_flat_param @fc : tensor<8xf32>
  // Mixed precision: a bf16 flat buffer views and packs as bf16 members.
  // CHECK: %[[H:.*]]:2 = fsdp.unflatten %{{.*}} of @fc : tensor<8xbf16> -> tensor<2x3xbf16>, tensor<2xbf16>
  %half = onnx.Cast %full {to = 16 : i64} : (tensor<8xf32>) -> tensor<8xbf16>
  %hw, %hb = fsdp.unflatten %half of @fc : tensor<8xbf16> -> tensor<2x3xbf16>, tensor<2xbf16>
  // CHECK: fsdp.pack %[[H]]#0, %[[H]]#1 into @fc : tensor<2x3xbf16>, tensor<2xbf16> -> tensor<8xbf16>
  %hg = fsdp.pack %hw, %hb into @fc : tensor<2x3xbf16>, tensor<2xbf16> -> tensor<8xbf16>
  // CHECK: return %[[V]]#0, %[[V]]#1, %[[W]]
  return %w, %b, %w0 : tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: fsdp.buffer @bn.running_mean : tensor<4xf32> at <"bn.bin", offset = 0, length = 16>
fsdp.buffer @"bn.running_mean" : tensor<4xf32> at #fsdp.data_ref<"bn.bin", offset = 0, length = 16>
// CHECK: fsdp.buffer @bn.num_batches_tracked : tensor<i64>{{$}}
fsdp.buffer @"bn.num_batches_tracked" : tensor<i64>
// CHECK: fsdp.param @wte.weight : tensor<8x4xf32> {aliases = ["lm_head.weight"]}
fsdp.param @"wte.weight" : tensor<8x4xf32> {aliases = ["lm_head.weight"]}

// CHECK-LABEL: func.func @read_buffer
func.func @read_buffer() -> tensor<4xf32> {
  // CHECK: fsdp.get_buffer @bn.running_mean : tensor<4xf32>
  %m = fsdp.get_buffer @"bn.running_mean" : tensor<4xf32>
  return %m : tensor<4xf32>
}

// Fused attention in inference form (one result), with the lse result
// fsdp-autodiff asks for (causal: no mask operand), and its gradient.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x16x8xbf16>, %kt: tensor<2x4x8x12xbf16>,
                     %v: tensor<2x4x12x6xbf16>, %m: tensor<1x1x16x12xi1>,
                     %g: tensor<2x4x16x6xbf16>)
    -> (tensor<2x4x16x6xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>) {
  // CHECK: fsdp.attention %arg0, %arg1, %arg2, %arg3 {fill_value = 0xFF800000 : f32, mask_kind = "fill", scale = 5.000000e-01 : f32} : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>, tensor<1x1x16x12xi1>) -> tensor<2x4x16x6xbf16>
  %y0 = fsdp.attention %q, %kt, %v, %m {scale = 0.5 : f32, mask_kind = "fill", fill_value = 0xFF800000 : f32}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>, tensor<1x1x16x12xi1>) -> tensor<2x4x16x6xbf16>
  // CHECK: %[[Y:.*]], %[[LSE:.*]] = fsdp.attention %arg0, %arg1, %arg2 {mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>) -> (tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>)
  %y, %lse = fsdp.attention %q, %kt, %v {scale = 0.5 : f32, mask_kind = "causal"}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>) -> (tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>)
  // CHECK: fsdp.attention_grad %arg0, %arg1, %arg2, %[[Y]], %[[LSE]], %arg4 {mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>, tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x6xbf16>) -> (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>)
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %v, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "causal"}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>, tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x6xbf16>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>)
  // CHECK: fsdp.attention_grad %arg0, %arg1, %arg2, %arg3, %[[Y]], %[[LSE]], %arg4 {fill_value = -1.000000e+04 : f32, mask_kind = "fill", scale = 5.000000e-01 : f32}
  %dq2, %dkt2, %dv2 = fsdp.attention_grad %q, %kt, %v, %m, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "fill", fill_value = -1.0e4 : f32}
      : (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>, tensor<1x1x16x12xi1>, tensor<2x4x16x6xbf16>, tensor<2x4x16xf32>, tensor<2x4x16x6xbf16>)
      -> (tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>)
  return %y0, %dq, %dkt, %dv : tensor<2x4x16x6xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x8x12xbf16>, tensor<2x4x12x6xbf16>
}

// Cross-entropy with its per-position log-sum-exp, and its gradient with
// and without weights and the log-sum-exp (the operand segments in the
// generic form).
// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%s: tensor<2x5x3xf32>, %l: tensor<2x3xi64>, %w: tensor<5xf32>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<2x5x3xf32>, tensor<2x5x3xf32>, tensor<2x5x3xf32>) {
  // CHECK: %[[LOSS:.*]], %[[LSE:.*]] = fsdp.softmax_cross_entropy %arg0, %arg1, %arg2 {ignore_index = -1 : i64, reduction = "sum"} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  %loss, %lse = fsdp.softmax_cross_entropy %s, %l, %w {ignore_index = -1 : i64, reduction = "sum"}
      : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  // CHECK: fsdp.softmax_cross_entropy_grad %arg0, %arg1, %arg3, %arg2 lse(%[[LSE]]) : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<5xf32>, tensor<2x3xf32>) -> tensor<2x5x3xf32>
  %g1 = fsdp.softmax_cross_entropy_grad %s, %l, %g, %w lse(%lse)
      : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<5xf32>, tensor<2x3xf32>) -> tensor<2x5x3xf32>
  // CHECK: fsdp.softmax_cross_entropy_grad %arg0, %arg1, %arg3 lse(%[[LSE]]) : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x5x3xf32>
  %g2 = fsdp.softmax_cross_entropy_grad %s, %l, %g lse(%lse)
      : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<2x3xf32>) -> tensor<2x5x3xf32>
  // CHECK: fsdp.softmax_cross_entropy_grad %arg0, %arg1, %arg3, %arg2 : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<5xf32>) -> tensor<2x5x3xf32>
  %g3 = fsdp.softmax_cross_entropy_grad %s, %l, %g, %w
      : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<5xf32>) -> tensor<2x5x3xf32>
  return %loss, %g1, %g2, %g3 : tensor<f32>, tensor<2x5x3xf32>, tensor<2x5x3xf32>, tensor<2x5x3xf32>
}

// Layout "bshd": q [B, L, H, D], keys untransposed [B, S, H, D], v
// [B, S, H, Dv], output [B, L, H, Dv]; lse and the mask head-first.
// CHECK-LABEL: func.func @attention_bshd
func.func @attention_bshd(%q: tensor<2x16x4x8xf32>, %k: tensor<2x12x4x8xf32>,
                          %v: tensor<2x12x4x6xf32>, %m: tensor<2x1x16x12xf32>,
                          %g: tensor<2x16x4x6xf32>)
    -> (tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>) {
  // CHECK: %[[Y:.*]], %[[LSE:.*]] = fsdp.attention %arg0, %arg1, %arg2, %arg3 {layout = "bshd", mask_kind = "add", scale = 5.000000e-01 : f32} : (tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>, tensor<2x1x16x12xf32>) -> (tensor<2x16x4x6xf32>, tensor<2x4x16xf32>)
  %y, %lse = fsdp.attention %q, %k, %v, %m {scale = 0.5 : f32, mask_kind = "add", layout = "bshd"}
      : (tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>, tensor<2x1x16x12xf32>) -> (tensor<2x16x4x6xf32>, tensor<2x4x16xf32>)
  // CHECK: fsdp.attention_grad %arg0, %arg1, %arg2, %arg3, %[[Y]], %[[LSE]], %arg4 {layout = "bshd", mask_kind = "add", scale = 5.000000e-01 : f32}
  %dq, %dk, %dv = fsdp.attention_grad %q, %k, %v, %m, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "add", layout = "bshd"}
      : (tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>, tensor<2x1x16x12xf32>, tensor<2x16x4x6xf32>, tensor<2x4x16xf32>, tensor<2x16x4x6xf32>)
      -> (tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>)
  return %dq, %dk, %dv : tensor<2x16x4x8xf32>, tensor<2x12x4x8xf32>, tensor<2x12x4x6xf32>
}

// Training batch norm with its saved statistics and running statistics'
// new values, and its gradient from the saved statistics.
// CHECK-LABEL: func.func @batch_norm_train
func.func @batch_norm_train(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>,
                            %m: tensor<4xf32>, %v: tensor<4xf32>, %g: tensor<2x4x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  // CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[INV:.*]], %{{.*}}, %{{.*}} = fsdp.batch_norm_train %arg0, %arg1, %arg2, %arg3, %arg4 {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %y, %mean, %inv, %rm, %rv = fsdp.batch_norm_train %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32}
      : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: fsdp.batch_norm_grad %arg5, %arg0, %arg1, %[[MEAN]], %[[INV]] : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %dx, %ds, %db = fsdp.batch_norm_grad %g, %x, %s, %mean, %inv
      : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx, %ds, %db, %rm, %rv : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// The fused optimizer steps, with and without their optional operands.
// CHECK-LABEL: func.func @optimizer_steps
func.func @optimizer_steps(%p: tensor<64xf32>, %g: tensor<64xf32>, %m: tensor<64xf32>, %v: tensor<64xf32>, %lr: tensor<f32>, %step: tensor<f32>, %c: tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  // CHECK: fsdp.adamw %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 clip %arg6 {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} : tensor<64xf32>
  %p1, %m1, %v1 = fsdp.adamw %p, %g, %m, %v, %lr, %step clip %c {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0} : tensor<64xf32>
  // CHECK: fsdp.adamw %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {
  %p2, %m2, %v2 = fsdp.adamw %p, %g, %m, %v, %lr, %step {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.01} : tensor<64xf32>
  // CHECK: fsdp.sgd %arg0, %arg1, %arg4, %arg5 momentum_buffer %arg2 clip %arg6 {dampening = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 0.000000e+00 : f64} : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>, tensor<64xf32>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>)
  %p3, %b3 = fsdp.sgd %p, %g, %lr, %step momentum_buffer %m clip %c {momentum = 0.9, dampening = 0.0, nesterov = true, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>, tensor<64xf32>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>)
  // CHECK: fsdp.sgd %arg0, %arg1, %arg4, %arg5 clip %arg6 {{.*}} : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<64xf32>
  %p4 = fsdp.sgd %p, %g, %lr, %step clip %c {momentum = 0.0, dampening = 0.0, nesterov = false, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<64xf32>
  return %p1, %b3, %p4 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
