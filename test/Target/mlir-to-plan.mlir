// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: fsdp-translate --mlir-to-plan %s -o %t.dir/model.plan
// RUN: flatc --json --strict-json --raw-binary -o %t.dir %fsdp_src_root/runtime/schema/plan.fbs -- %t.dir/model.plan
// RUN: FileCheck %s < %t.dir/model.json

// Three arenas; buffers for the inputs (activations, at their planned
// offsets), every parameter (weights, 64-byte aligned, in declaration order),
// each constant a kernel reads (constants, bytes embedded: one byte per
// boolean), kernel results and views (same bytes as their source).
// CHECK:      "schema_version": 2
// CHECK:      "model_dir": "/models"
// CHECK:      "arenas": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "name": "activations",
// CHECK-NEXT:     "bytes": 640
// CHECK:          "name": "weights",
// CHECK-NEXT:     "bytes": 192,
// CHECK-NEXT:     "kind": "Weights"
// CHECK:          "name": "constants",
// CHECK-NEXT:     "bytes": 128,
// CHECK-NEXT:     "kind": "Constants"
// CHECK:      "inputs": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "name": "x",
// CHECK-NEXT:     "shape": [
// CHECK-NEXT:       2,
// CHECK-NEXT:       3,
// CHECK-NEXT:       8
// CHECK-NEXT:     ],
// CHECK-NEXT:     "buffer": 2
// CHECK:      "outputs": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "name": "y",
// CHECK:          "name": "flat",
// CHECK:      "kernels": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "op": "transpose",
// CHECK-NEXT:     "inputs": [
// CHECK-NEXT:       0
// CHECK-NEXT:     ],
// CHECK:          "attrs": [
// CHECK-NEXT:       {
// CHECK-NEXT:         "name": "perm",
// CHECK-NEXT:         "value_type": "IntsAttr",
// CHECK:          "location": "t"
// CHECK:          "op": "where",
// CHECK:          "location": "mask_fill"
// CHECK:      "weights": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "fqn": "w",
// CHECK-NEXT:     "file": "m.onnx",
// CHECK-NEXT:     "offset": 16,
// CHECK-NEXT:     "length": 128
// CHECK-NEXT:   },
// CHECK-NEXT:   {
// CHECK-NEXT:     "fqn": "running",
// CHECK-NEXT:     "kind": "Buffer",
// CHECK-NEXT:     "file": "m.onnx.data",
// CHECK-NEXT:     "offset": 4096,
// CHECK-NEXT:     "length": 16,
// CHECK-NEXT:     "buffer": 1
// CHECK:      "constants": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "buffer": {{[0-9]+}},
// CHECK-NEXT:     "data": [
// CHECK-NEXT:       1,
// CHECK-NEXT:       0,
// CHECK-NEXT:       1,
// CHECK-NEXT:       0
// CHECK-NEXT:     ]
module attributes {fsdp.source = "/models/m.onnx"} {
  fsdp.param @w : tensor<4x8xf32> at <"m.onnx", offset = 16, length = 128>
  fsdp.buffer @running : tensor<4xf32> at <"m.onnx.data", offset = 4096, length = 16>
  func.func @forward(%arg0: tensor<2x3x8xf32> {fsdp.name = "x", fsdp.offset = 0 : i64}) -> (tensor<2x3x4xf32> {fsdp.name = "y"}, tensor<6x4xf32> {fsdp.name = "flat"}) attributes {fsdp.activation_bytes = 640 : i64} {
    %0 = fsdp.get_param @w : tensor<4x8xf32>
    %1 = fsdp.kernel "transpose"(%0) params {perm = array<i64: 1, 0>} {fsdp.offsets = array<i64: 192>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("t")
    %2 = fsdp.kernel "matmul"(%arg0, %1) params {trans_b = 0 : i64} {fsdp.offsets = array<i64: 320>} : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
    %m = onnx.Constant dense<[true, false, true, false]> : tensor<4xi1>
    %f = onnx.Constant dense<0xFF800000> : tensor<f32>
    %3 = fsdp.kernel "where"(%m, %f, %2) {fsdp.offsets = array<i64: 192>} : (tensor<4xi1>, tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("mask_fill")
    %4 = fsdp.view %3 : tensor<2x3x4xf32> to tensor<6x4xf32>
    %r = fsdp.get_buffer @running : tensor<4xf32>
    %5 = fsdp.kernel "add"(%3, %r) {fsdp.offsets = array<i64: 448>} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    return %5, %4 : tensor<2x3x4xf32>, tensor<6x4xf32>
  }
}
