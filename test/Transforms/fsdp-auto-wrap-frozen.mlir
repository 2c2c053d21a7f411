// wrap-frozen: the largest frozen subtrees below trainable modules become
// units of their own, so a frozen backbone needs no policy.
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=none wrap-frozen=true" | FileCheck %s
// Without it, policy=none keeps PyTorch's rule (one root unit) and refuses.
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=none 2>&1 | FileCheck %s --check-prefix=MIXED

// CHECK: fsdp.units = [#fsdp.unit<"", params = [@head.weight, @head.bias]>, #fsdp.unit<"backbone", params = [@backbone.0.weight, @backbone.1.weight]>]
// MIXED: error: fsdp-auto-wrap: unit (root) mixes frozen and trainable parameters; frozen: [backbone.0.weight (6), backbone.1.weight (4)]
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["backbone", "head"]>,
  #fsdp.module<"backbone", class = "Sequential", params = [], buffers = [], children = ["backbone.0", "backbone.1"]>,
  #fsdp.module<"backbone.0", class = "Linear", params = ["backbone.0.weight"], buffers = [], children = []>,
  #fsdp.module<"backbone.1", class = "Linear", params = ["backbone.1.weight"], buffers = [], children = []>,
  #fsdp.module<"head", class = "Linear", params = ["head.weight", "head.bias"], buffers = [], children = []>]} {
  fsdp.param @"backbone.0.weight" : tensor<2x3xf32> frozen
  fsdp.param @"backbone.1.weight" : tensor<2x2xf32> frozen
  fsdp.param @"head.weight" : tensor<2x2xf32>
  fsdp.param @"head.bias" : tensor<2xf32>
}
