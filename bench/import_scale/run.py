#!/usr/bin/env python3
"""ONNX import cost against weight size: does fsdp-opt stay flat from a
1 MiB model to a 13B one?

Builds LLaMA-shaped models with make_model.py (sparse data files: no disk),
imports each with

    build/bin/fsdp-opt MODEL --batch-size=1 -o /dev/null

under `/usr/bin/time -f "%e %M"` (best of --runs), and prints wall time and
peak RSS beside the tiny model's (the reference measured in the same run),
then proves the weights are never read: one run under strace (every
open/read/mmap of the data file) and one whose /proc/<pid>/io is read
before the process is reaped.

    /usr/bin/python3 bench/import_scale/run.py [--work-dir /tmp/fsdp-import-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (name, make_model.py arguments, what it is)
MODELS = [
    ("tiny", ["--layers", "2", "--hidden", "128", "--ffn", "352", "--vocab", "1024"],
     "reference: ~1 MiB of weights"),
    ("tiny-32L", ["--layers", "32", "--hidden", "64", "--ffn", "192", "--vocab", "1024"],
     "control: 7B's graph (32 layers), ~4 MiB of weights"),
    ("1GiB", ["--data-gib", "1"], "shape picked for 1 GiB"),
    ("20GiB", ["--data-gib", "20"], "shape picked for 20 GiB"),
    ("llama-7B", ["--layers", "32", "--hidden", "4096", "--ffn", "11008", "--vocab", "32000"],
     "LLaMA-7B shape"),
    ("llama-13B", ["--layers", "40", "--hidden", "5120", "--ffn", "13824", "--vocab", "32000"],
     "LLaMA-13B shape"),
    ("llama-65B", ["--layers", "80", "--hidden", "8192", "--ffn", "22016", "--vocab", "32000"],
     "LLaMA-65B shape (extra)"),
]
DEFAULT_NAMES = ["tiny", "tiny-32L", "1GiB", "20GiB", "llama-7B", "llama-13B", "llama-65B"]

READ_CALLS = {"read", "pread64", "readv", "preadv", "preadv2"}
STRACE_CALLS = ("open,openat,openat2,read,pread64,readv,preadv,preadv2,mmap,"
                "sendfile,copy_file_range,splice,stat,lstat,newfstatat,statx,fstat")


def make(work, name, args, python):
    out = os.path.join(work, name)
    cmd = [python, os.path.join(HERE, "make_model.py"), out] + args
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode:
        sys.exit(f"make_model failed: {shlex.join(cmd)}\n{cp.stderr}")
    return json.loads(cp.stdout.strip().splitlines()[-1]), cmd


def import_cmd(fsdp_opt, model):
    return [fsdp_opt, model, "--batch-size=1", "-o", "/dev/null"]


def timed_once(fsdp_opt, model, timeout, tfile):
    """One import under /usr/bin/time; returns (result, failure)."""
    cmd = ["/usr/bin/time", "-o", tfile, "-f", "%e %M %U %S"] + import_cmd(fsdp_opt, model)
    failed = {"cmd": shlex.join(import_cmd(fsdp_opt, model))}
    t0 = time.perf_counter()
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, dict(failed, error=f"timed out after {timeout} s")
    wall = time.perf_counter() - t0
    if cp.returncode:
        return None, dict(failed, rc=cp.returncode, error=cp.stderr.strip()[-4000:])
    with open(tfile) as f:
        e, m, u, sy = f.read().split()[-4:]
    return {"time_s": float(e), "rss_kib": int(m), "cpu_s": float(u) + float(sy),
            "wall_s": wall}, None


def proc_io(fsdp_opt, model):
    """/proc/<pid>/io of one import, read while the process is a zombie."""
    p = subprocess.Popen(import_cmd(fsdp_opt, model), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    try:
        with open(f"/proc/{p.pid}/io") as f:
            io = {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
    except OSError as e:
        io = {"error": str(e)}
    p.wait()
    return io


LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<rest>.*)$")
CALL = re.compile(r"^(?P<call>\w+)\((?P<args>.*?)(\) += (?P<ret>-?\d+)|\s*<unfinished \.\.\.>)")
RESUMED = re.compile(r"^<\.\.\. (?P<call>\w+) resumed>.*\) += (?P<ret>-?\d+)")


def strace_io(fsdp_opt, model, data_path, log):
    """Every syscall of one import that touches the data file, from strace -y."""
    if not shutil.which("strace"):
        return {"error": "strace not installed (apt-get install strace)"}
    cmd = ["strace", "-f", "-y", "-qq", "-e", "trace=" + STRACE_CALLS, "-o", log] + \
        import_cmd(fsdp_opt, model)
    cp = subprocess.run(cmd, capture_output=True, text=True)
    data = os.path.realpath(data_path)
    onnx = os.path.realpath(model)
    stats = {"rc": cp.returncode, "cmd": shlex.join(cmd), "opens": 0, "stats": 0,
             "read_calls": 0, "read_bytes": 0, "mmaps": 0,
             "model_read_bytes": 0, "model_mmaps": 0, "examples": {}}
    pending = {}
    with open(log) as f:
        for raw in f:
            m = LINE.match(raw.rstrip("\n"))
            pid, rest = (m["pid"], m["rest"]) if m else ("0", raw.rstrip("\n"))
            r = RESUMED.match(rest)
            if r:
                call, path = pending.pop(pid, (r["call"], ""))
                ret = int(r["ret"])
            else:
                c = CALL.match(rest)
                if not c:
                    continue
                call, args = c["call"], c["args"]
                # The fd's (or the path argument's) file.
                fd = re.match(r"^(-?\d+|AT_FDCWD)<(?P<p>[^>]*)>", args)
                path = fd["p"] if fd else ""
                q = re.search(r'"(?P<p>[^"]*)"', args)
                if call in ("open", "openat", "openat2", "stat", "lstat",
                            "newfstatat", "statx") and q and q["p"].endswith(
                                os.path.basename(data)):
                    path = os.path.realpath(q["p"])
                if call == "mmap":
                    mm = re.search(r", (-?\d+)<(?P<p>[^>]*)>, ", args)
                    path = mm["p"] if mm else ""
                if c["ret"] is None:
                    pending[pid] = (call, path)
                    continue
                ret = int(c["ret"])
            if path == data:
                stats["examples"].setdefault(call, rest[:160])
                if call in ("open", "openat", "openat2") and ret >= 0:
                    stats["opens"] += 1
                elif call in ("stat", "lstat", "newfstatat", "statx", "fstat"):
                    stats["stats"] += 1
                elif call in READ_CALLS or call in ("sendfile", "copy_file_range", "splice"):
                    stats["read_calls"] += 1
                    stats["read_bytes"] += max(ret, 0)
                elif call == "mmap":
                    stats["mmaps"] += 1
            elif path == onnx:
                if call in READ_CALLS:
                    stats["model_read_bytes"] += max(ret, 0)
                elif call == "mmap":
                    stats["model_mmaps"] += 1
    return stats


def self_test(work, python):
    """Checks that strace_io sees reads and mappings of a data file: `head`
    reads 300000 bytes of one, python mmaps one."""
    global import_cmd
    info, _ = make(work, "selftest", MODELS[0][1], python)
    data, saved = info["data"], import_cmd
    probes = [(["head", "-c", "300000", data], "read_bytes", 300000),
              ([python, "-c", "import mmap; f = open(%r, 'rb'); "
                "m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); m[:10]"
                % data], "mmaps", 1)]
    ok = True
    try:
        for cmd, key, want in probes:
            import_cmd = lambda f, m, cmd=cmd: cmd
            s = strace_io("", info["model"], data, os.path.join(work, "selftest.strace"))
            good = s.get(key) == want
            ok &= good
            print(f"self-test {'ok  ' if good else 'FAIL'} {key}={s.get(key)} "
                  f"(want {want}): {shlex.join(cmd)}")
    finally:
        import_cmd = saved
    return ok


def fmt_bytes(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", default="/tmp/fsdp-import-scale",
                    help="where the models go (sparse; removed at the end "
                         "unless --keep)")
    ap.add_argument("--fsdp-opt", default=os.path.join(ROOT, "build", "bin", "fsdp-opt"))
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="interpreter with onnx for make_model.py")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="per import, s")
    ap.add_argument("--models", default=",".join(DEFAULT_NAMES),
                    help="comma-separated subset of: " +
                         ", ".join(n for n, _, _ in MODELS))
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--no-copy", action="store_true",
                    help="run --fsdp-opt in place instead of a copy in the work dir")
    ap.add_argument("--self-test", action="store_true",
                    help="only check that the strace accounting catches a "
                         "read and an mmap of a data file")
    args = ap.parse_args(argv)

    if args.self_test:
        os.makedirs(args.work_dir, exist_ok=True)
        ok = self_test(args.work_dir, args.python)
        if not args.keep:
            shutil.rmtree(args.work_dir, ignore_errors=True)
        return 0 if ok else 1

    if not os.access(args.fsdp_opt, os.X_OK):
        sys.exit(f"{args.fsdp_opt} not found: build first (scripts/test.sh)")
    wanted = args.models.split(",")
    unknown = set(wanted) - {n for n, _, _ in MODELS}
    if unknown:
        sys.exit(f"unknown models: {sorted(unknown)}")
    if "tiny" not in wanted:
        wanted.insert(0, "tiny")  # the reference
    os.makedirs(args.work_dir, exist_ok=True)
    tfile = os.path.join(args.work_dir, "time.txt")
    # Import with a copy of fsdp-opt, so that a rebuild of build/ during the
    # run (other work on a shared machine) cannot swap or remove it.
    original = args.fsdp_opt
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.path.getmtime(original)))
    if not args.no_copy:
        args.fsdp_opt = os.path.join(args.work_dir, "fsdp-opt")
        shutil.copy2(original, args.fsdp_opt)
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"fsdp-opt: {original} (built {built} UTC; repository at {head or '?'})"
          + ("" if args.no_copy else f", run as a copy: {args.fsdp_opt}"),
          file=sys.stderr, flush=True)

    load_before = os.getloadavg()
    rows = []
    for name, margs, what in MODELS:
        if name not in wanted:
            continue
        info, make_cmd = make(args.work_dir, name, margs, args.python)
        print(f"[{name}] {what}: {info['layers']} layers, hidden {info['hidden']}, "
              f"ffn {info['ffn']}, vocab {info['vocab']}, "
              f"{fmt_bytes(info['data_bytes'])} sparse ({info['data_disk_bytes']} B on disk)",
              file=sys.stderr, flush=True)
        rows.append({"name": name, "what": what, "info": info,
                     "make_cmd": shlex.join(make_cmd),
                     "import_cmd": shlex.join(import_cmd(original, info["model"])),
                     "runs": [], "failure": None})
    # Rounds over all models, so that load from elsewhere on the machine
    # falls on every model alike.
    for _ in range(args.runs):
        for row in rows:
            if row["failure"]:
                continue
            result, failure = timed_once(args.fsdp_opt, row["info"]["model"],
                                         args.timeout, tfile)
            if failure:
                row["failure"] = failure
                print(f"[{row['name']}] FAILED: {failure}", file=sys.stderr, flush=True)
            else:
                row["runs"].append(result)
    for row in rows:
        if row["failure"]:
            continue
        row["io"] = proc_io(args.fsdp_opt, row["info"]["model"])
        if not args.no_strace:
            row["strace"] = strace_io(args.fsdp_opt, row["info"]["model"],
                                      row["info"]["data"],
                                      os.path.join(args.work_dir, row["name"] + ".strace"))

    ref = next(r for r in rows if r["name"] == "tiny")
    if ref["failure"]:
        sys.exit("the tiny reference failed to import; no ratios")
    best = lambda r, k: min(x[k] for x in r["runs"])
    w0, c0, m0 = best(ref, "wall_s"), best(ref, "cpu_s"), best(ref, "rss_kib")

    load_after = os.getloadavg()
    print(f"\n{original} (built {built} UTC, HEAD {head}) MODEL --batch-size=1 "
          f"-o /dev/null, best of {args.runs}; "
          f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    hdr = (f"{'model':<10} {'L':>3} {'hidden':>6} {'ffn':>6} {'vocab':>6} "
           f"{'data':>11} {'nodes':>6} {'params':>6} {'%e s':>5} {'wall ms':>8} "
           f"{'RSS MiB':>8} {'cpu s':>5} {'t/t_tiny':>8} {'rss/tiny':>8} {'cpu/tiny':>8} "
           f"{'data read':>10} "
           f"{'mmaps':>5} {'rchar':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        i = r["info"]
        lead = (f"{r['name']:<10} {i['layers']:>3} {i['hidden']:>6} {i['ffn']:>6} "
                f"{i['vocab']:>6} {fmt_bytes(i['data_bytes']):>11} {i['nodes']:>6} "
                f"{i['params']:>6} ")
        if r["failure"]:
            print(lead + "FAILED (see below)")
            continue
        t, w, m, c = (best(r, k) for k in ("time_s", "wall_s", "rss_kib", "cpu_s"))
        s = r.get("strace", {})
        dread = "-" if "read_bytes" not in s else str(s["read_bytes"])
        mm = "-" if "mmaps" not in s else str(s["mmaps"])
        print(lead + f"{t:>5.2f} {w * 1000:>8.1f} {m / 1024:>8.1f} {c:>5.2f} "
              f"{w / w0:>8.2f} {m / m0:>8.2f} {c / max(c0, 0.01):>8.2f} "
              f"{dread:>10} {mm:>5} {r['io'].get('rchar', '?'):>9}")
    print("\n%e s, RSS (%M) and cpu s (%U + %S) are /usr/bin/time's; wall ms is "
          "python's clock around it, which t/t_tiny uses (%e has 10 ms steps); each "
          "column is its best over the runs, which go in rounds over all models. 'data read' is bytes returned by "
          "read-family syscalls on the data file under strace, 'mmaps' its "
          "mappings; rchar is /proc/<pid>/io's count of all bytes the import "
          "read through syscalls (model.onnx, /proc, ...).")

    print("\nraw runs (/usr/bin/time %e s, %M KiB, %U+%S s; wall s):")
    for r in rows:
        print(f"  {r['name']:<10} " + "  ".join(
            f"({x['time_s']:.2f}, {x['rss_kib']}, {x['cpu_s']:.2f}; {x['wall_s']:.4f})"
            for x in r["runs"]))
    print("\nI/O on the data file (strace -f -y) and /proc/<pid>/io:")
    for r in rows:
        if r["failure"]:
            continue
        s = r.get("strace", {})
        io = r["io"]
        print(f"  {r['name']:<10} data file: opens={s.get('opens', '-')} "
              f"stats={s.get('stats', '-')} read_calls={s.get('read_calls', '-')} "
              f"read_bytes={s.get('read_bytes', '-')} mmaps={s.get('mmaps', '-')}; "
              f"model.onnx: read {s.get('model_read_bytes', '-')} B, "
              f"mmaps={s.get('model_mmaps', '-')}; /proc io: rchar={io.get('rchar')} "
              f"syscr={io.get('syscr')} read_bytes={io.get('read_bytes')}")
        for call, line in s.get("examples", {}).items():
            print(f"      e.g. {line}")
    failures = [r for r in rows if r["failure"]]
    if failures:
        print("\nFAILURES:")
        for r in failures:
            cmd = r["failure"]["cmd"].replace(args.fsdp_opt, original)
            print(f"  {r['name']}: {cmd}\n    {r['failure']['error']}")
            print(f"    model made with: {r['make_cmd']}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
