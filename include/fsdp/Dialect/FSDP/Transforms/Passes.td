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

def ModuleTree : Pass<"fsdp-module-tree", "ModuleOp"> {
  let summary = "Recover the PyTorch module hierarchy of an imported model";
  let description = [{
    Rebuilds the model's module tree and records it in the module attribute
    `fsdp.modules`: a list of `#fsdp.module` in `named_modules()` order,
    each with its FQN, class name, own parameters and buffers, and children
    in registration order. Auto-wrap policies read it.

    The tree comes from three sources, most precise first:
     - the module table `fsdp_mlir.export` embeds in the model
       (`fsdp.torch_metadata`): every module, with its class name;
     - parameter and buffer FQNs (`blocks.0.attn.q.weight` lives in module
       `blocks.0.attn`), including tied parameters' aliases;
     - ONNX node scopes (`/blocks.0/mlp/act/Mul` names module
       `blocks.0.mlp.act`), which add modules without parameters. The
       exporter's quirks are undone: a wrapper's prefix on every scope
       (the loss wrapper's `/model`), Sequential children named `mlp.0`
       inside scope `mlp`, and the `_1` suffix of a module called twice.
    Without the metadata, class names are empty.

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-module-tree
    module attributes {fsdp.modules = [#fsdp.module<"", class = "GPT2",
        params = [], buffers = [], children = ["wte", "wpe", ...]>, ...]}
    ```
  }];
}

def PrintModuleTree : Pass<"fsdp-print-module-tree", "ModuleOp"> {
  let summary = "Print the module hierarchy as an indented tree or JSON";
  let description = [{
    Prints the module tree that `fsdp-module-tree` records (recovering it
    the same way if the module has none yet), one module per line indented
    by depth, or as JSON with `format=json`: a list of
    `{"fqn", "class", "params", "buffers", "children"}` in `named_modules()`
    order, comparable with what PyTorch reports. The module is unchanged.

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-print-module-tree -o /dev/null
    (root) GPT2
      wte Embedding: wte.weight
      ...
      lm_head Linear: lm_head.weight
    ```
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: text or json">,
  ];
}

#endif // FSDP_TRANSFORMS_PASSES
