// fsdp-auto-wrap policy=auto models each unit's shard as fsdp-flatten lays
// it out: in the parameters' dtype, and with use-orig-params' alignment.
// One unit (the root) over 2 ranks, FULL_SHARD, no optimizer state: the
// modelled state is the input (64 bytes once tensor-aligned) plus the
// rank's shard, tensor-aligned.

// bf16, no alignment: 64 elements, shard 32 x 2 bytes = 64; state 128.
// RUN: fsdp-opt %S/Inputs/auto-layout-bf16.mlir "--fsdp-auto-wrap=policy=auto world-size=2 strategy=FULL_SHARD optimizer-states=0" --fsdp-explain-policy=format=json -o /dev/null | FileCheck %s --check-prefix=DTYPE
// DTYPE: "bytes": 128,
// DTYPE-NEXT: "part": "state (shards, optimizer state, buffers, inputs)"

// f32 with use-orig-params: @b starts at element 64 (16 bytes), so 66
// padded elements, shard 33 x 4 bytes = 132 -> 192; state 256 (fsdp-flatten's
// layout below).
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=auto world-size=2 strategy=FULL_SHARD optimizer-states=0 use-orig-params=true" --fsdp-explain-policy=format=json -o /dev/null | FileCheck %s --check-prefix=ORIG
// ORIG: "bytes": 256,
// ORIG-NEXT: "part": "state (shards, optimizer state, buffers, inputs)"
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=auto world-size=2 strategy=FULL_SHARD optimizer-states=0 use-orig-params=true" "--fsdp-flatten=world-size=2 use-orig-params=true" --fsdp-print-layout -o /dev/null | FileCheck %s --check-prefix=LAYOUT
// LAYOUT: flat_param @"unit:": 2 params, 64 elements, padded 66, world size 2, shard 33, alignment 4

// The choice holds only for the layout it modelled.
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=auto world-size=2 use-orig-params=true" --fsdp-flatten=world-size=2 -verify-diagnostics -o /dev/null

// expected-error@+1 {{fsdp-flatten: fsdp-auto-wrap policy=auto chose the units with use-orig-params but this pass lays them out without it; give both the same use-orig-params}}
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = ["w", "b"], buffers = [], children = []>]} {
  fsdp.param @w : tensor<3x21xf32>
  fsdp.param @b : tensor<1xf32>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x21xf32> {
    %w = fsdp.get_param @w : tensor<3x21xf32>
    %b = fsdp.get_param @b : tensor<1xf32>
    %m = onnx.MatMul %x, %w : (tensor<2x3xf32>, tensor<3x21xf32>) -> tensor<2x21xf32>
    %y = onnx.Add %m, %b : (tensor<2x21xf32>, tensor<1xf32>) -> tensor<2x21xf32>
    return %y : tensor<2x21xf32>
  }
}
