"""Predicting entries from a model: CPResult.predict against numpy's own
computation of the model, load_model reading what the program writes, and
both against `tensorhost predict`."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tensorhost

from support import AMINOACID, CPU, planted_dense as planted


def dense_of(model):
    """The model's full tensor, from weights and factors alone."""
    letters = "ijklmnop"[: len(model.factors)]
    spec = ",".join(f"{c}r" for c in letters) + ",r->" + letters
    return np.einsum(spec, *model.factors, model.weights)


def program():
    path = os.environ.get("TENSORHOST_PROGRAM") or str(
        Path(tensorhost.__file__).parent / "bin" / "tensorhost")
    if not Path(path).exists():
        pytest.skip(f"the tensorhost program is not at {path}")
    return path


def run_program(tmp_path, rank=3, output_format="both"):
    """The program's CP-ALS of the amino-acid tensor into tmp_path/out."""
    config = tmp_path / "run.toml"
    config.write_text(
        f'[tensor]\npath = "{AMINOACID}"\n[cpd]\nrank = {rank}\nmax_iters = 8\nseed = 3\n'
        f'[backend]\nplugin = "cpu-reference"\n[backend.options]\nthreads = 2\n'
        f'[output]\ndir = "{tmp_path / "out"}"\nformat = "{output_format}"\n')
    subprocess.run([program(), "--config", str(config), "-q"], check=True)
    return tmp_path / "out"


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")
def test_predict_is_the_model_at_every_cell():
    indices, values, shape, dense = planted()
    result = tensorhost.cp_als((indices, values, shape), rank=2, max_iters=20, **CPU)
    cells = np.argwhere(np.ones(shape, dtype=bool))
    predicted = result.predict(cells)
    assert predicted.shape == (cells.shape[0],) and predicted.dtype == np.float64
    np.testing.assert_allclose(predicted, dense_of(result)[tuple(cells.T)], rtol=1e-12,
                               atol=1e-14)
    # Any integer type, a list, and no entries at all.
    np.testing.assert_allclose(result.predict(cells[:5].astype(np.uint32).tolist()),
                               predicted[:5], rtol=1e-15)
    assert result.predict(np.zeros((0, 3), dtype=np.int64)).shape == (0,)


def test_predict_by_the_definition_in_chunks():
    """More entries than one chunk: each still the sum over components of
    the weight times the factors' entries."""
    rng = np.random.default_rng(5)
    shape, rank = (40, 30, 20, 7), 5
    model = tensorhost.CPModel(weights=rng.uniform(0.5, 2.0, rank),
                               factors=[rng.standard_normal((n, rank)) for n in shape])
    indices = np.column_stack([rng.integers(0, n, 150_000) for n in shape])
    expected = np.zeros(indices.shape[0])
    for r in range(rank):
        term = np.full(indices.shape[0], model.weights[r])
        for m, factor in enumerate(model.factors):
            term = term * factor[indices[:, m], r]
        expected += term
    np.testing.assert_allclose(model.predict(indices), expected, rtol=1e-12, atol=1e-12)


def test_predict_refuses_bad_indices():
    model = tensorhost.CPModel(weights=np.ones(2), factors=[np.ones((3, 2)), np.ones((4, 2))])
    with pytest.raises(ValueError, match=r"entries x 2 modes\), got shape \(2,\)"):
        model.predict([1, 2])
    with pytest.raises(ValueError, match=r"got shape \(1, 3\)"):
        model.predict([[0, 0, 0]])
    with pytest.raises(TypeError, match="integers"):
        model.predict([[0.0, 1.0]])
    with pytest.raises(ValueError, match=r"indices\[1\]: 4 in mode 1 is outside the model's "
                                         r"shape \(3, 4\) \(indices are 0-based\)"):
        model.predict([[0, 0], [2, 4]])
    with pytest.raises(ValueError, match=r"indices\[0\]: -1 in mode 0"):
        model.predict([[-1, 0]])
    with pytest.raises(ValueError, match="no factors"):
        tensorhost.CPModel(weights=np.zeros(0), factors=[]).predict([[0, 0]])


def test_load_model_reads_what_the_program_writes(tmp_path):
    out = run_program(tmp_path)
    model = tensorhost.load_model(out)
    assert isinstance(model, tensorhost.CPModel)
    assert model.shape == (5, 201, 61) and model.weights.shape == (3,)
    np.testing.assert_array_equal(model.weights, np.load(out / "lambda.npy"))
    for m, factor in enumerate(model.factors):
        np.testing.assert_array_equal(factor, np.load(out / f"mode{m + 1}.npy"))
    # The text files alone: their nine digits.
    text = tmp_path / "text"
    text.mkdir()
    for name in ("mode1.mat", "mode2.mat", "mode3.mat", "lambda.mat"):
        shutil.copy(out / name, text / name)
    from_text = tensorhost.load_model(str(text))
    np.testing.assert_allclose(from_text.weights, model.weights, rtol=1e-8)
    for a, b in zip(from_text.factors, model.factors):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9)


def test_load_model_predicts_as_the_program_does(tmp_path):
    """The same entries through `tensorhost predict` and through
    load_model(...).predict: the same values, and the RMSE the program
    reports against the file's values."""
    out = run_program(tmp_path)
    entries = np.array([[0, 0, 0], [4, 200, 60], [2, 99, 6], [1, 150, 30]])
    given = np.array([1.0, -2.0, 0.5, 3.0])
    lines = "".join(" ".join(str(i + 1) for i in row) + f" {v}\n"
                    for row, v in zip(entries, given))
    (tmp_path / "held-out.tns").write_text(lines)
    done = subprocess.run([program(), "predict", "--model", str(out), "--indices",
                           str(tmp_path / "held-out.tns")], check=True, capture_output=True,
                          text=True)
    written = np.loadtxt(done.stdout.splitlines(), comments="#", ndmin=2)
    order = np.lexsort(entries.T[::-1])  # the program writes the entries sorted
    np.testing.assert_array_equal(written[:, :3].astype(np.int64) - 1, entries[order])
    predicted = tensorhost.load_model(out).predict(entries)
    np.testing.assert_allclose(written[:, 3], predicted[order], rtol=1e-12)
    reported = float(re.search(r"RMSE (\S+) over 4 entries", done.stderr).group(1))
    assert reported == pytest.approx(np.sqrt(np.mean((predicted - given) ** 2)), rel=1e-5)


@pytest.mark.filterwarnings("ignore::tensorhost.ConvergenceWarning")
def test_a_result_and_its_files_predict_alike(tmp_path):
    """cp_als in Python and the program, same tensor, seed and iterations:
    the program's files, read back, predict what the result does."""
    out = run_program(tmp_path)
    result = tensorhost.cp_als(AMINOACID, rank=3, max_iters=8, seed=3, **CPU)
    cells = np.argwhere(np.ones((5, 201, 61), dtype=bool))[::37]
    np.testing.assert_allclose(tensorhost.load_model(out).predict(cells), result.predict(cells),
                               rtol=1e-6, atol=1e-6 * np.abs(result.weights).max())


def test_load_model_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere: no such folder"):
        tensorhost.load_model(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither mode1.npy nor mode1.mat"):
        tensorhost.load_model(tmp_path / "empty")
    model = tmp_path / "model"
    model.mkdir()
    rng = np.random.default_rng(1)
    np.save(model / "mode1.npy", rng.standard_normal((4, 2)))
    with pytest.raises(FileNotFoundError, match=r"mode2.npy is missing: a model has a factor "
                                                r"file for each of its modes, at least 2"):
        tensorhost.load_model(model)
    np.save(model / "mode3.npy", rng.standard_normal((5, 2)))
    with pytest.raises(FileNotFoundError, match=r"mode2.npy is missing: expected one factor "
                                                r"file per mode, mode1.npy to mode3.npy"):
        tensorhost.load_model(model)
    np.save(model / "mode2.npy", rng.standard_normal((3, 3)))
    with pytest.raises(ValueError, match=r"mode2.npy: 3 columns, expected 2 \(the rank"):
        tensorhost.load_model(model)
    np.save(model / "mode2.npy", rng.standard_normal((3, 2)))
    with pytest.raises(FileNotFoundError, match="lambda.npy is missing: expected the model's 2 "
                                                "weights"):
        tensorhost.load_model(model)
    np.save(model / "lambda.npy", np.ones(3))
    with pytest.raises(ValueError, match=r"lambda.npy: shape \(3,\), expected 2 weights"):
        tensorhost.load_model(model)
    np.save(model / "lambda.npy", np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match=r"lambda.npy: value 2 \(1-based\) is inf"):
        tensorhost.load_model(model)
    np.save(model / "lambda.npy", np.array([[2.0], [1.0]]))  # one column, as lambda.mat
    loaded = tensorhost.load_model(model)
    assert loaded.shape == (4, 3, 5)
    np.testing.assert_array_equal(loaded.weights, [2.0, 1.0])
