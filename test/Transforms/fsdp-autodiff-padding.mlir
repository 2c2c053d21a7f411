// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s

// nn.Embedding(padding_idx=2) tied to a linear head: the lookup's gradient
// (fsdp.gather_grad) is masked on row 2, the head's is not, and the
// parameter's gradient is their sum (torch zeroes only the lookup's part).
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[MASK:.*]] = onnx.Constant dense<{{\[}}[1.000000e+00], [1.000000e+00], [0.000000e+00], [1.000000e+00], [1.000000e+00]]> : tensor<5x1xf32>
// CHECK-DAG: %[[GG:.*]] = fsdp.gather_grad %{{.*}}, %arg0 {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<5x4xf32>
// CHECK: %[[MASKED:.*]] = onnx.Mul %[[GG]], %[[MASK]] : (tensor<5x4xf32>, tensor<5x1xf32>) -> tensor<5x4xf32>
// CHECK: %[[SUM:.*]] = onnx.Add %{{.*}}, %[[MASKED]]
// CHECK: return %{{.*}}, %[[SUM]] :
module attributes {fsdp.torch_metadata = "{\22version\22: 1, \22modules\22: [{\22fqn\22: \22\22, \22class\22: \22LM\22}, {\22fqn\22: \22emb\22, \22class\22: \22Embedding\22, \22params\22: [\22emb.weight\22]}, {\22fqn\22: \22head\22, \22class\22: \22Linear\22, \22params\22: [\22head.weight\22]}], \22embeddings\22: [{\22module\22: \22emb\22, \22weight\22: \22emb.weight\22, \22padding_idx\22: 2}]}"} {
  fsdp.param @"emb.weight" : tensor<5x4xf32> at <"m.onnx", offset = 0, length = 80> {aliases = ["head.weight"]}
  func.func @forward(%ids: tensor<3xi64>) -> tensor<f32> {
    %w = fsdp.get_param @"emb.weight" : tensor<5x4xf32>
    %x = onnx.Gather %w, %ids : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32> loc("/emb/Gather")
    %none = onnx.NoValue
    %y = onnx.Gemm %x, %w, %none {transB = 1 : i64} : (tensor<3x4xf32>, tensor<5x4xf32>, none) -> tensor<3x5xf32> loc("/head/Gemm")
    %r = onnx.ReduceMean %y {keepdims = 0 : i64} : (tensor<3x5xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// A Gather of the embedding's weight from another module's scope
// (`self.emb.weight[ids]`) keeps its whole gradient, as in torch.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: tensor<5x1xf32>
// CHECK: %[[GG:.*]] = fsdp.gather_grad
// CHECK-NOT: tensor<5x1xf32>
// CHECK: return %{{.*}}, %[[GG]] :
module attributes {fsdp.torch_metadata = "{\22version\22: 1, \22modules\22: [{\22fqn\22: \22\22, \22class\22: \22LM\22}, {\22fqn\22: \22emb\22, \22class\22: \22Embedding\22, \22params\22: [\22emb.weight\22]}], \22embeddings\22: [{\22module\22: \22emb\22, \22weight\22: \22emb.weight\22, \22padding_idx\22: 0}]}"} {
  fsdp.param @"emb.weight" : tensor<5x4xf32> at <"m.onnx", offset = 0, length = 80>
  func.func @forward(%ids: tensor<3xi64>) -> tensor<f32> {
    %w = fsdp.get_param @"emb.weight" : tensor<5x4xf32>
    %x = onnx.Gather %w, %ids : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32> loc("/Gather")
    %r = onnx.ReduceMean %x {keepdims = 0 : i64} : (tensor<3x4xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}
