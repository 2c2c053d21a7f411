//===- FSDPDialect.td - The fsdp dialect -------------------*- tablegen -*-===//

#ifndef FSDP_DIALECT
#define FSDP_DIALECT

include "mlir/IR/OpBase.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let summary = "Fully sharded data parallelism as IR: parameters, flat "
                "buffers and their sharding";
  let description = [{
    The `fsdp` dialect makes PyTorch FSDP's decisions explicit in a module.
    Model parameters are module-level symbols (`fsdp.param`) that record
    their original PyTorch names (FQNs), types and where their bytes live on
    disk, never the bytes themselves. An FSDP unit's parameters are packed
    into one flat buffer (`fsdp.flat_param`) with PyTorch `FlatParameter`
    semantics: concatenated in order, zero-padded to a multiple of the world
    size, and sharded so that rank `r` owns the `r`-th equal chunk. Device
    meshes are upstream `mesh.mesh` symbols.

    The passes hand each other facts as the dialect's discardable
    attributes, each of one declared kind that the dialect's verifier
    checks: `fsdp.grad_of`, `fsdp.flat_grad_of` and `fsdp.update_of` (a
    flat symbol reference, on a function result), `fsdp.state_of` (a flat
    symbol reference, on an `fsdp.buffer`), `fsdp.name` (a string, on a
    function argument or result), and on the module `fsdp.units` (a list of
    `#fsdp.unit`), `fsdp.auto_wrap` (an `#fsdp.auto_wrap` record) and
    `fsdp.cost_model` (an `#fsdp.cost_model`); on an `fsdp.flat_param`,
    `fsdp.config` (its unit's configuration, an `#fsdp.unit_config`). On
    a random op (a training-mode `onnx.Dropout` or a random generator:
    `onnx.RandomUniform(Like)`, `onnx.RandomNormal(Like)`,
    `onnx.Bernoulli`), `fsdp.random_op` (its id
    in the plan, an integer from 0 to 2^32-1, given by `fsdp-autodiff`, or by
    `fsdp-lower-to-runtime` to those without one, and kept by the clones of
    checkpointing, which so draw the same mask) and `fsdp.micro_batch`
    (`array<i64: slot, slots>`: which of the step's micro-batches the op
    works on, set by `fsdp-optimizer`'s gradient accumulation).

    ```mlir
    mesh.mesh @world(shape = 4)
    fsdp.param @"fc.weight" : tensor<2x3xf32>
    fsdp.param @"fc.bias" : tensor<2xf32>
    fsdp.flat_param @fc params [@"fc.weight", @"fc.bias"]
        on @world axes [0] : tensor<8xf32>
    ```
  }];
  let cppNamespace = "::mlir::fsdp";
  // The facts passes hand each other (the description says where each one
  // goes). Each gets a generated helper, e.g. `FSDPDialect::GradOfAttrHelper`
  // (getAttr, setAttr, isAttrPresent, getNameStr).
  let discardableAttrs = (ins
    "::mlir::FlatSymbolRefAttr":$grad_of,
    "::mlir::FlatSymbolRefAttr":$flat_grad_of,
    "::mlir::FlatSymbolRefAttr":$update_of,
    "::mlir::FlatSymbolRefAttr":$state_of,
    "::mlir::StringAttr":$name,
    "::mlir::ArrayAttr":$units,
    "::mlir::fsdp::AutoWrapRecordAttr":$auto_wrap,
    "::mlir::fsdp::CostModelAttr":$cost_model,
    "::mlir::fsdp::UnitConfigAttr":$config,
    "::mlir::IntegerAttr":$random_op,
    "::mlir::DenseI64ArrayAttr":$micro_batch
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

#endif // FSDP_DIALECT
