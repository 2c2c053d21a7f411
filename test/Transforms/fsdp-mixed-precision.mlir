// PyTorch FSDP's MixedPrecision on the 3-unit model (root head.w, a, b; all
// FULL_SHARD over 4 ranks), its settings from fsdp-auto-wrap's options.
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin param-dtype=bf16 reduce-dtype=f32" --fsdp-autodiff --fsdp-flatten=world-size=4 "--fsdp-optimizer=optimizer=adamw fused=false" --fsdp-shard --fsdp-mixed-precision | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin param-dtype=bf16" --fsdp-autodiff --fsdp-flatten=world-size=4 "--fsdp-optimizer=optimizer=adamw fused=false" --fsdp-shard --fsdp-mixed-precision | FileCheck %s --check-prefix=RED
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin param-dtype=bf16" --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-mixed-precision -cse -canonicalize | FileCheck %s --check-prefix=CSE
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin param-dtype=bf16" --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-mixed-precision | FileCheck %s --check-prefix=INFER
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin param-dtype=bf16 full-precision-classes=Lin" --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-mixed-precision 2>/dev/null | FileCheck %s --check-prefix=FULL
// Without a dtype anywhere the pass changes nothing.
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Lin strategy=SHARD_GRAD_OP" --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-optimizer --fsdp-shard -o %t.shard.mlir
// RUN: fsdp-opt %t.shard.mlir --fsdp-mixed-precision -o %t.mp.mlir
// RUN: fsdp-opt %t.shard.mlir -o %t.ref.mlir
// RUN: diff %t.ref.mlir %t.mp.mlir

// auto-wrap's dtypes reach every flat parameter's config.
// CHECK: fsdp.flat_param @"unit:" params [@head.w] on @fsdp_world axes [0] {fsdp.config = #fsdp.unit_config<param_dtype = bf16, reduce_dtype = f32>, module = ""} : tensor<4xf32>
// CHECK: fsdp.flat_param @"unit:a" params [@a.w] on @fsdp_world axes [0] {fsdp.config = #fsdp.unit_config<param_dtype = bf16, reduce_dtype = f32>, module = "a"} : tensor<16xf32>
// The optimizer's state stays fp32, one shard per rank.
// CHECK: fsdp.buffer @"optim.exp_avg.unit:a" : tensor<4xf32> {fsdp.state_of = @"unit:a"}
// CHECK: fsdp.buffer @"optim.exp_avg_sq.unit:a" : tensor<4xf32> {fsdp.state_of = @"unit:a"}
// The step's results keep their declared fp32 types.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>, %[[LR:.*]]: tensor<f32> {fsdp.name = "lr"}, %[[STEP:.*]]: tensor<f32> {fsdp.name = "step"})
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {fsdp.name = "update.unit:a", fsdp.update_of = @"unit:a"}
// The forward input, cast once at the start (lr and step are not cast).
// CHECK: %[[XH:.*]] = onnx.Cast %[[X]] {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// CHECK-NOT: onnx.Cast %[[LR]]
// CHECK-NOT: onnx.Cast %[[STEP]]
// Each unit's local shard is cast before its all-gather: the gather moves
// bf16, and the unflattened parameters are bf16.
// CHECK: %[[AS:.*]] = fsdp.get_shard @"unit:a" : tensor<4xf32>
// CHECK-NEXT: %[[ASH:.*]] = onnx.Cast %[[AS]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[AF:.*]] = fsdp.all_gather %[[ASH]] on @fsdp_world axes [0] : tensor<4xbf16> -> tensor<16xbf16>
// CHECK-NEXT: %[[AW:.*]] = fsdp.unflatten %[[AF]] of @"unit:a" : tensor<16xbf16> -> tensor<4x4xbf16>
// Compute in bf16; releases of bf16 buffers.
// CHECK-NEXT: onnx.MatMul %[[XH]], %[[AW]] {{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: fsdp.release %[[AF]] : tensor<16xbf16>
// CHECK: onnx.Tanh %{{.*}} : (tensor<2x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[BS:.*]] = fsdp.get_shard @"unit:b" : tensor<4xf32>
// CHECK-NEXT: %[[BSH:.*]] = onnx.Cast %[[BS]] {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
// CHECK-NEXT: %[[BF:.*]] = fsdp.all_gather %[[BSH]] on @fsdp_world axes [0] : tensor<4xbf16> -> tensor<16xbf16>
// CHECK: fsdp.release %[[BF]] : tensor<16xbf16>
// CHECK: fsdp.all_gather %{{.*}} : tensor<1xbf16> -> tensor<4xbf16>
// The loss is computed in bf16 and returned in fp32.
// CHECK: %[[LOSSH:.*]] = onnx.ReduceSum %{{.*}} : (tensor<2x4xbf16>, none) -> tensor<bf16>
// CHECK-NEXT: %[[LOSS:.*]] = onnx.Cast %[[LOSSH]] {to = 1 : i64} : (tensor<bf16>) -> tensor<f32>
// Constants the backward uses become bf16 (tanh' = 1 - y*y).
// CHECK: onnx.Constant dense<1.000000e+00> : tensor<bf16>
// b's second gather (FULL_SHARD) is bf16 too.
// CHECK: %[[BS2:.*]] = fsdp.get_shard @"unit:b" : tensor<4xf32>
// CHECK-NEXT: %[[BSH2:.*]] = onnx.Cast %[[BS2]] {to = 16 : i64}
// CHECK-NEXT: fsdp.all_gather %[[BSH2]] on @fsdp_world axes [0] : tensor<4xbf16> -> tensor<16xbf16>
// Gradients: packed in bf16, cast to reduce_dtype (f32) before the
// reduce-scatter; the reduced shard is fp32 already.
// CHECK: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b" : tensor<4x4xbf16> -> tensor<16xbf16>
// CHECK-NEXT: %[[BM:.*]] = onnx.Identity %[[BG]] {fsdp.flat_grad_of = @"unit:b"} : (tensor<16xbf16>) -> tensor<16xbf16>
// CHECK-NEXT: %[[BR32:.*]] = onnx.Cast %[[BM]] {to = 1 : i64} : (tensor<16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: %[[BR:.*]] = fsdp.reduce_scatter %[[BR32]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xf32> -> tensor<4xf32>
// CHECK: %[[AG:.*]] = fsdp.pack %{{.*}} into @"unit:a" : tensor<4x4xbf16> -> tensor<16xbf16>
// CHECK: %[[AR:.*]] = fsdp.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
// The optimizer runs on the fp32 master shard, gradient and state.
// CHECK: %[[AP:.*]] = fsdp.get_shard @"unit:a" : tensor<4xf32>
// CHECK-NEXT: %[[AM:.*]] = fsdp.get_buffer @"optim.exp_avg.unit:a" : tensor<4xf32>
// CHECK-NEXT: onnx.Constant dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT: onnx.Mul %[[AR]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: onnx.Pow %{{.*}}, %[[STEP]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[AU:.*]] = onnx.Sub %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: onnx.Cast
// CHECK: return %[[LOSS]], %[[AU]]

// reduce_dtype defaults to param_dtype: the gradient is reduced in bf16 and
// the reduced shard cast to fp32 for the optimizer.
// RED-LABEL: func.func @forward
// RED: %[[BG:.*]] = fsdp.pack %{{.*}} into @"unit:b" : tensor<4x4xbf16> -> tensor<16xbf16>
// RED-NEXT: %[[BM:.*]] = onnx.Identity %[[BG]] {fsdp.flat_grad_of = @"unit:b"}
// RED-NEXT: %[[BR:.*]] = fsdp.reduce_scatter %[[BM]] on @fsdp_world axes [0] {reduction = "avg"} : tensor<16xbf16> -> tensor<4xbf16>
// RED-NEXT: %[[BR32:.*]] = onnx.Cast %[[BR]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// RED: fsdp.get_shard @"unit:b" : tensor<4xf32>
// RED-NEXT: fsdp.get_buffer @"optim.exp_avg.unit:b" : tensor<4xf32>
// RED-NEXT: onnx.Constant dense<1.000000e-01> : tensor<f32>
// RED-NEXT: onnx.Mul %[[BR32]], %{{.*}} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// RED: onnx.Mul %[[BR32]], %[[BR32]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

// The collectives have memory effects and the casts are per shard read:
// after CSE and canonicalization b is still gathered twice (FULL_SHARD),
// in bf16. Without an optimizer, the reduced gradients are returned fp32.
// CSE-LABEL: func.func @forward
// CSE-SAME: -> (tensor<f32>, tensor<4xf32> {fsdp.flat_grad_of = @"unit:a"}, tensor<4xf32> {fsdp.flat_grad_of = @"unit:b"}, tensor<1xf32> {fsdp.flat_grad_of = @"unit:"})
// CSE-COUNT-2: fsdp.get_shard @"unit:b"
// CSE-NOT: fsdp.get_shard @"unit:b"
// CSE: %[[G:.*]] = fsdp.reduce_scatter %{{.*}} : tensor<16xbf16> -> tensor<4xbf16>
// CSE-NEXT: %[[G32:.*]] = onnx.Cast %[[G]] {to = 1 : i64} : (tensor<4xbf16>) -> tensor<4xf32>
// CSE: return %{{.*}}, %[[G32]]
// CSE-NOT: fsdp.all_gather {{.*}}xf32>
// Forward only (inference): gathers of bf16, the output cast back to fp32.
// INFER-LABEL: func.func @forward
// INFER-SAME: -> tensor<f32>
// INFER-COUNT-3: fsdp.all_gather {{.*}} : tensor<{{[0-9]+}}xbf16> -> tensor<{{[0-9]+}}xbf16>
// INFER: %[[Y:.*]] = onnx.ReduceSum {{.*}} -> tensor<bf16>
// INFER-NEXT: %[[Y32:.*]] = onnx.Cast %[[Y]] {to = 1 : i64} : (tensor<bf16>) -> tensor<f32>
// INFER-NEXT: return %[[Y32]] : tensor<f32>
// Full-precision units (a and b, auto-wrap's full-precision-classes):
// gathered, computed, packed and reduced in fp32; their input is cast to
// fp32 (after the root's cast of the model input to bf16) and their output
// back to bf16 for the root's head.
// FULL: fsdp.flat_param @"unit:a" params [@a.w] on @fsdp_world axes [0] {fsdp.config = #fsdp.unit_config<mixed_precision = false>, module = "a"} : tensor<16xf32>
// FULL-LABEL: func.func @forward
// FULL: %[[XH:.*]] = onnx.Cast %arg0 {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// FULL-NEXT: %[[X32:.*]] = onnx.Cast %[[XH]] {to = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
// FULL: %[[AS:.*]] = fsdp.get_shard @"unit:a" : tensor<4xf32>
// FULL-NEXT: fsdp.all_gather %[[AS]] on @fsdp_world axes [0] : tensor<4xf32> -> tensor<16xf32>
// FULL: onnx.MatMul %[[X32]], %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// FULL: %[[T2:.*]] = onnx.Tanh %{{.*}} {fsdp.module = "b", fsdp.unit = "b"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
// FULL-NEXT: %[[T2H:.*]] = onnx.Cast %[[T2]] {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
// FULL: fsdp.all_gather %{{.*}} : tensor<1xbf16> -> tensor<4xbf16>
// FULL: onnx.Mul %[[T2H]], %{{.*}} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
// FULL: fsdp.pack %{{.*}} into @"unit:b" : tensor<4x4xf32> -> tensor<16xf32>
// FULL-NEXT: fsdp.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<4xf32>
module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["a", "b", "head"]>,
  #fsdp.module<"a", class = "Lin", params = ["a.w"], buffers = [], children = []>,
  #fsdp.module<"b", class = "Lin", params = ["b.w"], buffers = [], children = []>,
  #fsdp.module<"head", class = "Head", params = ["head.w"], buffers = [], children = []>]} {
  fsdp.param @a.w : tensor<4x4xf32>
  fsdp.param @b.w : tensor<4x4xf32>
  fsdp.param @head.w : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %none = onnx.NoValue
    %aw = fsdp.get_param @a.w : tensor<4x4xf32>
    %bw = fsdp.get_param @b.w : tensor<4x4xf32>
    %hw = fsdp.get_param @head.w : tensor<4xf32>
    %h1 = onnx.MatMul %x, %aw : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/a/MatMul")
    %t1 = onnx.Tanh %h1 : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/a/Tanh")
    %h2 = onnx.MatMul %t1, %bw : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/b/MatMul")
    %t2 = onnx.Tanh %h2 : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/b/Tanh")
    %s = onnx.Mul %t2, %hw : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("/head/Mul")
    %l = onnx.ReduceSum %s, %none {keepdims = 0 : i64} : (tensor<2x4xf32>, none) -> tensor<f32> loc("/ReduceSum")
    return %l : tensor<f32>
  }
}
