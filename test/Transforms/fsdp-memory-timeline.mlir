// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule --fsdp-inference-pipeline --fsdp-memory-timeline -o %t.mlir | FileCheck %s
// RUN: fsdp-translate --mlir-to-plan %t.mlir -o %t.plan
// RUN: fsdp-run %t.plan --describe | FileCheck %s --check-prefix=PLAN
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule=forward-prefetch=false --fsdp-inference-pipeline --fsdp-memory-timeline -o /dev/null | FileCheck %s --check-prefix=NOPRE

// One rank's memory for the sharded forward of the 3-unit model (a.w 4x4,
// b.w 4x4, head.w 4; x 2x4; all f32, FULL_SHARD over 4 ranks), by hand:
//   state: three shards of 4, 4 and 1 elements, each 64-byte aligned in the
//   weights arena: 3 x 64 = 192 bytes, all step;
//   gathered units: a and b 16 x 4 = 64 bytes each, the root 16 bytes;
//   activations: x 32 bytes (an input: all step), h1 = tanh(x a) and
//   h2 = tanh(h1 b) 32 bytes each, the product 32, the loss 4.
// With forward prefetch (and the limit of 2), b is gathered while a
// computes, so at a's fused linear a, b, x and h1 are live:
// 64 + 64 + 32 + 32 = 192 bytes.
// CHECK: fsdp-memory-timeline: @forward: state 192 B and constants 0 B live all step
// CHECK: linear <- peak 128 0 0 64 384
// CHECK: fsdp-memory-timeline: @forward: peak live activations 192 B at step 7; activation arena 320 B; per rank 512 B (arena + state + constants)
// The plan allocates exactly what the timeline says per rank.
// PLAN: plan {{.*}}: schema 2, 4 ranks (mesh 4), 512 bytes per rank
// PLAN: 7 kernels: 4 compute, 3 collective (3 all_gather); 3 cross-stream dependencies
// Without prefetch each unit is gathered where it is used: the peak is at
// b's linear, with b, x, h1 and h2 live: 64 + 32 + 32 + 32 = 160 bytes.
// NOPRE: linear <- peak 64 0 0 96 352
// NOPRE: fsdp-memory-timeline: @forward: peak live activations 160 B at step 11
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w]>,
    #fsdp.unit<"a", params = [@a.w]>,
    #fsdp.unit<"b", params = [@b.w]>]} {
  fsdp.param @a.w : tensor<4x4xf32> at <"w.bin", offset = 0, length = 64>
  fsdp.param @b.w : tensor<4x4xf32> at <"w.bin", offset = 64, length = 64>
  fsdp.param @head.w : tensor<4xf32> at <"w.bin", offset = 128, length = 16>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %aw = fsdp.get_param @a.w : tensor<4x4xf32>
    %bw = fsdp.get_param @b.w : tensor<4x4xf32>
    %hw = fsdp.get_param @head.w : tensor<4xf32>
    %h1 = onnx.MatMul %x, %aw : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t1 = onnx.Tanh %h1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %h2 = onnx.MatMul %t1, %bw : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t2 = onnx.Tanh %h2 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %s = onnx.Mul %t2, %hw : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %l = onnx.ReduceSum %s, %none {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
