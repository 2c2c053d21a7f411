// A tiny GPT-2-style model's parameters (2 blocks, width 16), grouped into
// FSDP units as PyTorch's transformer auto-wrap policy would group them
// (one unit per block, the root owning the rest) and sharded over 4 ranks.
// The bytes would live in tiny_gpt.bin; the compiler never reads them.
//
//   fsdp-opt examples/tiny_gpt.mlir --fsdp-print-layout -o /dev/null

mesh.mesh @world(shape = 4)

fsdp.param @"wte.weight" : tensor<100x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 0, length = 6400>
fsdp.param @"wpe.weight" : tensor<32x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 6400, length = 2048>
fsdp.param @"blocks.0.ln_1.weight" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 8448, length = 64>
fsdp.param @"blocks.0.ln_1.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 8512, length = 64>
fsdp.param @"blocks.0.attn.c_attn.weight" : tensor<48x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 8576, length = 3072>
fsdp.param @"blocks.0.attn.c_attn.bias" : tensor<48xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 11648, length = 192>
fsdp.param @"blocks.0.attn.c_proj.weight" : tensor<16x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 11840, length = 1024>
fsdp.param @"blocks.0.attn.c_proj.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 12864, length = 64>
fsdp.param @"blocks.0.ln_2.weight" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 12928, length = 64>
fsdp.param @"blocks.0.ln_2.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 12992, length = 64>
fsdp.param @"blocks.0.mlp.c_fc.weight" : tensor<64x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 13056, length = 4096>
fsdp.param @"blocks.0.mlp.c_fc.bias" : tensor<64xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 17152, length = 256>
fsdp.param @"blocks.0.mlp.c_proj.weight" : tensor<16x64xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 17408, length = 4096>
fsdp.param @"blocks.0.mlp.c_proj.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 21504, length = 64>
fsdp.param @"blocks.1.ln_1.weight" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 21568, length = 64>
fsdp.param @"blocks.1.ln_1.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 21632, length = 64>
fsdp.param @"blocks.1.attn.c_attn.weight" : tensor<48x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 21696, length = 3072>
fsdp.param @"blocks.1.attn.c_attn.bias" : tensor<48xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 24768, length = 192>
fsdp.param @"blocks.1.attn.c_proj.weight" : tensor<16x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 24960, length = 1024>
fsdp.param @"blocks.1.attn.c_proj.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 25984, length = 64>
fsdp.param @"blocks.1.ln_2.weight" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 26048, length = 64>
fsdp.param @"blocks.1.ln_2.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 26112, length = 64>
fsdp.param @"blocks.1.mlp.c_fc.weight" : tensor<64x16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 26176, length = 4096>
fsdp.param @"blocks.1.mlp.c_fc.bias" : tensor<64xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 30272, length = 256>
fsdp.param @"blocks.1.mlp.c_proj.weight" : tensor<16x64xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 30528, length = 4096>
fsdp.param @"blocks.1.mlp.c_proj.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 34624, length = 64>
fsdp.param @"ln_f.weight" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 34688, length = 64>
fsdp.param @"ln_f.bias" : tensor<16xf32> at #fsdp.data_ref<"tiny_gpt.bin", offset = 34752, length = 64>

fsdp.flat_param @"blocks.0" params [@"blocks.0.ln_1.weight", @"blocks.0.ln_1.bias", @"blocks.0.attn.c_attn.weight", @"blocks.0.attn.c_attn.bias", @"blocks.0.attn.c_proj.weight", @"blocks.0.attn.c_proj.bias", @"blocks.0.ln_2.weight", @"blocks.0.ln_2.bias", @"blocks.0.mlp.c_fc.weight", @"blocks.0.mlp.c_fc.bias", @"blocks.0.mlp.c_proj.weight", @"blocks.0.mlp.c_proj.bias"]
    on @world axes [0] : tensor<3280xf32>
fsdp.flat_param @"blocks.1" params [@"blocks.1.ln_1.weight", @"blocks.1.ln_1.bias", @"blocks.1.attn.c_attn.weight", @"blocks.1.attn.c_attn.bias", @"blocks.1.attn.c_proj.weight", @"blocks.1.attn.c_proj.bias", @"blocks.1.ln_2.weight", @"blocks.1.ln_2.bias", @"blocks.1.mlp.c_fc.weight", @"blocks.1.mlp.c_fc.bias", @"blocks.1.mlp.c_proj.weight", @"blocks.1.mlp.c_proj.bias"]
    on @world axes [0] : tensor<3280xf32>
fsdp.flat_param @"root" params [@"wte.weight", @"wpe.weight", @"ln_f.weight", @"ln_f.bias"]
    on @world axes [0] : tensor<2144xf32>

// Compute sees a unit's parameters as views of its gathered flat buffer.
func.func @block0_params(%gathered: tensor<3280xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>, tensor<16xf32>) {
  %v0, %v1, %v2, %v3, %v4, %v5, %v6, %v7, %v8, %v9, %v10, %v11 = fsdp.unflatten %gathered of @"blocks.0"
      : tensor<3280xf32> -> tensor<16xf32>, tensor<16xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>, tensor<16xf32>
  return %v0, %v1, %v2, %v3, %v4, %v5, %v6, %v7, %v8, %v9, %v10, %v11 : tensor<16xf32>, tensor<16xf32>, tensor<48x16xf32>, tensor<48xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64x16xf32>, tensor<64xf32>, tensor<16x64xf32>, tensor<16xf32>
}
