// buffer_dtype on BatchNorm's running statistics, and a full-precision
// BatchNorm unit (mixed_precision = false, what auto-wrap makes of
// full-precision-classes) that keeps its parameters, compute and buffers
// in fp32 while the root computes in bf16.
// The decomposed batch norm (fuse-batch-norm=false), then the fused one.
// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff=fuse-batch-norm=false --fsdp-flatten=world-size=2 --fsdp-optimizer --fsdp-shard --fsdp-mixed-precision | FileCheck %s
// RUN: fsdp-opt %s --split-input-file --fsdp-autodiff --fsdp-flatten=world-size=2 --fsdp-optimizer --fsdp-shard --fsdp-mixed-precision | FileCheck %s --check-prefix=FUSED
// RUN: fsdp-opt %s --split-input-file --fsdp-inference --fsdp-flatten=world-size=2 --fsdp-shard --fsdp-mixed-precision | FileCheck %s --check-prefix=INFER

// Training: the running statistics are read in bf16 (buffer_dtype), the
// batch statistics computed in bf16, and the updates returned as the
// buffers' stored fp32.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<4xf32> {fsdp.name = "update.bn.running_mean", fsdp.update_of = @bn.running_mean}
// CHECK: %[[M:.*]] = fsdp.get_buffer @bn.running_mean : tensor<4xf32>
// CHECK-NEXT: %[[MH:.*]] = onnx.Cast %[[M]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK: %[[V:.*]] = fsdp.get_buffer @bn.running_var : tensor<4xf32>
// CHECK-NEXT: onnx.Cast %[[V]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK: onnx.ReduceMean %{{.*}} {axes = array<i64: 0>, fsdp.unit = "bn"} : (tensor<2x4xbf16>) -> tensor<1x4xbf16>
// The update (running * 0.9 + batch * 0.1) in bf16, cast back to fp32.
// CHECK: onnx.Mul %[[MH]], %{{.*}} {fsdp.unit = "bn"} : (tensor<4xbf16>, tensor<bf16>) -> tensor<4xbf16>
// CHECK-NEXT: %[[NM:.*]] = onnx.Add {{.*}} : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT: %[[NM32:.*]] = onnx.Cast %[[NM]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: return {{.*}}, %[[NM32]], %{{.*}} : tensor<f32>, tensor<6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// Fused: x, scale, bias and the running statistics in bf16, the saved mean
// and inverse std f32 (as cuDNN keeps them), into the gradient too; the
// running statistics' new values cast back to the stored fp32.
// FUSED-LABEL: func.func @forward
// FUSED: %{{.*}}, %[[SM:.*]], %[[SI:.*]], %[[RM:.*]], %{{.*}} = fsdp.batch_norm_train {{.*}} : (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> (tensor<2x4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xbf16>)
// FUSED: onnx.Cast %[[RM]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// FUSED: fsdp.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[SM]], %[[SI]] : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>)
// The full-precision unit: everything fp32.
// FUSED-LABEL: func.func @forward
// FUSED: fsdp.batch_norm_train {{.*}} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@fc.w], config = <param_dtype = bf16, buffer_dtype = bf16>>,
    #fsdp.unit<"bn", params = [@bn.weight, @bn.bias], config = <param_dtype = bf16, buffer_dtype = bf16>>]} {
  fsdp.param @fc.w : tensor<3x4xf32>
  fsdp.param @bn.weight : tensor<4xf32>
  fsdp.param @bn.bias : tensor<4xf32>
  fsdp.buffer @bn.running_mean : tensor<4xf32>
  fsdp.buffer @bn.running_var : tensor<4xf32>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @fc.w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w {fsdp.unit = ""} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %s = fsdp.get_param @bn.weight : tensor<4xf32>
    %t = fsdp.get_param @bn.bias : tensor<4xf32>
    %m = fsdp.get_buffer @bn.running_mean : tensor<4xf32>
    %v = fsdp.get_buffer @bn.running_var : tensor<4xf32>
    %n, %rm, %rv = onnx.BatchNormalization %h, %s, %t, %m, %v {training_mode = 1 : i64, fsdp.unit = "bn"} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
    %l = onnx.ReduceSum %n, %none {keepdims = 0 : i64, fsdp.unit = ""} : (tensor<2x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The full-precision unit: its gather, parameters, statistics and buffers
// stay fp32; its input is cast to fp32 and its output back to the root's
// bf16; its flat gradient is packed and reduced in fp32.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = onnx.MatMul {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[H32:.*]] = onnx.Cast %[[H]] {to = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
// CHECK: fsdp.get_buffer @bn.running_mean : tensor<4xf32>
// CHECK-NEXT: fsdp.get_buffer @bn.running_var : tensor<4xf32>
// CHECK-NEXT: onnx.ReduceMean %[[H32]] {axes = array<i64: 0>, fsdp.unit = "bn"} : (tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK: %[[S:.*]] = fsdp.get_shard @"unit:bn" : tensor<4xf32>
// CHECK-NEXT: fsdp.all_gather %[[S]] on @fsdp_world axes [0] : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: fsdp.unflatten {{.*}} : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
// CHECK: %[[N:.*]] = onnx.Add {{.*}} {fsdp.unit = "bn"} : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: onnx.Cast %[[N]] {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// CHECK: fsdp.pack %{{.*}} into @"unit:bn" : tensor<4xf32>, tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: onnx.Identity
// CHECK-NEXT: fsdp.reduce_scatter %{{.*}} : tensor<8xf32> -> tensor<4xf32>
module attributes {fsdp.units = [
    #fsdp.unit<"", params = [@fc.w], config = <param_dtype = bf16, buffer_dtype = bf16>>,
    #fsdp.unit<"bn", params = [@bn.weight, @bn.bias], config = <mixed_precision = false>>]} {
  fsdp.param @fc.w : tensor<3x4xf32>
  fsdp.param @bn.weight : tensor<4xf32>
  fsdp.param @bn.bias : tensor<4xf32>
  fsdp.buffer @bn.running_mean : tensor<4xf32>
  fsdp.buffer @bn.running_var : tensor<4xf32>
  func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %w = fsdp.get_param @fc.w : tensor<3x4xf32>
    %h = onnx.MatMul %x, %w {fsdp.unit = ""} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %s = fsdp.get_param @bn.weight : tensor<4xf32>
    %t = fsdp.get_param @bn.bias : tensor<4xf32>
    %m = fsdp.get_buffer @bn.running_mean : tensor<4xf32>
    %v = fsdp.get_buffer @bn.running_var : tensor<4xf32>
    %n, %rm, %rv = onnx.BatchNormalization %h, %s, %t, %m, %v {training_mode = 1 : i64, fsdp.unit = "bn"} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
    %l = onnx.ReduceSum %n, %none {keepdims = 0 : i64, fsdp.unit = ""} : (tensor<2x4xf32>, none) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// Inference (BatchNorm with running statistics): bf16 buffers and
// parameters into a bf16 BatchNormalization; in the full-precision unit,
// fp32 ones.
// INFER-LABEL: func.func @forward
// INFER: fsdp.get_buffer @bn.running_mean : tensor<4xf32>
// INFER-NEXT: onnx.Cast %{{.*}} {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// INFER: onnx.BatchNormalization {{.*}} : (tensor<2x4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>, tensor<4xbf16>) -> (tensor<2x4xbf16>, none, none)
// INFER: %[[Y:.*]] = onnx.ReduceSum {{.*}} -> tensor<bf16>
// INFER-NEXT: onnx.Cast %[[Y]] {to = 1 : i64} : (tensor<bf16>) -> tensor<f32>
// INFER-LABEL: func.func @forward
// INFER: onnx.BatchNormalization {{.*}} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, none, none)
// INFER-NEXT: onnx.Cast %{{.*}} {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
