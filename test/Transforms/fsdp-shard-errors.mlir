// RUN: not fsdp-opt %s --split-input-file --fsdp-shard 2>&1 | FileCheck %s

// CHECK: error: fsdp-shard: the module has no flat parameters; run --fsdp-flatten first
module {
  fsdp.param @w : tensor<4xf32>
}

// -----

// The collectives check their group and types.
// CHECK: error: 'fsdp.all_gather' op over a group of 4 ranks cannot turn 'tensor<2xf32>' into 'tensor<4xf32>'
mesh.mesh @m(shape = 4)
func.func @f(%x: tensor<2xf32>) -> tensor<4xf32> {
  %y = fsdp.all_gather %x on @m axes [0] : tensor<2xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK: error: 'fsdp.reduce_scatter' op reduction must be "sum" or "avg", not "max"
mesh.mesh @m(shape = 4)
func.func @f(%x: tensor<8xf32>) -> tensor<2xf32> {
  %y = fsdp.reduce_scatter %x on @m axes [0] {reduction = "max"} : tensor<8xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// CHECK: error: 'fsdp.all_reduce' op mesh axis 1 is outside @m's 1 axes
mesh.mesh @m(shape = 4)
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = fsdp.all_reduce %x on @m axes [1] : tensor<8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// CHECK: error: 'fsdp.get_shard' op result type 'tensor<3xf32>' is not a 1/4 shard of @u's type 'tensor<8xf32>'
mesh.mesh @m(shape = 4)
fsdp.param @w : tensor<8xf32>
fsdp.flat_param @u params [@w] on @m axes [0] : tensor<8xf32>
func.func @f() -> tensor<3xf32> {
  %s = fsdp.get_shard @u : tensor<3xf32>
  return %s : tensor<3xf32>
}
