// The root holds a frozen and a trainable parameter itself: every wrap
// leaves them in one unit, so fsdp-auto-wrap policy=auto has nothing valid.
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = ["scale", "shift"], buffers = [], children = []>]} {
  fsdp.param @scale : tensor<4xf32> frozen
  fsdp.param @shift : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %s = fsdp.get_param @scale : tensor<4xf32>
    %b = fsdp.get_param @shift : tensor<4xf32>
    %m = onnx.Mul %x, %s : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %y = onnx.Add %m, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
