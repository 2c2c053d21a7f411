//===- Passes.td - fsdp dialect passes ---------------------*- tablegen -*-===//

#ifndef FSDP_TRANSFORMS_PASSES
#define FSDP_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def PrintLayout : Pass<"fsdp-print-layout", "ModuleOp"> {
  let summary = "Print every flat parameter's layout and each rank's shard";
  let description = [{
    For each `fsdp.flat_param`, prints its member parameters with their
    ranges in the flat buffer, the padding, and for each rank the range it
    owns and which pieces of which parameters that range holds. This is the
    information PyTorch FSDP keeps on a `FlatParameter` (`_shard_indices`,
    `_shard_param_offsets`, `_shard_numel_padded`), computed by the
    project's layout library, so a layout can be checked before anything
    runs. The module is left unchanged.

    ```
    $ fsdp-opt model.mlir --fsdp-print-layout -o /dev/null
    flat_param @fc: 2 params, 8 elements, padded 8, world size 4, shard 2
      param @fc.weight tensor<2x3xf32> [0, 6)
      param @fc.bias tensor<2xf32> [6, 8)
      rank 0 [0, 2): @fc.weight[0, 2)->[0, 2)
      rank 1 [2, 4): @fc.weight[2, 4)->[0, 2)
      rank 2 [4, 6): @fc.weight[4, 6)->[0, 2)
      rank 3 [6, 8): @fc.bias[0, 2)->[0, 2)
    ```

    Each piece `@p[a, b)->[c, d)` says that elements `[a, b)` of parameter
    `p` (flattened) sit at `[c, d)` of the rank's shard; `padding n` counts
    the shard's trailing zero elements. The `ranks` option limits the
    report to some ranks (`--fsdp-print-layout=ranks=0,7`).
  }];
  let options = [
    ListOption<"ranks", "ranks", "int64_t",
               "Ranks to print (default: every rank)">,
  ];
}

#endif // FSDP_TRANSFORMS_PASSES
