"""What the package's tests share: the shipped tensors, the CPU backend's
arguments, and a planted low-rank tensor."""

from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
UBER = REPO / "data" / "uber-2014-sample.tns.gz"
AMINOACID = REPO / "data" / "aminoacid.sptensor.txt"
CPU = {"backend": "cpu-reference", "options": {"threads": 2}}


def planted_dense(shape=(6, 5, 4), rank=2, seed=3):
    """A dense tensor of exact CP rank `rank` as COO arrays (indices,
    values, shape) and the dense array itself."""
    rng = np.random.default_rng(seed)
    factors = [rng.uniform(0.1, 1.0, (n, rank)) for n in shape]
    dense = np.einsum("ir,jr,kr->ijk", *factors)
    indices = np.argwhere(dense != 0)
    return indices, dense[tuple(indices.T)], shape, dense


def planted(shape=(6, 5, 4), rank=2, seed=3):
    """The same as (indices, values, shape)."""
    return planted_dense(shape, rank, seed)[:3]


def read_tns(path):
    """A FROSTT .tns(.gz) file as (indices 0-based, values, shape), the shape
    the largest index of each mode (as tensorhost reads it)."""
    data = np.loadtxt(path, comments="#", ndmin=2)
    indices = data[:, :-1].astype(np.int64) - 1
    return indices, data[:, -1].copy(), tuple(int(n) for n in indices.max(axis=0) + 1)


def aminoacid_counts():
    """The amino-acid tensor (5 x 201 x 61 fluorescence) with its negative
    values (noise; 881 of them) set to zero, for the Poisson model, which
    needs values >= 0: (indices, values, shape)."""
    data = np.loadtxt(AMINOACID, skiprows=4)
    return data[:, :3].astype(np.int64), np.maximum(data[:, 3], 0.0), (5, 201, 61)
