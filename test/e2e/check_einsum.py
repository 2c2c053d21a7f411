#!/usr/bin/env python3
"""Einsum's lowering against numpy.einsum, run on the executor.

    check_einsum.py BUILD_DIR

Each equation below (the forms torch exports: batched matmuls with either
operand transposed, attention's "bhid,bhjd->bhij", a product whose result
is transposed, an inner product, a permutation, sums over dropped letters;
and any other equation of distinct letters: Funnel's "bind,snd->bnis",
two contracted letters, a letter of one operand summed away first, outer
products, size-1 dims broadcast, an ellipsis, three operands, diagonals)
is written as an fp32 ONNX model y = -Einsum(...) (the Einsum inside the
graph: ONNX 1.12's shape inference gives it a rank only, the importer its
dimensions), compiled with fsdp-opt (--fsdp-inference-pipeline) and
fsdp-translate, run by fsdp-run on random inputs, and compared with
numpy.einsum (atol 1e-5, rtol 1e-4). One equation has spaces, as torch
passes a user's string (MaxViT's "B G H I D, B G H J D -> B G H I J").
Exit 1 on any mismatch.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

# (equation, input shapes)
CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("bhij,bhjd->bhid", [(2, 3, 4, 5), (2, 3, 5, 8)]),
    ("bji,bjk->bki", [(2, 4, 3), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ik,jk->ij", [(3, 4), (5, 4)]),
    ("i,i", [(6,), (6,)]),
    ("ij->ji", [(3, 4)]),
    ("bij->bji", [(2, 3, 4)]),
    ("bij->i", [(2, 3, 4)]),
    ("ij->", [(3, 4)]),
    ("B G H I D, B G H J D -> B G H I J", [(2, 2, 3, 4, 8), (2, 2, 3, 5, 8)]),
    ("jk,ij", [(4, 5), (3, 4)]),
    # Funnel's relative attention: n a batch letter, d contracted, s free.
    ("bind,snd->bnis", [(2, 4, 3, 5), (6, 3, 5)]),
    # Two contracted letters, several free ones on each side.
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),
    ("bqhd,bkhd->bhqk", [(2, 3, 2, 4), (2, 5, 2, 4)]),
    # A letter in one operand only, summed away first (x), and a sum plus a
    # permutation of one operand.
    ("bxi,bij->jb", [(2, 3, 4), (2, 4, 5)]),
    ("abc->ca", [(2, 3, 4)]),
    # No contracted letter: an outer product and a batched elementwise one.
    ("i,j->ij", [(3,), (4,)]),
    ("bi,bi->ib", [(2, 3), (2, 3)]),
    # Size-1 dims broadcast, batch and contracted.
    ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),
    # An ellipsis (ONNX 1.12 infers only equal lengths; one size-1 dim
    # broadcasts), one in a single operand; three operands.
    ("...ij,...jk->...ik", [(2, 2, 3, 4), (2, 1, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    # Diagonals (a letter repeated in a term), taken at import: a trace, a
    # batch of diagonals, one inside a product, a letter three times.
    ("ii", [(4, 4)]),
    ("...ii ->...i", [(3, 5, 5)]),
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 4)]),
    ("iji->j", [(3, 4, 3)]),
    ("iii->i", [(3, 3, 3)]),
]

def model(equation: str, shapes) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(shapes))]
    inputs = [np.zeros(s, np.float32) for s in shapes]
    out_shape = np.einsum(equation.replace(" ", ""), *inputs).shape
    graph = helper.make_graph(
        [helper.make_node("Einsum", names, ["e"], equation=equation),
         helper.make_node("Neg", ["e"], ["y"])], "einsum",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
         for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compile_plan(bindir: Path, equation: str, shapes, work: Path):
    onnx.save(model(equation, shapes), work / "m.onnx")
    steps = [[bindir / "fsdp-opt", work / "m.onnx", "-o", work / "i.mlir"],
             [bindir / "fsdp-opt", work / "i.mlir", "--fsdp-inference-pipeline",
              "-o", work / "p.mlir"],
             [bindir / "fsdp-translate", "--mlir-to-plan", work / "p.mlir", "-o",
              work / "p.plan"]]
    for step in steps:
        proc = subprocess.run([str(s) for s in step], capture_output=True, text=True)
        if proc.returncode != 0:
            return proc.stderr
    return None


def check(bindir: Path, equation: str, shapes, work: Path) -> bool:
    error = compile_plan(bindir, equation, shapes, work)
    if error:
        print(f"  {equation}: compile failed\n{error}")
        return False
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    cmd = [str(bindir / "fsdp-run"), str(work / "p.plan"), "--output-dir",
           str(work / "out")]
    for i, v in enumerate(values):
        np.save(work / f"x{i}.npy", v)
        cmd += ["--input", f"x{i}={work / f'x{i}.npy'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  {equation}: fsdp-run failed\n{proc.stderr}")
        return False
    ours = np.load(work / "out" / "y.npy")
    want = -np.einsum(equation.replace(" ", ""), *[v.astype(np.float64) for v in values])
    good = ours.shape == want.shape and np.allclose(ours, want, rtol=1e-4, atol=1e-5)
    print(f"  {equation:34s} {list(want.shape)!s:16s} "
          f"{'ok' if good else 'MISMATCH'}")
    return good


def main() -> int:
    bindir = Path(sys.argv[1]) / "bin"
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for equation, shapes in CASES:
            ok &= check(bindir, equation, shapes, Path(tmp))
    print("einsum: all equal to numpy" if ok else "einsum: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
