// Layouts and shards, hand-computed from PyTorch FlatParameter's rules:
// concatenate, zero-pad to a multiple of the world size, rank r takes chunk r.
// RUN: fsdp-opt %s --fsdp-print-layout -o /dev/null | FileCheck %s
// RUN: fsdp-opt %s --fsdp-print-layout=ranks=1,3 -o /dev/null | FileCheck %s --check-prefix=RANKS
// A rank outside the world: at the first unit that lacks it.
// RUN: fsdp-opt %s --fsdp-print-layout=ranks=4 -verify-diagnostics -o /dev/null > /dev/null
// The pass leaves the module as it was.
// RUN: fsdp-opt %s --fsdp-print-layout -o %t.after > /dev/null
// RUN: fsdp-opt %s -o %t.before
// RUN: diff %t.before %t.after

mesh.mesh @world(shape = 4)
mesh.mesh @hybrid(shape = 2x4)

fsdp.param @"l1.weight" : tensor<2x3xf32>
fsdp.param @"l1.bias" : tensor<3xf32>
fsdp.param @"l2.weight" : tensor<4xf32>
fsdp.param @head : tensor<5xf32>

// 13 elements padded to 16; shards of 4.
// CHECK-LABEL: flat_param @block: 3 params, 13 elements, padded 16, world size 4, shard 4
// CHECK-NEXT:   param @l1.weight tensor<2x3xf32> [0, 6)
// CHECK-NEXT:   param @l1.bias tensor<3xf32> [6, 9)
// CHECK-NEXT:   param @l2.weight tensor<4xf32> [9, 13)
// CHECK-NEXT:   rank 0 [0, 4): @l1.weight[0, 4)->[0, 4)
// CHECK-NEXT:   rank 1 [4, 8): @l1.weight[4, 6)->[0, 2) @l1.bias[0, 2)->[2, 4)
// CHECK-NEXT:   rank 2 [8, 12): @l1.bias[2, 3)->[0, 1) @l2.weight[0, 3)->[1, 4)
// CHECK-NEXT:   rank 3 [12, 16): @l2.weight[3, 4)->[0, 1) padding 3
// expected-error @+1 {{fsdp-print-layout: 'fsdp.flat_param' op cannot print rank 4: the world size is 4}}
fsdp.flat_param @block params [@"l1.weight", @"l1.bias", @"l2.weight"] on @world axes [0] : tensor<16xf32>

// 5 elements over the 4-rank axis of a 2x4 mesh: rank 3 holds padding only.
// CHECK-LABEL: flat_param @head_unit: 1 params, 5 elements, padded 8, world size 4, shard 2
// CHECK-NEXT:   param @head tensor<5xf32> [0, 5)
// CHECK-NEXT:   rank 0 [0, 2): @head[0, 2)->[0, 2)
// CHECK-NEXT:   rank 1 [2, 4): @head[2, 4)->[0, 2)
// CHECK-NEXT:   rank 2 [4, 6): @head[4, 5)->[0, 1) padding 1
// CHECK-NEXT:   rank 3 [6, 8): padding 2
fsdp.flat_param @head_unit params [@head] on @hybrid axes [1] : tensor<8xf32>

// Aligned to 4 elements: l1.bias starts at 8, leaving a gap of 2.
// CHECK-LABEL: flat_param @aligned: 2 params, 9 elements, padded 12, world size 4, shard 3, alignment 4
// CHECK-NEXT:   param @l1.weight tensor<2x3xf32> [0, 6)
// CHECK-NEXT:   param @l1.bias tensor<3xf32> [8, 11)
// CHECK-NEXT:   rank 0 [0, 3): @l1.weight[0, 3)->[0, 3)
// CHECK-NEXT:   rank 1 [3, 6): @l1.weight[3, 6)->[0, 3)
// CHECK-NEXT:   rank 2 [6, 9): @l1.bias[0, 1)->[2, 3)
// CHECK-NEXT:   rank 3 [9, 12): @l1.bias[1, 3)->[0, 2) padding 1
fsdp.flat_param @aligned params [@"l1.weight", @"l1.bias"] on @world axes [0] {alignment = 4 : i64} : tensor<12xf32>

// RANKS-LABEL: flat_param @block
// RANKS-NOT:   rank 0
// RANKS:       rank 1 [4, 8):
// RANKS-NOT:   rank 2
// RANKS:       rank 3 [12, 16):
// RANKS-LABEL: flat_param @head_unit

