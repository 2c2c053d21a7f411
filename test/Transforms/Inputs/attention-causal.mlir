// GPT-2's attention as torch exports it (fsdp-autodiff-attention.mlir's
// checks): masked_fill(~tril(ones), -inf) of the scaled scores, the tril a
// constant sliced to [L, L], in a checkpointable unit "attn".
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["attn"]>,
  #fsdp.module<"attn", class = "Attention", params = ["attn.w"], buffers = [], children = []>],
  fsdp.units = [#fsdp.unit<"", params = []>, #fsdp.unit<"attn", params = [@"attn.w"]>]} {
  fsdp.param @"attn.w" : tensor<8x24xf32> at <"m.onnx", offset = 0, length = 768>
  func.func @forward(%x: tensor<2x4x8xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @"attn.w" : tensor<8x24xf32>
    %qkv = onnx.MatMul %x, %w {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
    %split = onnx.Constant dense<8> : tensor<3xi64>
    %q, %k, %v = onnx.Split %qkv, %split {axis = 2 : i64, fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x24xf32>, tensor<3xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    %kt = onnx.Transpose %k {perm = array<i64: 0, 2, 1>, fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
    %s = onnx.MatMul %q, %kt {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
    %scaled = onnx.Mul %s, %half {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
    %tril = onnx.Constant dense<[[[true, false, false, false, false, false], [true, true, false, false, false, false], [true, true, true, false, false, false], [true, true, true, true, false, false], [true, true, true, true, true, false], [true, true, true, true, true, true]]]> : tensor<1x6x6xi1>
    %zero = onnx.Constant dense<0> : tensor<1xi64>
    %four = onnx.Constant dense<4> : tensor<1xi64>
    %one = onnx.Constant dense<1> : tensor<1xi64>
    %two = onnx.Constant dense<2> : tensor<1xi64>
    %rows = onnx.Slice %tril, %zero, %four, %one, %one {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<1x6x6xi1>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x6xi1>
    %mask = onnx.Slice %rows, %zero, %four, %two, %one {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<1x4x6xi1>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x4x4xi1>
    %masked = onnx.Not %mask {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<1x4x4xi1>) -> tensor<1x4x4xi1>
    %ninf = onnx.Constant dense<0xFF800000> : tensor<f32>
    %filled = onnx.Where %masked, %ninf, %scaled {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<1x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %p = onnx.Softmax %filled {axis = -1 : i64, fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %y = onnx.MatMul %p, %v {fsdp.module = "attn", fsdp.unit = "attn"} : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %shape = onnx.Constant dense<[8, 8]> : tensor<2xi64>
    %logits = onnx.Reshape %y, %shape {fsdp.module = "", fsdp.unit = ""} : (tensor<2x4x8xf32>, tensor<2xi64>) -> tensor<8x8xf32>
    %lshape = onnx.Constant dense<8> : tensor<1xi64>
    %flat = onnx.Reshape %labels, %lshape {fsdp.module = "", fsdp.unit = ""} : (tensor<2x4xi64>, tensor<1xi64>) -> tensor<8xi64>
    %loss, %lp = onnx.SoftmaxCrossEntropyLoss %logits, %flat, %none {fsdp.module = "", fsdp.unit = ""} : (tensor<8x8xf32>, tensor<8xi64>, none) -> (tensor<f32>, none)
    return %loss : tensor<f32>
  }
}

