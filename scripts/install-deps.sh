#!/usr/bin/env bash
# Installs the Debian 12 packages tensorhost builds and tests with (the CUDA
# toolkit is not among them: with nvcc on PATH the GPU plugins are built,
# without it they are skipped). Does nothing when all are present.
# The host's R x R algebra uses LAPACKE over OpenBLAS, in OpenBLAS's OpenMP
# build: cpu-reference runs its kernels on OpenMP (libgomp) in the same
# process, and OpenBLAS's pthreads build would add a second thread pool
# next to libgomp's that competes with it for the cores.
# Open MPI and MPICH: a run of several processes (mpirun) loads the shim
# built against the launcher's MPI (libtensorhost/dist); nothing links one.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libglib2.0-dev libjson-glib-dev
          libtomlplusplus-dev libcmocka-dev libcairo2-dev clang libclang-rt-14-dev
          liblapacke-dev libopenblas-openmp-dev libfmt-dev libxxhash-dev python3 python3-numpy python3-pytest python3-venv
          libopenmpi-dev openmpi-bin libmpich-dev mpich)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
