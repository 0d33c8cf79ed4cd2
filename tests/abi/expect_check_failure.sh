#!/bin/sh
# Runs the conformance checker on a deliberately broken plugin and passes
# only when the checker exits 1 (not a crash, not 0) and prints the FAIL line
# that names the fault.
#   expect_check_failure.sh CHECKER PLUGIN.so 'FAIL line prefix'
checker=$1 plugin=$2 expected=$3
output=$("$checker" --quick "$plugin")
status=$?
printf '%s\n' "$output"
if [ "$status" -ne 1 ]; then
    echo "expected exit status 1 from the checker, got $status"
    exit 1
fi
if ! printf '%s\n' "$output" | grep -qF -- "$expected"; then
    echo "expected a line containing: $expected"
    exit 1
fi
echo "the checker rejected $plugin as expected"
