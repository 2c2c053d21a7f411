module attributes {fsdp.source = "@DIR@/m.onnx"} {
  fsdp.param @w : tensor<4xf32> at <"w.bin", offset = 0, length = 16>
  fsdp.buffer @acc : tensor<4xf32>
  func.func @forward(%g: tensor<4xf32> {fsdp.name = "g", fsdp.offset = 0 : i64}, %lr: tensor<f32> {fsdp.name = "lr", fsdp.offset = 64 : i64}, %step: tensor<f32> {fsdp.name = "step", fsdp.offset = 128 : i64}) -> (tensor<f32> {fsdp.name = "loss"}, tensor<4xf32> {fsdp.update_of = @w, fsdp.name = "update.w"}, tensor<4xf32> {fsdp.update_of = @acc, fsdp.name = "update.acc"}) attributes {fsdp.activation_bytes = 512 : i64} {
    %w = fsdp.get_param @w : tensor<4xf32>
    %acc = fsdp.get_buffer @acc : tensor<4xf32>
    %loss = fsdp.kernel "reduce_sum"(%w) params {axes = array<i64: 0>, keepdims = 0 : i64} {fsdp.offsets = array<i64: 192>} : (tensor<4xf32>) -> tensor<f32>
    %d = fsdp.kernel "mul"(%g, %lr) {fsdp.offsets = array<i64: 256>} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %nw = fsdp.kernel "sub"(%w, %d) {fsdp.offsets = array<i64: 320>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %na = fsdp.kernel "add"(%acc, %g) {fsdp.offsets = array<i64: 384>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %loss, %nw, %na : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
