#!/bin/bash
# The GPU backends' checks and benchmarks, run from the repository root of a
# GPU host that holds the install tree and .carry/ of tools/device-bundle.sh
# (built elsewhere and copied over, or built on this host):
#   tools/gpu-check.sh [all|install|tests|sanitize|bench|bench-nographs|bench-big|bench-full|bench-multi|profile]...
#   all = install tests sanitize bench
# install: the relocatable tree runs with no LD_LIBRARY_PATH, and plugin =
#   "auto" picks gpu-adaptive; tensorhost-check-plugin on each GPU plugin.
# tests: the GPU test programs (test_gpu_load, test_gpu_comm, test_gpu_plugins, test_gpu_sweep,
#   test_gpu_cp_als, test_gpu_multi, test_gpu_generalized, test_gpu_row_solve, test_gpu_nonneg_update, test_gpu_sweep_regularised).
# sanitize: compute-sanitizer memcheck (leak check) and racecheck on the
#   quick subsets of test_gpu_plugins, test_gpu_sweep, test_gpu_multi, test_gpu_generalized, test_gpu_row_solve, test_gpu_nonneg_update and test_gpu_sweep_regularised (small runs), each
#   test a process of its own, SANITIZE_JOBS (default: one a processor) at once; SANITIZE_PROGS names
#   others (test_gpu_comm too), or the same in another order. The tests in
#   SANITIZE_ALONE (default: test_repeated_use_leaks_nothing, which compares
#   the device's free memory before and after, and so counts every other
#   process's allocations) run afterwards, one at a time.
# bench: gpu_bench on the real tensors and uber, chicago, nips (synthetic);
# bench-full: the same plus vast, enron, nell-2 (the BENCHMARKS.md table).
# Logs go to $OUT (or ./gpu-check-out); a summary is printed last.
# GPU_CHECK_BUDGET (seconds, default 580): the bench steps stop in time for
# the whole script to end inside it, for hosts or job queues that limit a
# command's run time; raise it where none does.
set -u
t_start=$(date +%s)
budget=${GPU_CHECK_BUDGET:-580}
left() { local l=$(( budget - ($(date +%s) - t_start) - 5 )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 10 ] && l=10; echo "$l"; }
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
# shellcheck source=device-tree.sh source-path=SCRIPTDIR
. "$(dirname "$0")/device-tree.sh"
bin=$PWD/.carry/bin
# The test programs were built with absolute paths of the build machine's
# checkout: make that path lead here, and its plugin folder to the install's.
src_root=$(cat .carry/source-root 2>/dev/null || true)
if [ -n "$src_root" ] && [ "$src_root" != "$PWD" ] && [ ! -e "$src_root" ]; then
    mkdir -p "$(dirname "$src_root")" && ln -s "$PWD" "$src_root"
fi
mkdir -p "$build/lib/tensorhost"
[ -e "$build/lib/tensorhost/plugins" ] || ln -s "$prefix/lib/tensorhost/plugins" "$build/lib/tensorhost/plugins"
test_env=(env LD_LIBRARY_PATH="$prefix/lib:$PWD/.carry/lib" TH_SHARED_DATA_DIR="$PWD/.carry/shared-data")
summary=()
note() { summary+=("$*"); echo "== $*"; }
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
want() {
    for s in "${steps[@]}"; do
        [ "$s" = "$1" ] && return 0
        [ "$s" = all ] && case "$1" in install|tests|sanitize|bench) return 0 ;; esac
    done
    return 1
}

nvidia-smi -L 2>&1 | tee "$out/device.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$out/device.txt" 2>&1

if want install; then
    missing=$(env -u LD_LIBRARY_PATH ldd "$prefix"/bin/* "$prefix"/lib/tensorhost/plugins/*.so | grep -c "not found")
    note "install tree: $missing unresolved libraries without LD_LIBRARY_PATH"
    env -u LD_LIBRARY_PATH "$prefix/bin/tensorhost" --config configs/quickstart.toml \
        --set output.dir="$out/quickstart" > "$out/quickstart.log" 2>&1
    rc=$?
    note "installed tensorhost quickstart rc=$rc: $(grep -m1 '^Backend' "$out/quickstart.log") (plugin=auto); $(grep -E 'fit =' "$out/quickstart.log" | tail -1)"
    grep -E "^backend|^Backend|^  device|schemes|mode [0-9] ->" "$out/quickstart.log" | head -12
    for p in gpu-adaptive gpu-scheme1 gpu-scheme2; do
        env -u LD_LIBRARY_PATH "$prefix/bin/tensorhost-check-plugin" "$prefix/lib/tensorhost/plugins/$p.so" > "$out/check-$p.log" 2>&1
        note "tensorhost-check-plugin $p rc=$?: $(tail -1 "$out/check-$p.log")"
    done
fi

if want tests; then
    for t in test_gpu_load test_gpu_comm test_gpu_plugins test_gpu_sweep test_gpu_cp_als test_gpu_multi test_gpu_generalized test_gpu_row_solve test_gpu_nonneg_update test_gpu_sweep_regularised; do
        t0=$(date +%s%N)
        timeout 300 "${test_env[@]}" "$bin/$t" > "$out/$t.log" 2>&1
        rc=$?
        t1=$(date +%s%N)
        note "$t rc=$rc ($(( (t1 - t0) / 1000000 )) ms): $(grep -cE '^\[       OK' "$out/$t.log") OK, $(grep -cE '^\[  FAILED' "$out/$t.log") FAILED, $(grep -cE '^\[  SKIPPED' "$out/$t.log") SKIPPED"
        grep -E "checked|cycles|fit cpu-reference|FAIL|SKIPPED|error|Error|NCCL|ranks on|one rank" "$out/$t.log" | head -20
    done
fi

if want sanitize; then
    # Each test of a program runs as its own process (TH_GPU_TEST_FILTER),
    # memcheck and racecheck side by side, SANITIZE_JOBS at a time (default:
    # one a processor): a program's tests one after another under a
    # sanitizer outlast a command's time limit. Each process gets what is
    # left of the budget when it starts (at most 400 s).
    jobs_max=${SANITIZE_JOBS:-$(nproc)}
    progs=${SANITIZE_PROGS:-test_gpu_plugins test_gpu_sweep test_gpu_multi test_gpu_generalized test_gpu_row_solve test_gpu_nonneg_update test_gpu_sweep_regularised}
    alone=" ${SANITIZE_ALONE-test_repeated_use_leaks_nothing} "
    # One test under one tool, in the background; its log ends with its rc.
    sanitize_one() {
        local prog=$1 tool=$2 test=$3 extra=""
        [ "$tool" = memcheck ] && extra="--leak-check full"
        # NCCL's own initialisation makes CUDA calls that fail inside it
        # (kernels/comm.cuh): not ours to report.
        case "$prog" in test_gpu_multi|test_gpu_comm|test_gpu_sweep) [ "$tool" = memcheck ] && extra="$extra --report-api-errors no" ;; esac
        local log="$out/sanitizer-$tool-$prog-$test.log" limit
        limit=$(left 400)
        ( t0=$(date +%s)
          TH_GPU_TEST_QUICK=1 TH_GPU_TEST_FILTER="$test" timeout "$limit" "${test_env[@]}" \
              compute-sanitizer --tool $tool $extra --error-exitcode 99 "$bin/$prog" > "$log" 2>&1
          echo "rc=$? seconds=$(( $(date +%s) - t0 ))" >> "$log" ) &
    }
    tests_of() {
        local src=tests/gpu/$1.c
        [ -f "$src" ] || src=tests/gpu/$1.cu
        grep -o 'cmocka_unit_test(test_[a-z0-9_]*' "$src" | sed 's/.*(//'
    }
    for prog in $progs; do
        for tool in memcheck racecheck; do
            for test in $(tests_of "$prog"); do
                case "$alone" in *" $test "*) continue ;; esac
                while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 1; done
                sanitize_one "$prog" "$tool" "$test"
            done
        done
    done
    wait
    for prog in $progs; do
        for tool in memcheck racecheck; do
            for test in $(tests_of "$prog"); do
                case "$alone" in *" $test "*) sanitize_one "$prog" "$tool" "$test"; wait ;; esac
            done
        done
    done
    for prog in $progs; do
        for tool in memcheck racecheck; do
            logs=("$out"/sanitizer-"$tool"-"$prog"-*.log)
            ok=$(cat "${logs[@]}" | grep -cE '^\[       OK')
            tests=${#logs[@]}
            bad=$(grep -L '^rc=0 ' "${logs[@]}" | xargs -r -n1 basename | tr '\n' ' ')
            slowest=$(grep -h '^rc=' "${logs[@]}" | sed 's/.*seconds=//' | sort -n | tail -1)
            note "compute-sanitizer $tool $prog: $ok of $tests tests OK in separate processes (slowest ${slowest} s); not rc 0: ${bad:-none}; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "${logs[@]}" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
            grep -hE "^=========" "${logs[@]}" | grep -v "SUMMARY" | head -8
        done
    done
fi

real=(data/uber-2014-sample.tns.gz data/aminoacid.sptensor.txt .carry/shared-data/kg/*.tns)
if want bench; then
    timeout "$(left 300)" "${test_env[@]}" "$bin/gpu_bench" --reps 20 --out "$out/bench.md" \
        "${real[@]}" uber chicago nips > "$out/bench.log" 2> "$out/bench.err"
    note "gpu_bench rc=$? ($(( $(date +%s) - t_start )) s into the check)"
    cat "$out/bench.md"
fi
# bench-nographs: the small tensors and uber/chicago/nips with TH_GPU_NO_GRAPHS=1
# (plain stream launches instead of a CUDA graph per mode), for comparison.
if want bench-nographs; then
    timeout "$(left 200)" "${test_env[@]}" TH_GPU_NO_GRAPHS=1 "$bin/gpu_bench" --reps 20 \
        --plugins gpu-adaptive,gpu-scheme2 --out "$out/bench-nographs.md" \
        "${real[@]}" uber chicago nips > "$out/bench-nographs.log" 2> "$out/bench-nographs.err"
    note "gpu_bench without graphs rc=$? ($(( $(date +%s) - t_start )) s into the check)"
    grep -E "CP-ALS|adaptive .* vs" "$out/bench-nographs.md"
fi
# bench-big: vast, enron, nell-2 alone (after `bench`, the two make bench-full's table).
if want bench-big; then
    timeout "$(left 440)" "${test_env[@]}" "$bin/gpu_bench" --reps 20 --out "$out/bench-big.md" \
        vast enron nell-2 > "$out/bench-big.log" 2> "$out/bench-big.err"
    note "gpu_bench (vast, enron, nell-2) rc=$? ($(( $(date +%s) - t_start )) s into the check)"
    cat "$out/bench-big.md"
fi
if want bench-full; then
    timeout "$(left 440)" "${test_env[@]}" "$bin/gpu_bench" --reps 20 --out "$out/bench-full.md" \
        "${real[@]}" uber chicago nips vast enron nell-2 > "$out/bench-full.log" 2> "$out/bench-full.err"
    note "gpu_bench (full) rc=$? ($(( $(date +%s) - t_start )) s into the check)"
    cat "$out/bench-full.md"
fi

# bench-multi: bench/multi-gpu.toml (one device against two and four), its
# device lists cut to the GPUs this host has; then gpu_bench on enron and
# nell-2 (synthetic) for each list (BENCHMARKS.md "Several GPUs").
if want bench-multi; then
    ngpu=$(nvidia-smi -L | grep -c '^GPU')
    dev_lists="0"
    [ "$ngpu" -ge 2 ] && dev_lists="$dev_lists 0,1"
    [ "$ngpu" -ge 4 ] && dev_lists="$dev_lists 0,1,2,3"
    lists=$(printf '"%s", ' $dev_lists)
    lists=${lists%, }
    sed "s/^sweep = { devices = .*/sweep = { devices = [$lists] }/" bench/multi-gpu.toml > "$out/multi-gpu.toml"
    timeout "$(left 500)" "${test_env[@]}" "$prefix/bin/tensorhost" --config "$out/multi-gpu.toml" \
        --set compare.output.dir="$out/multi-gpu" ${MULTI_SETS:-} > "$out/bench-multi.log" 2>&1
    note "multi-device comparison rc=$? ($(( $(date +%s) - t_start )) s into the check)"
    tail -n 40 "$out/bench-multi.log"
    # BENCHMARKS.md's table: gpu_bench's medians of 9 sweeps per device list.
    for list in $dev_lists; do
        dev=(); [ "$list" != 0 ] && dev=(--devices "$list")
        name="$out/bench-devices-${list//,/-}" # no commas: some copy tools refuse them
        timeout "$(left 150)" "${test_env[@]}" "$bin/gpu_bench" --plugins gpu-adaptive --reps 9 "${dev[@]}" \
            --out "$name.md" enron nell-2 > /dev/null 2> "$name.err"
        note "gpu_bench devices $list rc=$?"
        grep -o "^  gpu-adaptive .*ALS *[0-9.]* ms ([a-z_]*, device [0-9.]*" "$name.err"
    done
fi

if want profile; then
    timeout 300 "${test_env[@]}" ncu --clock-control none --kernel-name regex:mttkrp \
        --launch-skip 8 --launch-count 2 --section SpeedOfLight --section WarpStateStats \
        --section Occupancy --section LaunchStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis \
        "$bin/gpu_bench" --reps 1 --plugins gpu-scheme2 uber > "$out/ncu.log" 2>&1
    note "ncu rc=$?"
    grep -E "Throughput|Duration|Warp Cycles|Occupancy|Hit Rate|Eligible|Issued|Registers|Block Size" "$out/ncu.log" | head -40
fi

echo "================ summary"
printf '%s\n' "${summary[@]}"
