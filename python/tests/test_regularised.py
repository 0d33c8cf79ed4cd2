"""Regularised CP-ALS from Python: cp_als(..., l2=..., l1=...) against a
numpy reimplementation of its iterations, the same run on the backend's and
the host's update paths, what l1 and l2 do to a model, the program's
report, and bad arguments.

No TensorLy comparison with l1 or l2 > 0: from the same start TensorLy's
parafac(l2_reg=...) and non_negative_parafac_hals(sparsity_coefficients=...)
keep the factors unnormalised (or fold the weights into every mode's
update), where tensorhost normalises the columns of every mode but the one
solved (Tensor Toolbox's and SPLATT's convention). Without regularisation
that only moves scale between factors, so the existing tests match
TensorLy's fits; with it the penalty depends on that scale, so the
iterations differ and no comparison can hold. The numpy oracle below states
tensorhost's iteration instead."""

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tensorhost

from support import AMINOACID, CPU, planted_dense


def dense_of(result):
    letters = "ijklmnop"[: len(result.factors)]
    spec = ",".join(f"{c}r" for c in letters) + ",r->" + letters
    return np.einsum(spec, *result.factors, result.weights)


def mixed_signs():
    """A dense 5 x 6 x 7 tensor of CP rank 3 with a third of its entries
    negated (the constraints and l1 terms active) as (indices, values,
    shape) and the dense array."""
    indices, values, shape, dense = planted_dense((5, 6, 7), rank=3, seed=11)
    flat = np.arange(values.size)
    values = np.where(flat % 3 == 0, -values, values)
    dense = np.zeros(shape)
    dense[tuple(indices.T)] = values
    return (indices, values, shape), dense


def unfold_mttkrp(dense, factors, mode):
    """X_(mode) times the Khatri-Rao product of the other factors."""
    letters = "ijk"
    others = [m for m in range(3) if m != mode]
    spec = (letters + "," + ",".join(f"{letters[m]}r" for m in others) + "->"
            + letters[mode] + "r")
    return np.einsum(spec, dense, *[factors[m] for m in others])


def oracle(dense, init, iterations, l2, l1, nonneg, passes=(5, 5, 5)):
    """tensorhost's regularised CP-ALS written out in numpy: per mode, a free
    mode without l1 solves with V + l2 I; the others run up to passes[n] of
    coordinate descent (soft threshold by l1, clipped at 0 when nonneg)
    from the factor times the current weights, stopping once a pass
    changes the factor by at most 1e-8 of the first pass's change; then the
    columns are normalised (2-norm in the first iteration, max-norm floored
    at 1 after) into the weights. Returns (weights, factors, objective)."""
    factors = [f.copy() for f in init]
    rank = factors[0].shape[1]
    weights = np.ones(rank)
    for iteration in range(iterations):
        for n in range(3):
            m = unfold_mttkrp(dense, factors, n)
            v = np.ones((rank, rank))
            for k in range(3):
                if k != n:
                    v *= factors[k].T @ factors[k]
            if not nonneg[n] and l1[n] == 0:
                a = np.linalg.solve(v + l2 * np.eye(rank), m.T).T
            else:
                a = factors[n] * weights
                first = None
                for _ in range(passes[n]):
                    change = 0.0
                    for r in range(rank):
                        d = v[r, r] + l2
                        if d == 0:
                            continue
                        numerator = m[:, r] - a @ v[:, r] + v[r, r] * a[:, r]
                        if nonneg[n]:
                            new = np.maximum(0.0, numerator - l1[n]) / d
                        else:
                            new = np.sign(numerator) * np.maximum(0.0,
                                                                  np.abs(numerator) - l1[n]) / d
                        change += float(((new - a[:, r]) ** 2).sum())
                        a[:, r] = new
                    first = change if first is None else first
                    if change <= 1e-8 * first:
                        break
            if iteration == 0:
                weights = np.linalg.norm(a, axis=0)
            else:
                weights = np.maximum(np.abs(a).max(axis=0), 1.0)
            factors[n] = a / np.where(weights > 0, weights, 1.0)
    model = np.einsum("ir,jr,kr,r->ijk", *factors, weights)
    held = [factors[0], factors[1], factors[2] * weights]  # the last mode carries the weights
    objective = (0.5 * ((dense - model) ** 2).sum()
                 + sum(0.5 * l2 * (f ** 2).sum() + l1[n] * np.abs(f).sum()
                       for n, f in enumerate(held)))
    return weights, factors, model, objective


CASES = [
    ("ridge", 0.7, 0.0, "none"),
    ("nonneg, l1 and ridge", 0.2, 0.3, "nonneg"),
    ("mixed", 0.1, [0.0, 0.5, 0.0], ["nonneg", "none", "none"]),
]


@pytest.mark.parametrize("name,l2,l1,constraints", CASES, ids=[c[0] for c in CASES])
def test_host_update_matches_a_numpy_oracle(name, l2, l1, constraints):
    coo, dense = mixed_signs()
    rng = np.random.default_rng(4)
    init = [rng.random((n, 3)) for n in coo[2]]
    iterations = 3
    ours = tensorhost.cp_als(coo, rank=3, max_iters=iterations, tol=0, init=init, l2=l2, l1=l1,
                             constraints=constraints, update="host", **CPU)
    per_mode_l1 = l1 if isinstance(l1, list) else [l1] * 3
    nonneg = ([c == "nonneg" for c in constraints] if isinstance(constraints, list)
              else [constraints == "nonneg"] * 3)
    _, _, model, objective = oracle(dense, init, iterations, l2, per_mode_l1, nonneg)
    np.testing.assert_allclose(dense_of(ours), model, rtol=0, atol=1e-10 * np.abs(model).max())
    assert math.isclose(ours.objective, objective, rel_tol=1e-10), (ours.objective, objective)
    assert ours.l2 == l2 and ours.l1 == l1
    assert len(ours.objectives) == iterations
    if any(per_mode_l1):  # the 1-norms are known only for the final model
        assert np.isnan(ours.objectives).all()
    else:
        assert math.isclose(ours.objectives[-1], objective, rel_tol=1e-10)
    fit = 1.0 - np.linalg.norm(dense - dense_of(ours)) / np.linalg.norm(dense)
    assert abs(fit - ours.fit) < 1e-10  # the fit stays the least-squares fit


def test_ridge_in_the_backend_equals_the_host_path():
    """A ridge alone runs in the backend on any plugin (als_update with
    (V + l2 I)^-1, no new ABI field): the same run as the host path's."""
    runs = {update: tensorhost.cp_als(AMINOACID, rank=3, max_iters=20, tol=0, l2=50.0,
                                      update=update, **CPU)
            for update in ("auto", "host")}
    np.testing.assert_allclose(runs["auto"].fits, runs["host"].fits, rtol=0, atol=1e-12)
    np.testing.assert_allclose(runs["auto"].weights, runs["host"].weights, rtol=1e-10)
    assert math.isclose(runs["auto"].objective, runs["host"].objective, rel_tol=1e-12)


def test_l1_sparsifies_and_l2_shrinks():
    rng = np.random.default_rng(5)
    shape, rank = (12, 14, 16), 3
    planted = [np.where(rng.random((n, rank)) < 0.5, 0.0, 0.5 + rng.random((n, rank)))
               for n in shape]
    dense = np.einsum("ir,jr,kr->ijk", *planted) + 0.01 * rng.random(shape)
    indices = np.argwhere(np.ones(shape, dtype=bool))
    coo = (indices, dense[tuple(indices.T)], shape)
    zeros = []
    for l1 in (0.0, 0.5, 5.0):
        result = tensorhost.cp_als(coo, rank=rank, max_iters=60, tol=0, l1=l1,
                                   constraints="nonneg", update="host", **CPU)
        assert all((f >= 0).all() for f in result.factors)
        zeros.append(sum(int((f == 0).sum()) for f in result.factors))
    assert zeros[0] < zeros[1] < zeros[2], zeros
    weights = [tensorhost.cp_als(coo, rank=rank, max_iters=60, tol=0, l2=l2, **CPU).weights.sum()
               for l2 in (0.0, 10.0, 1000.0)]
    assert weights[0] > weights[1] > weights[2], weights


def test_the_program_reports_the_same_run(tmp_path):
    """cpd.l2 and cpd.l1 in a run file give the run cp_als gives, and
    report.json says so (cpd.l2, cpd.l1 per mode, the objective)."""
    program = os.environ.get("TENSORHOST_PROGRAM") or str(
        Path(tensorhost.__file__).parent / "bin" / "tensorhost")
    if not Path(program).exists():
        pytest.skip(f"the tensorhost program is not at {program}")
    config = tmp_path / "run.toml"
    config.write_text(
        f'[tensor]\npath = "{AMINOACID}"\n[cpd]\nrank = 3\nmax_iters = 15\ntolerance = 0\n'
        f'seed = 7\nupdate = "host"\nl2 = 20.0\nl1 = [0.0, 100.0, 0.0]\n'
        f'[backend]\nplugin = "cpu-reference"\n[backend.options]\nthreads = 2\n'
        f'[output]\ndir = "{tmp_path / "out"}"\nformat = "npy"\n')
    subprocess.run([program, "--config", str(config), "-q"], check=True, env=dict(os.environ))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    ours = tensorhost.cp_als(AMINOACID, rank=3, max_iters=15, tol=0, seed=7, l2=20.0,
                             l1=[0.0, 100.0, 0.0], update="host", **CPU)
    cpd = report["cpd"]
    assert cpd["l2"] == 20.0 and cpd["l1"] == [0.0, 100.0, 0.0]
    assert report["config"]["cpd.l1"] == [0.0, 100.0, 0.0]
    assert math.isclose(cpd["objective"], ours.objective, rel_tol=1e-12)
    assert abs(cpd["final_fit"] - ours.fit) < 1e-12
    assert ours.l1 == [0.0, 100.0, 0.0]
    assert all(it["objective"] is None for it in cpd["iterations"])  # an l1: final only


def gillis_glineur_passes(shape, nnz, rank, cap=5, budget=0.5):
    """Each mode's passes as Gillis and Glineur's accelerated HALS counts
    them: floor(1 + budget rho), rho = 1 + (nnz N R + the other modes' dims
    R^2) / (dim (R^2 + R)), between 1 and the cap."""
    order = len(shape)
    counts = []
    for n, dim in enumerate(shape):
        forming = nnz * order * rank + sum(d * rank * rank for k, d in enumerate(shape) if k != n)
        rho = 1.0 + forming / (dim * (rank * rank + rank))
        counts.append(int(min(cap, max(1, math.floor(1.0 + budget * rho)))))
    return counts


def test_each_mode_makes_the_passes_its_cost_allows():
    """A tensor with a long sparse mode (600 rows, about one nonzero each):
    its passes cost more than forming its MTTKRP, so by default it makes one
    and the short modes 5; the run is the oracle's with those counts, and
    hals_budget=1e9 (TensorLy's 5 everywhere) is the oracle's with 5."""
    rng = np.random.default_rng(8)
    shape = (4, 5, 600)
    cells = rng.choice(np.prod(shape), size=630, replace=False)
    indices = np.stack(np.unravel_index(cells, shape), axis=1)
    values = rng.random(630) + 0.1
    dense = np.zeros(shape)
    dense[tuple(indices.T)] = values
    rank = 4
    init = [rng.random((n, rank)) for n in shape]
    passes = gillis_glineur_passes(shape, 630, rank)
    assert passes == [5, 5, 1]
    for budget, counts in [(0.5, passes), (1e9, [5, 5, 5])]:
        ours = tensorhost.cp_als((indices, values, shape), rank=rank, max_iters=3, tol=0,
                                 init=init, constraints="nonneg", hals_budget=budget,
                                 update="host", **CPU)
        _, _, model, _ = oracle(dense, init, 3, 0.0, [0.0] * 3, [True] * 3, counts)
        np.testing.assert_allclose(dense_of(ours), model, rtol=0,
                                   atol=1e-10 * np.abs(model).max())
        assert ours.hals_passes == tuple(counts)
    # The backend's update makes the same passes as the host's.
    runs = [tensorhost.cp_als((indices, values, shape), rank=rank, max_iters=3, tol=0,
                              init=init, constraints="nonneg", update=update, **CPU)
            for update in ("host", "mode")]
    np.testing.assert_allclose(dense_of(runs[1]), dense_of(runs[0]), rtol=0,
                               atol=1e-10 * np.abs(dense_of(runs[0])).max())


def test_unregularised_results_have_no_objective():
    result = tensorhost.cp_als(AMINOACID, rank=3, max_iters=3, tol=0, **CPU)
    assert math.isnan(result.objective) and len(result.objectives) == 0
    assert result.l2 == 0.0 and result.l1 == 0.0
    assert result.hals_passes == (0, 0, 0)  # every mode solved exactly


def test_bad_arguments():
    coo, _ = mixed_signs()
    for kwargs, pattern in [
        (dict(l2=-1.0), "l2 must be a finite number >= 0"),
        (dict(l2=float("nan")), "l2 must be a finite number >= 0"),
        (dict(l1=float("inf")), "l1 must be a finite number >= 0"),
        (dict(l1="0.1"), "l1 must be a finite number >= 0"),
        (dict(l1=[]), "non-empty sequence"),
        (dict(l1=[0.1, -0.1, 0.0]), r"l1\[1\] must be a finite number >= 0"),
        (dict(l1=[0.1, 0.2]), "l1 lists 2 values, one per mode, but the tensor has 3 modes"),
        (dict(l2=1.0, update="sweep"), "needs als_sweep"),  # cpu-reference has none
        (dict(hals_passes=0), "hals_passes must be an integer from 1"),
        (dict(hals_passes=2.5), "hals_passes must be an integer from 1"),
        (dict(hals_budget=-0.5), "hals_budget must be a finite number >= 0"),
        (dict(hals_budget=float("inf")), "hals_budget must be a finite number >= 0"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            tensorhost.cp_als(coo, rank=2, max_iters=2, **kwargs, **CPU)
    # Values beyond [2**-64, 2**64] are fitted as read: refused with a ridge.
    indices, values, shape = coo
    with pytest.raises(ValueError, match=r"outside \[2\^-64, 2\^64\]"):
        tensorhost.cp_als((indices, values * 2.0 ** 70, shape), rank=2, max_iters=2, l2=1.0,
                          **CPU)
