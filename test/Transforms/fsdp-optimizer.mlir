// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="optimizer=sgd momentum=0.9 weight-decay=0.01 fused=false" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="optimizer=adamw max-grad-norm=1 fused=false" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="accumulate=2 fused=false" | FileCheck %s --check-prefix=ACC
// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="optimizer=sgd momentum=0.9 dampening=0.1 weight-decay=0.01" | FileCheck %s --check-prefix=FSGD
// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="optimizer=sgd" | FileCheck %s --check-prefix=FPLAIN
// RUN: fsdp-opt %s --split-input-file --fsdp-optimizer="optimizer=adamw max-grad-norm=1" | FileCheck %s --check-prefix=FADAMW

// What fsdp-autodiff returns for loss = sum(x * w): the loss, grad.w, and a
// buffer update.

// With sgd, a zero-initialised momentum buffer; g + wd * p; buf * 0.9 + g;
// p - lr * buf; lr and step are inputs; the buffer update is kept.
// SGD: fsdp.buffer @optim.momentum_buffer.w : tensor<4xf32> {fsdp.state_of = @w}
// SGD-LABEL: func.func @forward
// SGD-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {fsdp.name = "lr"}, %{{[a-z0-9]+}}: tensor<f32> {fsdp.name = "step"}
// SGD-SAME: -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.name = "update.w", fsdp.update_of = @w}, tensor<4xf32> {fsdp.name = "update.optim.momentum_buffer.w", fsdp.update_of = @optim.momentum_buffer.w}, tensor<4xf32> {fsdp.name = "update.n", fsdp.update_of = @n})
// SGD: onnx.Add %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<f32>)
// SGD: %[[P:.*]] = fsdp.get_param @w
// SGD: %[[G:.*]] = onnx.Add %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<4xf32>)
// SGD: %[[BUF:.*]] = fsdp.get_buffer @optim.momentum_buffer.w
// SGD: %[[NEXT:.*]] = onnx.Add %{{.*}}, %[[G]]
// SGD: %[[STEP:.*]] = onnx.Mul %[[NEXT]], %[[LR]]
// SGD: %[[NEW:.*]] = onnx.Sub %[[P]], %[[STEP]]
// SGD: return %{{.*}}, %[[NEW]], %[[NEXT]], %{{.*}}

// AdamW: two moments, the clipping scale with its all-reduce hook,
// bias corrections from the step input, decoupled decay.
// ADAMW: fsdp.buffer @optim.exp_avg.w : tensor<4xf32> {fsdp.state_of = @w}
// ADAMW: fsdp.buffer @optim.exp_avg_sq.w : tensor<4xf32> {fsdp.state_of = @w}
// ADAMW: -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.name = "update.w", fsdp.update_of = @w}, tensor<4xf32> {fsdp.name = "update.optim.exp_avg.w", fsdp.update_of = @optim.exp_avg.w}, tensor<4xf32> {fsdp.name = "update.optim.exp_avg_sq.w", fsdp.update_of = @optim.exp_avg_sq.w}, tensor<4xf32> {fsdp.name = "update.n", fsdp.update_of = @n})
// The gradient consumed is marked for fsdp-shard, then clipped.
// ADAMW: onnx.Identity %{{.*}} {fsdp.grad_of = @w}
// ADAMW: onnx.ReduceSum {{.*}} {keepdims = 0 : i64}
// ADAMW: onnx.Sqrt
// ADAMW: onnx.Less
// ADAMW: onnx.Where
// ADAMW: onnx.Pow %{{.*}}, %arg2 : (tensor<f32>, tensor<f32>) -> tensor<f32>

// Fused (the default): one fsdp.sgd / fsdp.adamw per parameter, on the
// same state buffers, returning the same updates in the same order.
// FSGD: fsdp.buffer @optim.momentum_buffer.w : tensor<4xf32> {fsdp.state_of = @w}
// FSGD-LABEL: func.func @forward
// FSGD-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {fsdp.name = "lr"}, %[[STEP:[a-z0-9]+]]: tensor<f32> {fsdp.name = "step"}
// FSGD-SAME: fsdp.update_of = @w}, {{.*}} fsdp.update_of = @optim.momentum_buffer.w}, {{.*}} fsdp.update_of = @n})
// FSGD: %[[G:.*]] = onnx.Identity %{{.*}} {fsdp.grad_of = @w}
// FSGD: %[[P:.*]] = fsdp.get_param @w
// FSGD: %[[BUF:.*]] = fsdp.get_buffer @optim.momentum_buffer.w
// FSGD: %[[NP:.*]], %[[NB:.*]] = fsdp.sgd %[[P]], %[[G]], %[[LR]], %[[STEP]] momentum_buffer %[[BUF]] {dampening = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = false, weight_decay = 1.000000e-02 : f64}
// FSGD-NOT: onnx.Mul
// FSGD: return %{{.*}}, %[[NP]], %[[NB]], %{{.*}}

// Plain SGD has no state: no buffer operand or result.
// FPLAIN-NOT: fsdp.buffer @optim
// FPLAIN: %[[NP:.*]] = fsdp.sgd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dampening = 0.000000e+00 : f64, momentum = 0.000000e+00 : f64, nesterov = false, weight_decay = 0.000000e+00 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
// FPLAIN: return %{{.*}}, %[[NP]], %{{.*}}

// AdamW clipped: the norm is computed as before, but its coefficient is an
// operand of the step instead of a Mul of every gradient.
// FADAMW: %[[G:.*]] = onnx.Identity %{{.*}} {fsdp.grad_of = @w}
// FADAMW: %[[COEF:.*]] = onnx.Where
// FADAMW-NOT: onnx.Mul %[[G]], %[[COEF]]
// FADAMW: %[[P:.*]] = fsdp.get_param @w
// FADAMW: %[[M:.*]] = fsdp.get_buffer @optim.exp_avg.w
// FADAMW: %[[V:.*]] = fsdp.get_buffer @optim.exp_avg_sq.w
// FADAMW: %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = fsdp.adamw %[[P]], %[[G]], %[[M]], %[[V]], %arg1, %arg2 clip %[[COEF]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64} : tensor<4xf32>
// FADAMW: return %{{.*}}, %[[NP]], %[[NM]], %[[NV]], %{{.*}}

// Accumulation over 2 micro-batches: the input doubles, is sliced, the
// second micro-batch is a clone reading the first one's buffer update; the
// gradients and losses are averaged.
// ACC-LABEL: func.func @forward
// ACC-SAME: (%[[X:[a-z0-9]+]]: tensor<4x4xf32>
// ACC: %[[S0:.*]] = onnx.Slice %[[X]], {{.*}} -> tensor<2x4xf32>
// ACC: %[[S1:.*]] = onnx.Slice %[[X]], {{.*}} -> tensor<2x4xf32>
// ACC: onnx.Mul %[[S0]]
// ACC: %[[N0:.*]] = onnx.Add %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<f32>)
// ACC: onnx.Mul %[[S1]]
// ACC: onnx.Add %[[N0]], %{{.*}} : (tensor<4xf32>, tensor<f32>)
// ACC: onnx.Constant dense<5.000000e-01> : tensor<f32>
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  fsdp.buffer @n : tensor<4xf32> at <"m.onnx", offset = 16, length = 16>
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}, tensor<4xf32> {fsdp.update_of = @n, fsdp.name = "update.n"}) {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4xf32>
    %y = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %l = onnx.ReduceSum %y, %none {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
    %axes = onnx.Constant dense<0> : tensor<1xi64>
    %g = onnx.ReduceSum %x, %axes {keepdims = 0 : i64} : (tensor<2x4xf32>, tensor<1xi64>) -> tensor<4xf32>
    %n = fsdp.get_buffer @n : tensor<4xf32>
    %one = onnx.Constant dense<1.0> : tensor<f32>
    %n2 = onnx.Add %n, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    return %l, %g, %n2 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
