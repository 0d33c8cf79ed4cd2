#!/bin/bash
# cpu-reference as one process and as several under mpirun (README,
# "Several processes"), on the same synthetic tensor and initial factors:
# every PROCESSESxTHREADS combination given, e.g. 1x16 2x8 4x4, and each
# run's fit, median iteration (iterations 3 on) and rank 0's time in
# collectives. Open MPI's mpirun on PATH; processes are bound to no core
# (`--bind-to none`), each using its threads.
#   bench/mpi-cpu.sh TENSORHOST PRESET RANK ITERATIONS PxT...
# e.g. bench/mpi-cpu.sh build/bin/tensorhost nips 32 12 1x2 2x1
# UPDATE=host sets cpd.update (one process's path is otherwise its best:
# cpu-reference's als_update). Writes into $OUT (default ./mpi-cpu-out).
set -eu
tensorhost=$(readlink -f "$1")
preset=$2 rank=$3 iters=$4
shift 4
out=${OUT:-$PWD/mpi-cpu-out}
mkdir -p "$out"
synth=$(dirname "$tensorhost")/tensorhost-synth
tensor=$out/$preset.tnsb
[ -f "$tensor" ] || "$synth" --preset "$preset" --seed 1 --output "$tensor" > "$out/synth.log"
update_line=""
[ -n "${UPDATE:-}" ] && update_line="update = \"$UPDATE\""
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for combo in "$@"; do
    p=${combo%x*} t=${combo#*x}
    dir=$out/$preset-${p}x$t
    cat > "$out/run.toml" <<TOML
[tensor]
path = "$tensor"
[cpd]
rank = $rank
max_iters = $iters
tolerance = 0
seed = 42
$update_line
[backend]
plugin = "cpu-reference"
[backend.options]
threads = $t
[output]
dir = "$dir"
write_factors = false
TOML
    if [ "$p" -eq 1 ]; then
        launch=("$tensorhost")
    else
        launch=(mpirun --bind-to none -np "$p" "$tensorhost")
    fi
    "${launch[@]}" --config "$out/run.toml" > "$dir.log" 2>&1 || { echo "$combo: failed"; tail -3 "$dir.log"; continue; }
    python3 - "$combo" "$dir/report.json" <<'PY'
import json, statistics, sys
combo, path = sys.argv[1:3]
r = json.load(open(path))
its = [i["seconds"] for i in r["cpd"]["iterations"][2:]] or [0.0]
procs = r.get("processes")
coll = procs["ranks"][0]["collective_seconds"] / len(r["cpd"]["iterations"]) if procs else 0.0
print(f"{combo:>6} {r['cpd']['update_path']:<5} fit {r['cpd']['final_fit']:.12f}  iteration {1e3 * statistics.median(its):9.2f} ms"
      f"  rank 0 in collectives {1e3 * coll:8.2f} ms an iteration")
PY
done
