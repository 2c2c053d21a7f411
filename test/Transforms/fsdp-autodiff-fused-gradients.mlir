// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff=fuse-gradients=false | FileCheck %s --check-prefix=OFF

// GELU's tanh form and SiLU become one op each before the sweep, and
// their gradients one fsdp.activation_grad from the forward's input.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = onnx.Mul %arg0, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[G:.*]] = fsdp.gelu %[[H]] {approximate = "tanh", fsdp.module = "mlp"} : tensor<4x8xf32>
// CHECK-NOT: onnx.Tanh
// CHECK: %[[S:.*]] = fsdp.silu %[[G]] : tensor<4x8xf32>
// CHECK: %[[DS:.*]] = fsdp.activation_grad %{{.*}}, %[[G]] {activation = "silu"} : tensor<4x8xf32>
// CHECK: fsdp.activation_grad %[[DS]], %[[H]] {activation = "gelu_tanh"} : tensor<4x8xf32>
// CHECK-NOT: onnx.Tanh
// CHECK: return
// Off: the chains stay, differentiated op by op.
// OFF-LABEL: func.func @forward
// OFF-NOT: fsdp.gelu
// OFF-NOT: fsdp.activation_grad
// OFF: onnx.Tanh
// OFF: onnx.Sigmoid
// OFF: return
module {
  fsdp.param @w : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<f32> {
    %w = fsdp.get_param @w : tensor<8xf32>
    %h = onnx.Mul %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %half = onnx.Constant dense<5.000000e-01> : tensor<f32>
    %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
    %c = onnx.Constant dense<4.471500e-02> : tensor<f32>
    %k = onnx.Constant dense<0.797884583> : tensor<f32>
    %three = onnx.Constant dense<3.000000e+00> : tensor<f32>
    %0 = onnx.Pow %h, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %1 = onnx.Mul %c, %0 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = onnx.Add %h, %1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = onnx.Mul %k, %2 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = onnx.Tanh %3 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = onnx.Add %one, %4 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %6 = onnx.Mul %h, %5 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %g = onnx.Mul %half, %6 {fsdp.module = "mlp"} : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %sig = onnx.Sigmoid %g : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = onnx.Mul %g, %sig : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = onnx.ReduceMean %s {keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}

// -----

// RMSNorm with a weight: fsdp.rms_norm, and one fsdp.norm_grad (kind rms)
// giving x and the weight theirs; a LayerNorm over two dims, one
// fsdp.norm_grad (kind layer) giving its input, scale and bias theirs.
// CHECK-LABEL: func.func @forward
// CHECK: %[[N:.*]] = fsdp.rms_norm %arg0, %{{.*}} {epsilon = 9.99999997E-7 : f32}
// CHECK: onnx.LayerNormalization %[[N]]
// CHECK: %[[DN:.*]], %[[DG:.*]], %[[DB:.*]] = fsdp.norm_grad %{{.*}}, %[[N]], %{{.*}} {axis = 1 : i64, epsilon = 9.99999974E-6 : f32, kind = "layer"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>) -> (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: %{{.*}}, %[[DW:.*]], %{{.*}} = fsdp.norm_grad %[[DN]], %arg0, %{{.*}} {axis = 2 : i64, epsilon = 9.99999997E-7 : f32, kind = "rms"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: return %{{.*}}, %[[DW]], %[[DG]], %[[DB]] :
// OFF-LABEL: func.func @forward
// OFF-NOT: fsdp.rms_norm
// OFF-NOT: fsdp.norm_grad
// OFF: onnx.LayerNormalization
// OFF: onnx.ReduceMean %{{.*}} {axes = array<i64: 1, 2>}
// OFF: return
module {
  fsdp.param @w : tensor<8xf32> at <"m.onnx", offset = 0, length = 32>
  fsdp.param @g : tensor<4x8xf32> at <"m.onnx", offset = 32, length = 128>
  fsdp.param @b : tensor<4x8xf32> at <"m.onnx", offset = 160, length = 128>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @w : tensor<8xf32>
    %g = fsdp.get_param @g : tensor<4x8xf32>
    %b = fsdp.get_param @b : tensor<4x8xf32>
    %two = onnx.Constant dense<2.000000e+00> : tensor<f32>
    %eps = onnx.Constant dense<9.99999997E-7> : tensor<f32>
    %one = onnx.Constant dense<1.000000e+00> : tensor<f32>
    %0 = onnx.Pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
    %1 = onnx.ReduceMean %0 {axes = array<i64: -1>} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
    %2 = onnx.Add %1, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
    %3 = onnx.Sqrt %2 : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
    %4 = onnx.Div %one, %3 : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
    %5 = onnx.Mul %x, %4 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
    %6 = onnx.Mul %5, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %n, %m, %i = onnx.LayerNormalization %6, %g, %b {axis = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<2x4x8xf32>, none, none)
    %r = onnx.ReduceMean %n {keepdims = 0 : i64} : (tensor<2x4x8xf32>) -> tensor<f32>
    return %r : tensor<f32>
  }
}
