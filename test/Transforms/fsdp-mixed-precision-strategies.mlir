// Mixed precision per strategy, from hand-written unit configs: the root
// (bf16) FULL_SHARD, a NO_SHARD in f16 reducing in f32, b HYBRID_SHARD in
// bf16 on a 2x2 mesh; then every unit unsharded (one rank).
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=mesh-shape=2,2 --fsdp-shard --fsdp-mixed-precision | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=mesh-shape=1,1 --fsdp-shard --fsdp-mixed-precision | FileCheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32>, tensor<16xf32> {fsdp.flat_grad_of = @"unit:a"}, tensor<8xf32> {fsdp.flat_grad_of = @"unit:b"}, tensor<1xf32> {fsdp.flat_grad_of = @"unit:"})
// The input is cast to the root's bf16, then to a's f16 where a reads it.
// CHECK: %[[XB:.*]] = onnx.Cast %arg0 {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[XA:.*]] = onnx.Cast %[[XB]] {to = 10 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf16>
// NO_SHARD: no gather; the shard (the whole buffer) cast where compute
// reads it.
// CHECK: %[[AS:.*]] = fsdp.get_shard @"unit:a" : tensor<16xf32>
// CHECK-NEXT: %[[ASH:.*]] = onnx.Cast %[[AS]] {to = 10 : i64} : (tensor<16xf32>) -> tensor<16xf16>
// CHECK-NEXT: %[[AW:.*]] = fsdp.unflatten %[[ASH]] of @"unit:a" : tensor<16xf16> -> tensor<4x4xf16>
// CHECK-NEXT: onnx.MatMul %[[XA]], %[[AW]] : (tensor<2x4xf16>, tensor<4x4xf16>) -> tensor<2x4xf16>
// b's MatMul reads a's f16 output cast to bf16.
// CHECK: %[[T1:.*]] = onnx.Cast %{{.*}} {to = 16 : i64} : (tensor<2x4xf16>) -> tensor<2x4xbf16>
// HYBRID_SHARD gathers bf16 within its group.
// CHECK: %[[BS:.*]] = fsdp.get_shard @"unit:b" : tensor<8xf32>
// CHECK-NEXT: %[[BSH:.*]] = onnx.Cast %[[BS]] {to = 16 : i64} : (tensor<8xf32>) -> tensor<8xbf16>
// CHECK-NEXT: fsdp.all_gather %[[BSH]] on @fsdp_world axes [1] : tensor<8xbf16> -> tensor<16xbf16>
// CHECK: onnx.MatMul %[[T1]], %{{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// HYBRID_SHARD: reduce-scatter and all-reduce in bf16, then fp32.
// CHECK: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b" : tensor<4x4xbf16> -> tensor<16xbf16>
// CHECK-NEXT: %[[BR:.*]] = fsdp.reduce_scatter %[[BG]] on @fsdp_world axes [1] {reduction = "avg"} : tensor<16xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[BA:.*]] = fsdp.all_reduce %[[BR]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<8xbf16> -> tensor<8xbf16>
// CHECK-NEXT: %[[B32:.*]] = onnx.Cast %[[BA]] {to = 1 : i64} : (tensor<8xbf16>) -> tensor<8xf32>
// NO_SHARD: packed in f16, all-reduced in its reduce_dtype f32.
// CHECK: %[[AG:.*]] = fsdp.pack %{{.*}} into @"unit:a" : tensor<4x4xf16> -> tensor<16xf16>
// CHECK-NEXT: %[[AG32:.*]] = onnx.Cast %[[AG]] {to = 1 : i64} : (tensor<16xf16>) -> tensor<16xf32>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[AG32]] on @fsdp_world axes [0, 1] {reduction = "avg"} : tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT: return %{{.*}}, %[[AR]], %[[B32]], %{{.*}} : tensor<f32>, tensor<16xf32>, tensor<8xf32>, tensor<1xf32>

// One rank: nothing gathered or reduced; each shard is cast before its
// unflatten and each flat gradient returned in fp32.
// ONE-LABEL: func.func @forward
// ONE-NOT: fsdp.all_gather
// ONE: %[[S:.*]] = fsdp.get_shard @"unit:" : tensor<4xf32>
// ONE-NEXT: %[[SH:.*]] = onnx.Cast %[[S]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// ONE-NEXT: fsdp.unflatten %[[SH]] of @"unit:" : tensor<4xbf16> -> tensor<4xbf16>
// ONE: %[[RG:.*]] = fsdp.pack %{{.*}} into @"unit:" : tensor<4xbf16> -> tensor<4xbf16>
// ONE-NEXT: %[[RG32:.*]] = onnx.Cast %[[RG]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// ONE-NEXT: return %{{.*}}, %{{.*}}, %{{.*}}, %[[RG32]]
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w], config = <param_dtype = bf16>>,
    #fsdp.unit<"a", params = [@a.w], config = <strategy = #fsdp.strategy<NO_SHARD>, param_dtype = f16, reduce_dtype = f32>>,
    #fsdp.unit<"b", params = [@b.w], config = <strategy = #fsdp.strategy<HYBRID_SHARD>, param_dtype = bf16>>]} {
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
