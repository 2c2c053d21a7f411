// Round trip of the facts passes hand each other: the dialect's
// discardable attributes and the records they hold.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK: module attributes {
// CHECK-SAME: fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 4, mesh_shape = [2, 2], memory_budget = 1048576, memory_reserve = 1.000000e-01 : f64, training = true, optimizer_states = 2,
// CHECK-SAME: chosen = <policy = "auto", units = 2, step_seconds = 1.500000e-03 : f64, peak_bytes = 65536, fits = true>,
// CHECK-SAME: peak_at = "backward of b", peak_parts = [#fsdp.peak_part<part = "gathered parameters", bytes = 4096>],
// CHECK-SAME: forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2, bucket_bytes = 0, evaluated = 12, boundaries = 3,
// CHECK-SAME: hand_policies = [#fsdp.wrap_evaluation<policy = "no wrapping", units = 1, step_seconds = 2.000000e-03 : f64, peak_bytes = 131072, fits = true>, #fsdp.wrap_evaluation<policy = "transformer", units = 0, step_seconds = 0.000000e+00 : f64, peak_bytes = 0, fits = false, invalid = "splits a tied parameter">],
// CHECK-SAME: same_units = [#fsdp.same_units<policy = "size min-num-params=1e5", same_units_as = "no wrapping">], use_orig_params = unit>
// CHECK-SAME: fsdp.cost_model = #fsdp.cost_model<peak_flops = 1.000000e+12 : f64, ranks_per_node = 2 : i64, cpu_runtime = true>
// CHECK-SAME: fsdp.units = [#fsdp.unit<"", params = [@a.w]>, #fsdp.unit<"b", params = [@b.w], config = <strategy = #fsdp.strategy<HYBRID_SHARD>, param_dtype = bf16>>]
module attributes {
  fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 4, mesh_shape = [2, 2],
      memory_budget = 1048576, memory_reserve = 1.0e-01 : f64, training = true,
      optimizer_states = 2,
      chosen = <policy = "auto", units = 2, step_seconds = 1.5e-03 : f64, peak_bytes = 65536, fits = true>,
      peak_at = "backward of b",
      peak_parts = [#fsdp.peak_part<part = "gathered parameters", bytes = 4096>],
      forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2,
      bucket_bytes = 0, evaluated = 12, boundaries = 3,
      hand_policies = [
        #fsdp.wrap_evaluation<policy = "no wrapping", units = 1, step_seconds = 2.0e-03 : f64, peak_bytes = 131072, fits = true>,
        #fsdp.wrap_evaluation<policy = "transformer", units = 0, step_seconds = 0.0 : f64, peak_bytes = 0, fits = false, invalid = "splits a tied parameter">],
      same_units = [#fsdp.same_units<policy = "size min-num-params=1e5", same_units_as = "no wrapping">],
      use_orig_params = unit>,
  // Fields left out keep the cost model's defaults, in any order.
  fsdp.cost_model = #fsdp.cost_model<cpu_runtime = true, peak_flops = 1.0e12 : f64, ranks_per_node = 2 : i64>,
  // A unit's config is written without its prefix, or with it, its fields
  // in any order.
  fsdp.units = [#fsdp.unit<"", params = [@a.w]>, #fsdp.unit<"b", params = [@b.w], config = #fsdp.unit_config<param_dtype = bf16, strategy = #fsdp.strategy<HYBRID_SHARD>>>]} {
  fsdp.param @a.w : tensor<2xf32>
  fsdp.param @b.w : tensor<2xf32>
  fsdp.buffer @"unit:b.exp_avg" : tensor<2xf32> {fsdp.state_of = @b.w}
  // CHECK: fsdp.flat_param @"unit:b" params [@b.w] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<NO_SHARD>>, module = "b"} : tensor<2xf32>
  fsdp.flat_param @"unit:b" params [@b.w] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<NO_SHARD>>, module = "b"} : tensor<2xf32>
  // Every field; the strategy also without its #fsdp.strategy prefix.
  // CHECK: fsdp.flat_param @"unit:c" params [@a.w] {fsdp.config = #fsdp.unit_config<strategy = #fsdp.strategy<SHARD_GRAD_OP>, param_dtype = bf16, reduce_dtype = f32, buffer_dtype = f16, mixed_precision = false>, module = "c"} : tensor<2xf32>
  fsdp.flat_param @"unit:c" params [@a.w] {fsdp.config = #fsdp.unit_config<mixed_precision = false, buffer_dtype = f16, reduce_dtype = f32, param_dtype = bf16, strategy = <SHARD_GRAD_OP>>, module = "c"} : tensor<2xf32>
  // No field: PyTorch's defaults.
  // CHECK: fsdp.flat_param @"unit:d" params [@b.w] {fsdp.config = #fsdp.unit_config<>, module = "d"} : tensor<2xf32>
  fsdp.flat_param @"unit:d" params [@b.w] {fsdp.config = #fsdp.unit_config<>, module = "d"} : tensor<2xf32>

  // CHECK-LABEL: func.func @step
  // CHECK-SAME: (%{{.*}}: tensor<2xf32> {fsdp.name = "x"})
  // CHECK-SAME: -> (tensor<2xf32> {fsdp.grad_of = @a.w, fsdp.name = "grad"}, tensor<2xf32> {fsdp.flat_grad_of = @b.w}, tensor<2xf32> {fsdp.name = "new", fsdp.update_of = @b.w})
  func.func @step(%x: tensor<2xf32> {fsdp.name = "x"})
      -> (tensor<2xf32> {fsdp.grad_of = @a.w, fsdp.name = "grad"},
          tensor<2xf32> {fsdp.flat_grad_of = @b.w},
          tensor<2xf32> {fsdp.update_of = @b.w, fsdp.name = "new"}) {
    return %x, %x, %x : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  }
}
