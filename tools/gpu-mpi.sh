#!/bin/bash
# Runs of several processes on a GPU host (README, "Several processes"):
# on the same synthetic tensors and initial factors, gpu-adaptive
#   - in one process on one GPU (its sweep, and the host path),
#   - in one process over every GPU (the devices group), on the NCCL the
#     install bundles and on the host's,
#   - as one process per GPU under mpirun (each given its own GPU by
#     tensorhost, README "Several processes"), 2 to G processes, the
#     MTTKRPs summed by the GPUs (NCCL) and on the host (MPI), and each
#     mode's nonzeros dealt by the host so that the GPUs run the devices'
#     sweep over their owned rows (TH_HOST_OWNED_ROWS=1),
# and prints each run's fit, median iteration and, for several processes,
# rank 0's time in collectives. Run from the repository root of a host
# that holds the install tree and .carry/ of tools/device-bundle.sh, with
# Open MPI's mpirun on PATH.
#   tools/gpu-mpi.sh [PRESET...]     (tensorhost-synth presets; default: uber nell-2)
# Logs and reports go to $OUT (or ./gpu-mpi-out).
set -u
out=${OUT:-$PWD/gpu-mpi-out}
mkdir -p "$out"
# shellcheck source=device-tree.sh source-path=SCRIPTDIR
. "$(dirname "$0")/device-tree.sh"
tensorhost=$prefix/bin/tensorhost
gpus=$(nvidia-smi -L | grep -c '^GPU')
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(uber nell-2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --version 2>&1 | head -1 | tee "$out/mpi.txt"
for shim in "$prefix"/lib/tensorhost/mpi/*.so; do
    echo "$(basename "$shim"): $(ldd "$shim" | awk '/libmpi/ {print $1, $3}')" | tee -a "$out/mpi.txt"
done

rows=()
summarise() { # label, report.json
    python3 - "$1" "$2" <<'PY'
import json, statistics, sys
label, path = sys.argv[1:3]
r = json.load(open(path))
its = [i["seconds"] for i in r["cpd"]["iterations"][2:]] or [0.0]
procs = r.get("processes")
coll = procs["ranks"][0]["collective_seconds"] if procs else 0.0
nccl = [p.strip() for p in r["backend"].get("details", "").split(";") if "NCCL" in p or "exchange" in p]
print(f"{label:<34} fit {r['cpd']['final_fit']:.9f}  iteration {1e3 * statistics.median(its):8.3f} ms  "
      f"update {r['cpd']['update_path']:<5}  rank 0 in collectives {coll:6.3f} s"
      + (f"  exchange {procs['exchange']}" if procs else "")
      + (f"  GPUs per rank {[p['gpus'] for p in procs['ranks']]}" if procs else "")
      + (f"  [{'; '.join(nccl)}]" if nccl else ""))
PY
}
for preset in "${presets[@]}"; do
    tensor=$out/$preset.tnsb
    "$prefix/bin/tensorhost-synth" --preset "$preset" --seed 1 --output "$tensor" > "$out/synth-$preset.log" 2>&1 ||
        { echo "tensorhost-synth --preset $preset failed"; cat "$out/synth-$preset.log"; continue; }
    cat > "$out/$preset.toml" <<TOML
[tensor]
path = "$tensor"
[cpd]
rank = 32
max_iters = 20
tolerance = 0
seed = 42
[backend]
plugin = "gpu-adaptive"
[output]
dir = "$out/runs/$preset"
TOML
    run() { # label, output dir, launcher and args...
        local label=$1 dir=$2
        shift 2
        if "$@" --config "$out/$preset.toml" --set output.dir="$dir" > "$dir.log" 2>&1; then
            rows+=("$(summarise "$preset: $label" "$dir/report.json")")
        else
            rows+=("$preset: $label: FAILED (exit $?): $(grep -m1 'error' "$dir.log")")
        fi
    }
    mkdir -p "$out/runs"
    devices=$(seq -s, 0 $((gpus - 1)))
    run "1 GPU, sweep" "$out/runs/$preset-1gpu" "$tensorhost" --set backend.options.devices=0
    run "1 GPU, host path" "$out/runs/$preset-1gpu-host" "$tensorhost" \
        --set backend.options.devices=0 --set cpd.update=host
    if [ "$gpus" -gt 1 ]; then
        run "$gpus GPUs, one process" "$out/runs/$preset-group" "$tensorhost" \
            --set "backend.options.devices=\"$devices\""
        # The same on the host's NCCL instead of the one the install bundles.
        run "$gpus GPUs, one process, host NCCL" "$out/runs/$preset-group-host-nccl" \
            env TH_NCCL_LIBRARY=libnccl.so.2 "$tensorhost" --set "backend.options.devices=\"$devices\""
    fi
    for np in $(seq 2 "$gpus"); do
        run "$np processes (mpirun)" "$out/runs/$preset-np$np" mpirun -np "$np" "$tensorhost"
        run "$np processes, owned rows" "$out/runs/$preset-np$np-owned" \
            mpirun -np "$np" -x TH_HOST_OWNED_ROWS=1 "$tensorhost"
        # The same with the MTTKRPs summed on the host (MPI) instead of by
        # the GPUs (NCCL).
        run "$np processes, host sums" "$out/runs/$preset-np$np-host" \
            mpirun -np "$np" -x TH_GPU_PROCESS_SUMS=0 "$tensorhost"
    done
done
echo
printf '%s\n' "${rows[@]}" | tee "$out/summary.txt"
