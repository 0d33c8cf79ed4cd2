# Sourced by the GPU host scripts (tools/gpu-check.sh, tools/gpu-mpi.sh),
# from the repository root: sets `build` and `prefix` to the install tree of
# tools/device-bundle.sh, unpacked from .carry when only .carry was copied.
build=$(cat .carry/build-dir 2>/dev/null || echo build-device)
prefix=$PWD/$build/install
if [ ! -d "$prefix" ] && [ -f .carry/install.tar.xz ]; then
    mkdir -p "$build" && tar -C "$build" -xJf .carry/install.tar.xz
fi
# The NCCL the install bundles is not in .carry (tools/device-bundle.sh):
# NCCL_BUNDLE_FROM names the host's copy of the same nvidia-nccl-cu13
# wheel's libnccl.so.2, linked in its place.
if [ -n "${NCCL_BUNDLE_FROM:-}" ] && [ ! -e "$prefix/lib/tensorhost/nccl/libnccl.so.2" ]; then
    mkdir -p "$prefix/lib/tensorhost/nccl" &&
        ln -s "$NCCL_BUNDLE_FROM" "$prefix/lib/tensorhost/nccl/libnccl.so.2"
fi
