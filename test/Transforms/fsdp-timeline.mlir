// RUN: rm -f %t.json
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule --fsdp-unit-summary --fsdp-timeline=%t.json -o /dev/null | FileCheck %s
// RUN: %python %S/Inputs/check_trace.py %t.json | FileCheck %s --check-prefix=TRACE
// RUN: fsdp-opt %s --fsdp-flatten=world-size=16 --fsdp-shard "--fsdp-schedule=ranks-per-node=8" --fsdp-unit-summary -o /dev/null | FileCheck %s --check-prefix=INTER
// RUN: not fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule=backward-prefetch=later -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// The 3-unit model's forward over 4 ranks of one node. The cost model's
// defaults: an all-gather of N bytes over p ranks on NVLink takes
// (p-1) 3 us + (p-1)/p N / 450 GB/s: 9.0001 us for a's and b's 64 bytes.
// The ops are too small to hide any of it, so all of it is exposed.
// CHECK: fsdp-unit-summary: @forward: modelled step 0.027 ms (compute 0.000 ms, communication 0.027 ms, exposed 0.027 ms)
// CHECK-NEXT: unit params numel gathered B gathered at (ms) freed at (ms) comm ms exposed ms
// CHECK-NEXT: unit: 1 4 16 0.018 0.027 0.009 0.009
// CHECK-NEXT: unit:a 1 16 64 0.000 0.009 0.009 0.009
// CHECK-NEXT: unit:b 1 16 64 0.009 0.018 0.009 0.009

// The trace: a compute and a communication thread, every op as a complete
// event, neither stream overlapping itself.
// TRACE: threads: compute, communication
// TRACE-NEXT: compute events 6, communication events 3
// TRACE-NEXT: fsdp.all_gather unit:a tid 1 ts 0.000 dur 9.000
// TRACE-NEXT: fsdp.all_gather unit:b tid 1 ts 9.000 dur 9.000
// TRACE-NEXT: fsdp.all_gather unit: tid 1 ts 18.000 dur 9.000
// TRACE-NEXT: streams do not overlap themselves

// 16 ranks span two nodes of 8: the gathers use InfiniBand,
// 15 x 10 us + 15/16 N / 50 GB/s.
// INTER: unit:a 1 16 64 {{.*}} 0.150 0.150

// BAD: fsdp-schedule: backward-prefetch must be pre, post or none, not 'later'
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
