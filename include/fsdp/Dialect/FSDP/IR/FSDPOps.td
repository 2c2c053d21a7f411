//===- FSDPOps.td - fsdp dialect attributes and operations -*- tablegen -*-===//

#ifndef FSDP_OPS
#define FSDP_OPS

include "fsdp/Dialect/FSDP/IR/FSDPDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def FSDP_FutureType : TypeDef<FSDP_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "the pending result of a started collective";
  let description = [{
    What an asynchronous collective returns: its result, still being
    communicated on the communication stream. `fsdp.wait` turns it into the
    value; nothing else may read it. `fsdp-schedule` starts collectives
    early (prefetch) and waits right before the first use.

    ```mlir
    %f = fsdp.all_gather %s on @fsdp_world axes [0]
        : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<16xf32>>
    ```
  }];
  let parameters = (ins "::mlir::Type":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

/// A collective's result: the value, or its future when started early.
def FSDP_CollectiveResult : AnyTypeOf<[AnyRankedTensor, FSDP_FutureType]>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def FSDP_DataRefAttr : AttrDef<FSDP_Dialect, "DataRef"> {
  let mnemonic = "data_ref";
  let summary = "where a tensor's bytes live: a file, a byte offset and a length";
  let description = [{
    Points at the raw little-endian bytes of a parameter or buffer inside a
    file: an ONNX external-data file, or the `.onnx` file itself for an
    embedded initializer. The compiler never reads these bytes; the runtime
    reads only the part each rank owns. A relative `file` is resolved against
    the directory of the model the module was imported from.

    ```mlir
    #fsdp.data_ref<"model.onnx.data", offset = 4096, length = 512>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"file the bytes are in">:$file,
    "int64_t":$offset,
    "int64_t":$length
  );
  let assemblyFormat = "`<` $file `,` `offset` `=` $offset `,` `length` `=` $length `>`";
  let genVerifyDecl = 1;
}

def FSDP_ModuleAttr : AttrDef<FSDP_Dialect, "Module"> {
  let mnemonic = "module";
  let summary = "one module of the model's PyTorch module hierarchy";
  let description = [{
    A module of the model as PyTorch registered it: its FQN (`""` for the
    root), its class name (`""` when the export does not carry it), the FQNs
    of its own parameters and buffers (`named_parameters(recurse=False)`
    order; a tied parameter is listed under every module holding it, by the
    name it has there), and its children's FQNs in registration order.
    `fsdp-module-tree` records the hierarchy as a list of these, in
    `named_modules()` (pre-)order, in the module attribute `fsdp.modules`.

    ```mlir
    #fsdp.module<"blocks.0.ln_1", class = "LayerNorm",
                 params = ["blocks.0.ln_1.weight", "blocks.0.ln_1.bias"],
                 buffers = [], children = []>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the module's FQN">:$fqn,
    StringRefParameter<"the module's class name">:$className,
    "ArrayAttr":$params,
    "ArrayAttr":$buffers,
    "ArrayAttr":$children
  );
  let assemblyFormat = [{
    `<` $fqn `,` `class` `=` $className `,` `params` `=` $params `,`
    `buffers` `=` $buffers `,` `children` `=` $children `>`
  }];
}

def FSDP_ShardingStrategy : I32EnumAttr<"ShardingStrategy",
    "FSDP sharding strategy", [
      I32EnumAttrCase<"FULL_SHARD", 0>,
      I32EnumAttrCase<"SHARD_GRAD_OP", 1>,
      I32EnumAttrCase<"NO_SHARD", 2>,
      I32EnumAttrCase<"HYBRID_SHARD", 3>
    ]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_ShardingStrategyAttr
    : EnumAttr<FSDP_Dialect, FSDP_ShardingStrategy, "strategy"> {
  let summary = "an FSDP unit's sharding strategy";
  let description = [{
    PyTorch's `ShardingStrategy`, the `strategy` of a unit's configuration:
    `FULL_SHARD` (parameters gathered for the forward and again for the
    backward, gradients reduce-scattered), `SHARD_GRAD_OP` (parameters kept
    gathered from the forward to the backward), `NO_SHARD` (every rank holds
    everything, gradients all-reduced) and `HYBRID_SHARD` (FULL_SHARD
    within a group of the 2-D mesh, replicated across groups). A unit
    without one is FULL_SHARD.

    ```mlir
    #fsdp.unit_config<strategy = #fsdp.strategy<SHARD_GRAD_OP>>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

/// A unit configuration's strategy, printed whole (`#fsdp.strategy<...>`) so
/// that it reads the same wherever a configuration is written.
def FSDP_OptionalStrategyParameter
    : OptionalParameter<"::mlir::fsdp::ShardingStrategyAttr",
                        "the unit's sharding strategy"> {
  let printer = "$_printer.printAttribute($_self)";
}

def FSDP_UnitConfigAttr : AttrDef<FSDP_Dialect, "UnitConfig"> {
  let mnemonic = "unit_config";
  let summary = "an FSDP unit's own settings: its strategy and mixed precision";
  let description = [{
    What PyTorch passes to one `FullyShardedDataParallel` instance beyond
    its module: `strategy` (an `#fsdp.strategy`; FULL_SHARD when left out)
    and `MixedPrecision`'s dtypes `param_dtype` (the gathered parameters and
    the compute), `reduce_dtype` (the gradient reduction; `param_dtype` when
    left out) and `buffer_dtype` (the module's buffers; as stored when left
    out), each f32, f16, bf16 or f64. `mixed_precision = false` keeps the
    unit in full precision whatever dtypes it has (auto-wrap's
    full-precision classes, batch norms by default). A field left out keeps
    PyTorch's default, so only what differs is recorded.

    `fsdp-auto-wrap` writes it as a `#fsdp.unit`'s `config`, `fsdp-flatten`
    copies it to the unit's `fsdp.flat_param` as `fsdp.config`, and
    `fsdp-shard`, `fsdp-check-reshard` and `fsdp-mixed-precision` read it
    there.

    ```mlir
    #fsdp.unit_config<strategy = #fsdp.strategy<SHARD_GRAD_OP>,
                      param_dtype = bf16, reduce_dtype = f32>
    #fsdp.unit_config<mixed_precision = false>
    ```
  }];
  let parameters = (ins
    FSDP_OptionalStrategyParameter:$strategy,
    OptionalParameter<"::mlir::Type", "the gathered parameters' dtype">:$param_dtype,
    OptionalParameter<"::mlir::Type", "the gradient reduction's dtype">:$reduce_dtype,
    OptionalParameter<"::mlir::Type", "the buffers' dtype">:$buffer_dtype,
    OptionalParameter<"::mlir::BoolAttr", "false: full precision">:$mixed_precision
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The unit's sharding strategy: its own, or FULL_SHARD.
    ShardingStrategy getShardingStrategy() const {
      return getStrategy() ? getStrategy().getValue()
                           : ShardingStrategy::FULL_SHARD;
    }
    /// The strategy of a unit with configuration `config`, which may be
    /// null (PyTorch's defaults).
    static ShardingStrategy strategyOf(UnitConfigAttr config) {
      return config ? config.getShardingStrategy()
                    : ShardingStrategy::FULL_SHARD;
    }
    /// Whether the unit stays in full precision, its dtypes ignored.
    bool isFullPrecision() const {
      return getMixedPrecision() && !getMixedPrecision().getValue();
    }
  }];
}

def FSDP_WrapUnitAttr : AttrDef<FSDP_Dialect, "WrapUnit"> {
  let mnemonic = "unit";
  let summary = "one FSDP unit chosen by auto-wrap: its module and parameters";
  let description = [{
    An FSDP unit (one `FullyShardedDataParallel` instance in PyTorch): the
    FQN of the module it wraps (`""` for the root) and the parameters its
    flat buffer will hold, in flat order (the order of the module's
    `parameters()`, each tied tensor once). `fsdp-auto-wrap` records the
    units in the module attribute `fsdp.units`, root first, then in module
    pre-order, as PyTorch's FSDP tree is nested.

    `config` holds the unit's own settings (an `#fsdp.unit_config`, written
    without its `#fsdp.unit_config` prefix), where it has any.
    `fsdp-flatten` copies it to the unit's `fsdp.flat_param` as `fsdp.config`.

    ```mlir
    #fsdp.unit<"blocks.0", params = [@blocks.0.ln_1.weight, @blocks.0.ln_1.bias],
               config = <strategy = #fsdp.strategy<SHARD_GRAD_OP>, param_dtype = bf16>>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the wrapped module's FQN">:$module,
    "ArrayAttr":$params,
    OptionalParameter<"UnitConfigAttr">:$config
  );
  let assemblyFormat = [{
    `<` $module `,` `params` `=` $params (`,` `config` `=` $config^)? `>`
  }];
  let extraClassDeclaration = [{
    /// The unit's sharding strategy: its config's, or FULL_SHARD.
    ShardingStrategy getStrategy() const {
      return UnitConfigAttr::strategyOf(getConfig());
    }
  }];
}

def FSDP_WrapEvaluationAttr : AttrDef<FSDP_Dialect, "WrapEvaluation"> {
  let mnemonic = "wrap_evaluation";
  let summary = "one wrap policy as policy=auto's cost model evaluated it";
  let description = [{
    A configuration `fsdp-auto-wrap policy=auto` evaluated: the policy's
    name, its number of units, the modelled step time in seconds, the
    modelled peak memory per rank in bytes, whether that fits the memory
    budget, and, for a policy that cannot be used, why (`invalid`).

    ```mlir
    #fsdp.wrap_evaluation<policy = "size min-num-params=1e4", units = 3,
        step_seconds = 1.5e-03 : f64, peak_bytes = 65536, fits = true>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the policy's name">:$policy,
    "int64_t":$units,
    "::mlir::FloatAttr":$step_seconds,
    "int64_t":$peak_bytes,
    "::mlir::BoolAttr":$fits,
    OptionalParameter<"::mlir::StringAttr">:$invalid
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def FSDP_PeakPartAttr : AttrDef<FSDP_Dialect, "PeakPart"> {
  let mnemonic = "peak_part";
  let summary = "one part of the modelled peak memory and its bytes";
  let description = [{
    ```mlir
    #fsdp.peak_part<part = "gathered parameters", bytes = 4096>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"what the bytes hold">:$part,
    "int64_t":$bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def FSDP_SameUnitsAttr : AttrDef<FSDP_Dialect, "SameUnits"> {
  let mnemonic = "same_units";
  let summary = "a hand policy that chose the same units as another";
  let description = [{
    ```mlir
    #fsdp.same_units<policy = "size min-num-params=1e5",
                     same_units_as = "size min-num-params=1e4">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the policy left out">:$policy,
    StringRefParameter<"the policy it chose the same units as">:$same_units_as
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def FSDP_AutoWrapRecordAttr : AttrDef<FSDP_Dialect, "AutoWrapRecord"> {
  let mnemonic = "auto_wrap";
  let summary = "what fsdp-auto-wrap policy=auto decided, and why";
  let description = [{
    `fsdp-auto-wrap policy=auto` records its decision in the module attribute
    `fsdp.auto_wrap`: the ranks (`world_size`, and `mesh_shape` for
    HYBRID_SHARD's 2-D mesh), the memory budget per rank in bytes (0: none)
    and the reserve fraction kept free, whether a training step with
    `optimizer_states` state tensors per parameter was modelled, the chosen
    configuration (`chosen`), where its peak is reached and of what it is
    made, the schedule it chose (`forward_prefetch`, `backward_prefetch`,
    `limit_all_gathers`, `bucket_bytes`), how many configurations and unit
    boundaries the search evaluated, the hand policies it compared with
    (`#fsdp.wrap_evaluation`s), those it left out as choosing the same units
    as another (`#fsdp.same_units`), and `use_orig_params` when it was
    asked for.

    `fsdp-flatten` checks that it shards over the same ranks,
    `fsdp-schedule` takes the chosen schedule, `fsdp-plan-memory` holds the
    plan to the budget, and `fsdp-explain-policy` prints the record. Every
    field but `mesh_shape` and `use_orig_params` is required.

    ```mlir
    module attributes {fsdp.auto_wrap = #fsdp.auto_wrap<world_size = 2,
        memory_budget = 0, memory_reserve = 1.0e-01 : f64, training = true,
        optimizer_states = 2, chosen = <policy = "auto", units = 3,
        step_seconds = 1.0e-03 : f64, peak_bytes = 65536, fits = true>,
        peak_at = "backward of blocks.0", peak_parts = [],
        forward_prefetch = false, backward_prefetch = "pre",
        limit_all_gathers = 2, bucket_bytes = 0, evaluated = 10,
        boundaries = 4, hand_policies = [], same_units = []>} {
    }
    ```
  }];
  let parameters = (ins
    "int64_t":$world_size,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$mesh_shape,
    "int64_t":$memory_budget,
    "::mlir::FloatAttr":$memory_reserve,
    "::mlir::BoolAttr":$training,
    "int64_t":$optimizer_states,
    "WrapEvaluationAttr":$chosen,
    StringRefParameter<"where the chosen peak is reached">:$peak_at,
    "::mlir::ArrayAttr":$peak_parts,
    "::mlir::BoolAttr":$forward_prefetch,
    StringRefParameter<"pre, post or none">:$backward_prefetch,
    "int64_t":$limit_all_gathers,
    "int64_t":$bucket_bytes,
    "int64_t":$evaluated,
    "int64_t":$boundaries,
    "::mlir::ArrayAttr":$hand_policies,
    "::mlir::ArrayAttr":$same_units,
    OptionalParameter<"::mlir::UnitAttr">:$use_orig_params
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The lists, as their elements' kinds (the verifier checks them).
    auto getPeakPartList() const {
      return getPeakParts().getAsRange<PeakPartAttr>();
    }
    auto getHandPolicyList() const {
      return getHandPolicies().getAsRange<WrapEvaluationAttr>();
    }
    auto getSameUnitsList() const {
      return getSameUnits().getAsRange<SameUnitsAttr>();
    }
  }];
}

def FSDP_CostModelAttr : AttrDef<FSDP_Dialect, "CostModel"> {
  let mnemonic = "cost_model";
  let summary = "the cost model's machine: peak rates, bandwidths, latencies";
  let description = [{
    The figures `CostModel` prices compute and collectives with, as
    `fsdp-auto-wrap policy=auto` recorded them in the module attribute
    `fsdp.cost_model` for `fsdp-schedule` and `fsdp-explain-policy`: peak
    FLOP/s, memory bandwidth (bytes/s), the bandwidth and latency (seconds)
    of links inside a node and between nodes, ranks per node, and whether
    the CPU runtime (no overlap of communication and compute) is modelled.
    A field left out keeps the cost model's default.

    ```mlir
    #fsdp.cost_model<peak_flops = 1.0e+12 : f64, cpu_runtime = true>
    ```
  }];
  let parameters = (ins
    OptionalParameter<"::mlir::FloatAttr">:$peak_flops,
    OptionalParameter<"::mlir::FloatAttr">:$memory_bandwidth,
    OptionalParameter<"::mlir::FloatAttr">:$intra_bandwidth,
    OptionalParameter<"::mlir::FloatAttr">:$intra_latency,
    OptionalParameter<"::mlir::FloatAttr">:$inter_bandwidth,
    OptionalParameter<"::mlir::FloatAttr">:$inter_latency,
    OptionalParameter<"::mlir::IntegerAttr">:$ranks_per_node,
    OptionalParameter<"::mlir::BoolAttr">:$cpu_runtime
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

def FSDP_ParamOp : FSDP_Op<"param", [Symbol]> {
  let summary = "a model parameter: name, type, trainability and storage";
  let description = [{
    Declares one model parameter as a module-level symbol. The symbol name is
    the parameter's original PyTorch fully qualified name (FQN), e.g.
    `blocks.0.attn.q.weight`, so state dicts keep PyTorch's names. The type
    gives shape and element type; `frozen` marks a parameter with
    `requires_grad=False` (no gradient, no optimizer state). The optional
    `at` clause says where the parameter's bytes are; its length must equal
    the tensor's size in bytes. A parameter without one is initialised by
    the host at load time. `aliases` lists the parameter's other names when
    it is tied (shared) with other modules, e.g. `lm_head.weight` for a
    token embedding; the parameter is stored once, under its first name.

    ```mlir
    fsdp.param @"blocks.0.attn.q.weight" : tensor<64x64xf32>
        at #fsdp.data_ref<"model.onnx.data", offset = 0, length = 16384>
    fsdp.param @"embed.weight" : tensor<1000x64xbf16> frozen
    fsdp.param @"wte.weight" : tensor<64x32xf32> {aliases = ["lm_head.weight"]}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<AnyStaticShapeTensor>:$type,
    UnitAttr:$frozen,
    OptionalAttr<FSDP_DataRefAttr>:$data,
    OptionalAttr<StrArrayAttr>:$aliases
  );
  let assemblyFormat = [{
    $sym_name `:` $type (`frozen` $frozen^)? (`at` $data^)? attr-dict
  }];
  let extraClassDeclaration = [{
    /// The parameter's type.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// PyTorch's `requires_grad`.
    bool requiresGrad() { return !getFrozen(); }
  }];
  let hasVerifier = 1;
}

def FSDP_BufferOp : FSDP_Op<"buffer", [Symbol]> {
  let summary = "a model buffer: mutable state that is not trained";
  let description = [{
    Declares one model buffer (PyTorch `register_buffer`), e.g. BatchNorm's
    running statistics: state that training updates and state dicts carry,
    but that has no gradient and is never sharded. The symbol name is the
    buffer's FQN; `at` says where its initial bytes are, as for
    `fsdp.param`.

    ```mlir
    fsdp.buffer @"bn1.running_mean" : tensor<64xf32>
        at #fsdp.data_ref<"resnet18.onnx", offset = 1024, length = 256>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    TypeAttrOf<AnyStaticShapeTensor>:$type,
    OptionalAttr<FSDP_DataRefAttr>:$data
  );
  let assemblyFormat = [{
    $sym_name `:` $type (`at` $data^)? attr-dict
  }];
  let extraClassDeclaration = [{
    /// The buffer's type.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
  let hasVerifier = 1;
}

def FSDP_GetBufferOp : FSDP_Op<"get_buffer", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "the current value of a buffer";
  let description = [{
    Reads the value of an `fsdp.buffer`; the result type must be the
    buffer's type.

    ```mlir
    %m = fsdp.get_buffer @"bn1.running_mean" : tensor<64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$buffer attr-dict `:` type($result)";
}

def FSDP_GetParamOp : FSDP_Op<"get_param", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "the current value of a parameter";
  let description = [{
    Reads the full (unsharded) value of an `fsdp.param`. The result type must
    be the parameter's type. Before sharding, compute refers to parameters
    through this op; `fsdp-flatten` and `fsdp-shard` replace it with views of
    gathered flat buffers. It reads state, since training updates parameters.

    ```mlir
    %w = fsdp.get_param @"fc.weight" : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def FSDP_FlatParamOp : FSDP_Op<"flat_param", [
    Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one FSDP unit's flat buffer: member parameters and layout";
  let description = [{
    Declares the flat buffer of one FSDP unit (PyTorch's `FlatParameter`):
    the listed parameters concatenated in order, each start rounded up to a
    multiple of `alignment` elements (default 1, as in torch 1.13), then
    zero-padded at the end to a multiple of the world size. The world size is
    the product of the sizes of the `mesh.mesh` axes named by `on ... axes`;
    without `on`, the unit is unsharded (world size 1). Rank `r` owns the
    `r`-th of the world-size equal chunks, so trailing ranks may own padding
    only. The offsets are derived by the project's layout library and are not
    stored; the type is the padded flat buffer and is checked against it.

    Like PyTorch, a flat parameter requires its members to share one element
    type and to be uniformly trainable or frozen, and lists each parameter
    once. `module` records the FQN of the module the unit wraps.

    ```mlir
    mesh.mesh @world(shape = 4)
    fsdp.param @"fc.weight" : tensor<2x3xf32>
    fsdp.param @"fc.bias" : tensor<2xf32>
    // 8 elements padded to a multiple of 4: no padding; each rank owns 2.
    fsdp.flat_param @fc params [@"fc.weight", @"fc.bias"]
        on @world axes [0] : tensor<8xf32>
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefArrayAttr:$params,
    OptionalAttr<FlatSymbolRefAttr>:$mesh,
    DefaultValuedAttr<DenseI16ArrayAttr, "{}">:$mesh_axes,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$alignment,
    TypeAttrOf<1DTensorOf<[AnyType]>>:$type,
    OptionalAttr<StrAttr>:$module
  );
  let assemblyFormat = [{
    $sym_name `params` $params (`on` $mesh^ `axes` $mesh_axes)? attr-dict
    `:` $type
  }];
  let extraClassDeclaration = [{
    /// The flat buffer's type.
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    // resolveParams, resolveWorldSize and computeLayout are free functions in
    // FSDPOps.h: they name ParamOp, which is declared after this class.
  }];
}

def FSDP_GetFlatParamOp : FSDP_Op<"get_flat_param", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "the full (unsharded) value of a unit's flat buffer";
  let description = [{
    Reads the whole flat buffer of an `fsdp.flat_param`, padding included.
    `fsdp-flatten` reads each unit's parameters through this op and
    `fsdp.unflatten`; `fsdp-shard` later turns it into an all-gather of the
    rank's local shard.

    ```mlir
    %flat = fsdp.get_flat_param @"unit:fc" : tensor<8xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit);
  let results = (outs 1DTensorOf<[AnyType]>:$result);
  let assemblyFormat = "$unit attr-dict `:` type($result)";
}

def FSDP_PackOp : FSDP_Op<"pack", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "values laid out as a unit's flat buffer (gradients)";
  let description = [{
    The inverse of `fsdp.unflatten`: places one value per member parameter of
    the flat parameter `@unit` (in flat order, each with its parameter's
    type) at the parameter's offset in a buffer of the unit's flat type,
    with zeros in the alignment gaps and the padding. `fsdp-flatten` packs a
    training function's per-parameter gradients into the unit's flat
    gradient with it, as PyTorch accumulates into `FlatParameter.grad`.
    Under mixed precision the values and the flat result may all have
    another floating-point element type than the parameters (the unit's
    `param_dtype`: `tensor<2x3xbf16>, tensor<2xbf16> -> tensor<8xbf16>`).

    ```mlir
    %g = fsdp.pack %dw, %db into @fc
        : tensor<2x3xf32>, tensor<2xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$values,
                   FlatSymbolRefAttr:$unit);
  let results = (outs 1DTensorOf<[AnyType]>:$flat);
  let assemblyFormat = [{
    $values `into` $unit attr-dict `:` type($values) `->` type($flat)
  }];
}

def FSDP_UnflattenOp : FSDP_Op<"unflatten", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "views of a full flat buffer as its original parameters";
  let description = [{
    Splits a full (gathered, unsharded) flat buffer of the flat parameter
    `@unit` back into its member parameters, one result per member, in flat
    order, each with the member's type. This is PyTorch's unflattening of a
    `FlatParameter` into views. The operand must have the flat parameter's
    type; padding and alignment gaps are dropped. Under mixed precision the
    operand and the results may all have another floating-point element
    type than the stored parameters (the unit's `param_dtype`, gathered
    from a cast shard by `fsdp-mixed-precision`):
    `tensor<8xbf16> -> tensor<2x3xbf16>, tensor<2xbf16>`.

    ```mlir
    %w, %b = fsdp.unflatten %flat of @fc
        : tensor<8xf32> -> tensor<2x3xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyType]>:$flat, FlatSymbolRefAttr:$unit);
  let results = (outs Variadic<AnyStaticShapeTensor>:$views);
  let assemblyFormat = [{
    $flat `of` $unit attr-dict `:` type($flat) `->` type($views)
  }];
}

//===----------------------------------------------------------------------===//
// Sharded programs (produced by fsdp-shard)
//===----------------------------------------------------------------------===//

def FSDP_GetShardOp : FSDP_Op<"get_shard", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemRead]>]> {
  let summary = "this rank's shard of a unit's flat buffer (its master copy)";
  let description = [{
    Reads the calling rank's shard of an `fsdp.flat_param`: the rank's
    equal chunk of the padded flat buffer along the unit's mesh axes (the
    whole buffer for an unsharded unit). Every rank holds only this part of
    the parameters; it is what the optimizer updates and what
    `fsdp.all_gather` gathers.

    ```mlir
    %s = fsdp.get_shard @"unit:fc" : tensor<2xf32>   // of tensor<8xf32>, 4 ranks
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit);
  let results = (outs 1DTensorOf<[AnyType]>:$result);
  let assemblyFormat = "$unit attr-dict `:` type($result)";
}

class FSDP_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : FSDP_Op<mnemonic, !listconcat([
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        MemoryEffects<[MemRead, MemWrite]>], traits)> {
  let assemblyFormat = [{
    $input `on` $mesh `axes` $mesh_axes attr-dict `:` type($input) `->`
    type($result)
  }];
}

def FSDP_AllGatherOp : FSDP_CollectiveOp<"all_gather"> {
  let summary = "concatenate every rank's shard, in rank order";
  let description = [{
    Every rank of the group formed by `mesh_axes` of `mesh` contributes its
    1-D `input`; every rank receives all contributions concatenated in the
    group's rank order (the result is group-size times longer). Unlike
    upstream `mesh.all_gather`, which is `Pure`, this op reads and writes
    memory: it is a communication event at a place in the program, so CSE
    never merges FULL_SHARD's forward and backward gathers of one unit.

    ```mlir
    %full = fsdp.all_gather %s on @fsdp_world axes [0] : tensor<2xf32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyType]>:$input,
                   FlatSymbolRefAttr:$mesh, DenseI16ArrayAttr:$mesh_axes);
  let results = (outs FSDP_CollectiveResult:$result);
}

def FSDP_ReduceScatterOp : FSDP_CollectiveOp<"reduce_scatter"> {
  let summary = "reduce every rank's value elementwise, keep this rank's chunk";
  let description = [{
    Every rank of the group formed by `mesh_axes` contributes a 1-D `input`
    of the same length; the elementwise `reduction` (`sum`, or `avg`: the sum
    divided by the group size) is split into group-size equal chunks and
    rank `r` of the group receives chunk `r`. `fsdp-shard` reduce-scatters a
    unit's flat gradient with `avg`, as PyTorch FSDP averages gradients over
    ranks.

    ```mlir
    %g = fsdp.reduce_scatter %flat on @fsdp_world axes [0] {reduction = "avg"}
        : tensor<8xf32> -> tensor<2xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnyType]>:$input,
                   FlatSymbolRefAttr:$mesh, DenseI16ArrayAttr:$mesh_axes,
                   DefaultValuedStrAttr<StrAttr, "sum">:$reduction);
  let results = (outs FSDP_CollectiveResult:$result);
  let hasVerifier = 1;
}

def FSDP_AllReduceOp : FSDP_CollectiveOp<"all_reduce"> {
  let summary = "reduce every rank's value elementwise, everywhere";
  let description = [{
    Every rank of the group formed by `mesh_axes` contributes `input`; every
    rank receives the elementwise `reduction` (`sum`, or `avg`: the sum
    divided by the group size), of the same type. `fsdp-shard` all-reduces
    the gradients of replicated parameters (NO_SHARD units, ignored
    parameters: PyTorch's DDP contract) with `avg`, HYBRID_SHARD's
    reduce-scattered shards across groups, and the partial sums of squares
    that global-norm clipping needs with `sum`.

    ```mlir
    %g = fsdp.all_reduce %flat on @fsdp_world axes [0] {reduction = "avg"}
        : tensor<5xf32> -> tensor<5xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   FlatSymbolRefAttr:$mesh, DenseI16ArrayAttr:$mesh_axes,
                   DefaultValuedStrAttr<StrAttr, "sum">:$reduction);
  let results = (outs FSDP_CollectiveResult:$result);
  let hasVerifier = 1;
}

def FSDP_WaitOp : FSDP_Op<"wait", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "the end of a started collective: its result";
  let description = [{
    Waits for the collective that produced `future` (a result of type
    `!fsdp.future<T>`) and returns its value of type `T`. In a plan the wait
    is the compute stream's dependency on the collective's kernel; the
    collective's input stays allocated until here.

    ```mlir
    %full = fsdp.wait %f : !fsdp.future<tensor<16xf32>> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins FSDP_FutureType:$future);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$future attr-dict `:` qualified(type($future)) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$future), [{
    build($_builder, $_state,
          ::llvm::cast<FutureType>(future.getType()).getValueType(), future);
  }]>];
  let hasVerifier = 1;
}

def FSDP_ReleaseOp : FSDP_Op<"release", [MemoryEffects<[MemWrite]>]> {
  let summary = "the end of a gathered buffer's life";
  let description = [{
    Marks where a unit's gathered parameters are freed (PyTorch's reshard):
    `fsdp-shard` places it after the last use of an `fsdp.all_gather`'s
    result (or of the views `fsdp.unflatten` makes of it). Nothing may use
    the value afterwards; the memory planner reuses its bytes from here.

    ```mlir
    fsdp.release %full : tensor<8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Optimizer steps (produced by fsdp-optimizer)
//===----------------------------------------------------------------------===//

/// A scalar f32 operand (the learning rate, the step count, the clipping
/// coefficient); its type is implied in the assembly format.
def FSDP_F32Scalar : Type<And<[AnyRankedTensor.predicate,
    CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">,
    CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getElementType().isF32()">]>,
    "0-d tensor of f32">,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;

def FSDP_AdamWOp : FSDP_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "one AdamW step of a parameter (or flat shard) and its state";
  let description = [{
    PyTorch's `torch.optim.AdamW` step (torch 1.13, `foreach=False`) on one
    f32 tensor, elementwise, in the arithmetic order of the decomposed form
    `fsdp-optimizer` builds with `fused=false`. With `t = step`:

    ```
    g  = grad * clip                      (when clip is given)
    m' = exp_avg * beta1 + g * (1 - beta1)
    v' = exp_avg_sq * beta2 + g * g * (1 - beta2)
    p  = param * (1 - lr * weight_decay)  (when weight_decay != 0)
    p' = p - m' / (sqrt(v') / sqrt(1 - beta2^t) + eps) * (lr / (1 - beta1^t))
    ```

    The results are the new parameter and moments. The runtime kernel
    writes them over its operands' buffers when the plan binds them there
    (docs/runtime.md, "In-place optimizer steps").

    ```mlir
    %p1, %m1, %v1 = fsdp.adamw %p, %g, %m, %v, %lr, %step clip %c
        {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.01}
        : tensor<64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$param,
                   RankedTensorOf<[F32]>:$grad,
                   RankedTensorOf<[F32]>:$exp_avg,
                   RankedTensorOf<[F32]>:$exp_avg_sq,
                   FSDP_F32Scalar:$lr, FSDP_F32Scalar:$step,
                   Optional<FSDP_F32Scalar>:$clip,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                   F64Attr:$weight_decay);
  let results = (outs RankedTensorOf<[F32]>:$new_param,
                 RankedTensorOf<[F32]>:$new_exp_avg,
                 RankedTensorOf<[F32]>:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step
    (`clip` $clip^)? attr-dict `:` type($param)
  }];
  let hasVerifier = 1;
}

def FSDP_SGDOp : FSDP_Op<"sgd", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["param", "grad", "new_param"]>]> {
  let summary = "one SGD step of a parameter (or flat shard) and its momentum";
  let description = [{
    PyTorch's `torch.optim.SGD` step (torch 1.13, `foreach=False`) on one
    f32 tensor, elementwise, in the arithmetic order of the decomposed form
    `fsdp-optimizer` builds with `fused=false`:

    ```
    g  = grad * clip                      (when clip is given)
    g  = g + param * weight_decay         (when weight_decay != 0)
    b' = momentum_buffer * momentum + g * (1 - dampening)
         (g itself on step 1 when dampening != 0: torch's first buffer)
    d  = nesterov ? g + b' * momentum : b'   (g when momentum == 0)
    p' = param - d * lr
    ```

    `momentum_buffer` and the result `new_momentum_buffer` are present
    exactly when `momentum != 0`.

    ```mlir
    %p1, %b1 = fsdp.sgd %p, %g, %lr, %step momentum_buffer %b
        {dampening = 0.0, momentum = 0.9, nesterov = false,
         weight_decay = 0.0}
        : (tensor<64xf32>, tensor<64xf32>, tensor<f32>, tensor<f32>,
           tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$param,
                   RankedTensorOf<[F32]>:$grad,
                   FSDP_F32Scalar:$lr, FSDP_F32Scalar:$step,
                   Optional<RankedTensorOf<[F32]>>:$momentum_buffer,
                   Optional<FSDP_F32Scalar>:$clip,
                   F64Attr:$momentum, F64Attr:$dampening, BoolAttr:$nesterov,
                   F64Attr:$weight_decay);
  let results = (outs RankedTensorOf<[F32]>:$new_param,
                 Optional<RankedTensorOf<[F32]>>:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $lr `,` $step
    (`momentum_buffer` $momentum_buffer^)? (`clip` $clip^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused compute ops (produced by fsdp-fuse)
//===----------------------------------------------------------------------===//

def FSDP_GeluOp : FSDP_Op<"gelu", [Pure, AllTypesMatch<["input", "output"]>]> {
  let summary = "GELU activation, exact (erf) or tanh-approximated";
  let description = [{
    `0.5 * x * (1 + erf(x / sqrt(2)))`, or with `approximate = "tanh"`
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` — PyTorch's
    `nn.GELU()` and `nn.GELU(approximate="tanh")`. `fsdp-fuse` forms it from
    the chains torch exports (`Div, Erf, Add, Mul, Mul` and the `Tanh` form).

    ```mlir
    %y = fsdp.gelu %x {approximate = "tanh"} : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def FSDP_SiluOp : FSDP_Op<"silu", [Pure, AllTypesMatch<["input", "output"]>]> {
  let summary = "SiLU (swish) activation: x * sigmoid(x)";
  let description = [{
    ```mlir
    %y = fsdp.silu %x : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
}

def FSDP_RMSNormOp : FSDP_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalisation over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2, last dim) + epsilon) * scale` (LLaMA's RMSNorm); the
    optional `scale` has the last dimension's size. `fsdp-fuse` forms it from
    the decomposed chain torch exports (`Pow, ReduceMean, Add, Sqrt,
    Reciprocal/Div, Mul, Mul`).

    ```mlir
    %y = fsdp.rms_norm %x, %w {epsilon = 1.0e-06 : f32}
        : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Optional<AnyRankedTensor>:$scale,
                   F32Attr:$epsilon);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_LinearOp : FSDP_Op<"linear", [Pure]> {
  let summary = "matrix product with a fused bias and activation epilogue";
  let description = [{
    `activation(input @ W + bias)` over the last dimension of `input`, where
    `W` is `weight` (`[K, N]`), or its transpose when `transpose_weight` is
    set (`weight` is `[N, K]`, the layout of `nn.Linear.weight`, so the
    exported `Transpose` of a weight disappears). `bias` (`[N]`) is optional.
    `activation` is one of `none`, `relu`, `gelu`, `gelu_tanh`, `silu`,
    `tanh`, `sigmoid`. `fsdp-fuse` forms it from `MatMul` (of a transposed
    weight), `Add` of a 1-D bias and a following activation.

    ```mlir
    %y = fsdp.linear %x, %w, %b {activation = "gelu", transpose_weight}
        : (tensor<2x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>)
        -> tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, AnyRankedTensor:$weight,
                   Optional<AnyRankedTensor>:$bias,
                   UnitAttr:$transpose_weight,
                   DefaultValuedStrAttr<StrAttr, "none">:$activation);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_AttentionOp : FSDP_Op<"attention", [Pure]> {
  let summary = "fused scaled-dot-product attention";
  let description = [{
    `softmax(mask(query @ key_t * scale)) @ value` over the last dimension,
    without materialising the scores of all heads: `query` is `[..., L, D]`,
    `key_t` the keys already transposed, `[..., D, S]`, `value`
    `[..., S, Dv]` (equal batch dimensions). With `mask_kind = "add"` the
    optional `mask` (broadcastable to `[..., L, S]`) is added to the scores;
    with `"fill"` it is boolean and the scores where it is true become
    `fill_value` (PyTorch's `masked_fill`, usually `-inf`); with `"causal"`
    there is no mask operand and score `(i, j)` is excluded (`-inf`) where
    `j > i` (top-left aligned: torch's `tril(ones(L, S))`). `fsdp-fuse` forms
    it from `MatMul, Mul/Div, [Add | Where], Softmax, MatMul`.

    The optional second result `lse` (`[..., L]`, always f32) is each query
    row's log-sum-exp of the scaled, masked scores (`-inf` for a fully
    masked row): what `fsdp.attention_grad` recomputes the probabilities
    from. `fsdp-autodiff` asks for it when it fuses attention in training.

    `layout = "bshd"` (the default is `"bhsd"`, as above) takes the operands
    where a head split left them, before its transposes: `query`
    `[B, L, H, D]`, `key_t` untransposed `[B, S, H, D]`, `value`
    `[B, S, H, Dv]`, and gives `output` `[B, L, H, Dv]`, ready for the head
    merge's reshape; the kernel reads and writes them through strides. The
    mask and `lse` stay head-first (`[B, H, L, S]`, `[B, H, L]`). The
    attention fusion folds a chain's head-split and head-merge transposes
    into it so (`fsdp-fuse`, `fsdp-autodiff`).

    ```mlir
    %y = fsdp.attention %q, %kt, %v, %m
        {scale = 0.353553385 : f32, mask_kind = "fill", fill_value = 0xFF800000 : f32}
        : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>,
           tensor<1x1x16x16xi1>) -> tensor<2x4x16x8xf32>
    %y2, %lse = fsdp.attention %q, %kt, %v {scale = 0.353553385 : f32, mask_kind = "causal"}
        : (tensor<2x4x16x8xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>)
        -> (tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key_t,
                   AnyRankedTensor:$value, Optional<AnyRankedTensor>:$mask,
                   F32Attr:$scale,
                   DefaultValuedStrAttr<StrAttr, "none">:$mask_kind,
                   DefaultValuedAttr<F32Attr, "0.0">:$fill_value,
                   DefaultValuedStrAttr<StrAttr, "bhsd">:$layout);
  let results = (outs AnyRankedTensor:$output,
                 Optional<AnyRankedTensor>:$lse);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_AttentionGradOp : FSDP_Op<"attention_grad", [Pure]> {
  let summary = "gradients of fused attention from its saved log-sum-exp";
  let description = [{
    What `fsdp-autodiff` emits for `fsdp.attention`: the gradients of its
    `query`, `key_t` and `value` given the forward's `output` (`y`), its
    row log-sum-exp `lse` and the output gradient `grad`, FlashAttention
    style: the probabilities are recomputed a tile at a time as
    `P = exp(z - lse)` from the scaled, masked scores `z`, never stored.
    With `dP = grad @ value^T` and `dS = P * (dP - rowsum(grad * y))`
    (zero where the mask replaced a score): `grad_query = scale * dS @ k`,
    `grad_key_t = scale * (dS^T @ query)^T`, `grad_value = P^T @ grad`.
    `mask`, `scale`, `mask_kind`, `fill_value` and `layout` are the
    forward's; the mask gets no gradient. The results have the types of
    `query`, `key_t` and `value` (in layout `"bshd"`: `[B, rows, H, cols]`,
    the key gradient untransposed); `lse` is f32.

    ```mlir
    %dq, %dkt, %dv = fsdp.attention_grad %q, %kt, %v, %y, %lse, %g
        {scale = 0.353553385 : f32, mask_kind = "causal"}
        : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>,
           tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x4x16x8xf32>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$query, AnyRankedTensor:$key_t,
                   AnyRankedTensor:$value, Optional<AnyRankedTensor>:$mask,
                   AnyRankedTensor:$output, AnyRankedTensor:$lse,
                   AnyRankedTensor:$grad,
                   F32Attr:$scale,
                   DefaultValuedStrAttr<StrAttr, "none">:$mask_kind,
                   DefaultValuedAttr<F32Attr, "0.0">:$fill_value,
                   DefaultValuedStrAttr<StrAttr, "bhsd">:$layout);
  let results = (outs AnyRankedTensor:$grad_query,
                 AnyRankedTensor:$grad_key_t, AnyRankedTensor:$grad_value);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_BatchNormTrainOp : FSDP_Op<"batch_norm_train", [Pure]> {
  let summary = "batch normalization in training, with saved statistics";
  let description = [{
    What `fsdp-autodiff` makes of a training-mode `onnx.BatchNormalization`
    (unless `fuse-batch-norm=false`), as torch's `native_batch_norm`: `x` is
    `[N, C, ...]`, and per channel (dim 1) the batch's mean and biased
    variance over every other dim give
    `output = (x - mean) * invstd * scale + bias`, with
    `invstd = 1 / sqrt(var + epsilon)`. `saved_mean` and `saved_invstd`
    (`[C]`) are what `fsdp.batch_norm_grad` reads. `running_mean_out` and
    `running_var_out` are the running statistics' new values with ONNX's
    `momentum`: `running * momentum + batch * (1 - momentum)`, the variance
    unbiased (`count / (count - 1)`, count the values per channel), as
    PyTorch updates them.

    ```mlir
    %y, %mean, %invstd, %rm, %rv = fsdp.batch_norm_train %x, %scale, %bias, %m, %v
        {epsilon = 9.99999974E-6 : f32, momentum = 0.899999976 : f32}
        : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
           tensor<4xf32>)
        -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
            tensor<4xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$scale,
                   AnyRankedTensor:$bias, AnyRankedTensor:$running_mean,
                   AnyRankedTensor:$running_var, F32Attr:$epsilon,
                   F32Attr:$momentum);
  let results = (outs AnyRankedTensor:$output, AnyRankedTensor:$saved_mean,
                 AnyRankedTensor:$saved_invstd,
                 AnyRankedTensor:$running_mean_out,
                 AnyRankedTensor:$running_var_out);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_BatchNormGradOp : FSDP_Op<"batch_norm_grad", [Pure]> {
  let summary = "gradients of training batch normalization";
  let description = [{
    What `fsdp-autodiff` emits for `fsdp.batch_norm_train`, as torch's
    `native_batch_norm_backward` in training: from the output gradient
    `grad`, `x`, `scale` and the forward's `saved_mean` and `saved_invstd`,
    with `xhat = (x - mean) * invstd` per channel:
    `grad_bias = sum(grad)`, `grad_scale = sum(grad * xhat)` and
    `grad_x = scale * invstd * (grad - (grad_bias + xhat * grad_scale) / count)`.
    The results have the types of `x`, `scale` and `scale`.

    ```mlir
    %dx, %dscale, %dbias = fsdp.batch_norm_grad %g, %x, %scale, %mean, %invstd
        : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>,
           tensor<4xf32>, tensor<4xf32>)
        -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$x,
                   AnyRankedTensor:$scale, AnyRankedTensor:$saved_mean,
                   AnyRankedTensor:$saved_invstd);
  let results = (outs AnyRankedTensor:$grad_x, AnyRankedTensor:$grad_scale,
                 AnyRankedTensor:$grad_bias);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_ActivationGradOp : FSDP_Op<"activation_grad",
    [Pure, AllTypesMatch<["grad", "input", "grad_input"]>]> {
  let summary = "gradient of an elementwise activation, in one pass";
  let description = [{
    What `fsdp-autodiff` emits for `fsdp.gelu` and `fsdp.silu`:
    `grad_input = grad * activation'(input)`, recomputed from the forward's
    input. `activation` is `gelu` (erf form), `gelu_tanh` or `silu`, with
    the derivatives torch's `gelu_backward` and `silu_backward` take.

    ```mlir
    %dx = fsdp.activation_grad %g, %x {activation = "gelu_tanh"}
        : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$input,
                   StrAttr:$activation);
  let results = (outs AnyRankedTensor:$grad_input);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad_input)";
  let hasVerifier = 1;
}

def FSDP_NormGradOp : FSDP_Op<"norm_grad", [Pure]> {
  let summary = "gradients of a layer or RMS normalisation, in one pass";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.LayerNormalization` (`kind =
    "layer"`) and `fsdp.rms_norm` (`kind = "rms"`) whose scale and bias have
    the normalised dims' shape (`x`'s dims from `axis` on). Each row's
    statistics are recomputed from `x` as the forward computes them; with
    `xhat` the normalised row and `gs = grad * scale`:
    `grad_x = invstd * (gs - mean(gs) - xhat * mean(gs * xhat))` for a layer
    norm (without the `mean(gs)` term for RMS), and over every row
    `grad_scale = sum(grad * xhat)`, `grad_bias = sum(grad)`. Without a
    scale, `gs = grad` and `grad_scale` is computed all the same. The
    results have the types of `x`, then the normalised dims' shape twice.

    ```mlir
    %dx, %ds, %db = fsdp.norm_grad %g, %x, %scale
        {kind = "layer", axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
        : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>)
        -> (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$x,
                   Optional<AnyRankedTensor>:$scale, StrAttr:$kind,
                   I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs AnyRankedTensor:$grad_x, AnyRankedTensor:$grad_scale,
                 AnyRankedTensor:$grad_bias);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_GatherGradOp : FSDP_Op<"gather_grad", [Pure]> {
  let summary = "gradient of a gather (embedding lookup): scatter-add";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.Gather`: a tensor of the gathered
    data's type, zero except that each slice of `grad` is added at the index
    it was gathered from along `axis` (repeated indices accumulate, as
    PyTorch's embedding backward does).

    ```mlir
    %gw = fsdp.gather_grad %g, %ids {axis = 0 : i64}
        : (tensor<2x16x32xf32>, tensor<2x16xi64>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$indices,
                   I64Attr:$axis);
  let results = (outs AnyRankedTensor:$grad_data);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

def FSDP_SoftmaxCrossEntropyOp : FSDP_Op<"softmax_cross_entropy", [Pure]> {
  let summary = "softmax cross-entropy that also gives each position's "
                "log-sum-exp";
  let description = [{
    What `fsdp-autodiff` turns a differentiated
    `onnx.SoftmaxCrossEntropyLoss` into (one whose `log_prob` is unused):
    the same `loss` from the same scores `[N, C, d...]`, labels `[N, d...]`,
    optional class `weights` `[C]`, `reduction` and `ignore_index`, and
    also `lse` `[N, d...]` (always f32), the log-sum-exp of every
    position's scores along the classes (ignored positions included),
    which the forward computes anyway. `fsdp.softmax_cross_entropy_grad`
    shifts the scores by it instead of by each position's maximum, one
    pass over the scores fewer.

    ```mlir
    %loss, %lse = fsdp.softmax_cross_entropy %scores, %labels
        {reduction = "mean", ignore_index = -100 : i64}
        : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$scores, AnyRankedTensor:$labels,
                   Optional<AnyRankedTensor>:$weights,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$loss, AnyRankedTensor:$lse);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_SoftmaxCrossEntropyGradOp : FSDP_Op<"softmax_cross_entropy_grad",
                                             [Pure, AttrSizedOperandSegments]> {
  let summary = "gradient of softmax cross-entropy with respect to the scores";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.SoftmaxCrossEntropyLoss` and
    `fsdp.softmax_cross_entropy`, with the same scores `[N, C, d...]`,
    labels `[N, d...]` and optional class `weights` `[C]`, and `grad` the
    loss's cotangent (a scalar for `mean` and `sum`, of the labels' shape
    for `none`). For every position whose label is not `ignore_index`, the
    gradient along the class dimension is
    `g * w[label] * (softmax(scores) - onehot(label))`, where `g` is the
    position's cotangent and `w` is 1 without weights; for `mean` it is
    divided by the sum of `w[label]` over those positions (their count
    without weights), as the loss is. Positions of ignored labels are zero.

    With `lse` (f32, of the labels' shape: the forward's log-sum-exp of
    each position's scores, `fsdp.softmax_cross_entropy`'s second result)
    the softmax is `exp(scores - lse)` divided by its sum (lse replaces
    each position's maximum as the shift, one pass fewer); without it the
    maximum is found first.

    ```mlir
    %gs = fsdp.softmax_cross_entropy_grad %scores, %labels, %g lse(%lse)
        {reduction = "mean", ignore_index = -100 : i64}
        : (tensor<8x4xf32>, tensor<8xi64>, tensor<f32>, tensor<8xf32>)
          -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$scores, AnyRankedTensor:$labels,
                   AnyRankedTensor:$grad,
                   Optional<AnyRankedTensor>:$weights,
                   Optional<AnyRankedTensor>:$lse,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$grad_scores);
  let assemblyFormat = [{
    $scores `,` $labels `,` $grad (`,` $weights^)? (`lse` `(` $lse^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def FSDP_NllLossGradOp : FSDP_Op<"nll_loss_grad", [Pure]> {
  let summary = "gradient of the negative log-likelihood loss";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.NegativeLogLikelihoodLoss` (torch's
    `nll_loss`, usually after a `log_softmax`): with the loss's `target`
    `[N, d...]`, its cotangent `grad` (a scalar for `mean` and `sum`, of the
    target's shape for `none`) and the optional class `weight` `[C]`, a
    tensor of the input's type `[N, C, d...]` that is zero except
    `-g * w[t]` at each position's class `t` (`w` is 1 without weights),
    divided for `mean` by the sum of `w[t]` over the positions not ignored.
    Positions whose class is `ignore_index` are zero.

    ```mlir
    %gi = fsdp.nll_loss_grad %target, %g
        {reduction = "mean", ignore_index = -100 : i64}
        : (tensor<8xi64>, tensor<f32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$target, AnyRankedTensor:$grad,
                   Optional<AnyRankedTensor>:$weight,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AnyRankedTensor:$grad_input);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

def FSDP_ConvGradInputOp : FSDP_Op<"conv_grad_input", [Pure]> {
  let summary = "gradient of a convolution with respect to its input";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.Conv`'s input `X`: the transposed
    convolution of the output gradient `grad` `[N, M, out...]` with the
    weights `w` `[M, C/group, k...]`, giving a tensor of `X`'s type. The
    window attributes are the forward convolution's, with ONNX's defaults
    filled in (`pads` as `[begin..., end...]`).

    ```mlir
    %gx = fsdp.conv_grad_input %g, %w {strides = array<i64: 2, 2>,
        pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
        group = 1 : i64}
        : (tensor<2x8x4x4xf32>, tensor<8x3x3x3xf32>) -> tensor<2x3x8x8xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$grad, AnyRankedTensor:$w,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs AnyRankedTensor:$grad_input);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

def FSDP_RecurrentGradOp : FSDP_Op<"recurrent_grad", [Pure]> {
  let summary = "gradient of a whole-sequence LSTM, GRU or RNN";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.LSTM`, `onnx.GRU` and `onnx.RNN`
    (`cell` says which): back-propagation through time over the whole
    sequence in one op. Its operands are the forward's X, W, R, then those
    of B, initial_h and initial_c present (`bias`, `initial_h`, `initial_c`
    say which), then the cotangents of Y and Y_h (and of Y_c for an LSTM;
    zeros where the loss does not reach). Its results are the gradients of
    X, W, R, B (`[dirs, 2 * gates * hidden]`, also without a B) and
    initial_h (and initial_c for an LSTM). The kernel recomputes the
    forward's gates rather than keeping them from the forward.

    ```mlir
    %dx, %dw, %dr, %db, %dh0 = fsdp.recurrent_grad %x, %w, %r, %dy, %dyh
        {cell = "rnn", hidden_size = 4 : i64, direction = "forward",
         layout = 0 : i64, linear_before_reset = 0 : i64, bias = 0 : i64,
         initial_h = 0 : i64, initial_c = 0 : i64}
        : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>,
           tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
        -> (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>,
            tensor<1x8xf32>, tensor<1x2x4xf32>)
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrAttr:$cell,
                   I64Attr:$hidden_size, StrAttr:$direction, I64Attr:$layout,
                   I64Attr:$linear_before_reset, I64Attr:$bias,
                   I64Attr:$initial_h, I64Attr:$initial_c);
  let results = (outs Variadic<AnyRankedTensor>:$grads);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results)
  }];
}

def FSDP_ConvGradWeightOp : FSDP_Op<"conv_grad_weight", [Pure]> {
  let summary = "gradient of a convolution with respect to its weights";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.Conv`'s weights `W`: the
    correlation of the forward input `x` with the output gradient `grad`,
    summed over the batch, giving a tensor of `W`'s type. Attributes as for
    `fsdp.conv_grad_input`.

    ```mlir
    %gw = fsdp.conv_grad_weight %x, %g {strides = array<i64: 2, 2>,
        pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
        group = 1 : i64}
        : (tensor<2x3x8x8xf32>, tensor<2x8x4x4xf32>) -> tensor<8x3x3x3xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$grad,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs AnyRankedTensor:$grad_weight);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

def FSDP_PoolGradOp : FSDP_Op<"pool_grad", [Pure]> {
  let summary = "gradient of 1-D, 2-D or 3-D max or average pooling";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.MaxPool` and `onnx.AveragePool`:
    a tensor of the pooled input `x`'s type. For `mode = "max"` each output
    gradient goes to the first maximal element of its window in row-major
    order (as PyTorch's max_pool backward routes it); for `"average"` it
    is spread evenly over the elements the forward averaged. Window
    attributes are the forward op's, ONNX defaults filled in (explicit
    pads), one entry per spatial dim of `x` ([N, C, L], [N, C, H, W] or
    [N, C, D, H, W]).

    ```mlir
    %gx = fsdp.pool_grad %x, %g {mode = "max", kernel_shape = array<i64: 3, 3>,
        strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>,
        dilations = array<i64: 1, 1>, ceil_mode = 0 : i64,
        count_include_pad = 0 : i64}
        : (tensor<2x8x16x16xf32>, tensor<2x8x8x8xf32>) -> tensor<2x8x16x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$grad,
                   StrAttr:$mode, DenseI64ArrayAttr:$kernel_shape,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$ceil_mode,
                   I64Attr:$count_include_pad);
  let results = (outs AnyRankedTensor:$grad_input);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

def FSDP_GridSampleGradOp : FSDP_Op<"grid_sample_grad", [Pure]> {
  let summary = "gradient of GridSample with respect to its input and grid";
  let description = [{
    What `fsdp-autodiff` emits for `onnx.GridSample`: from the forward's
    input `x` [N, C, H, W], its `grid` [N, Ho, Wo, 2] and the output
    gradient `grad` [N, C, Ho, Wo], the gradients of `x` (each output
    gradient spread over the taps that read it, by their weights) and of
    `grid` (the taps' weights differentiated; zeros in `nearest` mode, as
    torch gives). Attributes are the forward's.

    ```mlir
    %gx, %ggrid = fsdp.grid_sample_grad %x, %grid, %g {mode = "bilinear",
        padding_mode = "zeros", align_corners = 0 : i64}
        : (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>, tensor<2x3x5x6xf32>)
        -> (tensor<2x3x8x8xf32>, tensor<2x5x6x2xf32>)
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x, AnyRankedTensor:$grid,
                   AnyRankedTensor:$grad, StrAttr:$mode, StrAttr:$padding_mode,
                   I64Attr:$align_corners);
  let results = (outs AnyRankedTensor:$grad_x, AnyRankedTensor:$grad_grid);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Runtime ops (produced by fsdp-lower-to-runtime)
//===----------------------------------------------------------------------===//

def FSDP_KernelOp : FSDP_Op<"kernel", [Pure]> {
  let summary = "one runtime kernel launch";
  let description = [{
    A call of the runtime kernel `kernel` (docs/plan-format.md lists them,
    with their operands and `params`) on static-shaped tensors. After
    `fsdp-plan-memory` each result carries its byte offset in the activation
    arena (`fsdp.offsets`). `fsdp-translate --mlir-to-plan` writes one plan
    kernel per op, with its location as the kernel's origin.

    ```mlir
    %y = fsdp.kernel "matmul"(%a, %b) params {trans_b = 1 : i64}
        : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<AnyStaticShapeTensor>:$inputs,
                   OptionalAttr<DictionaryAttr>:$params);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let assemblyFormat = [{
    $kernel `(` $inputs `)` (`params` $params^)? attr-dict `:`
    functional-type($inputs, $results)
  }];
}

def FSDP_ViewOp : FSDP_Op<"view", [Pure,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "the same bytes with another static shape";
  let description = [{
    What `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze` and `Identity` lower
    to: no kernel, the result names its operand's bytes (same element type
    and count). With an element `offset`, the result names the operand's
    elements `[offset, offset + count)` instead: how `fsdp.unflatten`
    lowers, each parameter a view into its unit's gathered flat buffer. The
    memory planner keeps the operand alive as long as the view is used.

    ```mlir
    %v = fsdp.view %x : tensor<2x16x32xf32> to tensor<32x32xf32>
    %b = fsdp.view %flat {offset = 6 : i64} : tensor<8xf32> to tensor<2xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input,
                   DefaultValuedAttr<I64Attr, "0">:$offset);
  let results = (outs AnyStaticShapeTensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($output)";
  let hasVerifier = 1;
}

#endif // FSDP_OPS
