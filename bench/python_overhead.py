"""What calling tensorhost from Python costs next to the program.

The same CP-ALS (the Uber sample, rank 16, 50 iterations, tolerance 0, seed
42, cpu-reference with 2 threads) run alternately by the `tensorhost`
program and by `tensorhost.cp_als` in this process. The program's time is
its report's `timings.total_seconds` (config, plugin, read, load, CP-ALS;
not process start-up or the writing of outputs); Python's is the wall time
of the call (read, plugin, load, CP-ALS, copying the result into numpy).
Prints the medians and their ratio as a markdown row.

    TENSORHOST_LIBRARY=build/lib/libtensorhost.so PYTHONPATH=python/src \\
        python3 bench/python_overhead.py build/bin/tensorhost [repeats]
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tensorhost

REPO = Path(__file__).resolve().parents[1]
TENSOR = REPO / "data" / "uber-2014-sample.tns.gz"
RANK, ITERS, SEED = 16, 50, 42


def program_seconds(program: str, folder: Path) -> float:
    config = folder / "run.toml"
    config.write_text(
        f'[tensor]\npath = "{TENSOR}"\n[cpd]\nrank = {RANK}\nmax_iters = {ITERS}\n'
        f'tolerance = 0\nseed = {SEED}\n[backend]\nplugin = "cpu-reference"\n'
        f'[backend.options]\nthreads = 2\n[output]\ndir = "{folder / "out"}"\n'
        'write_factors = false\n')
    subprocess.run([program, "--config", str(config), "-q"], check=True)
    report = json.loads((folder / "out" / "report.json").read_text())
    return report["timings"]["total_seconds"]


def python_seconds() -> float:
    start = time.perf_counter()
    tensorhost.cp_als(TENSOR, rank=RANK, max_iters=ITERS, tol=0, seed=SEED,
                      backend="cpu-reference", options={"threads": 2})
    return time.perf_counter() - start


def main() -> None:
    program = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    python_seconds()  # warm the page cache and the plugin's first load
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeats):
            theirs.append(program_seconds(program, Path(folder)))
            ours.append(python_seconds())
    p, q = statistics.median(theirs), statistics.median(ours)
    print("| program (s) | Python call (s) | Python / program |")
    print("|---:|---:|---:|")
    print(f"| {p:.4f} | {q:.4f} | {q / p:.3f} |")


if __name__ == "__main__":
    main()
