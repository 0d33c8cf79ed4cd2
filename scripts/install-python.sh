#!/usr/bin/env bash
# Installs the tensorhost Python package from this checkout on Debian 12:
# the build's Debian packages (scripts/install-deps.sh, which brings
# python3-venv), a virtual environment (.venv in the checkout, or $VENV),
# and `pip install ./python` into it, which builds libtensorhost and the
# plugins (the GPU plugins too when nvcc is on PATH) with CMake and installs
# them inside the package. Extra arguments go to pip, e.g. ".[pyttb,tensorly]"
# is `scripts/install-python.sh pyttb tensorly` for the optional converters.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
venv=${VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install ./python "$@"
echo "install-python: done; run Python as $venv/bin/python (or: source $venv/bin/activate)"
