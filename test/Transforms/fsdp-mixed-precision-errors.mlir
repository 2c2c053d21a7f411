// RUN: fsdp-opt %s --split-input-file --fsdp-mixed-precision -verify-diagnostics -o /dev/null

// Mixed precision casts the shard fsdp-shard reads; a full flat buffer
// read means fsdp-shard has not run.
module {
  fsdp.param @w : tensor<4xf32>
  fsdp.flat_param @"unit:" params [@w] {fsdp.config = #fsdp.unit_config<param_dtype = bf16>, module = ""} : tensor<4xf32>
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{fsdp-mixed-precision: 'fsdp.get_flat_param' op @f reads the full flat buffer of @"unit:"; run --fsdp-shard first}}
    %0 = fsdp.get_flat_param @"unit:" : tensor<4xf32>
    %1 = fsdp.unflatten %0 of @"unit:" : tensor<4xf32> -> tensor<4xf32>
    %2 = onnx.Mul %x, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{fsdp-mixed-precision: the module has no flat parameters; run --fsdp-flatten and --fsdp-shard first}}
module attributes {fsdp.units = [#fsdp.unit<"", params = [@w], config = <param_dtype = bf16>>]} {
  fsdp.param @w : tensor<4xf32>
}

// A dtype fsdp-mixed-precision cannot cast to is the dialect's error now
// that the configuration is typed: test/Dialect/FSDP/attributes-invalid.mlir.
