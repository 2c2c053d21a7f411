// fsdp-shard's errors point at the op they are about.
// RUN: fsdp-opt %s -verify-diagnostics --fsdp-flatten=world-size=2 --fsdp-shard

// fsdp-flatten made @fsdp_world; a second mesh is the one in the way.
module attributes {fsdp.units = [#fsdp.unit<"", params = [@w]>]} {
  // expected-error @+1 {{fsdp-shard: the module has several mesh.mesh; expected the one fsdp-flatten creates}}
  mesh.mesh @other(shape = 2)
  fsdp.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %w = fsdp.get_param @w : tensor<4xf32>
    %y = onnx.Add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
