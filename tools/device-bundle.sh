#!/bin/sh
# Copies the non-system shared libraries that the test programs, tools and
# plugins of a build tree need into BUILD/bundle-lib, so the tree runs on a
# GPU host that has the driver but none of the -dev packages (GLib,
# json-glib, toml++, cmocka). Run there with
#   LD_LIBRARY_PATH=$PWD/BUILD/bundle-lib
# Usage: tools/device-bundle.sh [BUILD]   (default: build-device)
set -eu
build=${1:-build-device}
dest="$build/bundle-lib"
mkdir -p "$dest"

# What every Linux host has; never bundled (libstdc++/libgcc_s included:
# the image's are as new as ours).
is_system() {
    case "$(basename "$1")" in
        linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|\
        libstdc++.so*|libgcc_s.so*|libcuda.so*|libnvidia*) return 0 ;;
    esac
    return 1
}

count=0
for bin in $(find "$build" -type f \( -name '*.so' -o -perm -u+x \) \
                 -not -path "$dest/*" -not -path '*/CMakeFiles/*' 2>/dev/null); do
    file "$bin" | grep -q 'ELF' || continue
    ldd "$bin" 2>/dev/null | awk '/=> \//{print $3}' | while read -r lib; do
        is_system "$lib" && continue
        name=$(basename "$lib")
        if [ ! -e "$dest/$name" ]; then
            cp -L "$lib" "$dest/$name"
            strip --strip-unneeded "$dest/$name" 2>/dev/null || true
        fi
    done
    count=$((count + 1))
done
echo "device-bundle: scanned $count binaries; $(ls "$dest" | wc -l) libraries in $dest ($(du -sh "$dest" | cut -f1))"
ls "$dest"
