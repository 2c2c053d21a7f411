// A training graph that returns BatchNorm's updated running mean.
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) -> tensor<3xf32> {
  %y, %rm, %rv = onnx.BatchNormalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %rm : tensor<3xf32>
}
