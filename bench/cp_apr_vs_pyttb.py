"""CP-APR (Poisson CP, multiplicative updates) in tensorhost next to pyttb.

The same problem, from the same initial model, in one process: pyttb's
`cp_apr(X, rank, algorithm="mu")` and `tensorhost.cp_apr` on each backend
named, both with stoptol = 0 so that every outer iteration runs all its
inner iterations (maxinneriters per mode) and the two do the same work,
and tensorhost with pyttb's inadmissible-zero test (phi_threshold = 0).
Prints, as markdown rows, the seconds per outer iteration (pyttb: its wall
time over the iterations; tensorhost: the median of its per-iteration
times), the ratio to pyttb, and the final log-likelihoods, whose agreement
says the two computed the same thing. With --rounds N the two are timed
alternately N times, a ratio each round, and the median ratio printed: on
a shared machine whose speed drifts, a ratio of two timings far apart
measures the drift as much as the codes.

    TENSORHOST_LIBRARY=build/lib/libtensorhost.so PYTHONPATH=python/src \\
        python3 bench/cp_apr_vs_pyttb.py [--tensor FILE.tns[.gz]] [--rank 16]
        [--iters 3] [--pyttb-iters 2] [--backend cpu-reference --backend gpu-adaptive]
        [--threads N] [--rounds 5]

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
    parser.add_argument("--rounds", type=int, default=1,
                        help="pyttb and tensorhost timed alternately this many times, "
                             "a ratio each round (a busy machine's speed drifts)")
    args = parser.parse_args()
    backends = args.backend or ["cpu-reference"]

    subs, vals, shape = read_tns(args.tensor)
    factors = initial_factors(shape, args.rank, 7)
    print(f"{args.tensor.name}: shape {shape}, {len(vals)} nonzeros, rank {args.rank}",
          file=sys.stderr)

    tensor = (subs, vals, shape)

    def time_pyttb():
        import pyttb as ttb
        X = ttb.sptensor(subs, vals.reshape(-1, 1), shape)
        start = time.perf_counter()
        _, _, output = ttb.cp_apr(X, args.rank, algorithm="mu", init=ttb.ktensor(
            [f.copy() for f in factors]), maxiters=args.pyttb_iters, stoptol=0.0, printitn=0)
        return (time.perf_counter() - start) / args.pyttb_iters, output["obj"], ttb.__version__

    def run_tensorhost(backend, iters):
        options = {"threads": args.threads} if backend == "cpu-reference" else None
        return tensorhost.cp_apr(tensor, args.rank, backend=backend, options=options,
                                 init=[f.copy() for f in factors], maxiters=iters,
                                 stoptol=0.0, printitn=0, phi_threshold=0.0)

    rows = []
    ratios = {backend: [] for backend in backends}
    for round_number in range(1, args.rounds + 1):
        label = f"{round_number}: " if args.rounds > 1 else ""
        pyttb_seconds = pyttb_loglik = None
        if not args.no_pyttb:
            pyttb_seconds, pyttb_loglik, version = time_pyttb()
            rows.append((f"{label}pyttb {version}", pyttb_seconds, 1.0, args.pyttb_iters,
                         pyttb_loglik))
        for backend in backends:
            result = run_tensorhost(backend, args.iters)
            seconds = statistics.median(result.iteration_seconds)
            ratio = pyttb_seconds / seconds if pyttb_seconds else float("nan")
            ratios[backend].append(ratio)
            rows.append((f"{label}tensorhost {backend}", seconds, ratio, args.iters,
                         result.log_likelihood))
            if pyttb_loglik is not None and round_number == 1:
                same = run_tensorhost(backend, args.pyttb_iters)
                relative = abs(same.log_likelihood - pyttb_loglik) / abs(pyttb_loglik)
                print(f"{backend}: log-likelihood after {args.pyttb_iters} iterations "
                      f"{same.log_likelihood:.12g}, pyttb {pyttb_loglik:.12g}, "
                      f"relative difference {relative:.2e}", file=sys.stderr)

    print("| code | seconds per outer iteration | x faster than pyttb | iterations "
          "| log-likelihood |")
    print("|---|---:|---:|---:|---:|")
    for name, seconds, ratio, iters, loglik in rows:
        print(f"| {name} | {seconds:.4g} | {ratio:.0f} | {iters} | {loglik:.10g} |")
    if args.rounds > 1 and not args.no_pyttb:
        for backend, values in ratios.items():
            print(f"\n{backend}: x faster than pyttb, median of {len(values)} rounds "
                  f"{statistics.median(values):.0f} (min {min(values):.0f}, "
                  f"max {max(values):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
