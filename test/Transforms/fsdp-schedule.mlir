// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule -cse -canonicalize | FileCheck %s --check-prefix=CSE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard "--fsdp-schedule=forward-prefetch=false backward-prefetch=none" | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule=limit-all-gathers=1 | FileCheck %s --check-prefix=LIMIT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule=backward-prefetch=post | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-schedule=bucket-bytes=130 | FileCheck %s --check-prefix=BUCKET

// The 3-unit model of fsdp-shard.mlir (a, b, then the root's head; FULL_SHARD
// over 4 ranks). Its ops are tiny, so the cost model never finds enough
// compute to hide a gather: each starts as early as its window allows.

// Default: forward prefetch and BACKWARD_PRE within a limit of 2 gathered
// units. b's gather starts as soon as a's is waited for (it runs while a
// computes); the root's once b's is waited for, after a was released (the
// limit); b's backward gather as soon as the root's is waited for.
// The cost model is recorded for the timeline and the unit summary.
// CHECK: fsdp.cost_model = #fsdp.cost_model<{{.*}}, inter_bandwidth = 5.000000e+10 : f64, {{.*}}, cpu_runtime = false>
// CHECK-LABEL: func.func @forward
// CHECK: %[[AS:.*]] = fsdp.get_shard @"unit:a"
// CHECK-NEXT: %[[AF:.*]] = fsdp.all_gather %[[AS]] on @fsdp_world axes [0] : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
// CHECK: %[[A:.*]] = fsdp.wait %[[AF]] : !fsdp.future<tensor<16xf32>> -> tensor<16xf32>
// CHECK-NEXT: fsdp.get_shard @"unit:b"
// CHECK-NEXT: %[[BF:.*]] = fsdp.all_gather
// CHECK-NEXT: fsdp.unflatten %[[A]] of @"unit:a"
// CHECK-NEXT: onnx.MatMul
// CHECK-NEXT: fsdp.release %[[A]]
// CHECK-NEXT: onnx.Tanh
// CHECK-NEXT: %[[B:.*]] = fsdp.wait %[[BF]]
// CHECK-NEXT: fsdp.get_shard @"unit:"
// CHECK-NEXT: %[[RF:.*]] = fsdp.all_gather {{.*}} : tensor<1xf32> -> !fsdp.future<tensor<4xf32>>
// CHECK-NEXT: fsdp.unflatten %[[B]] of @"unit:b"
// CHECK: %[[R:.*]] = fsdp.wait %[[RF]]
// CHECK-NEXT: fsdp.get_shard @"unit:b"
// CHECK-NEXT: %[[B2F:.*]] = fsdp.all_gather
// CHECK-NEXT: fsdp.unflatten %[[R]] of @"unit:"
// Reductions start right after each flat gradient is packed and are waited
// for where the next reduction starts (one in flight at a time, so each
// unit's full gradient is freed once reduced) or, for the last, where its
// value is used: here, the function's results.
// CHECK: %[[RG:.*]] = fsdp.pack %{{.*}} into @"unit:"
// CHECK-NEXT: %[[RSF:.*]] = fsdp.reduce_scatter %[[RG]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<4xf32> -> !fsdp.future<tensor<1xf32>>
// CHECK: %[[B2:.*]] = fsdp.wait %[[B2F]]
// CHECK: fsdp.release %[[B2]]
// CHECK: %[[RR:.*]] = fsdp.wait %[[RSF]] : !fsdp.future<tensor<1xf32>> -> tensor<1xf32>
// CHECK-NEXT: %[[BSF:.*]] = fsdp.reduce_scatter
// CHECK: %[[BR:.*]] = fsdp.wait %[[BSF]]
// CHECK-NEXT: %[[ASF:.*]] = fsdp.reduce_scatter
// CHECK-NEXT: %[[AR:.*]] = fsdp.wait %[[ASF]]
// CHECK-NEXT: return %{{.*}}, %[[AR]], %[[BR]], %[[RR]]

// The started gathers keep their memory effects: CSE and canonicalization
// leave both of b's.
// CSE: fsdp.get_shard @"unit:b"
// CSE-NEXT: fsdp.all_gather {{.*}} : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
// CSE: fsdp.get_shard @"unit:b"
// CSE-NEXT: fsdp.all_gather {{.*}} : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>

// No prefetch: each gather starts right where it is waited for.
// NONE-LABEL: func.func @forward
// NONE: fsdp.release
// NONE-NEXT: onnx.Tanh
// NONE-NEXT: fsdp.get_shard @"unit:b"
// NONE-NEXT: %[[BF:.*]] = fsdp.all_gather
// NONE-NEXT: fsdp.wait %[[BF]]
// NONE: fsdp.get_shard @"unit:"
// NONE-NEXT: %[[RF:.*]] = fsdp.all_gather
// NONE-NEXT: fsdp.wait %[[RF]]
// NONE: fsdp.get_shard @"unit:b"
// NONE-NEXT: %[[B2F:.*]] = fsdp.all_gather
// NONE-NEXT: fsdp.wait %[[B2F]]

// limit-all-gathers=1: a gather starts only after the previous gathered
// unit is released; b after a's release.
// LIMIT-LABEL: func.func @forward
// LIMIT: %[[A:.*]] = fsdp.wait
// LIMIT-NEXT: fsdp.unflatten %[[A]]
// LIMIT-NEXT: onnx.MatMul
// LIMIT-NEXT: fsdp.release %[[A]]
// LIMIT-NEXT: fsdp.get_shard @"unit:b"
// LIMIT-NEXT: fsdp.all_gather

// BACKWARD_POST: b's backward gather waits for the root's gradients to be
// done (the root's release), not just for the root's gather.
// POST-LABEL: func.func @forward
// POST: %[[R:.*]] = fsdp.wait {{.*}} -> tensor<4xf32>
// POST-NEXT: fsdp.unflatten %[[R]] of @"unit:"
// POST-NOT: fsdp.get_shard @"unit:b"
// POST: fsdp.release %[[R]]
// POST-NEXT: fsdp.get_shard @"unit:b"
// POST-NEXT: fsdp.all_gather

// bucket-bytes=130: a's and b's forward gathers (64 bytes each) start
// together, in one bucket; the root's (16 bytes more would pass 130) does
// not join. The root's and b's reduce-scatters (16 + 64 bytes) start
// together after b's gradient is packed.
// BUCKET-LABEL: func.func @forward
// BUCKET: fsdp.get_shard @"unit:b"
// BUCKET-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket = 0 : i64}
// BUCKET-NEXT: fsdp.get_shard @"unit:a"
// BUCKET-NEXT: fsdp.all_gather {{.*}} {fsdp.bucket = 0 : i64}
// BUCKET-NOT: fsdp.bucket = 0
// BUCKET: fsdp.pack %{{.*}} into @"unit:b"
// BUCKET-NEXT: fsdp.reduce_scatter {{.*}} {fsdp.bucket = 1 : i64, reduction = "avg"} : tensor<16xf32>
// BUCKET-NEXT: fsdp.reduce_scatter {{.*}} {fsdp.bucket = 1 : i64, reduction = "avg"} : tensor<4xf32>
// BUCKET-NOT: fsdp.bucket
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w]>,
    #fsdp.unit<"a", params = [@a.w]>,
    #fsdp.unit<"b", params = [@b.w]>]} {
  fsdp.param @a.w : tensor<4x4xf32>
  fsdp.param @b.w : tensor<4x4xf32>
  fsdp.param @head.w : tensor<4xf32>
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
