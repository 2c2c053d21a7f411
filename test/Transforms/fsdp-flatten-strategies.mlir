// Each unit is sharded as its strategy says.
// RUN: fsdp-opt %s --fsdp-flatten=mesh-shape=2,4 | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-flatten=world-size=8 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s "--fsdp-flatten=world-size=2 mesh-shape=2,4" 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not fsdp-opt %s --fsdp-flatten=mesh-shape=2,0 2>&1 | FileCheck %s --check-prefix=SHAPE

// CHECK: mesh.mesh @fsdp_world(shape = 2x4)
// FULL_SHARD over all 8 ranks: 5 elements padded to 8.
// CHECK: fsdp.flat_param @"unit:" params [@a] on @fsdp_world axes [0, 1] {module = ""} : tensor<8xf32>
// HYBRID_SHARD within groups of 4: padded to 8 (a multiple of 4).
// CHECK: fsdp.flat_param @"unit:h" params [@h] on @fsdp_world axes [1] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<HYBRID_SHARD>>, module = "h"} : tensor<8xf32>
// NO_SHARD: not sharded, not padded.
// CHECK: fsdp.flat_param @"unit:n" params [@n] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<NO_SHARD>>, module = "n"} : tensor<5xf32>
// SHARD_GRAD_OP shards like FULL_SHARD.
// CHECK: fsdp.flat_param @"unit:s" params [@s] on @fsdp_world axes [0, 1] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<SHARD_GRAD_OP>>, module = "s"} : tensor<16xf32>

// HYBRID: error: fsdp-flatten: unit 'h' uses HYBRID_SHARD, which needs a 2-D mesh (mesh-shape=<groups>,<ranks per group>)
// SHAPE: error: fsdp-flatten: mesh-shape takes one or two positive sizes and replaces world-size

module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@a]>,
    #fsdp.unit<"h", params = [@h], config = <strategy = #fsdp.strategy<HYBRID_SHARD>>>,
    #fsdp.unit<"n", params = [@n], config = <strategy = #fsdp.strategy<NO_SHARD>>>,
    #fsdp.unit<"s", params = [@s], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>>>]} {
  fsdp.param @a : tensor<5xf32>
  fsdp.param @h : tensor<5xf32>
  fsdp.param @n : tensor<5xf32>
  fsdp.param @s : tensor<9xf32>
}
