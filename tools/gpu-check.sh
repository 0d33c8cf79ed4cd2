#!/bin/bash
# One device-machine session for the GPU backends: environment, the GPU
# tests, compute-sanitizer (memcheck, racecheck, initcheck on a small run of
# each plugin) and a first timing. Run from the repository root on the GPU
# host, with build-device built and bundled here (tools/device-bundle.sh):
#   tools/gpu-check.sh [all|tests|sanitize|bench]
# Logs go to $OUT (or ./gpu-check-out); a summary is printed last.
set -u
what=${1:-all}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
build=$PWD/build-device
export LD_LIBRARY_PATH=$build/bundle-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The build tree has absolute paths of the machine it was built on.
src_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -n "$src_root" ] && [ "$src_root" != "$PWD" ] && [ ! -e "$src_root" ]; then
    mkdir -p "$(dirname "$src_root")" && ln -s "$PWD" "$src_root"
fi
summary=()
note() { summary+=("$*"); echo "== $*"; }

nvidia-smi -L 2>&1 | tee "$out/device.txt"
for b in "$build"/bin/test_gpu_plugins "$build"/lib/tensorhost/plugins/*.so; do
    if ldd "$b" | grep -q "not found"; then note "MISSING LIBS for $b"; ldd "$b" | grep "not found"; fi
done

if [ "$what" = all ] || [ "$what" = tests ]; then
    t0=$(date +%s%N)
    (cd "$build" && timeout 300 ctest -L gpu --output-on-failure) > "$out/ctest-gpu.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    grep -E "tests passed|tests failed|Passed|Failed|Skipped" "$out/ctest-gpu.log" | tail -6
    note "ctest -L gpu rc=$rc ($(( (t1 - t0) / 1000000 )) ms): $(grep -E 'tests passed' "$out/ctest-gpu.log")"
    timeout 300 "$build/bin/test_gpu_plugins" > "$out/test_gpu_plugins.log" 2>&1
    note "test_gpu_plugins rc=$?: $(grep -cE '^\[       OK' "$out/test_gpu_plugins.log") OK, $(grep -cE '^\[  FAILED' "$out/test_gpu_plugins.log") FAILED lines"
    grep -E "checked|cycles|device 0|FAIL|error" "$out/test_gpu_plugins.log" | head -20
fi

if [ "$what" = all ] || [ "$what" = sanitize ]; then
    for tool in memcheck racecheck initcheck; do
        extra=""
        [ "$tool" = memcheck ] && extra="--leak-check full"
        TH_GPU_TEST_QUICK=1 timeout 240 compute-sanitizer --tool $tool $extra --error-exitcode 99 \
            "$build/bin/test_gpu_plugins" > "$out/sanitizer-$tool.log" 2>&1
        rc=$?
        note "compute-sanitizer $tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool.log" | tr '\n' ' ') $(grep -cE '^\[       OK' "$out/sanitizer-$tool.log") tests OK"
        grep -E "^=========" "$out/sanitizer-$tool.log" | grep -v "SUMMARY" | head -8
    done
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
    timeout 300 "$build/bin/gpu_bench" --reps 20 uber nips chicago > "$out/bench.log" 2>&1
    note "gpu_bench rc=$?"
    cat "$out/bench.log"
fi

if [ "$what" = profile ]; then
    # Nsight Compute on a few MTTKRP launches of the uber shape (scheme 2).
    timeout 400 ncu --kernel-name regex:mttkrp_kernel --launch-skip 8 --launch-count 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section Occupancy --section LaunchStats --section SchedulerStats \
        "$build/bin/gpu_bench" --reps 1 --plugins gpu-scheme2 uber > "$out/ncu.log" 2>&1
    note "ncu rc=$?"
    grep -vE "^==PROF==|^    ---" "$out/ncu.log" | grep -E "Throughput|Duration|Warp Cycles|Stall|Occupancy|Hit Rate|Eligible|Issued|Registers|Block Size|Grid Size|Bandwidth|One or More|No Eligible|mttkrp" | head -70
fi

echo "================ summary"
printf '%s\n' "${summary[@]}"
