#!/bin/bash
# The comparison feature on a GPU host, with the relocatable install that
# tools/device-bundle.sh prepared (BUILD/install and .carry/ in this checkout):
#   1. tensorhost --config configs/compare-strategies.toml (adaptive, scheme 1,
#      scheme 2 and cpu-reference on the Uber sample, verified, timed);
#   2. bench/reproduce-paper.sh with that tensorhost: the paper's three
#      figures on the real and the FROSTT-shaped synthetic tensors, and the
#      "Strategy comparison" section of BENCHMARKS.md rewritten.
# Everything it writes is packed into $OUT/compare.tar.gz (or
# ./gpu-compare-out/compare.tar.gz), one file to copy back from the GPU host;
# a summary is printed last.
#   tools/gpu-compare.sh
set -u
out=${OUT:-$PWD/gpu-compare-out}
mkdir -p "$out"
build=$(cat .carry/build-dir 2>/dev/null || echo build-device)
tensorhost=$PWD/$build/install/bin/tensorhost
[ -x "$tensorhost" ] || { echo "gpu-compare.sh: no $tensorhost (run tools/device-bundle.sh first)" >&2; exit 1; }

env -u LD_LIBRARY_PATH "$tensorhost" --config configs/compare-strategies.toml \
    --set compare.output.dir="$PWD/out/compare-strategies" > "$out/compare-strategies.log" 2>&1
strategies_rc=$?

env -u LD_LIBRARY_PATH TENSORHOST="$tensorhost" SHARED_DATA="$PWD/.carry/shared-data" \
    bench/reproduce-paper.sh > "$out/paper.log" 2>&1
paper_rc=$?

tar czf "$out/compare.tar.gz" BENCHMARKS.md bench/paper/figures out/compare-strategies out/paper \
    "$out/compare-strategies.log" "$out/paper.log" 2> /dev/null

echo "== compare-strategies rc=$strategies_rc"
sed -n '/^backend/,/^  \*/p' "$out/compare-strategies.log"
echo "== reproduce-paper rc=$paper_rc"
grep -A6 "^| tensors" "$out/paper.log" | head -8
tail -3 "$out/paper.log"
