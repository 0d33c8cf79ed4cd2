#!/usr/bin/env bash
# Reproduces the paper's three figures on the GPU of the host it runs on and
# writes them into BENCHMARKS.md ("Strategy comparison"):
#   1. total MTTKRP time per tensor per backend      (time-total.png)
#   2. adaptive vs scheme-1-only vs scheme-2-only     (speedups, geometric means,
#                                                      time-per-mode.png)
#   3. memory for the tensor copies and the factors   (memory.png)
# on the real tensors (data/ and the knowledge graphs of ../shared/data/real/kg)
# and on FROSTT-shaped synthetic tensors (bench/paper/synthetic.toml).
#
#   bench/reproduce-paper.sh [--with-kappa] [--no-update]
#
# Environment: TENSORHOST (an installed tensorhost to use instead of building
# one, e.g. a relocatable install copied to a GPU node that has no -dev
# packages), BUILD (build folder, default build-paper), SHARED_DATA (folder
# holding kg/, default ../shared/data/real or shared/data/real of the repo),
# JOBS (build parallelism). Needs cmake, a C compiler, the CUDA toolkit and a
# CUDA GPU; exits non-zero, saying why, when any is missing or when a backend
# disagrees with the baseline.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build-paper}
OUT=$REPO/out/paper
FIGURES=$REPO/bench/paper/figures
WITH_KAPPA=0
UPDATE=1
for arg in "$@"; do
    case $arg in
    --with-kappa) WITH_KAPPA=1 ;;
    --no-update) UPDATE=0 ;;
    -h | --help)
        sed -n '2,17p' "$0"
        exit 0
        ;;
    *)
        echo "reproduce-paper.sh: unknown argument '$arg' (see --help)" >&2
        exit 2
        ;;
    esac
done

die() {
    echo "reproduce-paper.sh: $*" >&2
    exit 1
}

# ---- build -------------------------------------------------------------------
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this needs a CUDA GPU host"
nvidia-smi -L | grep -q GPU || die "no CUDA device listed by nvidia-smi -L"
if [ -n "${TENSORHOST:-}" ]; then
    [ -x "$TENSORHOST" ] || die "TENSORHOST=$TENSORHOST is not an executable"
else
    command -v cmake >/dev/null || die "cmake not found"
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$REPO" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        -DTH_ENABLE_CUDA=ON >"$BUILD.configure.log" 2>&1 ||
        die "cmake configure failed; see $BUILD.configure.log"
    cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target tensorhost cpu-reference gpu-adaptive \
        gpu-scheme1 gpu-scheme2 >"$BUILD.build.log" 2>&1 ||
        die "build failed (is nvcc installed?); see $BUILD.build.log"
    TENSORHOST=$BUILD/bin/tensorhost
fi

# ---- data ----------------------------------------------------------------------
if [ -z "${SHARED_DATA:-}" ]; then
    for candidate in "$REPO/../shared/data/real" "$REPO/shared/data/real"; do
        if [ -d "$candidate/kg" ]; then
            SHARED_DATA=$(cd "$candidate" && pwd)
            break
        fi
    done
fi
SHARED_DATA=${SHARED_DATA:-/nonexistent}

# A copy of a bench config with absolute paths; tensors whose file is
# missing are left out, saying so (a [[compare.tensor]] block is the header
# line and its path line).
localize() {
    local source=$1 target=$2
    awk -v repo="$REPO" -v shared="$SHARED_DATA" -v out="$OUT" '
        function exists(path) { return (getline line < path) > 0 ? (close(path) || 1) : 0 }
        /^\[\[compare\.tensor\]\]/ { pending = $0; next }
        pending != "" && /^path = / {
            path = $0
            sub(/^path = "/, "", path); sub(/".*$/, "", path)
            sub(/^\.\.\/\.\.\/\.\.\/shared\/data\/real/, shared, path)
            sub(/^\.\.\/\.\.\//, repo "/", path)
            if (exists(path)) { print pending; print "path = \"" path "\"" }
            else print "reproduce-paper.sh: warning: " path " not found; left out" > "/dev/stderr"
            pending = ""; next
        }
        pending != "" { print pending; pending = "" }
        /^dir = "\.\.\/\.\.\/out\/paper\// { sub(/"\.\.\/\.\.\/out\/paper/, "\"" out) }
        /^path = "\.\.\/\.\.\// { sub(/"\.\.\/\.\.\//, "\"" repo "/") }
        { print }
    ' "$source" >"$target"
}

mkdir -p "$OUT"
sets=(real synthetic)
[ "$WITH_KAPPA" = 1 ] && sets+=(kappa)
for set in "${sets[@]}"; do
    localize "$REPO/bench/paper/$set.toml" "$OUT/$set.toml"
    echo "== $set ($(grep -c '^\[\[compare.tensor\]\]' "$OUT/$set.toml" || true) tensor tables)"
    "$TENSORHOST" --config "$OUT/$set.toml" || die "the $set comparison failed (see above)"
done

# ---- numbers -------------------------------------------------------------------
# results.csv is RFC 4180 CSV: a field holding a comma (a plugin's scheme
# explanation, a label) is quoted. Split it properly, in POSIX awk (mawk too).
CSV_SPLIT='
function csv_split(line, out,    n, field, c, i, quoted) {
    n = 0; field = ""; quoted = 0
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (quoted) {
            if (c == "\"" && substr(line, i + 1, 1) == "\"") { field = field c; i++ }
            else if (c == "\"") quoted = 0
            else field = field c
        } else if (c == "\"") quoted = 1
        else if (c == ",") { out[++n] = field; field = "" }
        else field = field c
    }
    out[++n] = field
    return n
}'

# Per tensor: the backends' own all-mode median times (results.csv column
# backend_median_s), and the geometric means of scheme1/adaptive and
# scheme2/adaptive over the tensors where all three ran.
speedups() { # results.csv files...
    awk "$CSV_SPLIT"'
        { split("", f); csv_split($0, f) }
        FNR == 1 { for (i in f) col[f[i]] = i; next }
        f[col["mode"]] == "all" && f[col["status"]] == "ok" && f[col["backend_median_s"]] != "" {
            t[f[col["tensor"]] SUBSEP f[col["backend"]]] = f[col["backend_median_s"]] + 0
            if (!(f[col["tensor"]] in seen)) { seen[f[col["tensor"]]] = 1; order[++n] = f[col["tensor"]] }
        }
        END {
            for (k = 1; k <= n; k++) {
                x = order[k]; a = t[x, "adaptive"]; s1 = t[x, "scheme1"]; s2 = t[x, "scheme2"]
                p = t[x, "adaptive-paper"]
                if (a > 0 && s1 > 0 && s2 > 0 && p > 0) {
                    l1 += log(s1 / a); l2 += log(s2 / a); p1 += log(s1 / p); p2 += log(s2 / p); m++
                }
            }
            if (m) printf "%.2f %.2f %.2f %.2f %d\n", exp(l1 / m), exp(l2 / m), exp(p1 / m), exp(p2 / m), m
            else print "- - - - 0"
        }' "$@"
}

tensor_rows() { # results.csv
    awk "$CSV_SPLIT"'
        { split("", f); csv_split($0, f) }
        FNR == 1 { for (i in f) col[f[i]] = i; next }
        f[col["mode"]] == "all" {
            key = f[col["tensor"]]
            if (!(key in seen)) { seen[key] = 1; order[++n] = key; nnz[key] = f[col["nnz"]] }
            ok = f[col["status"]] == "ok" && f[col["backend_median_s"]] != ""
            v = ok ? f[col["backend_median_s"]] * 1e3 : -1
            t[key SUBSEP f[col["backend"]]] = v
            mem[key SUBSEP f[col["backend"]]] = (f[col["tensor_bytes"]] + f[col["factor_bytes"]]) / 1048576
        }
        function ms(v) { return v < 0 || v == "" ? "-" : sprintf("%.3f", v) }
        function ratio(a, b) { return a > 0 && b > 0 ? sprintf("%.2fx", a / b) : "-" }
        END {
            for (k = 1; k <= n; k++) {
                x = order[k]
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f / %.1f / %.1f |\n", x, nnz[x],
                    ms(t[x, "adaptive"]), ms(t[x, "adaptive-paper"]), ms(t[x, "scheme1"]), ms(t[x, "scheme2"]),
                    ms(t[x, "cpu-reference"]), ratio(t[x, "scheme1"], t[x, "adaptive"]),
                    ratio(t[x, "scheme2"], t[x, "adaptive"]),
                    mem[x, "adaptive"], mem[x, "scheme1"], mem[x, "scheme2"]
            }
        }' "$1"
}

read -r real_s1 real_s2 real_p1 real_p2 real_n < <(speedups "$OUT/real/results.csv")
read -r syn_s1 syn_s2 syn_p1 syn_p2 syn_n < <(speedups "$OUT/synthetic/results.csv")
read -r all_s1 all_s2 all_p1 all_p2 all_n < <(speedups "$OUT/real/results.csv" "$OUT/synthetic/results.csv")
device=$(sed -n 's/^  "devices" : "\(.*\)",$/\1/p' "$OUT/synthetic/results.json" | head -1)
date=$(date -u +%Y-%m-%d)
commit=${COMMIT:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}

mkdir -p "$FIGURES"
for set in real synthetic; do
    for chart in time-total time-per-mode memory; do
        cp "$OUT/$set/$chart.png" "$FIGURES/$set-$chart.png"
        cp "$OUT/$set/$chart.svg" "$FIGURES/$set-$chart.svg"
    done
done

section=$OUT/strategy-comparison.md
{
    echo "Measured $date on **$device** (commit $commit) by \`bench/reproduce-paper.sh\`:"
    echo "\`tensorhost --config\` on \`bench/paper/real.toml\` and \`bench/paper/synthetic.toml\`,"
    echo "rank 32, MTTKRP of every mode, median of 20 timed runs after 3 warm-up runs,"
    echo "times from the backends' own CUDA events, every backend verified against"
    echo "\`gpu-scheme1\` (relative error <= 1e-4) before it was timed. Synthetic tensors"
    echo "are generated with the FROSTT tensors' shapes, nonzero counts and per-mode skew"
    echo "(\`libtensorhost/tensor/synth.h\`), not the FROSTT data."
    echo
    echo "Geometric-mean speedup of \`gpu-adaptive\` over the single-scheme backends,"
    echo "with its default rule (\`balanced\`: scheme 1 for I_d >= kappa only when no"
    echo "partition gets hot rows, see \`plugins/README.md\`) and with the paper's literal"
    echo "rule (\`rule = \"paper\"\`: scheme 1 iff I_d >= kappa):"
    echo
    echo "| tensors | balanced vs scheme 1 only | balanced vs scheme 2 only | paper rule vs scheme 1 only | paper rule vs scheme 2 only |"
    echo "|---|---|---|---|---|"
    echo "| paper (FROSTT, RTX 3090) | - | - | 2.2x | 1.3x |"
    echo "| ours: real ($real_n tensors) | ${real_s1}x | ${real_s2}x | ${real_p1}x | ${real_p2}x |"
    echo "| ours: synthetic ($syn_n tensors) | ${syn_s1}x | ${syn_s2}x | ${syn_p1}x | ${syn_p2}x |"
    echo "| ours: all ($all_n tensors) | ${all_s1}x | ${all_s2}x | ${all_p1}x | ${all_p2}x |"
    echo
    for set in real synthetic; do
        echo "**${set^} tensors**: all-mode MTTKRP time in ms (median), speedups of adaptive,"
        echo "memory of adaptive / scheme1 / scheme2 in MiB (tensor copies + factors):"
        echo
        echo "| tensor | nnz | adaptive | adaptive (paper rule) | scheme1 | scheme2 | cpu-reference | adaptive vs scheme1 | adaptive vs scheme2 | memory (MiB) |"
        echo "|---|---|---|---|---|---|---|---|---|---|"
        tensor_rows "$OUT/$set/results.csv"
        echo
        echo "![Total MTTKRP time, $set tensors](bench/paper/figures/$set-time-total.png)"
        echo "![MTTKRP time per mode, $set tensors](bench/paper/figures/$set-time-per-mode.png)"
        echo "![Memory, $set tensors](bench/paper/figures/$set-memory.png)"
        echo
    done
    echo "Full numbers (host and device times, min/max, per mode): \`out/paper/*/results.csv\`"
    echo "and \`results.json\`, regenerated by the script."
} >"$section"
cat "$section"

if [ "$UPDATE" = 1 ]; then
    # Replace what lies between the markers of BENCHMARKS.md.
    benchmarks=$REPO/BENCHMARKS.md
    grep -q '<!-- strategy-comparison:begin -->' "$benchmarks" ||
        die "BENCHMARKS.md lacks the <!-- strategy-comparison:begin --> marker"
    awk -v section="$section" '
        /<!-- strategy-comparison:begin -->/ {
            print; while ((getline line < section) > 0) print line; skipping = 1; next
        }
        /<!-- strategy-comparison:end -->/ { skipping = 0 }
        !skipping { print }
    ' "$benchmarks" >"$benchmarks.tmp"
    mv "$benchmarks.tmp" "$benchmarks"
    echo "Updated $benchmarks and $FIGURES"
fi
