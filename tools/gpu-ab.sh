#!/bin/bash
# Two builds' GPU kernels timed against each other on one GPU host,
# alternating in one run, so that both meet the same device in the same
# state (hosts of one type differ by several percent; compare within a run):
#   tools/gpu-ab.sh [-n ROUNDS] [--] PROGRAM ARGS...
# "new": the install tree's libtensorhost-gpu (tools/device-tree.sh);
# "base": the one tools/device-bundle.sh kept with KEEP_BASE=1 (the previous
# bundle's), in .carry/base. The new build's plugins load either, so the two
# builds must export the same functions. PROGRAM (e.g. gpu_bench) is taken
# from .carry/bin, then BUILD/bin, then PATH, and runs ROUNDS times (default
# 2) with each library, new first, under "== new, round K" and
# "== base, round K" lines. Exit status: the first failing run's, else 0.
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
. "$(dirname "$0")/device-tree.sh"
base=$PWD/.carry/base
if [ ! -e "$base/libtensorhost-gpu.so.0" ]; then
    [ -f "$base/libtensorhost-gpu.so.0.xz" ] || {
        echo "gpu-ab.sh: no base kernel library in .carry/base (bundle with KEEP_BASE=1)" >&2
        exit 1
    }
    xz -dc "$base/libtensorhost-gpu.so.0.xz" > "$base/libtensorhost-gpu.so.0" || exit 1
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
    echo "== base, round $round"
    env LD_LIBRARY_PATH="$base:$libs" "$prog" "$@"
    r=$?; [ $rc -eq 0 ] && rc=$r
done
exit $rc
