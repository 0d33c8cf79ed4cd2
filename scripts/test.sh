#!/usr/bin/env bash
# Sets up, builds with warnings as errors and runs every test, the Python
# package's with pyttb and TensorLy (scripts/install-test-python.sh). GPU
# tests report as skipped on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci
# The Python tests compare against pyttb and TensorLy: they run, not skip.
TH_PYTHON=$(scripts/install-test-python.sh)
export TH_PYTHON
ctest --preset ci "$@"
