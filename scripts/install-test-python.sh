#!/usr/bin/env bash
# The Python the tests run with: a virtual environment (build-ci/test-venv,
# or $1) holding numpy, pytest and the two libraries tensorhost's results
# are compared against, pyttb and TensorLy, at the versions the comparisons
# were written for, from PyPI. Prints the interpreter's path. Does nothing
# but print it when they are all there.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build-ci/test-venv}
requirements=("numpy>=1.24,<3" "pytest>=7" "pyttb==1.8.6" "tensorly==0.10.0")
if ! "$venv/bin/python" -c "import numpy, pytest, pyttb, tensorly" >/dev/null 2>&1; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "${requirements[@]}" >&2
fi
echo "$PWD/$venv/bin/python"
