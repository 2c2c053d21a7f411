// The onnx ops' verifiers, with their messages.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @f(%a: tensor<2x4xf32>, %b: tensor<5x8xf32>) {
  // expected-error @+1 {{'onnx.MatMul' op contracting dimensions differ: 4 and 5}}
  %0 = onnx.MatMul %a, %b : (tensor<2x4xf32>, tensor<5x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{'onnx.MatMul' op result type 'tensor<2x9xf32>' does not match the inferred shape [2, 8]}}
  %0 = onnx.MatMul %a, %b : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @f(%a: tensor<3x2x4xf32>, %b: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'onnx.MatMul' op batch dimensions do not broadcast}}
  %0 = onnx.MatMul %a, %b : (tensor<3x2x4xf32>, tensor<2x4x8xf32>) -> tensor<3x2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x8xbf16>) {
  // expected-error @+1 {{'onnx.MatMul' op operand element types differ: 'f32' and 'bf16'}}
  %0 = onnx.MatMul %a, %b : (tensor<2x4xf32>, tensor<4x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'onnx.Gemm' op contracting dimensions differ: 4 and 8}}
  %0 = onnx.Gemm %a, %b, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'onnx.Softmax' op axis 2 is out of range for rank 2}}
  %0 = onnx.Softmax %a {axis = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %s: tensor<4xf32>, %n: none) {
  // expected-error @+1 {{'onnx.LayerNormalization' op Scale 'tensor<4xf32>' does not match the normalized dimensions of 'tensor<2x8xf32>'}}
  %0:3 = onnx.LayerNormalization %x, %s, %n : (tensor<2x8xf32>, tensor<4xf32>, none) -> (tensor<2x8xf32>, none, none)
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>, %n: none) {
  // expected-error @+1 {{'onnx.Conv' op X has 3 channels but W expects 2 x group 1}}
  %0 = onnx.Conv %x, %w, %n : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>, none) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %s: tensor<2xi64>) {
  // expected-error @+1 {{'onnx.Reshape' op reshapes 16 elements into 'tensor<3x5xf32>' (15 elements)}}
  %0 = onnx.Reshape %x, %s : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<3x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'onnx.Transpose' op perm is not a permutation of [0, 2)}}
  %0 = onnx.Transpose %x {perm = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'onnx.Transpose' op result type 'tensor<2x8xf32>' does not match the inferred shape [8, 2]}}
  %0 = onnx.Transpose %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %y: tensor<3x4xf32>) {
  // expected-error @+1 {{'onnx.Concat' op inputs differ in dimension 1: 'tensor<2x8xf32>' and 'tensor<3x4xf32>'}}
  %0 = onnx.Concat %x, %y {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x4xf32>) -> tensor<5x8xf32>
  return
}

// -----

func.func @f(%x: tensor<8x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'onnx.Gather' op result type 'tensor<3xf32>' does not match the inferred shape [3, 4]}}
  %0 = onnx.Gather %x, %i : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'onnx.Flatten' op axis 3 is out of range for rank 2}}
  %0 = onnx.Flatten %x {axis = 3 : i64} : (tensor<2x8xf32>) -> tensor<16x1xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.Add' op operands don't have broadcast-compatible shapes}}
  %0 = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<3xi64>) {
  // expected-error @+1 {{'onnx.Add' op the result has element type 'i8' but must have 'i64'}}
  %0 = onnx.Add %a, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi8>
  return
}

// -----

func.func @f(%a: tensor<3xi64>) {
  // expected-error @+1 {{'onnx.Less' op the result has element type 'i32' but must have 'i1'}}
  %0 = onnx.Less %a, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi32>
  return
}

// -----

func.func @f(%c: tensor<3xi64>, %x: tensor<3xf32>) {
  // expected-error @+1 {{'onnx.Where' op the condition has element type 'i64' but must have 'i1'}}
  %0 = onnx.Where %c, %x, %x : (tensor<3xi64>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'onnx.Shape' op the result has element type 'i32' but must have 'i64'}}
  %0 = onnx.Shape %x : (tensor<2x3xf32>) -> tensor<2xi32>
  return
}

// -----

func.func @f(%x: tensor<2xi64>, %axes: tensor<1xi64>) {
  // expected-error @+1 {{'onnx.Unsqueeze' op turns 2 elements into 3}}
  %0 = onnx.Unsqueeze %x, %axes : (tensor<2xi64>, tensor<1xi64>) -> tensor<3x1xi64>
  return
}

// -----

func.func @f(%s: tensor<2xi64>) {
  // expected-error @+1 {{'onnx.ConstantOfShape' op the result has element type 'i64' but must have 'f32'}}
  %0 = onnx.ConstantOfShape %s {value = dense<1.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x2xi64>
  return
}

// -----

func.func @f(%x: tensor<4xf32>, %s: tensor<1xi64>) {
  // expected-error @+1 {{'onnx.Reshape' op result element type 'f16' differs from the input's 'f32'}}
  %0 = onnx.Reshape %x, %s : (tensor<4xf32>, tensor<1xi64>) -> tensor<4xf16>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'onnx.Flatten' op axis -3 is out of range for rank 2}}
  %0 = onnx.Flatten %x {axis = -3 : i64} : (tensor<2x3xf32>) -> tensor<1x6xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.Celu' op alpha must not be 0 (Celu divides by it)}}
  %0 = onnx.Celu %x {alpha = 0.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'onnx.Shrink' op lambd must not be negative, not -1}}
  %0 = onnx.Shrink %x {lambd = -1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x4xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{'onnx.PRelu' op slope 'tensor<4x1xf32>' does not broadcast to X 'tensor<2x3x4xf32>'}}
  %0 = onnx.PRelu %x, %s : (tensor<2x3x4xf32>, tensor<4x1xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %pads: tensor<4xi64>) {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Pad' op mode must be constant, reflect or edge, not 'wrap'}}
  %0 = onnx.Pad %x, %pads, %none {mode = "wrap"} : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %pads: tensor<6xi64>) {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Pad' op pads must be a 1-D tensor of 4 values (a begin and an end per axis), not 'tensor<6xi64>'}}
  %0 = onnx.Pad %x, %pads, %none : (tensor<2x3xf32>, tensor<6xi64>, none) -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %pads: tensor<4xi64>, %v: tensor<i64>) {
  // expected-error @+1 {{'onnx.Pad' op constant_value has element type 'i64' but must have 'f32'}}
  %0 = onnx.Pad %x, %pads, %v : (tensor<2x3xf32>, tensor<4xi64>, tensor<i64>) -> tensor<4x5xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %s: tensor<4xf32>) {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Resize' op mode must be nearest, linear or cubic, not 'area'}}
  %0 = onnx.Resize %x, %none, %s, %none {mode = "area"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %s: tensor<4xf32>) {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Resize' op nearest_mode 'round' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil}}
  %0 = onnx.Resize %x, %none, %s, %none {nearest_mode = "round"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %s: tensor<4xf32>) {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Resize' op coordinate_transformation_mode 'corners' is not an ONNX one}}
  %0 = onnx.Resize %x, %none, %s, %none {coordinate_transformation_mode = "corners"} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return
}

// -----

// GridSample: opset 16's 4-D inputs, modes and padding modes only (opset
// 20's 5-D sampling and its "linear" and "cubic" names are refused).
func.func @f(%x: tensor<1x1x2x2x2xf32>, %g: tensor<1x3x3x3x3xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op X must be 4-D [N, C, H, W] (opset 16 defines GridSample on 4-D inputs only), not 'tensor<1x1x2x2x2xf32>'}}
  %0 = onnx.GridSample %x, %g : (tensor<1x1x2x2x2xf32>, tensor<1x3x3x3x3xf32>) -> tensor<1x1x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x2xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op mode must be bilinear, nearest or bicubic (opset 16's names), not 'linear'}}
  %0 = onnx.GridSample %x, %g {mode = "linear"} : (tensor<1x1x2x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x2xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op padding_mode must be zeros, border or reflection, not 'mirror'}}
  %0 = onnx.GridSample %x, %g {padding_mode = "mirror"} : (tensor<1x1x2x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x2xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op align_corners must be 0 or 1, not 2}}
  %0 = onnx.GridSample %x, %g {align_corners = 2 : i64} : (tensor<1x1x2x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x1x2x2xf32>, %g: tensor<1x3x3x2xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op grid must be [N, Ho, Wo, 2] with X's N, not 'tensor<1x3x3x2xf32>'}}
  %0 = onnx.GridSample %x, %g : (tensor<2x1x2x2xf32>, tensor<1x3x3x2xf32>) -> tensor<2x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x3xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op grid must be [N, Ho, Wo, 2] with X's N, not 'tensor<1x3x3x3xf32>'}}
  %0 = onnx.GridSample %x, %g : (tensor<1x1x2x2xf32>, tensor<1x3x3x3xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x2xi64>) {
  // expected-error @+1 {{'onnx.GridSample' op grid must hold floats, not 'i64'}}
  %0 = onnx.GridSample %x, %g : (tensor<1x1x2x2xf32>, tensor<1x3x3x2xi64>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<1x1x2x2xf32>, %g: tensor<1x3x3x2xf32>) {
  // expected-error @+1 {{'onnx.GridSample' op result type 'tensor<1x1x3x4xf32>' does not match the inferred shape [1, 1, 3, 3]}}
  %0 = onnx.GridSample %x, %g : (tensor<1x1x2x2xf32>, tensor<1x3x3x2xf32>) -> tensor<1x1x3x4xf32>
  return
}

// -----

func.func @lstm_direction(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.LSTM' op direction must be forward, reverse or bidirectional, not "sideways"}}
  %y, %yh, %yc = onnx.LSTM %x, %w, %r, %none, %none, %none, %none, %none {hidden_size = 4 : i64, direction = "sideways"} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none, none, none, none, none) -> (none, tensor<1x2x4xf32>, none)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @gru_weights(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x12x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.GRU' op W has type 'tensor<1x16x3xf32>'; expected shape 1x12x3}}
  %y, %yh = onnx.GRU %x, %w, %r, %none, %none, %none {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x12x4xf32>, none, none, none) -> (none, tensor<1x2x4xf32>)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @rnn_state(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %h0: tensor<2x1x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.RNN' op initial_h has type 'tensor<2x1x4xf32>'; expected shape 1x2x4}}
  %y, %yh = onnx.RNN %x, %w, %r, %none, %none, %h0 {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, none, none, tensor<2x1x4xf32>) -> (none, tensor<1x2x4xf32>)
  return %yh : tensor<1x2x4xf32>
}
