"""Self-check of the FSDP oracle harness (fsdp_oracle.py) against properties
that torch 1.13 FSDP itself must satisfy.

    /usr/bin/python3 test/oracle/test_fsdp_oracle.py -v
    /usr/bin/python3 -m unittest discover -s test/oracle -v

Runs the harness's command line for gpt2 (transformer:GPT2Block at world
sizes 2 and 3, size:1000 at 4, none at 2), a tiny model whose units leave
some ranks with padding only, a torch error case, a usage error and two
fault-injection runs (a rank that dies, a rank that hangs); about 35 s on two
cores. Skipped without torch.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "fsdp_oracle.py")
MODELS = os.path.join(os.path.dirname(HERE), "corpus", "models.py")
PYTHON = os.environ.get("FSDP_PYTHON", "/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                        else sys.executable)

# (world size, policy, the units torch 1.13 builds for gpt2, in pre-order)
GPT2_RUNS = [
    (2, "transformer:GPT2Block", ["", "blocks.0", "blocks.1"]),
    (3, "transformer:GPT2Block", ["", "blocks.0", "blocks.1"]),
    (4, "size:1000", ["", "wte",
                      "blocks.0.attn.c_attn", "blocks.0.attn.c_proj",
                      "blocks.0.mlp.c_fc", "blocks.0.mlp.c_proj",
                      "blocks.1.attn.c_attn", "blocks.1.attn.c_proj",
                      "blocks.1.mlp.c_fc", "blocks.1.mlp.c_proj",
                      "lm_head"]),
    (2, "none", [""]),
]


@functools.lru_cache(maxsize=None)
def _have_torch():
    try:
        r = subprocess.run([PYTHON, "-c", "import torch.distributed; "
                            "assert torch.distributed.is_gloo_available()"],
                           capture_output=True, timeout=60)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_cli(*args, env=None, timeout=90):
    """Runs fsdp_oracle.py; returns (returncode, json doc or None, stderr, seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        t0 = time.monotonic()
        r = subprocess.run([PYTHON, ORACLE, *args, "--json", out], capture_output=True,
                           text=True, timeout=timeout, env={**os.environ, **(env or {})})
        dt = time.monotonic() - t0
        doc = None
        if os.path.exists(out):
            with open(out) as f:
                doc = json.load(f)
        return r.returncode, doc, r.stderr, dt


def model_table(models_file, name):
    """[(fqn, canonical fqn, numel, shape)] of a model, aliases included, in
    named_modules()/named_parameters(recurse=False) order, and its module
    names; built here, not taken from the harness."""
    spec = importlib.util.spec_from_file_location(f"test_fsdp_oracle_{name}", models_file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    model, _ = mod.CASES[name].build()
    first, rows = {}, []
    for mname, m in model.named_modules():
        for pname, p in m.named_parameters(recurse=False):
            fqn = f"{mname}.{pname}" if mname else pname
            rows.append((fqn, first.setdefault(id(p), fqn), p.numel(), list(p.shape)))
    modules = [mname for mname, _ in model.named_modules()]
    return rows, modules


# Tiny parameters so that some ranks hold only padding (torch.chunk gives
# fewer chunks than ranks): with 4 ranks, "a" (6 numel) leaves rank 3 with
# padding only, "b" (2 numel) ranks 2 and 3.
TINY_MODELS = """
from dataclasses import dataclass
from typing import Callable
import torch
import torch.nn as nn

@dataclass
class Case:
    name: str
    build: Callable

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(1, 1)
        self.c = nn.Linear(4, 4)

def build_tiny():
    torch.manual_seed(0)
    return Tiny(), ()

CASES = {c.name: c for c in [Case("tiny", build_tiny)]}
"""


class LayoutChecks:
    """Properties of one oracle document that torch itself guarantees."""

    def check_doc(self, doc, params, modules):
        ws = doc["world_size"]
        self.assertIsNone(doc["errors"])
        stored = self.check_coverage(doc, params)
        for unit in doc["units"]:
            self.check_unit(unit, ws, params, modules)
        return stored

    def check_coverage(self, doc, params):
        """Every parameter FQN of the model is in exactly one unit, either as
        a flattened parameter or as a shared alias of one. Returns canonical
        FQN -> the units that flatten that tensor (one, unless torch unties)."""
        seen = {}
        stored = {}
        canonical = {fqn: canon for fqn, canon, _, _ in params}
        for unit in doc["units"]:
            for fqn in unit["params"]:
                self.assertNotIn(fqn, seen, f"{fqn} in units {seen.get(fqn)!r} and {unit['module']!r}")
                seen[fqn] = unit["module"]
                stored.setdefault(canonical[fqn], []).append(unit["module"])
            for alias, canon in unit["shared"]:
                self.assertNotIn(alias, seen)
                seen[alias] = unit["module"]
                self.assertIn(canon, unit["params"], "a shared alias points into its own unit")
                self.assertEqual(canonical[alias], canonical[canon])
        self.assertEqual(sorted(seen), sorted(fqn for fqn, _, _, _ in params))
        return stored

    def check_unit(self, unit, ws, params, modules):
        name = unit["module"]
        self.assertIn(name, modules)
        by_fqn = {fqn: (numel, shape) for fqn, _, numel, shape in params}
        n = len(unit["params"])
        self.assertEqual(len(unit["numels"]), n)
        self.assertEqual(len(unit["shapes"]), n)
        for fqn, numel, shape in zip(unit["params"], unit["numels"], unit["shapes"]):
            if name:
                self.assertTrue(fqn.startswith(name + "."), f"{fqn} outside unit {name!r}")
            self.assertEqual((numel, shape), tuple(by_fqn[fqn]))
            self.assertEqual(numel, math.prod(shape))
        # Flat order: named_modules()/named_parameters(recurse=False) order.
        order = [fqn for fqn, _, _, _ in params]
        self.assertEqual(unit["params"], sorted(unit["params"], key=order.index))

        numel, padded = unit["numel"], unit["padded_numel"]
        self.assertEqual(sum(unit["numels"]), numel)
        self.assertEqual(padded % ws, 0)
        self.assertTrue(0 <= padded - numel < ws, (numel, padded, ws))
        self.assertEqual(padded, math.ceil(numel / ws) * ws)

        shard = padded // ws
        starts = [sum(unit["numels"][:i]) for i in range(n)]
        self.assertEqual([r["rank"] for r in unit["ranks"]], list(range(ws)))
        for r in unit["ranks"]:
            rank = r["rank"]
            lo, hi = rank * shard, (rank + 1) * shard - 1  # rank owns [lo, hi]
            self.assertEqual(r["shard_numel"], shard)
            self.assertEqual(r["numel_padded"], max(0, min(shard, hi + 1 - numel)))
            expected, indices = [], []
            for i, (start, k) in enumerate(zip(starts, unit["numels"])):
                end = start + k - 1
                if lo <= end and hi >= start:
                    indices.append(i)
                    expected.append([max(lo, start) - start, min(hi, end) - start])
            self.assertEqual(r["shard_param_offsets"], expected, f"unit {name!r} rank {rank}")
            self.assertEqual(r["shard_indices"], [indices[0], indices[-1]] if indices else [0, 0])
            covered = sum(b - a + 1 for a, b in r["shard_param_offsets"])
            self.assertEqual(covered + r["numel_padded"], shard)
            if lo >= numel:  # only padding on this rank
                self.assertEqual(r["shard_param_offsets"], [])
                self.assertEqual(r["numel_padded"], shard)
            self.assertTrue(r["shard_data_ok"], "the shard's values follow the flat layout")


@unittest.skipUnless(_have_torch(), "torch with gloo not available")
class FSDPOracleGPT2(LayoutChecks, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.params, cls.modules = model_table(MODELS, "gpt2")
        cls.docs = {}
        for ws, policy, _ in GPT2_RUNS:
            rc, doc, err, dt = run_cli("--model", "gpt2", "--world-size", str(ws),
                                       "--policy", policy)
            if rc != 0:
                raise AssertionError(f"oracle failed for ws={ws} {policy}: rc={rc}\n{err}")
            cls.docs[(ws, policy)] = doc

    def test_runs(self):
        for ws, policy, expected_units in GPT2_RUNS:
            with self.subTest(ws=ws, policy=policy):
                doc = self.docs[(ws, policy)]
                self.assertEqual(doc["world_size"], ws)
                self.assertEqual(doc["policy"], policy)
                self.assertEqual([u["module"] for u in doc["units"]], expected_units)
                stored = self.check_doc(doc, self.params, self.modules)
                self.check_tie(doc, stored)

    def check_tie(self, doc, stored):
        """The tied lm_head.weight/wte.weight is flattened once and recorded
        in shared, except under the size policy (torch 1.13 behaviour)."""
        split = {c: us for c, us in stored.items() if len(us) > 1}
        if doc["policy"].startswith("size:"):
            # Once wte is wrapped its weight is flattened, but lm_head still
            # registers the original Parameter object, so the size policy
            # wraps lm_head separately and flattens the tied weight a second
            # time: two copies in two units, the tie is broken.
            self.assertEqual(split, {"wte.weight": ["wte", "lm_head"]})
            self.assertEqual([u["shared"] for u in doc["units"]], [[]] * len(doc["units"]))
        else:
            self.assertEqual(split, {})
            root = doc["units"][0]
            self.assertEqual(root["module"], "")
            self.assertIn(["lm_head.weight", "wte.weight"], root["shared"])

    def test_padding_shows_up(self):
        # 2624 and 12704 are even: no padding at 2; at 3 each unit pads.
        for unit in self.docs[(2, "transformer:GPT2Block")]["units"]:
            self.assertEqual(unit["padded_numel"], unit["numel"])
        pads = [u["padded_numel"] - u["numel"] for u in self.docs[(3, "transformer:GPT2Block")]["units"]]
        self.assertEqual(pads, [1, 1, 1])
        self.assertEqual(self.docs[(3, "transformer:GPT2Block")]["units"][0]["ranks"][2]["numel_padded"], 1)

    def test_root_only_flattens_everything_once(self):
        (root,) = self.docs[(2, "none")]["units"]
        distinct = [fqn for fqn, canon, _, _ in self.params if fqn == canon]
        self.assertEqual(root["params"], distinct)
        self.assertEqual(root["shared"], [["lm_head.weight", "wte.weight"]])


@unittest.skipUnless(_have_torch(), "torch with gloo not available")
class FSDPOraclePaddingOnlyRanks(LayoutChecks, unittest.TestCase):
    def test_tiny_units_at_world_size_4(self):
        with tempfile.TemporaryDirectory() as tmp:
            models = os.path.join(tmp, "tiny_models.py")
            with open(models, "w") as f:
                f.write(TINY_MODELS)
            params, modules = model_table(models, "tiny")
            rc, doc, err, _ = run_cli("--models-file", models, "--model", "tiny",
                                      "--world-size", "4", "--policy", "regex:a|b")
        self.assertEqual(rc, 0, err)
        self.check_doc(doc, params, modules)
        units = {u["module"]: u for u in doc["units"]}
        self.assertEqual(list(units), ["", "a", "b"])
        self.assertEqual(units[""]["params"], ["scale", "c.weight", "c.bias"])
        self.assertEqual((units["a"]["numel"], units["a"]["padded_numel"]), (6, 8))
        self.assertEqual((units["b"]["numel"], units["b"]["padded_numel"]), (2, 4))
        a3 = units["a"]["ranks"][3]
        self.assertEqual((a3["shard_param_offsets"], a3["numel_padded"], a3["shard_indices"]),
                         ([], 2, [0, 0]))
        self.assertEqual([r["shard_param_offsets"] for r in units["b"]["ranks"]],
                         [[[0, 0]], [[0, 0]], [], []])
        self.assertEqual([r["shard_indices"] for r in units["b"]["ranks"]],
                         [[0, 0], [1, 1], [0, 0], [0, 0]])


@unittest.skipUnless(_have_torch(), "torch with gloo not available")
class FSDPOracleErrorsAndFaults(unittest.TestCase):
    def test_torch_error_is_an_observation(self):
        rc, doc, err, _ = run_cli("--model", "frozen_tied", "--world-size", "2", "--policy", "none")
        self.assertEqual(rc, 0, err)
        self.assertIsNone(doc["units"])
        self.assertEqual(doc["errors"], "ValueError: `FlatParameter` requires uniform `requires_grad`")

    def test_usage_error(self):
        rc, doc, err, _ = run_cli("--model", "gpt2", "--world-size", "2", "--policy", "size:x")
        self.assertEqual(rc, 2)
        self.assertIsNone(doc)

    def test_dead_rank_is_reported(self):
        rc, doc, err, dt = run_cli("--model", "gpt2", "--world-size", "3",
                                   env={"FSDP_ORACLE_FAULT": "1:exit"})
        self.assertEqual(rc, 1)
        self.assertIsNone(doc)
        self.assertIn("rank 1 exited with code 7", err)
        self.assertLess(dt, 30)

    def test_hung_rank_times_out(self):
        rc, doc, err, dt = run_cli("--model", "gpt2", "--world-size", "2", "--timeout", "8",
                                   env={"FSDP_ORACLE_FAULT": "1:hang"})
        self.assertEqual(rc, 1)
        self.assertIsNone(doc)
        self.assertIn("timed out after 8 s", err)
        self.assertLess(dt, 20)


if __name__ == "__main__":
    unittest.main()
