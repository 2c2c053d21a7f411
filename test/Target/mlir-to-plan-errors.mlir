// RUN: not fsdp-translate --mlir-to-plan %s --split-input-file -o /dev/null 2>&1 | FileCheck %s

// CHECK: error: mlir-to-plan: @forward has no memory plan; run --fsdp-plan-memory first
func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = fsdp.kernel "relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: error: 'onnx.Relu' op has no runtime kernel; run --fsdp-lower-to-runtime before --mlir-to-plan
func.func @forward(%arg0: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> attributes {fsdp.activation_bytes = 64 : i64} {
  %0 = onnx.Relu %arg0 : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: error: 'fsdp.param' op 'w' has no data reference; the plan cannot load its initial value
module {
  fsdp.param @w : tensor<4xf32>
  func.func @forward(%arg0: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> attributes {fsdp.activation_bytes = 64 : i64} {
    return %arg0 : tensor<4xf32>
  }
}

// -----

// CHECK: error: 'fsdp.param' op @w: data reference holds 8 bytes but 'tensor<4xf32>' needs 16
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 8>
  func.func @forward(%arg0: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> attributes {fsdp.activation_bytes = 64 : i64} {
    return %arg0 : tensor<4xf32>
  }
}

// -----

// CHECK: error: 'fsdp.kernel' op has no activation offsets; run --fsdp-plan-memory first
func.func @forward(%arg0: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> attributes {fsdp.activation_bytes = 64 : i64} {
  %0 = fsdp.kernel "relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK: error: mlir-to-plan: the module has no @forward function
func.func @a() { return }
func.func @b() { return }

// -----

// CHECK: error: mlir-to-plan: result 0 updates @w: the result is 'tensor<2xf32>' but the state is 'tensor<4xf32>'
module {
  fsdp.param @w : tensor<4xf32> at <"w.bin", offset = 0, length = 16>
  func.func @forward(%x: tensor<2xf32> {fsdp.offset = 0 : i64}) -> (tensor<2xf32> {fsdp.update_of = @w}) attributes {fsdp.activation_bytes = 128 : i64} {
    %y = fsdp.kernel "neg"(%x) {fsdp.offsets = array<i64: 64>} : (tensor<2xf32>) -> tensor<2xf32>
    return %y : tensor<2xf32>
  }
}

// -----

// CHECK: error: mlir-to-plan: result 1 updates @w: another result updates it too
module {
  fsdp.param @w : tensor<4xf32> at <"w.bin", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32> {fsdp.offset = 0 : i64}) -> (tensor<4xf32> {fsdp.update_of = @w}, tensor<4xf32> {fsdp.update_of = @w}) attributes {fsdp.activation_bytes = 128 : i64} {
    %y = fsdp.kernel "neg"(%x) {fsdp.offsets = array<i64: 64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %y, %y : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// CHECK: error: mlir-to-plan: result 0 updates @nope: no fsdp.param, fsdp.buffer or fsdp.flat_param has that name
module {
  func.func @forward(%x: tensor<4xf32> {fsdp.offset = 0 : i64}) -> (tensor<4xf32> {fsdp.update_of = @nope}) attributes {fsdp.activation_bytes = 128 : i64} {
    %y = fsdp.kernel "neg"(%x) {fsdp.offsets = array<i64: 64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Sizes past int64: the plan said 128 bytes per rank for a 2^67-byte input.
// CHECK: error: 'func.func' op has a value of type 'tensor<4611686018427387904x8xf32>' whose bytes overflow int64
func.func @forward(%arg0: tensor<4611686018427387904x8xf32> {fsdp.offset = 0 : i64}) -> tensor<4611686018427387904x8xf32> attributes {fsdp.activation_bytes = 0 : i64} {
  return %arg0 : tensor<4611686018427387904x8xf32>
}

// -----

// CHECK: error: 'fsdp.kernel' op has a value of type 'tensor<4xf32>' at offset 9223372036854775800 whose bytes overflow int64
func.func @forward(%arg0: tensor<4xf32> {fsdp.offset = 0 : i64}) -> tensor<4xf32> attributes {fsdp.activation_bytes = 64 : i64} {
  %0 = fsdp.kernel "relu"(%arg0) {fsdp.offsets = array<i64: 9223372036854775800>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// An in-place mark must have one entry per result.
// CHECK: error: 'fsdp.kernel' op has an in-place mark per result
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%g: tensor<4xf32> {fsdp.offset = 0 : i64}, %lr: tensor<f32> {fsdp.offset = 64 : i64}) -> (tensor<4xf32> {fsdp.update_of = @w}) attributes {fsdp.activation_bytes = 128 : i64} {
    %w = fsdp.get_param @w : tensor<4xf32>
    %0 = fsdp.kernel "sgd"(%w, %g, %lr, %lr) {fsdp.in_place = array<i64: 0, 1>, fsdp.offsets = array<i64: -1>} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// A result is written over an input only of its own type.
// CHECK: error: 'fsdp.kernel' op result 0 cannot be written over input 2
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%g: tensor<4xf32> {fsdp.offset = 0 : i64}, %lr: tensor<f32> {fsdp.offset = 64 : i64}) -> (tensor<4xf32> {fsdp.update_of = @w}) attributes {fsdp.activation_bytes = 128 : i64} {
    %w = fsdp.get_param @w : tensor<4xf32>
    %0 = fsdp.kernel "sgd"(%w, %g, %lr, %lr) {fsdp.in_place = array<i64: 2>, fsdp.offsets = array<i64: -1>} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
