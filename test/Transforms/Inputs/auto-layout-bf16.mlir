// A bf16 model for fsdp-auto-wrap-auto-layout.mlir: one unit of 64 elements.
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = ["w", "b"], buffers = [], children = []>]} {
  fsdp.param @w : tensor<3x21xbf16>
  fsdp.param @b : tensor<1xbf16>
  func.func @forward(%x: tensor<2x3xbf16>) -> tensor<2x21xbf16> {
    %w = fsdp.get_param @w : tensor<3x21xbf16>
    %b = fsdp.get_param @b : tensor<1xbf16>
    %m = onnx.MatMul %x, %w : (tensor<2x3xbf16>, tensor<3x21xbf16>) -> tensor<2x21xbf16>
    %y = onnx.Add %m, %b : (tensor<2x21xbf16>, tensor<1xbf16>) -> tensor<2x21xbf16>
    return %y : tensor<2x21xbf16>
  }
}
