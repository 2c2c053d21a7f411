// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=mesh-shape=2,2 --fsdp-shard | FileCheck %s

// HYBRID_SHARD (b) on a 2x2 mesh: sharded within each group of 2 (axis 1),
// gathered there (again for the backward), its gradient reduce-scattered
// within the group and the shard all-reduced across the groups (axis 0).
// FULL_SHARD units span both axes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:a"}, tensor<8xf32> {fsdp.flat_grad_of = @"unit:b"}, tensor<1xf32> {fsdp.flat_grad_of = @"unit:"})
// CHECK: fsdp.all_gather %{{.*}} on @fsdp_world axes [0, 1] : tensor<4xf32> -> tensor<16xf32>
// CHECK: %[[BS:.*]] = fsdp.get_shard @"unit:b" : tensor<8xf32>
// CHECK-NEXT: fsdp.all_gather %[[BS]] on @fsdp_world axes [1] : tensor<8xf32> -> tensor<16xf32>
// CHECK: fsdp.get_shard @"unit:b" : tensor<8xf32>
// CHECK-NEXT: fsdp.all_gather %{{.*}} on @fsdp_world axes [1] : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b"
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[BG]] on @fsdp_world axes [1] {reduction = "avg"} : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: fsdp.all_reduce %[[RS]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<8xf32> -> tensor<8xf32>
// CHECK: fsdp.reduce_scatter %{{.*}} on @fsdp_world axes [0, 1] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w]>,
    #fsdp.unit<"a", params = [@a.w]>,
    #fsdp.unit<"b", params = [@b.w], config = <strategy = #fsdp.strategy<HYBRID_SHARD>>>]} {
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
