// RUN: fsdp-opt %s --split-input-file --fsdp-lower-to-runtime | FileCheck %s

// Weights stay state reads; a transposed weight is a transpose kernel;
// reshapes are views; axes become non-negative; Slice bounds become one
// start and step per dimension; the constants only kernels' shape operands
// read are gone.
// CHECK-LABEL: func.func @forward
// CHECK:      %[[W:.*]] = fsdp.get_param @w
// CHECK-NEXT: %[[T:.*]] = fsdp.kernel "transpose"(%[[W]]) params {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[M:.*]] = fsdp.kernel "matmul"(%arg0, %[[T]]) params {trans_b = 0 : i64}
// CHECK-NEXT: %[[S:.*]] = fsdp.kernel "softmax"(%[[M]]) params {axis = 2 : i64}
// CHECK-NEXT: %[[V:.*]] = fsdp.view %[[S]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[SL:.*]] = fsdp.kernel "slice"(%[[M]]) params {starts = array<i64: 0, 0, 1>, steps = array<i64: 1, 1, 1>}
// CHECK-NEXT: %[[C:.*]] = fsdp.kernel "concat"(%[[SL]], %[[SL]]) params {axis = 2 : i64}
// CHECK-NEXT: %[[A:.*]] = fsdp.kernel "add"(%[[C]], %[[S]]) :
// CHECK-NEXT: return %[[A]], %[[V]]
// CHECK-NOT:  onnx.
module {
  fsdp.param @w : tensor<4x8xf32> at <"m.onnx", offset = 0, length = 128>
  func.func @forward(%x: tensor<2x3x8xf32>) -> (tensor<2x3x4xf32>, tensor<6x4xf32>) {
    %w = fsdp.get_param @w : tensor<4x8xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %m = onnx.MatMul %x, %t : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
    %s = onnx.Softmax %m {axis = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %shape = onnx.Constant dense<[6, 4]> : tensor<2xi64>
    %r = onnx.Reshape %s, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
    %st = onnx.Constant dense<1> : tensor<1xi64>
    %en = onnx.Constant dense<3> : tensor<1xi64>
    %ax = onnx.Constant dense<-1> : tensor<1xi64>
    %sl = onnx.Slice %m, %st, %en, %ax, %st : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3x2xf32>
    %c = onnx.Concat %sl, %sl {axis = -1 : i64} : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
    %a = onnx.Add %c, %s : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %a, %r : tensor<2x3x4xf32>, tensor<6x4xf32>
  }
}

// -----

// Defaults made explicit: Conv and pool windows, Gemm's alpha/beta, absent
// optional operands dropped from the end, LayerNorm's unused statistics,
// negative Slice starts counted from the end and clamped.
// CHECK-LABEL: func.func @defaults
// CHECK: fsdp.kernel "conv"(%arg0, %{{.*}}) params {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: fsdp.kernel "max_pool"(%{{.*}}) params {ceil_mode = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: fsdp.kernel "global_average_pool"
// CHECK: fsdp.kernel "gemm"(%{{.*}}, %{{.*}}) params {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 1 : i64}
// CHECK: fsdp.kernel "layer_norm"(%{{.*}}, %{{.*}}) params {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: fsdp.kernel "slice"(%{{.*}}) params {starts = array<i64: 0, 3>, steps = array<i64: 1, -1>}
// CHECK: fsdp.kernel "reduce_mean"(%{{.*}}) params {axes = array<i64: 1>, keepdims = 1 : i64}
// CHECK: fsdp.kernel "batch_norm"
// CHECK: fsdp.kernel "softmax_cross_entropy"(%{{.*}}, %arg1) params {ignore_index = -100 : i64, reduction = "mean"}
module {
  fsdp.param @cw : tensor<4x3x3x3xf32> at <"m.onnx", offset = 0, length = 432>
  fsdp.param @fw : tensor<4x4xf32> at <"m.onnx", offset = 432, length = 64>
  fsdp.param @g : tensor<4xf32> at <"m.onnx", offset = 496, length = 16>
  func.func @defaults(%x: tensor<2x3x8x8xf32>, %labels: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x4x4x4xf32>, tensor<f32>) {
    %none = onnx.NoValue
    %cw = fsdp.get_param @cw : tensor<4x3x3x3xf32>
    %c = onnx.Conv %x, %cw, %none {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, none) -> tensor<2x4x4x4xf32>
    %p, %i = onnx.MaxPool %c {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> (tensor<2x4x2x2xf32>, none)
    %gp = onnx.GlobalAveragePool %p : (tensor<2x4x2x2xf32>) -> tensor<2x4x1x1xf32>
    %fl = onnx.Flatten %gp : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
    %fw = fsdp.get_param @fw : tensor<4x4xf32>
    %y = onnx.Gemm %fl, %fw, %none {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
    %g = fsdp.get_param @g : tensor<4xf32>
    %n, %mean, %inv = onnx.LayerNormalization %y, %g, %none : (tensor<2x4xf32>, tensor<4xf32>, none) -> (tensor<2x4xf32>, none, none)
    %st = onnx.Constant dense<-1> : tensor<1xi64>
    %en = onnx.Constant dense<-100> : tensor<1xi64>
    %ax = onnx.Constant dense<1> : tensor<1xi64>
    %step = onnx.Constant dense<-1> : tensor<1xi64>
    %rev = onnx.Slice %n, %st, %en, %ax, %step : (tensor<2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4xf32>
    %rm = onnx.ReduceMean %rev {axes = array<i64: -1>} : (tensor<2x4xf32>) -> tensor<2x1xf32>
    %bn, %rmean, %rvar = onnx.BatchNormalization %c, %g, %g, %g, %g : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, none, none)
    %loss, %lp = onnx.SoftmaxCrossEntropyLoss %y, %labels, %none {ignore_index = -100 : i64} : (tensor<2x4xf32>, tensor<2xi64>, none) -> (tensor<f32>, none)
    return %rev, %rm, %bn, %loss : tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x4x4x4xf32>, tensor<f32>
  }
}

// -----

// The fused ops keep their parameters under the runtime's names.
// CHECK-LABEL: func.func @fused
// CHECK: fsdp.kernel "linear"(%arg0, %arg1, %arg2) params {activation = "gelu_tanh", trans_w = 1 : i64}
// CHECK: fsdp.kernel "rms_norm"(%{{.*}}) params {epsilon = 9.99999997E-7 : f32}
// CHECK: fsdp.kernel "gelu"(%{{.*}}) params {approximate = "none"}
// CHECK: fsdp.kernel "attention"(%arg3, %arg4, %arg3, %arg5) params {fill_value = 0xFF800000 : f32, mask_kind = "fill", scale = 5.000000e-01 : f32}
func.func @fused(%x: tensor<2x4xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>, %q: tensor<2x3x4xf32>, %kt: tensor<2x4x3xf32>, %mask: tensor<1x3x3xi1>) -> (tensor<2x8xf32>, tensor<2x3x4xf32>) {
  %y = fsdp.linear %x, %w, %b {activation = "gelu_tanh", transpose_weight} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n = fsdp.rms_norm %y {epsilon = 1.0e-06 : f32} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = fsdp.gelu %n : tensor<2x8xf32>
  %a = fsdp.attention %q, %kt, %q, %mask {scale = 0.5 : f32, mask_kind = "fill", fill_value = 0xFF800000 : f32} : (tensor<2x3x4xf32>, tensor<2x4x3xf32>, tensor<2x3x4xf32>, tensor<1x3x3xi1>) -> tensor<2x3x4xf32>
  return %g, %a : tensor<2x8xf32>, tensor<2x3x4xf32>
}

// -----

// Attention in training: the forward with its lse as the kernel's second
// output, and attention_grad on (q, k_t, v, mask?, y, lse, dy).
// CHECK-LABEL: func.func @attention_training
// CHECK: %[[A:.*]]:2 = fsdp.kernel "attention"(%arg0, %arg1, %arg2) params {fill_value = 0.000000e+00 : f32, mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> (tensor<2x3x6xf32>, tensor<2x3xf32>)
// CHECK: fsdp.kernel "attention_grad"(%arg0, %arg1, %arg2, %[[A]]#0, %[[A]]#1, %arg3) params {fill_value = 0.000000e+00 : f32, mask_kind = "causal", scale = 5.000000e-01 : f32} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<2x3x6xf32>, tensor<2x3xf32>, tensor<2x3x6xf32>) -> (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>)
// CHECK: fsdp.kernel "attention_grad"(%arg0, %arg1, %arg2, %arg4, %[[A]]#0, %[[A]]#1, %arg3) params {fill_value = -1.000000e+04 : f32, mask_kind = "fill", scale = 5.000000e-01 : f32}
func.func @attention_training(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x5xf32>, %v: tensor<2x5x6xf32>, %g: tensor<2x3x6xf32>, %m: tensor<3x5xi1>) -> (tensor<2x3x6xf32>, tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<2x3x4xf32>) {
  %y, %lse = fsdp.attention %q, %kt, %v {scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>) -> (tensor<2x3x6xf32>, tensor<2x3xf32>)
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %v, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "causal"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<2x3x6xf32>, tensor<2x3xf32>, tensor<2x3x6xf32>) -> (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>)
  %dq2, %dkt2, %dv2 = fsdp.attention_grad %q, %kt, %v, %m, %y, %lse, %g {scale = 0.5 : f32, mask_kind = "fill", fill_value = -1.0e4 : f32} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<3x5xi1>, tensor<2x3x6xf32>, tensor<2x3xf32>, tensor<2x3x6xf32>) -> (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>)
  return %y, %dq, %dkt, %dv, %dq2 : tensor<2x3x6xf32>, tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<2x5x6xf32>, tensor<2x3x4xf32>
}

// -----

// Cross-entropy in training: the loss kernel with its log-sum-exp as the
// last output (lse = 1), and the gradient reading it as its last input;
// a gradient without it (an older graph) recomputes it (no lse param).
// CHECK-LABEL: func.func @cross_entropy_training
// CHECK: %[[L:.*]]:2 = fsdp.kernel "softmax_cross_entropy"(%arg0, %arg1, %arg2) params {ignore_index = -1 : i64, lse = 1 : i64, reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> (tensor<f32>, tensor<4xf32>)
// CHECK: fsdp.kernel "softmax_cross_entropy_grad"(%arg0, %arg1, %arg3, %arg2, %[[L]]#1) params {ignore_index = -1 : i64, lse = 1 : i64, reduction = "mean"} : (tensor<4x3xf32>, tensor<4xi64>, tensor<f32>, tensor<3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
// CHECK: fsdp.kernel "softmax_cross_entropy_grad"(%arg0, %arg1, %arg3) params {reduction = "sum"} : (tensor<4x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x3xf32>
func.func @cross_entropy_training(%s: tensor<4x3xf32>, %l: tensor<4xi64>, %w: tensor<3xf32>, %g: tensor<f32>) -> (tensor<f32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %loss, %lse = fsdp.softmax_cross_entropy %s, %l, %w {ignore_index = -1 : i64} : (tensor<4x3xf32>, tensor<4xi64>, tensor<3xf32>) -> (tensor<f32>, tensor<4xf32>)
  %gs = fsdp.softmax_cross_entropy_grad %s, %l, %g, %w lse(%lse) {ignore_index = -1 : i64} : (tensor<4x3xf32>, tensor<4xi64>, tensor<f32>, tensor<3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  %gs2 = fsdp.softmax_cross_entropy_grad %s, %l, %g {reduction = "sum"} : (tensor<4x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x3xf32>
  return %loss, %gs, %gs2 : tensor<f32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// Batch norm in training: batch_norm_train's five outputs, and
// batch_norm_grad on (dy, x, scale, saved mean, saved inverse std).
// CHECK-LABEL: func.func @batch_norm_training
// CHECK: %[[B:.*]]:5 = fsdp.kernel "batch_norm_train"(%arg0, %arg1, %arg2, %arg3, %arg4) params {epsilon = 1.000000e-03 : f32, momentum = 8.000000e-01 : f32} : (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK: fsdp.kernel "batch_norm_grad"(%arg5, %arg0, %arg1, %[[B]]#1, %[[B]]#2) : (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>)
func.func @batch_norm_training(%x: tensor<2x4x3xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %g: tensor<2x4x3xf32>) -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %y, %mean, %inv, %rm, %rv = fsdp.batch_norm_train %x, %s, %b, %m, %v {epsilon = 1.0e-3 : f32, momentum = 0.8 : f32} : (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %dx, %ds, %db = fsdp.batch_norm_grad %g, %x, %s, %mean, %inv : (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y, %dx, %ds, %rm, %rv : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Ops on constants run as kernels: the lowering computes nothing at compile
// time (the dialect conversion's folding is undone, see
// addLoweredLegality).
// CHECK-LABEL: func.func @constant_operands
// CHECK:      %[[A:.*]] = onnx.Constant dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NEXT: %[[B:.*]] = onnx.Constant dense<[3.000000e+00, 4.000000e+00]>
// CHECK-NEXT: %[[S:.*]] = fsdp.kernel "add"(%[[A]], %[[B]])
// CHECK-NEXT: %[[M:.*]] = fsdp.kernel "mul"(%[[S]], %arg0)
// CHECK-NEXT: return %[[S]], %[[M]]
func.func @constant_operands(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %a = onnx.Constant dense<[1.0, 2.0]> : tensor<2xf32>
  %b = onnx.Constant dense<[3.0, 4.0]> : tensor<2xf32>
  %s = onnx.Add %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %m = onnx.Mul %s, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %s, %m : tensor<2xf32>, tensor<2xf32>
}

// -----

// A declaration (no body) beside a function is left as it is, not a crash.
// CHECK-LABEL: func.func private @declared(tensor<2xf32>) -> tensor<2xf32>
// CHECK-LABEL: func.func @beside
// CHECK:      fsdp.kernel "relu"(%arg0)
func.func private @declared(tensor<2xf32>) -> tensor<2xf32>
func.func @beside(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = onnx.Relu %x : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Trilu: a constant k (or none: 0) is a parameter; a computed one is the
// kernel's second input.
// CHECK-LABEL: func.func @trilu
// CHECK-NEXT: %[[A:.*]] = fsdp.kernel "trilu"(%arg0) params {k = -1 : i64, upper = 0 : i64}
// CHECK-NEXT: %[[B:.*]] = fsdp.kernel "trilu"(%[[A]]) params {k = 0 : i64, upper = 1 : i64}
// CHECK-NEXT: %[[C:.*]] = fsdp.kernel "trilu"(%[[B]], %arg1) params {upper = 1 : i64}
// CHECK-NEXT: return %[[C]]
func.func @trilu(%x: tensor<2x3x4xf32>, %k: tensor<i64>) -> tensor<2x3x4xf32> {
  %m1 = onnx.Constant dense<-1> : tensor<i64>
  %a = onnx.Trilu %x, %m1 {upper = 0 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %none = onnx.NoValue
  %b = onnx.Trilu %a, %none : (tensor<2x3x4xf32>, none) -> tensor<2x3x4xf32>
  %c = onnx.Trilu %b, %k : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  return %c : tensor<2x3x4xf32>
}

// -----

// The negative log-likelihood and its gradient, GatherElements and the
// scatters: axes made non-negative, reductions and ignore_index kept, an
// absent weight dropped.
// CHECK-LABEL: func.func @indexed
// CHECK: fsdp.kernel "nll_loss"(%arg0, %arg1) params {reduction = "mean"}
// CHECK: fsdp.kernel "nll_loss"(%arg0, %arg1, %arg2) params {ignore_index = -1 : i64, reduction = "none"}
// CHECK: fsdp.kernel "nll_loss_grad"(%arg1, %{{.*}}, %arg2) params {ignore_index = -1 : i64, reduction = "sum"}
// CHECK: fsdp.kernel "gather_elements"(%arg0, %arg3) params {axis = 1 : i64}
// CHECK: fsdp.kernel "scatter_elements"(%arg0, %arg3, %{{.*}}) params {axis = 1 : i64, reduction = "add"}
// CHECK: fsdp.kernel "scatter_nd"(%arg0, %arg4, %{{.*}}) params {reduction = "none"}
func.func @indexed(%x: tensor<2x5xf32>, %t: tensor<2xi64>, %w: tensor<5xf32>, %i: tensor<2x3xi64>, %nd: tensor<1x1xi64>) -> (tensor<f32>, tensor<2xf32>, tensor<2x5xf32>, tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x5xf32>) {
  %none = onnx.NoValue
  %m = onnx.NegativeLogLikelihoodLoss %x, %t, %none : (tensor<2x5xf32>, tensor<2xi64>, none) -> tensor<f32>
  %n = onnx.NegativeLogLikelihoodLoss %x, %t, %w {ignore_index = -1 : i64, reduction = "none"} : (tensor<2x5xf32>, tensor<2xi64>, tensor<5xf32>) -> tensor<2xf32>
  %gx = fsdp.nll_loss_grad %t, %m, %w {ignore_index = -1 : i64, reduction = "sum"} : (tensor<2xi64>, tensor<f32>, tensor<5xf32>) -> tensor<2x5xf32>
  %g = onnx.GatherElements %x, %i {axis = -1 : i64} : (tensor<2x5xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %s = onnx.ScatterElements %x, %i, %g {axis = -1 : i64, reduction = "add"} : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  %c0 = onnx.Constant dense<0> : tensor<1xi64>
  %c1 = onnx.Constant dense<1> : tensor<1xi64>
  %row = onnx.Slice %x, %c0, %c1, %none, %none : (tensor<2x5xf32>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<1x5xf32>
  %nds = onnx.ScatterND %x, %nd, %row : (tensor<2x5xf32>, tensor<1x1xi64>, tensor<1x5xf32>) -> tensor<2x5xf32>
  return %m, %n, %gx, %g, %s, %nds : tensor<f32>, tensor<2xf32>, tensor<2x5xf32>, tensor<2x3xf32>, tensor<2x5xf32>, tensor<2x5xf32>
}

// -----

// Optional outputs become the kernels' extra outputs: LayerNormalization's
// Mean and InvStdDev, SoftmaxCrossEntropyLoss's log_prob, MaxPool's Indices
// (with their storage_order).
// CHECK-LABEL: func.func @optional_outputs
// CHECK: %{{.*}}:3 = fsdp.kernel "layer_norm"(%arg0, %arg1) params {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
// CHECK: %{{.*}}:2 = fsdp.kernel "softmax_cross_entropy"(%arg0, %arg2) params {reduction = "mean"} : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK: %{{.*}}:2 = fsdp.kernel "max_pool"(%arg3) params {{{.*}}storage_order = 1 : i64{{.*}}} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>)
func.func @optional_outputs(%x: tensor<2x4xf32>, %s: tensor<4xf32>, %l: tensor<2xi64>, %img: tensor<1x1x4x4xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x4xf32>, tensor<1x1x2x2xi64>) {
  %none = onnx.NoValue
  %y, %m, %i = onnx.LayerNormalization %x, %s, %none : (tensor<2x4xf32>, tensor<4xf32>, none) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %loss, %lp = onnx.SoftmaxCrossEntropyLoss %x, %l, %none : (tensor<2x4xf32>, tensor<2xi64>, none) -> (tensor<f32>, tensor<2x4xf32>)
  %p, %pi = onnx.MaxPool %img {kernel_shape = array<i64: 2, 2>, storage_order = 1 : i64, strides = array<i64: 2, 2>} : (tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>)
  return %m, %i, %lp, %pi : tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x4xf32>, tensor<1x1x2x2xi64>
}

// -----

// Einsum in torch's forms: batched matmuls (the second operand read
// transposed with trans_b), b @ a when that saves the result's transpose
// ("bji,bjk->bki": one transpose, not two), an inner product (views to
// [1, K] @ [K, 1]), a permutation and a sum.
// CHECK-LABEL: func.func @einsum
// CHECK: fsdp.kernel "matmul"(%arg0, %arg1) params {trans_b = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
// CHECK: fsdp.kernel "matmul"(%arg2, %arg2) params {trans_b = 1 : i64} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
// CHECK: %[[BT:.*]] = fsdp.kernel "transpose"(%arg1) params {perm = array<i64: 0, 2, 1>} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
// CHECK: fsdp.kernel "matmul"(%[[BT]], %arg5) params {trans_b = 0 : i64} : (tensor<2x5x4xf32>, tensor<2x4x3xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[ROW:.*]] = fsdp.view %arg4 : tensor<4xf32> to tensor<1x4xf32>
// CHECK: %[[COL:.*]] = fsdp.view %arg4 : tensor<4xf32> to tensor<4x1xf32>
// CHECK: %[[DOT:.*]] = fsdp.kernel "matmul"(%[[ROW]], %[[COL]]) params {trans_b = 0 : i64} : (tensor<1x4xf32>, tensor<4x1xf32>) -> tensor<1x1xf32>
// CHECK: fsdp.view %[[DOT]] : tensor<1x1xf32> to tensor<f32>
// CHECK: fsdp.kernel "transpose"(%arg3) params {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK: fsdp.kernel "reduce_sum"(%arg0) params {axes = array<i64: 0, 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<3xf32>
func.func @einsum(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %q: tensor<2x2x3x4xf32>, %t: tensor<4x3xf32>, %v: tensor<4xf32>, %at: tensor<2x4x3xf32>) -> (tensor<2x3x5xf32>, tensor<2x2x3x3xf32>, tensor<2x5x3xf32>, tensor<f32>, tensor<3x4xf32>, tensor<3xf32>) {
  %0 = onnx.Einsum %a, %b {equation = "bij, bjk -> bik"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %1 = onnx.Einsum %q, %q {equation = "bhid,bhjd->bhij"} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x3xf32>
  %2 = onnx.Einsum %at, %b {equation = "bji,bjk->bki"} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x5x3xf32>
  %3 = onnx.Einsum %v, %v {equation = "i,i"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %4 = onnx.Einsum %t {equation = "ij->ji"} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %5 = onnx.Einsum %a {equation = "bij->i"} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x5xf32>, tensor<2x2x3x3xf32>, tensor<2x5x3xf32>, tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}

// -----

// Any Einsum of distinct letters: operands transposed to [batch, free,
// contracted] and viewed as [batch, M, K], one batched matmul, viewed back
// and transposed to the output. Funnel's "bind,snd->bnis" (n batch, d
// contracted); two contracted letters ("abcd,cde->abe": views only); a
// letter of one operand summed away first (x); an outer product (a
// broadcasting mul); a size-1 batch dim broadcast by the matmul (an
// ellipsis); a size-1 contracted dim ("ij,bjk->ik": b summed away, then j
// of the other operand summed to size 1); three operands from the left.
// CHECK-LABEL: func.func @einsum_general
// CHECK: %[[A:.*]] = fsdp.kernel "transpose"(%arg0) params {perm = array<i64: 2, 0, 1, 3>} : (tensor<2x4x3x5xf32>) -> tensor<3x2x4x5xf32>
// CHECK: %[[B:.*]] = fsdp.kernel "transpose"(%arg1) params {perm = array<i64: 1, 2, 0>} : (tensor<6x3x5xf32>) -> tensor<3x5x6xf32>
// CHECK: %[[A3:.*]] = fsdp.view %[[A]] : tensor<3x2x4x5xf32> to tensor<3x8x5xf32>
// CHECK: %[[P:.*]] = fsdp.kernel "matmul"(%[[A3]], %[[B]]) params {trans_b = 0 : i64} : (tensor<3x8x5xf32>, tensor<3x5x6xf32>) -> tensor<3x8x6xf32>
// CHECK: %[[P4:.*]] = fsdp.view %[[P]] : tensor<3x8x6xf32> to tensor<3x2x4x6xf32>
// CHECK: %[[FUNNEL:.*]] = fsdp.kernel "transpose"(%[[P4]]) params {perm = array<i64: 1, 0, 2, 3>} : (tensor<3x2x4x6xf32>) -> tensor<2x3x4x6xf32>
// CHECK: %[[C2:.*]] = fsdp.view %arg2 : tensor<2x3x4x5xf32> to tensor<6x20xf32>
// CHECK: %[[D2:.*]] = fsdp.view %arg3 : tensor<4x5x6xf32> to tensor<20x6xf32>
// CHECK: %[[CD:.*]] = fsdp.kernel "matmul"(%[[C2]], %[[D2]]) params {trans_b = 0 : i64} : (tensor<6x20xf32>, tensor<20x6xf32>) -> tensor<6x6xf32>
// CHECK: %[[TWO:.*]] = fsdp.view %[[CD]] : tensor<6x6xf32> to tensor<2x3x6xf32>
// CHECK: %[[X:.*]] = fsdp.kernel "reduce_sum"(%arg4) params {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[X3:.*]] = fsdp.view %[[X]] : tensor<2x4xf32> to tensor<2x1x4xf32>
// CHECK: %[[XY:.*]] = fsdp.kernel "matmul"(%[[X3]], %arg5) params {trans_b = 0 : i64} : (tensor<2x1x4xf32>, tensor<2x4x5xf32>) -> tensor<2x1x5xf32>
// CHECK: %[[XY2:.*]] = fsdp.view %[[XY]] : tensor<2x1x5xf32> to tensor<2x5xf32>
// CHECK: %[[SUMMED:.*]] = fsdp.kernel "transpose"(%[[XY2]]) params {perm = array<i64: 1, 0>} : (tensor<2x5xf32>) -> tensor<5x2xf32>
// CHECK: %[[U:.*]] = fsdp.view %arg6 : tensor<3xf32> to tensor<3x1xf32>
// CHECK: %[[V:.*]] = fsdp.view %arg7 : tensor<4xf32> to tensor<1x4xf32>
// CHECK: %[[OUTER:.*]] = fsdp.kernel "mul"(%[[U]], %[[V]]) : (tensor<3x1xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[BCAST:.*]] = fsdp.kernel "matmul"(%arg8, %arg5) params {trans_b = 0 : i64} : (tensor<1x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[YB:.*]] = fsdp.kernel "reduce_sum"(%arg5) params {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x4x5xf32>) -> tensor<4x5xf32>
// CHECK: %[[YJ:.*]] = fsdp.kernel "reduce_sum"(%[[YB]]) params {axes = array<i64: 0>, keepdims = 1 : i64} : (tensor<4x5xf32>) -> tensor<1x5xf32>
// CHECK: %[[ONE:.*]] = fsdp.kernel "matmul"(%arg9, %[[YJ]]) params {trans_b = 0 : i64} : (tensor<3x1xf32>, tensor<1x5xf32>) -> tensor<3x5xf32>
// CHECK: %[[IJ:.*]] = fsdp.kernel "matmul"(%arg10, %arg11) params {trans_b = 0 : i64} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[IL:.*]] = fsdp.kernel "matmul"(%[[IJ]], %arg12) params {trans_b = 0 : i64} : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
// CHECK: return %[[FUNNEL]], %[[TWO]], %[[SUMMED]], %[[OUTER]], %[[BCAST]], %[[ONE]], %[[IL]]
func.func @einsum_general(%a: tensor<2x4x3x5xf32>, %b: tensor<6x3x5xf32>, %c: tensor<2x3x4x5xf32>, %d: tensor<4x5x6xf32>, %x: tensor<2x3x4xf32>, %y: tensor<2x4x5xf32>, %u: tensor<3xf32>, %v: tensor<4xf32>, %p: tensor<1x3x4xf32>, %q: tensor<3x1xf32>, %m0: tensor<2x3xf32>, %m1: tensor<3x4xf32>, %m2: tensor<4x5xf32>) -> (tensor<2x3x4x6xf32>, tensor<2x3x6xf32>, tensor<5x2xf32>, tensor<3x4xf32>, tensor<2x3x5xf32>, tensor<3x5xf32>, tensor<2x5xf32>) {
  %0 = onnx.Einsum %a, %b {equation = "bind,snd->bnis"} : (tensor<2x4x3x5xf32>, tensor<6x3x5xf32>) -> tensor<2x3x4x6xf32>
  %1 = onnx.Einsum %c, %d {equation = "abcd,cde->abe"} : (tensor<2x3x4x5xf32>, tensor<4x5x6xf32>) -> tensor<2x3x6xf32>
  %2 = onnx.Einsum %x, %y {equation = "bxi,bij->jb"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<5x2xf32>
  %3 = onnx.Einsum %u, %v {equation = "i,j"} : (tensor<3xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %4 = onnx.Einsum %p, %y {equation = "...ij,...jk"} : (tensor<1x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %5 = onnx.Einsum %q, %y {equation = "ij,bjk->ik"} : (tensor<3x1xf32>, tensor<2x4x5xf32>) -> tensor<3x5xf32>
  %6 = onnx.Einsum %m0, %m1, %m2 {equation = "ij,jk,kl->il"} : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3x4x6xf32>, tensor<2x3x6xf32>, tensor<5x2xf32>, tensor<3x4xf32>, tensor<2x3x5xf32>, tensor<3x5xf32>, tensor<2x5xf32>
}

// -----

// Sum, Max and Min of more than two inputs: a chain of binary kernels, each
// partial result of its operands' broadcast shape.
// CHECK-LABEL: func.func @variadic
// CHECK: %[[S:.*]] = fsdp.kernel "add"(%arg0, %arg1) : (tensor<3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK: fsdp.kernel "add"(%[[S]], %arg2) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK: %[[M:.*]] = fsdp.kernel "max"(%arg0, %arg0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[M2:.*]] = fsdp.kernel "max"(%[[M]], %arg1) : (tensor<3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
// CHECK: fsdp.kernel "max"(%[[M2]], %arg2) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
func.func @variadic(%a: tensor<3xf32>, %b: tensor<2x1xf32>, %c: tensor<f32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %s = onnx.Sum %a, %b, %c : (tensor<3xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x3xf32>
  %m = onnx.Max %a, %a, %b, %c : (tensor<3xf32>, tensor<3xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %s, %m : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Mean of several inputs: each broadcast to the output's shape, stacked
// along a new leading dim and averaged over it.
// CHECK-LABEL: func.func @mean
// CHECK: %[[E:.*]] = fsdp.kernel "expand"(%arg0) : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[V0:.*]] = fsdp.view %[[E]] : tensor<2x3xf32> to tensor<1x2x3xf32>
// CHECK: %[[V1:.*]] = fsdp.view %arg1 : tensor<2x3xf32> to tensor<1x2x3xf32>
// CHECK: %[[C:.*]] = fsdp.kernel "concat"(%[[V0]], %[[V1]]) params {axis = 0 : i64} : (tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> tensor<2x2x3xf32>
// CHECK: fsdp.kernel "reduce_mean"(%[[C]]) params {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x2x3xf32>) -> tensor<2x3xf32>
func.func @mean(%a: tensor<3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %m = onnx.Mean %a, %b : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %m : tensor<2x3xf32>
}

// -----

// CumSum: a constant axis is a non-negative parameter; a computed one is
// the kernel's second input.
// CHECK-LABEL: func.func @cumsum
// CHECK-NEXT: %[[A:.*]] = fsdp.kernel "cumsum"(%arg0) params {axis = 2 : i64, exclusive = 1 : i64, reverse = 0 : i64}
// CHECK-NEXT: %[[B:.*]] = fsdp.kernel "cumsum"(%[[A]], %arg1) params {exclusive = 0 : i64, reverse = 1 : i64}
// CHECK-NEXT: return %[[B]]
func.func @cumsum(%x: tensor<2x3x4xf32>, %axis: tensor<i32>) -> tensor<2x3x4xf32> {
  %m1 = onnx.Constant dense<-1> : tensor<i64>
  %a = onnx.CumSum %x, %m1 {exclusive = 1 : i64} : (tensor<2x3x4xf32>, tensor<i64>) -> tensor<2x3x4xf32>
  %b = onnx.CumSum %a, %axis {reverse = 1 : i64} : (tensor<2x3x4xf32>, tensor<i32>) -> tensor<2x3x4xf32>
  return %b : tensor<2x3x4xf32>
}
