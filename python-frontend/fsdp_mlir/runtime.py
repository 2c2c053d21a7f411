"""Session: a plan run by libfsdprt through its C API (ctypes), on one
rank or, under mpirun, on every rank of a sharded plan."""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import math
import numbers
import os
from pathlib import Path
from typing import Mapping

import numpy as np

from fsdp_mlir._tools import TOOLS_DIR_ENV

LIBRARY_ENV = "FSDP_MLIR_LIBRARY"

# FSDPRT_MAX_THREADS: the most kernel threads a session takes.
MAX_THREADS = 1024

# fsdprt_dtype_t -> numpy
_DTYPES = {0: np.float32, 1: np.float16, 3: np.float64, 4: np.int64, 5: np.int32,
           6: np.int16, 7: np.int8, 8: np.uint8, 9: np.bool_}


class RuntimeError_(RuntimeError):
    """A runtime call failed; the message is the runtime's."""


class _Desc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_size_t), ("shape", ctypes.POINTER(ctypes.c_int64))]


class _Unit(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("module", ctypes.c_char_p),
                ("num_params", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("padded_numel", ctypes.c_int64), ("group_size", ctypes.c_int64),
                ("shard_numel", ctypes.c_int64)]


class _MpiOptions(ctypes.Structure):
    _fields_ = [("use_world", ctypes.c_int), ("comm", ctypes.c_int),
                ("timeout_seconds", ctypes.c_double)]


class _SessionOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("model_dir", ctypes.c_char_p),
                ("num_threads", ctypes.c_int), ("memory_budget_bytes", ctypes.c_uint64),
                ("mpi", ctypes.POINTER(_MpiOptions)), ("device", ctypes.c_char_p),
                # fsdprt_session_options_init fills the whole struct of the
                # library's header: every field up to the last must be here.
                ("local_group", ctypes.c_void_p), ("local_rank", ctypes.c_int),
                ("nccl_id_store", ctypes.c_char_p), ("nccl_rank", ctypes.c_int),
                ("nccl_world_size", ctypes.c_int), ("nccl_timeout_seconds", ctypes.c_double),
                ("disable_graphs", ctypes.c_int), ("seed", ctypes.c_uint64)]


def _learning_rate(lr) -> float:
    """lr as the plan's float32 'lr' input takes it: finite once rounded to
    float32 (1e39 became inf, and the step NaN) and >= 0, as torch's
    optimizers require."""
    try:
        value = float(lr)
    except (TypeError, ValueError):
        raise ValueError(f"lr must be a number, not {lr!r}") from None
    with np.errstate(over="ignore"):
        single = np.float32(value)
    if not math.isfinite(value) or not np.isfinite(single):
        raise ValueError(f"lr must be a finite float32 number, not {lr!r}")
    if value < 0:
        raise ValueError(f"lr must be >= 0 (torch's optimizers refuse a negative "
                         f"learning rate), not {lr!r}")
    return value


def _convertible(name: str, array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`array` as `dtype`, where that keeps its values: float64 data for a
    float32 input is fine, but token ids as floats (1.7 became 1), an object
    or string array, or an integer past the input's range (wrapped) would
    run on other numbers than the caller's."""
    if array.dtype == dtype:
        return array
    if not np.can_cast(array.dtype, dtype, casting="same_kind"):
        raise TypeError(f"input '{name}' is {array.dtype}; the plan takes {dtype}, "
                        "which it would not convert to without changing values")
    if array.size and np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            raise ValueError(f"input '{name}' holds {low if low < info.min else high}, "
                             f"outside the plan's {dtype}")
    return array.astype(dtype)


def _find_library() -> str:
    """libfsdprt: $FSDP_MLIR_LIBRARY, beside the tools ($FSDP_MLIR_TOOLS_DIR/
    ../lib), or the system's."""
    candidates = []
    if os.environ.get(LIBRARY_ENV):
        candidates.append(os.environ[LIBRARY_ENV])
    if os.environ.get(TOOLS_DIR_ENV):
        candidates.append(str(Path(os.environ[TOOLS_DIR_ENV]).parent / "lib" / "libfsdprt.so"))
    found = ctypes.util.find_library("fsdprt")
    if found:
        candidates.append(found)
    for candidate in candidates:
        if os.path.exists(candidate) or "/" not in candidate:
            return candidate
    raise FileNotFoundError(
        f"cannot find libfsdprt.so; set {LIBRARY_ENV} to it, or "
        f"{TOOLS_DIR_ENV} to the build's bin directory")


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_find_library(), mode=ctypes.RTLD_GLOBAL)
        status = ctypes.c_void_p
        for name, args, result in [
            ("fsdprt_status_message", [status], ctypes.c_char_p),
            ("fsdprt_status_free", [status], None),
            ("fsdprt_plan_load_file", [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], status),
            ("fsdprt_plan_destroy", [ctypes.c_void_p], None),
            ("fsdprt_plan_world_size", [ctypes.c_void_p], ctypes.c_int64),
            ("fsdprt_plan_num_inputs", [ctypes.c_void_p], ctypes.c_size_t),
            ("fsdprt_plan_num_outputs", [ctypes.c_void_p], ctypes.c_size_t),
            ("fsdprt_plan_num_weights", [ctypes.c_void_p], ctypes.c_size_t),
            ("fsdprt_plan_num_units", [ctypes.c_void_p], ctypes.c_size_t),
            ("fsdprt_plan_input", [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Desc)], status),
            ("fsdprt_plan_output", [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Desc)], status),
            ("fsdprt_plan_weight_desc", [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Desc)], status),
            ("fsdprt_plan_unit", [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Unit)], status),
            ("fsdprt_plan_unit_param", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                                        ctypes.POINTER(_Desc)], status),
            ("fsdprt_plan_num_aliases", [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_size_t),
            ("fsdprt_plan_alias", [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_char_p),
            ("fsdprt_mpi_init", [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)], status),
            ("fsdprt_mpi_finalize", [], None),
            ("fsdprt_session_options_init", [ctypes.POINTER(_SessionOptions)], None),
            ("fsdprt_session_create_with_options", [ctypes.c_void_p,
                                                    ctypes.POINTER(_SessionOptions),
                                                    ctypes.POINTER(ctypes.c_void_p)], status),
            ("fsdprt_session_destroy", [ctypes.c_void_p], None),
            ("fsdprt_session_rank", [ctypes.c_void_p], ctypes.c_int),
            ("fsdprt_session_world_size", [ctypes.c_void_p], ctypes.c_int),
            ("fsdprt_session_load_weights", [ctypes.c_void_p], status),
            ("fsdprt_session_set_input", [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                          ctypes.c_size_t], status),
            ("fsdprt_session_run", [ctypes.c_void_p], status),
            ("fsdprt_session_get_output", [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                           ctypes.c_size_t], status),
            ("fsdprt_session_read_full_state", [ctypes.c_void_p, ctypes.c_char_p,
                                                ctypes.c_void_p, ctypes.c_size_t], status),
            ("fsdprt_session_mean_over_ranks", [ctypes.c_void_p,
                                                ctypes.POINTER(ctypes.c_double)], status),
            ("fsdprt_session_save_full_checkpoint", [ctypes.c_void_p, ctypes.c_char_p], status),
            ("fsdprt_session_load_full_checkpoint", [ctypes.c_void_p, ctypes.c_char_p], status),
            ("fsdprt_session_save_sharded_checkpoint", [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.c_int64], status),
            ("fsdprt_session_load_sharded_checkpoint", [ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.POINTER(ctypes.c_int64)], status),
        ]:
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = result
        _lib = lib
    return _lib


_finalizing = False


def _finalize_at_exit() -> None:
    """MPI, if the library started it, ends with the interpreter (mpirun
    counts a rank that exits without MPI_Finalize as failed)."""
    global _finalizing
    if not _finalizing:
        _finalizing = True
        atexit.register(lambda: _library().fsdprt_mpi_finalize())


def _check(status, what: str) -> None:
    if status:
        lib = _library()
        message = lib.fsdprt_status_message(status).decode()
        lib.fsdprt_status_free(status)
        raise RuntimeError_(f"{what}: {message}")


def _desc(d: _Desc) -> tuple[str, np.dtype, tuple[int, ...]]:
    if d.dtype not in _DTYPES:
        raise RuntimeError_(f"'{d.name.decode()}' has a dtype numpy cannot hold")
    return (d.name.decode(), np.dtype(_DTYPES[d.dtype]),
            tuple(d.shape[i] for i in range(d.rank)))


class Session:
    """One rank's session of a compiled plan.

    A plan for one rank runs in this process. A plan sharded over N ranks
    runs under `mpirun -np N python script.py` (or `python -m
    fsdp_mlir.launch -n N script.py`): every rank creates its Session the
    same way; the world size must be the plan's.

        session = Session("model.w4.plan")
        loss = session.step({"input_ids": ids, "labels": labels}, lr=1e-3)
        torch_model.load_state_dict(session.state_dict())
    """

    def __init__(self, plan, *, rank: int | None = None, world_size: int | None = None,
                 model_dir=None, threads: int = 0, timeout: float = 300.0,
                 memory_budget: int = 0, load_weights: bool = True,
                 device: str = "cpu", seed: int = 0):
        """rank, world_size: what the caller expects (checked against the
        plan and the MPI job; None: whatever they are). model_dir: where the
        model's weight files are (default: the plan's). threads: kernel
        threads (0: one per core). timeout: the deadline of every
        collective, seconds. memory_budget: the most bytes the session may
        allocate on this rank (0: no limit); a plan whose peak does not fit
        is refused with a message naming both. load_weights: read the
        model's weights now (False: load a checkpoint next). device: where
        the kernels run, "cpu", or "cuda" / "cuda:N" where the runtime has
        a CUDA backend (refused, naming the device, where it has not);
        for tests, "fake-cuda" (the CUDA backend's host code on host
        memory, the CPU's kernel for an op with no CUDA kernel) and
        "fake-cuda:strict" (the same, refusing such an op as a GPU does)
        and "fake-cuda:cudnn" (strict, attention through the cuDNN path on
        a host model of cuDNN). seed: the seed of training-mode Dropout's
        masks, an int from 0 to 2**64-1: Philox-4x32-10 of (seed; step, op,
        element over the global batch), so the same seed gives the same
        masks at any thread count and world size (docs/training.md,
        "Randomness"); the step counts this session's runs."""
        if not isinstance(threads, numbers.Integral) or not 0 <= threads <= MAX_THREADS:
            raise ValueError(f"threads must be an int from 0 to {MAX_THREADS}, not {threads!r}")
        if (not isinstance(seed, numbers.Integral) or isinstance(seed, bool)
                or not 0 <= seed < 2**64):
            raise ValueError(f"seed must be an int from 0 to 2**64-1, not {seed!r}")
        if not math.isfinite(timeout) or timeout < 0:
            raise ValueError(f"timeout must be finite seconds >= 0 (0: none), not {timeout!r}")
        lib = _library()
        self.plan_path = Path(plan)
        self._plan = ctypes.c_void_p()
        _check(lib.fsdprt_plan_load_file(str(self.plan_path).encode(), ctypes.byref(self._plan)),
               f"cannot load the plan {self.plan_path}")
        self.world_size = lib.fsdprt_plan_world_size(self._plan)
        self._session = ctypes.c_void_p()
        # The library fills its own struct, which may be larger than this
        # frontend's (a newer libfsdprt): into room enough, then checked.
        room = (ctypes.c_char * 4096)()
        lib.fsdprt_session_options_init(ctypes.cast(room, ctypes.POINTER(_SessionOptions)))
        options = _SessionOptions.from_buffer_copy(room, 0)
        if options.struct_size < ctypes.sizeof(_SessionOptions):
            raise RuntimeError_(f"{_find_library()} has session options of "
                                f"{options.struct_size} bytes, older than this "
                                f"frontend's {ctypes.sizeof(_SessionOptions)}")
        options.struct_size = ctypes.sizeof(_SessionOptions)
        options.model_dir = str(model_dir).encode() if model_dir else None
        options.num_threads = int(threads)
        options.memory_budget_bytes = memory_budget
        options.seed = int(seed)
        options.device = str(device).encode()
        if self.world_size > 1:
            mpi_rank, size = ctypes.c_int(), ctypes.c_int()
            _check(lib.fsdprt_mpi_init(ctypes.byref(mpi_rank), ctypes.byref(size)),
                   "cannot start MPI")
            _finalize_at_exit()
            if size.value != self.world_size:
                raise RuntimeError_(
                    f"the plan {self.plan_path} is sharded over {self.world_size} ranks "
                    f"but this job has {size.value}; run it with mpirun -np "
                    f"{self.world_size} (or python -m fsdp_mlir.launch -n {self.world_size})")
            mpi = _MpiOptions(1, 0, float(timeout))
            options.mpi = ctypes.pointer(mpi)
        _check(lib.fsdprt_session_create_with_options(self._plan, ctypes.byref(options),
                                                      ctypes.byref(self._session)),
               "cannot create the session")
        self.rank = lib.fsdprt_session_rank(self._session)
        for name, want, got in (("world_size", world_size, self.world_size),
                                ("rank", rank, self.rank)):
            if want is not None and want != got:
                self.close()
                raise RuntimeError_(f"Session({self.plan_path}): {name} {want} was asked "
                                    f"for, but this process is {name} {got}")
        self.inputs = self._descs(lib.fsdprt_plan_num_inputs, lib.fsdprt_plan_input)
        self.outputs = self._descs(lib.fsdprt_plan_num_outputs, lib.fsdprt_plan_output)
        self._steps = 0
        if load_weights:
            _check(lib.fsdprt_session_load_weights(self._session), "cannot load the weights")

    def _descs(self, count, get) -> dict:
        out = {}
        for i in range(count(self._plan)):
            d = _Desc()
            _check(get(self._plan, i, ctypes.byref(d)), "plan")
            name, dtype, shape = _desc(d)
            out[name] = (dtype, shape)
        return out

    def close(self) -> None:
        lib = _library()
        if self._session:
            lib.fsdprt_session_destroy(self._session)
            self._session = ctypes.c_void_p()
        if self._plan:
            lib.fsdprt_plan_destroy(self._plan)
            self._plan = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    # -- running --------------------------------------------------------

    def _bind(self, inputs: Mapping[str, np.ndarray]) -> None:
        lib = _library()
        unknown = sorted(set(inputs) - set(self.inputs))
        if unknown:
            raise KeyError(f"the plan has no input {', '.join(unknown)}; its inputs: "
                           f"{', '.join(self.inputs)}")
        # Every input, each call: one left out ran on the last call's value
        # (or on zeros before the first), a silently wrong result.
        missing = [name for name in self.inputs if name not in inputs]
        if missing:
            raise KeyError(f"missing input {', '.join(missing)}: the plan takes "
                           f"{', '.join(self.inputs)}, every one on each call")
        for name, value in inputs.items():
            dtype, shape = self.inputs[name]
            array = np.asarray(value)
            # The global batch: this rank's slice of the first dimension.
            if (self.world_size > 1 and shape and array.shape[1:] == shape[1:]
                    and array.shape[0] == shape[0] * self.world_size):
                array = array[self.rank * shape[0]:(self.rank + 1) * shape[0]]
            if array.shape != shape:
                raise ValueError(f"input '{name}' has shape {array.shape}; the plan takes "
                                 f"{shape}" + (f" per rank (or {(shape[0] * self.world_size,) + shape[1:]}"
                                               " for the whole batch)" if self.world_size > 1 else ""))
            array = np.ascontiguousarray(_convertible(name, array, np.dtype(dtype)))
            _check(lib.fsdprt_session_set_input(self._session, name.encode(),
                                                array.ctypes.data, array.nbytes),
                   f"input '{name}'")

    def _output(self, name: str) -> np.ndarray:
        dtype, shape = self.outputs[name]
        array = np.empty(shape, dtype)
        _check(_library().fsdprt_session_get_output(self._session, name.encode(),
                                                    array.ctypes.data, array.nbytes),
               f"output '{name}'")
        return array

    def forward(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Runs the plan once; returns every output (this rank's slice's)."""
        self._bind(inputs)
        _check(_library().fsdprt_session_run(self._session), "the run failed")
        return {name: self._output(name) for name in self.outputs}

    def step(self, inputs: Mapping[str, np.ndarray], lr: float | None = None) -> float:
        """One training step on the (global) batch `inputs`; returns the
        loss averaged over ranks. `lr` feeds a plan's 'lr' input; its
        'step' input counts 1, 2, ... unless given."""
        if "loss" not in self.outputs:
            raise ValueError("step() needs a training plan (an output 'loss'); "
                             "compile with optimizer=...")
        given = dict(inputs)
        if "lr" in self.inputs and "lr" not in given:
            if lr is None:
                raise ValueError("the plan takes a learning rate: pass lr=...")
            given["lr"] = np.array(_learning_rate(lr), np.float32)
        if "step" in self.inputs and "step" not in given:
            given["step"] = np.array(self._steps + 1, np.float32)
        outputs = self.forward(given)
        self._steps += 1
        loss = ctypes.c_double(float(outputs["loss"]))
        _check(_library().fsdprt_session_mean_over_ranks(self._session, ctypes.byref(loss)),
               "averaging the loss")
        return loss.value

    # -- state ----------------------------------------------------------

    def state_dict(self) -> dict:
        """Every parameter and model buffer as torch tensors by FQN, tied
        ones under each of their names (flat units' members gathered whole:
        collective, every rank calls it); loadable with
        module.load_state_dict(..., strict=True)."""
        import torch

        lib = _library()
        tensors = []
        for i in range(lib.fsdprt_plan_num_units(self._plan)):
            unit = _Unit()
            _check(lib.fsdprt_plan_unit(self._plan, i, ctypes.byref(unit)), "plan unit")
            for p in range(unit.num_params):
                d = _Desc()
                _check(lib.fsdprt_plan_unit_param(self._plan, i, p, ctypes.byref(d)), "member")
                tensors.append(_desc(d))
        for i in range(lib.fsdprt_plan_num_weights(self._plan)):
            d = _Desc()
            _check(lib.fsdprt_plan_weight_desc(self._plan, i, ctypes.byref(d)), "weight")
            name, dtype, shape = _desc(d)
            if not name.startswith("optim."):
                tensors.append((name, dtype, shape))
        state = {}
        for name, dtype, shape in tensors:
            array = np.empty(shape, dtype)
            _check(lib.fsdprt_session_read_full_state(self._session, name.encode(),
                                                      array.ctypes.data, array.nbytes),
                   f"reading '{name}'")
            tensor = torch.from_numpy(array)
            state[name] = tensor
            for k in range(lib.fsdprt_plan_num_aliases(self._plan, name.encode())):
                state[lib.fsdprt_plan_alias(self._plan, name.encode(), k).decode()] = tensor
        return state

    def save(self, path, *, full: bool = False) -> None:
        """A checkpoint: sharded (a directory; resumable at any world size)
        or, with full=True, the model's state dict as one .safetensors.
        Replaces only a checkpoint of that kind (see docs/robustness.md)."""
        lib = _library()
        if full:
            _check(lib.fsdprt_session_save_full_checkpoint(self._session, str(path).encode()),
                   f"cannot save {path}")
        else:
            _check(lib.fsdprt_session_save_sharded_checkpoint(
                self._session, str(path).encode(), self._steps), f"cannot save {path}")

    def load(self, path) -> None:
        """Loads a sharded checkpoint directory (and continues its step
        count; where a save was interrupted, its finished .tmp or .old) or a
        full .safetensors state dict."""
        lib = _library()
        if any(Path(f"{path}{suffix}").is_dir() for suffix in ("", ".tmp", ".old")):
            step = ctypes.c_int64()
            _check(lib.fsdprt_session_load_sharded_checkpoint(
                self._session, str(path).encode(), ctypes.byref(step)), f"cannot load {path}")
            self._steps = step.value
        else:
            _check(lib.fsdprt_session_load_full_checkpoint(self._session, str(path).encode()),
                   f"cannot load {path}")
