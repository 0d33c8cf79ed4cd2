"""tensorhost.cp_apr (Poisson CP, CP-APR by multiplicative updates) against
pyttb's cp_apr (algorithm "mu"), the algorithm it follows: from the same
initial model, the same log-likelihood, KKT violations, inner iterations
and model after the same outer iterations, on the shipped Uber sample and
the amino-acid tensor; the result's form and its pyttb round trip; the
parameters' checks; the warnings."""

import math
import time
import warnings

import numpy as np
import pytest

import tensorhost
from tensorhost import ConvergenceWarning, NonIntegerWarning

from support import CPU, UBER, aminoacid_counts, planted, read_tns

# From the same start both run exactly this many outer iterations (stoptol
# too small to stop them): pyttb takes about 1 s an outer iteration on the
# Uber sample at rank 4, so these stay few.
#
# Both run pyttb's defaults (kappa 0.01, kappatol 1e-10). On Uber, factor
# entries fall below kappatol within an iteration, and which of them are
# inadmissible zeros to raise is where pyttb 1.8 departs from Tensor
# Toolbox (Phi > 0 instead of Phi > 1; its own TODO says so): tensorhost's
# default is Tensor Toolbox's, and phi_threshold=0 is pyttb's test.
CASES = {
    "aminoacid": dict(rank=3, iterations=3, kappa=0.01),
    "uber": dict(rank=4, iterations=2, kappa=0.01),
}


def tensor_of(name):
    return aminoacid_counts() if name == "aminoacid" else read_tns(UBER)


def x_of(name):
    """What tensorhost is given: the arrays, or for Uber the shipped file."""
    return aminoacid_counts() if name == "aminoacid" else UBER


def starting_factors(shape, rank, seed=11):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.05, 1.0, (n, rank)) for n in shape]


@pytest.fixture(scope="module", params=sorted(CASES))
def against_pyttb(request):
    """pyttb's and tensorhost's runs of one tensor from the same start."""
    ttb = pytest.importorskip("pyttb", reason="pyttb is not installed (pip install pyttb)")
    name = request.param
    rank, k, kappa = CASES[name]["rank"], CASES[name]["iterations"], CASES[name]["kappa"]
    indices, values, shape = tensor_of(name)
    X = ttb.sptensor(indices, values.reshape(-1, 1), shape)
    init = starting_factors(shape, rank)
    start = time.perf_counter()
    M, _, output = ttb.cp_apr(X, rank, init=ttb.ktensor([f.copy() for f in init]), maxiters=k,
                              stoptol=1e-12, printitn=0, kappa=kappa)
    # pyttb (1.8.6) normalizes its final model (unit 1-norm columns, weights
    # sorted) and then computes output["obj"] with tt_loglikelihood, which
    # moves the weights into the first factor of that same ktensor: the form
    # is put back here for the comparison of the numbers.
    M = M.copy().normalize(sort=True, normtype=1)
    pyttb_seconds = time.perf_counter() - start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # k iterations, on purpose
        warnings.simplefilter("ignore", NonIntegerWarning)   # amino-acid intensities
        start = time.perf_counter()
        result = tensorhost.cp_apr(x_of(name), rank, init=init, maxiters=k, stoptol=1e-12,
                                   kappa=kappa, phi_threshold=0.0, **CPU)
        ours_seconds = time.perf_counter() - start
    print(f"\n{name}: rank {rank}, {k} outer iterations, kappa {kappa}: log-likelihood pyttb "
          f"{output['obj']!r}, tensorhost {result.log_likelihood!r} (relative difference "
          f"{abs(result.log_likelihood - output['obj']) / abs(output['obj']):.2e}); pyttb "
          f"{pyttb_seconds:.2f} s, tensorhost {ours_seconds:.2f} s")
    return dict(name=name, k=k, X=X, M=M, output=output, result=result, ttb=ttb)


def test_log_likelihood_equals_pyttb_s(against_pyttb):
    result, output = against_pyttb["result"], against_pyttb["output"]
    assert result.model == "poisson"
    assert result.iterations == against_pyttb["k"] and result.status == "max_iters"
    assert result.log_likelihood == pytest.approx(output["obj"], rel=1e-6)
    # Of the model returned, by pyttb's own function.
    from pyttb.cp_apr import tt_loglikelihood
    assert tt_loglikelihood(against_pyttb["X"], result.to_pyttb()) == pytest.approx(
        result.log_likelihood, rel=1e-9)
    # Each iteration's, and the last one's is the final model's.
    assert result.log_likelihoods[-1] == pytest.approx(result.log_likelihood, rel=1e-9)


def test_iterations_equal_pyttb_s(against_pyttb):
    result, output = against_pyttb["result"], against_pyttb["output"]
    np.testing.assert_array_equal(result.inner_iterations, output["nInnerIters"])
    np.testing.assert_allclose(result.kkt_violations, output["kktViolations"], rtol=1e-6)
    assert result.kkt_violation == pytest.approx(output["kktViolations"][-1], rel=1e-6)


def test_model_equals_pyttb_s(against_pyttb):
    """Both end in pyttb's form: unit 1-norm columns, weights sorted
    decreasing; the same numbers."""
    result, M = against_pyttb["result"], against_pyttb["M"]
    assert np.all(np.diff(result.weights) <= 0)
    np.testing.assert_allclose(result.weights, M.weights, rtol=1e-6)
    for ours, theirs in zip(result.factors, M.factor_matrices):
        np.testing.assert_allclose(ours.sum(axis=0), 1.0, rtol=1e-12)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9 * np.abs(theirs).max())


def test_to_pyttb_round_trip(against_pyttb):
    """to_pyttb() is a pyttb.ktensor pyttb's functions take, and tensorhost
    takes it back as init: the model it holds."""
    ttb, result = against_pyttb["ttb"], against_pyttb["result"]
    K = result.to_pyttb()
    assert isinstance(K, ttb.ktensor)
    assert K.shape == against_pyttb["X"].shape and K.ncomponents == result.weights.size
    np.testing.assert_array_equal(K.weights, result.weights)
    for a, b in zip(K.factor_matrices, result.factors):
        np.testing.assert_array_equal(a, b)
    assert K.innerprod(against_pyttb["X"]) > 0
    if against_pyttb["name"] != "aminoacid":
        return  # one tensor is enough for the rest
    # As init, with its weights: the same as the weights folded into a factor.
    x = x_of("aminoacid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", NonIntegerWarning)
        from_ktensor = tensorhost.cp_apr(x, K.ncomponents, init=K, maxiters=1, stoptol=1e-12,
                                         **CPU)
        folded = [K.factor_matrices[0] * K.weights] + list(K.factor_matrices[1:])
        from_arrays = tensorhost.cp_apr(x, K.ncomponents, init=folded, maxiters=1,
                                        stoptol=1e-12, **CPU)
    assert from_ktensor.log_likelihood == pytest.approx(from_arrays.log_likelihood, rel=1e-12)
    # Starting from a model, another iteration never loses likelihood.
    assert from_ktensor.log_likelihood >= result.log_likelihood * (1 + 1e-9)


def count_tensor(shape=(6, 5, 4), rank=2, seed=3):
    """Poisson counts of a planted rank-`rank` model: (indices, values, shape)."""
    rng = np.random.default_rng(seed)
    factors = [rng.uniform(0.2, 2.0, (n, rank)) for n in shape]
    counts = rng.poisson(np.einsum("ir,jr,kr->ijk", *factors))
    indices = np.argwhere(counts > 0)
    return indices, counts[tuple(indices.T)].astype(float), shape


def test_result_of_a_converged_run():
    X = count_tensor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converges, counts: no warning at all
        result = tensorhost.cp_apr(X, 2, **CPU)
    assert result.status == "converged" and result.kkt_violation < 1e-4
    assert result.model == "poisson" and result.backend == "cpu-reference"
    assert result.iterations == len(result.log_likelihoods) == len(result.kkt_violations) \
        == len(result.inner_iterations) == len(result.fits)
    np.testing.assert_array_equal(result.fits, result.log_likelihoods)
    assert np.all(np.diff(result.log_likelihoods) >= -1e-9 * abs(result.log_likelihood))
    assert np.all((result.inner_iterations >= 1) & (result.inner_iterations <= 3 * 10))
    assert 0 < result.fit < 1  # least squares, of the final model
    for factor in result.factors:
        assert np.all(factor >= 0)
        np.testing.assert_allclose(factor.sum(axis=0), 1.0, rtol=1e-12)
    # The seed's start: the same on every call, another with another seed.
    again = tensorhost.cp_apr(X, 2, **CPU)
    assert again.log_likelihood == result.log_likelihood
    with pytest.warns(ConvergenceWarning):
        one = tensorhost.cp_apr(X, 2, maxiters=1, stoptol=1e-12, **CPU)
        other = tensorhost.cp_apr(X, 2, seed=7, maxiters=1, stoptol=1e-12, **CPU)
    assert one.log_likelihood != other.log_likelihood


def test_cp_als_results_say_least_squares():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = tensorhost.cp_als(planted(), rank=2, max_iters=3, tol=0, **CPU)
    assert result.model == "least-squares"
    assert math.isnan(result.log_likelihood) and math.isnan(result.kkt_violation)
    assert result.log_likelihoods.size == 0 and result.inner_iterations.size == 0


def test_callback_and_printitn(capsys):
    seen = []

    def callback(iteration, log_likelihood, kkt_violation):
        seen.append((iteration, log_likelihood, kkt_violation))
        return iteration < 2

    result = tensorhost.cp_apr(count_tensor(), 2, printitn=1, callback=callback, **CPU)
    assert [i for i, _, _ in seen] == [1, 2] and result.status == "interrupted"
    assert [ll for _, ll, _ in seen] == list(result.log_likelihoods)
    printed = capsys.readouterr().out
    assert "Iter 1: log-likelihood" in printed and "Final log-likelihood" in printed


def test_parameter_errors_come_before_any_work():
    indices, values, shape = count_tensor()
    negative = values.copy()
    negative[3] = -2.0
    with pytest.raises(ValueError, match=r"has the value -2: the Poisson model needs finite "
                                         r"values >= 0"):
        tensorhost.cp_apr((indices, negative, shape), 2, **CPU)
    X = (indices, values, shape)
    for rank in (0, -1, 2.5):
        with pytest.raises(ValueError, match="rank must be an integer from 1 to 4096"):
            tensorhost.cp_apr(X, rank, **CPU)
    cases = [
        (dict(stoptol=-1e-4), "stoptol must be a finite number >= 0"),
        (dict(epsDivZero=float("nan")), "epsDivZero must be"),
        (dict(kappa=-0.01), "kappa must be a finite number >= 0"),
        (dict(kappatol=float("inf")), "kappatol must be"),
        (dict(maxiters=0), "maxiters must be an integer"),
        (dict(maxinneriters=0), "maxinneriters must be an integer"),
        (dict(printitn=-1), "printitn must be an integer"),
        (dict(algorithm="pdnr"), 'algorithm must be "mu"'),
        (dict(init="nvecs"), 'init must be "random"'),
    ]
    for kwargs, text in cases:
        with pytest.raises(ValueError, match=text):
            tensorhost.cp_apr(X, 2, **kwargs, **CPU)
    init = starting_factors(shape, 2)
    init[1][2, 1] = -0.5
    with pytest.raises(ValueError, match=r"init\[1\] row 2, column 1 is -0.5"):
        tensorhost.cp_apr(X, 2, init=init, **CPU)
    init[1][2, 1] = 0.5
    with pytest.raises(ValueError, match=r"init\[0\] has shape \(6, 2\), expected \(6, 3\)"):
        tensorhost.cp_apr(X, 3, init=init, **CPU)


def test_ktensor_init_weights_are_checked():
    ttb = pytest.importorskip("pyttb", reason="pyttb is not installed (pip install pyttb)")
    indices, values, shape = count_tensor()
    K = ttb.ktensor(starting_factors(shape, 2), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"init's weights\[1\] is -1.0: expected a finite "
                                         r"number >= 0"):
        tensorhost.cp_apr((indices, values, shape), 2, init=K, **CPU)


def test_warnings():
    indices, values, shape = count_tensor()
    with pytest.warns(ConvergenceWarning, match="stoptol") as caught:
        result = tensorhost.cp_apr((indices, values, shape), 2, maxiters=2, stoptol=1e-12,
                                   **CPU)
    assert result.status == "max_iters"
    assert [w.code for w in result.warnings] == ["not_converged"]
    assert len(caught) == 1
    with pytest.warns(NonIntegerWarning) as caught:
        result = tensorhost.cp_apr((indices, values + 0.5, shape), 2, **CPU)
    assert "non_integer_values" in [w.code for w in result.warnings]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stop asked for is no warning
        stopped = tensorhost.cp_apr((indices, values, shape), 2, stoptol=1e-12,
                                    callback=lambda i, ll, kkt: i < 2, **CPU)
    assert stopped.status == "interrupted" and stopped.warnings == []
