#!/usr/bin/env python3
"""Writes a LLaMA-shaped ONNX model whose weights live, sparse, in one file.

    make_model.py OUT_DIR --layers L --hidden H --ffn F --vocab V
    make_model.py OUT_DIR --data-gib G          # shape picked for ~G GiB

OUT_DIR gets `model.onnx` (the graph, a few hundred KiB at most) and
`model.data`, every weight's bytes at increasing offsets. `model.data` is
created with os.truncate to its full size and never written: it is a sparse
file that takes no disk blocks, so a 13B-shaped model costs nothing to store.
Its bytes read as zeros; the importer must never read them.

The graph (opset 17, built with onnx.helper):
  input_ids int64 [batch (dim_param "batch"), seq]
  tok_embeddings.weight: Gather
  per layer: RMSNorm written out (Pow, ReduceMean, Add, Sqrt, Div, Mul),
    q/k/v MatMuls, Reshape/Transpose into heads, MatMul, Mul (1/sqrt(d)),
    Softmax, MatMul, Transpose/Reshape back, o MatMul, residual Add,
    RMSNorm, SwiGLU (w1 MatMul, Sigmoid, Mul, w3 MatMul, Mul, w2 MatMul),
    residual Add
  final RMSNorm, output MatMul -> logits [batch, seq, vocab]
Weights are named with LLaMA's FQNs (layers.3.attention.wq.weight, ...).
Projection weights are stored [in, out], the orientation MatMul consumes.
Small constants (eps, exponent, scale, reshape shapes) are Constant nodes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

DTYPES = {
    "float16": (TensorProto.FLOAT16, 2, np.float16),
    "bfloat16": (TensorProto.BFLOAT16, 2, None),
    "float32": (TensorProto.FLOAT, 4, np.float32),
}
ALIGN = 64  # byte alignment of each weight inside model.data
HIDDEN_CANDIDATES = [64, 128, 256, 512, 768, 1024, 1536, 2048, 2560, 3072,
                     4096, 5120, 6144, 8192]


def llama_ffn(hidden: int, multiple_of: int = 256) -> int:
    """LLaMA's SwiGLU width: 2/3 of 4*hidden, rounded up (4096 -> 11008)."""
    f = int(2 * 4 * hidden / 3)
    return multiple_of * ((f + multiple_of - 1) // multiple_of)


def weight_shapes(layers: int, hidden: int, ffn: int, vocab: int):
    """(FQN, shape) of every weight, in graph order."""
    shapes = [("tok_embeddings.weight", [vocab, hidden])]
    for i in range(layers):
        p = f"layers.{i}."
        shapes += [
            (p + "attention_norm.weight", [hidden]),
            (p + "attention.wq.weight", [hidden, hidden]),
            (p + "attention.wk.weight", [hidden, hidden]),
            (p + "attention.wv.weight", [hidden, hidden]),
            (p + "attention.wo.weight", [hidden, hidden]),
            (p + "ffn_norm.weight", [hidden]),
            (p + "feed_forward.w1.weight", [hidden, ffn]),
            (p + "feed_forward.w3.weight", [hidden, ffn]),
            (p + "feed_forward.w2.weight", [ffn, hidden]),
        ]
    shapes += [("norm.weight", [hidden]), ("output.weight", [hidden, vocab])]
    return shapes


def data_bytes(layers, hidden, ffn, vocab, elem_size) -> int:
    off = 0
    for _, shape in weight_shapes(layers, hidden, ffn, vocab):
        off = (off + ALIGN - 1) // ALIGN * ALIGN + math.prod(shape) * elem_size
    return off


def shape_for_gib(gib: float, vocab: int, elem_size: int, hidden=None):
    """(layers, hidden, ffn) whose weights total about `gib` GiB. Unless
    `hidden` is given, picks the hidden size whose layer count is nearest 32
    (LLaMA-7B's), so the graph stays comparable to the 7B one."""
    target = gib * 2**30
    best = None
    for h in [hidden] if hidden else HIDDEN_CANDIDATES:
        f = llama_ffn(h)
        fixed = data_bytes(0, h, f, vocab, elem_size)
        per_layer = data_bytes(1, h, f, vocab, elem_size) - fixed
        layers = max(1, round((target - fixed) / per_layer))
        score = abs(math.log(layers / 32)) + abs(
            math.log(data_bytes(layers, h, f, vocab, elem_size) / target))
        if best is None or score < best[0]:
            best = (score, layers, h, f)
    return best[1], best[2], best[3]


def build(layers, hidden, ffn, vocab, heads, seq, dtype, data_name):
    onnx_type, elem_size, _ = DTYPES[dtype]
    head_dim = hidden // heads
    nodes = []
    initializers = []
    offset = 0

    for fqn, shape in weight_shapes(layers, hidden, ffn, vocab):
        offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        length = math.prod(shape) * elem_size
        t = TensorProto()
        t.name = fqn
        t.data_type = onnx_type
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data_name), ("offset", str(offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(t)
        offset += length
    total = offset

    def const(name, array):
        nodes.append(helper.make_node(
            "Constant", [], [name], name=name,
            value=helper.make_tensor(name + "_value", *array)))
        return name

    def scalar(name, value):
        # A float scalar of the model's type, as raw bytes (bfloat16: the
        # high half of the float32, rounded to nearest even).
        if dtype == "bfloat16":
            bits = int(np.array(value, dtype=np.float32).view(np.uint32))
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            raw = np.array(bits, dtype=np.uint16).tobytes()
        else:
            raw = np.array(value, dtype=DTYPES[dtype][2]).tobytes()
        return const(name, (onnx_type, [], raw, True))

    eps = scalar("c_eps", 1e-5)
    two = scalar("c_two", 2.0)
    scale = scalar("c_scale", 1.0 / math.sqrt(head_dim))
    to_heads = const("c_to_heads", (TensorProto.INT64, [4], [0, 0, heads, head_dim]))
    from_heads = const("c_from_heads", (TensorProto.INT64, [3], [0, 0, hidden]))

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def rmsnorm(x, weight, p):
        sq = node("Pow", [x, two], p + "pow")
        mean = node("ReduceMean", [sq], p + "mean", axes=[-1], keepdims=1)
        var = node("Add", [mean, eps], p + "add_eps")
        rms = node("Sqrt", [var], p + "sqrt")
        normed = node("Div", [x, rms], p + "div")
        return node("Mul", [normed, weight], p + "mul")

    x = node("Gather", ["tok_embeddings.weight", "input_ids"], "embed", axis=0)
    for i in range(layers):
        p = f"layers.{i}."
        a = p + "attention."
        f = p + "feed_forward."
        h = rmsnorm(x, p + "attention_norm.weight", p + "attention_norm.")
        q = node("MatMul", [h, a + "wq.weight"], a + "q")
        k = node("MatMul", [h, a + "wk.weight"], a + "k")
        v = node("MatMul", [h, a + "wv.weight"], a + "v")
        q = node("Reshape", [q, to_heads], a + "q_heads")
        k = node("Reshape", [k, to_heads], a + "k_heads")
        v = node("Reshape", [v, to_heads], a + "v_heads")
        q = node("Transpose", [q], a + "q_t", perm=[0, 2, 1, 3])   # B,nh,S,hd
        k = node("Transpose", [k], a + "k_t", perm=[0, 2, 3, 1])   # B,nh,hd,S
        v = node("Transpose", [v], a + "v_t", perm=[0, 2, 1, 3])   # B,nh,S,hd
        s = node("MatMul", [q, k], a + "scores")
        s = node("Mul", [s, scale], a + "scaled")
        s = node("Softmax", [s], a + "probs", axis=-1)
        o = node("MatMul", [s, v], a + "context")
        o = node("Transpose", [o], a + "context_t", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, from_heads], a + "context_flat")
        o = node("MatMul", [o, a + "wo.weight"], a + "out")
        x = node("Add", [x, o], p + "attention_residual")
        h = rmsnorm(x, p + "ffn_norm.weight", p + "ffn_norm.")
        g = node("MatMul", [h, f + "w1.weight"], f + "gate")
        sig = node("Sigmoid", [g], f + "sigmoid")
        g = node("Mul", [g, sig], f + "silu")
        u = node("MatMul", [h, f + "w3.weight"], f + "up")
        g = node("Mul", [g, u], f + "swiglu")
        d = node("MatMul", [g, f + "w2.weight"], f + "down")
        x = node("Add", [x, d], p + "ffn_residual")
    x = rmsnorm(x, "norm.weight", "norm.")
    nodes.append(helper.make_node("MatMul", [x, "output.weight"], ["logits"],
                                  name="output"))

    graph = helper.make_graph(
        nodes, "llama_shaped",
        inputs=[helper.make_tensor_value_info(
            "input_ids", TensorProto.INT64, ["batch", seq])],
        outputs=[helper.make_tensor_value_info(
            "logits", onnx_type, ["batch", seq, vocab])],
        initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="fsdp-mlir bench/import_scale")
    model.ir_version = 8
    return model, total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=None,
                    help="default 128; with --data-gib, fixes the hidden "
                         "size and only the layer count is derived")
    ap.add_argument("--ffn", type=int, default=None,
                    help="default: LLaMA's 2/3*4*hidden rounded up to 256")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--heads", type=int, default=None,
                    help="default: hidden/128 (hidden/32 below 256)")
    ap.add_argument("--seq", type=int, default=128, help="static sequence length")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    ap.add_argument("--data-gib", type=float, default=None,
                    help="pick layers/hidden/ffn so the weights total about "
                         "this many GiB (overrides --layers/--ffn)")
    ap.add_argument("--name", default="model",
                    help="file stem: NAME.onnx and NAME.data")
    args = ap.parse_args(argv)

    elem_size = DTYPES[args.dtype][1]
    if args.data_gib is not None:
        layers, hidden, ffn = shape_for_gib(args.data_gib, args.vocab, elem_size,
                                            args.hidden)
    else:
        layers, hidden = args.layers, args.hidden or 128
        ffn = args.ffn or llama_ffn(hidden)
    heads = args.heads or (hidden // 128 if hidden >= 256 else max(1, hidden // 32))
    if hidden % heads:
        sys.exit(f"hidden {hidden} is not a multiple of heads {heads}")

    os.makedirs(args.out_dir, exist_ok=True)
    data_name = args.name + ".data"
    model, total = build(layers, hidden, ffn, args.vocab, heads, args.seq,
                         args.dtype, data_name)

    # The data file first (sparse, full size, no bytes written): ONNX's
    # checker stats external data locations.
    data_path = os.path.join(args.out_dir, data_name)
    with open(data_path, "wb"):
        pass
    os.truncate(data_path, total)

    # Check the in-memory proto (check_model on a path would load it). The
    # checker resolves `location` against the working directory.
    cwd = os.getcwd()
    os.chdir(args.out_dir)
    try:
        onnx.checker.check_model(model)
    finally:
        os.chdir(cwd)

    model_path = os.path.join(args.out_dir, args.name + ".onnx")
    # No tensor has raw_data, so save_model writes no external data: it
    # serialises the proto with the references as they are.
    onnx.save_model(model, model_path)

    st = os.stat(data_path)
    info = {
        "model": model_path, "data": data_path,
        "layers": layers, "hidden": hidden, "ffn": ffn, "vocab": args.vocab,
        "heads": heads, "seq": args.seq, "dtype": args.dtype,
        "nodes": len(model.graph.node),
        "params": len(model.graph.initializer),
        "param_elements": sum(math.prod(t.dims) for t in model.graph.initializer),
        "data_bytes": total, "data_disk_bytes": st.st_blocks * 512,
        "model_bytes": os.path.getsize(model_path),
    }
    print(json.dumps(info))


if __name__ == "__main__":
    main()
