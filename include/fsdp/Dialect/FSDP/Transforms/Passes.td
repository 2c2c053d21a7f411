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

    `format=json` writes the report for machines (to `file`, or standard
    output): per unit its symbol, module FQN, strategy, dtype, world size,
    alignment, parameters in flat order (FQN, tied aliases, shape, numel,
    offset), flat numel, padded numel, shard numel, and per rank its range,
    padding and pieces. Names are the original PyTorch FQNs, so the report
    compares directly with a state dict or with PyTorch FSDP's
    `FlatParameter` metadata. `fsdp-opt --fsdp-layout-json=FILE` appends this
    pass to any pipeline.
  }];
  let options = [
    ListOption<"ranks", "ranks", "int64_t",
               "Ranks to print (default: every rank)">,
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "Output format: text or json">,
    Option<"file", "file", "std::string", /*default=*/"\"-\"",
           "Where to write the report (- for standard output)">,
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

def AutoWrap : Pass<"fsdp-auto-wrap", "ModuleOp"> {
  let summary = "Choose FSDP units with PyTorch's auto-wrap policies";
  let description = [{
    Decides which modules become FSDP units, exactly as PyTorch 1.13's
    `FullyShardedDataParallel(model, auto_wrap_policy=...)` does, over the
    module tree (`fsdp.modules`, recovered if absent), and records the units
    and their parameters in the module attribute `fsdp.units` (attributes
    only; `fsdp-flatten` builds the flat buffers).

    The module tree is walked in post-order. A module is recursed into when
    the policy says so for its whole parameter count, wrapped when the policy
    says so for the parameters no wrapped descendant already took (PyTorch's
    nonwrapped numel), and the root is always a unit owning the remainder.
    A unit's parameters are its subtree's `parameters()` not already in a
    descendant unit, in registration order, each tied tensor once.

    Policies (`policy=`, a comma list is their or-composition):
     - `none`: one unit, the root.
     - `size`: `size_based_auto_wrap_policy`: wrap a module with at least
       `min-num-params` unwrapped parameters (default 1e8); never recurse into
       `force-leaf-classes` (default MultiheadAttention, which in torch 1.13
       is therefore never wrapped) and never wrap `exclude-wrap-classes`
       (default ModuleList, ModuleDict).
     - `transformer`: `transformer_auto_wrap_policy`: wrap every module whose
       class is in `layer-classes`.
     - `regex`: the file-level `lambda_auto_wrap_policy`: wrap every module
       whose FQN fully matches `pattern`.
    Class names come from the export metadata (the module tree).

    `ignored-modules` (and their subtrees) and `ignored-params` are left out
    of every unit: they stay replicated, as PyTorch's `ignored_modules`.

    Unit configuration (recorded in each unit's `config`, an
    `#fsdp.unit_config`): `strategy`
    (FULL_SHARD by default, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD) and mixed
    precision (`param-dtype`, `reduce-dtype`, `buffer-dtype`: f32, f16 or
    bf16). With mixed precision, modules of `full-precision-classes`
    (default BatchNorm1d/2d/3d, SyncBatchNorm: later PyTorch's
    `_module_classes_to_ignore`) are wrapped as their own units with mixed
    precision off, and the pass warns which.

    `policy-file=FILE` gives per-module overrides, PyTorch's `CustomPolicy`
    as a file: `{"modules": {"blocks.0": {"strategy": "SHARD_GRAD_OP",
    "param_dtype": "bf16"}, "head": {}}}` wraps each listed module as a unit
    (in addition to the policies) with its own settings; `""` configures the
    root. Unknown or ignored modules and unknown keys are errors.

    `policy=auto` lets the compiler choose (alone: not or-composed). It
    needs `world-size=N` (or `mesh-shape=<groups>,<ranks per group>` for
    hybrid sharding) and takes `memory-budget=<bytes per rank>` (suffixes
    K, M, G, T: powers of 1024; none: no limit). It profiles the forward
    once and searches, on a model of the sharded step (cost model below,
    `training`, `optimizer-states`, `clipping`, the mixed-precision
    dtypes; `cpu-runtime` for plans run by the CPU runtime): unit
    boundaries (any set of module classes, each class wrapped in all its
    instances, and the hand policies' units; tied parameters always share a
    unit, units never mix frozen and trainable parameters), each unit's
    strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, and HYBRID_SHARD on a
    2-D mesh; greedily per group of identical units: all of them, or the
    last k), and fsdp-schedule's prefetch, in-flight limit and bucket size.
    It keeps the configuration with the lowest modelled step time whose
    modelled peak memory per rank fits the budget (with `memory-reserve`,
    10% by default and at least 16 KiB, on top: the model approximates what fsdp-plan-memory
    later plans exactly, within about 10% on the test corpus, and
    fsdp-plan-memory refuses a plan over the budget), and records it: the
    units with their strategies in `fsdp.units`, the schedule and the
    figures in `fsdp.auto_wrap` (fsdp-schedule uses those settings unless
    given its own; fsdp-flatten checks the world size), the cost model in
    `fsdp.cost_model`. The standard hand policies (no wrapping, the
    transformer-layer policy on `layer-classes` or the class repeated in
    a ModuleList, size-based at powers of ten) are among the candidates, so
    the choice is never slower by the model than the best of them and fits
    every budget one of them fits. When nothing fits, the error gives the
    smallest modelled peak and what makes it up. `--fsdp-explain-policy`
    prints the choice beside the hand policies.

    Every op whose ONNX node scope names a module gets the attributes
    `fsdp.module` (the module FQN) and `fsdp.unit` (the FQN of the unit that
    manages it), PyTorch's `_is_fsdp_managed_module` made visible.

    `wrap-frozen` (not PyTorch's, which leaves this to the policy) wraps
    each largest frozen subtree below a module with trainable parameters as
    its own unit, so a model with a frozen backbone needs no policy.

    Errors, as PyTorch's rules: a unit mixing frozen and trainable
    parameters (both FQN lists with numels; a warning with
    `use-orig-params`), a tied parameter whose holders would land in two
    units (both FQNs and units), an unknown ignored module or parameter.

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-auto-wrap="policy=transformer layer-classes=GPT2Block"
    module attributes {fsdp.units = [#fsdp.unit<"", params = [@wte.weight, ...]>,
        #fsdp.unit<"blocks.0", params = [...]>, #fsdp.unit<"blocks.1", params = [...]>], ...}
    ```
  }];
  let options = [
    ListOption<"policies", "policy", "std::string",
               "Auto-wrap policies (none, size, transformer, regex), or-composed; "
               "or auto">,
    Option<"minNumParams", "min-num-params", "int64_t", /*default=*/"100000000",
           "size: wrap modules with at least this many unwrapped parameters">,
    ListOption<"forceLeafClasses", "force-leaf-classes", "std::string",
               "size: module classes never recursed into "
               "(default MultiheadAttention)">,
    ListOption<"excludeWrapClasses", "exclude-wrap-classes", "std::string",
               "size: module classes never wrapped (default ModuleList, ModuleDict)">,
    ListOption<"layerClasses", "layer-classes", "std::string",
               "transformer: module classes to wrap">,
    Option<"pattern", "pattern", "std::string", /*default=*/"\"\"",
           "regex: wrap modules whose FQN fully matches this regex">,
    ListOption<"ignoredModules", "ignored-modules", "std::string",
               "Module FQNs left out of every unit (replicated)">,
    ListOption<"ignoredParams", "ignored-params", "std::string",
               "Parameter FQNs left out of every unit (replicated)">,
    Option<"useOrigParams", "use-orig-params", "bool", /*default=*/"false",
           "Allow units mixing frozen and trainable parameters (warns); "
           "policy=auto models fsdp-flatten's use-orig-params alignment, "
           "which must then be given too">,
    Option<"wrapFrozen", "wrap-frozen", "bool", /*default=*/"false",
           "Wrap each largest module whose parameters are all frozen, and "
           "whose parent holds trainable ones, as a unit of its own "
           "(fsdp_mlir.compile's default without a policy)">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"FULL_SHARD\"",
           "Sharding strategy: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: dtype of gathered parameters and compute">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: dtype gradients are reduced in">,
    Option<"bufferDtype", "buffer-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: dtype of buffers">,
    ListOption<"fullPrecisionClasses", "full-precision-classes", "std::string",
               "Module classes kept in full precision, each its own unit "
               "(default BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm)">,
    Option<"policyFile", "policy-file", "std::string", /*default=*/"\"\"",
           "JSON file of per-module wrap overrides (CustomPolicy)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"0",
           "auto: the ranks the model is sharded over">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "auto: a 2-D mesh <groups>,<ranks per group> (hybrid sharding)">,
    Option<"memoryBudget", "memory-budget", "std::string", /*default=*/"\"\"",
           "auto: bytes per rank the step may use (K, M, G, T suffixes)">,
    Option<"memoryReserve", "memory-reserve", "double", /*default=*/"0.1",
           "auto: a configuration fits when its modelled peak plus this "
           "fraction of it (at least 16 KiB; 0: none) is within the budget">,
    Option<"training", "training", "bool", /*default=*/"true",
           "auto: model a training step (else a forward)">,
    Option<"optimizerStates", "optimizer-states", "int64_t", /*default=*/"2",
           "auto: optimizer state tensors per parameter (AdamW 2, SGD with "
           "momentum 1, SGD 0)">,
    Option<"peakFlops", "peak-flops", "double", /*default=*/"989e12",
           "auto: modelled device peak, FLOP/s">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", /*default=*/"3.35e12",
           "auto: modelled device memory bandwidth, bytes/s">,
    Option<"intraBandwidth", "intra-bandwidth", "double", /*default=*/"450e9",
           "auto: intra-node link bandwidth per direction, bytes/s">,
    Option<"intraLatency", "intra-latency", "double", /*default=*/"3e-6",
           "auto: intra-node latency per ring step, seconds">,
    Option<"interBandwidth", "inter-bandwidth", "double", /*default=*/"50e9",
           "auto: inter-node bandwidth per rank, bytes/s">,
    Option<"interLatency", "inter-latency", "double", /*default=*/"10e-6",
           "auto: inter-node latency per ring step, seconds">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"8",
           "auto: ranks (devices) per node">,
    Option<"cpuRuntime", "cpu-runtime", "bool", /*default=*/"false",
           "auto: model the CPU runtime (MPI collectives progress only while "
           "compute waits for them; buckets are separate calls)">,
    Option<"clipping", "clipping", "bool", /*default=*/"false",
           "auto: the step clips the global gradient norm (fsdp-optimizer "
           "max-grad-norm): one small all-reduce per sharded unit">,
  ];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def ExplainPolicy : Pass<"fsdp-explain-policy", "ModuleOp"> {
  let summary = "Print why fsdp-auto-wrap policy=auto chose its units";
  let description = [{
    After `fsdp-auto-wrap policy=auto`, prints to stdout what it chose and
    why: the budget and world size, the chosen units (runs of identical
    units folded: `layers.0 .. layers.79  80 x LlamaBlock`) with their
    strategies and sizes, the schedule settings, the modelled step time
    and peak memory per rank (and what the peak is made of), how many
    configurations were searched, and the same figures for the standard
    hand policies with FULL_SHARD and fsdp-schedule's defaults (no
    wrapping, transformer layers, size-based at powers of ten), each
    marked whether it fits the budget; a policy giving the units of one
    listed before is named once below them (size thresholds folded:
    `size min-num-params=1e4 .. 1e10: the units of no wrapping`).
    `format=json` prints the same as
    one JSON object: `world_size`, `memory_budget`, `chosen` (its
    `units`, each with `module`, `class`, `numel` and `strategy`, and
    `step_seconds`, `peak_bytes`, `fits`, `schedule`, `peak_at`,
    `peak_parts`), `evaluated`, `boundaries` and `hand_policies` (each
    with `policy` and `units`, `step_seconds`, `peak_bytes`, `fits`, or
    `invalid` saying why the policy is not possible here) and
    `same_units` (hand policies that give the units of one listed before:
    `policy`, `same_units_as`).

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 \
        --fsdp-auto-wrap="policy=auto world-size=4 memory-budget=1M" \
        --fsdp-explain-policy -o /dev/null
    fsdp-explain-policy: policy=auto over 4 ranks, budget 1.00 MiB per rank
    chosen: 3 units, modelled step 0.0213 ms, peak 0.61 MiB per rank (fits)
    ...
    ```
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"text\"",
           "text or json">,
  ];
}

def Flatten : Pass<"fsdp-flatten", "ModuleOp"> {
  let summary = "Pack each FSDP unit's parameters into one flat buffer";
  let description = [{
    For every unit `fsdp-auto-wrap` chose (`fsdp.units`), creates an
    `fsdp.flat_param @"unit:<module FQN>"` holding the unit's parameters in
    flat order, padded to a multiple of `world-size` (sharded over the 1-D
    mesh `@fsdp_world`), and rewrites every read of those parameters
    (`fsdp.get_param`) into a view of the unit's full flat buffer:
    `fsdp.get_flat_param` followed by `fsdp.unflatten`, placed before the
    unit's first use. A function's per-parameter gradient results (result
    attribute `fsdp.grad_of = @param`, as `fsdp-autodiff` returns them) are
    packed (`fsdp.pack`) into one flat gradient per unit, in the same layout
    (`fsdp.flat_grad_of = @"unit:..."`); a parameter without a gradient
    contributes zeros. Layouts (offsets, padding, shard ranges) come from the
    layout library and are stored once per unit, never per rank.
    `use-orig-params` aligns every parameter's start to 16 bytes, as PyTorch
    2.x does; torch 1.13 (and the default) does not align. Ignored
    parameters keep their `fsdp.get_param`.

    A unit's strategy (its `config`, FULL_SHARD by default) decides what it
    is sharded over: FULL_SHARD and SHARD_GRAD_OP over every rank;
    NO_SHARD over none (no padding, replicated, as DDP); HYBRID_SHARD over
    the last axis of a 2-D mesh (`mesh-shape=R,S`: shard within each group
    of S ranks, replicate across the R groups).

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-auto-wrap=policy=none --fsdp-flatten=world-size=4
      mesh.mesh @fsdp_world(shape = 4)
      fsdp.flat_param @"unit:" params [@wte.weight, ...] on @fsdp_world axes [0]
          {module = ""} : tensor<28032xf32>
      ...
      %0 = fsdp.get_flat_param @"unit:" : tensor<28032xf32>
      %1:28 = fsdp.unflatten %0 of @"unit:" : tensor<28032xf32> -> ...
    ```
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks each flat buffer is sharded over">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "Device mesh shape instead of world-size, e.g. 2,4 for "
               "HYBRID_SHARD (replicate over 2 groups of 4 ranks)">,
    Option<"useOrigParams", "use-orig-params", "bool", /*default=*/"false",
           "Align each parameter to 16 bytes (PyTorch 2.x use_orig_params)">,
  ];
  let dependentDialects = ["::mlir::mesh::MeshDialect",
                           "::mlir::arith::ArithDialect"];
}

def Shard : Pass<"fsdp-shard", "ModuleOp"> {
  let summary = "Each rank's program: gathers, releases, gradient reductions and the optimizer on shards";
  let description = [{
    After `fsdp-flatten` (and, for a training step, `fsdp-autodiff` and
    `fsdp-optimizer`), rewrites every function into what one rank of the
    mesh runs, as PyTorch FSDP behaves at run time. The collectives are the
    `fsdp` dialect's side-effecting ops on the `mesh.mesh` fsdp-flatten
    made, so no later pass can merge or drop them.

    - **Parameters.** A unit's full flat buffer (`fsdp.get_flat_param`,
      unflattened) becomes this rank's shard (`fsdp.get_shard`)
      all-gathered (`fsdp.all_gather`) where the read was, and released
      (`fsdp.release`) after its last use. FULL_SHARD and HYBRID_SHARD
      gather again before the first use in the backward (the forward's
      gather is released after the forward: reshard after forward);
      SHARD_GRAD_OP keeps the forward's gather through the backward;
      NO_SHARD units are not gathered. What is computed from a unit's
      parameters alone (views, transposes, casts, slices, concatenations,
      weight-only products) is made again by each phase that reads it,
      from that phase's gather, so nothing but the gather itself is ever
      kept from the forward to the backward (`--fsdp-check-reshard`
      checks it). A new
      forward after a backward (the next micro-batch under gradient
      accumulation) gathers again. The backward is every op that computes
      only gradients, optimizer state or parameter updates; checkpointed
      recomputation counts as backward.
    - **Gradients.** A unit's flat gradient (`fsdp.flat_grad_of`) is packed
      right after its last contribution and reduce-scattered (`avg`) to the
      rank's shard at once; HYBRID_SHARD then all-reduces the shard across
      groups. Gradients of NO_SHARD units and of ignored parameters are
      all-reduced (`avg`) over every rank, as DDP does.
    - **Optimizer.** fsdp-optimizer's step is elementwise, so it runs on the
      shard as written: its reads of the flat buffer become the shard, its
      state buffers (`fsdp.state_of`) hold one shard per rank, and the
      update results are shard-sized. A sum over a shard (the squares of
      global-norm clipping) is all-reduced (`sum`) over the unit's ranks.
    - **Inference** (no gradient results): forward only, gathers and
      releases only.

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-auto-wrap=policy=none \
        --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard
      %0 = fsdp.get_shard @"unit:" : tensor<7008xf32>
      %1 = fsdp.all_gather %0 on @fsdp_world axes [0] : tensor<7008xf32> -> tensor<28032xf32>
      ...
      fsdp.release %1 : tensor<28032xf32>
      ...
      %g = fsdp.reduce_scatter %p on @fsdp_world axes [0] {reduction = "avg"}
          : tensor<28032xf32> -> tensor<7008xf32>
    ```
  }];
  let dependentDialects = ["::mlir::mesh::MeshDialect"];
}

def CheckReshard : Pass<"fsdp-check-reshard", "ModuleOp"> {
  let summary = "Checks the reshard promise: nothing made from a unit's gathered parameters lives from the forward to the backward";
  let description = [{
    An analysis of a sharded training step (after `fsdp-shard`, and after
    `fsdp-mixed-precision` or `fsdp-schedule` as well). For every gathered
    buffer of a unit (an `fsdp.all_gather`, its `fsdp.wait`, or the
    `fsdp.get_shard` of an unsharded unit) it finds the values computed
    from that buffer alone and constants (views, transposes, casts, slices,
    concatenations, weight-only products) and the ops that finally read
    them. The pass fails, naming the op and the unit, where

    - such a value is read both by the forward and by the backward: it
      would be kept from one to the other beside (or instead of) the
      buffer, for any strategy;
    - a FULL_SHARD or HYBRID_SHARD unit other than the root has a gather
      read by both the forward and the backward: the unit is not gathered
      again for the backward (it silently behaves as SHARD_GRAD_OP).

    It changes nothing. The e2e tests run it on every corpus model.

    ```
    $ fsdp-opt step.mlir --fsdp-check-reshard
    error: fsdp-check-reshard: 'onnx.Transpose' op computes a value from
      unit 'unit:blocks.0''s gathered parameters alone that is read by the
      forward and by the backward; it would live from one to the other
    ```
  }];
}

def Schedule : Pass<"fsdp-schedule", "ModuleOp"> {
  let summary = "Start collectives early on a communication stream: prefetch, rate limit, buckets";
  let description = [{
    After `fsdp-shard`, makes each rank's program a two-stream schedule.
    Every collective becomes a started one, whose result is a
    `!fsdp.future`, and an `fsdp.wait` right before the first use of its
    value; the communication stream runs it meanwhile.

    - **All-gathers are prefetched.** A unit's gather may start once the
      gather before it has been waited for: in the forward, unit i+1's
      parameters are gathered while unit i computes (`forward-prefetch`);
      in the backward, PyTorch's `BACKWARD_PRE` (`backward-prefetch=pre`,
      the default: before the current unit's gradients are computed) or
      `BACKWARD_POST` (`post`: once the previous unit's gradients are done,
      i.e. after its gathered parameters are released); `none` starts each
      gather where it is used. `limit-all-gathers=N` (PyTorch's rate
      limiter, default 2; 0: no limit) lets a gather start only after the
      gather N places earlier was released, so at most N gathered units are
      in memory or in flight. Within that window a gather starts as late as
      the cost model says still hides it behind the compute before its
      use, so gathered memory is held no longer than needed.
    - **Reductions overlap the backward.** Reduce-scatters and all-reduces
      start where `fsdp-shard` put them, right after a unit's last gradient
      contribution, and are waited for at their first use (the optimizer
      step) or where the next reduction starts, whichever comes first: each
      runs while the next unit computes its gradients, and a unit's full
      flat gradient is freed as soon as it is reduced.
    - **Buckets.** With `bucket-bytes=B > 0`, consecutive collectives of
      one kind that are each, and together, at most B bytes start together
      and carry `fsdp.bucket = <id>`, so a runtime issues them as one group
      (one NCCL group call); waits stay at each unit's use.
    - **Cost model** (recorded as the module's `fsdp.cost_model` for
      `--fsdp-timeline` and `--fsdp-unit-summary`): compute as a roofline,
      max(FLOPs / `peak-flops`, bytes / `memory-bandwidth`), FLOPs counted
      for matrix products, convolutions and attention; ring collectives
      under an alpha-beta model, (p-1) alpha + (p-1)/p N / bandwidth for an
      all-gather or reduce-scatter of N bytes over p ranks (twice that for
      an all-reduce), on the intra-node link when the group is a suffix of
      the mesh axes spanning at most `ranks-per-node` ranks, else on the
      inter-node one; a bucket's collectives pay one latency. Defaults:
      H100 SXM (989 TFLOP/s, 3.35 TB/s), NVLink 4 (450 GB/s, 3 us), 400 Gb/s
      InfiniBand (50 GB/s, 10 us), 8 per node. `cpu-runtime` models the
      CPU runtime instead, whose collectives are MPI calls: they progress
      only while the compute stream waits for them (MPI has no progress
      thread), so their time adds to the step, and a bucket's collectives
      are separate calls, each paying its latency. Without any of these options, a cost
      model recorded by `fsdp-auto-wrap policy=auto` is used, and so are
      its prefetch, limit and bucket settings unless given here.

    ```
    $ fsdp-opt model.mlir --fsdp-autodiff --fsdp-flatten=world-size=4 \
        --fsdp-shard --fsdp-schedule
      %1 = fsdp.all_gather %0 on @fsdp_world axes [0]
          : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
      ... unit a computes ...
      %2 = fsdp.wait %1 : !fsdp.future<tensor<16xf32>> -> tensor<16xf32>
    ```
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "bool", /*default=*/"true",
           "Gather the next unit's parameters while the current one computes its forward">,
    Option<"backwardPrefetch", "backward-prefetch", "std::string",
           /*default=*/"\"pre\"",
           "Backward prefetch: pre (BACKWARD_PRE), post (BACKWARD_POST) or none">,
    Option<"limitAllGathers", "limit-all-gathers", "int64_t", /*default=*/"2",
           "At most this many gathered units in memory or in flight (0: no limit)">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Start consecutive collectives of at most this many bytes together (0: off)">,
    Option<"peakFlops", "peak-flops", "double", /*default=*/"989e12",
           "Modelled device peak, FLOP/s">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", /*default=*/"3.35e12",
           "Modelled device memory bandwidth, bytes/s">,
    Option<"intraBandwidth", "intra-bandwidth", "double", /*default=*/"450e9",
           "Intra-node link bandwidth per direction, bytes/s (NVLink 4)">,
    Option<"intraLatency", "intra-latency", "double", /*default=*/"3e-6",
           "Intra-node latency per ring step, seconds">,
    Option<"interBandwidth", "inter-bandwidth", "double", /*default=*/"50e9",
           "Inter-node bandwidth per rank, bytes/s (400 Gb/s InfiniBand)">,
    Option<"interLatency", "inter-latency", "double", /*default=*/"10e-6",
           "Inter-node latency per ring step, seconds">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", /*default=*/"8",
           "Ranks (devices) per node">,
    Option<"cpuRuntime", "cpu-runtime", "bool", /*default=*/"false",
           "Model the CPU runtime: MPI collectives progress only while "
           "compute waits for them, and a bucket's collectives are separate calls">,
  ];
  // It records the cost model as an #fsdp.cost_model, on modules that may
  // hold no fsdp op yet.
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def Timeline : Pass<"fsdp-timeline", "ModuleOp"> {
  let summary = "Write the modelled schedule as Chrome-trace / Perfetto JSON";
  let description = [{
    Simulates each function of a scheduled program (after `fsdp-schedule`,
    before or after lowering) with the cost model `fsdp-schedule` recorded
    and writes a Chrome trace (`chrome://tracing`, ui.perfetto.dev): one
    thread for the compute stream, one for the communication stream, one
    complete event per op with its modelled duration, FLOPs and bytes, and
    for collectives the time the compute stream waited for them
    (`exposed_us`). `fsdp-opt --fsdp-timeline=trace.json` is short for
    `--fsdp-timeline=file=trace.json`.
  }];
  let options = [
    Option<"file", "file", "std::string", /*default=*/"\"trace.json\"",
           "Where to write the trace">,
  ];
}

def UnitSummary : Pass<"fsdp-unit-summary", "ModuleOp"> {
  let summary = "Print a table per FSDP unit: size, gathers, frees, exposed communication";
  let description = [{
    For each function of a scheduled program, prints the modelled step
    (total, compute, communication and exposed communication) and one row
    per unit: member parameters, flat elements, bytes gathered, when (in
    modelled milliseconds on the compute stream) each gather is issued and
    each gathered buffer freed, the unit's modelled communication time and
    how long the compute stream waited for the unit's collectives (queueing
    behind other collectives on the communication stream included, so it
    can exceed the unit's own communication time).

    ```
    fsdp-unit-summary: @forward: modelled step 0.052 ms (compute 0.010 ms, ...)
    unit        params  numel  gathered B  gathered at (ms)  freed at (ms) ...
    unit:a           1     16          64  0.000,0.031       0.004,0.035   ...
    ```
  }];
}

def MixedPrecision : Pass<"fsdp-mixed-precision", "ModuleOp"> {
  let summary = "Cast parameters, compute, buffers and gradient reductions to each unit's dtypes";
  let description = [{
    PyTorch FSDP's `MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)`
    on each rank's program: runs after `fsdp-shard` (before `fsdp-fuse`) and
    is the one pass that inserts dtype casts (`onnx.Cast`). Each unit's
    settings come from its `fsdp.config` (`fsdp-auto-wrap`'s `param-dtype`,
    `reduce-dtype`, `buffer-dtype`, `full-precision-classes`); the master
    copy of the parameters (the shard `fsdp.get_shard` reads), the
    optimizer and its state stay in the flat buffer's dtype (fp32).

    - **Parameters.** A unit's local shard is cast to its `param_dtype`
      before the all-gather, so the gather moves half the bytes; the gather,
      its release, the unflattened views and their reshapes are of
      `param_dtype`. A unit that is not gathered (NO_SHARD, one rank) casts
      the shard once where compute reads it; the optimizer's read of the
      shard stays fp32.
    - **Compute.** Float inputs that the forward reads are cast to the root
      unit's `param_dtype` at the start (PyTorch casts the root's forward
      inputs). Every op then computes in one dtype, its float operands cast
      to it where they differ, chosen in this order: (1) the op's unit
      (`fsdp.unit`, set by auto-wrap from the ONNX scope): that unit's
      `param_dtype`, or fp32 for a full-precision unit (`mixed_precision =
      false`) or one without `param_dtype` — so a full-precision unit casts
      its inputs to fp32 and the next unit casts its outputs back; (2) an
      operand that is a unit's parameter (a view, a reshape or transpose of
      one): that unit's compute dtype; (3) the dtype its float operands
      share; (4) otherwise the widest of them (PyTorch's type promotion).
      Float constants adapt to the op that uses them (a constant is
      re-emitted in the op's dtype). Integer and boolean values, and the
      `to` of the model's own `onnx.Cast`s, are never changed; a
      `ConstantOfShape` keeps its value's dtype.
    - **Buffers.** A model buffer (`fsdp.get_buffer`, not optimizer state
      marked `fsdp.state_of`) is read in its unit's `buffer_dtype` (the unit
      that wraps the buffer's module); a result that updates it
      (`fsdp.update_of`) is cast back to the stored dtype.
    - **Gradients.** A unit's flat gradient (`fsdp.pack`) is in its
      `param_dtype`; it is cast to `reduce_dtype` (default `param_dtype`)
      before the reduce-scatter / all-reduce, and the reduced shard is cast
      back to fp32 right after the last collective, so the optimizer and
      its state run in fp32. A gradient returned as a function result (no
      optimizer) is returned in fp32 too.
    - **Results.** Every function result keeps its declared dtype: the loss
      and model outputs are cast back to fp32 at the end.

    Units without mixed precision keep their parameters, compute and
    gradients in fp32 (a `reduce_dtype` or `buffer_dtype` of theirs still
    applies); a module where no unit sets a dtype is left unchanged. Running
    before `fsdp-shard` (a `fsdp.get_flat_param` remains) is an error.

    ```
    $ fsdp-opt m.mlir --fsdp-auto-wrap="policy=none param-dtype=bf16 reduce-dtype=f32" \
        --fsdp-autodiff --fsdp-flatten=world-size=4 --fsdp-shard --fsdp-mixed-precision
      %0 = onnx.Cast %arg0 {to = 16 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
      %1 = fsdp.get_shard @"unit:" : tensor<4xf32>
      %2 = onnx.Cast %1 {to = 16 : i64} : (tensor<4xf32>) -> tensor<4xbf16>
      %3 = fsdp.all_gather %2 on @fsdp_world axes [0] : tensor<4xbf16> -> tensor<16xbf16>
      %4 = fsdp.unflatten %3 of @"unit:" : tensor<16xbf16> -> tensor<4x4xbf16>
      ...
      %g = fsdp.pack %dw into @"unit:" : tensor<4x4xbf16> -> tensor<16xbf16>
      %r = onnx.Cast %g {to = 1 : i64} : (tensor<16xbf16>) -> tensor<16xf32>
      %s = fsdp.reduce_scatter %r on @fsdp_world axes [0] {reduction = "avg"}
          : tensor<16xf32> -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::onnxir::ONNXDialect"];
}

def Inference : Pass<"fsdp-inference", "ModuleOp"> {
  let summary = "Rewrite a training-mode export for inference";
  let description = [{
    Models are exported in TRAINING mode (so Dropout and batch-statistics
    BatchNorm survive the export); inference plans come from this rewrite,
    not from a second export. `onnx.Dropout` becomes the identity (its mask,
    if used, all true) and `onnx.BatchNormalization` with `training_mode = 1`
    normalizes with the running statistics (`training_mode = 0`, no
    statistics outputs), as PyTorch's eval() does.

    ```
    $ fsdp-opt resnet18.onnx --batch-size=2 --fsdp-inference
      %Y = onnx.BatchNormalization %x, %w, %b, %mean, %var
          : (...) -> (tensor<2x64x16x16xf32>, none, none)
    ```

    A training graph that reads the updated running statistics cannot be
    turned into inference and is an error naming the node. So is a Dropout
    whose `training_mode` is decided at run time (a graph input, or computed
    from one) and whose ratio is not 0: the plan never drops, and would
    ignore a true value.

    A Dropout that `fsdp-autodiff` kept for a training step (one with an
    `fsdp.random_op` id) is left as it is: the training pipelines run this
    pass after the gradient, which reads its mask. The random generators
    (`RandomUniform(Like)`, `RandomNormal(Like)`, `Bernoulli`) have no
    eval form and stay: an inference plan draws them (`fsdp_mlir.export`
    exports a drop path module as a Dropout, so its inference plan does
    not).
  }];
  let dependentDialects = ["::mlir::onnxir::ONNXDialect"];
}

def Autodiff : Pass<"fsdp-autodiff", "ModuleOp"> {
  let summary = "Reverse-mode gradients of the loss for every trainable parameter";
  let description = [{
    Turns `@forward`, whose only result is a scalar loss, into a training
    step: after the forward ops it builds their reverse-mode derivative and
    returns, after the loss, one gradient per trainable `fsdp.param` in
    declaration order (result attributes `fsdp.grad_of = @param` — what
    `fsdp-flatten` packs per unit — and `fsdp.name = "grad.<fqn>"`).

    - Only what depends on a trainable parameter is differentiated: frozen
      parameters get no gradient and no backward work.
    - A parameter read several times (tied weights) gets the sum of its
      uses' gradients; one that does not reach the loss gets zeros.
    - Forward values the backward reads (activations) stay explicit SSA
      values, so later passes can free or recompute them.
    - Broadcasting is undone by summing over the broadcast dimensions.

    Gradient rules exist for `Add`, `Sub`, `Mul`, `Div`, `Neg`, `Sum`,
    `Pow` (by a constant), `Sqrt`, `Reciprocal`, `Exp`, `Log`, `Abs`,
    `Erf`, `Relu`, `Tanh`, `Sigmoid`, `Cast` (between float types),
    `MatMul` (1-D operands included), `Gemm`, `Transpose`, `Reshape`,
    `Flatten`, `Squeeze`, `Unsqueeze`, `Identity`, `Expand`, `Where`,
    `Concat`, `Split`, `Slice` (constant starts, axes and steps; strided
    ones via `fsdp.gather_grad`), `Gather` (scatter-add, via
    `fsdp.gather_grad`), `ReduceSum`, `ReduceMean`, `ReduceMax`, `Softmax`,
    `LogSoftmax`, `LayerNormalization` (statistics recomputed), `Conv`
    (`fsdp.conv_grad_input`, `fsdp.conv_grad_weight`), `MaxPool` and
    `AveragePool` (`fsdp.pool_grad`), `GlobalAveragePool` and
    `SoftmaxCrossEntropyLoss` (any rank, class weights, every reduction,
    via `fsdp.softmax_cross_entropy` and `fsdp.softmax_cross_entropy_grad`:
    below) and `fsdp.attention` (with its
    `lse` result, via `fsdp.attention_grad`). Integer and boolean values
    carry no gradient. A differentiated op without a rule is an error
    naming it and its ONNX node.

    Before differentiating, `BatchNormalization` becomes the ops it
    computes: in training mode the batch's statistics, and its running
    statistics' new values (PyTorch's update: unbiased variance, the
    exported momentum) are returned after the gradients with
    `fsdp.update_of = @<buffer>`; in eval mode the running statistics.
    `Dropout` that drops nothing (ratio 0, or not training) is removed;
    one that drops (a constant ratio in (0, 1), training) stays, with its
    mask as a result, and gets its id `fsdp.random_op` (0, 1, ... in the
    function's order, before anything is cloned: the same at every world
    size); its gradient is `Where(mask, g * (1 / (1 - p)), 0)`, the
    forward's own mask. The runtime draws the mask from the session's seed
    (docs/training.md, "Randomness"). The random generators
    (`RandomUniform(Like)`, `RandomNormal(Like)`, `Bernoulli`) are numbered
    with the Dropouts; their results carry no gradient (the operator
    table's NotDifferentiable rows are never active), and a checkpointed
    unit's recomputation clones them with their id, so it draws the
    forward's numbers.

    With `loss=cross-entropy` the model may return logits instead of a
    loss: the step gains an int64 input (`labels`, shaped like the logits
    without their last dimension) and returns the mean softmax
    cross-entropy over every position, as
    `F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))`.

    Before the sweep, each differentiated `SoftmaxCrossEntropyLoss` whose
    `log_prob` is unused becomes `fsdp.softmax_cross_entropy`, the same
    loss with a second result: each position's log-sum-exp of its scores
    (f32), which the forward computes anyway. Its gradient,
    `fsdp.softmax_cross_entropy_grad` with that `lse`, is
    `exp(scores - lse)` less the one-hot labels, scaled: one pass over the
    scores instead of recomputing each position's maximum and sum of
    exponentials. A gradient op without `lse` (an older graph) still
    recomputes them.

    Attention (`fuse-attention`, on by default): before the sweep, each
    differentiated `MatMul(Softmax(mask(MatMul(q, kᵀ) * s)), v)` chain whose
    intermediates nothing else reads (fsdp-fuse's matcher) becomes
    `fsdp.attention` with its `lse` result, and its gradient one
    `fsdp.attention_grad`, FlashAttention style: the backward keeps q, k, v,
    the output and one f32 per query row instead of the `[B, H, L, S]`
    scores and probabilities, and recomputes the probabilities a tile at a
    time. A constant boolean mask that is true exactly where `j > i`, filled
    with `-inf` (torch's `masked_fill(~tril(ones(L, L)), -inf)`, as GPT-2
    and LLaMA export it), becomes `mask_kind = "causal"` without a mask
    operand. A head split's and merge's transposes around the chain fold
    into the fused op as `layout = "bshd"` (fsdp-fuse's rule), so the
    backward has none either. A chain whose mask depends on a trainable
    parameter stays decomposed (fsdp.attention_grad gives the mask no
    gradient), as does every chain with `fuse-attention=false`.

    Batch norm (`fuse-batch-norm`, on by default): a training-mode
    `BatchNormalization` becomes one `fsdp.batch_norm_train` (the output,
    the batch's mean and inverse standard deviation saved for the backward,
    and the running statistics' new values, the same update as above), and
    its gradient one `fsdp.batch_norm_grad`, as torch's `native_batch_norm`
    and `native_batch_norm_backward`; with `fuse-batch-norm=false` it is
    decomposed as described above. Eval-mode ones are decomposed either way.

    Norms and activations (`fuse-gradients`, on by default): before the
    sweep, fsdp-fuse's GELU (erf and tanh forms), SiLU and RMSNorm chains
    become `fsdp.gelu`, `fsdp.silu` and `fsdp.rms_norm`; their gradients,
    and a `LayerNormalization`'s whose scale and bias have the normalised
    dims' shape, are one `fsdp.activation_grad` or `fsdp.norm_grad` (the
    row statistics recomputed from x, as torch's `gelu_backward`,
    `silu_backward` and `native_layer_norm_backward` do) instead of their
    decomposed elementwise and reduce ops.

    Activation checkpointing (after `fsdp-auto-wrap`): a checkpointed FSDP
    unit's forward ops are run again at the start of that unit's backward
    and its gradient rules read the copies, so the unit's activations die
    with the forward; only values entering the unit are kept.
    `checkpoint-units` checkpoints every non-root unit; the selectors pick
    units the way auto-wrap's policies pick modules, or-composed:
    `checkpoint-classes` (the unit's module class, the transformer form),
    `checkpoint-min-num-params` (the unit's parameter count, the size form)
    and `checkpoint-pattern` (a regex over the unit's FQN, whole match).
    Selectors that match no non-root unit are an error listing the units.

    ```
    $ fsdp-opt mlp.onnx --batch-size=8 --fsdp-autodiff
      func.func @forward(...) -> (tensor<f32> {fsdp.name = "loss"},
          tensor<16x8xf32> {fsdp.grad_of = @fc1.weight, fsdp.name = "grad.fc1.weight"}, ...)
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "Attach a loss to a model that returns logits: 'cross-entropy' "
           "(mean softmax cross-entropy over the last dimension, leading "
           "dimensions flattened)">,
    Option<"labels", "labels", "std::string", /*default=*/"\"labels\"",
           "Name of the int64 labels input the attached loss adds">,
    Option<"logits", "logits", "std::string", /*default=*/"\"\"",
           "Name of the result holding the logits (needed when the model "
           "returns several)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value the attached loss ignores (PyTorch's default)">,
    Option<"checkpointUnits", "checkpoint-units", "bool", /*default=*/"false",
           "Activation checkpointing: recompute each non-root FSDP unit's "
           "forward (fsdp-auto-wrap's units) inside its backward instead of "
           "keeping its activations">,
    ListOption<"checkpointClasses", "checkpoint-classes", "std::string",
               "Checkpoint the FSDP units whose module is of one of these "
               "classes">,
    Option<"checkpointMinNumParams", "checkpoint-min-num-params", "int64_t",
           /*default=*/"0",
           "Checkpoint the FSDP units with at least this many parameters "
           "(0: off)">,
    Option<"checkpointPattern", "checkpoint-pattern", "std::string",
           /*default=*/"\"\"",
           "Checkpoint the FSDP units whose FQN matches this regex">,
    Option<"fuseAttention", "fuse-attention", "bool", /*default=*/"true",
           "Differentiate softmax attention as fsdp.attention (saving each "
           "row's log-sum-exp) and fsdp.attention_grad instead of its "
           "decomposed ops (false: keep the scores and probabilities)">,
    Option<"fuseBatchNorm", "fuse-batch-norm", "bool", /*default=*/"true",
           "Train BatchNormalization as fsdp.batch_norm_train (saving the "
           "batch's mean and inverse std) and fsdp.batch_norm_grad instead "
           "of its decomposed elementwise and reduce ops">,
    Option<"fuseGradients", "fuse-gradients", "bool", /*default=*/"true",
           "Form GELU, SiLU and RMSNorm chains before the sweep and "
           "differentiate them and LayerNormalization with one fused "
           "fsdp.activation_grad or fsdp.norm_grad each (false: their "
           "decomposed ops, and GELU, SiLU, RMSNorm stay chains)">
  ];
  let dependentDialects = ["::mlir::onnxir::ONNXDialect",
                           "::mlir::fsdp::FSDPDialect"];
}

def Optimizer : Pass<"fsdp-optimizer", "ModuleOp"> {
  let summary = "The optimizer step as elementwise IR on parameters, gradients and state";
  let description = [{
    Turns the training step `fsdp-autodiff` built (loss, one gradient per
    trainable parameter, buffer updates) into a whole training step: it
    takes two more scalar f32 inputs, `lr` (the learning rate) and `step`
    (1 for the first step, then 2, 3, ...), and returns the loss and the
    new value of every trainable parameter and optimizer state, marked
    `fsdp.update_of = @<symbol>` (the runtime writes them back after the
    run), besides the buffer updates. The gradients are consumed.

    Every op of an update is elementwise on (parameter, gradient, state)
    and scalars, so sharding can run it on each rank's flat shard as it is.
    After `fsdp-flatten`, the step updates each unit's flat buffer from its
    flat gradient (`fsdp.flat_grad_of`), with one flat state buffer per
    unit (`optim.<state>.unit:<module>`, `fsdp.state_of = @"unit:..."`).
    Each gradient consumed is first marked by an `onnx.Identity` carrying
    `fsdp.grad_of` / `fsdp.flat_grad_of`, where `fsdp-shard` reduces it.
    Optimizer state lives in `fsdp.buffer`s without initial data (zeros),
    named `optim.<state>.<fqn>` (`momentum_buffer`, `exp_avg`,
    `exp_avg_sq`, PyTorch's state names) and marked `fsdp.state_of =
    @<fqn>`; it is fp32 whatever the parameter's type.

    - `sgd`: PyTorch's SGD: weight decay added to the gradient, momentum
      (the first step's buffer is the gradient), dampening, Nesterov.
    - `adamw`: PyTorch's AdamW: decoupled weight decay, bias-corrected
      moments, `eps` added to the corrected root.
    - `max-grad-norm`: gradients scaled by `min(1, max / (norm + 1e-6))`,
      the norm over every gradient (`clip_grad_norm_`). Once gradients
      are sharded, `fsdp-shard` all-reduces each shard's sum of squares.
    - `fused` (default on): each parameter's (or unit's) update is one
      `fsdp.sgd` / `fsdp.adamw` op, which the runtime runs as one in-place
      pass over its buffers, the clipping coefficient an operand of it;
      `fused=false` builds the same arithmetic from elementwise ONNX ops.
    - `accumulate=N`: gradient accumulation over N micro-batches. Every
      input's first dimension grows N-fold; the step runs forward and
      backward on each slice in turn (activations of one micro-batch die
      before the next starts), averages the gradients and the loss (each
      micro-batch's loss weighted 1/N, as `(loss / N).backward()`), chains
      BatchNorm's running statistics through the micro-batches, and
      updates once.

    ```
    $ fsdp-opt m.onnx --batch-size=8 --fsdp-autodiff \
        --fsdp-optimizer="optimizer=adamw weight-decay=0.01 max-grad-norm=1"
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "weight decay (default: 0 for sgd, 0.01 for adamw, as PyTorch)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "clip gradients to this global norm (0: no clipping)">,
    Option<"accumulate", "accumulate", "int64_t", /*default=*/"1",
           "micro-batches whose gradients are averaged before one update">,
    Option<"fused", "fused", "bool", /*default=*/"true",
           "one fsdp.sgd / fsdp.adamw op per parameter (false: the "
           "elementwise ONNX ops)">
  ];
  let dependentDialects = ["::mlir::onnxir::ONNXDialect",
                           "::mlir::fsdp::FSDPDialect"];
}

def Fuse : Pass<"fsdp-fuse", "ModuleOp"> {
  let summary = "Recognise decomposed activations, norms, attention and epilogues";
  let description = [{
    torch exports GELU, LayerNorm, RMSNorm, SiLU and attention as chains of
    primitive ONNX ops. This pass rewrites each chain into the one fused op
    the runtime has a kernel for, when (and only when) the chain computes
    exactly that function and its intermediate values have no other users:

    | chain (as torch 1.13 exports it) | fused op |
    |---|---|
    | `Div(x, √2), Erf, Add 1, Mul x, Mul 0.5` | `fsdp.gelu` |
    | `Mul x·x·x, Mul 0.044715, Add x, Mul √(2/π), Tanh, Add 1, Mul x, Mul 0.5` | `fsdp.gelu {approximate = "tanh"}` |
    | `Sigmoid(x), Mul x` | `fsdp.silu` |
    | `ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, [Mul scale], [Add bias]` | `onnx.LayerNormalization` |
    | `Pow 2, ReduceMean(-1), Add eps, Sqrt, Reciprocal or Div(1, ·), Mul x, [Mul scale]` | `fsdp.rms_norm` |
    | `MatMul(q, kᵀ), Mul s or Div d, [Add mask or Where(mask, fill, ·)], Softmax(-1), MatMul v` | `fsdp.attention` |
    | the same, q and v `Transpose(0, 2, 1, 3)` of `[B, S, H, D]`, kᵀ `Transpose(0, 2, 3, 1)` of it, the result's one use `Transpose(0, 2, 1, 3)` (a head split and merge) | `fsdp.attention {layout = "bshd"}` on the untransposed tensors, giving the merge's result |
    | `MatMul(x, Transpose(w))`, `MatMul(x, w)` (2-D w) or `Gemm(x, w, b)` (transB, alpha = beta = 1), then `[Add bias]`, `[Relu, Tanh, Sigmoid, fsdp.gelu, fsdp.silu]` | `fsdp.linear` |

    Between the chains and the linear epilogues, transposes that a GEMM can
    read in place become its flags (the gradients of `nn.Linear`):

    | pattern | becomes |
    |---|---|
    | `Transpose(Transpose(x))` | one `Transpose` by the composed permutation, or `x` |
    | `Transpose(MatMul(a, b))`, 2-D, the product used once | `MatMul(bᵀ, aᵀ)` |
    | `MatMul(Transpose(a), b)`, 2-D | `Gemm(a, b) {transA}` (and `transB` when b is a `Transpose` too) |

    Near misses (another constant, another axis, an intermediate used
    elsewhere) are left alone. Run it after `fsdp-inference` and before
    `fsdp-lower-to-runtime`.

    ```
    $ fsdp-opt bert.onnx --fsdp-inference --fsdp-fuse
      %y = fsdp.linear %x, %w, %b {activation = "gelu", transpose_weight} : ...
    ```
  }];
  let dependentDialects = ["::mlir::onnxir::ONNXDialect",
                           "::mlir::fsdp::FSDPDialect"];
}

def LowerToRuntime : Pass<"fsdp-lower-to-runtime", "ModuleOp"> {
  let summary = "Lower ONNX and fused ops to runtime kernels";
  let description = [{
    Rewrites every compute op of `@forward` into an `fsdp.kernel` (one runtime
    kernel launch, with normalised parameters: non-negative axes, defaults
    made explicit, constant operands such as Slice bounds or reduction axes
    turned into parameters) or, for ops that only reinterpret a shape
    (`Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Identity`), an
    `fsdp.view`. Parameters, buffers and constants stay as they are; the plan
    writer places them in their own arenas. docs/plan-format.md lists the
    kernels.

    Every shape must be static (import with `--batch-size`). An op the
    runtime has no kernel for, or a form it does not support (a dynamic
    shape, a training-mode BatchNormalization — run `fsdp-inference` first),
    is an error naming the ONNX node.

    ```
    $ fsdp-opt gpt2.onnx --batch-size=2 --fsdp-inference --fsdp-fuse \
        --fsdp-lower-to-runtime
      %5 = fsdp.kernel "linear"(%3, %4) params {activation = "none", trans_w = 1 : i64} ...
    ```
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

def PlanMemory : Pass<"fsdp-plan-memory", "ModuleOp"> {
  let summary = "Static memory plan: arena offsets from liveness";
  let description = [{
    Gives every activation of a lowered `@forward` (each `fsdp.kernel`
    result and each function argument) a byte offset in one activation
    arena, such that two tensors share bytes only when their lifetimes do
    not overlap. Lifetimes are intervals over the kernel order; a
    `fsdp.view` extends the lifetime of what it views; inputs and results
    live for the whole run (so a plan can run again on the same inputs).
    Placement is greedy: largest first, by size and by size times lifetime,
    each in the lowest or in the tightest gap that fits; the smallest of
    these four arenas is kept. Each tensor is aligned to `alignment` bytes.

    Writes `fsdp.offsets` on each kernel, `fsdp.offset` on each argument and
    `fsdp.activation_bytes` (the arena size: the plan's peak activation
    memory) on the function. With `report` it also prints the peak, the sum
    of all activation sizes (what a planner-less runtime would hold) and
    their ratio.

    In a sharded program a gathered unit (`fsdp.all_gather`, started or
    not) lives from its gather to its `fsdp.release`, and a started
    collective's input until its `fsdp.wait`, so prefetching and the
    in-flight limit show in the peak. `timeline=true` (or
    `--fsdp-memory-timeline`, which plans again and prints) prints one
    rank's memory over the step: at every collective, wait and release and
    at the peak, the live bytes of gathered parameters, flat gradients
    (packed), reduced gradients (collective results), other activations,
    and the total with the rank's state (shards, replicated parameters,
    buffers, optimizer state) and constants, which live all step; then
    the peak per rank, which is the plan's `peak_bytes`.

    ```
    $ fsdp-opt gpt2.onnx ... --fsdp-lower-to-runtime --fsdp-plan-memory=report
    fsdp-plan-memory: @forward: 91 activations, 172,032 bytes without reuse,
      peak 24,576 bytes (0.14x)
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t",
           /*default=*/"::fsdp::layout::kTensorAlignmentBytes",
           "Byte alignment of every activation (default: the plan's tensor "
           "alignment, as for weights and constants)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the peak activation memory to stderr">,
    Option<"timeline", "timeline", "bool", /*default=*/"false",
           "Print each rank's memory over the step to stdout (what "
           "--fsdp-memory-timeline runs)">,
  ];
}

#endif // FSDP_TRANSFORMS_PASSES
