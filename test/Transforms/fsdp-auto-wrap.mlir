// PyTorch's auto-wrap policies over a small module tree (hand-computed from
// torch 1.13's _recursive_wrap and the policies' rules).
// RUN: fsdp-opt %s --fsdp-auto-wrap=policy=none | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Block" | FileCheck %s --check-prefix=LAYER
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=size min-num-params=60" | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=size min-num-params=60 force-leaf-classes=Block" | FileCheck %s --check-prefix=LEAF
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=regex pattern=blocks\.[0-9]+\.mlp" | FileCheck %s --check-prefix=REGEX
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer,regex layer-classes=Block pattern=head" | FileCheck %s --check-prefix=OR
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Block ignored-modules=blocks.1 ignored-params=head.bias" | FileCheck %s --check-prefix=IGNORED

// Mixed precision: dtypes go in every unit's config; full-precision classes
// become units of their own with mixed precision off.
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Block param-dtype=bf16 reduce-dtype=f32 full-precision-classes=Embedding strategy=SHARD_GRAD_OP" 2>&1 | FileCheck %s --check-prefix=MP
// A policy file: per-module units and settings (CustomPolicy).
// RUN: echo '{"modules": {"head": {"strategy": "NO_SHARD"}, "blocks.0": {"param_dtype": "bf16"}, "": {"strategy": "SHARD_GRAD_OP"}}}' > %t.policy.json
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.policy.json" | FileCheck %s --check-prefix=FILE

// MP: warning: fsdp-auto-wrap: mixed precision is off for 1 modules of the full-precision classes (Embedding), each wrapped as its own unit
// MP: fsdp.units = [#fsdp.unit<"", params = [@head.weight, @head.bias], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>, param_dtype = bf16, reduce_dtype = f32>>,
// MP-SAME: #fsdp.unit<"embed", params = [@embed.weight], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>, mixed_precision = false>>,
// MP-SAME: #fsdp.unit<"blocks.0", params = [{{.*}}], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>, param_dtype = bf16, reduce_dtype = f32>>

// FILE: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias], config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>>>,
// FILE-SAME: #fsdp.unit<"blocks.0", params = [@blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.0.mlp.weight, @blocks.0.mlp.bias], config = <param_dtype = bf16>>,
// FILE-SAME: #fsdp.unit<"head", params = [@head.weight, @head.bias], config = <strategy = #fsdp.strategy<NO_SHARD>>>]

// Module tree (numels): embed 40; blocks (ModuleList) = blocks.0, blocks.1
// (Block: attn 16+4, mlp 32+8 -> 60 each); head 8+2.

// NONE: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.0.mlp.weight, @blocks.0.mlp.bias, @blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias, @head.weight, @head.bias]>]

// LAYER: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @head.weight, @head.bias]>, #fsdp.unit<"blocks.0", params = [@blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.0.mlp.weight, @blocks.0.mlp.bias]>, #fsdp.unit<"blocks.1", params = [@blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias]>]

// Size 60: blocks (120) is recursed into but, a ModuleList, never wrapped;
// each block (60) is wrapped; its attn (20) and mlp (40) are too small;
// embed (40) and head (10) stay with the root.
// SIZE: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @head.weight, @head.bias]>, #fsdp.unit<"blocks.0", params = [@blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.0.mlp.weight, @blocks.0.mlp.bias]>, #fsdp.unit<"blocks.1", params = [@blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias]>]

// A force-leaf class is never recursed into, so never wrapped by size.
// LEAF: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.0.mlp.weight, @blocks.0.mlp.bias, @blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias, @head.weight, @head.bias]>]

// REGEX: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @blocks.0.attn.weight, @blocks.0.attn.bias, @blocks.1.attn.weight, @blocks.1.attn.bias, @head.weight, @head.bias]>, #fsdp.unit<"blocks.0.mlp", params = [@blocks.0.mlp.weight, @blocks.0.mlp.bias]>, #fsdp.unit<"blocks.1.mlp", params = [@blocks.1.mlp.weight, @blocks.1.mlp.bias]>]

// OR: fsdp.units = [#fsdp.unit<"", params = [@embed.weight]>, #fsdp.unit<"blocks.0", {{.*}}>, #fsdp.unit<"blocks.1", {{.*}}>, #fsdp.unit<"head", params = [@head.weight, @head.bias]>]

// IGNORED: fsdp.ignored_params = [@blocks.1.attn.weight, @blocks.1.attn.bias, @blocks.1.mlp.weight, @blocks.1.mlp.bias, @head.bias]
// IGNORED-SAME: fsdp.units = [#fsdp.unit<"", params = [@embed.weight, @head.weight]>, #fsdp.unit<"blocks.0", {{.*}}>]

module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["embed", "blocks", "head"]>,
  #fsdp.module<"embed", class = "Embedding", params = ["embed.weight"], buffers = [], children = []>,
  #fsdp.module<"blocks", class = "ModuleList", params = [], buffers = [], children = ["blocks.0", "blocks.1"]>,
  #fsdp.module<"blocks.0", class = "Block", params = [], buffers = [], children = ["blocks.0.attn", "blocks.0.mlp"]>,
  #fsdp.module<"blocks.0.attn", class = "Linear", params = ["blocks.0.attn.weight", "blocks.0.attn.bias"], buffers = [], children = []>,
  #fsdp.module<"blocks.0.mlp", class = "Linear", params = ["blocks.0.mlp.weight", "blocks.0.mlp.bias"], buffers = [], children = []>,
  #fsdp.module<"blocks.1", class = "Block", params = [], buffers = [], children = ["blocks.1.attn", "blocks.1.mlp"]>,
  #fsdp.module<"blocks.1.attn", class = "Linear", params = ["blocks.1.attn.weight", "blocks.1.attn.bias"], buffers = [], children = []>,
  #fsdp.module<"blocks.1.mlp", class = "Linear", params = ["blocks.1.mlp.weight", "blocks.1.mlp.bias"], buffers = [], children = []>,
  #fsdp.module<"head", class = "Linear", params = ["head.weight", "head.bias"], buffers = [], children = []>]} {
  fsdp.param @"embed.weight" : tensor<10x4xf32>
  fsdp.param @"blocks.0.attn.weight" : tensor<4x4xf32>
  fsdp.param @"blocks.0.attn.bias" : tensor<4xf32>
  fsdp.param @"blocks.0.mlp.weight" : tensor<8x4xf32>
  fsdp.param @"blocks.0.mlp.bias" : tensor<8xf32>
  fsdp.param @"blocks.1.attn.weight" : tensor<4x4xf32>
  fsdp.param @"blocks.1.attn.bias" : tensor<4xf32>
  fsdp.param @"blocks.1.mlp.weight" : tensor<8x4xf32>
  fsdp.param @"blocks.1.mlp.bias" : tensor<8xf32>
  fsdp.param @"head.weight" : tensor<2x4xf32>
  fsdp.param @"head.bias" : tensor<2xf32>

  // Ops are marked with the module their scope names and the unit managing
  // it.
  // LAYER-LABEL: func.func @forward
  // LAYER: arith.addf {{.*}} {fsdp.module = "blocks.0.mlp", fsdp.unit = "blocks.0"}
  // LAYER: arith.mulf {{.*}} {fsdp.module = "blocks.1", fsdp.unit = "blocks.1"}
  // LAYER: arith.subf {{.*}} {fsdp.module = "head", fsdp.unit = ""}
  // LAYER: arith.divf {{.*}} {fsdp.module = "", fsdp.unit = ""}
  // LAYER-NOT: fsdp.module
  // IGNORED-LABEL: func.func @forward
  // IGNORED: arith.addf {{.*}} {fsdp.module = "blocks.0.mlp", fsdp.unit = "blocks.0"}
  // IGNORED-NOT: arith.mulf {{.*}} fsdp.module
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = arith.addf %x, %x : tensor<4xf32> loc("/blocks.0/mlp/Add")
    %1 = arith.mulf %0, %0 : tensor<4xf32> loc("/blocks.1/Mul")
    %2 = arith.subf %1, %1 : tensor<4xf32> loc("/head/Sub")
    %3 = arith.divf %2, %2 : tensor<4xf32> loc("/Div")
    %4 = arith.negf %3 : tensor<4xf32> loc("no scope")
    return %4 : tensor<4xf32>
  }
}
