// fsdp-schedule uses a cost model recorded on the module (by fsdp-auto-wrap
// policy=auto) when given none of its own, module by module: a module
// without a record gets the defaults even after one with a record.
// RUN: fsdp-opt %s --split-input-file --fsdp-schedule | FileCheck %s
// RUN: fsdp-opt %s --split-input-file "--fsdp-schedule=peak-flops=2e12" | FileCheck %s --check-prefix=GIVEN

// CHECK: module attributes {fsdp.cost_model = #fsdp.cost_model<peak_flops = 1.000000e+12 : f64, {{.*}}, cpu_runtime = true>
// GIVEN: module attributes {fsdp.cost_model = #fsdp.cost_model<peak_flops = 2.000000e+12 : f64, {{.*}}, cpu_runtime = false>
module attributes {fsdp.cost_model = #fsdp.cost_model<cpu_runtime = true, peak_flops = 1.0e12 : f64>} {
}

// -----

// CHECK: module attributes {fsdp.cost_model = #fsdp.cost_model<peak_flops = 9.890000e+14 : f64, {{.*}}, cpu_runtime = false>
// GIVEN: module attributes {fsdp.cost_model = #fsdp.cost_model<peak_flops = 2.000000e+12 : f64, {{.*}}, cpu_runtime = false>
module {
}
