// RUN: fsdp-opt %s --split-input-file --verify-diagnostics --fsdp-lower-to-runtime

func.func @no_kernel(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'onnx.GatherND' op has no runtime kernel (docs/ops.md lists the operators and their kernels)}}
  %y = onnx.GatherND %x, %i : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// Axes given at run time that drop dimensions: the shapes cannot say which.
func.func @reduce_axes_at_run_time(%x: tensor<3x3xf32>, %axes: tensor<1xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.ReduceSum' op axes must be a constant to run on the runtime}}
  %y = onnx.ReduceSum %x, %axes {keepdims = 0 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @pool3d_indices(%x: tensor<1x1x4x4x4xf32>) -> tensor<1x1x2x2x2xi64> {
  // expected-error @+1 {{'onnx.MaxPool' op gives Indices, which 3-D pooling does not support}}
  %y, %i = onnx.MaxPool %x {kernel_shape = array<i64: 2, 2, 2>, strides = array<i64: 2, 2, 2>} : (tensor<1x1x4x4x4xf32>) -> (tensor<1x1x2x2x2xf32>, tensor<1x1x2x2x2xi64>)
  return %i : tensor<1x1x2x2x2xi64>
}

// -----

// An input the runtime cannot take: at the argument.
func.func @dynamic(
    // expected-error @+1 {{fsdp-lower-to-runtime: input 0 of @dynamic has type 'tensor<?x4xf32>'; the runtime needs static shapes of a supported element type}}
    %x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'onnx.Relu' op has a dynamic shape 'tensor<?x4xf32>'; import with --batch-size (and --dim) to make it static}}
  %y = onnx.Relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @training_bn(%x: tensor<2x4xf32>, %s: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'onnx.BatchNormalization' op in training mode cannot run as inference; run --fsdp-inference first}}
  %y, %m, %v = onnx.BatchNormalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dropout(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Dropout' op is not in training mode (or its mode is not a constant); run --fsdp-inference first}}
  %y, %mask = onnx.Dropout %x, %none, %none : (tensor<2x4xf32>, none, none) -> (tensor<2x4xf32>, none)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dropout_ratio(%x: tensor<2x4xf32>, %ratio: tensor<f32>) -> tensor<2x4xf32> {
  %train = onnx.Constant dense<true> : tensor<i1>
  // expected-error @+1 {{'onnx.Dropout' op needs a constant ratio}}
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, none)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dropout_zero(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %train = onnx.Constant dense<true> : tensor<i1>
  %ratio = onnx.Constant dense<0.0> : tensor<f32>
  // expected-error @+1 {{'onnx.Dropout' op ratio 0.000000 is not in (0, 1); a ratio of 0 is fsdp-inference's to remove}}
  %y, %mask = onnx.Dropout %x, %ratio, %train : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, none)
  return %y : tensor<2x4xf32>
}

// -----

func.func @dynamic_slice(%x: tensor<4xf32>, %start: tensor<1xi64>) -> tensor<2xf32> {
  %end = onnx.Constant dense<3> : tensor<1xi64>
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Slice' op starts must be a constant to run on the runtime}}
  %y = onnx.Slice %x, %start, %end, %none, %none : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>, none, none) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @stats(%x: tensor<2x4xf32>, %s: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  // expected-error @+1 {{'onnx.LayerNormalization' op gives one of Mean and InvStdDev; the runtime gives both or neither}}
  %y, %m, %i = onnx.LayerNormalization %x, %s, %s : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, none)
  return %y, %m : tensor<2x4xf32>, tensor<2x1xf32>
}

// -----

// expected-error @+1 {{input 0 of @complex has type 'tensor<2xcomplex<f32>>'}}
func.func @complex(%x: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  // expected-error @+1 {{'onnx.Neg' op has a value of type 'tensor<2xcomplex<f32>>', which the runtime does not support}}
  %y = onnx.Neg %x : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
  return %y : tensor<2xcomplex<f32>>
}

// -----

func.func @einsum_diagonal(%x: tensor<3x5x5xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "...ii ->...i" repeats the letter 'i' within one operand's term (a diagonal), which the runtime does not take}}
  %y = onnx.Einsum %x {equation = "...ii ->...i"} : (tensor<3x5x5xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

// Pad's pads become the kernel's parameters, so they must be known.
func.func @pads_at_run_time(%x: tensor<2x3xf32>, %pads: tensor<4xi64>) -> tensor<4x5xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Pad' op pads must be a constant to run on the runtime}}
  %y = onnx.Pad %x, %pads, %none : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

// A letter's sizes must agree (or be 1, which broadcasts).
func.func @einsum_sizes(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) -> tensor<3x6xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "ij,jk->ik" gives the letter 'j' sizes 4 and 5}}
  %y = onnx.Einsum %a, %b {equation = "ij,jk->ik"} : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<3x6xf32>
  return %y : tensor<3x6xf32>
}

// -----

func.func @einsum_ellipsis(%a: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "...ij->...i" has an ellipsis its operands' ranks do not fit}}
  %y = onnx.Einsum %a {equation = "...ij->...i"} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @einsum_rank(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "ijk->i" has the term "ijk" for an operand of rank 2}}
  %y = onnx.Einsum %a {equation = "ijk->i"} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @einsum_terms(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "ij->i" has 1 term for 2 operands}}
  %y = onnx.Einsum %a, %a {equation = "ij->i"} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @einsum_not_letter(%a: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "i1->i" has '1', which is not a letter}}
  %y = onnx.Einsum %a {equation = "i1->i"} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @einsum_result_type(%a: tensor<3x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "ij->ij" gives a result of another shape than its type's}}
  %y = onnx.Einsum %a {equation = "ij->ij"} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @einsum_output_letter(%a: tensor<3x4xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'onnx.Einsum' op equation "ij->ik" has the output letter 'k' twice or in no input}}
  %y = onnx.Einsum %a {equation = "ij->ik"} : (tensor<3x4xf32>) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

func.func @negative_pads(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %none = onnx.NoValue
  %pads = onnx.Constant dense<[0, -1, 0, 0]> : tensor<4xi64>
  // expected-error @+1 {{'onnx.Pad' op negative pads (cropping) are not supported}}
  %y = onnx.Pad %x, %pads, %none : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

func.func @reflect_too_far(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  %none = onnx.NoValue
  %pads = onnx.Constant dense<[0, 3, 0, 0]> : tensor<4xi64>
  // expected-error @+1 {{'onnx.Pad' op reflect pads of axis 1 must be smaller than its size 3}}
  %y = onnx.Pad %x, %pads, %none {mode = "reflect"} : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}

// -----

func.func @fill_at_run_time(%x: tensor<2x3xf32>, %v: tensor<f32>) -> tensor<2x4xf32> {
  %pads = onnx.Constant dense<[0, 1, 0, 0]> : tensor<4xi64>
  // expected-error @+1 {{'onnx.Pad' op constant_value must be a constant scalar to run on the runtime}}
  %y = onnx.Pad %x, %pads, %v : (tensor<2x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @resize_crop(%x: tensor<1x1x2x2xf32>, %roi: tensor<8xf32>) -> tensor<1x1x4x4xf32> {
  %none = onnx.NoValue
  %scales = onnx.Constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  // expected-error @+1 {{'onnx.Resize' op coordinate_transformation_mode tf_crop_and_resize is not supported}}
  %y = onnx.Resize %x, %roi, %scales, %none {coordinate_transformation_mode = "tf_crop_and_resize"} : (tensor<1x1x2x2xf32>, tensor<8xf32>, tensor<4xf32>, none) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

// Scales at run time are read by the kernel only as f32.
func.func @resize_scales_at_run_time(%x: tensor<1x1x2x2xf32>, %scales: tensor<4xf64>) -> tensor<1x1x4x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.Resize' op scales or sizes must be a constant, or f32 scales with one entry per axis, to run on the runtime}}
  %y = onnx.Resize %x, %none, %scales, %none : (tensor<1x1x2x2xf32>, none, tensor<4xf64>, none) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// -----

func.func @conv_transpose_too_far(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> tensor<1x2x9x7xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.ConvTranspose' op output dimension 0 (9) cannot come from the input's with begin pad 0}}
  %y = onnx.ConvTranspose %x, %w, %none {strides = array<i64: 2, 2>} : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>, none) -> tensor<1x2x9x7xf32>
  return %y : tensor<1x2x9x7xf32>
}

// -----

// What the recurrent kernels do not run is refused naming the attribute or
// input.
func.func @lstm_peepholes(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %p: tensor<1x12xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.LSTM' op input 'P' (peepholes) is not supported}}
  %y, %yh, %yc = onnx.LSTM %x, %w, %r, %none, %none, %none, %none, %p {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none, none, none, none, tensor<1x12xf32>) -> (none, tensor<1x2x4xf32>, none)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @gru_clip(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x12x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.GRU' op attribute 'clip' is not supported}}
  %y, %yh = onnx.GRU %x, %w, %r, %none, %none, %none {hidden_size = 4 : i64, clip = 3.0 : f32} : (tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>, none, none, none) -> (none, tensor<1x2x4xf32>)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @rnn_activations(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.RNN' op attribute 'activations' is not supported: only the default activations (Tanh) run}}
  %y, %yh = onnx.RNN %x, %w, %r, %none, %none, %none {hidden_size = 4 : i64, activations = ["Relu"]} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, none, none, none) -> (none, tensor<1x2x4xf32>)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @rnn_lengths(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %lens: tensor<2xi32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.RNN' op input 'sequence_lens' is supported only as a constant equal to the sequence length (5) for every batch entry}}
  %y, %yh = onnx.RNN %x, %w, %r, %none, %lens, %none {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, none, tensor<2xi32>, none) -> (none, tensor<1x2x4xf32>)
  return %yh : tensor<1x2x4xf32>
}

// -----

func.func @lstm_input_forget(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>) -> tensor<1x2x4xf32> {
  %none = onnx.NoValue
  // expected-error @+1 {{'onnx.LSTM' op attribute 'input_forget' is not supported}}
  %y, %yh, %yc = onnx.LSTM %x, %w, %r, %none, %none, %none, %none, %none {hidden_size = 4 : i64, input_forget = 1 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none, none, none, none, none) -> (none, tensor<1x2x4xf32>, none)
  return %yh : tensor<1x2x4xf32>
}

// -----

// A half would round the largest numbers up to high.
func.func @random_uniform_f16() -> tensor<4xf16> {
  // expected-error @+1 {{'onnx.RandomUniform' op gives 'f16'; the runtime draws float32 and float64 numbers}}
  %y = onnx.RandomUniform {dtype = 10 : i64, shape = array<i64: 4>} : () -> tensor<4xf16>
  return %y : tensor<4xf16>
}

// -----

func.func @random_uniform_empty_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.RandomUniformLike' op needs low < high}}
  %y = onnx.RandomUniformLike %x {high = 1.0 : f32, low = 1.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @bernoulli_integer_p(%p: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+1 {{'onnx.Bernoulli' op needs float32 or float64 probabilities}}
  %y = onnx.Bernoulli %p : (tensor<4xi64>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @pool_grad_window(%x: tensor<1x1x4x4xf32>, %g: tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32> {
  // expected-error @+1 {{'fsdp.pool_grad' op pools 1-D, 2-D or 3-D windows of [N, C, spatial...], not a kernel_shape of 1 over rank 4}}
  %d = fsdp.pool_grad %x, %g {mode = "max", kernel_shape = array<i64: 2>, strides = array<i64: 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x4x4xf32>
  return %d : tensor<1x1x4x4xf32>
}

// -----

// The kernels read X and grid as one float type.
func.func @grid_sample_mixed(%x: tensor<1x2x4x4xf64>, %grid: tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xf64> {
  // expected-error @+1 {{'onnx.GridSample' op needs X and grid of one float type to run on the runtime, not X of f64 and grid of f32}}
  %y = onnx.GridSample %x, %grid : (tensor<1x2x4x4xf64>, tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xf64>
  return %y : tensor<1x2x3x3xf64>
}

// -----

func.func @grid_sample_integers(%x: tensor<1x2x4x4xi64>, %grid: tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xi64> {
  // expected-error @+1 {{'onnx.GridSample' op needs X and grid of one float type to run on the runtime, not X of i64 and grid of f32}}
  %y = onnx.GridSample %x, %grid : (tensor<1x2x4x4xi64>, tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xi64>
  return %y : tensor<1x2x3x3xi64>
}

// -----

func.func @grid_sample_grad_rank(%x: tensor<1x2x4x4x4xf32>, %grid: tensor<1x3x3x3x3xf32>, %g: tensor<1x2x3x3x3xf32>) -> tensor<1x2x4x4x4xf32> {
  // expected-error @+1 {{'fsdp.grid_sample_grad' op samples [N, C, H, W] at a grid [N, Ho, Wo, 2], not ranks 5 and 5}}
  %gx, %gg = fsdp.grid_sample_grad %x, %grid, %g {mode = "bilinear", padding_mode = "zeros", align_corners = 0 : i64} : (tensor<1x2x4x4x4xf32>, tensor<1x3x3x3x3xf32>, tensor<1x2x3x3x3xf32>) -> (tensor<1x2x4x4x4xf32>, tensor<1x3x3x3x3xf32>)
  return %gx : tensor<1x2x4x4x4xf32>
}
