"""libtensorhost through ctypes: the C API of include/tensorhost/tensorhost.h.

ctypes rather than a compiled extension: the package then needs no Python
headers or compiler of its own beyond the project's CMake build, works with
any CPython 3 the library's ABI serves, and ctypes releases the GIL during
every foreign call, so a decomposition computes while other Python threads
run.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

ERROR_SIZE = 1024

OK = 0
ERR_INVALID_ARGUMENT = -1
STATUS_NAMES = {
    -1: "TENSORHOST_ERR_INVALID_ARGUMENT",
    -2: "TENSORHOST_ERR_IO",
    -3: "TENSORHOST_ERR_FORMAT",
    -4: "TENSORHOST_ERR_PLUGIN",
    -5: "TENSORHOST_ERR_NO_DEVICE",
    -6: "TENSORHOST_ERR_BACKEND",
    -7: "TENSORHOST_ERR_NUMERIC",
    -8: "TENSORHOST_ERR_MISUSE",
}


class TensorStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("nmodes", ctypes.c_uint32),
        ("dims", ctypes.POINTER(ctypes.c_uint64)),
        ("nnz", ctypes.c_uint64),
        ("duplicates_merged", ctypes.c_uint64),
        ("explicit_zeros", ctypes.c_uint64),
        ("underflowed_values", ctypes.c_uint64),
        ("norm", ctypes.c_double),
        ("density", ctypes.c_double),
    ]


class Option(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


ITERATION_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint32, ctypes.c_double, ctypes.c_double, ctypes.c_double,
    ctypes.c_void_p)
PLUGIN_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                             ctypes.c_void_p)
# tensorhost_log_fn (API 1.1): level, message, user_data.
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)

# tensorhost_apr_iteration_fn (API 1.2): iteration, log-likelihood, KKT violation,
# seconds, user_data.
APR_ITERATION_FN = ITERATION_FN

# tensorhost_model (API 1.2; completion 1.4).
MODEL_LEAST_SQUARES, MODEL_POISSON, MODEL_COMPLETION = 0, 1, 2

# tensorhost_complete_iteration_fn (API 1.4): iteration, training RMSE,
# held-out RMSE, objective, seconds, user_data.
COMPLETE_ITERATION_FN = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.c_uint32, ctypes.c_double, ctypes.c_double, ctypes.c_double,
    ctypes.c_double, ctypes.c_void_p)

# tensorhost_constraints (API 1.3).
CONSTRAINTS_NONE, CONSTRAINTS_NONNEG = 0, 1

# tensorhost_log_level (API 1.1).
LOG_ERROR, LOG_WARNING, LOG_INFO, LOG_DEBUG = 0, 1, 2, 3

# tensorhost_warning_code (API 1.1).
WARN_RANK_ABOVE_BOUND = 1
WARN_RANK_DEFICIENT = 2
WARN_NOT_CONVERGED = 3
WARN_UNDERFLOWED_VALUES = 4
WARN_NON_INTEGER_VALUES = 5  # API 1.2
WARN_EMPTY_ROWS = 6  # API 1.4


class CpdParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("max_iters", ctypes.c_uint32),
        ("tolerance", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("update", ctypes.c_int32),
        ("initial_factors", ctypes.POINTER(ctypes.POINTER(ctypes.c_double))),
        ("on_iteration", ITERATION_FN),
        ("user_data", ctypes.c_void_p),
        ("constraints", ctypes.c_int32),  # API 1.3
        ("mode_constraints", ctypes.POINTER(ctypes.c_int32)),  # API 1.3
        ("l2", ctypes.c_double),  # API 1.5
        ("l1", ctypes.c_double),  # API 1.5
        ("mode_l1", ctypes.POINTER(ctypes.c_double)),  # API 1.5
        ("hals_passes", ctypes.c_uint32),  # API 1.6
        ("hals_budget", ctypes.c_double),  # API 1.6
    ]


class AprParams(ctypes.Structure):
    """tensorhost_apr_params (API 1.2)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("max_iters", ctypes.c_uint32),
        ("stoptol", ctypes.c_double),
        ("max_inner_iters", ctypes.c_uint32),
        ("kappa", ctypes.c_double),
        ("kappa_tolerance", ctypes.c_double),
        ("epsilon", ctypes.c_double),
        ("phi_threshold", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("initial_factors", ctypes.POINTER(ctypes.POINTER(ctypes.c_double))),
        ("initial_weights", ctypes.POINTER(ctypes.c_double)),
        ("on_iteration", APR_ITERATION_FN),
        ("user_data", ctypes.c_void_p),
    ]


class CompleteParams(ctypes.Structure):
    """tensorhost_complete_params (API 1.4)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rank", ctypes.c_uint32),
        ("max_iters", ctypes.c_uint32),
        ("tolerance", ctypes.c_double),
        ("l2", ctypes.c_double),
        ("holdout", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("constraints", ctypes.c_int32),
        ("mode_constraints", ctypes.POINTER(ctypes.c_int32)),
        ("initial_factors", ctypes.POINTER(ctypes.POINTER(ctypes.c_double))),
        ("on_iteration", COMPLETE_ITERATION_FN),
        ("user_data", ctypes.c_void_p),
    ]


class CompletionInfo(ctypes.Structure):
    """tensorhost_completion_info (API 1.4)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("observed", ctypes.c_uint64),
        ("training", ctypes.c_uint64),
        ("held_out", ctypes.c_uint64),
        ("l2", ctypes.c_double),
        ("holdout", ctypes.c_double),
        ("published_iteration", ctypes.c_uint32),
        ("objective", ctypes.c_double),
        ("train_rmse", ctypes.c_double),
        ("holdout_rmse", ctypes.c_double),
        ("singular_row_solves", ctypes.c_uint64),
        ("empty_rows", ctypes.c_uint64),
    ]


class CpdTimings(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("total", ctypes.c_double),
        ("load", ctypes.c_double),
        ("mttkrp", ctypes.c_double),
        ("sweep", ctypes.c_double),
        ("update", ctypes.c_double),
        ("algebra", ctypes.c_double),
    ]


def _library_path() -> Path:
    """TENSORHOST_LIBRARY when set (a build tree), else the library installed
    inside this package (tensorhost/lib/libtensorhost.so.1)."""
    explicit = os.environ.get("TENSORHOST_LIBRARY")
    if explicit:
        return Path(explicit)
    here = Path(__file__).resolve().parent
    for name in ("libtensorhost.so.1", "libtensorhost.so"):
        for folder in (here / "lib", here / "lib64"):
            if (folder / name).exists():
                return folder / name
    raise ImportError(
        f"libtensorhost is not installed in {here}/lib; install the package with "
        "`pip install ./python` from the repository, or set TENSORHOST_LIBRARY to the "
        "library of a build tree")


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    vp, u32, u64, i32, dbl = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, \
        ctypes.c_double
    cp, err = ctypes.c_char_p, ctypes.c_char_p
    pvp = ctypes.POINTER(ctypes.c_void_p)
    pdbl = ctypes.POINTER(ctypes.c_double)
    pu64 = ctypes.POINTER(ctypes.c_uint64)
    signatures = {
        "tensorhost_api_version": (u32, []),
        "tensorhost_cpd_hals_passes": (u32, [vp, u32]),
        "tensorhost_version_string": (cp, []),
        "tensorhost_status_name": (cp, [i32]),
        "tensorhost_tensor_new": (i32, [u32, pu64, u64, pu64, pdbl, pvp, err]),
        "tensorhost_tensor_read": (i32, [cp, pvp, err]),
        "tensorhost_tensor_free": (None, [vp]),
        "tensorhost_tensor_get_stats": (i32, [vp, ctypes.POINTER(TensorStats), err]),
        "tensorhost_backend_open": (i32, [cp, cp, ctypes.POINTER(Option), u32, pvp, err]),
        "tensorhost_backend_close": (None, [vp]),
        "tensorhost_backend_id": (cp, [vp]),
        "tensorhost_backend_device": (cp, [vp]),
        "tensorhost_backend_path": (cp, [vp]),
        "tensorhost_list_plugins": (i32, [cp, PLUGIN_FN, vp, err]),
        "tensorhost_cp_als": (i32, [vp, vp, ctypes.POINTER(CpdParams), pvp, err]),
        "tensorhost_cpd_free": (None, [vp]),
        "tensorhost_cpd_nmodes": (u32, [vp]),
        "tensorhost_cpd_rank": (u32, [vp]),
        "tensorhost_cpd_dim": (u64, [vp, u32]),
        "tensorhost_cpd_status_of": (i32, [vp]),
        "tensorhost_cpd_weights": (pdbl, [vp]),
        "tensorhost_cpd_factor": (pdbl, [vp, u32]),
        "tensorhost_cpd_fit": (dbl, [vp]),
        "tensorhost_cpd_iterations": (u32, [vp]),
        "tensorhost_cpd_fits": (pdbl, [vp]),
        "tensorhost_cpd_iteration_seconds": (pdbl, [vp]),
        "tensorhost_cpd_get_timings": (i32, [vp, ctypes.POINTER(CpdTimings), err]),
        "tensorhost_request_stop": (None, []),
        # 1.1
        "tensorhost_cpd_warning_count": (u32, [vp]),
        "tensorhost_cpd_warning": (i32, [vp, u32, ctypes.POINTER(i32), ctypes.POINTER(cp), err]),
        "tensorhost_warning_name": (cp, [i32]),
        "tensorhost_set_log_handler": (None, [LOG_FN, vp]),
        # 1.2
        "tensorhost_cp_apr": (i32, [vp, vp, ctypes.POINTER(AprParams), pvp, err]),
        "tensorhost_cpd_model": (i32, [vp]),
        "tensorhost_cpd_log_likelihood": (dbl, [vp]),
        "tensorhost_cpd_kkt_violation": (dbl, [vp]),
        "tensorhost_cpd_log_likelihoods": (pdbl, [vp]),
        "tensorhost_cpd_kkt_violations": (pdbl, [vp]),
        "tensorhost_cpd_inner_iterations": (ctypes.POINTER(u32), [vp]),
        # 1.3
        "tensorhost_cpd_constraints": (i32, [vp]),
        "tensorhost_cpd_mode_constraints": (i32, [vp, u32]),
        # 1.4
        "tensorhost_complete": (i32, [vp, vp, ctypes.POINTER(CompleteParams), pvp, err]),
        "tensorhost_cpd_train_rmses": (pdbl, [vp]),
        "tensorhost_cpd_holdout_rmses": (pdbl, [vp]),
        "tensorhost_cpd_objectives": (pdbl, [vp]),
        "tensorhost_cpd_objective": (ctypes.c_double, [vp]),  # API 1.5
        "tensorhost_cpd_get_completion": (i32, [vp, ctypes.POINTER(CompletionInfo), err]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def load() -> ctypes.CDLL:
    path = _library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as error:
        raise ImportError(f"cannot load {path}: {error}") from error
    version = lib.tensorhost_api_version()
    major, minor = version >> 16, version & 0xFFFF
    # 1.1 brought the warnings and the log handler this package relies on, 1.2
    # cp_apr, 1.3 the constraints, 1.4 complete, 1.5 cp_als's l2 and l1, 1.6
    # its hals_passes and hals_budget.
    if major != 1 or minor < 6:
        raise ImportError(f"{path} has API {major}.{minor}; this package needs 1.6 or a later 1.x")
    return _declare(lib)


def error_buffer() -> ctypes.Array:
    return ctypes.create_string_buffer(ERROR_SIZE)
