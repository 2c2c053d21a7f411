// fsdp-flatten's errors point at the symbol they are about.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-flatten=world-size=2

module attributes {fsdp.units = [#fsdp.unit<"m", params = [@w, @b]>]} {
  fsdp.param @w : tensor<4xf32>
  // expected-error @+1 {{fsdp-flatten: unit 'm' mixes element types ('f32' and 'bf16' for @b); a flat buffer holds one dtype}}
  fsdp.param @b : tensor<4xbf16>
}

// -----

module attributes {fsdp.units = [#fsdp.unit<"", params = [@w]>]} {
  // expected-error @+1 {{fsdp-flatten: the module already has a symbol @fsdp_world; was it flattened before?}}
  mesh.mesh @fsdp_world(shape = 2)
  fsdp.param @w : tensor<4xf32>
}

// -----

module attributes {fsdp.units = [#fsdp.unit<"m", params = [@w, @f]>]} {
  fsdp.param @w : tensor<4xf32>
  // expected-error @+1 {{fsdp-flatten: unit 'm' lists @f, which is not an fsdp.param}}
  func.func private @f()
}

// -----

module attributes {fsdp.units = [#fsdp.unit<"m", params = [@w]>]} {
  fsdp.param @w : tensor<4xf32>
  // expected-error @+1 {{fsdp-flatten: a symbol named 'unit:m' already exists}}
  func.func private @"unit:m"()
}
