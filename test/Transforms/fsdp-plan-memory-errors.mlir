// Sizes past int64 (a batch size of 2^62 given to a .mlir module) are
// errors naming the value, not a wrapped, small arena.
// RUN: fsdp-opt %s --split-input-file --verify-diagnostics --fsdp-plan-memory

// expected-error @+1 {{fsdp-plan-memory: argument 0 of type 'tensor<4611686018427387904x8xf32>' has more bytes than int64 can count}}
func.func @forward(%arg0: tensor<4611686018427387904x8xf32>) -> tensor<4611686018427387904x8xf32> {
  return %arg0 : tensor<4611686018427387904x8xf32>
}

// -----

// Each fits; the two together do not.
func.func @forward(%arg0: tensor<1152921504606846976xf32>) -> tensor<1152921504606846976xf32> {
  // expected-error @+1 {{fsdp-plan-memory: a result of 'fsdp.kernel' of type 'tensor<1152921504606846976xf32>': the activations up to it have more bytes than int64 can count}}
  %0 = fsdp.kernel "relu"(%arg0) : (tensor<1152921504606846976xf32>) -> tensor<1152921504606846976xf32>
  return %0 : tensor<1152921504606846976xf32>
}

// -----

// State: a buffer the weights arena cannot count.
// expected-error @+1 {{fsdp-plan-memory: 'tensor<4611686018427387904xf32>' has more bytes than int64 can count}}
fsdp.buffer @big : tensor<4611686018427387904xf32>
func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}

// -----

// An input that is not a tensor: at the argument.
func.func @forward(%arg0: tensor<4xf32>,
    // expected-error @+1 {{fsdp-plan-memory: argument 1 is not a tensor}}
    %arg1: i64) -> tensor<4xf32> {
  return %arg0 : tensor<4xf32>
}
