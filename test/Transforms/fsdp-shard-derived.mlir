// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-check-reshard | FileCheck %s
// RUN: sed 's/params = \[@b.w\]>/params = [@b.w], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>>>/; s/params = \[@c.w\]>/params = [@c.w], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>>>/' %s | fsdp-opt --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-check-reshard | FileCheck %s --check-prefix=GRADOP

// Values computed from a unit's parameters alone (b: a Transpose then a
// Slice; c: a Cast to f16 and back) are no uses of the gather of their
// own: each phase that reads them makes them again from its gather, right
// before its first reader. Under FULL_SHARD the backward gathers b and c
// again and transposes, slices and casts that gather; nothing made in the
// forward is read after the forward's release.
// CHECK-LABEL: func.func @forward
// CHECK: %[[BF:.*]] = fsdp.all_gather %{{.*}} : tensor<8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[BV:.*]] = fsdp.unflatten %[[BF]] of @"unit:b"
// CHECK-NEXT: %[[BT:.*]] = onnx.Transpose %[[BV]]
// CHECK-NEXT: %[[BS:.*]] = onnx.Slice %[[BT]]
// CHECK-NEXT: onnx.MatMul %{{.*}}, %[[BS]]
// CHECK-NEXT: fsdp.release %[[BF]]
// CHECK: %[[CF:.*]] = fsdp.all_gather %{{.*}} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[CV:.*]] = fsdp.unflatten %[[CF]] of @"unit:c"
// CHECK-NEXT: %[[CH:.*]] = onnx.Cast %[[CV]] {to = 10 : i64}
// CHECK-NEXT: %[[CC:.*]] = onnx.Cast %[[CH]] {to = 1 : i64}
// CHECK-NEXT: onnx.MatMul %{{.*}}, %[[CC]]
// CHECK-NEXT: fsdp.release %[[CF]]
// The backward: c, then b, gathered again; the forward's values are not read.
// CHECK: %[[CF2:.*]] = fsdp.all_gather %{{.*}} : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[CV2:.*]] = fsdp.unflatten %[[CF2]] of @"unit:c"
// CHECK-NEXT: %[[CH2:.*]] = onnx.Cast %[[CV2]] {to = 10 : i64}
// CHECK-NEXT: %[[CC2:.*]] = onnx.Cast %[[CH2]] {to = 1 : i64}
// CHECK-NEXT: %[[CT2:.*]] = onnx.Transpose %[[CC2]]
// CHECK-NEXT: onnx.MatMul %{{.*}}, %[[CT2]]
// CHECK-NEXT: fsdp.release %[[CF2]]
// CHECK: %[[BF2:.*]] = fsdp.all_gather %{{.*}} : tensor<8xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[BV2:.*]] = fsdp.unflatten %[[BF2]] of @"unit:b"
// CHECK-NEXT: %[[BT2:.*]] = onnx.Transpose %[[BV2]]
// CHECK-NEXT: %[[BS2:.*]] = onnx.Slice %[[BT2]]
// CHECK-NEXT: %[[BST2:.*]] = onnx.Transpose %[[BS2]]
// CHECK-NEXT: onnx.MatMul %{{.*}}, %[[BST2]]
// CHECK-NEXT: fsdp.release %[[BF2]]
// CHECK-NOT: %[[BS]]
// CHECK-NOT: %[[CC]]
// CHECK: return

// SHARD_GRAD_OP keeps each gather from the forward through the backward,
// and only the gather: the backward casts, transposes and slices it again.
// GRADOP-LABEL: func.func @forward
// GRADOP: %[[BF:.*]] = fsdp.all_gather %{{.*}} : tensor<8xf32> -> tensor<32xf32>
// GRADOP-NEXT: %[[BV:.*]] = fsdp.unflatten %[[BF]] of @"unit:b"
// GRADOP-NEXT: %[[BT:.*]] = onnx.Transpose %[[BV]]
// GRADOP-NEXT: %[[BS:.*]] = onnx.Slice %[[BT]]
// GRADOP-NEXT: onnx.MatMul %{{.*}}, %[[BS]]
// GRADOP: %[[CF:.*]] = fsdp.all_gather %{{.*}} : tensor<4xf32> -> tensor<16xf32>
// GRADOP-NEXT: %[[CV:.*]] = fsdp.unflatten %[[CF]] of @"unit:c"
// GRADOP-NEXT: %[[CH:.*]] = onnx.Cast %[[CV]] {to = 10 : i64}
// GRADOP-NEXT: %[[CC:.*]] = onnx.Cast %[[CH]] {to = 1 : i64}
// GRADOP-NEXT: onnx.MatMul %{{.*}}, %[[CC]]
// GRADOP-NOT: fsdp.get_shard @"unit:c"
// GRADOP: %[[CH2:.*]] = onnx.Cast %[[CV]] {to = 10 : i64}
// GRADOP-NEXT: %[[CC2:.*]] = onnx.Cast %[[CH2]] {to = 1 : i64}
// GRADOP-NEXT: %[[CT2:.*]] = onnx.Transpose %[[CC2]]
// GRADOP-NEXT: onnx.MatMul %{{.*}}, %[[CT2]]
// GRADOP-NEXT: fsdp.release %[[CF]]
// GRADOP-NOT: fsdp.get_shard @"unit:b"
// GRADOP: %[[BT2:.*]] = onnx.Transpose %[[BV]]
// GRADOP-NEXT: %[[BS2:.*]] = onnx.Slice %[[BT2]]
// GRADOP-NEXT: %[[BST2:.*]] = onnx.Transpose %[[BS2]]
// GRADOP-NEXT: onnx.MatMul %{{.*}}, %[[BST2]]
// GRADOP-NEXT: fsdp.release %[[BF]]
// GRADOP-NOT: %[[BS]]
// GRADOP-NOT: %[[CC]]
// GRADOP: return
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@head.w]>,
    #fsdp.unit<"a", params = [@a.w]>,
    #fsdp.unit<"b", params = [@b.w]>,
    #fsdp.unit<"c", params = [@c.w]>]} {
  fsdp.param @a.w : tensor<4x4xf32>
  fsdp.param @b.w : tensor<8x4xf32>
  fsdp.param @c.w : tensor<4x4xf32>
  fsdp.param @head.w : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %zero = onnx.Constant dense<0> : tensor<1xi64>
    %one = onnx.Constant dense<1> : tensor<1xi64>
    %four = onnx.Constant dense<4> : tensor<1xi64>
    %aw = fsdp.get_param @a.w : tensor<4x4xf32>
    %bw = fsdp.get_param @b.w : tensor<8x4xf32>
    %cw = fsdp.get_param @c.w : tensor<4x4xf32>
    %hw = fsdp.get_param @head.w : tensor<4xf32>
    %h1 = onnx.MatMul %x, %aw : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t1 = onnx.Tanh %h1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %bt = onnx.Transpose %bw {perm = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %bs = onnx.Slice %bt, %zero, %four, %one, %none : (tensor<4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> tensor<4x4xf32>
    %h2 = onnx.MatMul %t1, %bs : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t2 = onnx.Tanh %h2 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %ch = onnx.Cast %cw {to = 10 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf16>
    %cf = onnx.Cast %ch {to = 1 : i64} : (tensor<4x4xf16>) -> tensor<4x4xf32>
    %h3 = onnx.MatMul %t2, %cf : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t3 = onnx.Tanh %h3 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %s = onnx.Mul %t3, %hw : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %l = onnx.ReduceSum %s, %none {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
