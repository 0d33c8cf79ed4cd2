#!/usr/bin/env bash
# A whole decomposition at scale, phase by phase: the paper's largest tensor
# shape (Nell-1, synthetic: 2.9M x 2.1M x 25.5M, 143.6M nonzeros, Zipf skew
# 1.0) or any tensorhost-synth preset, decomposed by one backend, with the
# text and the binary tensor formats compared on the same tensor.
#
#   bench/end-to-end.sh [--preset NAME | --tensor FILE.tns] [--plugin ID] [--rank R]
#                       [--iters N] [--work DIR] [--keep]
#
# Steps, each timed: make the tensor as text (tensorhost-synth; --tensor takes
# an existing .tns instead, not removed), convert it to
# the binary format (tensorhost convert), load both (load_bench: the same
# tensor from text and from binary, one run), then two decompositions with
# `output.format = "npy"` and tolerance 0 (exactly N iterations): from the
# binary file and from the text file. Their fits must agree. The phases of the
# binary run come from its report.json: read, preprocess (upload and build),
# initial factors, iterations, collecting the factors (copy back and
# arrangement), writing the outputs, and the whole process (wall); dd
# writing as many bytes, synced, gives the disk's bound for the outputs.
#
# Environment: TENSORHOST_BIN (folder with tensorhost and tensorhost-synth;
# default: build-device/install/bin, else build/bin), LOAD_BENCH (the
# load_bench program; default .carry/bin/load_bench, else build/bin/load_bench),
# GPU_BENCH (gpu_bench, default .carry/bin/gpu_bench, else build/bin/gpu_bench:
# its --ceilings gives the pinned PCIe bandwidth and the host's copy into
# pinned memory, whose slower one bounds the copies to and from the device,
# the host memory's read and in-place passes, which bound the model's
# arrangement (one pass of each over the factors), and writing into fresh
# memory, which bounds the copy of the factors back into new arrays).
# Needs python3 for reading the reports. Files go to --work (default
# /tmp/th-end-to-end), removed at the end unless --keep.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
preset=nell-1 tensor='' plugin=gpu-adaptive rank=32 iters=20 work=/tmp/th-end-to-end keep=0
while [ $# -gt 0 ]; do
    case $1 in
    --preset) preset=$2; shift ;;
    --tensor) tensor=$2; shift ;;
    --plugin) plugin=$2; shift ;;
    --rank) rank=$2; shift ;;
    --iters) iters=$2; shift ;;
    --work) work=$2; shift ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "end-to-end.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "end-to-end.sh: $*" >&2; exit 1; }

bin=${TENSORHOST_BIN:-}
for candidate in "$REPO/build-device/install/bin" "$REPO/build/bin"; do
    [ -n "$bin" ] || { [ -x "$candidate/tensorhost" ] && bin=$candidate; }
done
[ -n "$bin" ] && [ -x "$bin/tensorhost" ] || die "no tensorhost found (set TENSORHOST_BIN)"
load_bench=${LOAD_BENCH:-}
for candidate in "$REPO/.carry/bin/load_bench" "$REPO/build/bin/load_bench"; do
    [ -n "$load_bench" ] || { [ -x "$candidate" ] && load_bench=$candidate; }
done
gpu_bench=${GPU_BENCH:-}
for candidate in "$REPO/.carry/bin/gpu_bench" "$REPO/build/bin/gpu_bench"; do
    [ -n "$gpu_bench" ] || { [ -x "$candidate" ] && gpu_bench=$candidate; }
done
command -v python3 >/dev/null || die "python3 is needed to read the reports"

mkdir -p "$work"
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
text=$work/$preset.tns
binary=$work/$preset.tnsb
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

label="$preset (synthetic)"
if [ -n "$tensor" ]; then
    [ -f "$tensor" ] || die "no tensor file $tensor"
    text=$tensor
    label=$tensor
    binary=$work/$(basename "$tensor" .tns).tnsb
fi
echo "== $label, $plugin, rank $rank, $iters iterations, $(nproc) host cores"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -n "$gpu_bench" ] && "$gpu_bench" --ceilings

if [ -z "$tensor" ]; then
    t=$(now)
    "$bin/tensorhost-synth" --preset "$preset" --seed 1 --output "$text" >/dev/null
    echo "make text tensor: $(since "$t") s, $(du -h "$text" | cut -f1)"
fi
t=$(now)
"$bin/tensorhost" convert "$text" "$binary" >/dev/null
echo "convert to binary: $(since "$t") s, $(du -h "$binary" | cut -f1)"
if [ -n "$load_bench" ]; then
    echo "== load, text vs binary (page cache warm after the first read)"
    "$load_bench" --runs 2 "$text" "$binary"
fi

run() { # run NAME TENSOR
    local dir=$work/out-$1
    cat >"$work/$1.toml" <<EOF
[tensor]
path = "$2"
[cpd]
rank = $rank
max_iters = $iters
tolerance = 0
seed = 1
[backend]
plugin = "$plugin"
[output]
dir = "$dir"
format = "npy"
EOF
    local t0
    t0=$(now)
    "$bin/tensorhost" --config "$work/$1.toml" >"$work/$1.log" 2>&1 || { cat "$work/$1.log"; die "the $1 run failed"; }
    echo "$(since "$t0")" >"$work/$1.wall"
}
run binary "$binary"
# The disk's bound for writing the outputs: as many bytes written by dd and
# synced, to the same folder.
out_bytes=$(du -sb "$work/out-binary" | cut -f1)
t=$(now)
dd if=/dev/zero of="$work/dd.bin" bs=64M count=$(( (out_bytes + 67108863) / 67108864 )) conv=fsync status=none
echo "disk bound: dd of $(( out_bytes / 1000000 )) MB with fsync: $(since "$t") s"
rm -f "$work/dd.bin"
run text "$text"
grep -m1 -oE "uploaded in [0-9.]+ ms, built in [0-9.]+ ms" "$work/binary.log" || true

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
def report(name):
    with open(f"{work}/out-{name}/report.json") as f:
        r = json.load(f)
    with open(f"{work}/{name}.wall") as f:
        r["wall"] = float(f.read())
    return r
b, t = report("binary"), report("text")
def get(r, *path, default=None):
    for key in path:
        if not isinstance(r, dict) or key not in r:
            return default
        r = r[key]
    return r
iters = get(b, "cpd", "iterations", default=[])
iteration_seconds = sum(it["seconds"] for it in iters)
print("\n| phase | seconds |\n|---|---|")
rows = [
    ("read the tensor (binary)", get(b, "timings", "read_seconds")),
    ("preprocess: upload + build the copies", get(b, "timings", "preprocess_seconds")),
    ("initial factors", get(b, "timings", "init_seconds")),
    (f"{len(iters)} iterations", iteration_seconds),
    ("  of which the first (on a GPU it loads the kernels)", iters[0]["seconds"] if iters else None),
    ("  a later one (median)",
     sorted(it["seconds"] for it in iters[1:])[(len(iters) - 1) // 2] if len(iters) > 1 else None),
    ("copy the factors back", get(b, "timings", "fetch_seconds")),
    ("  of which waiting for the result memory", get(b, "timings", "result_memory_seconds")),
    ("arrange the model (norms, signs, order)", get(b, "timings", "arrange_seconds")),
    ("write the outputs (npy)", get(b, "timings", "write_seconds")),
    ("whole process (wall)", b["wall"]),
]
for name, value in rows:
    print(f"| {name} | {'-' if value is None else f'{value:.3f}'} |")
print(f"\nread from text: {get(t, 'timings', 'read_seconds'):.3f} s; whole text run {t['wall']:.2f} s")
fb, ft = get(b, "cpd", "final_fit"), get(t, "cpd", "final_fit")
print(f"fit from binary {fb:.10f}, from text {ft:.10f}, difference {abs(fb - ft):.2e}")
if abs(fb - ft) > 1e-6:  # fp32 backends with atomics differ run to run in the last digits
    sys.exit("end-to-end.sh: the fits from the two files differ")
EOF
