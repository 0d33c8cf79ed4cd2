"""Nonnegative CP's iteration against the unconstrained one, per backend.

For each tensor and backend, two tensorhost.cp_als runs from the same seed
with tol = 0 (every iteration runs): constraints "none" and "nonneg".
Prints each run's fit, the median wall time of its iterations after the
first two, that time over the unconstrained run's, and the smallest factor
entry; then, per GPU backend, how far its nonnegative fit is from
cpu-reference's (the same algorithm from the same start, fp32 MTTKRPs).

    TENSORHOST_LIBRARY=build/install/lib/libtensorhost.so PYTHONPATH=python/src \\
        python3 bench/nonneg_vs_unconstrained.py [--iters 12] [--threads 16] \\
        [--backend cpu-reference --backend gpu-adaptive ...] TENSOR[:RANK] ...

Default tensors: the shipped amino-acid tensor (rank 3) and Uber sample
(rank 16); TENSOR:RANK adds others (tensorhost-synth -p uber -o uber.tns
gives the synthetic uber shape).
"""

import argparse
import statistics
import sys
from pathlib import Path

import tensorhost

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tensors", nargs="*", help="FILE or FILE:RANK (rank 16 by default)")
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--threads", type=int, default=16, help="cpu-reference's threads")
    parser.add_argument("--backend", action="append", default=None)
    args = parser.parse_args()
    backends = args.backend or ["cpu-reference", "gpu-adaptive", "gpu-scheme1", "gpu-scheme2"]
    tensors = [(REPO / "data" / "aminoacid.sptensor.txt", 3),
               (REPO / "data" / "uber-2014-sample.tns.gz", 16)]
    for text in args.tensors:
        path, _, rank = text.partition(":")
        tensors.append((Path(path), int(rank or 16)))
    print("| tensor | rank | backend | constraints | fit | ms per iteration | x unconstrained "
          "| smallest entry |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    for path, rank in tensors:
        fits = {}
        for backend in backends:
            options = {"threads": args.threads} if backend == "cpu-reference" else None
            runs = []
            for constraints in ("none", "nonneg"):
                r = tensorhost.cp_als(str(path), rank=rank, max_iters=args.iters, tol=0, seed=1,
                                      backend=backend, options=options, constraints=constraints)
                fits[backend, constraints] = r.fit
                runs.append((constraints, r.fit, statistics.median(r.iteration_seconds[2:]),
                             min(float(f.min()) for f in r.factors)))
            base = runs[0][2]
            for constraints, fit, seconds, smallest in runs:
                print(f"| {path.name} | {rank} | {backend} | {constraints} | {fit:.9f} "
                      f"| {seconds * 1e3:.3f} | {seconds / base:.2f} | {smallest:+.2e} |")
        reference = fits.get(("cpu-reference", "nonneg"))
        for backend in backends:
            if reference is not None and backend != "cpu-reference":
                print(f"{path.name}: nonnegative fit of {backend} - cpu-reference's: "
                      f"{fits[backend, 'nonneg'] - reference:+.2e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
