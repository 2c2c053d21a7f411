// fsdp-auto-wrap's unit errors point at the parameter they are about.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics "--fsdp-auto-wrap=policy=regex pattern=pair\.(enc|dec)"

// The encoder and decoder share one weight: wrapping them apart would put it
// in two units.
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["pair"]>,
  #fsdp.module<"pair", class = "Pair", params = [], buffers = [], children = ["pair.enc", "pair.dec"]>,
  #fsdp.module<"pair.enc", class = "Linear", params = ["pair.enc.weight"], buffers = [], children = []>,
  #fsdp.module<"pair.dec", class = "Linear", params = ["pair.dec.weight", "pair.dec.bias"], buffers = [], children = []>]} {
  // expected-error @+1 {{fsdp-auto-wrap: tied parameter 'pair.enc.weight' = 'pair.dec.weight' would be in two units: 'pair.enc' and 'pair.dec'}}
  fsdp.param @"pair.enc.weight" : tensor<2x2xf32> {aliases = ["pair.dec.weight"]}
  fsdp.param @"pair.dec.bias" : tensor<2xf32>
}

// -----

// A unit holding a frozen and a trainable parameter: at the frozen one.
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = ["scale", "shift"], buffers = [], children = []>]} {
  fsdp.param @shift : tensor<4xf32>
  // expected-error @+1 {{fsdp-auto-wrap: unit (root) mixes frozen and trainable parameters; frozen: [scale (4)], trainable: [shift (4)]}}
  fsdp.param @scale : tensor<4xf32> frozen
}
