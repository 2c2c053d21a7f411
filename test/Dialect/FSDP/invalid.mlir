// Every verifier error of the fsdp dialect, with its text.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'fsdp.param' op @w: data reference holds 20 bytes but 'tensor<2x3xf32>' needs 24}}
fsdp.param @w : tensor<2x3xf32> at #fsdp.data_ref<"w.bin", offset = 0, length = 20>

// -----

// expected-error @+1 {{data reference into 'w.bin' has a negative offset -8}}
fsdp.param @w : tensor<2xf32> at #fsdp.data_ref<"w.bin", offset = -8, length = 8>

// -----

// expected-error @+1 {{data reference into 'w.bin' has a negative length -8}}
fsdp.param @w : tensor<2xf32> at #fsdp.data_ref<"w.bin", offset = 0, length = -8>

// -----

// expected-error @+1 {{data reference names no file}}
fsdp.param @w : tensor<2xf32> at #fsdp.data_ref<"", offset = 0, length = 8>

// -----

// expected-error @+1 {{data reference into 'w.bin' ends past the largest file offset}}
fsdp.param @w : tensor<2xf32> at #fsdp.data_ref<"w.bin", offset = 9223372036854775807, length = 8>

// -----

// expected-error @+1 {{'fsdp.param' op @w: element type 'index' has no defined byte size, so it cannot be stored at a data reference}}
fsdp.param @w : tensor<2xindex> at #fsdp.data_ref<"w.bin", offset = 0, length = 16>

// -----

// expected-error @+1 {{'fsdp.param' op @w: 'tensor<4611686018427387904x4xf32>' is larger than the largest file offset}}
fsdp.param @w : tensor<4611686018427387904x4xf32> at #fsdp.data_ref<"w.bin", offset = 0, length = 16>

// -----

// expected-error @+1 {{'fsdp.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
fsdp.param @w : tensor<?x3xf32>

// -----

func.func @f() {
  // expected-error @+1 {{'fsdp.get_param' op @missing does not name an fsdp.param}}
  %0 = fsdp.get_param @missing : tensor<2xf32>
  return
}

// -----

fsdp.param @w : tensor<2x3xf32>
func.func @f() {
  // expected-error @+1 {{'fsdp.get_param' op result type 'tensor<3x2xf32>' differs from @w's type 'tensor<2x3xf32>'}}
  %0 = fsdp.get_param @w : tensor<3x2xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op member @v does not name an fsdp.param}}
fsdp.flat_param @u params [@w, @v] : tensor<8xf32>

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op lists parameter @w twice}}
fsdp.flat_param @u params [@w, @w] : tensor<8xf32>

// -----

fsdp.param @w : tensor<4xf32>
fsdp.param @b : tensor<4xbf16>
// expected-error @+1 {{'fsdp.flat_param' op parameter @b has element type 'bf16' but the flat buffer holds 'f32'}}
fsdp.flat_param @u params [@w, @b] : tensor<8xf32>

// -----

fsdp.param @"a.weight" : tensor<4xf32> frozen
fsdp.param @"a.bias" : tensor<4xf32>
fsdp.param @"b.weight" : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op mixes frozen and trainable parameters, which one flat buffer cannot hold: frozen [@a.weight], trainable [@a.bias, @b.weight]}}
fsdp.flat_param @u params [@"a.weight", @"a.bias", @"b.weight"] : tensor<12xf32>

// -----

mesh.mesh @world(shape = 4)
fsdp.param @w : tensor<5xf32>
// expected-error @+1 {{'fsdp.flat_param' op type 'tensor<5xf32>' has 5 elements but the layout needs 8 (5 elements padded to a multiple of world size 4)}}
fsdp.flat_param @u params [@w] on @world axes [0] : tensor<5xf32>

// -----

fsdp.param @w : tensor<3xf32>
fsdp.param @b : tensor<3xf32>
// expected-error @+1 {{'fsdp.flat_param' op type 'tensor<6xf32>' has 6 elements but the layout needs 7 (7 elements padded to a multiple of world size 1)}}
fsdp.flat_param @u params [@w, @b] {alignment = 4 : i64} : tensor<6xf32>

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op @nowhere does not name a mesh.mesh}}
fsdp.flat_param @u params [@w] on @nowhere axes [0] : tensor<4xf32>

// -----

mesh.mesh @world(shape = 2x2)
fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op mesh axis 2 is outside @world's 2 axes}}
fsdp.flat_param @u params [@w] on @world axes [2] : tensor<4xf32>

// -----

mesh.mesh @world(shape = 2x2)
fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op names mesh axis 1 twice}}
fsdp.flat_param @u params [@w] on @world axes [1, 1] : tensor<4xf32>

// -----

mesh.mesh @world(shape = 2x?)
fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op mesh axis 1 of @world has a dynamic size; flat layouts need a static world size}}
fsdp.flat_param @u params [@w] on @world axes [1] : tensor<4xf32>

// -----

mesh.mesh @world(shape = 4)
fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op is sharded on @world but names no mesh axis}}
fsdp.flat_param @u params [@w] on @world axes [] : tensor<4xf32>

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op names mesh axes but no mesh}}
"fsdp.flat_param"() <{sym_name = "u", params = [@w], mesh_axes = array<i16: 0>, type = tensor<4xf32>}> : () -> ()

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op attribute 'alignment' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
fsdp.flat_param @u params [@w] {alignment = 0 : i64} : tensor<4xf32>

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op attribute 'type' failed to satisfy constraint: type attribute of 1D tensor of any type values}}
fsdp.flat_param @u params [@w] : tensor<2x2xf32>

// -----

fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{'fsdp.flat_param' op type 'tensor<?xf32>' must be static}}
fsdp.flat_param @u params [@w] : tensor<?xf32>

// -----

func.func @f(%flat: tensor<8xf32>) {
  // expected-error @+1 {{'fsdp.unflatten' op @u does not name an fsdp.flat_param}}
  %w = fsdp.unflatten %flat of @u : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.flat_param @u params [@w] : tensor<4xf32>
func.func @f(%flat: tensor<8xf32>) {
  // expected-error @+1 {{'fsdp.unflatten' op flat type 'tensor<8xf32>' differs from @u's type 'tensor<4xf32>'}}
  %w = fsdp.unflatten %flat of @u : tensor<8xf32> -> tensor<2x2xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.param @b : tensor<2xf32>
fsdp.flat_param @u params [@w, @b] : tensor<6xf32>
func.func @f(%flat: tensor<6xf32>) {
  // expected-error @+1 {{'fsdp.unflatten' op has 1 results but @u holds 2 parameters}}
  %w = fsdp.unflatten %flat of @u : tensor<6xf32> -> tensor<2x2xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.param @b : tensor<2xf32>
fsdp.flat_param @u params [@w, @b] : tensor<6xf32>
func.func @f(%flat: tensor<6xf32>) {
  // expected-error @+1 {{'fsdp.unflatten' op result 1 has type 'tensor<1x2xf32>' but parameter @b is 'tensor<2xf32>'}}
  %w, %b = fsdp.unflatten %flat of @u : tensor<6xf32> -> tensor<2x2xf32>, tensor<1x2xf32>
  return
}

// -----

// Mixed precision recasts the whole flat buffer, never some members.
fsdp.param @w : tensor<2x2xf32>
fsdp.param @b : tensor<2xf32>
fsdp.flat_param @u params [@w, @b] : tensor<6xf32>
func.func @f(%flat: tensor<6xbf16>) {
  // expected-error @+1 {{'fsdp.unflatten' op result 1 has type 'tensor<2xf32>' but parameter @b is 'tensor<2xf32>' ('tensor<2xbf16>' in the flat buffer's 'bf16')}}
  %w, %b = fsdp.unflatten %flat of @u : tensor<6xbf16> -> tensor<2x2xbf16>, tensor<2xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.flat_param @u params [@w] : tensor<4xf32>
func.func @f(%flat: tensor<4xi32>) {
  // expected-error @+1 {{'fsdp.unflatten' op flat type 'tensor<4xi32>' differs from @u's type 'tensor<4xf32>'}}
  %w = fsdp.unflatten %flat of @u : tensor<4xi32> -> tensor<2x2xi32>
  return
}

// -----

fsdp.param @w : tensor<4611686018427387904x4xf32>
// expected-error @+1 {{'fsdp.flat_param' op parameter @w 'tensor<4611686018427387904x4xf32>' has more elements than int64 can count}}
fsdp.flat_param @u params [@w] : tensor<4xf32>

// -----

fsdp.param @w : tensor<4611686018427387904xf32>
fsdp.param @b : tensor<4611686018427387904xf32>
// expected-error @+1 {{'fsdp.flat_param' op has no valid layout: flat buffer size overflows int64 at parameter 1}}
fsdp.flat_param @u params [@w, @b] : tensor<4xf32>

// -----

// expected-error @+1 {{'fsdp.buffer' op @b: data reference holds 8 bytes but 'tensor<4xf32>' needs 16}}
fsdp.buffer @b : tensor<4xf32> at #fsdp.data_ref<"b.bin", offset = 0, length = 8>

// -----

fsdp.param @w : tensor<4xf32>
func.func @f() {
  // expected-error @+1 {{'fsdp.get_buffer' op @w does not name an fsdp.buffer}}
  %0 = fsdp.get_buffer @w : tensor<4xf32>
  return
}

// -----

fsdp.buffer @b : tensor<4xf32>
func.func @f() {
  // expected-error @+1 {{'fsdp.get_buffer' op result type 'tensor<2xf32>' differs from @b's type 'tensor<4xf32>'}}
  %0 = fsdp.get_buffer @b : tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{'fsdp.param' op attribute 'aliases' failed to satisfy constraint: string array attribute}}
fsdp.param @w : tensor<4xf32> {aliases = [1]}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.param @b : tensor<2xf32>
fsdp.flat_param @u params [@w, @b] : tensor<6xf32>
func.func @f(%w: tensor<2x2xf32>) {
  // expected-error @+1 {{'fsdp.pack' op has 1 operands but @u holds 2 parameters}}
  %0 = fsdp.pack %w into @u : tensor<2x2xf32> -> tensor<6xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.flat_param @u params [@w] : tensor<4xf32>
func.func @f(%w: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.pack' op operand 0 has type 'tensor<4xf32>' but parameter @w is 'tensor<2x2xf32>'}}
  %0 = fsdp.pack %w into @u : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.flat_param @u params [@w] : tensor<4xf32>
func.func @f(%w: tensor<2x2xf32>) {
  // expected-error @+1 {{'fsdp.pack' op flat type 'tensor<8xf32>' differs from @u's type 'tensor<4xf32>'}}
  %0 = fsdp.pack %w into @u : tensor<2x2xf32> -> tensor<8xf32>
  return
}

// -----

fsdp.param @w : tensor<2x2xf32>
fsdp.flat_param @u params [@w] : tensor<4xf32>
func.func @f() {
  // expected-error @+1 {{'fsdp.get_flat_param' op result type 'tensor<8xf32>' differs from @u's type 'tensor<4xf32>'}}
  %0 = fsdp.get_flat_param @u : tensor<8xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'fsdp.get_flat_param' op @nothing does not name an fsdp.flat_param}}
  %0 = fsdp.get_flat_param @nothing : tensor<8xf32>
  return
}

// -----

// 2^62 elements over 4 ranks wrap to 0 without overflow checks.
mesh.mesh @world(shape = 4)
func.func @wrapped_gather(%s: tensor<4611686018427387904xf32>) -> tensor<0xf32> {
  // expected-error @+1 {{'fsdp.all_gather' op over a group of 4 ranks cannot turn 'tensor<4611686018427387904xf32>' into 'tensor<0xf32>'}}
  %g = fsdp.all_gather %s on @world axes [0] : tensor<4611686018427387904xf32> -> tensor<0xf32>
  return %g : tensor<0xf32>
}

// -----

func.func @attention_causal_mask(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %m: tensor<4x4xi1>) {
  // expected-error @+1 {{'fsdp.attention' op mask_kind "causal" takes no mask}}
  %y = fsdp.attention %q, %kt, %q, %m {scale = 1.0 : f32, mask_kind = "causal"}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xi1>) -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_unknown_kind(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op mask_kind must be none, add, fill or causal, not "tril"}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32, mask_kind = "tril"}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_lse_type(%q: tensor<2x4x8xbf16>, %kt: tensor<2x8x4xbf16>) {
  // expected-error @+1 {{'fsdp.attention' op lse must be 'tensor<2x4xf32>', not 'tensor<2x4xbf16>'}}
  %y, %lse = fsdp.attention %q, %kt, %q {scale = 1.0 : f32}
      : (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xbf16>)
  return
}

// -----

func.func @attention_layout(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op layout must be bhsd or bshd, not "bsdh"}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32, layout = "bsdh"}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_bshd_rank(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op layout "bshd" takes rank-4 [B, rows, H, cols] tensors, not 'tensor<2x4x8xf32>'}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32, layout = "bshd"}
      : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_bshd_keys(%q: tensor<2x16x4x8xf32>, %kt: tensor<2x4x8x16xf32>) {
  // expected-error @+1 {{'fsdp.attention' op query, key_t and value must have equal batch dimensions}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32, layout = "bshd"}
      : (tensor<2x16x4x8xf32>, tensor<2x4x8x16xf32>, tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
  return
}

// -----

func.func @attention_grad_bshd_output(%q: tensor<2x16x4x8xf32>, %lse: tensor<2x4x16xf32>, %y: tensor<2x4x16x8xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op output and grad must be 'tensor<2x16x4x8xf32>', not 'tensor<2x4x16x8xf32>' and 'tensor<2x4x16x8xf32>'}}
  %dq, %dk, %dv = fsdp.attention_grad %q, %q, %q, %y, %lse, %y {scale = 1.0 : f32, layout = "bshd"}
      : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>)
      -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
  return
}

// -----

func.func @attention_grad_needs_mask(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %lse: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op mask_kind "add" needs a mask}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %q, %lse, %q {scale = 1.0 : f32, mask_kind = "add"}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @attention_grad_chain(%q: tensor<4x8xf32>, %kt: tensor<6x4xf32>, %lse: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op shapes do not chain: query 'tensor<4x8xf32>', key_t 'tensor<6x4xf32>', value 'tensor<4x8xf32>'}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %q, %lse, %q {scale = 1.0 : f32}
      : (tensor<4x8xf32>, tensor<6x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<6x4xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @attention_grad_output(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %v: tensor<4x2xf32>, %lse: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op output and grad must be 'tensor<4x2xf32>', not 'tensor<4x8xf32>' and 'tensor<4x2xf32>'}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %v, %q, %lse, %v {scale = 1.0 : f32}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x2xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x2xf32>)
      -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x2xf32>)
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %lse: tensor<4x1xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op lse must be 'tensor<4xf32>', not 'tensor<4x1xf32>'}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %q, %lse, %q {scale = 1.0 : f32}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @attention_grad_results(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %lse: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op results must have the types of query, key_t and value}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %q, %lse, %q {scale = 1.0 : f32}
      : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @attention_rank(%q: tensor<8xf32>) {
  // expected-error @+1 {{'fsdp.attention' op query, key_t and value must have one rank >= 2}}
  %y = fsdp.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x8xf32>, %kt: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op query, key_t and value must have equal batch dimensions}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<3x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_fill_mask(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>, %m: tensor<4x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op a "fill" mask must be boolean (i1)}}
  %y = fsdp.attention %q, %kt, %q, %m {scale = 1.0 : f32, mask_kind = "fill"} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<4x8xf32>, %kt: tensor<8x4xf32>) {
  // expected-error @+1 {{'fsdp.attention' op result type 'tensor<4x4xf32>' should be query's with value's last dimension}}
  %y = fsdp.attention %q, %kt, %q {scale = 1.0 : f32} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @attention_grad_dtypes(%q: tensor<4x8xf32>, %kt: tensor<8x4xbf16>, %lse: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.attention_grad' op query, key_t and value must have one element type}}
  %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %q, %q, %lse, %q {scale = 1.0 : f32}
      : (tensor<4x8xf32>, tensor<8x4xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xf32>)
      -> (tensor<4x8xf32>, tensor<8x4xbf16>, tensor<4x8xf32>)
  return
}

// -----

func.func @batch_norm_train_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.batch_norm_train' op x must be [N, C, ...], not 'tensor<4xf32>'}}
  %y, %a, %b, %d, %e = fsdp.batch_norm_train %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32}
      : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_train_channels(%x: tensor<2x4xf32>, %c: tensor<4xf32>, %d: tensor<3xf32>) {
  // expected-error @+1 {{'fsdp.batch_norm_train' op running_var must be [4] (x's channels), not 'tensor<3xf32>'}}
  %y, %a, %b, %e, %f = fsdp.batch_norm_train %x, %c, %c, %c, %d {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32}
      : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>)
      -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_train_output(%x: tensor<2x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.batch_norm_train' op output must be 'tensor<2x4xf32>', not 'tensor<2x4xbf16>'}}
  %y, %a, %b, %e, %f = fsdp.batch_norm_train %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f32, momentum = 0.9 : f32}
      : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_grad_types(%x: tensor<2x4xf32>, %g: tensor<2x4xbf16>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'fsdp.batch_norm_grad' op grad and grad_x must be 'tensor<2x4xf32>', not 'tensor<2x4xbf16>' and 'tensor<2x4xf32>'}}
  %dx, %ds, %db = fsdp.batch_norm_grad %g, %x, %c, %c, %c
      : (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @batch_norm_grad_scale(%x: tensor<2x4xf32>, %c: tensor<4xf32>, %d: tensor<4xbf16>) {
  // expected-error @+1 {{'fsdp.batch_norm_grad' op grad_scale and grad_bias must be 'tensor<4xf32>'}}
  %dx, %ds, %db = fsdp.batch_norm_grad %x, %x, %c, %c, %c
      : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<2x4xf32>, tensor<4xbf16>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_shapes(%p: tensor<64xf32>, %g: tensor<32xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.adamw' op failed to verify that all of {param, grad, exp_avg, exp_avg_sq, new_param, new_exp_avg, new_exp_avg_sq} have same type}}
  %p1, %m1, %v1 = "fsdp.adamw"(%p, %g, %p, %p, %lr, %lr) {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<32xf32>, tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @adamw_f16(%p: tensor<64xf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.adamw' op operand #0 must be ranked tensor of 32-bit float values}}
  %p1, %m1, %v1 = fsdp.adamw %p, %p, %p, %p, %lr, %lr {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0} : tensor<64xf16>
  return
}

// -----

func.func @adamw_betas(%p: tensor<64xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.adamw' op needs betas in [0, 1), not (1.000000e+00, 9.990000e-01)}}
  %p1, %m1, %v1 = fsdp.adamw %p, %p, %p, %p, %lr, %lr {beta1 = 1.0, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0} : tensor<64xf32>
  return
}

// -----

// NaN failed none of the `< 0` checks.
func.func @adamw_nan_eps(%p: tensor<64xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.adamw' op needs a finite non-negative eps and weight_decay}}
  %p1, %m1, %v1 = fsdp.adamw %p, %p, %p, %p, %lr, %lr {beta1 = 0.9, beta2 = 0.999, eps = 0x7FF8000000000000 : f64, weight_decay = 0.0} : tensor<64xf32>
  return
}

// -----

func.func @adamw_scalar_lr(%p: tensor<64xf32>) {
  // expected-error @+1 {{'fsdp.adamw' op operand #4 must be 0-d tensor of f32}}
  %p1, %m1, %v1 = "fsdp.adamw"(%p, %p, %p, %p, %p, %p) {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @sgd_momentum_without_buffer(%p: tensor<64xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.sgd' op with momentum 9.000000e-01 needs momentum_buffer operand and result}}
  %p1 = fsdp.sgd %p, %p, %lr, %lr {momentum = 0.9, dampening = 0.0, nesterov = false, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>) -> tensor<64xf32>
  return
}

// -----

func.func @sgd_buffer_shape(%p: tensor<64xf32>, %b: tensor<32xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.sgd' op momentum_buffer must be 'tensor<64xf32>' like the parameter}}
  %p1, %b1 = fsdp.sgd %p, %p, %lr, %lr momentum_buffer %b {momentum = 0.9, dampening = 0.0, nesterov = false, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>, tensor<32xf32>) -> (tensor<64xf32>, tensor<32xf32>)
  return
}

// -----

func.func @sgd_nesterov(%p: tensor<64xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'fsdp.sgd' op nesterov needs momentum}}
  %p1 = fsdp.sgd %p, %p, %lr, %lr {momentum = 0.0, dampening = 0.0, nesterov = true, weight_decay = 0.0}
      : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>) -> tensor<64xf32>
  return
}

// -----

func.func @cross_entropy_lse(%s: tensor<4x3xf32>, %l: tensor<4xi64>) {
  // expected-error @+1 {{'fsdp.softmax_cross_entropy' op lse must be 'tensor<4xf32>' (f32, of the labels' shape), not 'tensor<4xbf16>'}}
  %loss, %lse = fsdp.softmax_cross_entropy %s, %l
      : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xbf16>)
  return
}

// -----

func.func @cross_entropy_grad_lse(%s: tensor<4x3xf32>, %l: tensor<4xi64>, %g: tensor<f32>, %lse: tensor<4x1xf32>) {
  // expected-error @+1 {{'fsdp.softmax_cross_entropy_grad' op lse must be 'tensor<4xf32>' (f32, of the labels' shape), not 'tensor<4x1xf32>'}}
  %gs = fsdp.softmax_cross_entropy_grad %s, %l, %g lse(%lse)
      : (tensor<4x3xf32>, tensor<4xi64>, tensor<f32>, tensor<4x1xf32>) -> tensor<4x3xf32>
  return
}
