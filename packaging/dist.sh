#!/usr/bin/env bash
# Release archives (`make dist`): for each target, the module and bfctl built with cargo-zigbuild
# against glibc 2.17, stripped (their debug info kept beside the archives, not shipped), with the
# README extract, the licence and SHA256SUMS, in target/dist/rustbloom-<version>-linux-<arch>.tar.gz
# plus a <archive>.sha256 beside it. Two runs from the same commit give the same bytes: paths in
# the binaries are remapped, tar sorts names and fixes mtime (the commit's time), owner and modes,
# gzip writes no name or time.
#
# Expects what `make dist` installs: the rustup targets, cargo-zigbuild and zig (PyPI) on PATH,
# and binutils for aarch64 (aarch64-linux-gnu-objcopy). Arguments: the architectures to build
# (default: x86_64 aarch64).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# glibc 2.17 is what Rust's standard library supports at the least; older than every distribution
# still in support (RHEL/CentOS 7 has 2.17).
readonly GLIBC=2.17
# The module must stay small enough to copy around and load anywhere.
readonly MODULE_MAX_BYTES=$((4 * 1024 * 1024))

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || { echo "dist: no version in Cargo.toml" >&2; exit 1; }
# The archives' file times: SOURCE_DATE_EPOCH when set, else the commit's time, so that two
# builds of one commit agree wherever they run.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || true)}
[ -n "$epoch" ] || { echo "dist: not a git checkout: set SOURCE_DATE_EPOCH" >&2; exit 1; }

build_dir="$root/target/dist-build"
dist_dir="$root/target/dist"
debug_dir="$dist_dir/debug"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
mkdir -p "$build_dir" "$dist_dir" "$debug_dir"

# The checkout's and cargo's paths would otherwise be written into panic messages and debug info
# (so into the bytes): the same build in another directory must give the same archive.
export RUSTFLAGS="--remap-path-prefix=$root=/rustbloom --remap-path-prefix=$cargo_home=/cargo"
# The same for the C stub redis-module compiles (zig cc, through the cc crate).
export CFLAGS="-ffile-prefix-map=$root=/rustbloom -ffile-prefix-map=$cargo_home=/cargo"

# Highest GLIBC_x.y version that binary $1 needs (objdump $2), or nothing.
glibc_needed() {
    "$2" -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1
}

build_arch() {
    local arch=$1 triple objcopy objdump
    case "$arch" in
        x86_64) triple=x86_64-unknown-linux-gnu objcopy=objcopy objdump=objdump ;;
        aarch64) triple=aarch64-unknown-linux-gnu objcopy=aarch64-linux-gnu-objcopy objdump=aarch64-linux-gnu-objdump ;;
        *) echo "dist: unknown architecture $arch" >&2; return 1 ;;
    esac
    echo "== $arch: cargo zigbuild --target $triple.$GLIBC"
    # Run from the build directory, not the checkout: zig reports its library directory relative
    # to the working directory when it lies below it (the venv is under target/), and
    # cargo-zigbuild hands that relative path to bindgen, which runs elsewhere and then finds no
    # libc headers.
    (cd "$build_dir" && cargo zigbuild --manifest-path "$root/Cargo.toml" --release --locked \
        -p rustbloom -p bfctl --target "$triple.$GLIBC" --target-dir "$build_dir")

    local name="rustbloom-$version-linux-$arch"
    local stage="$build_dir/stage/$name" out="$build_dir/$triple/release"
    rm -rf "$stage" "$debug_dir/$arch"
    mkdir -p "$stage" "$debug_dir/$arch"
    local bin
    for bin in librustbloom.so bfctl; do
        "$objcopy" --only-keep-debug "$out/$bin" "$debug_dir/$arch/$bin.debug"
        # --add-gnu-debuglink records the debug file's name and CRC, so gdb finds it when it is
        # put beside the binary or under /usr/lib/debug.
        (cd "$debug_dir/$arch" && "$objcopy" --strip-all --add-gnu-debuglink="$bin.debug" \
            "$out/$bin" "$stage/$bin")
        chmod 0755 "$stage/$bin"
        local needed
        needed=$(glibc_needed "$stage/$bin" "$objdump")
        if [ -n "$needed" ] && [ "$(printf '%s\n%s\n' "$needed" "$GLIBC" | sort -V | tail -n 1)" != "$GLIBC" ]; then
            echo "dist: $arch/$bin needs GLIBC_$needed, more than $GLIBC" >&2
            return 1
        fi
    done
    local module_bytes
    module_bytes=$(stat -c %s "$stage/librustbloom.so")
    if [ "$module_bytes" -gt "$MODULE_MAX_BYTES" ]; then
        echo "dist: $arch/librustbloom.so is $module_bytes bytes, more than $MODULE_MAX_BYTES" >&2
        return 1
    fi
    sed -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/g" -e "s/@GLIBC@/$GLIBC/g" \
        packaging/README.dist.md > "$stage/README.md"
    cp LICENSE "$stage/LICENSE"
    chmod 0644 "$stage/README.md" "$stage/LICENSE"
    (cd "$stage" && sha256sum LICENSE README.md bfctl librustbloom.so > SHA256SUMS && chmod 0644 SHA256SUMS)

    local archive="$dist_dir/$name.tar.gz"
    tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX --format=ustar \
        -C "$build_dir/stage" -cf - "$name" | gzip -n -9 > "$archive.tmp"
    mv "$archive.tmp" "$archive"
    (cd "$dist_dir" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
    echo "== $arch: $archive ($(stat -c %s "$archive") bytes; module $module_bytes bytes," \
        "bfctl $(stat -c %s "$stage/bfctl") bytes; needs glibc $GLIBC or later)"
}

archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(x86_64 aarch64)
for arch in "${archs[@]}"; do
    build_arch "$arch"
done
(cd "$dist_dir" && cat ./*.tar.gz.sha256)
