// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard -cse -canonicalize | FileCheck %s --check-prefix=CSE
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-shard | FileCheck %s --check-prefix=INFER
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 "--fsdp-optimizer=optimizer=sgd momentum=0.9 max-grad-norm=1 fused=false" --fsdp-shard | FileCheck %s --check-prefix=OPT

// Three FULL_SHARD units over 4 ranks: the root (head.w), a and b. Each is
// gathered from this rank's shard right before its first use (fsdp-schedule
// moves gathers earlier to prefetch them) and released after
// its last use in the forward; b, whose weight the backward needs, is
// gathered again there (a's is not needed: x has no gradient); the root is
// kept from its forward to its backward, as PyTorch does. Each flat
// gradient is reduce-scattered (averaged) as soon as it is packed.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:a"}, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}, tensor<1xf32> {fsdp.flat_grad_of = @"unit:"})
// CHECK: %[[AS:.*]] = fsdp.get_shard @"unit:a" : tensor<4xf32>
// CHECK-NEXT: %[[AF:.*]] = fsdp.all_gather %[[AS]] on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: fsdp.unflatten %[[AF]] of @"unit:a"
// CHECK-NEXT: onnx.MatMul %arg0
// CHECK-NEXT: fsdp.release %[[AF]] : tensor<16xf32>
// CHECK-NEXT: onnx.Tanh
// CHECK-NEXT: fsdp.get_shard @"unit:b"
// CHECK-NEXT: %[[BF:.*]] = fsdp.all_gather %{{.*}} on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: fsdp.unflatten %[[BF]]
// CHECK-NEXT: onnx.MatMul
// CHECK-NEXT: fsdp.release %[[BF]] : tensor<16xf32>
// CHECK: %[[RF:.*]] = fsdp.all_gather %{{.*}} on @fsdp_world axes [0] : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[RV:.*]] = fsdp.unflatten %[[RF]] of @"unit:"
// CHECK: %[[LOSS:.*]] = onnx.ReduceSum
// The root's gradient, then its backward: the weight times the (constant)
// seed is computed from the root's parameters alone, so it is made where
// the backward reads it, and the root is released after that.
// CHECK: %[[RG:.*]] = fsdp.pack %{{.*}} into @"unit:"
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter %[[RG]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<4xf32> -> tensor<1xf32>
// CHECK: %[[SEEDW:.*]] = onnx.Mul %{{.*}}, %[[RV]]
// CHECK-NEXT: onnx.Mul %[[SEEDW]]
// CHECK-NEXT: fsdp.release %[[RF]] : tensor<4xf32>
// b again for its backward.
// CHECK: %[[BS2:.*]] = fsdp.get_shard @"unit:b"
// CHECK-NEXT: %[[BF2:.*]] = fsdp.all_gather %[[BS2]]
// CHECK-NEXT: %[[BV2:.*]] = fsdp.unflatten %[[BF2]] of @"unit:b"
// CHECK-NEXT: onnx.Transpose %[[BV2]]
// CHECK-NEXT: onnx.MatMul
// CHECK-NEXT: fsdp.release %[[BF2]]
// CHECK: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b"
// CHECK-NEXT: %[[BR:.*]] = fsdp.reduce_scatter %[[BG]]
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[AG:.*]] = fsdp.pack %{{.*}} into @"unit:a"
// CHECK-NEXT: %[[AR:.*]] = fsdp.reduce_scatter %[[AG]]
// CHECK-NEXT: return %[[LOSS]], %[[AR]], %[[BR]], %[[RS]]

// The collectives have memory effects: CSE and canonicalization keep both
// gathers of b (merging them would silently make it SHARD_GRAD_OP).
// CSE-COUNT-2: fsdp.get_shard @"unit:b"
// CSE-NOT: fsdp.get_shard @"unit:b"
// CSE: return

// Inference: gathers and releases only.
// INFER-LABEL: func.func @forward
// INFER-SAME: -> tensor<f32>
// INFER: fsdp.all_gather
// INFER: fsdp.release
// INFER: fsdp.all_gather
// INFER: fsdp.release
// INFER: fsdp.all_gather
// INFER: fsdp.release
// INFER-NOT: fsdp.reduce_scatter
// INFER-NOT: fsdp.all_gather
// INFER: return

// The optimizer on shards: momentum buffers hold a shard each, the clipping
// norm's squares are summed over each shard and all-reduced, the updates
// are shard-sized.
// OPT: fsdp.buffer @"optim.momentum_buffer.unit:a" : tensor<4xf32> {fsdp.state_of = @"unit:a"}
// OPT: fsdp.buffer @"optim.momentum_buffer.unit:" : tensor<1xf32> {fsdp.state_of = @"unit:"}
// OPT-LABEL: func.func @forward
// OPT-SAME: %{{.*}}: tensor<f32> {fsdp.name = "lr"}, %{{.*}}: tensor<f32> {fsdp.name = "step"}
// OPT-SAME: tensor<4xf32> {fsdp.name = "update.unit:a", fsdp.update_of = @"unit:a"}, tensor<4xf32> {fsdp.name = "update.optim.momentum_buffer.unit:a", fsdp.update_of = @"optim.momentum_buffer.unit:a"}
// OPT: %[[G:.*]] = fsdp.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// OPT: %[[SQ:.*]] = onnx.Mul %[[G]], %[[G]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// OPT: %[[PART:.*]] = onnx.ReduceSum %[[SQ]]
// OPT-NEXT: fsdp.all_reduce %[[PART]] on @fsdp_world axes [0] : tensor<f32> -> tensor<f32>
// OPT: %[[P:.*]] = fsdp.get_shard @"unit:a" : tensor<4xf32>
// OPT: %[[M:.*]] = fsdp.get_buffer @"optim.momentum_buffer.unit:a" : tensor<4xf32>
// OPT: onnx.Sub %[[P]], %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
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
