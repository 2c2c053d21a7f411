#!/usr/bin/python3
"""The oracle test of fsdp-auto-wrap + fsdp-flatten: for each case, wrap the
corpus model with real PyTorch FSDP (fsdp_oracle.py: torch 1.13, gloo, CPU)
and compile the same model's ONNX export with fsdp-opt and the equivalent
policy, then compare the layouts unit by unit (compare_with_torch.py).

Where torch 1.13 itself puts one tied tensor into two units (a known bug of
the size policy), the case checks that torch did so and that fsdp-opt
refuses with its tied-parameter error instead of copying the bug.

    check_layouts_against_torch.py BUILD_DIR [--quick]

Prints one line per case and a closing "N passed, N failed" line.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"

# (model, torch policy, fsdp-opt policy, world sizes, extra, expectation)
CASES = [
    ("gpt2", "transformer:GPT2Block", "policy=transformer layer-classes=GPT2Block", [2, 3, 4], "", "match"),
    ("gpt2", "size:5000", "policy=size min-num-params=5000", [2, 3, 4], "", "match"),
    ("gpt2", "none", "policy=none", [3], "", "match"),
    # The size policy wraps wte and lm_head apart: torch flattens the tied
    # weight twice, fsdp-opt refuses.
    ("gpt2", "size:1000", "policy=size min-num-params=1000", [2], "", "tied:wte.weight,lm_head.weight"),
    # MultiheadAttention is a force-leaf module: never wrapped by size.
    ("vit", "size:2000", "policy=size min-num-params=2000", [2, 4], "", "match"),
    ("vit", "transformer:EncoderBlock", "policy=transformer layer-classes=EncoderBlock", [3], "", "match"),
    # The real ViT-B/16 (86M parameters).
    ("vit_b16", "transformer:EncoderBlock", "policy=transformer layer-classes=EncoderBlock", [4], "", "match"),
    # Frozen backbone in its own unit, a tied encoder/decoder, BatchNorm.
    ("frozen_tied", "transformer:Sequential", "policy=transformer layer-classes=Sequential", [2, 3], "", "match"),
    ("frozen_tied", "none", "policy=none", [2], "", "frozen"),
    # Ignored modules stay out of every unit.
    ("frozen_tied", "transformer:Sequential", "policy=transformer layer-classes=Sequential", [4], "bn", "match"),
    # One model with a frozen backbone, MultiheadAttention, a tied pair and
    # BatchNorm: the frozen part as its own unit; ignored modules; the size
    # policy never wrapping MultiheadAttention (force leaf) though it is
    # large enough; the tied pair split by torch, refused here.
    ("mixed", "transformer:Sequential", "policy=transformer layer-classes=Sequential", [2, 3], "", "match"),
    ("mixed", "transformer:Sequential", "policy=transformer layer-classes=Sequential", [4], "norm", "match"),
    ("mixed", "size:1000", "policy=size min-num-params=1000", [2], "backbone", "match"),
    ("mixed", "size:250", "policy=size min-num-params=250", [2], "backbone", "tied:enc.weight,dec.weight"),
    ("llama", "transformer:LlamaBlock", "policy=transformer layer-classes=LlamaBlock", [4], "", "match"),
    ("bert", "size:2000", "policy=size min-num-params=2000", [3], "", "match"),
    ("resnet18", "transformer:BasicBlock", "policy=transformer layer-classes=BasicBlock", [3], "", "match"),
]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check(build, tmp, model, torch_policy, policy, world, ignored, expect):
    torch_json = os.path.join(tmp, "torch.json")
    ours_json = os.path.join(tmp, "ours.json")
    oracle = [PYTHON, os.path.join(HERE, "fsdp_oracle.py"), "--model", model,
              "--world-size", str(world), "--policy", torch_policy, "--json", torch_json]
    if ignored:
        oracle += ["--ignored-modules", ignored]
    result = run(oracle)
    if result.returncode != 0:
        return f"torch oracle failed: {result.stderr.strip()[-500:]}"
    wrap = policy + (f" ignored-modules={ignored}" if ignored else "")
    if os.path.exists(ours_json):
        os.remove(ours_json)
    ours = run([os.path.join(build, "bin", "fsdp-opt"),
                os.path.join(build, "test", "corpus", f"{model}.onnx"), "--batch-size=2",
                f"--fsdp-auto-wrap={wrap}", f"--fsdp-flatten=world-size={world}",
                f"--fsdp-layout-json={ours_json}", "-o", os.devnull])
    if expect == "match":
        if ours.returncode != 0:
            return f"fsdp-opt failed: {ours.stderr.strip()}"
        compare = run([PYTHON, os.path.join(HERE, "compare_with_torch.py"), ours_json, torch_json])
        return None if compare.returncode == 0 else compare.stdout + compare.stderr
    import json
    torch_result = json.load(open(torch_json))
    if expect.startswith("tied:"):
        names = set(expect[len("tied:"):].split(","))
        holders = [u["module"] for u in torch_result.get("units") or []
                   if names & set(u["params"])]
        if len(holders) != 2:
            return f"expected torch to put the tied weight in two units, got {holders}"
        if ours.returncode == 0 or "tied parameter" not in ours.stderr:
            return f"expected fsdp-opt's tied-parameter error, got: {ours.stderr.strip()}"
        return None
    if expect == "frozen":
        if "requires uniform `requires_grad`" not in (torch_result.get("errors") or ""):
            return f"expected torch's requires_grad error, got {torch_result.get('errors')}"
        if ours.returncode == 0 or "mixes frozen and trainable" not in ours.stderr:
            return f"expected fsdp-opt's frozen/trainable error, got: {ours.stderr.strip()}"
        return None
    return f"unknown expectation {expect}"


def main():
    build = os.path.abspath(sys.argv[1])
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model, torch_policy, policy, worlds, ignored, expect in CASES:
            for world in worlds:
                name = f"{model} {torch_policy} world={world}" + (f" ignored={ignored}" if ignored else "")
                problem = check(build, tmp, model, torch_policy, policy, world, ignored, expect)
                if problem:
                    failed += 1
                    print(f"FAIL: {name}: {problem}", flush=True)
                else:
                    passed += 1
                    print(f"PASS: {name} ({expect})", flush=True)
    print(f"oracle: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
