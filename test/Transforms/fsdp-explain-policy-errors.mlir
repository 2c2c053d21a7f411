// fsdp-explain-policy reads policy=auto's record and the units it chose;
// a record without the units is an error, not a crash.
// RUN: fsdp-opt %s --fsdp-explain-policy -verify-diagnostics

// expected-error @+1 {{fsdp-explain-policy: the module has policy=auto's record but no 'fsdp.units'}}
module attributes {fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 2, memory_budget = 0, memory_reserve = 1.0e-01 : f64, training = false, optimizer_states = 0, chosen = <policy = "auto", units = 1, step_seconds = 1.0e-03 : f64, peak_bytes = 64, fits = true>, peak_at = "forward", peak_parts = [], forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2, bucket_bytes = 0, evaluated = 1, boundaries = 1, hand_policies = [], same_units = []>} {
  fsdp.param @w : tensor<2xf32>
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}
