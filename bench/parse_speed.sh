#!/usr/bin/env bash
# Tensor loading speed: generates a synthetic nell-2-shaped FROSTT .tns of
# >= 1 GB with tensorhost-synth (or reuses one), then times
# `tensorhost-synth --read` (parse, sort check, duplicate merge: all of the
# loading that tensorhost does) on one core and on all cores, page cache warm.
#
#   bench/parse_speed.sh [BUILD_DIR]
#
# Environment: WORK_DIR (where the file goes; default a new temp dir, removed
# at the end unless KEEP=1), NNZ (default 45000000, about 1.1 GB of text),
# RUNS (default 3; the median is reported), WITH_GZIP=1 to also time a .tns.gz,
# WITH_SHUFFLED=1 to also time the same lines in random order (the sort's cost;
# generated files, like most FROSTT files, are sorted already).
set -euo pipefail

build_dir=${1:-build}
synth=${build_dir}/bin/tensorhost-synth
[ -x "$synth" ] || { echo "parse_speed.sh: $synth not found (build tensorhost-synth first)" >&2; exit 2; }
nnz=${NNZ:-45000000}
runs=${RUNS:-3}
keep=${KEEP:-0}
if [ -n "${WORK_DIR:-}" ]; then
    work=$WORK_DIR
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/th-parse-XXXXXX")
fi
file=$work/nell2-like-$nnz.tns
cleanup() {
    if [ "$keep" != 1 ]; then
        rm -f "$file" "$file.gz" "$file.shuffled"
        [ -n "${WORK_DIR:-}" ] || rmdir "$work" 2>/dev/null || true
    fi
}
trap cleanup EXIT

need_mb=$(( nnz * 26 / 1000000 * 2 ))
avail_mb=$(df -Pm "$work" | awk 'NR==2 {print $4}')
if [ ! -s "$file" ] && [ "$avail_mb" -lt "$need_mb" ]; then
    echo "parse_speed.sh: $work has ${avail_mb} MB free, needs about ${need_mb} MB" >&2
    exit 2
fi

if [ ! -s "$file" ]; then
    echo "generating $file ($nnz nonzeros, nell-2 shape and skew) ..." >&2
    "$synth" --preset nell-2 --nnz "$nnz" --seed 1 --output "$file"
fi
bytes=$(stat -c %s "$file")
cat "$file" > /dev/null # warm the page cache: the figure is the parser's, not the disk's

# Median seconds of $runs loads; prints "seconds nnz".
time_load() {
    local path=$1; shift
    local times=() nnz_read=
    for _ in $(seq "$runs"); do
        out=$("$@" "$synth" --read "$path")
        times+=("$(awk '/^seconds:/ {print $2}' <<<"$out")")
        nnz_read=$(awk '/^nnz:/ {print $2}' <<<"$out")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk -v n="$runs" -v z="$nnz_read" \
        'NR == int((n + 1) / 2) {print $1, z}'
}

cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
cores=$(nproc)
echo "machine: $cpu, $cores cores; file: $bytes bytes"
read -r s1 nnz_read < <(time_load "$file" taskset -c 0)
read -r sn _ < <(time_load "$file" env)
awk -v b="$bytes" -v s1="$s1" -v sn="$sn" -v z="$nnz_read" -v c="$cores" 'BEGIN {
    printf "plain .tns, nnz %d: 1 core %.2f s (%.0f MB/s); %d cores %.2f s (%.0f MB/s)\n",
           z, s1, b / 1e6 / s1, c, sn, b / 1e6 / sn }'

if [ "${WITH_GZIP:-0}" = 1 ]; then
    gzip -1 -c "$file" > "$file.gz"
    gz_bytes=$(stat -c %s "$file.gz")
    read -r sg _ < <(time_load "$file.gz" env)
    awk -v b="$bytes" -v g="$gz_bytes" -v s="$sg" 'BEGIN {
        printf ".tns.gz (%d bytes compressed): %.2f s (%.0f MB/s of text)\n", g, s, b / 1e6 / s }'
fi

if [ "${WITH_SHUFFLED:-0}" = 1 ]; then
    grep -v '^#' "$file" | shuf --random-source=<(yes) > "$file.shuffled"
    read -r ss _ < <(time_load "$file.shuffled" env)
    read -r ss1 _ < <(time_load "$file.shuffled" taskset -c 0)
    awk -v b="$bytes" -v s="$ss" -v s1="$ss1" -v c="$cores" 'BEGIN {
        printf "shuffled .tns (needs the sort): 1 core %.2f s (%.0f MB/s); %d cores %.2f s (%.0f MB/s)\n",
               s1, b / 1e6 / s1, c, s, b / 1e6 / s }'
fi
