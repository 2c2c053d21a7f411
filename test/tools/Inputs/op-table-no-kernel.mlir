// fsdp-opt-op-table.test's input: an op the table says has no kernel.
func.func @forward(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  %r = onnx.Constant dense<[2, 1]> : tensor<2xi64>
  // expected-error @+1 {{'onnx.Tile' op has no runtime kernel (docs/ops.md lists the operators and their kernels)}}
  %y = onnx.Tile %x, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
