// The example in fsdp-print-layout's description (docs/reference/FSDPPasses.md)
// prints exactly what the pass prints.
// RUN: fsdp-opt %s --fsdp-print-layout -o /dev/null | FileCheck %s --match-full-lines --strict-whitespace

mesh.mesh @world(shape = 4)
fsdp.param @"fc.weight" : tensor<2x3xf32>
fsdp.param @"fc.bias" : tensor<2xf32>
fsdp.flat_param @fc params [@"fc.weight", @"fc.bias"]
    on @world axes [0] : tensor<8xf32>

//      CHECK:flat_param @fc: 2 params, 8 elements, padded 8, world size 4, shard 2
// CHECK-NEXT:  param @fc.weight tensor<2x3xf32> [0, 6)
// CHECK-NEXT:  param @fc.bias tensor<2xf32> [6, 8)
// CHECK-NEXT:  rank 0 [0, 2): @fc.weight[0, 2)->[0, 2)
// CHECK-NEXT:  rank 1 [2, 4): @fc.weight[2, 4)->[0, 2)
// CHECK-NEXT:  rank 2 [4, 6): @fc.weight[4, 6)->[0, 2)
// CHECK-NEXT:  rank 3 [6, 8): @fc.bias[0, 2)->[0, 2)
