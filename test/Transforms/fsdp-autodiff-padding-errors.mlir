// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff -verify-diagnostics

module attributes {fsdp.torch_metadata = "{\22version\22: 1, \22modules\22: [{\22fqn\22: \22\22, \22class\22: \22LM\22}, {\22fqn\22: \22emb\22, \22class\22: \22Embedding\22}], \22embeddings\22: [{\22module\22: \22emb\22, \22weight\22: \22emb.weight\22, \22padding_idx\22: 7}]}"} {
  fsdp.param @"emb.weight" : tensor<5x4xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(%ids: tensor<3xi64>) -> tensor<f32> {
    %w = fsdp.get_param @"emb.weight" : tensor<5x4xf32>
    // expected-error @+1 {{fsdp-autodiff: 'onnx.Gather' op padding_idx 7 of embedding 'emb' is outside its 5 rows}}
    %x = onnx.Gather %w, %ids : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %r = onnx.ReduceMean %x {keepdims = 0 : i64} : (tensor<3x4xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// expected-error @+1 {{fsdp-autodiff: fsdp.torch_metadata: an 'embeddings' entry needs 'module', 'weight' and an integer 'padding_idx'}}
module attributes {fsdp.torch_metadata = "{\22version\22: 1, \22modules\22: [{\22fqn\22: \22\22, \22class\22: \22LM\22}], \22embeddings\22: [{\22module\22: \22emb\22, \22weight\22: \22emb.weight\22, \22padding_idx\22: \22two\22}]}"} {
  fsdp.param @"emb.weight" : tensor<5x4xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(%ids: tensor<3xi64>) -> tensor<f32> {
    %w = fsdp.get_param @"emb.weight" : tensor<5x4xf32>
    %x = onnx.Gather %w, %ids : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %r = onnx.ReduceMean %x {keepdims = 0 : i64} : (tensor<3x4xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}
