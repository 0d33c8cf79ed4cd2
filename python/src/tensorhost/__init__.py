"""tensorhost: CP decomposition of sparse tensors with tensorhost's
backends, the multi-threaded CPU reference and the GPU backends: least
squares (CP-ALS), Poisson (CP-APR, for count data) and tensor completion
(complete: least squares over the listed entries only).

    import tensorhost
    result = tensorhost.cp_als("uber.tns.gz", rank=16)
    result.weights, result.factors, result.fit
    counts = tensorhost.cp_apr("uber.tns.gz", rank=16)
    counts.log_likelihood, counts.kkt_violation
    result.predict([[0, 1, 2, 3]])            # the model's value at one entry
    model = tensorhost.load_model("out")      # a run's output folder, read back

cp_als's model comes back in the published form of the program's factor
files: every factor column has unit 2-norm, the weights hold the component
sizes, components are sorted by decreasing weight, and signs follow Tensor
Toolbox's fixsigns. cp_apr's as pyttb's cp_apr gives it: unit 1-norm
columns, weights sorted decreasing.

What a run that succeeded still has to say about its model (a rank above
what the tensor can have, rank-deficient solves, not converged, values read
as zero) comes as `warnings.warn` with a TensorhostWarning category and in
`CPResult.warnings`; the library's and the plugins' log lines go to the
`logging` logger "tensorhost".
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import math
import numbers
import os
import re
import signal
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _library

__all__ = ["cp_als", "cp_apr", "complete", "load_model", "plugins", "CPModel", "CPResult",
           "CPWarning", "PluginInfo", "TensorhostError", "TensorhostValueError",
           "TensorhostWarning", "RankWarning", "ConvergenceWarning", "UnderflowWarning",
           "NonIntegerWarning", "EmptyRowsWarning",
           "__version__"]

_lib = _library.load()
__version__ = _lib.tensorhost_version_string().decode()

_UPDATES = {"auto": 0, "sweep": 1, "mode": 2, "host": 3}
_CONSTRAINTS = {"none": _library.CONSTRAINTS_NONE, "nonneg": _library.CONSTRAINTS_NONNEG}
_STATUS = {0: "converged", 1: "max_iters", 2: "interrupted"}
_MODELS = {_library.MODEL_LEAST_SQUARES: "least-squares", _library.MODEL_POISSON: "poisson",
           _library.MODEL_COMPLETION: "completion"}


class TensorhostError(RuntimeError):
    """A failed libtensorhost call: `status` is the C status name
    ("TENSORHOST_ERR_IO", ...), the message the library's one line."""

    def __init__(self, status: int, message: str):
        self.status = _library.STATUS_NAMES.get(status, str(status))
        super().__init__(message)


class TensorhostValueError(TensorhostError, ValueError):
    """A value the library refused (TENSORHOST_ERR_INVALID_ARGUMENT: an index
    past the shape, a backend option, a rank above the backend's maximum).
    Also a ValueError, so `except ValueError` catches a bad argument whether
    Python or the library found it."""


def _check(status: int, err: ctypes.Array) -> None:
    if status != _library.OK:
        kind = TensorhostValueError if status == _library.ERR_INVALID_ARGUMENT else TensorhostError
        raise kind(status, err.value.decode(errors="replace"))


# ---- Warnings and log lines ------------------------------------------------

class TensorhostWarning(UserWarning):
    """What a tensorhost run that succeeded still has to say about its model;
    the base of the categories below, and the category of a kind of warning
    newer than this package."""


class RankWarning(TensorhostWarning):
    """The rank is above what the tensor can have (its nonzero count, or for
    a mode the product of the other modes' lengths), or normal-equation
    solves were rank deficient and used the pseudo-inverse."""


class ConvergenceWarning(TensorhostWarning):
    """The run stopped at max_iters with |fit change| still above tol
    (cp_apr: with the KKT violation still at or above stoptol; complete with
    a holdout: with the held-out RMSE still improving by tol of its best
    within every 5 iterations)."""


class UnderflowWarning(TensorhostWarning):
    """The tensor's file held values too small for a double, read as zero."""


class NonIntegerWarning(TensorhostWarning):
    """cp_apr on a tensor with values that are not integers: the Poisson
    model is one of counts (the fit runs all the same)."""


class EmptyRowsWarning(TensorhostWarning):
    """complete with l2 > 0 on entries that leave rows of some mode without a
    training entry: the ridge makes their factor rows 0, so the model
    predicts 0 wherever they are."""


# The library's warning codes: (CPWarning.code, category).
_WARNING_KINDS = {
    _library.WARN_RANK_ABOVE_BOUND: ("rank_above_bound", RankWarning),
    _library.WARN_RANK_DEFICIENT: ("rank_deficient", RankWarning),
    _library.WARN_NOT_CONVERGED: ("not_converged", ConvergenceWarning),
    _library.WARN_UNDERFLOWED_VALUES: ("underflowed_values", UnderflowWarning),
    _library.WARN_NON_INTEGER_VALUES: ("non_integer_values", NonIntegerWarning),
    _library.WARN_EMPTY_ROWS: ("empty_rows", EmptyRowsWarning),
}


@dataclass(frozen=True)
class CPWarning:
    """One warning of a run: `code` "rank_above_bound", "rank_deficient",
    "not_converged", "underflowed_values", "non_integer_values" or
    "empty_rows" (or "warning_N" for a code this package does not know), its
    category and the library's message."""

    code: str
    category: type
    message: str


def _result_warnings(result) -> list:
    found = []
    err = _library.error_buffer()
    for i in range(_lib.tensorhost_cpd_warning_count(result)):
        code, message = ctypes.c_int32(), ctypes.c_char_p()
        _check(_lib.tensorhost_cpd_warning(result, i, ctypes.byref(code), ctypes.byref(message),
                                           err), err)
        name, category = _WARNING_KINDS.get(code.value, (f"warning_{code.value}",
                                                          TensorhostWarning))
        found.append(CPWarning(name, category, message.value.decode(errors="replace")))
    return found


_logger = logging.getLogger("tensorhost")
_LOG_LEVELS = {_library.LOG_ERROR: logging.ERROR, _library.LOG_WARNING: logging.WARNING,
               _library.LOG_INFO: logging.INFO, _library.LOG_DEBUG: logging.DEBUG}


def _on_log_line(level, message, _user_data):
    """The library's log handler: called on the thread that logs (a run's
    worker thread, mostly), one call at a time; ctypes takes the GIL for it.
    Nothing may raise out of it into the C frames beneath."""
    try:
        python_level = _LOG_LEVELS.get(level, logging.DEBUG)  # levels past DEBUG: more detail
        if _logger.isEnabledFor(python_level):
            _logger.log(python_level, "%s", message.decode(errors="replace"))
    except Exception:  # pragma: no cover - a broken logging handler
        pass


# Kept for the life of the process: the library holds its address.
_LOG_CALLBACK = _library.LOG_FN(_on_log_line)
_lib.tensorhost_set_log_handler(_LOG_CALLBACK, None)
# Before the interpreter goes, so no line arrives into a Python being torn
# down (a daemon run still going at exit); the library then prints to stderr.
atexit.register(_lib.tensorhost_set_log_handler, _library.LOG_FN(), None)


@dataclass
class PluginInfo:
    name: str
    path: str
    usable: bool
    problem: Optional[str]  # why it cannot run here; None when usable


def plugins(search_path: Optional[Union[str, os.PathLike, Sequence]] = None) -> list:
    """The plugins on the search path (`search_path`, then
    TENSORHOST_PLUGIN_PATH, then the installed ones), each with whether it
    can run here and, if not, why."""
    found = []

    def note(name, path, problem, _user_data):
        found.append(PluginInfo(name.decode(), path.decode(), problem is None,
                                problem.decode(errors="replace") if problem else None))

    callback = _library.PLUGIN_FN(note)
    err = _library.error_buffer()
    _check(_lib.tensorhost_list_plugins(_search_path_text(search_path), callback, None, err), err)
    return found


# Entries predicted at once: bounds the (entries x rank) products held.
_PREDICT_CHUNK = 1 << 16


@dataclass
class CPModel:
    """A CP model [[weights; factors]]: `weights` has shape (rank,),
    `factors[m]` shape (dims[m], rank). What load_model reads back from a
    run's output folder, and the model part of every CPResult."""

    weights: np.ndarray
    factors: list

    @property
    def shape(self) -> tuple:
        """The tensor's dims: each factor's row count."""
        return tuple(int(f.shape[0]) for f in self.factors)

    def predict(self, indices) -> np.ndarray:
        """The model's values at the entries `indices`, an (K, order)
        integer array of 0-based coordinates, one row per entry (a
        pyttb.sptensor's subs, or np.argwhere's rows): a (K,) float64 array
        of sum_r weights[r] * prod_m factors[m][indices[k, m], r]. What a
        completed tensor is for (the entries its data did not list), and
        how a model is checked against entries held out of its fit.
        ValueError for an index outside the model's shape."""
        if not self.factors:
            raise ValueError("the model has no factors (its run stopped before the first "
                             "update)")
        indices = _check_predict_indices(indices, self.shape)
        weights = np.asarray(self.weights, dtype=np.float64)
        out = np.empty(indices.shape[0], dtype=np.float64)
        for start in range(0, indices.shape[0], _PREDICT_CHUNK):
            rows = indices[start:start + _PREDICT_CHUNK]
            products = np.repeat(weights[np.newaxis, :], rows.shape[0], axis=0)
            for m, factor in enumerate(self.factors):
                products *= np.asarray(factor, dtype=np.float64)[rows[:, m]]
            out[start:start + rows.shape[0]] = products.sum(axis=1)
        return out

    def to_pyttb(self):
        """The model as a pyttb.ktensor (imports pyttb only now), which
        pyttb's functions take (full, innerprod, score, cp_apr's init, ...)."""
        import pyttb

        return pyttb.ktensor([np.array(f, copy=True) for f in self.factors],
                             np.array(self.weights, copy=True))

    def to_tensorly(self):
        """The model as a TensorLy CPTensor (imports tensorly only now)."""
        from tensorly.cp_tensor import CPTensor

        return CPTensor((np.array(self.weights, copy=True),
                         [np.array(f, copy=True) for f in self.factors]))


def _check_predict_indices(indices, shape) -> np.ndarray:
    """`indices` as an (K, order) int64 array within `shape`, every check a
    user can fail named in a ValueError or TypeError."""
    indices = np.asarray(indices)
    if indices.ndim != 2 or indices.shape[1] != len(shape):
        raise ValueError(f"indices must be a 2-D array (entries x {len(shape)} modes), got "
                         f"shape {indices.shape}")
    if indices.size and not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"indices must be integers, got {indices.dtype}")
    indices = indices.astype(np.int64, copy=False)
    outside = (indices < 0) | (indices >= np.asarray(shape, dtype=np.int64))
    if np.any(outside):
        row, mode = (int(i) for i in np.argwhere(outside)[0])
        raise ValueError(f"indices[{row}]: {indices[row, mode]} in mode {mode} is outside the "
                         f"model's shape {shape} (indices are 0-based)")
    return indices


@dataclass
class CPResult(CPModel):
    """A CP model and how it was computed. `weights` has shape (rank,);
    `factors[m]` has shape (dims[m], rank) with unit 2-norm columns (cp_als,
    complete) or unit 1-norm columns (cp_apr). `fit` is the least-squares
    fit 1 - ||X - M|| / ||X|| of the final model for each (complete: over
    the training entries). predict(indices) gives the model's values at
    chosen entries (CPModel)."""

    fit: float
    # After each iteration: the fit (cp_als; complete: over the training
    # entries), the log-likelihood (cp_apr, the same as log_likelihoods).
    fits: np.ndarray
    iterations: int
    status: str                 # "converged", "max_iters" or "interrupted"
    backend: str                # the plugin that ran, e.g. "gpu-adaptive"
    device: str
    timings: dict = field(default_factory=dict)  # seconds: total, load, mttkrp, ...
    # What the run still had to say (also given to warnings.warn): CPWarning records.
    warnings: list = field(default_factory=list)
    # "least-squares" (cp_als), "poisson" (cp_apr) or "completion" (complete).
    model: str = "least-squares"
    # cp_als(..., constraints=...): "none" or "nonneg" for every mode, else
    # a list of them, one per mode.
    constraints: object = "none"
    # cp_als(..., l2=..., l1=...): the ridge, and the l1 weight (a number
    # when every mode has the same, else a list, one per mode). With either
    # > 0, `objective` and `objectives` are the regularised objective's
    # (cp_als's docstring); NaN and empty otherwise.
    l2: float = 0.0
    l1: object = 0.0
    # cp_als: the most hierarchical-ALS passes each mode's update made (its
    # hals_passes and hals_budget chose them; 0 for a mode solved exactly),
    # one per mode; empty for the other models.
    hals_passes: tuple = ()
    # complete() (and regularised cp_als: objective and objectives, see l2
    # and l1; empty arrays, NaN and 0 otherwise). Per iteration: the
    # RMSE over the training entries, that over the held-out ones (NaN without
    # a holdout) and the objective, sum over the training entries of (x - m)^2
    # plus l2 times the factors' squared norms. Of the published model: the
    # same three, and the iteration it is of (0: a stop cut the run inside an
    # iteration). The entries: `observed` listed, `held_out` of them kept out
    # of training.
    train_rmses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    holdout_rmses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    objectives: np.ndarray = field(default_factory=lambda: np.zeros(0))
    train_rmse: float = math.nan
    holdout_rmse: float = math.nan
    objective: float = math.nan
    published_iteration: int = 0
    observed: int = 0
    held_out: int = 0
    # Poisson (cp_apr) only; NaN and empty arrays for cp_als. The log-likelihood
    # is sum(x log m - m) over all entries (pyttb's tt_loglikelihood, its
    # output["obj"]); the KKT violation the largest over the modes of their last
    # inner iteration's (pyttb's output["kktViolations"]).
    # Wall seconds of each iteration (an outer iteration for cp_apr).
    iteration_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    log_likelihood: float = math.nan
    kkt_violation: float = math.nan
    log_likelihoods: np.ndarray = field(default_factory=lambda: np.zeros(0))
    kkt_violations: np.ndarray = field(default_factory=lambda: np.zeros(0))
    inner_iterations: np.ndarray = field(  # per outer iteration, summed over the modes
        default_factory=lambda: np.zeros(0, dtype=np.uint32))


def load_model(folder: Union[str, os.PathLike]) -> CPModel:
    """The CP model a run of the program wrote into `folder` (its
    output.dir): mode1 ... modeN and lambda, from the .npy files when
    mode1.npy is there (every bit), else from the .mat text files (their
    nine digits), as `tensorhost predict --model` reads it. Every mode from
    mode1 to the highest present must be there (at least 2), each a 2-D
    array with the same column count (the rank), lambda that many weights;
    FileNotFoundError or ValueError otherwise, naming the file and what was
    expected. Returns a CPModel, whose predict() gives the model's values at
    chosen entries."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder" if not os.path.exists(folder) else
                                f"{folder}: not a folder (a model is the folder of files a run "
                                "wrote, its output.dir)")
    extension = next((e for e in (".npy", ".mat")
                      if os.path.exists(os.path.join(folder, "mode1" + e))), None)
    if extension is None:
        raise FileNotFoundError(f"{folder}: neither mode1.npy nor mode1.mat is there: expected "
                                "the files of a CP model as a run writes them (mode1 ... modeN "
                                "and lambda, .npy or .mat)")
    nmodes = _count_mode_files(folder, extension)
    factors = []
    for m in range(nmodes):
        path = os.path.join(folder, f"mode{m + 1}{extension}")
        factor = _load_model_array(path, extension)
        if factor.ndim != 2:
            raise ValueError(f"{path}: a {factor.ndim}-D array: expected a factor matrix, one "
                             f"row per index of mode {m + 1} and one column per component")
        if factors and factor.shape[1] != factors[0].shape[1]:
            rank = factors[0].shape[1]
            raise ValueError(f"{path}: {factor.shape[1]} columns, expected {rank} (the rank: "
                             f"{os.path.join(folder, 'mode1' + extension)} has {rank})")
        factors.append(factor)
    rank = factors[0].shape[1]
    path = os.path.join(folder, "lambda" + extension)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: expected the model's {rank} weights beside "
                                "its factors")
    weights = _load_model_array(path, extension)
    if weights.ndim == 2 and weights.shape[1] == 1:
        weights = weights[:, 0]
    if weights.shape != (rank,):
        raise ValueError(f"{path}: shape {weights.shape}, expected {rank} weights, one per "
                         "component, as a 1-D array or one column")
    return CPModel(weights=np.ascontiguousarray(weights), factors=factors)


def _count_mode_files(folder: str, extension: str) -> int:
    """The highest N of the files modeN (as a run names them) in `folder`,
    each of mode1 to modeN present, at least 2."""
    pattern = re.compile(r"mode([1-9][0-9]{0,8})" + re.escape(extension))
    highest = max((int(match.group(1)) for match in map(pattern.fullmatch, os.listdir(folder))
                   if match), default=0)
    if highest < 2:
        raise FileNotFoundError(f"{os.path.join(folder, 'mode2' + extension)} is missing: a model "
                                "has a factor file for each of its modes, at least 2 "
                                f"(mode1{extension}, mode2{extension}, ...)")
    for mode in range(1, highest + 1):
        path = os.path.join(folder, f"mode{mode}{extension}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: expected one factor file per mode, "
                                    f"mode1{extension} to mode{highest}{extension}")
    return highest


def _load_model_array(path: str, extension: str) -> np.ndarray:
    """One file of a model as float64, its values checked finite."""
    if extension == ".npy":
        values = np.load(path, allow_pickle=False)
    else:
        with warnings.catch_warnings():  # an empty file: the check below says so
            warnings.simplefilter("ignore", UserWarning)
            values = np.loadtxt(path, ndmin=2, dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"{path}: no values")
    if not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)):
        raise ValueError(f"{path}: holds {values.dtype}, expected real numbers")
    values = np.ascontiguousarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        place = [int(i) + 1 for i in np.argwhere(~np.isfinite(values))[0]]
        where = f"row {place[0]}, column {place[1]}" if len(place) == 2 else f"value {place[0]}"
        raise ValueError(f"{path}: {where} (1-based) is {values[tuple(p - 1 for p in place)]}: "
                         "expected a finite number")
    return values


def _search_path_text(search_path) -> Optional[bytes]:
    if search_path is None:
        return None
    if isinstance(search_path, (str, bytes, os.PathLike)):
        search_path = [search_path]
    return b":".join(os.fsencode(p) for p in search_path)


class _Handle:
    """An owned C handle, freed once."""

    def __init__(self, free: Callable):
        self.pointer = ctypes.c_void_p()
        self._free = free

    def close(self) -> None:
        if self.pointer:
            self._free(self.pointer)
            self.pointer = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _check_shape(shape) -> tuple:
    """`shape` as a tuple of ints, each 1 to 2**32 - 1 (the library's
    32-bit indices): ValueError for a negative, zero, fractional or too
    large length, TypeError when it is not a sequence at all."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape must be a sequence of integers, got {type(shape).__name__}")
    lengths = list(shape)
    for m, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= 2**32 - 1:
            raise ValueError(f"shape[{m}] must be an integer from 1 to 2**32 - 1, got {n!r}")
    return tuple(int(n) for n in lengths)


def _coo_arrays(indices, values, shape):
    """(indices, values, shape) as the C API takes them, with every check a
    user can fail named in a ValueError or TypeError."""
    indices = np.asarray(indices)
    values = np.asarray(values)
    if indices.ndim != 2:
        raise ValueError(f"indices must be a 2-D array (nnz x order), got shape {indices.shape}")
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"indices must be integers, got {indices.dtype}")
    if not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)):
        raise TypeError(f"values must be real numbers, got {values.dtype}")
    values = values.reshape(-1)
    nnz, order = indices.shape
    if values.shape[0] != nnz:
        raise ValueError(f"{nnz} index rows but {values.shape[0]} values")
    shape = _check_shape(shape)
    if len(shape) != order:
        raise ValueError(f"shape has {len(shape)} modes but indices have {order} columns")
    if nnz and indices.min() < 0:
        row = int(np.argwhere(indices < 0)[0][0])
        raise ValueError(f"nonzero {row}: negative index {indices[row].tolist()} "
                         "(indices are 0-based)")
    values = np.ascontiguousarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        row = int(np.argwhere(~np.isfinite(values))[0][0])
        raise ValueError(f"nonzero {row}: value {values[row]} is not finite")
    return (np.ascontiguousarray(indices, dtype=np.uint64), values,
            np.ascontiguousarray(shape, dtype=np.uint64))


def _tensor_handle(X) -> _Handle:
    """X as a tensor handle; closed again if anything (a Ctrl-C noticed as
    the C call returns, say) raises before it is returned."""
    handle = _Handle(_lib.tensorhost_tensor_free)
    try:
        return _fill_tensor_handle(handle, X)
    except BaseException:
        handle.close()
        raise


def _fill_tensor_handle(handle: _Handle, X) -> _Handle:
    err = _library.error_buffer()
    if isinstance(X, (str, bytes, os.PathLike)):
        # The file system's own bytes: a name that is not UTF-8 is still a name.
        status = _lib.tensorhost_tensor_read(os.fsencode(X), ctypes.byref(handle.pointer), err)
        _check(status, err)
        return handle
    if isinstance(X, tuple) and len(X) == 3:
        indices, values, shape = X
    elif hasattr(X, "subs") and hasattr(X, "vals") and hasattr(X, "shape"):  # pyttb.sptensor
        indices, values, shape = X.subs, X.vals, X.shape
    else:
        raise TypeError("X must be a file path, a pyttb.sptensor or an (indices, values, "
                        f"shape) tuple of numpy arrays, not {type(X).__name__}")
    indices, values, dims = _coo_arrays(indices, values, shape)
    u64 = ctypes.POINTER(ctypes.c_uint64)
    status = _lib.tensorhost_tensor_new(
        len(dims), dims.ctypes.data_as(u64), values.shape[0], indices.ctypes.data_as(u64),
        values.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), ctypes.byref(handle.pointer), err)
    _check(status, err)
    return handle


def _initial_factors(init, dims, rank):
    """Borrowed double** for the C call, and the arrays that keep it alive."""
    if init is None:
        return None, []
    if isinstance(init, (str, bytes)) or not hasattr(init, "__len__"):
        raise TypeError(f"init must be a list of arrays, one per mode, got {type(init).__name__}")
    if len(init) != len(dims):
        raise ValueError(f"init has {len(init)} factors for a tensor of {len(dims)} modes")
    arrays = []
    for m, factor in enumerate(init):
        factor = np.asarray(factor)
        if not (np.issubdtype(factor.dtype, np.floating) or np.issubdtype(factor.dtype, np.integer)):
            raise TypeError(f"init[{m}] must hold real numbers, got {factor.dtype}")
        factor = np.ascontiguousarray(factor, dtype=np.float64)
        if factor.shape != (dims[m], rank):
            raise ValueError(f"init[{m}] has shape {factor.shape}, expected ({dims[m]}, {rank})")
        if not np.all(np.isfinite(factor)):
            row, column = (int(i) for i in np.argwhere(~np.isfinite(factor))[0])
            raise ValueError(f"init[{m}] row {row}, column {column} is {factor[row, column]}: "
                             "expected a finite number")
        arrays.append(factor)
    pointers = (ctypes.POINTER(ctypes.c_double) * len(arrays))(
        *[a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)) for a in arrays])
    return pointers, arrays


def _run_in_worker(call: Callable[[], int], interrupted: list):
    """Runs `call` (a foreign call that releases the GIL) on a worker thread
    and waits for it, with a SIGINT handler of our own while it runs: Ctrl-C
    then asks the run to stop after its current iteration instead of raising
    at an arbitrary point, which would free the run's handles under it.
    `interrupted` gets an entry for every Ctrl-C (the run's iteration
    callback reads it too, so a request that came before the library's run
    began is not lost). Any other exception while waiting (a signal
    handler's, say) stops the run and waits for the worker before it is
    raised: the handles the call uses stay alive until it returns.
    Returns (status, whether Ctrl-C came)."""
    outcome: dict = {}

    def work():
        try:
            outcome["status"] = call()
        except BaseException as error:  # pragma: no cover - ctypes errors
            outcome["error"] = error

    def on_sigint(signum, _frame):
        interrupted.append(signum)
        _lib.tensorhost_request_stop()

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if in_main else None
    if in_main:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        worker = threading.Thread(target=work, name="tensorhost-cp-als", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.05)
        except BaseException:
            interrupted.append(None)
            _lib.tensorhost_request_stop()
            worker.join()
            raise
    finally:
        if in_main:
            # None: a handler not installed from Python, which cannot be put back.
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["status"], bool(interrupted)


def _check_integer(name: str, value, low: int, high: int, bounds: str) -> None:
    """ValueError unless `value` is an integer (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {bounds}, got {value!r}")


def _check_tolerance(tol) -> None:
    """ValueError unless `tol` is a finite real number >= 0 (not a bool)."""
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) \
            or not (math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")


def _warn(found: list, stacklevel: int) -> None:
    """Each warning through warnings.warn, `stacklevel` counted from the
    caller of this function."""
    for warning in found:
        warnings.warn(warning.message, warning.category, stacklevel=stacklevel + 1)


def cp_als(X, rank: int, backend: str = "auto", options: Optional[Mapping[str, Any]] = None,
           max_iters: int = 50, tol: float = 1e-5, seed: int = 42, init=None,
           callback: Optional[Callable[[int, float], Optional[bool]]] = None,
           update: str = "auto", search_path=None, constraints="none", l2: float = 0.0,
           l1=0.0, hals_passes: int = 5, hals_budget: float = 0.5) -> CPResult:
    """CP decomposition of a sparse tensor by alternating least squares.

    X: a file path in any format the program reads (FROSTT .tns, .tns.gz,
       sptensor text, tensorhost's binary .tnsb; the format is told by the
       contents), a pyttb.sptensor, or (indices, values, shape) with indices
       an (nnz, order) integer array of 0-based coordinates and shape the
       mode lengths (integers from 1 to 2**32 - 1). Duplicate coordinates
       are summed.
    backend: "auto" (a GPU backend when a usable GPU exists, else
       "cpu-reference"), a plugin name, or a path to a plugin .so.
    options: the backend's options, e.g. {"threads": 8} for cpu-reference;
       with backend="auto" they go to whichever plugin runs, which must
       accept them (plugins/README.md lists each plugin's).
    tol: stop when |fit change| < tol (never before iteration 2).
    seed: the initial factors' seed (the same factors on every backend);
       init: a list of (dims[m], rank) arrays to start from instead.
    callback(iteration, fit): called after each iteration; returning False
       stops the run (status "interrupted", with the model so far).
    update: "auto", "sweep", "mode" or "host": where factor updates run.
    constraints: "none", or "nonneg" for nonnegative factors (each
       constrained mode's update by hierarchical ALS, as TensorLy's
       non_negative_parafac_hals, in the backend when it can, else on the
       host; "sweep" needs a plugin whose sweep takes constraints, plugin
       ABI 1.6); or a sequence of them, one per mode (TensorLy's nn_modes),
       e.g. ["nonneg", "none", "nonneg"].
    l2, l1: regularised CP-ALS (the program's cpd.l2 and cpd.l1). Each mode
       n's update minimises
         1/2 ||X_(n) - A K^T||^2 + l2/2 ||A||_F^2 + l1_n sum |A(i,r)|
       given the other factors as the iterations keep them (columns
       normalised; the factor solved carries the weights, as SPLATT's
       regularised ALS): A = M (V + l2 I)^-1 for a mode without constraint
       and l1_n = 0, else by coordinate descent (hierarchical ALS). The
       names: l2 is TensorLy's parafac l2_reg (and SPLATT's reg), the ridge
       added to the normal equations; l1 is TensorLy's
       sparsity_coefficients (non_negative_parafac_hals, its hals_nnls's
       sparsity_coefficient), a number for every mode or a sequence, one
       per mode; unlike TensorLy it also applies to unconstrained modes (a
       soft threshold). Each >= 0 and finite; with both 0 (the default) the
       run is plain CP-ALS. TensorLy normalises differently (it keeps the
       factors unnormalised, or folds the weights into every mode's
       update), so with l1 or l2 > 0 its iterations are not these. A
       regularised run fits the values as they are (its terms are not
       scale-invariant): a tensor whose largest |value| lies outside
       [2**-64, 2**64] is refused. `fit` stays the least-squares fit;
       `objective` is the regularised objective of the final model
         1/2 ||X - M||^2 + l2/2 sum_n ||A_n||_F^2 + sum_n l1_n sum |A_n|
       (the factors as the iterations left them, the last mode updated
       carrying the weights), `objectives` each iteration's where every l1
       is 0 (NaN where one is not).
    hals_passes, hals_budget: the hierarchical-ALS passes of each
       coordinate-descent mode update (a nonnegative mode, or l1 > 0): at
       most hals_passes (TensorLy's non_negative_parafac_hals makes up to
       5), and floor(1 + hals_budget * rho_n) for mode n, where rho_n - 1 is
       what forming that update's MTTKRP and Hadamard product of Grams costs
       over one pass (Gillis and Glineur's accelerated HALS, their alpha
       0.5): a long mode with a few nonzeros a row makes one pass. Each
       mode's passes stop early as TensorLy's hals_nnls. A large budget
       (1e9) gives every mode hals_passes, as TensorLy. The result's
       hals_passes lists each mode's (0 for a mode solved exactly).
    search_path: a folder or a list of folders searched for plugins first,
       then TENSORHOST_PLUGIN_PATH, then the installed ones (as plugins()).
    Ctrl-C stops the run after the current iteration and raises
    KeyboardInterrupt.

    Errors: arguments are checked before the library is called where Python
    can: TypeError for an argument of the wrong kind (X neither a path, a
    pyttb.sptensor nor a tuple; arrays that do not hold numbers; a callback
    that is not callable), ValueError for a wrong value (a rank outside 1 to
    4096, max_iters 0, a negative or NaN tol, a negative, zero or fractional
    shape, arrays whose shapes disagree, NaN or Inf values or init entries).
    What the library finds raises TensorhostError with its message and
    `status`; a value it refuses (an index past the shape, a backend
    option) raises TensorhostValueError, which is also a ValueError.

    Warnings: what the run still has to say about its model is given to
    warnings.warn, pointing at the caller's line, with a TensorhostWarning
    category: RankWarning (a rank above what the tensor can have,
    rank-deficient solves), ConvergenceWarning (stopped at max_iters with
    tol > 0), UnderflowWarning (values of the file read as zero); the
    result's `warnings` lists them as CPWarning records. They are not also
    logged. The library's and the plugins' log lines (which backend "auto"
    chose, a plugin's warnings, debug detail) go to logging.getLogger(
    "tensorhost") at their level.
    """
    # The C fields are fixed-width: a value past them would wrap silently.
    _check_integer("rank", rank, 1, 4096, "1 to 4096")
    _check_integer("max_iters", max_iters, 1, 2**32 - 1, "1 to 2**32 - 1")
    _check_integer("seed", seed, 0, 2**64 - 1, "0 to 2**64 - 1")
    _check_tolerance(tol)
    if update not in _UPDATES:
        raise ValueError(f"update must be one of {sorted(_UPDATES)}, got {update!r}")
    per_mode = [constraints] if isinstance(constraints, str) else list(constraints)
    if not per_mode or any(not isinstance(c, str) or c not in _CONSTRAINTS for c in per_mode):
        raise ValueError(f"constraints must be one of {sorted(_CONSTRAINTS)} or a non-empty "
                         f"sequence of them (one per mode), got {constraints!r}")
    _check_number("l2", l2, positive=False)
    per_mode_l1 = None if isinstance(l1, numbers.Real) else _sequence_or_none(l1)
    if per_mode_l1 is None:
        _check_number("l1", l1, positive=False)
    else:
        if not per_mode_l1:
            raise ValueError(f"l1 must be a finite number >= 0 or a non-empty sequence of them "
                             f"(one per mode), got {l1!r}")
        for m, value in enumerate(per_mode_l1):
            _check_number(f"l1[{m}]", value, positive=False)
    _check_integer("hals_passes", hals_passes, 1, 2**32 - 1, "1 to 2**32 - 1")
    _check_number("hals_budget", hals_budget, positive=False)
    if not isinstance(backend, (str, os.PathLike)):
        raise TypeError(f"backend must be a plugin name or a path, got {type(backend).__name__}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    result = _decompose(X, rank, backend, options, max_iters, tol, seed, init, callback, update,
                        search_path, constraints, float(l2),
                        float(l1) if per_mode_l1 is None else [float(v) for v in per_mode_l1],
                        int(hals_passes), float(hals_budget))
    _warn(result.warnings, stacklevel=2)
    return result


def cp_apr(X, rank: int, algorithm: str = "mu", stoptol: float = 1e-4, maxiters: int = 1000,
           init="random", maxinneriters: int = 10, epsDivZero: float = 1e-10,
           printitn: int = 0, kappa: float = 0.01, kappatol: float = 1e-10, seed: int = 42,
           phi_threshold: float = 1.0, backend: str = "auto", options: Optional[Mapping[str, Any]] = None,
           callback: Optional[Callable[[int, float, float], Optional[bool]]] = None,
           search_path=None) -> CPResult:
    """Poisson CP decomposition of a sparse count tensor: CP-APR by
    multiplicative updates (Chi and Kolda), pyttb's cp_apr with algorithm
    "mu", with its parameter names, meanings and defaults:

    stoptol: stop when every mode's KKT violation is below it.
    maxiters: at most this many outer iterations.
    init: "random" (the seed's counter-based factors, the same on every
       backend: `seed`), a list of (dims[m], rank) arrays >= 0, or a
       pyttb.ktensor (anything with factor_matrices and weights) whose
       weights are >= 0: the initial model.
    maxinneriters: multiplicative updates per mode and outer iteration.
    epsDivZero: floor of the model in divisions.
    printitn: print every printitn-th outer iteration's log-likelihood and
       KKT violation, and a summary at the end, as pyttb does (0: nothing;
       pyttb's default is 1).
    kappa, kappatol: inadmissible zeros (factor entries below kappatol with
       a gradient that wants them up) are raised by kappa.
    phi_threshold (not a pyttb parameter): an entry below kappatol is an
       inadmissible zero where Phi exceeds it. 1 is Chi and Kolda's and
       Tensor Toolbox's test (the gradient 1 - Phi is negative there);
       pyttb 1.8 tests Phi > 0, which phi_threshold=0 reproduces exactly.
    algorithm: "mu" only (pyttb's "pdnr" and "pqnr" are not offered).

    X, backend, options, search_path as for cp_als; every value of X must be
    >= 0 (ValueError, naming the first negative one, before any work);
    values that are not integers give a NonIntegerWarning. callback(
    iteration, log_likelihood, kkt_violation) after each outer iteration;
    returning False stops the run (status "interrupted").

    Returns a CPResult as cp_als does, model "poisson": weights sorted
    decreasing, factor columns of unit 1-norm (pyttb's final normalize),
    `log_likelihood` the final model's (pyttb's output["obj"]),
    `kkt_violation`, and per outer iteration `log_likelihoods`,
    `kkt_violations` (output["kktViolations"]) and `inner_iterations`
    (output["nInnerIters"]); `fit` is the least-squares fit. status
    "converged" when the KKT violation fell below stoptol. to_pyttb() gives
    the pyttb.ktensor. A run that stops at maxiters above stoptol warns
    (ConvergenceWarning).
    """
    _check_integer("rank", rank, 1, 4096, "1 to 4096")
    _check_integer("maxiters", maxiters, 1, 2**32 - 1, "1 to 2**32 - 1")
    _check_integer("maxinneriters", maxinneriters, 1, 2**32 - 1, "1 to 2**32 - 1")
    _check_integer("printitn", printitn, 0, 2**63 - 1, "0 up")
    _check_integer("seed", seed, 0, 2**64 - 1, "0 to 2**64 - 1")
    _check_number("stoptol", stoptol, positive=False)
    _check_number("epsDivZero", epsDivZero, positive=True)
    _check_number("kappa", kappa, positive=False)
    _check_number("kappatol", kappatol, positive=False)
    _check_number("phi_threshold", phi_threshold, positive=False)
    if not isinstance(algorithm, str) or algorithm.lower() != "mu":
        raise ValueError(f'algorithm must be "mu" (multiplicative updates), got {algorithm!r}')
    if not isinstance(backend, (str, os.PathLike)):
        raise TypeError(f"backend must be a plugin name or a path, got {type(backend).__name__}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    factors, weights = _apr_init(init)

    def build(dims, c_callback):
        initial, keep_alive = _initial_factors(factors, dims, int(rank))
        for m, factor in enumerate(keep_alive):
            if np.any(factor < 0):
                row, column = (int(i) for i in np.argwhere(factor < 0)[0])
                raise ValueError(f"init[{m}] row {row}, column {column} is "
                                 f"{factor[row, column]}: a Poisson model starts from factors "
                                 ">= 0")
        params = _library.AprParams(
            struct_size=ctypes.sizeof(_library.AprParams), rank=int(rank),
            max_iters=int(maxiters), stoptol=float(stoptol),
            max_inner_iters=int(maxinneriters), kappa=float(kappa),
            kappa_tolerance=float(kappatol), epsilon=float(epsDivZero),
            phi_threshold=float(phi_threshold), seed=int(seed),
            on_iteration=c_callback)
        if initial is not None:
            params.initial_factors = ctypes.cast(initial,
                                                 ctypes.POINTER(ctypes.POINTER(ctypes.c_double)))
            if weights is not None:
                if weights.shape != (int(rank),):
                    raise ValueError(f"init's weights have shape {weights.shape}, expected "
                                     f"({int(rank)},)")
                keep_alive.append(weights)
                params.initial_weights = weights.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        return params, keep_alive

    def hear(iteration, log_likelihood, kkt_violation, _seconds):
        if printitn and (iteration - 1) % printitn == 0:
            print(f"\tIter {iteration}: log-likelihood = {log_likelihood:.10g}, "
                  f"KKT violation = {kkt_violation:.6g}")
        return callback is not None and callback(int(iteration), float(log_likelihood),
                                                 float(kkt_violation)) is False

    if printitn:
        print("CP_APR:")
    result = _run(X, backend, options, search_path, build, _lib.tensorhost_cp_apr, hear)
    if printitn:
        print("===========================================")
        print(f" Final log-likelihood = {result.log_likelihood}")
        print(f" Final least squares fit = {result.fit}")
        print(f" Final KKT violation = {result.kkt_violation}")
        print(f" Total inner iterations = {int(result.inner_iterations.sum())}")
        print(f" Total execution time = {result.timings.get('total', 0.0)} secs")
    _warn(result.warnings, stacklevel=2)
    return result


def complete(X, rank: int, *, l2: float = 0.0, holdout: float = 0.0, max_iters: int = 50,
             tol: float = 1e-5, seed: int = 42, constraints="none", init=None,
             backend: str = "auto", options: Optional[Mapping[str, Any]] = None,
             callback: Optional[Callable[[int, float, float, float], Optional[bool]]] = None,
             search_path=None) -> CPResult:
    """Tensor completion: a CP model fitted to the entries X lists, the
    cells it does not list being unknown (not zero); a listed 0 is an
    observed 0. It minimises

        sum over the training entries of (x - m)^2 + l2 * sum_n ||A_n||_F^2

    with m = sum_r prod_n A_n[i_n, r], by row-wise ALS on the backend: each
    iteration, every row of every factor in turn becomes the minimiser given
    the others, solved from that row's own entries, so the objective never
    rises. result.predict(indices) then gives the model's values at the
    cells X left out.

    X, backend, options, search_path as for cp_als (a file path, a
    pyttb.sptensor or (indices, values, shape)); the values are used as they
    are (never rescaled: the ridge is not scale-invariant) and each must be
    0 or of magnitude within [2**-64, 2**64].
    l2: the ridge's weight (>= 0). With l2 = 0 a factor row that no training
       entry reaches is undetermined (ValueError naming it); with l2 > 0 it
       becomes 0 (EmptyRowsWarning). A row with fewer independent entries
       than the rank and l2 = 0 keeps its values (RankWarning).
    holdout: the fraction of the listed entries held out of training, in
       [0, 1), each drawn independently from the seed (the same split on
       every backend). Each iteration reports the held-out RMSE; the run also
       stops once it has not improved on the best so far by tol times that
       best for 5 iterations in a row (a rise counts as no improvement), and
       the model returned is the one of the iteration with the lowest
       held-out RMSE (early stopping).
    max_iters, tol: as cp_als's, with its defaults (this package's
       least-squares function; pyttb's names maxiters/stoptol are cp_apr's,
       which mirrors pyttb's cp_apr): without a holdout the run stops when the
       training fit 1 - ||x - m|| / ||x|| changes by less than tol (never
       before iteration 2); with a holdout, see holdout as well.
    seed: the initial factors (the same on every backend) and the holdout's
       draw; init: a list of (dims[m], rank) arrays to start from instead
       (their model has unit weights: TensorLy's init=(ones, factors)).
    constraints: "none", "nonneg", or one of them per mode, as cp_als's; the
       nonnegative modes' rows are solved by coordinate descent, and their
       init entries must be >= 0.
    callback(iteration, train_rmse, holdout_rmse, objective): after each
       iteration (holdout_rmse NaN without a holdout); returning False stops
       the run (status "interrupted", with the model published so far).
    The names: l2 and holdout are the program's cpd.l2 and tensor.holdout
    (TensorLy's parafac calls the ridge l2_reg and takes a mask instead).

    Returns a CPResult of model "completion" in cp_als's published form
    (unit 2-norm columns, weights sorted): `fit` and `fits` over the training
    entries; per iteration `train_rmses`, `holdout_rmses`, `objectives`; of
    the published model `train_rmse`, `holdout_rmse`, `objective` and
    `published_iteration`; `observed` (listed) and `held_out` entries.
    status "converged" when the stopping rule ended the run. The objective's
    ridge term is of the factors as fitted, before the published form moved
    their scale into the weights. The backend needs the plugin ABI 1.5
    function row_least_squares (TensorhostValueError otherwise, before any
    work). Errors and warnings otherwise as cp_als's.
    """
    _check_integer("rank", rank, 1, 4096, "1 to 4096")
    _check_integer("max_iters", max_iters, 1, 2**32 - 1, "1 to 2**32 - 1")
    _check_integer("seed", seed, 0, 2**64 - 1, "0 to 2**64 - 1")
    _check_tolerance(tol)
    _check_number("l2", l2, positive=False)
    if isinstance(holdout, bool) or not isinstance(holdout, numbers.Real) \
            or not 0 <= holdout < 1:
        raise ValueError(f"holdout must be a fraction in [0, 1) (of the listed entries, held "
                         f"out of training), got {holdout!r}")
    per_mode = [constraints] if isinstance(constraints, str) else list(constraints)
    if not per_mode or any(not isinstance(c, str) or c not in _CONSTRAINTS for c in per_mode):
        raise ValueError(f"constraints must be one of {sorted(_CONSTRAINTS)} or a non-empty "
                         f"sequence of them (one per mode), got {constraints!r}")
    if not isinstance(backend, (str, os.PathLike)):
        raise TypeError(f"backend must be a plugin name or a path, got {type(backend).__name__}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")

    def build(dims, c_callback):
        if not isinstance(constraints, str) and len(per_mode) != len(dims):
            raise ValueError(f"constraints lists {len(per_mode)} values, one per mode, but the "
                             f"tensor has {len(dims)} modes")
        mode_constraints = per_mode * len(dims) if isinstance(constraints, str) else per_mode
        initial, keep_alive = _initial_factors(init, dims, int(rank))
        for m, factor in enumerate(keep_alive):
            if mode_constraints[m] == "nonneg" and np.any(factor < 0):
                row, column = (int(i) for i in np.argwhere(factor < 0)[0])
                raise ValueError(f"init[{m}] row {row}, column {column} is "
                                 f"{factor[row, column]}: a nonnegative mode (constraints) "
                                 "starts from factors >= 0")
        params = _library.CompleteParams(
            struct_size=ctypes.sizeof(_library.CompleteParams), rank=int(rank),
            max_iters=int(max_iters), tolerance=float(tol), l2=float(l2),
            holdout=float(holdout), seed=int(seed), on_iteration=c_callback)
        if isinstance(constraints, str):
            params.constraints = _CONSTRAINTS[constraints]
        else:
            listed = (ctypes.c_int32 * len(dims))(*[_CONSTRAINTS[c] for c in mode_constraints])
            params.mode_constraints = ctypes.cast(listed, ctypes.POINTER(ctypes.c_int32))
            keep_alive = (keep_alive, listed)
        if initial is not None:
            params.initial_factors = ctypes.cast(initial,
                                                 ctypes.POINTER(ctypes.POINTER(ctypes.c_double)))
        return params, keep_alive

    def hear(iteration, train_rmse, holdout_rmse, objective, _seconds):
        return callback is not None and callback(int(iteration), float(train_rmse),
                                                 float(holdout_rmse), float(objective)) is False

    result = _run(X, backend, options, search_path, build, _lib.tensorhost_complete, hear,
                  _library.COMPLETE_ITERATION_FN)
    _warn(result.warnings, stacklevel=2)
    return result


def _check_number(name: str, value, positive: bool) -> None:
    """ValueError unless `value` is a finite real number > 0 (`positive`)
    or >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0, "
                         f"got {value!r}")


def _apr_init(init):
    """cp_apr's init as (factors or None, weights or None)."""
    if isinstance(init, str):
        if init.lower() != "random":
            raise ValueError(f'init must be "random", a list of factor arrays or a ktensor, '
                             f"got {init!r}")
        return None, None
    if hasattr(init, "factor_matrices") and hasattr(init, "weights"):  # pyttb.ktensor
        weights = np.asarray(init.weights)
        if not (np.issubdtype(weights.dtype, np.floating)
                or np.issubdtype(weights.dtype, np.integer)):
            raise TypeError(f"init's weights must be real numbers, got {weights.dtype}")
        weights = np.ascontiguousarray(weights, dtype=np.float64).reshape(-1)
        good = np.isfinite(weights) & (weights >= 0)
        if not np.all(good):
            bad = int(np.argwhere(~good)[0][0])
            raise ValueError(f"init's weights[{bad}] is {weights[bad]}: expected a finite number "
                             ">= 0")
        return list(init.factor_matrices), weights
    return init, None


def _sequence_or_none(value):
    """`value` as a list when it is a sequence (not a string), else None."""
    if isinstance(value, (str, bytes)):
        return None
    try:
        return list(value)
    except TypeError:
        return None


def _decompose(X, rank, backend, options, max_iters, tol, seed, init, callback, update,
               search_path, constraints="none", l2=0.0, l1=0.0, hals_passes=5,
               hals_budget=0.5) -> CPResult:
    """cp_als once its arguments are checked: the library's run."""

    def build(dims, c_callback):
        initial, keep_alive = _initial_factors(init, dims, int(rank))
        params = _library.CpdParams(
            struct_size=ctypes.sizeof(_library.CpdParams), rank=int(rank),
            max_iters=int(max_iters), tolerance=float(tol), seed=int(seed),
            update=_UPDATES[update], on_iteration=c_callback, l2=l2,
            hals_passes=hals_passes, hals_budget=hals_budget)
        if isinstance(l1, float):
            params.l1 = l1
        else:
            if len(l1) != len(dims):
                raise ValueError(f"l1 lists {len(l1)} values, one per mode, but the tensor has "
                                 f"{len(dims)} modes")
            per_mode_l1 = (ctypes.c_double * len(dims))(*l1)
            params.mode_l1 = ctypes.cast(per_mode_l1, ctypes.POINTER(ctypes.c_double))
            keep_alive = (keep_alive, per_mode_l1)
        if isinstance(constraints, str):
            params.constraints = _CONSTRAINTS[constraints]
        else:
            if len(constraints) != len(dims):
                raise ValueError(f"constraints lists {len(constraints)} values, one per mode, "
                                 f"but the tensor has {len(dims)} modes")
            per_mode = (ctypes.c_int32 * len(dims))(*[_CONSTRAINTS[c] for c in constraints])
            params.mode_constraints = ctypes.cast(per_mode, ctypes.POINTER(ctypes.c_int32))
            keep_alive = (keep_alive, per_mode)
        if initial is not None:
            params.initial_factors = ctypes.cast(initial,
                                                 ctypes.POINTER(ctypes.POINTER(ctypes.c_double)))
        return params, keep_alive

    def hear(iteration, fit, _delta, _seconds):
        return callback is not None and callback(int(iteration), float(fit)) is False

    result = _run(X, backend, options, search_path, build, _lib.tensorhost_cp_als, hear)
    result.l2 = l2
    result.l1 = l1 if isinstance(l1, float) or len(set(l1)) > 1 else l1[0]
    return result


def _run(X, backend, options, search_path, build, function, hear,
         iteration_fn=_library.ITERATION_FN) -> CPResult:
    """A run of the library's `function` (tensorhost_cp_als, _cp_apr or
    _complete) on X and a backend opened for it: `build(dims, c_callback)`
    gives the parameters and what keeps their arrays alive, `hear(iteration,
    *measures, seconds)` is told of each iteration (TRUE: stop);
    `iteration_fn` is the C callback's type."""
    with _tensor_handle(X) as tensor, _Handle(_lib.tensorhost_backend_close) as opened:
        stats = _library.TensorStats(struct_size=ctypes.sizeof(_library.TensorStats))
        err = _library.error_buffer()
        _check(_lib.tensorhost_tensor_get_stats(tensor.pointer, ctypes.byref(stats), err), err)
        dims = [stats.dims[m] for m in range(stats.nmodes)]
        option_items = [(str(k), _option_text(v)) for k, v in (options or {}).items()]
        c_options = (_library.Option * max(len(option_items), 1))(
            *[_library.Option(k.encode(), v.encode()) for k, v in option_items])
        _check(_lib.tensorhost_backend_open(os.fsencode(backend), _search_path_text(search_path),
                                            c_options, len(option_items),
                                            ctypes.byref(opened.pointer), err), err)
        callback_error: list = []
        interrupted_by: list = []

        def on_iteration(iteration, *measures_seconds_user_data):
            if interrupted_by:  # Ctrl-C, also one the library's run began after
                return 1
            try:
                return 1 if hear(iteration, *measures_seconds_user_data[:-1]) else 0
            except BaseException as error:  # carried to the caller after the run
                callback_error.append(error)
                return 1

        c_callback = iteration_fn(on_iteration)
        params, keep_alive = build(dims, c_callback)
        result = _Handle(_lib.tensorhost_cpd_free)
        status, interrupted = _run_in_worker(lambda: function(
            opened.pointer, tensor.pointer, ctypes.byref(params), ctypes.byref(result.pointer),
            err), interrupted_by)
        del keep_alive
        with result:
            if callback_error:
                raise callback_error[0]
            if interrupted:
                raise KeyboardInterrupt
            _check(status, err)
            return _collect(result.pointer, opened.pointer)


def _option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _result_constraints(result, nmodes):
    """"none" or "nonneg" when every mode has the same, else one per mode."""
    names = ["nonneg" if _lib.tensorhost_cpd_mode_constraints(result, m)
             == _library.CONSTRAINTS_NONNEG else "none" for m in range(nmodes)]
    return names[0] if len(set(names)) == 1 else names


def _collect(result, backend) -> CPResult:
    nmodes = _lib.tensorhost_cpd_nmodes(result)
    rank = _lib.tensorhost_cpd_rank(result)
    iterations = _lib.tensorhost_cpd_iterations(result)
    weights_pointer = _lib.tensorhost_cpd_weights(result)
    if weights_pointer:
        weights = np.ctypeslib.as_array(weights_pointer, shape=(rank,)).copy()
        factors = [np.ctypeslib.as_array(_lib.tensorhost_cpd_factor(result, m),
                                         shape=(_lib.tensorhost_cpd_dim(result, m), rank)).copy()
                   for m in range(nmodes)]
    else:  # stopped before the first update
        weights, factors = np.zeros(0), []
    fits = (np.ctypeslib.as_array(_lib.tensorhost_cpd_fits(result), shape=(iterations,)).copy()
            if iterations else np.zeros(0))
    seconds = (np.ctypeslib.as_array(_lib.tensorhost_cpd_iteration_seconds(result),
                                     shape=(iterations,)).copy()
               if iterations else np.zeros(0))
    timings = _library.CpdTimings(struct_size=ctypes.sizeof(_library.CpdTimings))
    err = _library.error_buffer()
    _check(_lib.tensorhost_cpd_get_timings(result, ctypes.byref(timings), err), err)
    model = _lib.tensorhost_cpd_model(result)

    def per_iteration(function, dtype=np.float64):
        # NULL for another model's result.
        pointer = function(result) if iterations else None
        if not pointer:
            return np.zeros(0, dtype=dtype)
        return np.ctypeslib.as_array(pointer, shape=(iterations,)).astype(dtype, copy=True)

    completion = {}
    hals_passes = (tuple(int(_lib.tensorhost_cpd_hals_passes(result, m)) for m in range(nmodes))
                   if model == _library.MODEL_LEAST_SQUARES else ())
    objective = float(_lib.tensorhost_cpd_objective(result))
    if model == _library.MODEL_LEAST_SQUARES and not math.isnan(objective):
        # Regularised CP-ALS (API 1.5): the objective, each iteration's where
        # every l1 is 0 (NaN elsewhere).
        completion = dict(objective=objective,
                          objectives=per_iteration(_lib.tensorhost_cpd_objectives))
    if model == _library.MODEL_COMPLETION:
        info = _library.CompletionInfo(struct_size=ctypes.sizeof(_library.CompletionInfo))
        _check(_lib.tensorhost_cpd_get_completion(result, ctypes.byref(info), err), err)
        completion = dict(
            train_rmses=per_iteration(_lib.tensorhost_cpd_train_rmses),
            holdout_rmses=per_iteration(_lib.tensorhost_cpd_holdout_rmses),
            objectives=per_iteration(_lib.tensorhost_cpd_objectives),
            train_rmse=float(info.train_rmse), holdout_rmse=float(info.holdout_rmse),
            objective=float(info.objective), published_iteration=int(info.published_iteration),
            observed=int(info.observed), held_out=int(info.held_out))

    return CPResult(
        **completion,
        model=_MODELS.get(model, f"model_{model}"),
        constraints=_result_constraints(result, nmodes),
        hals_passes=hals_passes,
        log_likelihood=float(_lib.tensorhost_cpd_log_likelihood(result)),
        kkt_violation=float(_lib.tensorhost_cpd_kkt_violation(result)),
        log_likelihoods=per_iteration(_lib.tensorhost_cpd_log_likelihoods),
        kkt_violations=per_iteration(_lib.tensorhost_cpd_kkt_violations),
        inner_iterations=per_iteration(_lib.tensorhost_cpd_inner_iterations, np.uint32),
        weights=weights, factors=factors, fit=float(_lib.tensorhost_cpd_fit(result)), fits=fits,
        iteration_seconds=seconds,
        iterations=int(iterations), status=_STATUS[_lib.tensorhost_cpd_status_of(result)],
        backend=_lib.tensorhost_backend_id(backend).decode(),
        device=_lib.tensorhost_backend_device(backend).decode(),
        timings={name: getattr(timings, name)
                 for name in ("total", "load", "mttkrp", "sweep", "update", "algebra")},
        warnings=_result_warnings(result))
