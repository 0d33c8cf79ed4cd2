"""tensorhost from Python: inputs (COO arrays, pyttb, files), results in the
published form and equal to the program's, converters, bad input and
interruption. Runs against an installed package, or against a build tree
with TENSORHOST_LIBRARY (and TENSORHOST_PROGRAM for the program) set."""

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import tensorhost

from support import AMINOACID, CPU, UBER, planted_dense as planted


def dense_of(result):
    """The model's full tensor, from weights and factors alone."""
    letters = "ijklmnop"[: len(result.factors)]
    spec = ",".join(f"{c}r" for c in letters) + ",r->" + letters
    return np.einsum(spec, *result.factors, result.weights)


def fit_against(dense_x, result):
    return 1.0 - np.linalg.norm(dense_x - dense_of(result)) / np.linalg.norm(dense_x)


def assert_published_form(result):
    assert np.all(result.weights >= 0)
    assert np.all(np.diff(result.weights) <= 0), "weights are not sorted"
    for factor in result.factors:
        np.testing.assert_allclose(np.linalg.norm(factor, axis=0), 1.0, rtol=1e-12)
        # fixsigns: at most one mode per component with a negative largest entry
    largest = [f[np.abs(f).argmax(axis=0), np.arange(f.shape[1])] for f in result.factors]
    assert np.all((np.array(largest) < 0).sum(axis=0) <= 1)


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")  # a fixed count of iterations
def test_coo_arrays_give_the_published_model_and_its_fit():
    indices, values, shape, dense = planted()
    result = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=200, tol=1e-12,
                               **CPU)
    assert result.backend == "cpu-reference"
    assert [f.shape for f in result.factors] == [(6, 2), (5, 2), (4, 2)]
    assert result.weights.shape == (2,)
    assert_published_form(result)
    assert result.iterations == len(result.fits) and result.fits[-1] == result.fit
    assert len(result.iteration_seconds) == result.iterations
    assert np.all(result.iteration_seconds > 0)
    assert result.iteration_seconds.sum() <= result.timings["total"]
    # The reported fit is the fit of the returned model.
    assert abs(fit_against(dense, result) - result.fit) < 1e-9
    assert result.fit > 0.999  # an exactly rank-2 tensor
    assert result.timings["total"] > 0


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")  # a fixed count of iterations
def test_file_path_and_seed_give_the_program_s_fit(tmp_path):
    """Same tensor, rank, seed and iterations as the program: the same fit."""
    program = os.environ.get("TENSORHOST_PROGRAM") or str(
        Path(tensorhost.__file__).parent / "bin" / "tensorhost")
    if not Path(program).exists():
        pytest.skip(f"the tensorhost program is not at {program}")
    config = tmp_path / "run.toml"
    config.write_text(
        f'[tensor]\npath = "{AMINOACID}"\n[cpd]\nrank = 3\nmax_iters = 60\ntolerance = 1e-9\n'
        f'seed = 7\n[backend]\nplugin = "cpu-reference"\n[backend.options]\nthreads = 2\n'
        f'[output]\ndir = "{tmp_path / "out"}"\nformat = "both"\n')
    env = dict(os.environ)
    subprocess.run([program, "--config", str(config), "-q"], check=True, env=env)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    result = tensorhost.cp_als(AMINOACID, rank=3, max_iters=60, tol=1e-9, seed=7, **CPU)
    assert abs(result.fit - report["cpd"]["final_fit"]) < 1e-6
    assert result.iterations == len(report["cpd"]["iterations"])
    lambda_file = np.loadtxt(tmp_path / "out" / "lambda.mat")
    np.testing.assert_allclose(result.weights, lambda_file, rtol=1e-7)
    # The program's .npy files round-trip through numpy: every bit of the model.
    weights = np.load(tmp_path / "out" / "lambda.npy")
    assert weights.shape == (3,) and weights.dtype == np.float64
    np.testing.assert_allclose(weights, result.weights, rtol=1e-12)
    for m, factor in enumerate(result.factors):
        loaded = np.load(tmp_path / "out" / f"mode{m + 1}.npy")
        assert loaded.shape == factor.shape
        np.testing.assert_allclose(loaded, factor, rtol=1e-12, atol=1e-15)


def test_callback_sees_every_iteration_and_can_stop():
    seen = []

    def callback(iteration, fit):
        seen.append((iteration, fit))
        return iteration < 3

    result = tensorhost.cp_als(UBER, rank=4, max_iters=20, callback=callback, **CPU)
    assert [i for i, _ in seen] == [1, 2, 3]
    assert result.status == "interrupted" and result.iterations == 3
    assert_published_form(result)


def test_callback_exception_reaches_the_caller():
    def callback(iteration, fit):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        tensorhost.cp_als(UBER, rank=2, max_iters=5, callback=callback, **CPU)


def test_ctrl_c_stops_after_the_iteration_and_raises_keyboard_interrupt():
    iterations = []

    def callback(iteration, fit):
        iterations.append(iteration)
        if iteration == 2:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        tensorhost.cp_als(UBER, rank=4, max_iters=500, tol=0, callback=callback, **CPU)
    assert 2 <= len(iterations) < 500


def test_the_gil_is_released_while_a_run_computes():
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    before = len(ticks)
    try:
        tensorhost.cp_als(UBER, rank=8, max_iters=10, tol=0, **CPU)
        during = len(ticks) - before
    finally:
        stop.set()
        ticker.join()
    assert during > 0


@pytest.mark.parametrize("make, error, text", [
    (lambda i, v, s: (i.astype(float), v, s), TypeError, "indices must be integers"),
    (lambda i, v, s: (i[:, :2], v, s), ValueError, "shape has 3 modes"),
    (lambda i, v, s: (i, v[:-1], s), ValueError, "index rows but"),
    (lambda i, v, s: (i - 1, v, s), ValueError, "negative index"),
    (lambda i, v, s: (i, np.where(np.arange(v.size) == 4, np.nan, v), s), ValueError,
     "nonzero 4: value nan is not finite"),
    (lambda i, v, s: (i, v.astype(str), s), TypeError, "values must be real numbers"),
    (lambda i, v, s: (i[:, 0], v, s), ValueError, "2-D array"),
])
def test_malformed_arrays_raise_clear_errors(make, error, text):
    indices, values, shape, _ = planted()
    with pytest.raises(error, match=text):
        tensorhost.cp_als(make(indices, values, shape), rank=2, **CPU)


def test_library_errors_carry_the_library_s_message():
    indices, values, shape, _ = planted()
    with pytest.raises(tensorhost.TensorhostError, match="index 6 in mode 0 is out of range") \
            as caught:
        tensorhost.cp_als((indices + [6, 0, 0], values, shape), rank=2, **CPU)
    assert caught.value.status == "TENSORHOST_ERR_INVALID_ARGUMENT"
    with pytest.raises(tensorhost.TensorhostError, match="nope.tns"):
        tensorhost.cp_als("nope.tns", rank=2, **CPU)
    with pytest.raises(tensorhost.TensorhostError, match="no-such-backend"):
        tensorhost.cp_als(UBER, rank=2, backend="no-such-backend")
    with pytest.raises(tensorhost.TensorhostError, match="threads"):
        tensorhost.cp_als(UBER, rank=2, backend="cpu-reference", options={"threads": 100000})
    # Every value the C fields (fixed-width) cannot hold is refused, not wrapped.
    for rank in (0, -1, 2.5, True, 4097, 2**32 + 5):
        with pytest.raises(ValueError, match="rank must be an integer from 1 to 4096"):
            tensorhost.cp_als(UBER, rank=rank, **CPU)
    for max_iters in (0, -1, 2**32):
        with pytest.raises(ValueError, match="max_iters must be an integer"):
            tensorhost.cp_als(UBER, rank=2, max_iters=max_iters, **CPU)
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match="seed must be an integer"):
            tensorhost.cp_als(UBER, rank=2, seed=seed, **CPU)
    with pytest.raises(ValueError, match="update must be one of"):
        tensorhost.cp_als(UBER, rank=2, update="gpu", **CPU)


def test_a_file_name_that_is_not_utf8(tmp_path):
    """Paths go to the library as the file system's bytes (os.fsencode), so
    a name that is not UTF-8 is read, given as bytes or as str."""
    name = os.fsencode(tmp_path) + b"/fluor\xff.sptensor.txt"
    with open(name, "wb") as out:
        out.write(Path(AMINOACID).read_bytes())
    a = tensorhost.cp_als(name, rank=3, max_iters=3, tol=0, **CPU)
    b = tensorhost.cp_als(os.fsdecode(name), rank=3, max_iters=3, tol=0, **CPU)
    assert a.fit == b.fit and a.iterations == 3


def test_initial_factors_are_used_and_checked():
    indices, values, shape, _ = planted(rank=2)
    rng = np.random.default_rng(0)
    init = [rng.uniform(size=(n, 2)) for n in shape]
    a = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=3, tol=0, init=init, **CPU)
    b = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=3, tol=0, init=init, **CPU)
    c = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=3, tol=0, **CPU)
    assert a.fit == b.fit and a.fit != c.fit
    with pytest.raises(ValueError, match=r"init\[1\] has shape"):
        tensorhost.cp_als((indices, values, shape), rank=2, init=[init[0], init[0], init[2]],
                          **CPU)


def test_plugins_lists_what_is_installed():
    found = {p.name: p for p in tensorhost.plugins()}
    assert found["cpu-reference"].usable and found["cpu-reference"].problem is None
    for name, plugin in found.items():
        assert plugin.usable or plugin.problem


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")  # a fixed count of iterations
def test_to_pyttb_reproduces_the_fit():
    pyttb = pytest.importorskip("pyttb", reason="pyttb is not installed (pip install pyttb)")
    indices, values, shape, dense = planted()
    result = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=50, **CPU)
    full = result.to_pyttb().full().data
    assert abs(1 - np.linalg.norm(dense - full) / np.linalg.norm(dense) - result.fit) < 1e-9
    # pyttb's own sptensor is an input too.
    X = pyttb.sptensor(indices, values.reshape(-1, 1), shape)
    again = tensorhost.cp_als(X, rank=2, max_iters=50, **CPU)
    assert again.fit == result.fit


def test_pyttb_cp_als_from_the_same_start_gives_the_same_model():
    """pyttb's cp_als (Tensor Toolbox's algorithm) and tensorhost from the
    same initial factors: the same iterations, fit and model. (From random
    starts of their own the two may reach different local optima.)"""
    pyttb = pytest.importorskip("pyttb", reason="pyttb is not installed (pip install pyttb)")
    data = np.loadtxt(AMINOACID, skiprows=4)
    shape = (5, 201, 61)
    X = pyttb.sptensor(data[:, :3].astype(int), data[:, 3:4], shape)
    rng = np.random.default_rng(7)
    init = [rng.random((d, 3)) for d in shape]
    result = tensorhost.cp_als(AMINOACID, rank=3, max_iters=200, tol=1e-9, init=init, **CPU)
    M, _, info = pyttb.cp_als(X, 3, maxiters=200, stoptol=1e-9, printitn=0,
                              init=pyttb.ktensor([f.copy() for f in init]))
    assert abs(info["fit"] - result.fit) < 1e-9
    assert abs(info["iters"] + 1 - result.iterations) <= 1
    assert np.allclose(np.sort(M.weights)[::-1], result.weights, rtol=1e-6)
    full_pyttb = M.full().data
    full_ours = result.to_pyttb().full().data
    assert np.linalg.norm(full_pyttb - full_ours) / np.linalg.norm(full_ours) < 1e-6


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")  # a fixed count of iterations
def test_to_tensorly_reproduces_the_fit():
    tl = pytest.importorskip("tensorly", reason="TensorLy is not installed (pip install tensorly)")
    indices, values, shape, dense = planted()
    result = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=50, **CPU)
    full = tl.cp_to_tensor(result.to_tensorly())
    assert abs(1 - np.linalg.norm(dense - full) / np.linalg.norm(dense) - result.fit) < 1e-9


def test_nonneg_matches_tensorly_hals_from_the_same_start():
    """constraints="nonneg" is TensorLy's non_negative_parafac_hals (HALS,
    up to 5 inner passes a mode with its stopping rule): from the same
    initial factors the same fit after the same iterations, and every
    factor entry >= 0 on a tensor with negative values."""
    tl = pytest.importorskip("tensorly", reason="TensorLy is not installed (pip install tensorly)")
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import non_negative_parafac_hals
    data = np.loadtxt(AMINOACID, skiprows=4)
    shape = (5, 201, 61)
    dense = np.zeros(shape)
    dense[tuple(data[:, :3].astype(int).T)] = data[:, 3]
    assert (dense < 0).any()
    rng = np.random.default_rng(7)
    init = [rng.random((d, 3)) for d in shape]
    for iterations in (1, 2, 25):
        ours = tensorhost.cp_als(AMINOACID, rank=3, max_iters=iterations, tol=0, init=init,
                                 constraints="nonneg", **CPU)
        assert ours.constraints == "nonneg" and ours.iterations == iterations
        assert all((f >= 0).all() for f in ours.factors)
        theirs = non_negative_parafac_hals(
            tl.tensor(dense), 3, n_iter_max=iterations, tol=0,
            init=CPTensor((np.ones(3), [f.copy() for f in init])))
        full = tl.cp_to_tensor(theirs)
        fit_theirs = 1.0 - np.linalg.norm(dense - full) / np.linalg.norm(dense)
        assert abs(fit_theirs - ours.fit) < 1e-9, (iterations, fit_theirs, ours.fit)
        assert abs(fit_against(dense, ours) - ours.fit) < 1e-9


def test_nonneg_runs_per_mode_not_in_a_sweep():
    """The nonnegative update runs per mode, in the backend ("mode",
    cpu-reference's als_update_nonneg) or on the host, with the same
    iterations; a sweep takes constraints only on a plugin with als_sweep
    of ABI 1.6 (cpu-reference has none)."""
    with pytest.raises(ValueError, match="needs als_sweep"):
        tensorhost.cp_als(planted()[:3], rank=2, constraints="nonneg", update="sweep", **CPU)
    runs = {update: tensorhost.cp_als(planted()[:3], rank=2, max_iters=10, tol=0,
                                      constraints="nonneg", update=update, **CPU)
            for update in ("mode", "host")}
    assert abs(runs["mode"].fit - runs["host"].fit) < 1e-12
    with pytest.raises(ValueError, match="constraints must be one of"):
        tensorhost.cp_als(planted()[:3], rank=2, constraints="positive", **CPU)
    plain = tensorhost.cp_als(planted()[:3], rank=2, max_iters=3, tol=0, **CPU)
    assert plain.constraints == "none"


def test_nonneg_per_mode_matches_tensorly_nn_modes():
    """constraints per mode is TensorLy's nn_modes: the other modes' update is
    the unconstrained least-squares solve."""
    tl = pytest.importorskip("tensorly", reason="TensorLy is not installed (pip install tensorly)")
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import non_negative_parafac_hals
    data = np.loadtxt(AMINOACID, skiprows=4)
    shape = (5, 201, 61)
    dense = np.zeros(shape)
    dense[tuple(data[:, :3].astype(int).T)] = data[:, 3]
    rng = np.random.default_rng(8)
    init = [rng.random((d, 3)) for d in shape]
    ours = tensorhost.cp_als(AMINOACID, rank=3, max_iters=10, tol=0, init=init,
                             constraints=["nonneg", "none", "nonneg"], **CPU)
    assert ours.constraints == ["nonneg", "none", "nonneg"]
    assert (ours.factors[0] >= 0).all() and (ours.factors[2] >= 0).all()
    theirs = non_negative_parafac_hals(
        tl.tensor(dense), 3, n_iter_max=10, tol=0, nn_modes={0, 2},
        init=CPTensor((np.ones(3), [f.copy() for f in init])))
    full = tl.cp_to_tensor(theirs)
    fit_theirs = 1.0 - np.linalg.norm(dense - full) / np.linalg.norm(dense)
    assert abs(fit_theirs - ours.fit) < 1e-9, (fit_theirs, ours.fit)
    with pytest.raises(ValueError, match="one per mode, but the tensor has 3 modes"):
        tensorhost.cp_als(AMINOACID, rank=3, constraints=["nonneg", "none"], **CPU)
    with pytest.raises(ValueError, match="constraints must be one of"):
        tensorhost.cp_als(AMINOACID, rank=3, constraints=[], **CPU)
