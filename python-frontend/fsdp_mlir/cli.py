"""fsdp-compile: compile() from the command line.

    fsdp-compile model.onnx --batch-size 4 --world-size 4 \\
        --transformer-layers Block --optimizer adamw --max-grad-norm 1 -o model.plan
"""

from __future__ import annotations

import argparse
import sys

from fsdp_mlir._tools import ToolError, ToolNotFoundError
from fsdp_mlir.compile import STRATEGIES, MixedPrecision, compile
from fsdp_mlir.policy import PolicyError, no_wrap, size_based, transformer_layers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="fsdp-compile", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an ONNX model exported by fsdp_mlir.export")
    ap.add_argument("--batch-size", type=int, required=True, help="per rank")
    ap.add_argument("--world-size", type=int, default=1)
    wrap = ap.add_mutually_exclusive_group()
    wrap.add_argument("--min-num-params", type=int, help="size_based(min_num_params)")
    wrap.add_argument("--transformer-layers", help="comma-separated module class names")
    ap.add_argument("--strategy", default="FULL_SHARD", choices=STRATEGIES)
    ap.add_argument("--mesh-shape", help="R,S for HYBRID_SHARD")
    ap.add_argument("--param-dtype")
    ap.add_argument("--reduce-dtype")
    ap.add_argument("--buffer-dtype")
    ap.add_argument("--optimizer", choices=("sgd", "adamw"),
                    help="compile a training step (default: a forward)")
    ap.add_argument("--max-grad-norm", type=float)
    ap.add_argument("--loss", help="attach a loss to a logits model: cross-entropy")
    ap.add_argument("--use-orig-params", action="store_true",
                    help="units may mix frozen and trainable parameters (16-byte aligned)")
    ap.add_argument("--ignored-modules", help="comma-separated module FQNs left unsharded")
    ap.add_argument("--ignored-params", help="comma-separated parameter FQNs left unsharded")
    ap.add_argument("--no-wrap-frozen", action="store_true",
                    help="without a policy, keep frozen submodules in the root unit")
    ap.add_argument("-o", "--out", help="the plan (default: beside the model)")
    opts = ap.parse_args(argv)
    policy = (size_based(opts.min_num_params) if opts.min_num_params is not None
              else transformer_layers(opts.transformer_layers.split(","))
              if opts.transformer_layers else no_wrap())
    optimizer = None
    if opts.optimizer:
        optimizer = {"optimizer": opts.optimizer}
        if opts.max_grad_norm:
            optimizer["max_grad_norm"] = opts.max_grad_norm
    mp = None
    if opts.param_dtype or opts.reduce_dtype or opts.buffer_dtype:
        mp = MixedPrecision(opts.param_dtype, opts.reduce_dtype, opts.buffer_dtype)
    mesh = tuple(int(x) for x in opts.mesh_shape.split(",")) if opts.mesh_shape else None
    try:
        plan = compile(opts.model, batch_size=opts.batch_size, world_size=opts.world_size,
                       policy=policy, strategy=opts.strategy, mesh_shape=mesh,
                       mixed_precision=mp, optimizer=optimizer, loss=opts.loss,
                       use_orig_params=opts.use_orig_params,
                       ignored_modules=opts.ignored_modules.split(",") if opts.ignored_modules
                       else (),
                       ignored_params=opts.ignored_params.split(",") if opts.ignored_params
                       else (),
                       wrap_frozen=False if opts.no_wrap_frozen else None, out=opts.out)
    except (ToolError, ToolNotFoundError, PolicyError, ValueError, FileNotFoundError) as e:
        print(f"fsdp-compile: error: {e}", file=sys.stderr)
        return 1
    print(plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
