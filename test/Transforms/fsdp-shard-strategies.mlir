// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard | FileCheck %s

// Per-unit strategies over 4 ranks. NO_SHARD (a): read whole, never
// gathered, its gradient all-reduced (DDP). SHARD_GRAD_OP (b): gathered
// once, kept from the forward through its backward, reduce-scattered.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32>, tensor<16xf32> {fsdp.flat_grad_of = @"unit:a"}, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}, tensor<1xf32> {fsdp.flat_grad_of = @"unit:"})
// CHECK: %[[A:.*]] = fsdp.get_shard @"unit:a" : tensor<16xf32>
// CHECK-NEXT: fsdp.unflatten %[[A]] of @"unit:a"
// CHECK-NEXT: onnx.MatMul %arg0
// CHECK-NOT: fsdp.release %[[A]]
// CHECK: %[[BS:.*]] = fsdp.get_shard @"unit:b" : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = fsdp.all_gather %[[BS]] on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
// CHECK-NOT: fsdp.release %[[B]]
// CHECK: fsdp.reduce_scatter %{{.*}} : tensor<4xf32> -> tensor<1xf32>
// CHECK-NOT: fsdp.all_gather
// CHECK: fsdp.release %[[B]] : tensor<16xf32>
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b"
// CHECK-NEXT: fsdp.reduce_scatter %[[BG]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
// CHECK: %[[AG:.*]] = fsdp.pack %{{.*}} into @"unit:a"
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce %[[AG]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT: return %{{.*}}, %[[AR]]
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w]>,
    #fsdp.unit<"a", params = [@a.w], config = <strategy = #fsdp.strategy<NO_SHARD>>>,
    #fsdp.unit<"b", params = [@b.w], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>>>]} {
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
