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

    ```mlir
    mesh.mesh @world(shape = 4)
    fsdp.param @"fc.weight" : tensor<2x3xf32>
    fsdp.param @"fc.bias" : tensor<2xf32>
    fsdp.flat_param @fc params [@"fc.weight", @"fc.bias"]
        on @world axes [0] : tensor<8xf32>
    ```
  }];
  let cppNamespace = "::mlir::fsdp";
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

#endif // FSDP_DIALECT
