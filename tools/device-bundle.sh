#!/bin/sh
# Builds here and prepares what a GPU host needs to run the GPU checks
# (tools/gpu-check.sh, tools/gpu-compare.sh) without a compiler or the CUDA
# toolkit there, only the NVIDIA driver:
#   BUILD/install  `cmake --install BUILD --prefix BUILD/install --strip`: the
#                  relocatable tree (bin/, lib/tensorhost/plugins/, the
#                  bundled shared libraries; see cmake/TensorhostBundle.cmake)
#   .carry/bin     the GPU test programs, gpu_bench, nvlink_push_bench, load_bench
#                  and extract_bench
#                  from BUILD/bin
#   .carry/lib     libcmocka (the tests' only library the install lacks)
#   .carry/shared-data/kg  ../shared/data/real/kg (outside the checkout, so
#                  copying the checkout does not bring it)
#   .carry/install.tar.xz  BUILD/install again, compressed (the bundled
#                  OpenBLAS alone is ~36 MB and packs to a quarter of that),
#                  without the bundled NCCL (tools/device-tree.sh):
#                  where copying is limited in size, copy .carry alone and
#                  tools/gpu-check.sh unpacks the tree when BUILD/install is
#                  missing
# Copy both paths to the same places in a checkout of the same commit on the
# GPU host (e.g. rsync -aR BUILD/install .carry HOST:CHECKOUT/) and run the
# checks there from the checkout's root.
# Usage: tools/device-bundle.sh [BUILD]   (default: build-device; JOBS sets
# the build's parallelism, default all processors)
# KEEP_BASE=1 keeps the kernel library of the install tree being replaced
# (the previous bundle's) as .carry/base/libtensorhost-gpu.so.0.xz, for
# tools/gpu-ab.sh to time against the new one on the GPU host; the next
# bundle replaces it. KEEP_BASE=NAME (letters, digits, '.', '_', '-') keeps
# it as .carry/bases/NAME.so.0.xz instead, and .carry/bases outlives later
# bundles (remove it by hand), so that one run can time several builds
# (about 10 MB each).
set -eu
build=${1:-build-device}
keep=${KEEP_BASE:-0}
case "$keep" in
0 | 1) ;;
*[!A-Za-z0-9._-]* | .*)
    echo "device-bundle: KEEP_BASE wants 1 or a name of letters, digits, '.', '_', '-', not '$keep'" >&2
    exit 2
    ;;
esac
cmake --build "$build" -j "${JOBS:-$(nproc)}"
base_kept=""
if [ "$keep" != 0 ]; then
    old=""
    for lib in "$build"/install/lib/libtensorhost-gpu.so.0.*; do
        [ -f "$lib" ] && old=$lib && break
    done
    [ -n "$old" ] || { echo "device-bundle: KEEP_BASE=$keep but $build/install has no kernel library" >&2; exit 1; }
    base_kept=$build/base-kernels.so.xz
    xz -T0 -6 -c "$old" > "$base_kept"
fi
# Named bases outlive the bundle.
rm -rf "$build/kept-bases"
if [ -d .carry/bases ]; then
    mv .carry/bases "$build/kept-bases"
fi
rm -rf "$build/install" .carry
cmake --install "$build" --prefix "$build/install" --strip > /dev/null
mkdir -p .carry/bin .carry/lib .carry/shared-data
if [ -d "$build/kept-bases" ]; then
    mv "$build/kept-bases" .carry/bases
fi
if [ "$keep" = 1 ]; then
    mkdir -p .carry/base && mv "$base_kept" .carry/base/libtensorhost-gpu.so.0.xz
elif [ -n "$base_kept" ]; then
    mkdir -p .carry/bases && mv "$base_kept" ".carry/bases/$keep.so.0.xz"
fi
for prog in test_gpu_load test_gpu_comm test_gpu_plugins test_gpu_sweep test_gpu_cp_als test_gpu_multi test_gpu_generalized test_gpu_row_solve test_gpu_nonneg_update test_gpu_sweep_regularised gpu_bench nvlink_push_bench load_bench extract_bench; do
    cp "$build/bin/$prog" .carry/bin/
    strip --strip-unneeded .carry/bin/$prog
done
cmocka=$(ldd "$build/bin/test_gpu_plugins" | awk '/libcmocka/ {print $3}')
cp -L "$cmocka" .carry/lib/
if [ -d ../shared/data/real/kg ]; then
    cp -r ../shared/data/real/kg .carry/shared-data/
fi
# The bundled NCCL (over 200 MB) stays out of the copy: tools/device-tree.sh
# links the GPU host's copy of the same wheel in its place (NCCL_BUNDLE_FROM).
tar -C "$build" --exclude='install/lib/tensorhost/nccl' -cf - install | xz -T0 -6 > .carry/install.tar.xz
# The test programs hold absolute paths of this checkout (plugins, data).
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" > .carry/source-root
echo "$build" > .carry/build-dir
echo "device-bundle: $(du -sh "$build/install" | cut -f1) install tree, $(du -sh .carry | cut -f1) in .carry"
