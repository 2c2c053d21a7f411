#!/usr/bin/python3
"""PyTorch FSDP as an oracle: which FSDP units and flat-parameter layouts does
real torch 1.13 ``FullyShardedDataParallel`` produce for a corpus model?

    /usr/bin/python3 test/oracle/fsdp_oracle.py --model gpt2 --world-size 4 \
        --policy transformer:GPT2Block --json /tmp/gpt2.json

N rank processes (started by a multiprocessing fork server that has
imported torch once; gloo on 127.0.0.1 and a free port) each build the corpus
model with its fixed seed, wrap it with FSDP on CPU, and report their units;
rank 0 gathers everything (all_gather_object) and writes one JSON document
(see README.md beside this file for the format). Torch errors raised while
wrapping are observations: they are reported as {"errors": "Type: message"}
with exit 0. Usage errors exit 2; a rank that dies or a run past --timeout
exits 1, after every rank has been killed.

Only constructs FSDP (auto wrap, flatten, shard). Debian's torch 1.13.1 on
CPU-only Python 3.11 needs two in-process patches for that, applied here in
every rank and nowhere else: the Python 3.11 import fix for
``torch.distributed.fsdp`` and the CPU compute device (see README.md).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = os.path.join(os.path.dirname(HERE), "corpus", "models.py")
WRAPPER_COMPONENTS = ("_fsdp_wrapped_module", "_fpw_module")

# --------------------------------------------------------------------------
# Patches for Debian's torch 1.13.1 on Python 3.11 without CUDA
# --------------------------------------------------------------------------

_METADATA_MODULE = "torch.distributed._shard.sharded_tensor.metadata"
_BAD_DEFAULT = b"field(default=TensorProperties())"
_GOOD_DEFAULT = b"field(default_factory=TensorProperties)"


class _PatchedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads one torch module from its source with a dataclass default that
    Python 3.11 accepts (a mutable default instance becomes a factory)."""

    def get_data(self, path):
        data = super().get_data(path)
        if path.endswith(".py"):
            data = data.replace(_BAD_DEFAULT, _GOOD_DEFAULT)
        return data

    def path_stats(self, path):
        # No cached bytecode: the .pyc was compiled from the unpatched source.
        raise OSError("always compile from the patched source")


class _MetadataFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _METADATA_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        loader = _PatchedSourceLoader(fullname, spec.origin)
        return importlib.util.spec_from_file_location(fullname, spec.origin, loader=loader)


def enable_fsdp_import():
    """torch 1.13's sharded_tensor/metadata.py declares
    ``tensor_properties: TensorProperties = field(default=TensorProperties())``,
    which Python 3.11's dataclasses reject (fixed in torch 2.0), so
    ``import torch.distributed.fsdp`` fails. Serve that one module from a
    patched copy of its source; nothing on disk changes."""
    if sys.version_info < (3, 11) or _METADATA_MODULE in sys.modules:
        return
    if not any(isinstance(f, _MetadataFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MetadataFinder())


def patch_compute_device_cpu(fsdp_class):
    """FSDP.__init__ sets ``compute_device = cuda:current_device()`` for a
    module on CPU, which raises on a CPU-only build. Make it CPU. Flattening
    and sharding (torch.cat, torch.chunk, F.pad) are unchanged library code."""
    import torch

    def _cpu_compute_device(self, module, ignored_params, device_from_device_id):
        return torch.device("cpu")

    fsdp_class._get_compute_device = _cpu_compute_device


def enable_cpu_training(dist):
    """What FSDP's forward and backward need on a CPU-only build with gloo:
    ``_lazy_init`` refuses CPU-only execution and makes CUDA streams, and
    FSDP's two collectives, ``_all_gather_base`` and
    ``_reduce_scatter_base``, do not exist in gloo. CUDA is reported
    available and its streams and events do nothing (CPU ops run in
    order); the collectives become gloo's ``all_gather`` into views of the
    output and ``all_reduce`` of a copy keeping this rank's chunk. The
    FSDP algorithm (gradient pre/post division, resharding) is unchanged."""
    import contextlib

    import torch

    class Stream:
        def wait_stream(self, *args, **kwargs): pass
        def wait_event(self, *args, **kwargs): pass
        def record_event(self, *args, **kwargs): return Event()
        def synchronize(self): pass
        def query(self): return True

    class Event:
        def __init__(self, *args, **kwargs): pass
        def record(self, *args, **kwargs): pass
        def wait(self, *args, **kwargs): pass
        def synchronize(self): pass
        def query(self): return True

    torch.cuda.is_available = lambda: True
    torch.cuda.Stream = Stream
    torch.cuda.Event = Event
    torch.cuda.current_stream = lambda *args, **kwargs: Stream()
    torch.cuda.stream = lambda *args, **kwargs: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.Tensor.record_stream = lambda self, stream: None

    def all_gather_base(output, input, group=None, async_op=False):
        chunks = list(output.view(-1).chunk(dist.get_world_size(group)))
        dist.all_gather(chunks, input.contiguous(), group=group)

    def reduce_scatter_base(output, input, op=dist.ReduceOp.SUM, group=None,
                            async_op=False):
        total = input.detach().clone().contiguous()
        dist.all_reduce(total, op=op, group=group)
        mine = total.view(-1).chunk(dist.get_world_size(group))[dist.get_rank(group)]
        output.copy_(mine.view_as(output))

    dist._all_gather_base = all_gather_base
    dist._reduce_scatter_base = reduce_scatter_base


def train(wrapped, fsdp_class, corpus_case, opts, rank, world, dist):
    """``opts["steps"]`` steps of FSDP training on this rank's slice of the
    global batch in ``opts["data"]`` (.npz: inputs x0, x1, ... and labels
    y): per step the loss averaged over ranks, then every parameter
    gathered whole and this rank's buffers (BatchNorm statistics)."""
    import numpy as np
    import torch

    data = np.load(opts["data"])
    xs = [torch.from_numpy(data[f"x{i}"]) for i in range(len(data.files) - 1)]
    y = torch.from_numpy(data["y"])
    per = y.shape[0] // world
    xs = [x[rank * per:(rank + 1) * per] for x in xs]
    y = y[rank * per:(rank + 1) * per]
    if opts["optimizer"] == "adamw":
        opt = torch.optim.AdamW(wrapped.parameters(), lr=opts["lr"])
    else:
        opt = torch.optim.SGD(wrapped.parameters(), lr=opts["lr"], momentum=0.9)
    wrapped.train()
    losses = []
    for _ in range(opts["steps"]):
        opt.zero_grad()
        loss = corpus_case.loss_fn(wrapped(*xs), y)
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(float(total) / world)
    with fsdp_class.summon_full_params(wrapped):
        params = {clean_name(k): v.detach().clone().numpy()
                  for k, v in wrapped.named_parameters()}
    buffers = {clean_name(k): v.detach().clone().numpy()
               for k, v in wrapped.named_buffers()}
    return losses, params, buffers


# --------------------------------------------------------------------------
# Corpus, policies
# --------------------------------------------------------------------------


def load_corpus(path=DEFAULT_MODELS):
    spec = importlib.util.spec_from_file_location("fsdp_oracle_corpus_models", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod


class UsageError(Exception):
    """A bad command line (not a torch observation)."""


def validate_policy(spec):
    if spec == "none":
        return
    kind, sep, arg = spec.partition(":")
    if not sep or not arg:
        raise UsageError(f"bad policy {spec!r}: none | size:N | transformer:Cls[,Cls] | regex:PAT")
    if kind == "size":
        try:
            int(arg)
        except ValueError:
            raise UsageError(f"size policy needs an integer, got {arg!r}") from None
    elif kind == "transformer":
        pass
    elif kind == "regex":
        try:
            re.compile(arg)
        except re.error as e:
            raise UsageError(f"bad regex {arg!r}: {e}") from None
    else:
        raise UsageError(f"unknown policy kind {kind!r}")


def make_policy(spec, model, fqn_of):
    """The auto_wrap_policy for ``spec`` (None for ``none``)."""
    from torch.distributed.fsdp.wrap import (
        lambda_auto_wrap_policy,
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

    if spec == "none":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "size":
        return functools.partial(size_based_auto_wrap_policy, min_num_params=int(arg))
    if kind == "transformer":
        names = [n.strip() for n in arg.split(",") if n.strip()]
        classes = {}
        for m in model.modules():
            if type(m).__name__ in names:
                classes.setdefault(type(m).__name__, set()).add(type(m))
        missing = [n for n in names if n not in classes]
        if missing:
            have = sorted({type(m).__name__ for m in model.modules()})
            raise UsageError(f"no module of class {missing} in the model; classes: {have}")
        ambiguous = [n for n, cs in classes.items() if len(cs) > 1]
        if ambiguous:
            raise UsageError(f"class names {ambiguous} name several classes")
        layer_cls = {c for cs in classes.values() for c in cs}
        return functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=layer_cls)
    if kind == "regex":
        pattern = re.compile(arg)

        def wrap_if_fqn_matches(module):
            fqn = fqn_of.get(id(module))
            return fqn is not None and pattern.fullmatch(fqn) is not None

        return functools.partial(lambda_auto_wrap_policy, lambda_fn=wrap_if_fqn_matches)
    raise UsageError(f"unknown policy {spec!r}")


def clean_name(name):
    """Drop FSDP's wrapper components from a module path or parameter name."""
    return ".".join(p for p in name.split(".") if p and p not in WRAPPER_COMPONENTS)


def join(prefix, name):
    return f"{prefix}.{name}" if prefix and name else (prefix or name)


def model_parameter_table(model):
    """Every parameter reference of the unwrapped model, aliases included:
    [{"fqn", "canonical", "numel", "shape", "requires_grad"}] where canonical
    is the first FQN of that tensor in named_modules()/named_parameters order."""
    first = {}
    table = []
    for mname, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            fqn = join(mname, pname)
            canonical = first.setdefault(id(p), fqn)
            table.append(dict(fqn=fqn, canonical=canonical, numel=p.numel(),
                              shape=list(p.shape), requires_grad=p.requires_grad))
    return table


# --------------------------------------------------------------------------
# One rank
# --------------------------------------------------------------------------


def _rank_report(wrapped, fsdp_class, fqn_of, orig_tensors, rank, world):
    """This rank's view of every FSDP unit, in pre-order (root first)."""
    import torch
    import torch.nn.functional as F

    units = []
    for _, inst in wrapped.named_modules():
        if not isinstance(inst, fsdp_class):
            continue
        module_fqn = fqn_of.get(id(inst.module))
        if module_fqn is None:
            raise RuntimeError("an FSDP instance wraps a module not in the original model")
        handles = list(inst._handles)
        if len(handles) > 1:
            raise RuntimeError(f"unit {module_fqn!r} has {len(handles)} handles; 1.13 has at most 1")
        if not handles:
            units.append(dict(module=module_fqn, params=[], numels=[], shapes=[], shared=[],
                              numel=0, padded_numel=0,
                              rank=dict(rank=rank, shard_numel=0, numel_padded=0,
                                        shard_indices=None, shard_param_offsets=[],
                                        shard_data_ok=True)))
            continue
        fp = handles[0].flat_param
        params = [join(module_fqn, clean_name(n)) for n in fp._prefixed_param_names]
        shared = [[join(module_fqn, clean_name(join(s.module_name, s.param_name))),
                   join(module_fqn, clean_name(join(s.prim_module_name, s.prim_param_name)))]
                  for s in fp._shared_param_infos]
        numel = int(fp._unpadded_unsharded_size.numel())
        shard = int(fp.numel())
        # The shard's bytes against the rule "concatenate the original
        # parameters in flat order, zero-pad to shard*world, take chunk rank".
        flat = torch.cat([orig_tensors[n].reshape(-1) for n in params])
        flat = F.pad(flat, [0, shard * world - flat.numel()])
        ok = torch.equal(flat[rank * shard:(rank + 1) * shard], fp.detach())
        units.append(dict(
            module=module_fqn,
            params=params,
            numels=[int(n) for n in fp._numels],
            shapes=[[int(d) for d in s] for s in fp._shapes],
            shared=shared,
            numel=numel,
            padded_numel=shard * world,
            rank=dict(rank=rank, shard_numel=shard,
                      numel_padded=int(fp._shard_numel_padded),
                      shard_indices=[int(i) for i in fp._shard_indices],
                      shard_param_offsets=[[int(a), int(b)] for a, b in fp._shard_param_offsets],
                      shard_data_ok=bool(ok)),
        ))
    return units


def _merge(per_rank, world):
    """Rank 0's units with every rank's shard entry; the rank-independent
    fields must agree across ranks."""
    merged = []
    for ui, u0 in enumerate(per_rank[0]):
        unit = {k: v for k, v in u0.items() if k != "rank"}
        unit["ranks"] = []
        for r in range(world):
            ur = per_rank[r][ui]
            for k in unit:
                if k != "ranks" and ur[k] != unit[k]:
                    raise RuntimeError(f"rank {r} disagrees with rank 0 on {k} of unit {unit['module']!r}")
            unit["ranks"].append(ur["rank"])
        merged.append(unit)
    return merged


def worker(rank, world, port, opts, workdir):
    """Entry point of a rank process (spawned)."""
    try:
        _worker(rank, world, port, opts, workdir)
    except UsageError as e:
        with open(os.path.join(workdir, f"rank{rank}.usage"), "w") as f:
            f.write(str(e))
        sys.exit(3)
    except BaseException:
        with open(os.path.join(workdir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise


def _trace(rank, what, t0=[time.perf_counter()]):
    if os.environ.get("FSDP_ORACLE_TRACE"):
        print(f"[rank {rank} +{time.perf_counter() - t0[0]:.2f}s] {what}", file=sys.stderr, flush=True)


def _worker(rank, world, port, opts, workdir):
    import warnings

    _trace(rank, "started")
    _start_watchdog(opts["launcher_pid"], opts["rank_deadline_s"])
    enable_fsdp_import()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    patch_compute_device_cpu(FSDP)
    _trace(rank, "imported torch")
    # FSDP warns that flattening runs on CPU; that is the point here.
    warnings.filterwarnings("ignore", message="Module is put on CPU")

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world,
                            timeout=datetime.timedelta(seconds=opts["collective_timeout"]))
    _trace(rank, "process group up")
    _inject_fault(rank)
    try:
        corpus = load_corpus(opts["models_file"])
        if opts["model"] not in corpus.CASES:
            raise UsageError(f"unknown model {opts['model']!r}; corpus: {sorted(corpus.CASES)}")
        model, _ = corpus.CASES[opts["model"]].build()
        if opts.get("train"):
            enable_cpu_training(dist)
            # The weights the compared run starts from (its ONNX file's).
            model.load_state_dict(torch.load(opts["train"]["init"]))
        fqn_of = {id(m): name for name, m in model.named_modules()}
        table = model_parameter_table(model)
        orig_tensors = {}
        for name, mod in model.named_modules():
            for pname, p in mod.named_parameters(recurse=False):
                orig_tensors[join(name, pname)] = p.detach().clone()
        ignored = []
        for f in opts["ignored_modules"]:
            try:
                ignored.append(model.get_submodule(f))
            except AttributeError:
                raise UsageError(f"--ignored-modules: no module {f!r} in the model") from None
        ignored_set = {id(p) for m in ignored for p in m.parameters()}
        ignored_params = [row["fqn"] for row in table
                          if id(_param_by_fqn(model, row["fqn"])) in ignored_set]
        policy = make_policy(opts["policy"], model, fqn_of)

        result = dict(error=None)
        t0 = time.perf_counter()
        kwargs = {}
        if policy is not None:
            kwargs["auto_wrap_policy"] = policy
        if ignored:
            kwargs["ignored_modules"] = ignored
        if opts.get("train"):
            from torch.distributed.fsdp import ShardingStrategy
            kwargs["sharding_strategy"] = getattr(ShardingStrategy,
                                                  opts["train"]["strategy"])
        try:
            wrapped = FSDP(model, **kwargs)
        except Exception as e:  # torch's own error while wrapping: an observation
            result["error"] = f"{type(e).__name__}: {e}"
        else:  # an error in here is the harness's, not torch's: the rank fails
            # NO_SHARD keeps no shard metadata to report.
            no_shard = opts.get("train") and opts["train"]["strategy"] == "NO_SHARD"
            result["units"] = None if no_shard else \
                _rank_report(wrapped, FSDP, fqn_of, orig_tensors, rank, world)
        _trace(rank, f"wrapped in {time.perf_counter() - t0:.3f} s")
        if opts.get("train") and result["error"] is None:
            import numpy as np
            losses, params, buffers = train(wrapped, FSDP, corpus.CASES[opts["model"]],
                                            opts["train"], rank, world, dist)
            result["losses"] = losses
            np.savez(os.path.join(workdir, f"buffers{rank}.npz"), **buffers)
            if rank == 0:
                np.savez(opts["train"]["out"], **params)
            _trace(rank, "trained")

        gathered = [None] * world
        dist.all_gather_object(gathered, result)
        if rank == 0:
            errors = sorted({g["error"] for g in gathered if g["error"]})
            doc = dict(model=opts["model"], world_size=world, policy=opts["policy"],
                       ignored_modules=opts["ignored_modules"], torch=torch.__version__)
            if errors:
                if len(errors) > 1 or any(g["error"] is None for g in gathered):
                    errs = "; ".join(f"rank {r}: {g['error']}" for r, g in enumerate(gathered))
                    doc.update(units=None, errors=f"ranks disagree: {errs}")
                else:
                    doc.update(units=None, errors=errors[0])
            else:
                units = [g["units"] for g in gathered]
                doc.update(units=None if units[0] is None else _merge(units, world),
                           errors=None)
            doc["parameters"] = table
            doc["ignored_params"] = ignored_params
            if opts.get("train") and not errors:
                doc["losses"] = gathered[0]["losses"]
                for r in range(world):  # every rank's buffers, beside the params
                    shutil.copy(os.path.join(workdir, f"buffers{r}.npz"),
                                opts["train"]["out"] + f".buffers{r}.npz")
            tmp = os.path.join(workdir, "result.json.tmp")
            with open(tmp, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, os.path.join(workdir, "result.json"))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    _trace(rank, "done")


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _start_watchdog(launcher_pid, seconds):
    """A rank never outlives its launcher or its time budget, even if the
    launcher was SIGKILLed and could not kill it. (The launcher is not the
    rank's parent: the fork server is, and it lives as long as any rank.)"""
    import threading

    deadline = time.monotonic() + seconds

    def watch():
        while True:
            time.sleep(0.25)
            if not _process_alive(launcher_pid) or time.monotonic() > deadline:
                os._exit(124)

    threading.Thread(target=watch, name="fsdp-oracle-watchdog", daemon=True).start()


def _inject_fault(rank):
    """FSDP_ORACLE_FAULT=<rank>:exit|hang makes one rank die or hang after the
    process group is up; the self-check uses it to show that runs stay bounded."""
    spec = os.environ.get("FSDP_ORACLE_FAULT")
    if not spec:
        return
    who, _, what = spec.partition(":")
    if int(who) != rank:
        return
    if what == "exit":
        os._exit(7)
    if what == "hang":
        while True:
            time.sleep(1)
    raise ValueError(f"bad FSDP_ORACLE_FAULT {spec!r}")


def _param_by_fqn(model, fqn):
    mod_name, _, pname = fqn.rpartition(".")
    return getattr(model.get_submodule(mod_name), pname)


# --------------------------------------------------------------------------
# Launcher
# --------------------------------------------------------------------------


class OracleError(RuntimeError):
    """A rank crashed or the run timed out (not a torch observation)."""


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch_once(world, opts, timeout):
    workdir = tempfile.mkdtemp(prefix="fsdp-oracle-")
    method = os.environ.get("FSDP_ORACLE_START", "forkserver")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        # Import torch once in the fork server instead of once per rank (about
        # 3 s of CPU each on this machine). torch.distributed.fsdp itself is
        # imported in the rank, after the Python 3.11 import fix.
        ctx.set_forkserver_preload(["torch", "torch.distributed", "torch.nn.functional"])
    port = _free_port()
    procs = []
    try:
        for r in range(world):
            p = ctx.Process(target=worker, args=(r, world, port, opts, workdir),
                            name=f"fsdp-oracle-rank{r}", daemon=True)
            p.start()
            procs.append(p)
        deadline = time.monotonic() + timeout
        failed = None
        while True:
            alive = [p for p in procs if p.exitcode is None]
            bad = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if bad:
                # A rank that lost its connection to a dead peer is a
                # consequence: report the cause when both are seen at once.
                def consequence(entry):
                    path = os.path.join(workdir, f"rank{entry[0]}.err")
                    if entry[1] != 1 or not os.path.exists(path):
                        return False
                    with open(path) as f:
                        text = f.read()
                    return "Connection closed by peer" in text or "Connection reset" in text
                bad.sort(key=lambda entry: (consequence(entry), entry[0]))
                failed = "rank {} exited with code {}".format(*bad[0])
                break
            if not alive:
                break
            if time.monotonic() > deadline:
                failed = f"timed out after {timeout:.0f} s (ranks still running: " \
                         f"{[r for r, p in enumerate(procs) if p.exitcode is None]})"
                break
            alive[0].join(0.05)
        if failed:
            _kill(procs)
            for r in range(world):
                usage = os.path.join(workdir, f"rank{r}.usage")
                if os.path.exists(usage):
                    with open(usage) as f:
                        raise UsageError(f.read())
            logs = []
            for r in range(world):
                path = os.path.join(workdir, f"rank{r}.err")
                if os.path.exists(path):
                    with open(path) as f:
                        logs.append(f"--- rank {r} ---\n{f.read()}")
            raise OracleError(failed + ("\n" + "\n".join(logs) if logs else ""))
        path = os.path.join(workdir, "result.json")
        if not os.path.exists(path):
            raise OracleError("all ranks exited but rank 0 wrote no result")
        with open(path) as f:
            return json.load(f)
    finally:
        _kill(procs)
        shutil.rmtree(workdir, ignore_errors=True)


def _kill(procs):
    for p in procs:
        if p.exitcode is None:
            p.terminate()
    for p in procs:
        p.join(2)
        if p.exitcode is None:
            p.kill()
            p.join(2)


def run_oracle(model, world_size, policy="none", ignored_modules=(), timeout=120.0,
               models_file=DEFAULT_MODELS, collective_timeout=60, train=None):
    """Runs FSDP over ``world_size`` rank processes and returns the JSON document
    as a dict. Raises UsageError for bad arguments, OracleError when a rank
    crashes or the run exceeds ``timeout`` seconds (all ranks are killed).

    ``train`` (optional) also trains the wrapped model: a dict with ``init``
    (a state dict file to start from), ``data`` (.npz: x0.., y, the global
    batch), ``steps``, ``lr``, ``optimizer`` ("adamw" or "sgd": momentum
    0.9), ``strategy`` (a ShardingStrategy name) and ``out`` (where rank 0
    writes the final parameters, .npz; rank r's buffers go to
    ``out.buffers<r>.npz``); the document then has ``losses``."""
    validate_policy(policy)
    if world_size < 2:
        # At 1 rank FSDP switches to NO_SHARD: no padding, no shard metadata.
        raise UsageError("world size must be >= 2")
    if not os.path.isfile(models_file):
        raise UsageError(f"no models file {models_file}")
    corpus_names = _corpus_names(models_file)
    if corpus_names is not None and model not in corpus_names:
        raise UsageError(f"unknown model {model!r}; corpus: {sorted(corpus_names)}")
    opts = dict(model=model, policy=policy, ignored_modules=list(ignored_modules),
                models_file=os.path.abspath(models_file),
                collective_timeout=int(collective_timeout),
                rank_deadline_s=float(timeout) + 10.0, launcher_pid=os.getpid(),
                train=train)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    last = None
    for _ in range(3):  # the free port may be taken between probe and bind
        try:
            return _launch_once(world_size, opts, timeout)
        except OracleError as e:
            last = e
            if "Address already in use" not in str(e) and "EADDRINUSE" not in str(e):
                raise
    raise last


def _corpus_names(models_file):
    """The CASES names, read from the source so that the launcher never
    imports torch (only the ranks do); None where they cannot be read so."""
    with open(models_file) as f:
        src = f.read()
    names = set(re.findall(r'Case\(\s*"([A-Za-z0-9_]+)"', src))
    return names or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="corpus model (test/corpus/models.py CASES)")
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--policy", default="none",
                    help="none | size:<min_num_params> | transformer:<Class>[,<Class>...] | regex:<pattern>")
    ap.add_argument("--ignored-modules", default="",
                    help="comma-separated FQNs of modules passed as ignored_modules")
    ap.add_argument("--json", metavar="OUT", help="write the JSON here (default: stdout)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds for the whole run; ranks are killed after it (default 120)")
    ap.add_argument("--models-file", default=DEFAULT_MODELS,
                    help="Python file defining CASES like test/corpus/models.py (default: that file)")
    args = ap.parse_args(argv)
    ignored = [s for s in args.ignored_modules.split(",") if s]
    try:
        doc = run_oracle(args.model, args.world_size, args.policy, ignored,
                         timeout=args.timeout, models_file=args.models_file)
    except UsageError as e:
        print(f"fsdp_oracle: {e}", file=sys.stderr)
        return 2
    except OracleError as e:
        print(f"fsdp_oracle: {e}", file=sys.stderr)
        return 1
    text = json.dumps(doc, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
