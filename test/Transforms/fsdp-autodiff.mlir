// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// Gemm + Relu + cross-entropy: the backward of each op, the gradient of a
// tied parameter summed over its two reads, none for the frozen one.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {fsdp.name = "loss"}, tensor<4x4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}, tensor<4xf32> {fsdp.grad_of = @b, fsdp.name = "grad.b"})
// CHECK: %[[LOSS:.*]], %[[LSE:.*]] = fsdp.softmax_cross_entropy
// CHECK: %[[SEED:.*]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DS:.*]] = fsdp.softmax_cross_entropy_grad %{{.*}}, %arg1, %[[SEED]] lse(%[[LSE]]) {{.*}}:
// Second Gemm (transB = 1): dA = g B, dB = g^T A, dC = sum over rows.
// CHECK: onnx.MatMul %[[DS]], %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK: onnx.MatMul %{{.*}}, %{{.*}} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK: onnx.ReduceSum %[[DS]], %{{.*}} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
// Relu: where(x > 0, g, 0).
// CHECK: onnx.Greater
// CHECK: onnx.Where
// The tied weight's two gradients are added; the frozen @f gets nothing.
// CHECK: %[[GW:.*]] = onnx.Add %{{.*}}, %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK: return %[[LOSS]], %[[GW]], %{{.*}} : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>
module {
  fsdp.param @f : tensor<4x4xf32> frozen at <"m.onnx", offset = 0, length = 64>
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 64, length = 64>
  fsdp.param @b : tensor<4xf32> at <"m.onnx", offset = 128, length = 16>
  func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi64>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %none = onnx.NoValue
    %f = fsdp.get_param @f : tensor<4x4xf32>
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %b = fsdp.get_param @b : tensor<4xf32>
    %h = onnx.Gemm %x, %f, %none {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, none) -> tensor<2x4xf32>
    %y1 = onnx.Gemm %h, %w, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = onnx.Relu %y1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %w2 = fsdp.get_param @w : tensor<4x4xf32>
    %y2 = onnx.Gemm %r, %w2, %b {transB = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %loss, %lp = onnx.SoftmaxCrossEntropyLoss %y2, %labels, %none : (tensor<2x4xf32>, tensor<2xi64>, none) -> (tensor<f32>, none)
    return %loss : tensor<f32>
  }
}

// -----

// Broadcasting is undone by summation; Tanh and Sigmoid use their outputs.
// CHECK-LABEL: func.func @forward
// CHECK: onnx.Tanh
// CHECK: onnx.Sigmoid
// CHECK: onnx.ReduceMean
// The mean's backward: reshape, scale by 1/count, expand back.
// CHECK: onnx.Constant dense<6.250000e-02> : tensor<f32>
// CHECK: onnx.Expand
// d(x * s)/ds for s [8] broadcast over [2, 8]: summed over axis 0.
// CHECK: onnx.ReduceSum %{{.*}} : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
// CHECK: onnx.Reshape %{{.*}} : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<8xf32>
module {
  fsdp.param @s : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
    %s = fsdp.get_param @s : tensor<8xf32>
    %0 = onnx.Mul %x, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %1 = onnx.Tanh %0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %2 = onnx.Sigmoid %1 : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %3 = onnx.ReduceMean %2 {keepdims = 0 : i64} : (tensor<2x8xf32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

// -----

// Embedding lookup (scatter-add), LayerNorm (statistics recomputed),
// masked fill, split / concat and a step-1 slice (zero padding).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<10x4xf32> {fsdp.grad_of = @emb, fsdp.name = "grad.emb"}, tensor<4xf32> {fsdp.grad_of = @g, fsdp.name = "grad.g"}
// Slice [1, 3) of 4 columns: zeros before (1) and after (1).
// CHECK: onnx.Concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<3x1xf32>, tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
// Split's pieces: their cotangents concatenated back.
// CHECK: onnx.Concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
// Where(mask, fill, x): x's cotangent where the mask is false.
// CHECK: onnx.Where %arg1, %{{.*}}, %{{.*}} : (tensor<3x4xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// LayerNorm: one fsdp.norm_grad gives x and the scale theirs.
// CHECK: %[[DX:.*]], %[[DS:.*]], %{{.*}} = fsdp.norm_grad %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = {{.*}}, kind = "layer"}
// CHECK: %[[GE:.*]] = fsdp.gather_grad %[[DX]], %arg0 {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
// CHECK: return %{{.*}}, %[[GE]], %[[DS]] :
module {
  fsdp.param @emb : tensor<10x4xf32> at <"m.onnx", offset = 0, length = 160>
  fsdp.param @g : tensor<4xf32> at <"m.onnx", offset = 160, length = 16>
  func.func @forward(%ids: tensor<3xi64>, %mask: tensor<3x4xi1>) -> tensor<f32> {
    %none = onnx.NoValue
    %emb = fsdp.get_param @emb : tensor<10x4xf32>
    %g = fsdp.get_param @g : tensor<4xf32>
    %x = onnx.Gather %emb, %ids : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %n, %m, %i = onnx.LayerNormalization %x, %g, %none : (tensor<3x4xf32>, tensor<4xf32>, none) -> (tensor<3x4xf32>, none, none)
    %fill = onnx.Constant dense<-1.000000e+01> : tensor<f32>
    %w = onnx.Where %mask, %fill, %n : (tensor<3x4xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %sizes = onnx.Constant dense<2> : tensor<2xi64>
    %a, %b = onnx.Split %w, %sizes {axis = 1 : i64} : (tensor<3x4xf32>, tensor<2xi64>) -> (tensor<3x2xf32>, tensor<3x2xf32>)
    %ab = onnx.Mul %a, %b : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %c = onnx.Concat %ab, %a {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
    %s0 = onnx.Constant dense<1> : tensor<1xi64>
    %s1 = onnx.Constant dense<3> : tensor<1xi64>
    %sl = onnx.Slice %c, %s0, %s1, %s0, %none : (tensor<3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<3x2xf32>
    %r = onnx.ReduceMean %sl {keepdims = 0 : i64} : (tensor<3x2xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// Erf, Pow by a constant, Sqrt, Reciprocal and LogSoftmax.
// CHECK-LABEL: func.func @forward
// LogSoftmax: g - exp(y) * sum(g).
// CHECK: onnx.Exp
// Reciprocal: -g y^2; Sqrt: g / (2 y); Pow 3: g * 3 x^2; Erf: 2/sqrt(pi) exp(-x^2).
// CHECK: onnx.Neg
// CHECK: onnx.Constant dense<2.000000e+00>
// CHECK: onnx.Pow %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<f32>)
// CHECK: onnx.Constant dense<1.12837923> : tensor<f32>
module {
  fsdp.param @p : tensor<3xf32> at <"m.onnx", offset = 0, length = 12>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %p = fsdp.get_param @p : tensor<3xf32>
    %three = onnx.Constant dense<3.000000e+00> : tensor<f32>
    %0 = onnx.Add %x, %p : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %1 = onnx.Erf %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = onnx.Pow %1, %three : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %3 = onnx.Exp %2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = onnx.Sqrt %3 : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = onnx.Reciprocal %4 : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %6 = onnx.LogSoftmax %5 : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %7 = onnx.ReduceMean %6 {keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    return %7 : tensor<f32>
  }
}

// -----

// A strided, reversed Slice (scattered back by fsdp.gather_grad at the
// positions it read), 1-D MatMul operands (a vector is a [1, K] or [K, 1]
// matrix) and a class-weighted cross-entropy over [N, C, T] scores.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<4xf32> {fsdp.grad_of = @v, fsdp.name = "grad.v"}, tensor<4x2xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}
// CHECK: %[[CW:.*]] = onnx.Constant dense<[2.000000e+00, 5.000000e-01]>
// CHECK: %{{.*}}, %[[LSE:.*]] = fsdp.softmax_cross_entropy %{{.*}}, %arg1, %[[CW]] {ignore_index = -1 : i64} : (tensor<2x2x3xf32>, tensor<2x3xi64>, tensor<2xf32>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK: fsdp.softmax_cross_entropy_grad %{{.*}}, %arg1, %{{.*}}, %[[CW]] lse(%[[LSE]]) {ignore_index = -1 : i64} : (tensor<2x2x3xf32>, tensor<2x3xi64>, tensor<f32>, tensor<2xf32>, tensor<2x3xf32>) -> tensor<2x2x3xf32>
// Steps -2 from position 5 read 5, 3, 1: the gradient goes back there.
// CHECK: %[[POS:.*]] = onnx.Constant dense<[5, 3, 1]> : tensor<3xi64>
// CHECK: fsdp.gather_grad %{{.*}}, %[[POS]] {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<2x6xf32>
// v @ w, v 1-D: dw = v^T @ g with v as [1, 4] and g as [1, 2].
// CHECK: onnx.MatMul %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<1x2xf32>) -> tensor<4x2xf32>
// x @ v, v 1-D: dv = x^T @ g with v as [4, 1]; one v for every batch
// element, so the batch folds into the contraction: x as [12, 4], g as
// [12, 1], no per-element product summed afterwards.
// CHECK: %[[XT:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<12x4xf32>) -> tensor<4x12xf32>
// CHECK-NEXT: onnx.MatMul %[[XT]], %{{.*}} : (tensor<4x12xf32>, tensor<12x1xf32>) -> tensor<4x1xf32>
module {
  fsdp.param @v : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  fsdp.param @w : tensor<4x2xf32> at <"m.onnx", offset = 16, length = 32>
  func.func @forward(%x: tensor<2x6x4xf32>, %labels: tensor<2x3xi64>) -> tensor<f32> {
    %v = fsdp.get_param @v : tensor<4xf32>
    %w = fsdp.get_param @w : tensor<4x2xf32>
    %s = onnx.MatMul %x, %v : (tensor<2x6x4xf32>, tensor<4xf32>) -> tensor<2x6xf32>
    %vw = onnx.MatMul %v, %w : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
    %shape = onnx.Constant dense<[2, 1]> : tensor<2xi64>
    %col = onnx.Reshape %vw, %shape : (tensor<2xf32>, tensor<2xi64>) -> tensor<2x1xf32>
    %start = onnx.Constant dense<5> : tensor<1xi64>
    %end = onnx.Constant dense<-10> : tensor<1xi64>
    %axis = onnx.Constant dense<1> : tensor<1xi64>
    %step = onnx.Constant dense<-2> : tensor<1xi64>
    %r = onnx.Slice %s, %start, %end, %axis, %step : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3xf32>
    %un = onnx.Constant dense<1> : tensor<1xi64>
    %r3 = onnx.Unsqueeze %r, %un : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x1x3xf32>
    %scores = onnx.Mul %r3, %col : (tensor<2x1x3xf32>, tensor<2x1xf32>) -> tensor<2x2x3xf32>
    %cw = onnx.Constant dense<[2.0, 0.5]> : tensor<2xf32>
    %loss, %lp = onnx.SoftmaxCrossEntropyLoss %scores, %labels, %cw {ignore_index = -1 : i64, reduction = "mean"} : (tensor<2x2x3xf32>, tensor<2x3xi64>, tensor<2xf32>) -> (tensor<f32>, none)
    return %loss : tensor<f32>
  }
}

// -----

// Abs, Log, variadic Sum, float casts and ReduceMax (shared evenly by the
// maximal elements).
// CHECK-LABEL: func.func @forward
// Cast f16 -> f32: the cotangent cast back to f16.
// CHECK: onnx.Cast %{{.*}} {to = 10 : i64} : (tensor<2xf32>) -> tensor<2xf16>
// ReduceMax: where x equals the max, g over the number of ties.
// CHECK: %[[IS:.*]] = onnx.Equal %{{.*}}, %{{.*}} : (tensor<2x3xf16>, tensor<2x1xf16>) -> tensor<2x3xi1>
// CHECK: %[[TIES:.*]] = onnx.ReduceSum %{{.*}}, %{{.*}} : (tensor<2x3xf16>, tensor<1xi64>) -> tensor<2x1xf16>
// CHECK: %[[SHARE:.*]] = onnx.Div %{{.*}}, %[[TIES]] : (tensor<2x1xf16>, tensor<2x1xf16>) -> tensor<2x1xf16>
// CHECK: onnx.Where %[[IS]], %[[SHARE]], %{{.*}} : (tensor<2x3xi1>, tensor<2x1xf16>, tensor<f16>) -> tensor<2x3xf16>
// CHECK: onnx.Cast %{{.*}} {to = 1 : i64} : (tensor<2x3xf16>) -> tensor<2x3xf32>
// Log: g / x. Abs: g, -g or 0 by the sign of x.
// CHECK: onnx.Div %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: onnx.Less
// CHECK: onnx.Greater
// The Sum's cotangent reaches @p twice (directly and through Abs).
// CHECK: %[[G:.*]] = onnx.Add
// CHECK: return %{{.*}}, %[[G]]
module {
  fsdp.param @p : tensor<2x3xf32> at <"m.onnx", offset = 0, length = 24>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %p = fsdp.get_param @p : tensor<2x3xf32>
    %a = onnx.Abs %p : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %l = onnx.Log %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = onnx.Sum %l, %x, %p : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %h = onnx.Cast %s {to = 10 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf16>
    %m = onnx.ReduceMax %h {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x3xf16>) -> tensor<2xf16>
    %f = onnx.Cast %m {to = 1 : i64} : (tensor<2xf16>) -> tensor<2xf32>
    %r = onnx.ReduceSum %f, %none {keepdims = 0 : i64} : (tensor<2xf32>, none) -> tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// NegativeLogLikelihoodLoss after LogSoftmax (torch's nll_loss): its
// gradient is fsdp.nll_loss_grad of the input's type, with the class
// weights and ignore_index; GatherElements's is ScatterElements adding the
// cotangent into zeros along the (non-negative) axis.
// CHECK-LABEL: func.func @forward
// CHECK: %[[LOSS:.*]] = onnx.NegativeLogLikelihoodLoss
// CHECK: %[[SEED:.*]] = onnx.Constant dense<1.000000e+00> : tensor<f32>
// CHECK: fsdp.nll_loss_grad %arg1, %[[SEED]], %arg2 {ignore_index = -1 : i64, reduction = "sum"} : (tensor<2x3xi64>, tensor<f32>, tensor<5xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[ZERO:.*]] = onnx.Constant dense<0.000000e+00> : tensor<2x5x4xf32>
// CHECK: onnx.ScatterElements %[[ZERO]], %arg3, %{{.*}} {axis = 2 : i64, reduction = "add"} : (tensor<2x5x4xf32>, tensor<2x5x3xi64>, tensor<2x5x3xf32>) -> tensor<2x5x4xf32>
// CHECK: return %[[LOSS]], %{{.*}} : tensor<f32>, tensor<4x4xf32>
module {
  fsdp.param @w : tensor<4x4xf32> at <"m.onnx", offset = 0, length = 64>
  func.func @forward(%x: tensor<2x5x4xf32>, %target: tensor<2x3xi64>, %weight: tensor<5xf32>, %idx: tensor<2x5x3xi64>) -> (tensor<f32> {fsdp.name = "loss"}) {
    %w = fsdp.get_param @w : tensor<4x4xf32>
    %h = onnx.MatMul %x, %w : (tensor<2x5x4xf32>, tensor<4x4xf32>) -> tensor<2x5x4xf32>
    %p = onnx.GatherElements %h, %idx {axis = -1 : i64} : (tensor<2x5x4xf32>, tensor<2x5x3xi64>) -> tensor<2x5x3xf32>
    %l = onnx.LogSoftmax %p {axis = 1 : i64} : (tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
    %loss = onnx.NegativeLogLikelihoodLoss %l, %target, %weight {ignore_index = -1 : i64, reduction = "sum"} : (tensor<2x5x3xf32>, tensor<2x3xi64>, tensor<5xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Einsum: an operand's gradient is the Einsum of the cotangent with the
// other operands giving that operand's letters (Funnel's relative
// attention "bind,snd->bnis", n a batch letter; a permutation's is the
// inverse one). A letter the forward summed away in one operand (x of @w,
// i of %s) is in no other term: the gradient Einsum leaves it out and an
// Expand broadcasts it back.
// CHECK-LABEL: func.func @forward
// CHECK: %[[S:.*]] = onnx.Einsum %arg0, %[[R:.*]] {equation = "bind,snd->bnis"}
// CHECK: %[[G:.*]] = onnx.Einsum %{{.*}} {equation = "sb->bs"} : (tensor<6x2xf32>) -> tensor<2x6xf32>
// CHECK: %[[DW:.*]] = onnx.Einsum %[[G]], %[[S]] {equation = "bs,bnis->n"} : (tensor<2x6xf32>, tensor<2x3x4x6xf32>) -> tensor<3xf32>
// CHECK: %[[DW1:.*]] = onnx.Reshape %[[DW]], %{{.*}} -> tensor<1x3xf32>
// CHECK: %[[GW:.*]] = onnx.Expand %[[DW1]], %{{.*}} -> tensor<7x3xf32>
// CHECK: %[[DS:.*]] = onnx.Einsum %[[G]], %{{.*}} {equation = "bs,xn->bns"} : (tensor<2x6xf32>, tensor<7x3xf32>) -> tensor<2x3x6xf32>
// CHECK: %[[DS1:.*]] = onnx.Reshape %[[DS]], %{{.*}} -> tensor<2x3x1x6xf32>
// CHECK: %[[DS2:.*]] = onnx.Expand %[[DS1]], %{{.*}} -> tensor<2x3x4x6xf32>
// CHECK: %[[GR:.*]] = onnx.Einsum %[[DS2]], %arg0 {equation = "bnis,bind->snd"} : (tensor<2x3x4x6xf32>, tensor<2x4x3x5xf32>) -> tensor<6x3x5xf32>
// CHECK: return %{{.*}}, %[[GR]], %[[GW]]
module {
  fsdp.param @r : tensor<6x3x5xf32> at <"m.onnx", offset = 0, length = 360>
  fsdp.param @w : tensor<7x3xf32> at <"m.onnx", offset = 360, length = 84>
  func.func @forward(%q: tensor<2x4x3x5xf32>) -> tensor<f32> {
    %r = fsdp.get_param @r : tensor<6x3x5xf32>
    %w = fsdp.get_param @w : tensor<7x3xf32>
    %s = onnx.Einsum %q, %r {equation = "bind,snd->bnis"} : (tensor<2x4x3x5xf32>, tensor<6x3x5xf32>) -> tensor<2x3x4x6xf32>
    %t = onnx.Einsum %w, %s {equation = "xn,bnis->bs"} : (tensor<7x3xf32>, tensor<2x3x4x6xf32>) -> tensor<2x6xf32>
    %p = onnx.Einsum %t {equation = "bs->sb"} : (tensor<2x6xf32>) -> tensor<6x2xf32>
    %loss = onnx.ReduceMean %p {keepdims = 0 : i64} : (tensor<6x2xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
