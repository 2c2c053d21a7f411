// Per-parameter gradients (as fsdp-autodiff returns them) become one flat
// gradient per unit, in the unit's layout.
// RUN: fsdp-opt %s --fsdp-flatten=world-size=4 | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32>, tensor<12xf32> {fsdp.flat_grad_of = @"unit:"}, tensor<8xf32> {fsdp.flat_grad_of = @"unit:b"})
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: %[[G0:.*]] = fsdp.pack %arg1, %[[ZERO]] into @"unit:" : tensor<7xf32>, tensor<3xf32> -> tensor<12xf32>
// CHECK: %[[G1:.*]] = fsdp.pack %arg2 into @"unit:b" : tensor<2x4xf32> -> tensor<8xf32>
// CHECK: return %arg0, %[[G0]], %[[G1]] : tensor<f32>, tensor<12xf32>, tensor<8xf32>

module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@"a.weight", @"a.bias"]>,
    #fsdp.unit<"b", params = [@"b.weight"]>]} {
  fsdp.param @"a.weight" : tensor<7xf32>
  fsdp.param @"a.bias" : tensor<3xf32>
  fsdp.param @"b.weight" : tensor<2x4xf32>
  // a.bias is unused: its part of the flat gradient is zero.
  func.func @train_step(%loss: tensor<f32>, %da: tensor<7xf32>, %db: tensor<2x4xf32>)
      -> (tensor<f32>, tensor<7xf32> {fsdp.grad_of = @"a.weight"},
          tensor<2x4xf32> {fsdp.grad_of = @"b.weight"}) {
    return %loss, %da, %db : tensor<f32>, tensor<7xf32>, tensor<2x4xf32>
  }
}

