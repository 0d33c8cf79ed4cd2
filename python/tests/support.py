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
