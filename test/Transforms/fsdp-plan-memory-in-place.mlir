// RUN: fsdp-opt %s --split-input-file --fsdp-plan-memory | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --fsdp-plan-memory | fsdp-translate --split-input-file --mlir-to-plan -o %t.plan
// Optimizer kernels write their new state over the old when nothing reads
// the old value after them: those results get no activation (offset -1)
// and an fsdp.in_place entry naming the input they overwrite.

// AdamW on a parameter and its two moments: all three in place; the loss
// (an ordinary result) still has an activation.
// CHECK-LABEL: func.func @forward
// CHECK: "mul"{{.*}}{fsdp.offsets = array<i64: {{[0-9]+}}>}
// CHECK: "adamw"{{.*}}{fsdp.in_place = array<i64: 0, 2, 3>, fsdp.offsets = array<i64: -1, -1, -1>}
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  fsdp.buffer @m : tensor<4xf32> {fsdp.state_of = @w}
  fsdp.buffer @v : tensor<4xf32> {fsdp.state_of = @w}
  func.func @forward(%x: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32> {fsdp.update_of = @w}, tensor<4xf32> {fsdp.update_of = @m}, tensor<4xf32> {fsdp.update_of = @v}) {
    %w0 = fsdp.get_param @w : tensor<4xf32>
    %y = fsdp.kernel "mul"(%x, %w0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w = fsdp.get_param @w : tensor<4xf32>
    %m = fsdp.get_buffer @m : tensor<4xf32>
    %v = fsdp.get_buffer @v : tensor<4xf32>
    %r:3 = fsdp.kernel "adamw"(%w, %x, %m, %v, %lr, %step) params {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.01} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %y, %r#0, %r#1, %r#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// The parameter is read (through a view) after the step: its new value
// goes to an activation and is copied after the run; the momentum buffer,
// read by no one else, is still written in place.
// CHECK-LABEL: func.func @forward
// CHECK: "sgd"{{.*}}{fsdp.in_place = array<i64: -1, 4>, fsdp.offsets = array<i64: {{[0-9]+}}, -1>}
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  fsdp.buffer @b : tensor<4xf32> {fsdp.state_of = @w}
  func.func @forward(%g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>) -> (tensor<4xf32> {fsdp.update_of = @w}, tensor<4xf32> {fsdp.update_of = @b}, tensor<2x2xf32>) {
    %w = fsdp.get_param @w : tensor<4xf32>
    %b = fsdp.get_buffer @b : tensor<4xf32>
    %r:2 = fsdp.kernel "sgd"(%w, %g, %lr, %step, %b) params {momentum = 0.9, dampening = 0.0, nesterov = 0 : i64, weight_decay = 0.0} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %late = fsdp.view %w : tensor<4xf32> to tensor<2x2xf32>
    %y = fsdp.kernel "neg"(%late) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %r#0, %r#1, %y : tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
  }
}

// -----

// A result that is not the update of the state its input reads (here the
// parameter's new value is an ordinary output) stays an activation.
// CHECK-LABEL: func.func @forward
// CHECK: "sgd"{{.*}} {fsdp.offsets = array<i64: {{[0-9]+}}>} :
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%g: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<f32>) -> tensor<4xf32> {
    %w = fsdp.get_param @w : tensor<4xf32>
    %r = fsdp.kernel "sgd"(%w, %g, %lr, %step) params {momentum = 0.0, dampening = 0.0, nesterov = 0 : i64, weight_decay = 0.0} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}
