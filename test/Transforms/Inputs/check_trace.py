"""Summarises a Chrome trace written by fsdp-opt --fsdp-timeline for
FileCheck: thread names, event counts per stream, the collectives (with
--compute, the compute ops' FLOPs and bytes too), and whether any stream
overlaps itself."""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
print("threads: " + ", ".join(names[t] for t in sorted(names)))
spans = [e for e in events if e["ph"] == "X"]
counts = [sum(e["tid"] == t for e in spans) for t in (0, 1)]
print(f"compute events {counts[0]}, communication events {counts[1]}")
for e in spans:
    if e["tid"] == 0 and "--compute" in sys.argv[2:]:
        print(f"{e['name']} flops {e['args']['flops']} bytes {e['args']['bytes']}")
    if e["tid"] == 1:
        name = e["name"].split(" (")[0]
        print(f"{name} tid {e['tid']} ts {e['ts']:.3f} dur {e['dur']:.3f}")
overlap = False
for t in (0, 1):
    mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["tid"] == t)
    overlap |= any(b[0] < a[1] - 1e-9 for a, b in zip(mine, mine[1:]))
print("streams overlap themselves" if overlap else "streams do not overlap themselves")
