#!/bin/sh
# Architecture rules the compiler cannot see, checked on the sources:
#   1. one door to a plugin instance: only the backend module
#      (libtensorhost/plugin/backend.c) calls a plugin's instance functions;
#      the commands, the comparison, the checker and the benchmarks go
#      through it (tests of plugins as plugins may call them directly);
#   2. the library's wings in their order, each including only its own
#      headers and those of the wings below it:
#        base < tensor < dist < config < plugin < cpd < output < compare < api
#      (libtensorhost/README.md says what each owns); the library includes
#      nothing of the programs' commands (programs/cmds);
#   3. no include cycle between modules (a module is X.c with X.h; a
#      private X_internal.h belongs to module X), in the library, in the
#      commands, in the GPU plugins' shared code (plugins/gpu-common) and in
#      the kernel library (kernels/);
#   4. the layers below the library stay below it: the kernels include no
#      plugin or library header, the plugins no library header.
# Usage: tools/check-structure.sh [SOURCE_DIR]; exit 0 when all hold.
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
status=0
wings="base tensor dist config plugin cpd output compare api"

calls='(create|destroy|load_tensor|set_factor|get_factor|mttkrp|get_mttkrp_result|als_update|get_runtime_info|get_mode_info|als_sweep)'
found=$(grep -rnE "entry(\.|->)${calls}[[:space:]]*\(" libtensorhost programs bench --include='*.c' |
    grep -v '^libtensorhost/plugin/backend\.c:' || true)
if [ -n "$found" ]; then
    echo "check-structure: instance functions called outside libtensorhost/plugin/backend.c:"
    echo "$found"
    status=1
fi

rank_of() { # the wing's place in the order, or nothing
    i=0
    for w in $wings; do
        i=$((i + 1))
        [ "$w" = "$1" ] && echo "$i" && return
    done
}

# Rule 2: every "#include "WING/x.h"" of a wing's file names its own wing
# or one below; every source file of the library lies in a wing.
for file in $(find libtensorhost -mindepth 1 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | sort); do
    wing=$(echo "$file" | cut -d/ -f2)
    own=$(rank_of "$wing")
    if [ -z "$own" ] || [ "$(echo "$file" | tr -cd / | wc -c)" -ne 2 ]; then
        echo "check-structure: $file is in no wing (libtensorhost/WING/FILE, WING one of: $wings)"
        status=1
        continue
    fi
    for included in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file"); do
        case "$included" in
        */*)
            to=$(rank_of "${included%%/*}")
            if [ -z "$to" ]; then
                echo "check-structure: $file includes $included, of no wing"
                status=1
            elif [ "$to" -gt "$own" ]; then
                echo "check-structure: $file ($wing) includes $included, a wing above it"
                status=1
            fi
            ;;
        *)
            if [ -e "programs/cmds/$included" ]; then
                echo "check-structure: $file includes $included, a command's header"
                status=1
            fi
            ;;
        esac
    done
done

# Rule 3: "includer included" pairs of modules, for tsort, which reports
# any loop. $1: the folders; a header is named as the files include it.
module_edges() {
    for file in $(find "$@" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \)); do
        from=$(echo "$file" | sed -e 's/\.[a-z]*$//' -e 's/_internal$//')
        dir=$(dirname "$file")
        sed -n 's/^#include "\([^"]*\)\.[a-z]*".*/\1/p' "$file" | sed 's/_internal$//' |
            while read -r to; do
                for candidate in "libtensorhost/$to" "$dir/$to" "programs/cmds/$to"; do
                    if ls "$candidate".* >/dev/null 2>&1; then
                        [ "$candidate" != "$from" ] && echo "$from $candidate"
                        break
                    fi
                done
            done
    done
}
for area in "libtensorhost programs/cmds" plugins/gpu-common kernels; do
    # shellcheck disable=SC2086 # two folders in one area
    edges=$(module_edges $area)
    if [ -n "$edges" ] && { ! loops=$(echo "$edges" | tsort 2>&1 >/dev/null) || [ -n "$loops" ]; }; then
        echo "check-structure: include cycle between the modules of $area:"
        echo "$loops"
        status=1
    fi
done

# Rule 4.
below=$(grep -rnE '#include "(\.\./)*(plugins|libtensorhost|programs)/|#include "(gpu_plugin|group_load|memory_plan|gpu_options|share_extract|device_shares)\.h"' kernels || true)
below_plugins=$(for w in $wings; do grep -rn "#include \"$w/" plugins || true; done)
if [ -n "$below$below_plugins" ]; then
    echo "check-structure: a layer below the library includes one above it:"
    echo "$below$below_plugins"
    status=1
fi

[ "$status" -eq 0 ] &&
    echo "check-structure: one door to plugin instances; the wings in order; no include cycle"
exit "$status"
