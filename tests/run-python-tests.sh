#!/bin/sh
# The Python package's tests (python/tests) against this build: the first
# interpreter with numpy and pytest among $TH_PYTHON, /usr/bin/python3 and
# python3 runs them; TENSORHOST_LIBRARY and TENSORHOST_PROGRAM (set by ctest)
# point the package at the build's library and program.
set -eu
source_dir=$1
shift
# An interpreter named by TH_PYTHON (scripts/test.sh: one with pyttb and
# TensorLy, so the comparisons against them run) is the one, or an error.
if [ -n "${TH_PYTHON:-}" ] && ! "$TH_PYTHON" -c "import numpy, pytest" >/dev/null 2>&1; then
    echo "run-python-tests: TH_PYTHON=$TH_PYTHON has no numpy and pytest" >&2
    exit 1
fi
for python in ${TH_PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$python" >/dev/null 2>&1 &&
        "$python" -c "import numpy, pytest" >/dev/null 2>&1; then
        PYTHONPATH="$source_dir/python/src${PYTHONPATH:+:$PYTHONPATH}" \
            exec "$python" -m pytest -q -p no:cacheprovider "$source_dir/python/tests" "$@"
    fi
done
echo "run-python-tests: no python3 with numpy and pytest (scripts/install-deps.sh installs" \
     "python3-numpy and python3-pytest)" >&2
exit 1
