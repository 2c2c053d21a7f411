// wrap-frozen cannot split a module that itself holds a frozen and a
// trainable parameter: the unit owning it still mixes them.
// RUN: fsdp-opt %s -verify-diagnostics "--fsdp-auto-wrap=policy=none wrap-frozen=true"

module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["backbone", "head"]>,
  #fsdp.module<"backbone", class = "Linear", params = ["backbone.weight"], buffers = [], children = []>,
  #fsdp.module<"head", class = "Linear", params = ["head.weight", "head.bias"], buffers = [], children = []>]} {
  fsdp.param @"backbone.weight" : tensor<2x3xf32> frozen
  fsdp.param @"head.weight" : tensor<2x2xf32>
  // expected-error @+1 {{fsdp-auto-wrap: unit (root) mixes frozen and trainable parameters; frozen: [head.bias (2)], trainable: [head.weight (4)]; wrap the frozen modules separately (wrap-frozen=true wraps every frozen submodule)}}
  fsdp.param @"head.bias" : tensor<2xf32> frozen
}
