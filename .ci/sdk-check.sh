#!/usr/bin/env bash
# The plugin SDK, end to end, as a plugin author meets it:
#   1. build tensorhost (or reuse the build folder given as $1);
#   2. install it into a temporary prefix;
#   3. build examples/plugin-minimal from a copy outside the tree, against
#      that prefix only (find_package(tensorhost) via CMAKE_PREFIX_PATH), and
#      compile a file with the flags of the installed tensorhost.pc;
#   4. run the installed conformance checker on the example (must PASS);
#   5. run the installed tensorhost on data/aminoacid.sptensor.txt with the
#      example as backend.plugin (must exit 0 and write its report);
#   6. check with nm that every installed plugin and the example export
#      exactly tensorhost_plugin_entry.
# Exits non-zero on the first failing step, saying which.
#
#   .ci/sdk-check.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source_dir=$PWD

fail() {
    echo "sdk-check: FAILED: $*" >&2
    exit 1
}
step() {
    echo "== sdk-check: $* =="
}

build=${1:-}
if [[ -z $build ]]; then
    build=$source_dir/build-sdk-check
    step "configure and build tensorhost in $build"
    cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DTH_WERROR=ON >/dev/null || fail "configuring tensorhost"
else
    step "reusing the build in $build"
fi
cmake --build "$build" || fail "building tensorhost in $build"

work=$(mktemp -d "${TMPDIR:-/tmp}/tensorhost-sdk-check.XXXXXX") || fail "mktemp"
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
header=$prefix/include/tensorhost/plugin.h
[[ -f $header ]] || fail "the install has no $header"
[[ -f $prefix/include/tensorhost/plugin_sdk.h ]] || fail "the install has no plugin_sdk.h"
config=$(find "$prefix" -path '*/cmake/tensorhost/tensorhostConfig.cmake' | head -n 1)
[[ -n $config ]] || fail "the install has no lib*/cmake/tensorhost/tensorhostConfig.cmake"
[[ -f $(dirname "$config")/tensorhostConfigVersion.cmake ]] ||
    fail "the install has no tensorhostConfigVersion.cmake next to $config"
pc=$(find "$prefix" -path '*/pkgconfig/tensorhost.pc' | head -n 1)
[[ -n $pc ]] || fail "the install has no lib*/pkgconfig/tensorhost.pc"
plugin_dir=$(find "$prefix" -type d -path '*/tensorhost/plugins' | head -n 1)
[[ -n $plugin_dir && -f $plugin_dir/cpu-reference.so ]] ||
    fail "the install has no tensorhost/plugins/cpu-reference.so"
echo "header $header"
echo "cmake package $config"
echo "pkg-config $pc"

step "compile against tensorhost.pc"
cflags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags tensorhost) ||
    fail "pkg-config --cflags tensorhost"
printf '#include <tensorhost/plugin.h>\n#include <tensorhost/plugin_sdk.h>\nint abi_major(void);\nint abi_major(void) { return TH_ABI_VERSION_MAJOR; }\n' \
    >"$work/pc-check.c"
# shellcheck disable=SC2086 # cflags is a list of flags
cc -std=c11 -Wall -Wextra -Wpedantic -Werror $cflags -c "$work/pc-check.c" -o "$work/pc-check.o" ||
    fail "compiling with the flags of tensorhost.pc ($cflags)"
echo "cflags: $cflags"

step "build examples/plugin-minimal against the installed SDK only"
# A copy outside the source tree, so nothing can reach back into it.
cp -r "$source_dir/examples/plugin-minimal" "$work/example-src" || fail "copying the example"
cmake -S "$work/example-src" -B "$work/example-build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Werror" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >/dev/null ||
    fail "configuring the example with CMAKE_PREFIX_PATH=$prefix"
cmake --build "$work/example-build" || fail "building the example"
example=$work/example-build/example-minimal.so
[[ -f $example ]] || fail "the example build made no $example"

step "conformance checker on the example"
"$prefix/bin/tensorhost-check-plugin" "$example" >"$work/check.log"
status=$?
grep -E '^(FAIL|SKIP) ' "$work/check.log"
tail -n 1 "$work/check.log"
[[ $status -eq 0 ]] || fail "tensorhost-check-plugin $example exited $status"

step "tensorhost with the example as backend.plugin"
cat >"$work/run.toml" <<TOML
[tensor]
path = "$source_dir/data/aminoacid.sptensor.txt"
[cpd]
rank = 16
max_iters = 50
[backend]
plugin = "cpu-reference"
[output]
dir = "$work/out"
TOML
"$prefix/bin/tensorhost" --config "$work/run.toml" --set "backend.plugin=\"$example\"" \
    --set cpd.rank=3 --set cpd.max_iters=5 ||
    fail "tensorhost --config $work/run.toml --set backend.plugin=\"$example\" exited $?"
[[ -f $work/out/report.json ]] || fail "tensorhost wrote no $work/out/report.json"
grep -q 'example-minimal' "$work/out/report.json" ||
    fail "report.json does not name the backend example-minimal"

step "every plugin exports exactly tensorhost_plugin_entry (nm -D --defined-only)"
bad=0
for so in "$plugin_dir"/*.so "$example"; do
    exports=$(nm -D --defined-only "$so" | awk '{print $NF}' | tr '\n' ' ')
    if [[ $exports == "tensorhost_plugin_entry " ]]; then
        echo "ok   $(basename "$so")"
    else
        echo "BAD  $(basename "$so") exports: ${exports:-nothing}"
        bad=1
    fi
done
[[ $bad -eq 0 ]] || fail "a plugin exports more or less than tensorhost_plugin_entry"

echo "== sdk-check passed =="
