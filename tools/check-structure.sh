#!/bin/sh
# Architecture rules the compiler cannot see, checked on the sources:
#   1. one door to a plugin instance: only the backend module
#      (libtensorhost/backend.c) calls a plugin's instance functions; the
#      programs, the comparison, the checker and the benchmark go through it
#      (tests of plugins as plugins may call them directly);
#   2. no include cycle between the library's modules (a module is X.c with
#      X.h; a private X_internal.h belongs to module X).
# Usage: tools/check-structure.sh [SOURCE_DIR]; exit 0 when both hold.
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
status=0

calls='(create|destroy|load_tensor|set_factor|get_factor|mttkrp|get_mttkrp_result|als_update|get_runtime_info|get_mode_info|als_sweep)'
found=$(grep -nE "entry(\.|->)${calls}[[:space:]]*\(" libtensorhost/*.c programs/*.c bench/*.c | grep -v '^libtensorhost/backend\.c:' || true)
if [ -n "$found" ]; then
    echo "check-structure: instance functions called outside libtensorhost/backend.c:"
    echo "$found"
    status=1
fi

# "includer included" pairs of modules, for tsort, which reports any loop.
edges=$(for file in libtensorhost/*.c libtensorhost/*.h; do
    from=$(basename "$file" | sed -e 's/\.[ch]$//' -e 's/_internal$//')
    sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$file" | sed 's/_internal$//' |
        while read -r to; do
            if [ -e "libtensorhost/$to.h" ] && [ "$to" != "$from" ]; then echo "$from $to"; fi
        done
done)
if ! loops=$(echo "$edges" | tsort 2>&1 >/dev/null) || [ -n "$loops" ]; then
    echo "check-structure: include cycle between the library's modules:"
    echo "$loops"
    status=1
fi

[ "$status" -eq 0 ] && echo "check-structure: one door to plugin instances; no include cycle"
exit "$status"
