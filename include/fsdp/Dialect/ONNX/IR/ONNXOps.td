//===- ONNXOps.td - The onnx dialect: imported ONNX compute -*- tablegen -*-===//
//
// One op per supported ONNX operator (opsets 13-17), spelled and attributed as
// in the ONNX specification, so an imported graph reads like the model and
// error messages name the operators users know. Missing optional inputs and
// outputs are values of type `none` (from onnx.NoValue), so every op has a
// fixed operand list and one assembly format.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_ONNX_OPS
#define FSDP_ONNX_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let summary = "ONNX operators (opsets 13-17) as typed MLIR operations";
  let description = [{
    The compute of an imported ONNX graph. Each op is named after its ONNX
    operator (`onnx.MatMul`, `onnx.LayerNormalization`, ...) and carries the
    operator's attributes under their ONNX names; every op's location is the
    ONNX node's name (e.g. `"/blocks.0/attn/q/MatMul"`), which records the
    PyTorch module scope that produced it. Shapes are static: the importer
    specialises dynamic dimensions (the batch size) before it builds ops.
    Missing optional inputs and outputs have type `none`.

    ```mlir
    %w = fsdp.get_param @"fc.weight" : tensor<8x4xf32>
    %t = onnx.Transpose %w {perm = array<i64: 1, 0>}
        : (tensor<8x4xf32>) -> tensor<4x8xf32>
    %y = onnx.MatMul %x, %t : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    ```
  }];
  let cppNamespace = "::mlir::onnxir";
  let hasConstantMaterializer = 1;
}

def ONNX_Tensor : RankedTensorOf<[AnyType]>;
def ONNX_OptTensor : AnyTypeOf<[ONNX_Tensor, NoneType], "tensor or none">;

class ONNX_OpBase<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : ONNX_OpBase<mnemonic, !listconcat([Pure], traits)>;

// An op whose result is its first operand's bytes under another shape (no
// new values: it lowers to fsdp.view, its gradient is a reshape, a
// parameter read through it is still that parameter). Passes ask for
// ViewLikeOpInterface, never for a list of ops.
class ONNX_ViewOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat(traits,
                                    [DeclareOpInterfaceMethods<ViewLikeOpInterface>])> {
  let extraClassDefinition = [{
    ::mlir::Value $cppClass::getViewSource() {
      return (*this)->getOperand(0);
    }
  }];
}

def ONNX_NoValueOp : ONNX_Op<"NoValue", [ConstantLike]> {
  let summary = "the absent value of an omitted optional input";
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict";
  let hasFolder = 1;
}

def ONNX_ConstantOp : ONNX_Op<"Constant", [ConstantLike,
                                           AllTypesMatch<["value", "output"]>]> {
  let summary = "a constant tensor";
  let description = [{
    ONNX `Constant`. The importer turns every form (`value`, `value_float`,
    `value_ints`, ...) and every small non-parameter initializer into this op.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs ONNX_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class ONNX_UnaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat([SameOperandsAndResultShape], traits)> {
  let summary = "ONNX `" # mnemonic # "`, elementwise";
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
}

foreach name = ["Abs", "Cos", "Erf", "Exp", "Log", "Reciprocal", "Relu",
                "Sigmoid", "Sin", "Softplus", "Tanh"] in
  def ONNX_#name#Op : ONNX_UnaryOp<name, [SameOperandsAndResultElementType]>;

// Folded at import: shape computations round (Hugging Face's MobileViT
// pads its feature map to a multiple of the patch size with math.ceil).
foreach name = ["Ceil", "Floor"] in
  def ONNX_#name#Op : ONNX_UnaryOp<name, [SameOperandsAndResultElementType]> {
    let hasFolder = 1;
  }

// Folded at import: Hugging Face attention masks negate comparisons of
// shape-only values.
def ONNX_NotOp : ONNX_UnaryOp<"Not", [SameOperandsAndResultElementType]> {
  let hasFolder = 1;
}

// Folded at import: torch 2.x's exported scaled_dot_product_attention takes
// the square root of its float64 scale constant.
def ONNX_SqrtOp : ONNX_UnaryOp<"Sqrt", [SameOperandsAndResultElementType]> {
  let hasFolder = 1;
}

// Folded at import: shape computations negate axes (LayerNormalization's
// function body does).
def ONNX_NegOp : ONNX_UnaryOp<"Neg", [SameOperandsAndResultElementType]> {
  let hasFolder = 1;
}

def ONNX_IdentityOp : ONNX_ViewOp<"Identity", [SameOperandsAndResultShape,
                                               SameOperandsAndResultElementType]> {
  let summary = "ONNX `Identity`, elementwise";
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
}

def ONNX_IsNaNOp : ONNX_UnaryOp<"IsNaN">;

def ONNX_IsInfOp : ONNX_UnaryOp<"IsInf"> {
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedAttr<I64Attr, "1">:$detect_negative,
                   DefaultValuedAttr<I64Attr, "1">:$detect_positive);
}

def ONNX_LeakyReluOp : ONNX_UnaryOp<"LeakyRelu", [SameOperandsAndResultElementType]> {
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}

// Activations with ONNX's default constants (HardSwish is HardSigmoid with
// alpha 1/6, beta 0.5, times x; Sign and Softsign have none).
foreach name = ["HardSwish", "Sign", "Softsign", "Round", "Tan", "Sinh",
                "Cosh", "Asin", "Acos", "Atan", "Asinh", "Acosh", "Atanh"] in
  def ONNX_#name#Op : ONNX_UnaryOp<name, [SameOperandsAndResultElementType]>;

def ONNX_HardSigmoidOp : ONNX_UnaryOp<"HardSigmoid",
                                      [SameOperandsAndResultElementType]> {
  let description = [{ `max(0, min(1, alpha * x + beta))` }];
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.5">:$beta);
}

def ONNX_EluOp : ONNX_UnaryOp<"Elu", [SameOperandsAndResultElementType]> {
  let description = [{ `x < 0 ? alpha * (exp(x) - 1) : x` }];
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}

def ONNX_SeluOp : ONNX_UnaryOp<"Selu", [SameOperandsAndResultElementType]> {
  let description = [{ `gamma * (x <= 0 ? alpha * (exp(x) - 1) : x)` }];
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedAttr<F32Attr, "1.67326319217681884765625">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.05070102214813232421875">:$gamma);
}

def ONNX_CeluOp : ONNX_UnaryOp<"Celu", [SameOperandsAndResultElementType]> {
  let description = [{
    `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`; alpha must not be 0.
  }];
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
  let hasVerifier = 1;
}

def ONNX_ThresholdedReluOp : ONNX_UnaryOp<"ThresholdedRelu",
                                          [SameOperandsAndResultElementType]> {
  let description = [{ `x > alpha ? x : 0` }];
  let arguments = (ins ONNX_Tensor:$X, DefaultValuedAttr<F32Attr, "1.0">:$alpha);
}

def ONNX_ShrinkOp : ONNX_UnaryOp<"Shrink", [SameOperandsAndResultElementType]> {
  let description = [{
    `x < -lambd ? x + bias : x > lambd ? x - bias : 0`; lambd must not be
    negative.
  }];
  let arguments = (ins ONNX_Tensor:$input, DefaultValuedAttr<F32Attr, "0.0">:$bias,
                   DefaultValuedAttr<F32Attr, "0.5">:$lambd);
  let results = (outs ONNX_Tensor:$output);
  let hasVerifier = 1;
}

def ONNX_PReluOp : ONNX_Op<"PRelu", [AllTypesMatch<["X", "Y"]>]> {
  let summary = "ONNX `PRelu`: `x < 0 ? slope * x : x`";
  let description = [{
    `slope` broadcasts to `X` (one slope per channel is `[C, 1, 1]` for an
    `[N, C, H, W]` input, as torch's nn.PReLU exports it).
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$slope);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
}

def ONNX_CastOp : ONNX_UnaryOp<"Cast"> {
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$to);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

class ONNX_BinaryOp<string mnemonic, list<Trait> traits = []>
    : ONNX_Op<mnemonic, !listconcat([ResultsBroadcastableShape], traits)> {
  let summary = "ONNX `" # mnemonic # "`, elementwise with broadcasting";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B);
  let results = (outs ONNX_Tensor:$C);
  let hasFolder = 1;
  let hasVerifier = 1;
}

foreach name = ["Add", "Sub", "Mul", "Div", "Pow"] in
  def ONNX_#name#Op : ONNX_BinaryOp<name>;
foreach name = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                "And", "Or", "Xor"] in
  def ONNX_#name#Op : ONNX_BinaryOp<name>;

def ONNX_ModOp : ONNX_BinaryOp<"Mod"> {
  let description = [{
    The remainder of `A / B`: with `fmod = 0` (integers only) it takes the
    sign of the divisor, as Python's `%`; with `fmod = 1`, the sign of the
    dividend, as C's `fmod`. torch 2.x's exporter writes it in shape checks,
    which the importer folds.
  }];
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B,
                   DefaultValuedAttr<I64Attr, "0">:$fmod);
}

class ONNX_VariadicOp<string mnemonic>
    : ONNX_Op<mnemonic, [ResultsBroadcastableShape]> {
  let summary = "ONNX `" # mnemonic # "`, elementwise over its inputs";
  let arguments = (ins Variadic<ONNX_Tensor>:$data_0);
  let results = (outs ONNX_Tensor:$result);
}
foreach name = ["Sum", "Mean"] in
  def ONNX_#name#Op : ONNX_VariadicOp<name>;
// Folded at import (two small constants): mask code clamps positions.
foreach name = ["Max", "Min"] in
  def ONNX_#name#Op : ONNX_VariadicOp<name> { let hasFolder = 1; }

def ONNX_WhereOp : ONNX_Op<"Where", [ResultsBroadcastableShape]> {
  let summary = "ONNX `Where`: select by a boolean condition";
  let arguments = (ins ONNX_Tensor:$condition, ONNX_Tensor:$X, ONNX_Tensor:$Y);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_ClipOp : ONNX_Op<"Clip"> {
  let summary = "ONNX `Clip`";
  let arguments = (ins ONNX_Tensor:$input, ONNX_OptTensor:$min, ONNX_OptTensor:$max);
  let results = (outs ONNX_Tensor:$output);
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, activations with an axis
//===----------------------------------------------------------------------===//

def ONNX_MatMulOp : ONNX_Op<"MatMul"> {
  let summary = "ONNX `MatMul`: numpy-style (batched) matrix product";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
}

def ONNX_GemmOp : ONNX_Op<"Gemm"> {
  let summary = "ONNX `Gemm`: alpha * A' * B' + beta * C";
  let arguments = (ins ONNX_Tensor:$A, ONNX_Tensor:$B, ONNX_OptTensor:$C,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "1.0">:$beta,
                   DefaultValuedAttr<I64Attr, "0">:$transA,
                   DefaultValuedAttr<I64Attr, "0">:$transB);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
}

class ONNX_AxisOp<string mnemonic, string defaultAxis>
    : ONNX_Op<mnemonic, [SameOperandsAndResultShape]> {
  let summary = "ONNX `" # mnemonic # "` along one axis";
  let arguments = (ins ONNX_Tensor:$input,
                   DefaultValuedAttr<I64Attr, defaultAxis>:$axis);
  let results = (outs ONNX_Tensor:$output);
  let hasVerifier = 1;
}
def ONNX_SoftmaxOp : ONNX_AxisOp<"Softmax", "-1">;
def ONNX_LogSoftmaxOp : ONNX_AxisOp<"LogSoftmax", "-1">;
def ONNX_HardmaxOp : ONNX_AxisOp<"Hardmax", "-1">;

def ONNX_LayerNormalizationOp : ONNX_Op<"LayerNormalization"> {
  let summary = "ONNX `LayerNormalization` over the axes from `axis` on";
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$Scale, ONNX_OptTensor:$B,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                   DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs ONNX_Tensor:$Y, ONNX_OptTensor:$Mean,
                 ONNX_OptTensor:$InvStdDev);
  let hasVerifier = 1;
}

def ONNX_InstanceNormalizationOp : ONNX_Op<"InstanceNormalization"> {
  let summary = "ONNX `InstanceNormalization`, expanded at import";
  let description = [{
    Each (sample, channel) normalised over its spatial dims, then scaled and
    shifted per channel. No kernel runs it: the importer rewrites it into a
    layer norm over the spatial dims of a (N, C, D1*...*Dk) view, then a
    per-channel Mul and Add (left out when scale is all ones and B all
    zeros, as in torch's GroupNorm export), ops with kernels and gradient
    rules, so gradients reach the input, scale and B.
  }];
  let arguments = (ins ONNX_Tensor:$input, ONNX_Tensor:$scale, ONNX_Tensor:$B,
                   DefaultValuedAttr<F32Attr, "1e-05">:$epsilon);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_LRNOp : ONNX_Op<"LRN"> {
  let summary = "ONNX `LRN` (local response normalization), expanded at import";
  let description = [{
    Each element divided by `(bias + alpha / size * square_sum) ^ beta`, where
    `square_sum` sums the squares of the `size` channels around its own (torch's
    `nn.LocalResponseNorm`; AlexNet, GoogLeNet). No kernel runs it: the importer
    rewrites it into a Mul (the squares), a 1x1 Conv whose constant banded
    C x C weight holds `alpha / size` over each channel's window, then Add,
    Pow and Div, ops with kernels and gradient rules, so gradients reach the
    input.
  }];
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedAttr<F32Attr, "0.0001">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.75">:$beta,
                   DefaultValuedAttr<F32Attr, "1.0">:$bias,
                   I64Attr:$size);
  let results = (outs ONNX_Tensor:$Y);
}

def ONNX_MeanVarianceNormalizationOp : ONNX_Op<"MeanVarianceNormalization"> {
  let summary = "ONNX `MeanVarianceNormalization`, expanded at import";
  let description = [{
    `(X - mean(X)) / (sqrt(mean(X^2) - mean(X)^2) + 1e-9)`, the means over
    `axes` (default `[0, 2, 3]`). No kernel runs it: the importer rewrites it
    into ONNX's own function body (ReduceMean, Pow, Sub, Sqrt, Add, Div), ops
    with kernels and gradient rules, so gradients reach the input.
  }];
  let arguments = (ins ONNX_Tensor:$X, OptionalAttr<DenseI64ArrayAttr>:$axes);
  let results = (outs ONNX_Tensor:$Y);
}

def ONNX_BatchNormalizationOp : ONNX_Op<"BatchNormalization"> {
  let summary = "ONNX `BatchNormalization`, in inference or training mode";
  let description = [{
    With `training_mode = 1` the op normalizes with the batch statistics and
    also returns the updated running mean and variance (momentum as
    exported); PyTorch's TRAINING-mode export emits this form.
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$scale, ONNX_Tensor:$B,
                   ONNX_Tensor:$input_mean, ONNX_Tensor:$input_var,
                   DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                   DefaultValuedAttr<I64Attr, "0">:$training_mode);
  let results = (outs ONNX_Tensor:$Y, ONNX_OptTensor:$running_mean,
                 ONNX_OptTensor:$running_var);
}

def ONNX_DropoutOp : ONNX_OpBase<"Dropout", [MemoryEffects<[MemWrite]>]> {
  let summary = "ONNX `Dropout`";
  let description = [{
    Random when `training_mode` is true, so unlike the other ops it is not
    `Pure`: a write effect keeps two dropouts from being merged by CSE.
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_OptTensor:$ratio,
                   ONNX_OptTensor:$training_mode, OptionalAttr<I64Attr>:$seed);
  let results = (outs ONNX_Tensor:$output, ONNX_OptTensor:$mask);
}

// The random generators: like a training Dropout, each draws from the
// session's Philox stream under its `fsdp.random_op` id (docs/training.md,
// "Randomness"), and a write effect keeps CSE from merging two of them.
// The ONNX `seed` attribute is kept but does not select the numbers: the
// session's seed does.
class ONNX_RandomOp<string mnemonic> : ONNX_OpBase<mnemonic,
    [MemoryEffects<[MemWrite]>]>;

def ONNX_BernoulliOp : ONNX_RandomOp<"Bernoulli"> {
  let summary = "ONNX `Bernoulli`";
  let description = [{
    1 with probability `input` (elementwise), else 0, of type `dtype` or
    `input`'s.
  }];
  let arguments = (ins ONNX_Tensor:$input, OptionalAttr<I64Attr>:$dtype,
                   OptionalAttr<F32Attr>:$seed);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_RandomNormalOp : ONNX_RandomOp<"RandomNormal"> {
  let summary = "ONNX `RandomNormal`";
  let description = [{
    Normal numbers of mean `mean` and standard deviation `scale` of the
    static `shape`, of type `dtype` (float32 by default).
  }];
  let arguments = (ins DefaultValuedAttr<I64Attr, "1">:$dtype,
                   DefaultValuedAttr<F32Attr, "0.0">:$mean,
                   DefaultValuedAttr<F32Attr, "1.0">:$scale,
                   OptionalAttr<F32Attr>:$seed,
                   DenseI64ArrayAttr:$shape);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_RandomNormalLikeOp : ONNX_RandomOp<"RandomNormalLike"> {
  let summary = "ONNX `RandomNormalLike`";
  let description = [{
    Normal numbers of mean `mean` and standard deviation `scale` of
    `input`'s shape (its values are not read), of type `dtype` or
    `input`'s. torch's `randn_like` exports it.
  }];
  let arguments = (ins ONNX_Tensor:$input, OptionalAttr<I64Attr>:$dtype,
                   DefaultValuedAttr<F32Attr, "0.0">:$mean,
                   DefaultValuedAttr<F32Attr, "1.0">:$scale,
                   OptionalAttr<F32Attr>:$seed);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_RandomUniformOp : ONNX_RandomOp<"RandomUniform"> {
  let summary = "ONNX `RandomUniform`";
  let description = [{
    Numbers uniform in [`low`, `high`) of the static `shape`, of type
    `dtype` (float32 by default).
  }];
  let arguments = (ins DefaultValuedAttr<I64Attr, "1">:$dtype,
                   DefaultValuedAttr<F32Attr, "1.0">:$high,
                   DefaultValuedAttr<F32Attr, "0.0">:$low,
                   OptionalAttr<F32Attr>:$seed,
                   DenseI64ArrayAttr:$shape);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_RandomUniformLikeOp : ONNX_RandomOp<"RandomUniformLike"> {
  let summary = "ONNX `RandomUniformLike`";
  let description = [{
    Numbers uniform in [`low`, `high`) of `input`'s shape (its values are
    not read), of type `dtype` or `input`'s. torch's `rand_like` exports
    it; Hugging Face's stochastic depth (`drop_path`) uses it.
  }];
  let arguments = (ins ONNX_Tensor:$input, OptionalAttr<I64Attr>:$dtype,
                   DefaultValuedAttr<F32Attr, "1.0">:$high,
                   DefaultValuedAttr<F32Attr, "0.0">:$low,
                   OptionalAttr<F32Attr>:$seed);
  let results = (outs ONNX_Tensor:$output);
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

// A convolution's or pooling's window, with ONNX's defaults for what the
// node leaves out (strides and dilations 1, pads 0, one per spatial
// dimension): every pass reads the window through these accessors.
// `spatialRank` is C++ for the window's number of spatial dimensions.
class ONNX_WindowOp<string mnemonic, code spatialRank> : ONNX_Op<mnemonic> {
  let extraClassDeclaration = [{
    /// The number of spatial dimensions of the window.
    int64_t getSpatialRank();
    /// `strides`, or ONNX's default: 1 in every spatial dimension.
    ::llvm::SmallVector<int64_t> getStridesOrDefault();
    /// `pads` (begins, then ends), or ONNX's default: no padding.
    ::llvm::SmallVector<int64_t> getPadsOrDefault();
    /// `dilations`, or ONNX's default: 1 in every spatial dimension.
    ::llvm::SmallVector<int64_t> getDilationsOrDefault();
  }];
  let extraClassDefinition = [{
    int64_t $cppClass::getSpatialRank() { }] # spatialRank # [{ }
    ::llvm::SmallVector<int64_t> $cppClass::getStridesOrDefault() {
      return valuesOrDefault(getStrides(), getSpatialRank(), 1);
    }
    ::llvm::SmallVector<int64_t> $cppClass::getPadsOrDefault() {
      return valuesOrDefault(getPads(), 2 * getSpatialRank(), 0);
    }
    ::llvm::SmallVector<int64_t> $cppClass::getDilationsOrDefault() {
      return valuesOrDefault(getDilations(), getSpatialRank(), 1);
    }
  }];
}

def ONNX_ConvOp : ONNX_WindowOp<"Conv", [{
    return ::llvm::cast<::mlir::RankedTensorType>(getW().getType()).getRank() - 2;
  }]> {
  let summary = "ONNX `Conv`";
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, ONNX_OptTensor:$B,
                   DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
}

def ONNX_ConvTransposeOp : ONNX_WindowOp<"ConvTranspose", [{
    return ::llvm::cast<::mlir::RankedTensorType>(getW().getType()).getRank() - 2;
  }]> {
  let summary = "ONNX `ConvTranspose`";
  let description = [{
    The transposed convolution (torch's `nn.ConvTranspose2d`): `W` is
    `[C, M/group, k...]`; each input pixel scatters its kernel-weighted
    values over the output, the window attributes being those of the
    convolution it transposes. `pads` crop the output; `output_padding`
    adds rows at its end; `output_shape`, when given, sets the pads.
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, ONNX_OptTensor:$B,
                   DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DefaultValuedAttr<I64Attr, "1">:$group,
                   OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$output_padding,
                   OptionalAttr<DenseI64ArrayAttr>:$output_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs ONNX_Tensor:$Y);
}

class ONNX_PoolOp<string mnemonic>
    : ONNX_WindowOp<mnemonic, [{ return getKernelShape().size(); }]> {
  let summary = "ONNX `" # mnemonic # "`";
  let arguments = (ins ONNX_Tensor:$X,
                   DefaultValuedAttr<StrAttr, "\"NOTSET\"">:$auto_pad,
                   DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                   DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                   OptionalAttr<DenseI64ArrayAttr>:$dilations,
                   DenseI64ArrayAttr:$kernel_shape,
                   OptionalAttr<DenseI64ArrayAttr>:$pads,
                   DefaultValuedAttr<I64Attr, "0">:$storage_order,
                   OptionalAttr<DenseI64ArrayAttr>:$strides);
}
def ONNX_MaxPoolOp : ONNX_PoolOp<"MaxPool"> {
  let results = (outs ONNX_Tensor:$Y, ONNX_OptTensor:$Indices);
}
def ONNX_AveragePoolOp : ONNX_PoolOp<"AveragePool"> {
  let results = (outs ONNX_Tensor:$Y);
}
def ONNX_GlobalAveragePoolOp : ONNX_Op<"GlobalAveragePool"> {
  let summary = "ONNX `GlobalAveragePool`";
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
}
def ONNX_GlobalMaxPoolOp : ONNX_Op<"GlobalMaxPool"> {
  let summary = "ONNX `GlobalMaxPool`";
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
}

//===----------------------------------------------------------------------===//
// Reductions (opset 13-17: ReduceSum takes axes as an input, the others as
// an attribute)
//===----------------------------------------------------------------------===//

class ONNX_ReduceOp<string mnemonic> : ONNX_Op<mnemonic> {
  let summary = "ONNX `" # mnemonic # "`";
  let arguments = (ins ONNX_Tensor:$data, OptionalAttr<DenseI64ArrayAttr>:$axes,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs ONNX_Tensor:$reduced);
}
foreach name = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                "ReduceLogSumExp"] in
  def ONNX_#name#Op : ONNX_ReduceOp<name>;

def ONNX_ReduceSumOp : ONNX_Op<"ReduceSum"> {
  let summary = "ONNX `ReduceSum`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_OptTensor:$axes,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$noop_with_empty_axes);
  let results = (outs ONNX_Tensor:$reduced);
  let hasFolder = 1;
}

class ONNX_ArgOp<string mnemonic> : ONNX_Op<mnemonic> {
  let summary = "ONNX `" # mnemonic # "`";
  let arguments = (ins ONNX_Tensor:$data, DefaultValuedAttr<I64Attr, "0">:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$keepdims,
                   DefaultValuedAttr<I64Attr, "0">:$select_last_index);
  let results = (outs ONNX_Tensor:$reduced);
}
def ONNX_ArgMaxOp : ONNX_ArgOp<"ArgMax">;
def ONNX_ArgMinOp : ONNX_ArgOp<"ArgMin">;

//===----------------------------------------------------------------------===//
// Shapes and data movement
//===----------------------------------------------------------------------===//

def ONNX_ShapeOp : ONNX_Op<"Shape"> {
  let summary = "ONNX `Shape`: the input's dimensions as an int64 tensor";
  let arguments = (ins ONNX_Tensor:$data, OptionalAttr<I64Attr>:$start,
                   OptionalAttr<I64Attr>:$end);
  let results = (outs ONNX_Tensor:$shape);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_SizeOp : ONNX_Op<"Size"> {
  let summary = "ONNX `Size`: the input's element count";
  let arguments = (ins ONNX_Tensor:$data);
  let results = (outs ONNX_Tensor:$size);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_ReshapeOp : ONNX_ViewOp<"Reshape"> {
  let summary = "ONNX `Reshape`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$shape,
                   DefaultValuedAttr<I64Attr, "0">:$allowzero);
  let results = (outs ONNX_Tensor:$reshaped);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def ONNX_FlattenOp : ONNX_ViewOp<"Flatten"> {
  let summary = "ONNX `Flatten`: to 2-D at `axis`";
  let arguments = (ins ONNX_Tensor:$input, DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def ONNX_TransposeOp : ONNX_Op<"Transpose"> {
  let summary = "ONNX `Transpose`";
  let arguments = (ins ONNX_Tensor:$data, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs ONNX_Tensor:$transposed);
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// `perm`, or ONNX's default: the dimensions reversed.
    ::llvm::SmallVector<int64_t> getPermOrDefault();
  }];
}

def ONNX_SqueezeOp : ONNX_ViewOp<"Squeeze"> {
  let summary = "ONNX `Squeeze`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_OptTensor:$axes);
  let results = (outs ONNX_Tensor:$squeezed);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_UnsqueezeOp : ONNX_ViewOp<"Unsqueeze"> {
  let summary = "ONNX `Unsqueeze`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$axes);
  let results = (outs ONNX_Tensor:$expanded);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_ConcatOp : ONNX_Op<"Concat"> {
  let summary = "ONNX `Concat`";
  let arguments = (ins Variadic<ONNX_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs ONNX_Tensor:$concat_result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def ONNX_SplitOp : ONNX_Op<"Split"> {
  let summary = "ONNX `Split`";
  let arguments = (ins ONNX_Tensor:$input, ONNX_OptTensor:$split,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Variadic<ONNX_Tensor>:$outputs);
}

def ONNX_SliceOp : ONNX_Op<"Slice"> {
  let summary = "ONNX `Slice`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$starts, ONNX_Tensor:$ends,
                   ONNX_OptTensor:$axes, ONNX_OptTensor:$steps);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

def ONNX_PadOp : ONNX_Op<"Pad"> {
  let summary = "ONNX `Pad`";
  let description = [{
    `pads` holds each axis's begin counts, then each axis's end counts.
    `mode` is `constant` (filled with `constant_value`, 0 when absent),
    `reflect` (mirrored without repeating the edge, as torch's
    `F.pad(mode="reflect")`) or `edge` (the edge repeated, torch's
    `replicate`). A Pad whose pads are all zero folds to its input: torch
    exports one before `AvgPool2d(2, 2)`.

    ```mlir
    %p = onnx.Pad %x, %pads, %none {mode = "reflect"}
        : (tensor<1x3x4x4xf32>, tensor<8xi64>, none) -> tensor<1x3x6x6xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$pads,
                   ONNX_OptTensor:$constant_value,
                   DefaultValuedAttr<StrAttr, "\"constant\"">:$mode);
  let results = (outs ONNX_Tensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def ONNX_ResizeOp : ONNX_Op<"Resize"> {
  let summary = "ONNX `Resize`";
  let description = [{
    Resizes every axis by a scale: `scales` (one per axis) when given and
    not empty, else `sizes` divided by the input's sizes. Each output
    index maps to an input coordinate by `coordinate_transformation_mode`;
    `nearest` rounds it by `nearest_mode`, `linear` blends its two
    neighbours (multilinear over the axes). torch exports
    `F.interpolate(mode="nearest")` as asymmetric / floor and bilinear as
    `pytorch_half_pixel` (`align_corners` when asked).

    ```mlir
    %y = onnx.Resize %x, %none, %scales, %none {mode = "linear"}
        : (tensor<1x3x4x4xf32>, none, tensor<4xf32>, none) -> tensor<1x3x8x8xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_OptTensor:$roi,
                   ONNX_OptTensor:$scales, ONNX_OptTensor:$sizes,
                   DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
                   DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
                   DefaultValuedAttr<I64Attr, "0">:$exclude_outside,
                   DefaultValuedAttr<F32Attr, "0.0">:$extrapolation_value,
                   DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
                   DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// One scale per axis, from a constant `scales` or (when it is absent
    /// or empty) a constant `sizes`; nothing when neither is constant.
    std::optional<::llvm::SmallVector<double>> getConstantScales();
  }];
}

def ONNX_GridSampleOp : ONNX_Op<"GridSample"> {
  let summary = "ONNX `GridSample` (opset 16)";
  let description = [{
    Samples `X` [N, C, H, W] at the points of `grid` [N, Ho, Wo, 2] (x,
    then y, in [-1, 1]) into `Y` [N, C, Ho, Wo]: torch's `F.grid_sample`,
    which torch exports as this op. `align_corners` 1 maps -1 and 1 to the
    centres of the corner elements, 0 to their outer edges; `mode` is
    `bilinear`, `nearest` (half to even) or `bicubic` (Keys, a = -0.75);
    a point outside the input reads 0 (`padding_mode` `zeros`), the
    border's values (`border`) or the input mirrored at its edges
    (`reflection`). Opset 16 defines 4-D inputs only.

    ```mlir
    %y = onnx.GridSample %x, %grid {mode = "bilinear",
        padding_mode = "border", align_corners = 1 : i64}
        : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>) -> tensor<2x3x5x6xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$grid,
                   DefaultValuedAttr<I64Attr, "0">:$align_corners,
                   DefaultValuedAttr<StrAttr, "\"bilinear\"">:$mode,
                   DefaultValuedAttr<StrAttr, "\"zeros\"">:$padding_mode);
  let results = (outs ONNX_Tensor:$Y);
  let hasVerifier = 1;
}

def ONNX_OneHotOp : ONNX_Op<"OneHot"> {
  let summary = "ONNX `OneHot`, expanded at import";
  let description = [{
    `values[1]` where an index equals the position along `axis`, else
    `values[0]` (negative indices count from `depth`; out-of-range ones give
    `values[0]` everywhere). No kernel runs it: the importer rewrites it
    into ops that have kernels and gradient rules, so a gradient reaches
    `values`. `depth` must be a constant (torch's `F.one_hot` exports one):

    ```mlir
    %ids = onnx.Constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
    %u = onnx.Unsqueeze(%indices, [-1]) : tensor<8x1xi64>
    %hit = onnx.Or(onnx.Equal(%u, %ids), onnx.Equal(%u, %ids - 4))
    %y = onnx.Where(%hit, onnx.Gather(%values, 1), onnx.Gather(%values, 0))
    ```
  }];
  let arguments = (ins ONNX_Tensor:$indices, ONNX_Tensor:$depth,
                   ONNX_Tensor:$values,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_GatherOp : ONNX_Op<"Gather"> {
  let summary = "ONNX `Gather` (embedding lookups among others)";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs ONNX_Tensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def ONNX_TopKOp : ONNX_Op<"TopK"> {
  let summary = "ONNX `TopK`, expanded at import";
  let description = [{
    The `K` largest (or smallest) elements along `axis` and their indices,
    in order, the lower index first among equal values. No kernel runs it:
    the importer rewrites it into `K` rounds of ArgMax (ArgMin), a
    GatherElements of the input at the chosen index (the gradient's path)
    and a Where that takes the chosen element out of the next round, then a
    Concat of the rounds. `K` must be a constant (torch's `topk` exports
    one); the cost is `K` passes over the input.
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$K,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   DefaultValuedAttr<I64Attr, "1">:$largest,
                   DefaultValuedAttr<I64Attr, "1">:$sorted);
  let results = (outs ONNX_Tensor:$Values, ONNX_Tensor:$Indices);
}

def ONNX_GatherElementsOp : ONNX_Op<"GatherElements"> {
  let summary = "ONNX `GatherElements`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_ScatterElementsOp : ONNX_Op<"ScatterElements"> {
  let summary = "ONNX `ScatterElements`: `data` with `updates` written at "
                "`indices` along `axis`";
  let description = [{
    `reduction` is `none` (later writes of a repeated index win), `add` or
    `mul`. The gradient of `GatherElements` is this op adding into zeros.
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   ONNX_Tensor:$updates,
                   DefaultValuedAttr<I64Attr, "0">:$axis,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_ScatterNDOp : ONNX_Op<"ScatterND"> {
  let summary = "ONNX `ScatterND`: `data` with slices of `updates` written "
                "at the index tuples of `indices`";
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   ONNX_Tensor:$updates,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

def ONNX_GatherNDOp : ONNX_Op<"GatherND"> {
  let summary = "ONNX `GatherND`: gathers slices by index tuples";
  let description = [{
    Each row of the last axis of `indices` (of length k) picks a slice of
    `data` at those k leading coordinates after the first `batch_dims`
    axes; the result has shape `indices.shape[:-1] + data.shape[batch_dims +
    k:]`. torch 2.x's exporter writes it for advanced indexing, as in
    Hugging Face's attention-mask code, where both operands depend only on
    shapes: the importer folds it to a constant (up to 2^20 elements). With
    constant indices and no batch dimensions (`x[-2]`, as Falcon's
    query/key/value split) the importer rewrites it as a Gather along axis 0
    of `data` flattened over its first k axes; with indices known only at
    run time and k = 1 (a Mixture-of-Experts layer's `w[expert_ids]`), as a
    Gather of those indices. There is no kernel for it; a GatherND left
    after import is refused at compile.

    ```mlir
    %0 = onnx.GatherND %data, %indices {batch_dims = 0 : i64}
        : (tensor<2x16xi64>, tensor<2x16x2xi64>) -> tensor<2x16xi64>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$data, ONNX_Tensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

def ONNX_ExpandOp : ONNX_Op<"Expand"> {
  let summary = "ONNX `Expand`: broadcast to a shape";
  let arguments = (ins ONNX_Tensor:$input, ONNX_Tensor:$shape);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

def ONNX_NonZeroOp : ONNX_Op<"NonZero"> {
  let summary = "ONNX `NonZero`: the coordinates of the nonzero elements";
  let description = [{
    An int64 tensor of shape `[rank, n]`, n the number of nonzero elements
    of `X`: a size only the data says, so the importer folds it when `X` is
    a constant once the shapes are fixed (wav2vec2's masks: a boolean index
    over `torch.ones`) and refuses it otherwise, naming the node.
  }];
  let arguments = (ins ONNX_Tensor:$X);
  let results = (outs ONNX_Tensor:$Y);
}

def ONNX_TileOp : ONNX_Op<"Tile"> {
  let summary = "ONNX `Tile`";
  let arguments = (ins ONNX_Tensor:$input, ONNX_Tensor:$repeats);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
}

def ONNX_DepthToSpaceOp : ONNX_Op<"DepthToSpace"> {
  let summary = "ONNX `DepthToSpace`";
  let description = [{
    Moves blocks of `blocksize` x `blocksize` channels of NCHW `input` into
    the spatial dims: `[N, C, H, W]` -> `[N, C/b², H*b, W*b]`, the channels
    read depth-column-row (DCR, as TensorFlow) or column-row-depth (CRD, as
    torch's `pixel_shuffle`).
  }];
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$blocksize,
                   DefaultValuedAttr<StrAttr, "\"DCR\"">:$mode);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_SpaceToDepthOp : ONNX_Op<"SpaceToDepth"> {
  let summary = "ONNX `SpaceToDepth`";
  let description = [{
    DepthToSpace's DCR inverse: `[N, C, H, W]` -> `[N, C*b², H/b, W/b]`.
  }];
  let arguments = (ins ONNX_Tensor:$input, I64Attr:$blocksize);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_ConstantOfShapeOp : ONNX_Op<"ConstantOfShape"> {
  let summary = "ONNX `ConstantOfShape`";
  let arguments = (ins ONNX_Tensor:$input, OptionalAttr<ElementsAttr>:$value);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_EyeLikeOp : ONNX_Op<"EyeLike"> {
  let summary = "ONNX `EyeLike`, a constant at import";
  let description = [{
    A 2-D tensor of `input`'s shape holding ones on the `k`-th diagonal
    (above the main one for `k > 0`) and zeros elsewhere, of element type
    `dtype` (default: `input`'s). Only the input's static shape matters, so
    the importer replaces it by that constant:

    ```mlir
    %eye = onnx.Constant dense<[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]> : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$input, OptionalAttr<I64Attr>:$dtype,
                   DefaultValuedAttr<I64Attr, "0">:$k);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_DFTOp : ONNX_Op<"DFT"> {
  let summary = "ONNX `DFT` (opset 17), expanded at import";
  let description = [{
    The discrete Fourier transform of `input` (`[..., 1]` real or `[..., 2]`
    complex) along `axis`, of length `dft_length` (the signal cut or
    zero-padded to it; by default the axis's size); `onesided` keeps the
    first n/2 + 1 bins, `inverse` transforms back (scaled by 1/n). The
    result is `[..., 2]` complex. No kernel runs it: the importer moves the
    axis last and multiplies by constant cosine and sine matrices (MatMul),
    ops with kernels and gradient rules, so torch.fft's transforms train.
    `dft_length` must be a constant:

    ```mlir
    %y = onnx.DFT(%x, %none) {axis = 1 : i64, onesided = 0 : i64}
        : (tensor<2x8x1xf32>, none) -> tensor<2x8x2xf32>
    ```
  }];
  let arguments = (ins ONNX_Tensor:$input, ONNX_OptTensor:$dft_length,
                   DefaultValuedAttr<I64Attr, "1">:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$inverse,
                   DefaultValuedAttr<I64Attr, "0">:$onesided);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_RangeOp : ONNX_Op<"Range"> {
  let summary = "ONNX `Range`";
  let arguments = (ins ONNX_Tensor:$start, ONNX_Tensor:$limit, ONNX_Tensor:$delta);
  let results = (outs ONNX_Tensor:$output);
  let hasFolder = 1;
  let hasVerifier = 1;
}

def ONNX_TriluOp : ONNX_Op<"Trilu"> {
  let summary = "ONNX `Trilu`";
  let arguments = (ins ONNX_Tensor:$input, ONNX_OptTensor:$k,
                   DefaultValuedAttr<I64Attr, "1">:$upper);
  let results = (outs ONNX_Tensor:$output);
}

def ONNX_CumSumOp : ONNX_Op<"CumSum"> {
  let summary = "ONNX `CumSum`";
  let arguments = (ins ONNX_Tensor:$x, ONNX_Tensor:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$exclusive,
                   DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs ONNX_Tensor:$y);
  // Folded at import: Hugging Face numbers packed sequences by a CumSum
  // over shape-only values.
  let hasFolder = 1;
}

def ONNX_EinsumOp : ONNX_Op<"Einsum"> {
  let summary = "ONNX `Einsum`";
  let arguments = (ins Variadic<ONNX_Tensor>:$Inputs, StrAttr:$equation);
  let results = (outs ONNX_Tensor:$Output);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def ONNX_SoftmaxCrossEntropyLossOp : ONNX_Op<"SoftmaxCrossEntropyLoss"> {
  let summary = "ONNX `SoftmaxCrossEntropyLoss` (torch's cross_entropy)";
  let arguments = (ins ONNX_Tensor:$scores, ONNX_Tensor:$labels,
                   ONNX_OptTensor:$weights, OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction);
  let results = (outs ONNX_Tensor:$output, ONNX_OptTensor:$log_prob);
}

def ONNX_NegativeLogLikelihoodLossOp : ONNX_Op<"NegativeLogLikelihoodLoss"> {
  let summary = "ONNX `NegativeLogLikelihoodLoss` (torch's nll_loss)";
  let arguments = (ins ONNX_Tensor:$input, ONNX_Tensor:$target,
                   ONNX_OptTensor:$weight, OptionalAttr<I64Attr>:$ignore_index,
                   DefaultValuedAttr<StrAttr, "\"mean\"">:$reduction);
  let results = (outs ONNX_Tensor:$loss);
}

// The recurrent layers: the whole sequence, every direction, in one op.
// `X` is [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1);
// W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden], B
// [dirs, 2*gates*hidden] (W's biases, then R's). Y is [seq, dirs, batch,
// hidden] (layout 0) or [batch, seq, dirs, hidden]; Y_h (and LSTM's Y_c)
// [dirs, batch, hidden] or [batch, dirs, hidden].
class ONNX_RecurrentOp<string mnemonic, string gates>
    : ONNX_Op<mnemonic> {
  let summary = "ONNX `" # mnemonic # "` over a whole sequence";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// How many gates each direction's W and R stack: }] # gates # [{.
    int64_t getGateCount() { return }] # gates # [{; }
    /// 2 for "bidirectional", else 1.
    int64_t getDirectionCount() {
      return getDirection() == "bidirectional" ? 2 : 1;
    }
  }];
}

def ONNX_GRUOp : ONNX_RecurrentOp<"GRU", "3"> {
  let description = [{
    Gates z, r, h (update, reset, hidden) in that order in W, R and B;
    `linear_before_reset = 1` (torch's `nn.GRU`) applies the reset gate
    after R's product and bias.

    ```mlir
    %y, %yh = onnx.GRU %x, %w, %r, %b, %none, %h0 {hidden_size = 4 : i64,
        linear_before_reset = 1 : i64}
        : (tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x12x4xf32>,
           tensor<1x24xf32>, none, tensor<1x2x4xf32>)
        -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, ONNX_Tensor:$R,
                   ONNX_OptTensor:$B, ONNX_OptTensor:$sequence_lens,
                   ONNX_OptTensor:$initial_h,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
                   OptionalAttr<StrArrayAttr>:$activations,
                   OptionalAttr<F32Attr>:$clip,
                   DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                   I64Attr:$hidden_size,
                   DefaultValuedAttr<I64Attr, "0">:$layout,
                   DefaultValuedAttr<I64Attr, "0">:$linear_before_reset);
  let results = (outs ONNX_OptTensor:$Y, ONNX_OptTensor:$Y_h);
}

def ONNX_LSTMOp : ONNX_RecurrentOp<"LSTM", "4"> {
  let description = [{
    Gates i, o, f, c (input, output, forget, cell) in that order in W, R
    and B (torch's `nn.LSTM` stacks i, f, g, o: its export reorders them).
    `P` (peepholes) is [dirs, 3*hidden].

    ```mlir
    %y, %yh, %yc = onnx.LSTM %x, %w, %r, %none, %none, %none, %none, %none
        {hidden_size = 4 : i64}
        : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, none,
           none, none, none, none)
        -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, ONNX_Tensor:$R,
                   ONNX_OptTensor:$B, ONNX_OptTensor:$sequence_lens,
                   ONNX_OptTensor:$initial_h, ONNX_OptTensor:$initial_c,
                   ONNX_OptTensor:$P,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
                   OptionalAttr<StrArrayAttr>:$activations,
                   OptionalAttr<F32Attr>:$clip,
                   DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                   I64Attr:$hidden_size,
                   DefaultValuedAttr<I64Attr, "0">:$input_forget,
                   DefaultValuedAttr<I64Attr, "0">:$layout);
  let results = (outs ONNX_OptTensor:$Y, ONNX_OptTensor:$Y_h,
                 ONNX_OptTensor:$Y_c);
}

def ONNX_RNNOp : ONNX_RecurrentOp<"RNN", "1"> {
  let description = [{
    The plain recurrence H = tanh(X W^T + H R^T + Wb + Rb).

    ```mlir
    %y, %yh = onnx.RNN %x, %w, %r, %none, %none, %none {hidden_size = 4 : i64}
        : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, none,
           none, none) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let arguments = (ins ONNX_Tensor:$X, ONNX_Tensor:$W, ONNX_Tensor:$R,
                   ONNX_OptTensor:$B, ONNX_OptTensor:$sequence_lens,
                   ONNX_OptTensor:$initial_h,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
                   OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
                   OptionalAttr<StrArrayAttr>:$activations,
                   OptionalAttr<F32Attr>:$clip,
                   DefaultValuedAttr<StrAttr, "\"forward\"">:$direction,
                   I64Attr:$hidden_size,
                   DefaultValuedAttr<I64Attr, "0">:$layout);
  let results = (outs ONNX_OptTensor:$Y, ONNX_OptTensor:$Y_h);
}

#endif // FSDP_ONNX_OPS
