// fsdp-auto-wrap's validation errors, with PyTorch's rules.
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=regex pattern=pair\.(enc|dec)" 2>&1 | FileCheck %s --check-prefix=TIED
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=regex pattern=pair" | FileCheck %s --check-prefix=TOGETHER
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=none 2>&1 | FileCheck %s --check-prefix=FROZEN
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=none use-orig-params=true" 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=sized 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s --fsdp-auto-wrap 2>&1 | FileCheck %s --check-prefix=NOPOLICY
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=transformer 2>&1 | FileCheck %s --check-prefix=CLASSES
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=regex pattern=(" 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none ignored-modules=nothing" 2>&1 | FileCheck %s --check-prefix=IGNMOD
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none ignored-params=nothing.weight" 2>&1 | FileCheck %s --check-prefix=IGNPARAM
// RUN: fsdp-opt %s "--fsdp-auto-wrap=policy=transformer layer-classes=Missing ignored-modules=frozen" 2>&1 | FileCheck %s --check-prefix=NOCLASS

// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none strategy=SHARDED" 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none param-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: echo '{"modules": {"pair": {' > %t.bad.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.bad.json" 2>&1 | FileCheck %s --check-prefix=BADJSON
// RUN: echo '{"modules": {"nowhere": {}}}' > %t.unknown.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.unknown.json" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: echo '{"modules": {"pair": {"sharding": "NO_SHARD"}}}' > %t.key.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.key.json" 2>&1 | FileCheck %s --check-prefix=KEY
// RUN: echo '{"modules": {"pair.enc": {}}}' > %t.ignored.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none ignored-modules=pair policy-file=%t.ignored.json" 2>&1 | FileCheck %s --check-prefix=IGNWRAP
// A policy file nested 40,000 deep overflowed llvm::json::parse's stack;
// so did the same in a module's fsdp.torch_metadata.
// RUN: %python -c "print('{\"modules\": ' + '[' * 40000 + ']' * 40000 + '}')" > %t.deep.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.deep.json" 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python -c "print('module attributes {fsdp.torch_metadata = \"{\\\\\"modules\\\\\": ' + '[' * 40000 + '\"} {}')" > %t.deep.mlir
// RUN: not fsdp-opt %t.deep.mlir --fsdp-print-module-tree 2>&1 | FileCheck %s --check-prefix=DEEPATTR
// RUN: %python -c "print('{\"modules\": {}, \"x\": \"' + 'a' * (64 << 20) + '\"}')" > %t.huge.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.huge.json" 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: rm %t.huge.json
// RUN: rm -f %t.fifo.json && mkfifo %t.fifo.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.fifo.json" 2>&1 | FileCheck %s --check-prefix=FIFO
// RUN: echo '{"wrap": []}' > %t.shape.json
// RUN: not fsdp-opt %s "--fsdp-auto-wrap=policy=none policy-file=%t.shape.json" 2>&1 | FileCheck %s --check-prefix=SHAPE

// Malformed module trees: fsdp-module-tree-errors.mlir.

// STRATEGY: error: fsdp-auto-wrap: unknown strategy 'SHARDED'; known: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD
// DTYPE: error: fsdp-auto-wrap: param_dtype 'fp8' is not one of f32, f16, bf16
// NOFILE: error: fsdp-auto-wrap: policy file '{{.*}}missing.json': No such file or directory
// DEEP: error: fsdp-auto-wrap: policy file '{{.*}}deep.json': nests deeper than the limit of 256 levels (at byte 267)
// DEEPATTR: error: fsdp-print-module-tree: fsdp.torch_metadata nests deeper than the limit of 256 levels (at byte 267)
// HUGE: error: fsdp-auto-wrap: policy file '{{.*}}huge.json': is 67108889 bytes, more than the limit of 67108864
// FIFO: error: fsdp-auto-wrap: policy file '{{.*}}fifo.json': '{{.*}}fifo.json' is not a regular file
// BADJSON: error: fsdp-auto-wrap: policy file '{{.*}}bad.json': not valid JSON: {{.*}}
// UNKNOWN: error: fsdp-auto-wrap: policy file '{{.*}}unknown.json': module 'nowhere' is not a submodule of the model
// KEY: error: fsdp-auto-wrap: policy file '{{.*}}key.json': module 'pair': unknown setting 'sharding' (known: strategy, param_dtype, reduce_dtype, buffer_dtype)
// IGNWRAP: error: fsdp-auto-wrap: policy file '{{.*}}ignored.json': module 'pair.enc' is ignored and cannot be wrapped
// SHAPE: error: fsdp-auto-wrap: policy file '{{.*}}shape.json': expected {"modules": {"<module FQN>": {settings}}}

// The encoder and decoder share one weight: wrapping them apart would put it
// in two units (torch 1.13 silently does).
// TIED: error: fsdp-auto-wrap: tied parameter 'pair.enc.weight' = 'pair.dec.weight' would be in two units: 'pair.enc' and 'pair.dec'; choose a policy that wraps both holders in one unit, or ignore one of them
// Wrapping their common parent keeps them together.
// TOGETHER: #fsdp.unit<"pair", params = [@pair.enc.weight, @pair.dec.bias]>

// FROZEN: error: fsdp-auto-wrap: unit (root) mixes frozen and trainable parameters; frozen: [frozen.weight (6)], trainable: [pair.enc.weight (4), pair.dec.bias (2)]; wrap the frozen modules separately (wrap-frozen=true wraps every frozen submodule)
// WARN: warning: fsdp-auto-wrap: unit (root) mixes frozen and trainable parameters; frozen: [frozen.weight (6)], trainable: [pair.enc.weight (4), pair.dec.bias (2)]
// WARN: fsdp.units = [#fsdp.unit<""

// POLICY: error: fsdp-auto-wrap: unknown policy 'sized'; known: none, size, transformer, regex
// NOPOLICY: error: fsdp-auto-wrap: give a policy (none, size, transformer, regex, auto)
// CLASSES: error: fsdp-auto-wrap: policy 'transformer' needs layer-classes=<module class names>
// REGEX: error: fsdp-auto-wrap: invalid pattern '(': parentheses not balanced
// IGNMOD: error: fsdp-auto-wrap: ignored module 'nothing' is not a submodule of the model
// IGNPARAM: error: fsdp-auto-wrap: ignored parameter 'nothing.weight' is not a parameter of the model
// NOCLASS: warning: fsdp-auto-wrap: no module has a class in layer-classes (Missing); was the model exported without class names?

module attributes {fsdp.modules = [
  #fsdp.module<"", class = "Net", params = [], buffers = [], children = ["frozen", "pair"]>,
  #fsdp.module<"frozen", class = "Linear", params = ["frozen.weight"], buffers = [], children = []>,
  #fsdp.module<"pair", class = "Pair", params = [], buffers = [], children = ["pair.enc", "pair.dec"]>,
  #fsdp.module<"pair.enc", class = "Linear", params = ["pair.enc.weight"], buffers = [], children = []>,
  #fsdp.module<"pair.dec", class = "Linear", params = ["pair.dec.weight", "pair.dec.bias"], buffers = [], children = []>]} {
  fsdp.param @"frozen.weight" : tensor<2x3xf32> frozen
  fsdp.param @"pair.enc.weight" : tensor<2x2xf32> {aliases = ["pair.dec.weight"]}
  fsdp.param @"pair.dec.bias" : tensor<2xf32>
}
