// The facts passes hand each other (the dialect's discardable attributes)
// are checked by the dialect's verifier: each malformed one, with its text.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'func.func' op has 'fsdp.grad_of' on result #0 that is not a symbol reference (@name): "w"}}
func.func @step(%g: tensor<2xf32>) -> (tensor<2xf32> {fsdp.grad_of = "w"}) {
  return %g : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op has 'fsdp.update_of' on result #1 that is not a symbol reference (@name): [@w]}}
func.func @step(%w: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32> {fsdp.update_of = [@w]}) {
  return %w, %w : tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op has 'fsdp.name' on argument #0 that is not a string: 7 : i64}}
func.func @forward(%x: tensor<2xf32> {fsdp.name = 7}) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{'fsdp.buffer' op has 'fsdp.state_of' that is not a symbol reference (@name): "unit:a"}}
fsdp.buffer @"unit:a.exp_avg" : tensor<8xf32> {fsdp.state_of = "unit:a"}

// -----

// expected-error @+1 {{'builtin.module' op has 'fsdp.units' that is not a list of #fsdp.unit: ["a"]}}
module attributes {fsdp.units = ["a"]} {
}

// -----

// expected-error @+1 {{'fsdp.param' op has 'fsdp.units', which only a module carries}}
fsdp.param @w : tensor<2xf32> {fsdp.units = []}

// -----

// The record before it was typed: a dictionary is refused.
// expected-error @+1 {{'builtin.module' op has 'fsdp.auto_wrap' that is not an #fsdp.auto_wrap record: {world_size = 2 : i64}}}
module attributes {fsdp.auto_wrap = {world_size = 2}} {
}

// -----

// A record missing a field (peak_at).
// expected-error @+1 {{struct is missing required parameter: peak_at}}
module attributes {fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 2, memory_budget = 0, memory_reserve = 1.0e-01 : f64, training = true, optimizer_states = 2, chosen = <policy = "auto", units = 1, step_seconds = 1.0e-03 : f64, peak_bytes = 64, fits = true>, peak_parts = [], forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2, bucket_bytes = 0, evaluated = 1, boundaries = 1, hand_policies = [], same_units = []>} {
}

// -----

// expected-error @+1 {{auto-wrap record's peak_parts holds 64 : i64, not a #fsdp.peak_part}}
module attributes {fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 2, memory_budget = 0, memory_reserve = 1.0e-01 : f64, training = true, optimizer_states = 2, chosen = <policy = "auto", units = 1, step_seconds = 1.0e-03 : f64, peak_bytes = 64, fits = true>, peak_at = "forward", peak_parts = [64], forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2, bucket_bytes = 0, evaluated = 1, boundaries = 1, hand_policies = [], same_units = []>} {
}

// -----

// expected-error @+1 {{auto-wrap record's mesh_shape has 3 sizes, not 2}}
module attributes {fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 8, mesh_shape = [2, 2, 2], memory_budget = 0, memory_reserve = 1.0e-01 : f64, training = true, optimizer_states = 2, chosen = <policy = "auto", units = 1, step_seconds = 1.0e-03 : f64, peak_bytes = 64, fits = true>, peak_at = "forward", peak_parts = [], forward_prefetch = false, backward_prefetch = "pre", limit_all_gathers = 2, bucket_bytes = 0, evaluated = 1, boundaries = 1, hand_policies = [], same_units = []>} {
}

// -----

// expected-error @+1 {{'builtin.module' op has 'fsdp.cost_model' that is not an #fsdp.cost_model: {peak_flops = 1.000000e+12 : f64}}}
module attributes {fsdp.cost_model = {peak_flops = 1.0e12 : f64}} {
}

// -----

// A unit's strategy is an #fsdp.strategy, one of PyTorch's four.
// expected-error @+4 {{expected ::mlir::fsdp::ShardingStrategy to be one of: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD}}
// expected-error @+3 {{failed to parse FSDP_ShardingStrategyAttr parameter 'value'}}
// expected-error @+2 {{failed to parse FSDP_UnitConfigAttr parameter 'strategy'}}
// expected-error @+1 {{failed to parse FSDP_WrapUnitAttr parameter 'config'}}
module attributes {fsdp.units = [#fsdp.unit<"a", params = [@a.w], config = <strategy = #fsdp.strategy<PART_SHARD>>>]} {
}

// -----

// The strategy as a string (its form before it was typed) is refused.
// expected-error @+3 {{expected '<'}}
// expected-error @+2 {{failed to parse FSDP_UnitConfigAttr parameter 'strategy' which is to be a `::mlir::fsdp::ShardingStrategyAttr`}}
// expected-error @+1 {{failed to parse FSDP_WrapUnitAttr parameter 'config'}}
module attributes {fsdp.units = [#fsdp.unit<"a", params = [@a.w], config = <strategy = "NO_SHARD">>]} {
}

// -----

// The configuration as a dictionary (its form before it was typed) is
// refused.
fsdp.param @a.w : tensor<2xf32>
// expected-error @+1 {{'fsdp.flat_param' op has 'fsdp.config' that is not an #fsdp.unit_config: {strategy = #fsdp.strategy<NO_SHARD>}}}
fsdp.flat_param @"unit:a" params [@a.w] {fsdp.config = {strategy = #fsdp.strategy<NO_SHARD>}, module = "a"} : tensor<2xf32>

// -----

fsdp.param @a.w : tensor<2xf32>
// expected-error @+1 {{'fsdp.flat_param' op has 'fsdp.config' that is not an #fsdp.unit_config: "NO_SHARD"}}
fsdp.flat_param @"unit:a" params [@a.w] {fsdp.config = "NO_SHARD", module = "a"} : tensor<2xf32>

// -----

// A field the configuration does not have.
// expected-error @+2 {{duplicate or unknown struct parameter name: stratgy}}
// expected-error @+1 {{failed to parse FSDP_WrapUnitAttr parameter 'config'}}
module attributes {fsdp.units = [#fsdp.unit<"a", params = [@a.w], config = <stratgy = #fsdp.strategy<NO_SHARD>>>]} {
}

// -----

// The dtypes are those fsdp-mixed-precision casts to (fsdp-mixed-precision
// checked this itself while the configuration was a dictionary).
fsdp.param @w : tensor<4xf32>
// expected-error @+1 {{unit configuration's param_dtype is 'i32', not f32, f16, bf16 or f64}}
fsdp.flat_param @"unit:blocks.0" params [@w] {fsdp.config = #fsdp.unit_config<param_dtype = i32>, module = "blocks.0"} : tensor<4xf32>

// -----

// expected-error @+2 {{unit configuration's buffer_dtype is 'i8', not f32, f16, bf16 or f64}}
// expected-error @+1 {{failed to parse FSDP_WrapUnitAttr parameter 'config'}}
module attributes {fsdp.units = [#fsdp.unit<"head", params = [@w], config = <param_dtype = bf16, buffer_dtype = i8>>]} {
}

// -----

// A dtype is a type, not its name as a string.
// expected-error @+3 {{expected non-function type}}
// expected-error @+2 {{failed to parse FSDP_UnitConfigAttr parameter 'reduce_dtype' which is to be a `::mlir::Type`}}
// expected-error @+1 {{failed to parse FSDP_WrapUnitAttr parameter 'config'}}
module attributes {fsdp.units = [#fsdp.unit<"head", params = [@w], config = <reduce_dtype = "bf16">>]} {
}

// -----

// mixed_precision is a boolean.
// expected-error @+2 {{invalid kind of attribute specified}}
// expected-error @+1 {{failed to parse FSDP_UnitConfigAttr parameter 'mixed_precision' which is to be a `::mlir::BoolAttr`}}
fsdp.flat_param @"unit:a" params [@a.w] {fsdp.config = #fsdp.unit_config<mixed_precision = 0>, module = "a"} : tensor<2xf32>
