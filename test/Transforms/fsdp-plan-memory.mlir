// RUN: fsdp-opt %s --split-input-file --fsdp-plan-memory=report 2>%t.report | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.report
// RUN: fsdp-opt %s --split-input-file --fsdp-plan-memory="alignment=256" | FileCheck %s --check-prefix=ALIGN
// RUN: not fsdp-opt %s --split-input-file --fsdp-plan-memory="alignment=48" 2>&1 | FileCheck %s --check-prefix=BAD

// Lifetimes (step: def..last use): %arg0 and %arg1 forever, %t 1..2,
// %m 2..4, %s 3..forever (its view is returned), %sl 4..5, %c 5..6,
// %a 6..forever. Greedy by size, largest first: the inputs take
// [0, 192) and [576, 624); %t (128 B) fits at 192 while %m, %s, %c
// (96 B each) and %sl, %a reuse what died before them.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<2x3x8xf32> {fsdp.offset = 0 : i64}
// CHECK-SAME: %arg1: tensor<2x3xi64> {fsdp.offset = 576 : i64}
// CHECK-SAME: attributes {fsdp.activation_bytes = 640 : i64}
// CHECK: "transpose"{{.*}}{fsdp.offsets = array<i64: 192>}
// CHECK: "matmul"{{.*}}{fsdp.offsets = array<i64: 320>}
// CHECK: "softmax"{{.*}}{fsdp.offsets = array<i64: 192>}
// CHECK: "slice"{{.*}}{fsdp.offsets = array<i64: 448>}
// CHECK: "concat"{{.*}}{fsdp.offsets = array<i64: 320>}
// CHECK: "add"{{.*}}{fsdp.offsets = array<i64: 448>}
// REPORT: fsdp-plan-memory: @forward: 8 activations, 800 bytes without reuse, peak 640 bytes (0.80x)
// ALIGN-LABEL: func.func @forward
// ALIGN-SAME: {fsdp.offset = 1024 : i64}
// ALIGN-SAME: fsdp.activation_bytes = 1280 : i64
// BAD: error: fsdp-plan-memory: alignment must be a power of two, not 48
module {
  fsdp.param @w : tensor<4x8xf32> at <"m.onnx", offset = 0, length = 128>
  func.func @forward(%arg0: tensor<2x3x8xf32>, %arg1: tensor<2x3xi64>) -> (tensor<2x3x4xf32>, tensor<6x4xf32>) {
    %0 = fsdp.get_param @w : tensor<4x8xf32>
    %1 = fsdp.kernel "transpose"(%0) params {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %2 = fsdp.kernel "matmul"(%arg0, %1) params {trans_b = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
    %3 = fsdp.kernel "softmax"(%2) params {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %4 = fsdp.view %3 : tensor<2x3x4xf32> to tensor<6x4xf32>
    %5 = fsdp.kernel "slice"(%2) params {starts = array<i64: 0, 0, 1>, steps = array<i64: 1, 1, 1>} : (tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
    %6 = fsdp.kernel "concat"(%5, %5) params {axis = 2 : i64} : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
    %7 = fsdp.kernel "add"(%6, %3) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %7, %4 : tensor<2x3x4xf32>, tensor<6x4xf32>
  }
}

// -----

// A kernel's output never shares bytes with its own inputs, even when they
// die at that kernel; multiple results of one kernel are live together.
// CHECK-LABEL: func.func @split
// CHECK-SAME: %arg0: tensor<64xf32> {fsdp.offset = 0 : i64}
// CHECK: "relu"{{.*}}{fsdp.offsets = array<i64: 256>}
// CHECK: "split"{{.*}}{fsdp.offsets = array<i64: 512, 640>}
// CHECK: "add"{{.*}}{fsdp.offsets = array<i64: 256>}
func.func @split(%arg0: tensor<64xf32>) -> tensor<32xf32> {
  %0 = fsdp.kernel "relu"(%arg0) : (tensor<64xf32>) -> tensor<64xf32>
  %1:2 = fsdp.kernel "split"(%0) params {axis = 0 : i64} : (tensor<64xf32>) -> (tensor<32xf32>, tensor<32xf32>)
  %2 = fsdp.kernel "add"(%1#0, %1#1) : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
  return %2 : tensor<32xf32>
}
