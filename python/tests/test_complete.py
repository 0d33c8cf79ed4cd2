"""tensorhost.complete: tensor completion (the listed entries observed, the
others unknown) on a planted low-rank tensor, its result's completion
facts, its errors and warnings, and TensorLy's masked parafac reaching the
same objective from the same start."""

import math
import os
from pathlib import Path

import numpy as np
import pytest

import tensorhost

from support import CPU


def planted_completion(shape=(30, 40, 50), rank=3, observed=0.1, noise=0.01, seed=0):
    """A rank-`rank` tensor from known random factors, a random `observed`
    fraction of its cells listed with Gaussian noise of deviation `noise`:
    (indices, values, shape), the noiseless dense tensor and the mask."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    dense = np.einsum("ir,jr,kr->ijk", *factors)
    mask = rng.random(shape) < observed
    indices = np.argwhere(mask)
    values = dense[mask] + noise * rng.standard_normal(int(mask.sum()))
    return (indices, values, shape), dense, mask


def test_planted_low_rank_is_completed_to_the_noise_level():
    """Rank 3, 30 x 40 x 50 from known factors, 10% of the cells observed
    with noise of deviation 0.01, 10% of those held out: the held-out RMSE
    of the published model is within 1.2 times the noise (a model as good
    as the truth would be at the noise itself; the fitted one is a little
    above it, by the parameters it spent on the noise), and the cells never
    observed are predicted closer to the truth than the noise."""
    noise = 0.01
    X, dense, mask = planted_completion(noise=noise)
    result = tensorhost.complete(X, 3, holdout=0.1, max_iters=200, **CPU)
    assert result.model == "completion" and result.status == "converged"
    assert result.holdout_rmse <= 1.2 * noise, (result.holdout_rmse, result.holdout_rmses)
    unobserved = np.argwhere(~mask)
    error = result.predict(unobserved) - dense[~mask]
    assert math.sqrt(np.mean(error ** 2)) < 0.5 * noise

    # The split and the published model's facts.
    assert result.observed == int(mask.sum())
    expected = 0.1 * result.observed  # binomial: within five deviations
    assert abs(result.held_out - expected) < 5 * math.sqrt(expected * 0.9)
    n = result.iterations
    assert len(result.train_rmses) == len(result.holdout_rmses) == len(result.objectives) == n
    best = int(np.argmin(result.holdout_rmses))
    assert result.published_iteration == best + 1
    assert result.holdout_rmse == result.holdout_rmses[best]
    assert result.train_rmse == result.train_rmses[best]
    assert result.objective == result.objectives[best]
    assert result.fit == result.fits[best]
    # l2 = 0: the objective is the training entries' squared error.
    training = result.observed - result.held_out
    np.testing.assert_allclose(result.objectives, result.train_rmses ** 2 * training,
                               rtol=1e-10)
    assert np.all(np.diff(result.objectives) <= 1e-9 * result.objectives[:-1])
    # The model returned is the one the numbers are of: its RMSE over every
    # observed entry lies between the training and held-out ones.
    indices, values, _ = X
    rmse = math.sqrt(np.mean((result.predict(indices) - values) ** 2))
    assert min(result.train_rmse, result.holdout_rmse) <= rmse * (1 + 1e-12)
    assert rmse <= max(result.train_rmse, result.holdout_rmse) * (1 + 1e-12)


def test_the_published_form_and_the_facts_without_a_holdout():
    X, _, _ = planted_completion(shape=(10, 12, 14), observed=0.5, noise=0.0, seed=4)
    result = tensorhost.complete(X, 3, max_iters=500, tol=1e-12, **CPU)
    assert result.status == "converged"
    assert result.held_out == 0 and result.observed == len(X[1])
    assert np.all(np.isnan(result.holdout_rmses)) and math.isnan(result.holdout_rmse)
    assert result.published_iteration == result.iterations
    assert result.train_rmse < 1e-6  # exact rank 3, half the cells
    assert np.all(result.weights >= 0) and np.all(np.diff(result.weights) <= 0)
    for factor in result.factors:
        np.testing.assert_allclose(np.linalg.norm(factor, axis=0), 1.0, rtol=1e-12)
    # Not a completion result: its fields are empty.
    als = tensorhost.cp_als(X, 3, max_iters=3, tol=0, **CPU)
    assert als.model == "least-squares" and len(als.train_rmses) == 0
    assert math.isnan(als.objective) and als.observed == 0


def test_a_pyttb_sptensor_and_a_file_list_the_same_entries(tmp_path):
    """X as cp_als takes it: a pyttb.sptensor's entries (its subs and vals,
    an explicit zero included) and a .tns file's lines are the observed
    ones, as the (indices, values, shape) arrays are."""
    X, _, _ = planted_completion(shape=(6, 7, 8), observed=0.5, seed=8)
    indices, values, shape = X
    values = values.copy()
    values[3] = 0.0
    reference = tensorhost.complete((indices, values, shape), 2, max_iters=5, tol=0, **CPU)
    assert reference.observed == len(values)
    path = tmp_path / "listed.tns"
    np.savetxt(path, np.column_stack([indices + 1, values]), fmt=["%d"] * 3 + ["%.17g"])
    from_file = tensorhost.complete(path, 2, max_iters=5, tol=0, **CPU)
    assert from_file.observed == len(values)
    assert from_file.objective == reference.objective
    pyttb = pytest.importorskip("pyttb", reason="pyttb is not installed (pip install pyttb)")
    sparse = pyttb.sptensor(indices, values.reshape(-1, 1), shape)
    from_pyttb = tensorhost.complete(sparse, 2, max_iters=5, tol=0, **CPU)
    assert from_pyttb.observed == len(values)
    assert from_pyttb.objective == reference.objective


def test_nonnegative_modes():
    X, _, _ = planted_completion(shape=(6, 7, 8), observed=0.5, seed=9)
    result = tensorhost.complete(X, 2, l2=0.01, max_iters=20, tol=0, constraints="nonneg",
                                 **CPU)
    assert result.constraints == "nonneg"
    assert all((f >= 0).all() for f in result.factors)
    assert np.all(np.diff(result.objectives) <= 1e-12 * result.objectives[:-1])
    per_mode = tensorhost.complete(X, 2, l2=0.01, max_iters=20, tol=0,
                                   constraints=["nonneg", "none", "nonneg"], **CPU)
    assert per_mode.constraints == ["nonneg", "none", "nonneg"]
    assert (per_mode.factors[0] >= 0).all() and (per_mode.factors[2] >= 0).all()


def test_the_callback_hears_every_iteration_and_can_stop():
    X, _, _ = planted_completion(shape=(10, 12, 14), observed=0.5, seed=5)
    heard = []

    def listen(iteration, train_rmse, holdout_rmse, objective):
        heard.append((iteration, train_rmse, holdout_rmse, objective))
        return iteration < 3

    result = tensorhost.complete(X, 3, holdout=0.2, callback=listen, **CPU)
    assert result.status == "interrupted" and result.iterations == 3
    assert [h[0] for h in heard] == [1, 2, 3]
    np.testing.assert_array_equal([h[1] for h in heard], result.train_rmses)
    np.testing.assert_array_equal([h[2] for h in heard], result.holdout_rmses)
    np.testing.assert_array_equal([h[3] for h in heard], result.objectives)


def test_the_ridge_enters_the_objective_and_balances_the_fitted_columns():
    """With l2 > 0 the objective is the squared error plus l2 times the
    fitted factors' squared norms; at a minimum every component's fitted
    columns have equal norms (rescaling them is free for the error), so the
    ridge term is l2 * N * sum_r lambda_r^(2/N) of the published weights."""
    X, _, _ = planted_completion(shape=(10, 12, 14), observed=0.5, seed=6)
    l2 = 0.5
    result = tensorhost.complete(X, 3, l2=l2, max_iters=2000, tol=1e-13, **CPU)
    assert result.status == "converged"
    indices, values, _ = X
    squared_error = float(np.sum((result.predict(indices) - values) ** 2))
    ridge = l2 * 3 * float(np.sum(result.weights ** (2 / 3)))
    assert abs(squared_error + ridge - result.objective) < 1e-8 * result.objective


def test_errors_are_named_before_any_work():
    X, _, _ = planted_completion(shape=(6, 7, 8), observed=0.5)
    with pytest.raises(ValueError, match=r"holdout must be a fraction in \[0, 1\).*got 1\.0"):
        tensorhost.complete(X, 2, holdout=1.0, **CPU)
    with pytest.raises(ValueError, match="holdout must be a fraction"):
        tensorhost.complete(X, 2, holdout=-0.1, **CPU)
    with pytest.raises(ValueError, match="l2 must be a finite number >= 0, got -0.5"):
        tensorhost.complete(X, 2, l2=-0.5, **CPU)
    with pytest.raises(ValueError, match="l2 must be"):
        tensorhost.complete(X, 2, l2=float("nan"), **CPU)
    with pytest.raises(ValueError, match="rank must be"):
        tensorhost.complete(X, 0, **CPU)
    with pytest.raises(ValueError, match="tol must be"):
        tensorhost.complete(X, 2, tol=-1, **CPU)
    with pytest.raises(ValueError, match="constraints must be one of"):
        tensorhost.complete(X, 2, constraints="positive", **CPU)
    with pytest.raises(ValueError, match="one per mode, but the tensor has 3 modes"):
        tensorhost.complete(X, 2, constraints=["nonneg", "none"], **CPU)
    init = [np.full((n, 2), 0.5) for n in (6, 7, 8)]
    init[2][3, 1] = -0.25
    with pytest.raises(ValueError, match=r"init\[2\] row 3, column 1 is -0.25: a nonnegative"):
        tensorhost.complete(X, 2, init=init, constraints=["none", "none", "nonneg"], **CPU)
    with pytest.raises(TypeError, match="callback must be callable"):
        tensorhost.complete(X, 2, callback=3, **CPU)
    # What the library finds: a row that no entry reaches, without a ridge.
    indices = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])
    values = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(tensorhost.TensorhostValueError,
                       match=r"1 row of mode 1 \(the first: row 3\) has no training entry"):
        tensorhost.complete((indices, values, (3, 2, 2)), 1, **CPU)


def test_a_plugin_without_row_least_squares_is_refused():
    """A plugin built against the frozen ABI 1.3 header (the build's ABI
    fixture) has no row_least_squares: refused before any work."""
    library = os.environ.get("TENSORHOST_LIBRARY")
    fixture = (Path(library).resolve().parents[1] / "tests" / "abi-plugins"
               / "fixture_frozen_v1_3.so") if library else None
    if fixture is None or not fixture.exists():
        pytest.skip("the build's ABI fixture plugins are not here (an installed package)")
    X, _, _ = planted_completion(shape=(6, 7, 8), observed=0.5)
    with pytest.raises(tensorhost.TensorhostValueError, match="row_least_squares"):
        tensorhost.complete(X, 2, backend=str(fixture))


def test_rows_without_entries_warn_with_a_ridge():
    indices = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])
    values = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.warns(tensorhost.EmptyRowsWarning, match="has no training entry"):
        result = tensorhost.complete((indices, values, (3, 2, 2)), 1, l2=0.01, max_iters=3,
                                     tol=0, **CPU)
    assert [w.code for w in result.warnings] == ["empty_rows"]
    assert result.factors[0][2, 0] == 0.0
    assert result.predict([[2, 1, 1]])[0] == 0.0


def test_tensorly_masked_parafac_reaches_the_same_objective_from_the_same_start():
    """Both minimise sum over the observed cells of (x - m)^2 (l2 = 0):
    TensorLy's parafac with a mask by EM (an ALS sweep over the whole tensor,
    its unobserved cells filled with the current model, then filled again),
    tensorhost by row-wise ALS over the observed entries alone. Their fixed
    points are the same stationary points, and from the same initial
    factors (weights one; TensorLy's unobserved cells first filled with that
    start's values, so that its first sweep is an EM step from the same
    model) both reach the same minimum on this well-posed problem (8 x 9 x
    10, rank 3 planted, 70% observed, noise 1e-3), each run to convergence.
    Measured: objectives 4.6557183160607e-4 (TensorLy, 66 iterations) and
    4.6557183160611e-4 (tensorhost, 28), 9e-14 apart relative, the models
    2.5e-9 apart; 1e-6 leaves room for the last digits of both stopping
    rules, never for another minimum."""
    tl = pytest.importorskip("tensorly", reason="TensorLy is not installed (pip install tensorly)")
    from tensorly.cp_tensor import CPTensor
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(0)
    shape = (8, 9, 10)
    planted = [rng.standard_normal((n, 3)) for n in shape]
    full = np.einsum("ir,jr,kr->ijk", *planted) + 1e-3 * rng.standard_normal(shape)
    mask = rng.random(shape) < 0.7
    init = [rng.random((n, 3)) for n in shape]
    start = np.einsum("ir,jr,kr->ijk", *init)
    # Every observed cell is listed, an observed 0 among them (kept as an
    # entry, not dropped as a sparse tensor's zero): the observed value
    # nearest 0 (0.0034) made exactly 0.
    indices = np.argwhere(mask)
    full[tuple(indices[np.argmin(np.abs(full[mask]))])] = 0.0
    values = full[mask]
    assert np.sum(values == 0.0) == 1

    theirs = parafac(tl.tensor(np.where(mask, full, start)), 3,
                     mask=tl.tensor(mask.astype(np.float64)),
                     init=CPTensor((np.ones(3), [f.copy() for f in init])),
                     n_iter_max=100000, tol=1e-16, l2_reg=0, normalize_factors=False,
                     linesearch=False)
    model_theirs = tl.to_numpy(tl.cp_to_tensor(theirs))
    objective_theirs = float(np.sum((full - model_theirs)[mask] ** 2))

    ours = tensorhost.complete((indices, values, shape), 3, init=init, max_iters=100000,
                               tol=1e-15, **CPU)
    assert ours.status == "converged" and ours.observed == mask.sum()
    model_ours = np.einsum("ir,jr,kr,r->ijk", *ours.factors, ours.weights)
    objective_ours = float(np.sum((full - model_ours)[mask] ** 2))
    assert abs(ours.objective - objective_ours) <= 1e-9 * objective_ours
    assert abs(objective_theirs - objective_ours) <= 1e-6 * objective_ours, \
        (objective_theirs, objective_ours)
    # Well posed: the same model, unobserved cells included.
    assert np.abs(model_theirs - model_ours).max() < 1e-5
