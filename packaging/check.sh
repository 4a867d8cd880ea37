#!/usr/bin/env bash
# Checks of the release archives (`make dist-check`), run on what a user downloads: each archive is
# verified against its .sha256, unpacked, and its binaries checked for what they need (glibc 2.17
# at most, stripped); then
#   x86_64: the unpacked module passes the compat tests (`cargo test -p rustbloom --test
#     integration compat`) on each server given as an argument, and bfctl loads a file into it;
#   aarch64: Debian 12's arm64 redis-server, unpacked from its packages into target/dist-check,
#     runs under qemu-user with the unpacked module, answers BF.RESERVE/ADD/EXISTS/SCANDUMP, and
#     the archive's bfctl (under qemu too) loads, dumps and restores a filter in it; then the
#     core's tests run for aarch64 under qemu.
# Usage: packaging/check.sh SERVER... (the x86_64 servers; `make dist-check` passes Redis 7.0,
# Valkey 9.1 and Redis 8.2). DIST_ARCHS selects the architectures (default: x86_64 aarch64).
# Anything that cannot be installed or run fails the check with a message: nothing is skipped.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -gt 0 ] || { echo "usage: $0 SERVER..." >&2; exit 2; }
servers=("$@")
read -r -a archs <<< "${DIST_ARCHS:-x86_64 aarch64}"

readonly GLIBC=2.17
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
dist_dir="$root/target/dist"
work="$root/target/dist-check"
arm_root="$work/arm64-root"
mkdir -p "$work"

fail() { echo "dist-check: $*" >&2; exit 1; }

# Debian 12's arm64 redis-server and the libraries it links, unpacked (not installed: that would
# replace the amd64 packages) into $arm_root, for qemu-aarch64-static -L.
readonly ARM_PACKAGES="redis-server redis-tools libc6 libatomic1 liblzf1 libjemalloc2 libsystemd0
libssl3 libstdc++6 libgcc-s1 libcap2 libgcrypt20 liblzma5 libzstd1 liblz4-1 libgpg-error0"

arm_sysroot() {
    [ -x "$arm_root/usr/bin/redis-check-rdb" ] && return 0
    command -v apt-get >/dev/null || fail "apt-get is needed to fetch Debian's arm64 redis-server"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [ "$(id -u)" = 0 ] || fail "run as root once (dpkg --add-architecture arm64; apt-get update)"
        dpkg --add-architecture arm64
        apt-get update -qq
    fi
    local debs="$work/arm64-debs" pkg
    rm -rf "$debs" "$arm_root.tmp"
    mkdir -p "$debs" "$arm_root.tmp"
    local wanted=()
    for pkg in $ARM_PACKAGES; do wanted+=("$pkg:arm64"); done
    # apt-get download drops privileges to _apt where it can; the directory is ours, so let it.
    chmod 0777 "$debs"
    (cd "$debs" && apt-get download -q "${wanted[@]}") ||
        { [ "$(id -u)" = 0 ] && apt-get update -qq && (cd "$debs" && apt-get download -q "${wanted[@]}"); } ||
        fail "could not download Debian's arm64 packages: ${wanted[*]}"
    local deb
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$arm_root.tmp"; done
    rm -rf "$arm_root"
    mv "$arm_root.tmp" "$arm_root"
}

# A free TCP port on the loopback.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts server command "$@" (with --port $port appended) in the background: sets server_pid;
# waits up to 60 s for PING (qemu is slow to start).
server_pid=""
start_server() {
    local log=$1; shift
    "$@" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$log" 2>&1 &
    server_pid=$!
    local i
    for i in $(seq 1 120); do
        [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && return 0
        kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; fail "the server exited: $*"; }
        sleep 0.5
    done
    cat "$log" >&2
    fail "the server does not answer PING: $*"
}
stop_server() {
    [ -n "$server_pid" ] || return 0
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
tmp=$(mktemp -d "$work/run.XXXXXX")
trap 'stop_server; rm -rf "$tmp"' EXIT

# `redis-cli` "$@" against the server under check must print exactly $expected.
expect() {
    local expected=$1; shift
    local got
    got=$(redis-cli -p "$port" "$@" 2>&1) || true
    [ "$got" = "$expected" ] || fail "$*: expected '$expected', got '$got'"
    echo "   $* -> $(echo "$got" | head -c 60 | tr '\n' ' ')"
}

# bfctl ($@ = how to run it) loads 10,000 lines into `loaded`, dumps it with BF.SCANDUMP and
# restores it with BF.LOADCHUNK under `restored`; every line is then in both.
bfctl_round_trip() {
    local url="redis://127.0.0.1:$port"
    seq 1 10000 | sed 's/^/item-/' > "$tmp/items"
    local report added
    report=$("$@" --url "$url" -q load --capacity 10000 --error 0.001 loaded "$tmp/items" 2>&1) ||
        fail "bfctl load: $report"
    echo "   $report"
    # An item the filter already answered for (a false positive) is not added: BF.CARD counts
    # the ones bfctl reports as new.
    added=$(echo "$report" | sed -n 's/^loaded: 10000 items, \([0-9]*\) new, .*/\1/p')
    [ -n "$added" ] || fail "bfctl load did not report 10000 items: $report"
    expect "$added" BF.CARD loaded
    "$@" --url "$url" -q dump loaded "$tmp/loaded.dump"
    "$@" --url "$url" -q restore restored "$tmp/loaded.dump"
    local present
    present=$("$@" --url "$url" -q exists restored "$tmp/items" | grep -c '^1$' || true)
    [ "$present" = 10000 ] || fail "bfctl exists on the restored filter: $present of 10000 present"
    echo "   bfctl load/dump/restore/exists: 10000 of 10000 items present after the round trip"
}

# The first BF.SCANDUMP chunk of a filter holding one item: a non-zero cursor and a header.
check_scandump() {
    local reply cursor
    reply=$(redis-cli -p "$port" BF.SCANDUMP bf 0 | tr -d '\0')
    cursor=$(echo "$reply" | head -n 1)
    [ "$cursor" -gt 0 ] 2>/dev/null || fail "BF.SCANDUMP bf 0: cursor '$cursor'"
    [ "$(echo "$reply" | wc -l)" -ge 2 ] || fail "BF.SCANDUMP bf 0: no chunk"
    echo "   BF.SCANDUMP bf 0 -> cursor $cursor and a header chunk"
}

check_binaries() {
    local arch=$1 dir=$2 objdump=$3 readelf=$4 bin needed
    for bin in librustbloom.so bfctl; do
        needed=$("$objdump" -T "$dir/$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
        [ "$(printf '%s\n%s\n' "$needed" "$GLIBC" | sort -V | tail -n 1)" = "$GLIBC" ] ||
            fail "$arch/$bin needs GLIBC_$needed"
        if "$readelf" -S "$dir/$bin" | grep -qE '\.debug_info|\.symtab'; then
            fail "$arch/$bin is not stripped"
        fi
        echo "   $arch/$bin: $(stat -c %s "$dir/$bin") bytes, stripped, newest glibc symbol GLIBC_$needed"
    done
}

unpack() {
    local arch=$1 name="rustbloom-$version-linux-$1"
    [ -f "$dist_dir/$name.tar.gz" ] || fail "$dist_dir/$name.tar.gz missing: run make dist"
    (cd "$dist_dir" && sha256sum --quiet -c "$name.tar.gz.sha256") || fail "$name.tar.gz: bad SHA-256"
    rm -rf "$work/unpacked/$name"
    mkdir -p "$work/unpacked"
    tar -xzf "$dist_dir/$name.tar.gz" -C "$work/unpacked"
    (cd "$work/unpacked/$name" && sha256sum --quiet -c SHA256SUMS) || fail "$name: SHA256SUMS do not match"
    unpacked="$work/unpacked/$name"
}

check_x86_64() {
    echo "== x86_64"
    unpack x86_64
    check_binaries x86_64 "$unpacked" objdump readelf
    local server
    for server in "${servers[@]}"; do
        echo "-- compat tests on $("$server" --version | cut -d' ' -f1-3)"
        RUSTBLOOM_MODULE="$unpacked/librustbloom.so" RUSTBLOOM_SERVER="$server" \
            cargo test -q -p rustbloom --test integration compat ||
            fail "compat tests of the x86_64 archive's module on $server"
    done
    echo "-- bfctl from the archive against /usr/bin/redis-server with the archive's module"
    port=$(free_port)
    start_server "$tmp/x86_64.log" /usr/bin/redis-server --loadmodule "$unpacked/librustbloom.so"
    bfctl_round_trip "$unpacked/bfctl"
    stop_server
}

check_aarch64() {
    echo "== aarch64"
    command -v qemu-aarch64-static >/dev/null || fail "qemu-aarch64-static missing (Debian qemu-user-static)"
    unpack aarch64
    check_binaries aarch64 "$unpacked" aarch64-linux-gnu-objdump aarch64-linux-gnu-readelf
    arm_sysroot
    local qemu=(qemu-aarch64-static -L "$arm_root")
    local server_version
    server_version=$("${qemu[@]}" "$arm_root/usr/bin/redis-server" --version | cut -d' ' -f1-3)
    echo "-- $server_version (Debian 12 arm64) under qemu-user with the archive's module"
    port=$(free_port)
    start_server "$tmp/aarch64.log" "${qemu[@]}" "$arm_root/usr/bin/redis-server" \
        --loadmodule "$unpacked/librustbloom.so"
    local uname
    uname=$(redis-cli -p "$port" INFO server | tr -d '\r' | sed -n 's/^os://p')
    case "$uname" in *aarch64*) ;; *) fail "the arm64 server reports os '$uname'" ;; esac
    echo "   INFO server os: $uname"
    expect "OK" BF.RESERVE bf 0.001 1000
    expect "1" BF.ADD bf hello
    expect "0" BF.ADD bf hello
    expect "1" BF.EXISTS bf hello
    expect "0" BF.EXISTS bf absent
    expect $'1\n1\n0' BF.MADD bf a b hello
    check_scandump
    bfctl_round_trip "${qemu[@]}" "$unpacked/bfctl"
    stop_server
    echo "-- the core's tests for aarch64 under qemu (cargo-zigbuild test -p rustbloom-core)"
    (cd "$root/target/dist-build" &&
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L $arm_root" \
        cargo-zigbuild test --manifest-path "$root/Cargo.toml" --locked -p rustbloom-core \
            --target aarch64-unknown-linux-gnu.$GLIBC --target-dir "$root/target/dist-build") ||
        fail "the core's tests for aarch64"
}

for arch in "${archs[@]}"; do
    case "$arch" in
        x86_64) check_x86_64 ;;
        aarch64) check_aarch64 ;;
        *) fail "unknown architecture $arch" ;;
    esac
done
echo "dist-check: all checks passed for ${archs[*]}"
