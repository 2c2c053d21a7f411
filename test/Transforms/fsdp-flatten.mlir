// fsdp-flatten: one flat buffer per unit, reads rewritten to views.
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 | FileCheck %s
// RUN: fsdp-opt %s "--fsdp-flatten=world-size=4 use-orig-params=true" | FileCheck %s --check-prefix=ALIGN
// RUN: fsdp-opt %s --fsdp-flatten | FileCheck %s --check-prefix=SINGLE
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 --fsdp-layout-json=%t.json -o /dev/null
// RUN: %python -c "import json,sys; u=json.load(open('%t.json')); print([(x['module'], x['numel'], x['padded_numel'], [r['padding'] for r in x['ranks']]) for x in u])" | FileCheck %s --check-prefix=JSON

// CHECK: mesh.mesh @fsdp_world(shape = 4)
// 7 + 3 = 10 elements padded to 12 on 4 ranks.
// CHECK: fsdp.flat_param @"unit:" params [@a.weight, @a.bias] on @fsdp_world axes [0] {module = ""} : tensor<12xf32>
// CHECK: fsdp.flat_param @"unit:b" params [@b.weight] on @fsdp_world axes [0] {module = "b"} : tensor<8xf32>
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: %[[F:.*]] = fsdp.get_flat_param @"unit:" : tensor<12xf32>
// CHECK-NEXT: %[[V:.*]]:2 = fsdp.unflatten %[[F]] of @"unit:" : tensor<12xf32> -> tensor<7xf32>, tensor<3xf32>
// CHECK-NEXT: %[[G:.*]] = fsdp.get_flat_param @"unit:b" : tensor<8xf32>
// CHECK-NEXT: %[[W:.*]] = fsdp.unflatten %[[G]] of @"unit:b" : tensor<8xf32> -> tensor<2x4xf32>
// Ignored parameters stay replicated.
// CHECK-NEXT: %[[I:.*]] = fsdp.get_param @ignored : tensor<2xf32>
// CHECK-NEXT: return %[[V]]#1, %[[W]], %[[V]]#0, %[[I]]

// 16-byte alignment of f32 is 4 elements: a.bias starts at 8; 11 -> 12.
// ALIGN: fsdp.flat_param @"unit:" params [@a.weight, @a.bias] on @fsdp_world axes [0] {alignment = 4 : i64, module = ""} : tensor<12xf32>

// SINGLE-NOT: mesh.mesh
// SINGLE: fsdp.flat_param @"unit:" params [@a.weight, @a.bias] {module = ""} : tensor<10xf32>

// JSON: [('', 10, 12, [0, 0, 0, 2]), ('b', 8, 8, [0, 0, 0, 0])]

module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@"a.weight", @"a.bias"]>,
    #fsdp.unit<"b", params = [@"b.weight"]>,
    #fsdp.unit<"empty", params = []>]} {
  fsdp.param @"a.weight" : tensor<7xf32>
  fsdp.param @"a.bias" : tensor<3xf32>
  fsdp.param @"b.weight" : tensor<2x4xf32>
  fsdp.param @ignored : tensor<2xf32>
  func.func @forward() -> (tensor<3xf32>, tensor<2x4xf32>, tensor<7xf32>, tensor<2xf32>) {
    %bias = fsdp.get_param @"a.bias" : tensor<3xf32>
    %w = fsdp.get_param @"b.weight" : tensor<2x4xf32>
    %a = fsdp.get_param @"a.weight" : tensor<7xf32>
    %i = fsdp.get_param @ignored : tensor<2xf32>
    return %bias, %w, %a, %i : tensor<3xf32>, tensor<2x4xf32>, tensor<7xf32>, tensor<2xf32>
  }
  // A declaration has no body to rewrite.
  // CHECK: func.func private @external(tensor<7xf32>)
  func.func private @external(tensor<7xf32>)
}
