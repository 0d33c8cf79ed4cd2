#!/usr/bin/env bash
# Sets up, builds with warnings as errors and runs every test. GPU tests
# report as skipped on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci
ctest --preset ci "$@"
