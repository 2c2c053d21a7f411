// RUN: not fsdp-opt %s --fsdp-optimizer=optimizer=lamb -o /dev/null 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAM
// RUN: not fsdp-opt %s --fsdp-optimizer=accumulate=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: not fsdp-opt %s --fsdp-optimizer=max-grad-norm=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not fsdp-opt %s --fsdp-optimizer --fsdp-optimizer -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// NaN passed every `< 0` check and trained into NaN; an infinite decay too.
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw max-grad-norm=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN-CLIP
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw beta1=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN-BETA
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw weight-decay=inf" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INF-DECAY
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd momentum=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN-MOMENTUM

// KIND: error: fsdp-optimizer: unknown optimizer 'lamb' (supported: sgd, adamw)
// ADAM: error: fsdp-optimizer: momentum, dampening and nesterov are SGD options
// ACC: error: fsdp-optimizer: accumulate must be at least 1, not 0
// CLIP: error: fsdp-optimizer: max-grad-norm must be positive (0 turns clipping off), not -1
// TWICE: error: fsdp-optimizer: the step already has an input named 'lr'
// NAN-CLIP: error: fsdp-optimizer: max-grad-norm must be a finite number, not nan
// NAN-BETA: error: fsdp-optimizer: beta1 must be a finite number, not nan
// INF-DECAY: error: fsdp-optimizer: weight-decay must be a finite number, not INF
// NAN-MOMENTUM: error: fsdp-optimizer: momentum must be a finite number, not nan
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>) -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.grad_of = @w, fsdp.name = "grad.w"}) {
    %none = onnx.NoValue
    %l = onnx.ReduceSum %x, %none {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
    return %l, %x : tensor<f32>, tensor<4xf32>
  }
}
