// The module tree from parameter FQNs and node scopes alone (no export
// metadata), with the exporter's scope quirks undone.
// RUN: fsdp-opt %s --fsdp-module-tree | FileCheck %s
// RUN: fsdp-opt %s --fsdp-print-module-tree -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: not fsdp-opt %s --fsdp-print-module-tree=format=xml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT

// CHECK-LABEL: module attributes {fsdp.modules = [
// CHECK-SAME: #fsdp.module<"", class = "", params = [], buffers = [], children = ["embed", "layers", "head"]>,
// CHECK-SAME: #fsdp.module<"embed", class = "", params = ["embed.weight"], buffers = [], children = []>,
// CHECK-SAME: #fsdp.module<"layers", class = "", params = [], buffers = [], children = ["layers.0"]>,
// CHECK-SAME: #fsdp.module<"layers.0", class = "", params = [], buffers = [], children = ["layers.0.fc", "layers.0.bn", "layers.0.act"]>,
// CHECK-SAME: #fsdp.module<"layers.0.fc", class = "", params = ["layers.0.fc.weight"], buffers = [], children = []>,
// CHECK-SAME: #fsdp.module<"layers.0.bn", class = "", params = [], buffers = ["layers.0.bn.running_mean"], children = []>,
// The module only a scope shows, found under a Sequential-style `act.0` name.
// CHECK-SAME: #fsdp.module<"layers.0.act", class = "", params = [], buffers = [], children = ["layers.0.act.0"]>,
// CHECK-SAME: #fsdp.module<"layers.0.act.0", class = "", params = [], buffers = [], children = []>,
// CHECK-SAME: #fsdp.module<"head", class = "", params = ["head.weight"], buffers = [], children = ["head.0"]>,
// A module called twice (`head_1`) is the same module.
// CHECK-SAME: #fsdp.module<"head.0", class = "", params = [], buffers = [], children = []>]

// TEXT:      (root)
// TEXT-NEXT:   embed: embed.weight
// TEXT-NEXT:   layers
// TEXT-NEXT:     layers.0
// TEXT-NEXT:       layers.0.fc: layers.0.fc.weight
// TEXT-NEXT:       layers.0.bn: layers.0.bn.running_mean

// FORMAT: error: fsdp-print-module-tree: format must be 'text' or 'json', got 'xml'

fsdp.param @"embed.weight" : tensor<4x2xf32>
fsdp.param @"layers.0.fc.weight" : tensor<2x2xf32>
fsdp.buffer @"layers.0.bn.running_mean" : tensor<2xf32>
fsdp.param @"head.weight" : tensor<2x2xf32>

func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = arith.addf %x, %x : tensor<2xf32> loc("/layers.0/act/act.0/Add")
  %1 = arith.mulf %0, %0 : tensor<2xf32> loc("/head/head.0/Mul")
  %2 = arith.mulf %1, %1 : tensor<2xf32> loc("/head_1/Mul")
  return %2 : tensor<2xf32>
}
