"""Compares the module tree fsdp-opt recovered (--fsdp-print-module-tree
format=json) with torch's own named_modules() table written at export
(NAME.modules.json: fqn, class, own params, in named_modules() order).

    check_module_tree.py TREE.json MODULES.json [--partial]

Exact mode: same modules in the same order, same class names, same
parameters per module in the same order. --partial (a model exported without
the frontend's metadata): every recovered module is a torch module, every
torch module owning a parameter is recovered, and each recovered module's
parameters are torch's, in torch's order (tied aliases may be missing: ONNX
stores a tied tensor once).
"""

import json
import sys

tree = json.load(open(sys.argv[1]))
torch_modules = json.load(open(sys.argv[2]))
partial = "--partial" in sys.argv[3:]

torch_by_fqn = {m["fqn"]: m for m in torch_modules}
ours_by_fqn = {m["fqn"]: m for m in tree}

def fail(message):
    sys.exit("FAIL: " + message)

if not partial:
    ours = [(m["fqn"], m["class"], m["params"]) for m in tree]
    theirs = [(m["fqn"], m["class"], m["params"]) for m in torch_modules]
    for a, b in zip(ours, theirs):
        if a != b:
            fail(f"recovered {a} but torch has {b}")
    if len(ours) != len(theirs):
        fail(f"recovered {len(ours)} modules, torch has {len(theirs)}")
    # Each module's children are the torch modules one level below it, in
    # torch's (registration) order.
    for m in tree:
        prefix = m["fqn"] + "." if m["fqn"] else ""
        expected = [c["fqn"] for c in torch_modules
                    if c["fqn"].startswith(prefix) and c["fqn"] != m["fqn"]
                    and "." not in c["fqn"][len(prefix):]]
        if m["children"] != expected:
            fail(f"module '{m['fqn']}': children {m['children']}, torch has {expected}")
    print(f"ok: {len(ours)} modules match torch's named_modules() exactly")
    sys.exit(0)

for fqn, ours in ours_by_fqn.items():
    if fqn not in torch_by_fqn:
        fail(f"recovered module '{fqn}', which torch does not have")
    theirs = torch_by_fqn[fqn]["params"]
    if [p for p in theirs if p in ours["params"]] != ours["params"]:
        fail(f"module '{fqn}': recovered params {ours['params']}, torch has {theirs}")
owners = {m["fqn"] for m in torch_modules if m["params"]}
tied = 0
for fqn in owners:
    if fqn not in ours_by_fqn:
        fail(f"torch module '{fqn}' owns parameters but was not recovered")
    tied += len(torch_by_fqn[fqn]["params"]) - len(ours_by_fqn[fqn]["params"])
print(f"ok: {len(tree)} of torch's {len(torch_modules)} modules recovered, "
      f"all {len(owners)} parameter owners among them ({tied} tied aliases unknown)")
