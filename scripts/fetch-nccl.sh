#!/usr/bin/env bash
# Fetches the NCCL a GPU build compiles against and bundles: the
# nvidia-nccl-cu13 wheel of VERSION from PyPI (as PyTorch ships NCCL), its
# headers and libnccl.so.2 unpacked into DIR/include and DIR/lib. Configure
# with -DTH_NCCL_INCLUDE_DIR=DIR/include: the build then uses those headers
# and installs that libnccl.so.2 as <libdir>/tensorhost/nccl/libnccl.so.2,
# which the GPU plugins load before the host's, so that NCCL's device API
# (the direct exchange between GPUs) runs whatever NCCL the host has.
# Usage: scripts/fetch-nccl.sh [VERSION] [DIR]  (default 2.28.9, build-nccl)
set -euo pipefail
version=${1:-2.28.9}
dir=${2:-build-nccl}
mkdir -p "$dir"
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 \
    -d "$download" "nvidia-nccl-cu13==$version"
wheel=$(ls "$download"/nvidia_nccl_cu13-*.whl)
python3 - "$wheel" "$dir" <<'PY'
import os, sys, zipfile
wheel, target = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("nvidia/nccl/include/") or name == "nvidia/nccl/lib/libnccl.so.2":
            path = os.path.join(target, name[len("nvidia/nccl/"):])
            if name.endswith("/"):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(name) as src, open(path, "wb") as dst:
                dst.write(src.read())
PY
grep -q "#define NCCL_PATCH" "$dir/include/nccl.h"
echo "fetch-nccl: NCCL $version in $dir; configure with -DTH_NCCL_INCLUDE_DIR=$(cd "$dir" && pwd)/include"
