#!/usr/bin/env bash
# Sets up, builds and runs the quickstart: a rank-16 CP decomposition of the
# shipped Uber pickups sample, on the GPU when one is usable, else on the CPU
# reference backend. Outputs land in out/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release
build/bin/tensorhost --config configs/quickstart.toml "$@"
