// fsdp-flatten's errors.
// RUN: not fsdp-opt %s --fsdp-flatten=world-size=0 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not fsdp-opt %s --split-input-file --fsdp-flatten=world-size=2 2>&1 | FileCheck %s

// WORLD: error: fsdp-flatten: world-size must be at least 1, got 0

// CHECK: error: fsdp-flatten: the module has no FSDP units; run fsdp-auto-wrap first
module {
  fsdp.param @w : tensor<4xf32>
}

// -----

// CHECK: error: fsdp-flatten: unit 'm' mixes element types ('f32' and 'bf16' for @b); a flat buffer holds one dtype
module attributes {fsdp.units = [#fsdp.unit<"m", params = [@w, @b]>]} {
  fsdp.param @w : tensor<4xf32>
  fsdp.param @b : tensor<4xbf16>
}

// -----

// CHECK: error: fsdp-flatten: the module already has a symbol @fsdp_world; was it flattened before?
module attributes {fsdp.units = [#fsdp.unit<"", params = [@w]>]} {
  mesh.mesh @fsdp_world(shape = 2)
  fsdp.param @w : tensor<4xf32>
}

// -----

// CHECK: error: fsdp-flatten: result 0 of @f is the gradient of @nothing, which is not an fsdp.param
module attributes {fsdp.units = [#fsdp.unit<"", params = [@w]>]} {
  fsdp.param @w : tensor<4xf32>
  func.func @f(%g: tensor<4xf32>) -> (tensor<4xf32> {fsdp.grad_of = @nothing}) {
    return %g : tensor<4xf32>
  }
}
