// RUN: not fsdp-opt %s --split-input-file --fsdp-autodiff=checkpoint-units=true -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not fsdp-opt %s --split-input-file --fsdp-autodiff="checkpoint-classes=Missing checkpoint-min-num-params=100" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not fsdp-opt %s --split-input-file --fsdp-autodiff="checkpoint-pattern=(" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REGEX

// No units (auto-wrap has not run).
// UNITS: error: fsdp-autodiff: activation checkpointing needs non-root FSDP units; run --fsdp-auto-wrap first
module {
  fsdp.param @w : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<4xf32>
    %m = onnx.Mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = onnx.ReduceSum %m, %none {keepdims = 0 : i64} : (tensor<4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Selectors that pick no unit list the units there are.
// NOMATCH: error: fsdp-autodiff: the checkpoint selectors match no non-root FSDP unit; units (class, parameters): blk (Block, 4)
// REGEX: error: fsdp-autodiff: checkpoint-pattern '(' is not a regex: parentheses not balanced
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["blk"]>,
  #fsdp.module<"blk", class = "Block", params = ["blk.w"], buffers = [], children = []>],
  fsdp.units = [#fsdp.unit<"", params = []>, #fsdp.unit<"blk", params = [@"blk.w"]>]} {
  fsdp.param @"blk.w" : tensor<4xf32> at <"m.onnx", offset = 0, length = 16>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @"blk.w" : tensor<4xf32>
    %m = onnx.Mul %x, %w {fsdp.unit = "blk"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = onnx.ReduceSum %m, %none {keepdims = 0 : i64, fsdp.unit = ""} : (tensor<4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}
