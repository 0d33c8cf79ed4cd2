"""CP-APR (Poisson CP, multiplicative updates) in tensorhost next to pyttb.

The same problem, from the same initial model, in one process: pyttb's
`cp_apr(X, rank, algorithm="mu")` and `tensorhost.cp_apr` on each backend
named, both with stoptol = 0 so that every outer iteration runs all its
inner iterations (maxinneriters per mode) and the two do the same work,
and tensorhost with pyttb's inadmissible-zero test (phi_threshold = 0).
Prints, as markdown rows, the seconds per outer iteration (pyttb: its wall
time over the iterations; tensorhost: the median of its per-iteration
times), the ratio to pyttb, and the final log-likelihoods, whose agreement
says the two computed the same thing.

    TENSORHOST_LIBRARY=build/lib/libtensorhost.so PYTHONPATH=python/src \\
        python3 bench/cp_apr_vs_pyttb.py [--tensor FILE.tns[.gz]] [--rank 16]
        [--iters 3] [--pyttb-iters 2] [--backend cpu-reference --backend gpu-adaptive]
        [--threads N]

Without pyttb installed (a GPU host without it), --no-pyttb times tensorhost
alone.
"""

import argparse
import gzip
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import tensorhost

REPO = Path(__file__).resolve().parents[1]


def read_tns(path: Path):
    """(subs, vals, shape) of a FROSTT .tns file, 1-based indices."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data = np.loadtxt((line for line in f if line.strip() and not line.startswith("#")),
                          dtype=np.float64, ndmin=2)
    subs = data[:, :-1].astype(np.int64) - 1
    vals = data[:, -1]
    shape = tuple(int(s) for s in subs.max(axis=0) + 1)
    return subs, vals, shape


def initial_factors(shape, rank, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.0, 1.0, (n, rank)) for n in shape]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensor", type=Path, default=REPO / "data" / "uber-2014-sample.tns.gz")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--iters", type=int, default=3, help="tensorhost's outer iterations")
    parser.add_argument("--pyttb-iters", type=int, default=2, help="pyttb's outer iterations")
    parser.add_argument("--backend", action="append", default=None)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--no-pyttb", action="store_true")
    args = parser.parse_args()
    backends = args.backend or ["cpu-reference"]

    subs, vals, shape = read_tns(args.tensor)
    factors = initial_factors(shape, args.rank, 7)
    print(f"{args.tensor.name}: shape {shape}, {len(vals)} nonzeros, rank {args.rank}",
          file=sys.stderr)

    rows = []
    pyttb_seconds = None
    pyttb_loglik = None
    if not args.no_pyttb:
        import pyttb as ttb
        X = ttb.sptensor(subs, vals.reshape(-1, 1), shape)
        start = time.perf_counter()
        model, _, output = ttb.cp_apr(X, args.rank, algorithm="mu", init=ttb.ktensor(
            [f.copy() for f in factors]), maxiters=args.pyttb_iters, stoptol=0.0, printitn=0)
        pyttb_seconds = (time.perf_counter() - start) / args.pyttb_iters
        pyttb_loglik = output["obj"]
        rows.append(("pyttb " + ttb.__version__, pyttb_seconds, 1.0, args.pyttb_iters,
                     pyttb_loglik))

    tensor = (subs, vals, shape)
    for backend in backends:
        options = {"threads": args.threads} if backend == "cpu-reference" else None
        for iters in sorted({args.iters, args.pyttb_iters}):
            result = tensorhost.cp_apr(tensor, args.rank, backend=backend, options=options,
                                       init=[f.copy() for f in factors], maxiters=iters,
                                       stoptol=0.0, printitn=0, phi_threshold=0.0)
            if iters == args.iters:
                seconds = statistics.median(result.iteration_seconds)
                ratio = pyttb_seconds / seconds if pyttb_seconds else float("nan")
                rows.append((f"tensorhost {backend}", seconds, ratio, iters,
                             result.log_likelihood))
            if iters == args.pyttb_iters and pyttb_loglik is not None:
                relative = abs(result.log_likelihood - pyttb_loglik) / abs(pyttb_loglik)
                print(f"{backend}: log-likelihood after {iters} iterations "
                      f"{result.log_likelihood:.12g}, pyttb {pyttb_loglik:.12g}, "
                      f"relative difference {relative:.2e}", file=sys.stderr)

    print("| code | seconds per outer iteration | x faster than pyttb | iterations "
          "| log-likelihood |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, ratio, iters, loglik in rows:
        print(f"| {name} | {seconds:.4g} | {ratio:.0f} | {iters} | {loglik:.10g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
