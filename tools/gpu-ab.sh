#!/bin/bash
# Builds' GPU kernels timed against each other on one GPU host,
# alternating in one run, so that both meet the same device in the same
# state (hosts of one type differ by several percent; compare within a run):
#   tools/gpu-ab.sh [-n ROUNDS] [--] PROGRAM ARGS...
# "new": the install tree's libtensorhost-gpu (tools/device-tree.sh);
# "base": the one tools/device-bundle.sh kept with KEEP_BASE=1 (the previous
# bundle's), in .carry/base; and NAME for each library kept with
# KEEP_BASE=NAME, in .carry/bases/NAME.so.0.xz. The new build's plugins
# load any of them, so the builds must export the same functions. PROGRAM
# (e.g. gpu_bench) is taken from .carry/bin, then BUILD/bin, then PATH, and
# runs ROUNDS times (default 2) with each library, new first, under
# "== new, round K", "== base, round K" and "== NAME, round K" lines. Exit
# status: the first failing run's, else 0.
set -u
rounds=2
while [ $# -gt 0 ]; do
    case "$1" in
    -n) rounds=${2:-}; shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "gpu-ab.sh: -n wants a positive count, not '$rounds'" >&2; exit 2 ;; esac
[ $# -ge 1 ] || { echo "usage: tools/gpu-ab.sh [-n ROUNDS] [--] PROGRAM ARGS..." >&2; exit 2; }
# shellcheck source=device-tree.sh source-path=SCRIPTDIR
. "$(dirname "$0")/device-tree.sh"
# Each kept library unpacked into a folder of its own, named by its label.
labels=()
dirs=()
keep() { # LABEL DIR PACKED: DIR/libtensorhost-gpu.so.0 from PACKED unless there
    if [ ! -e "$2/libtensorhost-gpu.so.0" ]; then
        mkdir -p "$2" && xz -dc "$3" > "$2/libtensorhost-gpu.so.0" || exit 1
    fi
    labels+=("$1")
    dirs+=("$2")
}
base=$PWD/.carry/base
if [ -f "$base/libtensorhost-gpu.so.0.xz" ] || [ -e "$base/libtensorhost-gpu.so.0" ]; then
    keep base "$base" "$base/libtensorhost-gpu.so.0.xz"
fi
for packed in "$PWD"/.carry/bases/*.so.0.xz; do
    [ -f "$packed" ] || continue
    name=$(basename "$packed" .so.0.xz)
    keep "$name" "$PWD/.carry/bases/$name" "$packed"
done
if [ ${#dirs[@]} -eq 0 ]; then
    echo "gpu-ab.sh: no kept kernel library in .carry/base or .carry/bases (bundle with KEEP_BASE)" >&2
    exit 1
fi
prog=$1
shift
if [ -x ".carry/bin/$prog" ]; then
    prog=$PWD/.carry/bin/$prog
elif [ -x "$build/bin/$prog" ]; then
    prog=$PWD/$build/bin/$prog
fi
libs=$prefix/lib:$PWD/.carry/lib
rc=0
for round in $(seq 1 "$rounds"); do
    echo "== new, round $round"
    env LD_LIBRARY_PATH="$libs" "$prog" "$@"
    r=$?; [ $rc -eq 0 ] && rc=$r
    for i in "${!dirs[@]}"; do
        echo "== ${labels[$i]}, round $round"
        env LD_LIBRARY_PATH="${dirs[$i]}:$libs" "$prog" "$@"
        r=$?; [ $rc -eq 0 ] && rc=$r
    done
done
exit $rc
