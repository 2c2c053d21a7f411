#!/usr/bin/env python3
"""ONNX's backend conformance cases through the whole compiler and runtime.

Every case of Debian's libonnx-testdata (ONNX 1.12: node, pytorch-converted,
pytorch-operator, simple; 1,072 models) goes through what a user runs:

  fsdp-opt model.onnx -o imported.mlir              (import)
  fsdp-opt imported.mlir --fsdp-inference-pipeline  (compile, at world size 1)
  fsdp-translate --mlir-to-plan                     (compile)
  fsdp-run plan --input NAME=input_K.npy ...        (session, then run)

and its outputs are compared with the case's output_K.pb with ONNX's own
tolerances (onnx.backend.test: rtol 1e-3, atol 1e-7, dtypes equal). Each
case ends in one class:

  pass            every data set's outputs equal the expected ones
  refused-import  one of the tools said no, with an `error:` line: the
  refused-compile reason is recorded, and the stage that said it
  refused-session (fsdp-run refusing a plan counts as the session's)
  dropout-random  Dropout in training mode with a non-zero ratio: the mask
                  is random, so the expected outputs cannot apply. The
                  data set's ratio and mode are made constants of the
                  graph, which compiles with --fsdp-lower-pipeline (the
                  training-mode dropout kernel) and runs; checked: every
                  output is 0 or x / (1 - ratio), the mask output says
                  which, the kept share is within 5 binomial standard
                  deviations of 1 - ratio (a failed check is `wrong`)
  random          the graph draws random numbers (RandomUniform(Like),
                  RandomNormal(Like), Bernoulli, Multinomial): it compiles
                  and runs as any case, but its values cannot equal the
                  expected ones. Checked instead: each output's dtype and
                  shape are the expected ones, its values are finite, lie in
                  {0, 1} where the expected ones do (Bernoulli's), and in
                  [low, high) where a RandomUniform(Like) gives the output
                  (a failed check is `wrong`)
  wrong           outputs differ (values, shapes, dtypes or count)
  crash           a tool died of a signal or a crash handler spoke
  timeout         a tool ran past --timeout seconds
  unexplained     a tool failed without an `error:` line

Exit status: 0 when no case is wrong, crashed, timed out or unexplained and
at least --min-pass cases pass; 1 otherwise; 77 (ctest's skip) when the
test data is not installed. Prints the counts by category and class, the
refusal reasons, and every failing case.
"""

import argparse
import collections
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

CATEGORIES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
CLASSES = ["pass", "refused-import", "refused-compile", "refused-session",
           "dropout-random", "random", "wrong", "crash", "timeout",
           "unexplained"]
# The operators whose outputs are random numbers (the `random` class).
RANDOM_OPS = {"RandomUniform", "RandomUniformLike", "RandomNormal",
              "RandomNormalLike", "Bernoulli", "Multinomial"}
FAILING = {"wrong", "crash", "timeout", "unexplained"}
DEFAULT_DATA = "/usr/share/libonnx-testdata/data"
# onnx.backend.test.loader's tolerances for cases stored with a model.onnx.
RTOL, ATOL = 1e-3, 1e-7
CRASH_MARKS = ("PLEASE submit a bug report", "Stack dump:", "Sanitizer",
               "terminate called", "Segmentation fault")


class Outcome(Exception):
    """Ends a case early with its class and a one-line detail."""

    def __init__(self, cls, detail, stage=""):
        super().__init__(detail)
        self.cls, self.detail, self.stage = cls, detail, stage


def first_error_line(text):
    for line in text.splitlines():
        if "error:" in line:
            return line.strip()
    return ""


def run_tool(stage, cmd, timeout):
    """Runs one tool; raises an Outcome unless it succeeded."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Outcome("timeout", f"{os.path.basename(cmd[0])} ran past "
                      f"{timeout} s", stage)
    output = proc.stderr + proc.stdout
    if proc.returncode < 0 or proc.returncode >= 128 or any(
            mark in output for mark in CRASH_MARKS):
        raise Outcome("crash", f"{os.path.basename(cmd[0])} exited with "
                      f"{proc.returncode}: {output.strip()[-300:]!r}", stage)
    if proc.returncode != 0:
        line = first_error_line(output)
        if not line:
            raise Outcome("unexplained", f"{os.path.basename(cmd[0])} exited "
                          f"with {proc.returncode} and no error line: "
                          f"{output.strip()[-300:]!r}", stage)
        raise Outcome("refused-" + stage, line, stage)
    return proc


def load_tensor(path):
    import onnx
    from onnx import numpy_helper
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor.name, numpy_helper.to_array(tensor)


def real_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def constant_values(model, feeds):
    """Known values by name: initializers, Constant nodes, the fed inputs."""
    from onnx import numpy_helper
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attr.t)
    values.update(feeds)
    return values


def random_dropout(model, feeds):
    """Whether a Dropout runs in training mode with a non-zero ratio."""
    values = constant_values(model, feeds)
    for node in model.graph.node:
        if node.op_type != "Dropout" or len(node.input) < 3 or not node.input[2]:
            continue
        training = values.get(node.input[2])
        ratio = values.get(node.input[1], 0.5) if len(node.input) > 1 and \
            node.input[1] else 0.5
        if training is None or bool(training) and float(ratio) != 0.0:
            return True
    return False


def import_options(model, feeds):
    """--dim / --batch-size for the dynamic dimensions, from the fed shapes."""
    options, batch = [], None
    for info in real_inputs(model):
        if info.name not in feeds or not info.type.HasField("tensor_type"):
            continue
        shape = feeds[info.name].shape
        for d, dim in enumerate(info.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") or d >= len(shape):
                continue
            if dim.dim_param:
                option = f"--dim={dim.dim_param}={shape[d]}"
                if option not in options:
                    options.append(option)
            elif d == 0:
                batch = shape[0]
    if batch is not None:
        options.append(f"--batch-size={batch}")
    return options


def compare(name, got, want):
    """'' when `got` matches `want` as ONNX's runner checks it, else why."""
    import numpy as np
    if got.dtype != want.dtype:
        return f"output {name}: dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"output {name}: shape {list(got.shape)}, expected {list(want.shape)}"
    try:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    except AssertionError as e:
        lines = [l.strip() for l in str(e).splitlines() if "Max" in l]
        return f"output {name}: not within rtol {RTOL}, atol {ATOL} ({'; '.join(lines)})"
    return ""


def check_random_output(model, name, got, want):
    """'' when output `name` of a `random` case has the properties its
    expected value allows (see the module's `random`), else why."""
    import numpy as np
    if got.dtype != want.dtype:
        return f"output {name}: dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"output {name}: shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype.kind == "f" and not np.all(np.isfinite(got)):
        return f"output {name}: not all values are finite"
    if want.size and np.all((want == 0) | (want == 1)) and \
            not np.all((got == 0) | (got == 1)):
        return f"output {name}: values other than 0 and 1"
    from onnx import helper
    for node in model.graph.node:
        if node.op_type in ("RandomUniform", "RandomUniformLike") and \
                name in node.output:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            low, high = attrs.get("low", 0.0), attrs.get("high", 1.0)
            if got.size and not (got.min() >= low and got.max() < high):
                return (f"output {name}: values in [{got.min()}, {got.max()}], "
                        f"not in [{low}, {high})")
    return ""


def frozen_dropout_model(model, feeds, path):
    """`model` with each Dropout's fed ratio and mode as Constant nodes."""
    import onnx
    from onnx import helper, numpy_helper
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    names = {name for node in model.graph.node if node.op_type == "Dropout"
             for name in node.input[1:3] if name in feeds}
    for name in sorted(names):
        frozen.graph.node.insert(0, helper.make_node(
            "Constant", [], [name], value=numpy_helper.from_array(feeds[name], name)))
    kept = [i for i in frozen.graph.input if i.name not in names]
    del frozen.graph.input[:]
    frozen.graph.input.extend(kept)
    onnx.save(frozen, path)
    return {k: v for k, v in feeds.items() if k not in names}


def check_random_dropout(model, feeds, out_dir):
    """'' when the outputs of a one-Dropout case are a dropout of x, else why."""
    import numpy as np
    node = next(n for n in model.graph.node if n.op_type == "Dropout")
    ratio = float(feeds.get(node.input[1], 0.5)) if len(node.input) > 1 and \
        node.input[1] else 0.5
    x = feeds[node.input[0]]
    y = np.load(os.path.join(out_dir, f"{node.output[0]}.npy"))
    scaled = x * (np.float32(1) / np.float32(1 - ratio))
    kept = y != 0
    if len(node.output) > 1 and node.output[1]:
        kept = np.load(os.path.join(out_dir, f"{node.output[1]}.npy"))
    if y.shape != x.shape or not np.array_equal(y, np.where(kept, scaled, 0)):
        return "y is not x / (1 - ratio) where the mask keeps and 0 elsewhere"
    n, q = x.size, 1 - ratio
    if abs(int(kept.sum()) - n * q) > 5 * (n * q * (1 - q)) ** 0.5:
        return f"kept {int(kept.sum())} of {n}, far from {n * q:.1f}"
    return ""


def run_random_dropout(model, sets, all_feeds, tools, work, timeout):
    """A dropout-random case, each data set compiled with its ratio and mode
    fixed, run and checked (check_random_dropout)."""
    import numpy as np
    for index, feeds in enumerate(all_feeds):
        frozen = os.path.join(work, f"frozen{index}.onnx")
        rest = frozen_dropout_model(model, feeds, frozen)
        imported = os.path.join(work, f"d{index}.imported.mlir")
        compiled = os.path.join(work, f"d{index}.mlir")
        plan = os.path.join(work, f"d{index}.plan")
        import onnx
        options = import_options(onnx.load(frozen), rest)
        run_tool("import", [tools["fsdp-opt"], frozen, *options, "-o", imported], timeout)
        run_tool("compile", [tools["fsdp-opt"], imported, "--fsdp-lower-pipeline",
                             "-o", compiled], timeout)
        run_tool("compile", [tools["fsdp-translate"], "--mlir-to-plan", compiled,
                             "-o", plan], timeout)
        out_dir = os.path.join(work, f"out{index}")
        cmd = [tools["fsdp-run"], plan, "--threads", "1", "--seed", str(index),
               "--output-dir", out_dir]
        for name, value in rest.items():
            path = os.path.join(work, f"in{index}_{name}.npy")
            np.save(path, value)
            cmd += ["--input", f"{name}={path}"]
        run_tool("session", cmd, timeout)
        why = check_random_dropout(model, feeds, out_dir)
        if why:
            raise Outcome("wrong", f"data set {index}: {why}")
    return ("dropout-random", "", "ran with the data set's ratio; rate, "
            "scaling and mask checked")


def run_case(case, tools, work, timeout):
    """Runs one case; returns (class, stage, detail)."""
    import numpy as np
    import onnx
    model_path = os.path.join(case, "model.onnx")
    os.makedirs(work, exist_ok=True)
    model = onnx.load(model_path, load_external_data=False)
    inputs = real_inputs(model)
    outputs = [o.name for o in model.graph.output]
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))

    def feeds_of(data_set):
        feeds = {}
        for k, path in enumerate(sorted(glob.glob(os.path.join(data_set, "input_*.pb")),
                                        key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))):
            name, value = load_tensor(path)
            names = [i.name for i in inputs]
            if name not in names:
                name = names[k] if k < len(names) else name
            feeds[name] = value
        return feeds

    random = False
    try:
        all_feeds = [feeds_of(s) for s in sets]
    except Exception as e:  # sequences, optionals: not tensors
        all_feeds = None
        load_error = f"{type(e).__name__}: {e}"
    if all_feeds:
        random = any(random_dropout(model, f) for f in all_feeds)
    draws = any(n.op_type in RANDOM_OPS for n in model.graph.node)
    if random and sum(n.op_type == "Dropout" for n in model.graph.node) == 1:
        try:
            return run_random_dropout(model, sets, all_feeds, tools, work, timeout)
        except Outcome as outcome:
            if outcome.cls in ("wrong", "crash", "timeout", "unexplained"):
                return outcome.cls, outcome.stage, outcome.detail
            return "dropout-random", outcome.stage, outcome.detail

    plans = {}
    try:
        for index, data_set in enumerate(sets):
            feeds = all_feeds[index] if all_feeds else {}
            options = import_options(model, feeds)
            key = " ".join(options)
            if key not in plans:
                tag = f"p{len(plans)}"
                imported = os.path.join(work, f"{tag}.imported.mlir")
                compiled = os.path.join(work, f"{tag}.mlir")
                plan = os.path.join(work, f"{tag}.plan")
                run_tool("import", [tools["fsdp-opt"], model_path, *options,
                                    "-o", imported], timeout)
                run_tool("compile", [tools["fsdp-opt"], imported,
                                     "--fsdp-inference-pipeline", "-o", compiled],
                         timeout)
                run_tool("compile", [tools["fsdp-translate"], "--mlir-to-plan",
                                     compiled, "-o", plan], timeout)
                plans[key] = plan
            if all_feeds is None:
                raise Outcome("unexplained", "the case's inputs cannot be read "
                              f"as tensors ({load_error}) but the model compiled")
            out_dir = os.path.join(work, f"out{index}")
            cmd = [tools["fsdp-run"], plans[key], "--threads", "1",
                   "--output-dir", out_dir]
            for name, value in feeds.items():
                path = os.path.join(work, f"in{index}_{len(cmd)}.npy")
                np.save(path, value)
                cmd += ["--input", f"{name}={path}"]
            run_tool("session", cmd, timeout)
            if random:
                continue
            expected = sorted(glob.glob(os.path.join(data_set, "output_*.pb")),
                              key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            if len(expected) != len(outputs):
                raise Outcome("wrong", f"{len(expected)} expected outputs for "
                              f"{len(outputs)} graph outputs")
            for k, path in enumerate(expected):
                _, want = load_tensor(path)
                got_path = os.path.join(out_dir, f"{outputs[k]}.npy")
                if not os.path.exists(got_path):
                    raise Outcome("wrong", f"output {outputs[k]} was not written")
                got = np.load(got_path)
                why = (check_random_output(model, outputs[k], got, want)
                       if draws else compare(outputs[k], got, want))
                if why:
                    raise Outcome("wrong", f"data set {index}: {why}")
    except Outcome as outcome:
        if random and outcome.cls not in ("crash", "timeout", "unexplained"):
            return "dropout-random", outcome.stage, outcome.detail
        return outcome.cls, outcome.stage, outcome.detail
    if random:
        return "dropout-random", "", "ran; training-mode Dropout masks are random"
    if draws:
        return "random", "", "ran; dtypes, shapes and value ranges checked"
    return "pass", "", ""


def reason_key(detail):
    """A refusal's message with names and numbers taken out, for counting."""
    text = re.sub(r"^.*?error:\s*", "", detail)
    text = text.split("; supported operators")[0]
    text = re.sub(r"\(docs/(plan-format|ops)\.md.*?\)", "", text)
    text = re.sub(r"node '[^']*'", "node", text)
    text = re.sub(r"(input|output|initializer|attribute|form|value of node) '[^']*'",
                  r"\1", text)
    text = re.sub(r"tensor<[^>]*>", "tensor", text)
    text = re.sub(r"\d+", "N", text)
    return text.strip()[:160]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="the build directory (tools in bin/)")
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--work", help="scratch directory (default "
                        "BUILD/test/conformance)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60,
                        help="seconds per tool run")
    parser.add_argument("--filter", default="", help="regex on category/case")
    parser.add_argument("--min-pass", type=int, default=0,
                        help="fail unless at least this many cases pass")
    parser.add_argument("--report", help="write every case's result as JSON")
    args = parser.parse_args()

    if not os.path.isdir(args.data):
        print(f"skipped: ONNX's conformance data is not installed ({args.data} "
              "is missing); scripts/setup.sh installs the Debian package "
              "libonnx-testdata")
        return 77
    tools = {t: os.path.join(args.build, "bin", t)
             for t in ("fsdp-opt", "fsdp-translate", "fsdp-run")}
    for path in tools.values():
        if not os.access(path, os.X_OK):
            print(f"error: {path} is not built")
            return 1
    work = args.work or os.path.join(args.build, "test", "conformance")
    shutil.rmtree(work, ignore_errors=True)

    cases = []
    for category in CATEGORIES:
        for case in sorted(glob.glob(os.path.join(args.data, category, "*"))):
            label = f"{category}/{os.path.basename(case)}"
            if os.path.exists(os.path.join(case, "model.onnx")) and \
                    re.search(args.filter, label):
                cases.append((category, label, case))
    if not cases:
        print(f"error: no cases under {args.data} match '{args.filter}'")
        return 1

    start = time.time()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_case, case, tools,
                               os.path.join(work, label), args.timeout): label
                   for _, label, case in cases}
        for future in concurrent.futures.as_completed(futures):
            label = futures[future]
            try:
                results[label] = future.result()
            except Exception as e:  # the driver's own failure is a failure
                results[label] = ("unexplained", "",
                                  f"driver: {type(e).__name__}: {e}")
            if results[label][0] in ("pass", "dropout-random", "random"):
                shutil.rmtree(os.path.join(work, label), ignore_errors=True)
    elapsed = time.time() - start

    table = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    for category, label, _ in cases:
        cls, stage, detail = results[label]
        table[category][cls] += 1
        table["all"][cls] += 1
        if cls.startswith("refused-"):
            reasons[(stage, reason_key(detail))] += 1

    total = len(cases)
    passed = table["all"]["pass"]
    print(f"ONNX conformance ({args.data}): {total} cases in {elapsed:.0f} s, "
          f"{args.jobs} workers")
    header = f"{'':18}" + "".join(f" {c}" for c in CLASSES) + "  total"
    print(header)
    for category in CATEGORIES + ["all"]:
        row = table[category]
        if not row:
            continue
        print(f"{category:18}" + "".join(f" {row[c]:>{len(c)}}" for c in CLASSES)
              + f"  {sum(row.values()):>5}")
    print(f"pass rate: {passed} of {total} ({100.0 * passed / total:.1f}%); "
          f"{table['all']['dropout-random']} training-mode dropout cases and "
          f"{table['all']['random']} random-number cases counted apart")
    print("refusal reasons (stage: reason, cases):")
    for (stage, key), count in reasons.most_common(40):
        print(f"  {count:4}  {stage}: {key}")
    if len(reasons) > 40:
        print(f"  ... {len(reasons) - 40} more reasons, "
              f"{sum(c for _, c in reasons.most_common()[40:])} cases")

    failing = sorted(l for l, r in results.items() if r[0] in FAILING)
    for label in failing:
        cls, stage, detail = results[label]
        print(f"FAIL {cls}: {label} ({stage}): {detail}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump({label: {"class": r[0], "stage": r[1], "detail": r[2]}
                       for label, r in sorted(results.items())}, f, indent=1)
    if passed < args.min_pass:
        print(f"FAIL: {passed} cases pass, fewer than the {args.min_pass} "
              "this suite has reached before")
        return 1
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
