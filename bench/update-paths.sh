#!/usr/bin/env bash
# The factor update of CP-ALS on each path, rank by rank: cpu-reference's
# als_update (`cpd.update = "mode"`), the host's update (`"host"`) and,
# given --before, the als_update of another build of the plugin, run back to
# back at every rank so that a shared machine's load hits them alike.
#
#   bench/update-paths.sh --tensor FILE [--ranks "16 64 256"] [--iters N]
#                         [--repeat K] [--before PLUGIN.so] [--work DIR]
#
# Each run is `tensorhost --config configs/quickstart.toml` on FILE with
# tolerance 0 (exactly N iterations, default 3), seed 42, no factors written;
# at each rank the paths run in turn, K times over (default 1).
# Prints one markdown row per rank and path: seconds per iteration (the
# median of the N, the least of the K rounds), the factor update's seconds
# per iteration (report.json's timings.update_seconds / N, the least of the
# K rounds: the run least disturbed by whatever else the machine ran), its
# ratio to the host's, and the final fit, which must agree across the paths
# and rounds to 1e-12 (the script fails otherwise).
#
# Environment: TENSORHOST_BIN (folder with tensorhost; default
# build-nocuda/bin, else build/bin). Needs python3 for reading the reports.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
tensor='' ranks='16 64 256 512 1024 2048 4096' iters=3 repeat=1 before='' work=/tmp/th-update-paths
while [ $# -gt 0 ]; do
    case $1 in
    --tensor) tensor=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --iters) iters=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --before) before=$2; shift ;;
    --work) work=$2; shift ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "update-paths.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "update-paths.sh: $*" >&2; exit 1; }
[ -n "$tensor" ] || die "--tensor FILE is required"
[ -r "$tensor" ] || die "cannot read the tensor '$tensor'"
[ -z "$before" ] || [ -r "$before" ] || die "cannot read the plugin '$before'"
tensor=$(cd "$(dirname "$tensor")" && pwd)/$(basename "$tensor")

bin=${TENSORHOST_BIN:-}
for candidate in "$REPO/build-nocuda/bin" "$REPO/build/bin"; do
    [ -n "$bin" ] || { [ -x "$candidate/tensorhost" ] && bin=$candidate; }
done
[ -n "$bin" ] && [ -x "$bin/tensorhost" ] || die "no tensorhost found (set TENSORHOST_BIN)"
mkdir -p "$work"

# run LABEL PLUGIN UPDATE RANK ROUND: one decomposition, its report kept as
# LABEL-RANK-ROUND.
run() {
    local out="$work/$1-$4-$5"
    "$bin/tensorhost" --quiet --config "$REPO/configs/quickstart.toml" \
        --set tensor.path="\"$tensor\"" --set cpd.rank="$4" --set cpd.max_iters="$iters" \
        --set cpd.tolerance=0 --set cpd.seed=42 --set backend.plugin="\"$2\"" \
        --set cpd.update="\"$3\"" --set output.write_factors=false \
        --set output.dir="\"$out\"" >/dev/null || die "the run '$1' at rank $4 failed"
}

echo "| rank | path | s / iteration | update s / iteration | update / host's | final fit |"
echo "|---:|---|---:|---:|---:|---|"
for rank in $ranks; do
    labels=(mode host)
    [ -z "$before" ] || labels=(before "${labels[@]}")
    for round in $(seq "$repeat"); do
        [ -z "$before" ] || run before "$before" mode "$rank" "$round"
        run mode cpu-reference mode "$rank" "$round"
        run host cpu-reference host "$rank" "$round"
    done
    python3 - "$work" "$rank" "$iters" "$repeat" "${labels[@]}" <<'EOF'
import json, statistics, sys
work, rank, iters, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
labels = sys.argv[5:]
names = {"before": "als_update, before", "mode": "als_update", "host": "host"}
reports = {l: [json.load(open(f"{work}/{l}-{rank}-{k}/report.json"))
               for k in range(1, repeat + 1)] for l in labels}
update = {l: min(r["timings"]["update_seconds"] / iters for r in rs)
          for l, rs in reports.items()}
per_iteration = {l: min(statistics.median(i["seconds"] for i in r["cpd"]["iterations"])
                        for r in rs) for l, rs in reports.items()}
fits = [r["cpd"]["final_fit"] for rs in reports.values() for r in rs]
for l in labels:
    print(f"| {rank} | {names[l]} | {per_iteration[l]:.4f} | {update[l]:.4f} | "
          f"{update[l] / update['host']:.2f} | {reports[l][0]['cpd']['final_fit']:.12f} |")
spread = max(fits) - min(fits)
if not spread <= 1e-12:
    sys.exit(f"update-paths.sh: rank {rank}: the fits differ by {spread:.3g}")
EOF
done
