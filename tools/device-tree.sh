# Sourced by the GPU host scripts (tools/gpu-check.sh, tools/gpu-mpi.sh),
# from the repository root: sets `build` and `prefix` to the install tree of
# tools/device-bundle.sh, unpacked from .carry when only .carry was copied.
build=$(cat .carry/build-dir 2>/dev/null || echo build-device)
prefix=$PWD/$build/install
if [ ! -d "$prefix" ] && [ -f .carry/install.tar.xz ]; then
    mkdir -p "$build" && tar -C "$build" -xJf .carry/install.tar.xz
fi
