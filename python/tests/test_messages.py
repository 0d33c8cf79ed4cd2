"""What tensorhost tells besides the model: a run's warnings (warnings.warn
with tensorhost's categories, and CPResult.warnings), the library's log
lines (the "tensorhost" logger), and which exception a mistake raises."""

import logging
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import tensorhost
from tensorhost import (ConvergenceWarning, CPWarning, RankWarning, TensorhostError,
                        TensorhostValueError, TensorhostWarning, UnderflowWarning)

from support import AMINOACID, CPU, REPO, planted


def test_categories_are_user_warnings_and_exported():
    for category in (RankWarning, ConvergenceWarning, UnderflowWarning,
                     tensorhost.NonIntegerWarning):
        assert issubclass(category, TensorhostWarning)
        assert category.__name__ in tensorhost.__all__
    assert issubclass(TensorhostWarning, UserWarning)
    assert issubclass(TensorhostValueError, TensorhostError)
    assert issubclass(TensorhostValueError, ValueError)


def test_a_rank_above_the_bound_warns_and_points_at_the_caller():
    # 6 x 5 x 4, dense: no rank above min(120, 5*4, 6*4, 6*5) = 20.
    with pytest.warns(RankWarning) as caught:
        result = tensorhost.cp_als(planted(), rank=25, max_iters=3, tol=0, **CPU)
    messages = [str(w.message) for w in caught]
    assert any(m.startswith("rank 25 is above the largest rank this tensor can have (20:")
               for m in messages), messages
    assert any("normal-equation solves were rank deficient" in m for m in messages), messages
    # stacklevel: the line that called cp_als, not the package's.
    assert {Path(w.filename).resolve() for w in caught} == {Path(__file__).resolve()}
    assert [w.code for w in result.warnings] == ["rank_above_bound", "rank_deficient"]
    assert all(w.category is RankWarning for w in result.warnings)
    assert [w.message for w in result.warnings] == messages


def test_not_converged_warns_only_when_a_tolerance_was_missed():
    with pytest.warns(ConvergenceWarning, match=r"not converged: stopped at max_iters = 2 "
                                                r"with \|fit change\| .* above tolerance 1e-12"):
        result = tensorhost.cp_als(AMINOACID, rank=3, max_iters=2, tol=1e-12, **CPU)
    assert result.status == "max_iters"
    assert len(result.warnings) == 1
    warning = result.warnings[0]
    assert isinstance(warning, CPWarning)
    assert (warning.code, warning.category) == ("not_converged", ConvergenceWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        exact = tensorhost.cp_als(AMINOACID, rank=3, max_iters=2, tol=0, **CPU)
        converged = tensorhost.cp_als(AMINOACID, rank=3, max_iters=500, tol=1e-4, **CPU)
        stopped = tensorhost.cp_als(AMINOACID, rank=3, max_iters=50, tol=1e-12,
                                    callback=lambda i, fit: i < 2, **CPU)
    assert exact.warnings == [] and exact.status == "max_iters"
    assert converged.warnings == [] and converged.status == "converged"
    assert stopped.warnings == [] and stopped.status == "interrupted"


def test_values_read_as_zero_warn_with_the_file(tmp_path):
    path = tmp_path / "tiny.tns"
    path.write_text("1 1 1 1.0\n2 1 1 1e-400\n1 2 1 2.0\n2 2 2 -1e-999\n1 1 2 3.0\n")
    with pytest.warns(UnderflowWarning) as caught:
        result = tensorhost.cp_als(path, rank=1, max_iters=3, tol=0, **CPU)
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        f"{path}: 2 values are too small for a double (below about 4.9e-324) and were read "
        "as zero")
    assert [w.code for w in result.warnings] == ["underflowed_values"]


def test_log_lines_reach_the_logger_from_the_run_s_thread(caplog):
    caplog.set_level(logging.DEBUG, logger="tensorhost")
    with pytest.warns(ConvergenceWarning):
        tensorhost.cp_als(AMINOACID, rank=3, max_iters=2, tol=1e-12, **CPU)
    records = [r for r in caplog.records if r.name == "tensorhost"]
    plugin = [r for r in records if r.getMessage() == "[plugin] cpu-reference: instance with "
                                                      "2 threads"]
    assert len(plugin) == 1 and plugin[0].levelno == logging.DEBUG
    # Lines from the worker thread the run computes on get through as well.
    assert any(r.threadName == "tensorhost-cp-als" for r in records), \
        [(r.threadName, r.getMessage()) for r in records]
    # A warning given to warnings.warn is not logged as well.
    assert not any("not converged" in r.getMessage() for r in records)


def test_log_lines_below_the_logger_s_level_are_dropped(caplog):
    caplog.set_level(logging.INFO, logger="tensorhost")
    tensorhost.cp_als(AMINOACID, rank=3, max_iters=2, tol=0, **CPU)
    assert not [r for r in caplog.records if r.name == "tensorhost" and
                r.levelno < logging.INFO]


@pytest.mark.parametrize("shape, text", [
    ((6, -5, 4), r"shape\[1\] must be an integer from 1 to 2\*\*32 - 1, got -5"),
    ((6, 5.5, 4), r"shape\[1\] must be an integer .* got 5.5"),
    ((6, 5.0, 4), r"shape\[1\] must be an integer .* got 5.0"),
    ((0, 5, 4), r"shape\[0\] must be an integer .* got 0"),
    ((6, 5, 2**32), r"shape\[2\] must be an integer .* got 4294967296"),
    ((6, 5, 2**64), r"shape\[2\] must be an integer .* got 18446744073709551616"),
    ((6, True, 4), r"shape\[1\] must be an integer .* got True"),
])
def test_a_bad_shape_is_a_value_error_not_an_overflow_error(shape, text):
    indices, values, _ = planted()
    with pytest.raises(ValueError, match=text) as caught:
        tensorhost.cp_als((indices, values, shape), rank=2, **CPU)
    assert not isinstance(caught.value, (OverflowError, TensorhostError))


def test_a_shape_that_is_not_a_sequence_is_a_type_error():
    indices, values, _ = planted()
    with pytest.raises(TypeError, match="shape must be a sequence of integers"):
        tensorhost.cp_als((indices, values, 5), rank=2, **CPU)


@pytest.mark.parametrize("tol", [-1e-5, math.nan, math.inf, "1e-5", True, None])
def test_a_bad_tolerance_is_a_value_error(tol):
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        tensorhost.cp_als(AMINOACID, rank=2, tol=tol, **CPU)


def test_bad_initial_factors_are_found_in_python():
    indices, values, shape = planted()
    init = [np.full((n, 2), 0.5) for n in shape]
    bad = [f.copy() for f in init]
    bad[2][3, 1] = np.inf
    with pytest.raises(ValueError, match=r"init\[2\] row 3, column 1 is inf: expected a finite "
                                         "number") as caught:
        tensorhost.cp_als((indices, values, shape), rank=2, init=bad, **CPU)
    assert not isinstance(caught.value, TensorhostError)
    with pytest.raises(TypeError, match=r"init\[0\] must hold real numbers"):
        tensorhost.cp_als((indices, values, shape), rank=2,
                          init=[f.astype(str) for f in init], **CPU)
    with pytest.raises(TypeError, match="init must be a list of arrays"):
        tensorhost.cp_als((indices, values, shape), rank=2, init=3, **CPU)
    with pytest.raises(ValueError, match="init has 2 factors for a tensor of 3 modes"):
        tensorhost.cp_als((indices, values, shape), rank=2, init=init[:2], **CPU)


def test_arguments_of_the_wrong_kind_are_type_errors():
    with pytest.raises(TypeError, match="callback must be callable"):
        tensorhost.cp_als(AMINOACID, rank=2, callback=3, **CPU)
    with pytest.raises(TypeError, match="backend must be a plugin name or a path"):
        tensorhost.cp_als(AMINOACID, rank=2, backend=None)
    with pytest.raises(TypeError, match="X must be a file path"):
        tensorhost.cp_als(3, rank=2, **CPU)


def test_what_the_library_refuses_is_a_value_error_too():
    indices, values, shape = planted()
    with pytest.raises(ValueError, match="index 6 in mode 0 is out of range") as caught:
        tensorhost.cp_als((indices + [6, 0, 0], values, shape), rank=2, **CPU)
    assert isinstance(caught.value, TensorhostValueError)
    assert caught.value.status == "TENSORHOST_ERR_INVALID_ARGUMENT"
    with pytest.raises(TensorhostValueError, match="threads"):
        tensorhost.cp_als(AMINOACID, rank=2, backend="cpu-reference", options={"threads": 10**6})
    # Other failures are not the caller's values: TensorhostError alone.
    with pytest.raises(TensorhostError) as caught:
        tensorhost.cp_als(REPO / "nope.tns", rank=2, **CPU)
    assert not isinstance(caught.value, ValueError)
    assert caught.value.status == "TENSORHOST_ERR_IO"
