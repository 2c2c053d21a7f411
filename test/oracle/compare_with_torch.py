"""Compares this project's flat-parameter layouts (fsdp-opt
--fsdp-layout-json) with PyTorch FSDP's (fsdp_oracle.py --json), unit by
unit: same units (wrapped module FQNs, in FSDP's order), same parameters in
the same flat order, same numels, same padded numel, and for every rank the
same padding, `_shard_indices` and `_shard_param_offsets`. Exact, not
approximate.

    compare_with_torch.py OURS.json TORCH.json
"""

import json
import sys


def fail(message):
    sys.exit("FAIL: " + message)


ours = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
if torch.get("errors"):
    fail(f"torch refused the wrapping: {torch['errors']}")

# FSDP instances that own no parameters have no flat buffer.
theirs = [u for u in torch["units"] if u["params"]]
if [u["module"] for u in ours] != [u["module"] for u in theirs]:
    fail(f"units differ: ours {[u['module'] for u in ours]}, "
         f"torch {[u['module'] for u in theirs]}")

for mine, ref in zip(ours, theirs):
    unit = mine["module"] or "(root)"
    names = [p["fqn"] for p in mine["params"]]
    if names != ref["params"]:
        fail(f"unit {unit}: parameters {names}, torch {ref['params']}")
    numels = [p["numel"] for p in mine["params"]]
    if numels != ref["numels"]:
        fail(f"unit {unit}: numels {numels}, torch {ref['numels']}")
    aliases = sorted([a, p["fqn"]] for p in mine["params"] for a in p["aliases"])
    if aliases != sorted(ref.get("shared", [])):
        fail(f"unit {unit}: tied aliases {aliases}, torch {ref.get('shared')}")
    for key in ("numel", "padded_numel"):
        if mine[key] != ref[key]:
            fail(f"unit {unit}: {key} {mine[key]}, torch {ref[key]}")
    if mine["world_size"] != torch["world_size"]:
        fail(f"world size {mine['world_size']}, torch {torch['world_size']}")
    for rank, tr in zip(mine["ranks"], ref["ranks"]):
        r = rank["rank"]
        if rank["padding"] != tr["numel_padded"]:
            fail(f"unit {unit} rank {r}: padding {rank['padding']}, torch {tr['numel_padded']}")
        if rank["end"] - rank["begin"] != tr["shard_numel"]:
            fail(f"unit {unit} rank {r}: shard numel differs")
        offsets = [[p["param_begin"], p["param_end"] - 1] for p in rank["pieces"]]
        if offsets != tr["shard_param_offsets"]:
            fail(f"unit {unit} rank {r}: shard offsets {offsets}, torch {tr['shard_param_offsets']}")
        # torch 1.13 reports (0, 0) for a shard holding padding only.
        indices = ([rank["pieces"][0]["param"], rank["pieces"][-1]["param"]]
                   if rank["pieces"] else [0, 0])
        if indices != tr["shard_indices"]:
            fail(f"unit {unit} rank {r}: shard indices {indices}, torch {tr['shard_indices']}")
    if len(mine["ranks"]) != len(ref["ranks"]):
        fail(f"unit {unit}: {len(mine['ranks'])} ranks, torch {len(ref['ranks'])}")

print(f"ok: {len(ours)} units match torch FSDP exactly "
      f"(world size {torch['world_size']}, {sum(len(u['params']) for u in ours)} parameters)")
