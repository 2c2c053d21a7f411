// RUN: fsdp-opt %s --fsdp-check-reshard -split-input-file -verify-diagnostics

// A transpose of b's weight made in the forward and read again by the
// backward: it would live from one to the other (what fsdp-shard made of
// an nn.Linear on 3-D inputs before it made such values again per phase).
module {
  mesh.mesh @fsdp_world(shape = 4)
  fsdp.param @b.w : tensor<4x4xf32>
  fsdp.flat_param @"unit:b" params [@b.w] on @fsdp_world axes [0] {module = "b"} : tensor<16xf32>
  func.func @forward(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}) {
    %s = fsdp.get_shard @"unit:b" : tensor<4xf32>
    %g = fsdp.all_gather %s on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
    %w = fsdp.unflatten %g of @"unit:b" : tensor<16xf32> -> tensor<4x4xf32>
    // expected-error@+1 {{fsdp-check-reshard: 'onnx.Transpose' op computes a value from unit 'unit:b''s gathered parameters alone that is read by the forward and by the backward; it would live from one to the other}}
    %wt = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-note@+1 {{read by this forward op ('onnx.MatMul')}}
    %y = onnx.MatMul %x, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.release %g : tensor<16xf32>
    // expected-note@+1 {{and by this backward op ('onnx.MatMul')}}
    %dx = onnx.MatMul %dy, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %dw = onnx.MatMul %xt, %dx : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %p = fsdp.pack %dw into @"unit:b" : tensor<4x4xf32> -> tensor<16xf32>
    %r = fsdp.reduce_scatter %p on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
    return %y, %r : tensor<2x4xf32>, tensor<4xf32>
  }
}

// -----

// A FULL_SHARD unit read by the backward from the forward's gather: it is
// not gathered again (it behaves as SHARD_GRAD_OP).
module {
  mesh.mesh @fsdp_world(shape = 4)
  fsdp.param @b.w : tensor<4x4xf32>
  fsdp.flat_param @"unit:b" params [@b.w] on @fsdp_world axes [0] {module = "b"} : tensor<16xf32>
  func.func @forward(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}) {
    %s = fsdp.get_shard @"unit:b" : tensor<4xf32>
    // expected-error@+1 {{fsdp-check-reshard: 'fsdp.all_gather' op unit 'unit:b' (FULL_SHARD) is read by the forward and by the backward from one gather; it must be gathered again for the backward}}
    %g = fsdp.all_gather %s on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
    %w = fsdp.unflatten %g of @"unit:b" : tensor<16xf32> -> tensor<4x4xf32>
    // expected-note@+1 {{read by this forward op ('onnx.MatMul')}}
    %y = onnx.MatMul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-note@+1 {{and by this backward op ('onnx.MatMul')}}
    %dx = onnx.MatMul %dy, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.release %g : tensor<16xf32>
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %dw = onnx.MatMul %xt, %dx : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %p = fsdp.pack %dw into @"unit:b" : tensor<4x4xf32> -> tensor<16xf32>
    %r = fsdp.reduce_scatter %p on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
    return %y, %r : tensor<2x4xf32>, tensor<4xf32>
  }
}

// -----

// The same step under SHARD_GRAD_OP keeps the gather, and a transpose made
// again for the backward from it: accepted.
module {
  mesh.mesh @fsdp_world(shape = 4)
  fsdp.param @b.w : tensor<4x4xf32>
  fsdp.flat_param @"unit:b" params [@b.w] on @fsdp_world axes [0] {module = "b", fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<SHARD_GRAD_OP>>} : tensor<16xf32>
  func.func @forward(%x: tensor<2x4xf32>, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}) {
    %s = fsdp.get_shard @"unit:b" : tensor<4xf32>
    %g = fsdp.all_gather %s on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
    %w = fsdp.unflatten %g of @"unit:b" : tensor<16xf32> -> tensor<4x4xf32>
    %wt = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = onnx.MatMul %x, %wt : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %wt2 = onnx.Transpose %w {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %dx = onnx.MatMul %dy, %wt2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.release %g : tensor<16xf32>
    %xt = onnx.Transpose %x {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %dw = onnx.MatMul %xt, %dx : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %p = fsdp.pack %dw into @"unit:b" : tensor<4x4xf32> -> tensor<16xf32>
    %r = fsdp.reduce_scatter %p on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
    return %y, %r : tensor<2x4xf32>, tensor<4xf32>
  }
}
