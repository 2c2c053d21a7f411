// fsdp-opt-op-table.test's input: an op the table says is folded over
// constants only, given a value known only at run time.
func.func @forward(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.GatherND' op has no runtime kernel (docs/ops.md lists the operators and their kernels)}}
  %y = onnx.GatherND %x, %i : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
