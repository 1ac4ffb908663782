#!/usr/bin/env bash
# CRIU >= 4.2 with Bac's patches, for full-state pause and checkpoints.
#
# Debian 12's criu 3.17 fails on kernels >= 6.13 ("vdso: Unexpected rt vDSO area bounds",
# fixed in 4.1), and 4.1 cannot dump a TCP socket on kernels >= 6.16 ("Can't get 1:16 opt:
# Operation not supported": SO_PASSCRED is refused on inet sockets now; fixed in 4.2).
# The upstream source is fetched from Debian's archive (unstable's source package, through
# a throw-away apt configuration that leaves the system's sources and lists untouched),
# patched with scripts/criu/*.patch, built with make and installed as /usr/local/sbin/criu;
# nothing else is installed from unstable. The patches:
#
# * 0001: an empty tmpfs (masked paths, an unused /dev/shm) is saved without a tar process;
# * 0002: established TCP connections are restored into a sandbox whose network namespace
#   belongs to the host (repair mode through CRIU's privileged helper);
# * 0003: --manage-cgroups=ignore restores multi-threaded processes (a CRIU bug otherwise);
#   Bac starts CRIU inside the sandbox's cgroups and needs this to drive CRIU itself;
# * 0004: lazy pages (memory copied in after the processes run) for tasks in a user
#   namespace, through /dev/userfaultfd;
# * 0005: restore --tcp-close-external keeps a copy's loopback connections only;
# * 0006: lazy pages: a fault brings in the 64 KiB around it and shrinks every task's
#   background chunk (a busy task's faults no longer wait behind 4 MiB copies for another);
# * 0007: the lazy-pages daemon starts its background copy once the restored tasks run
#   (started earlier, it took a CPU from the restore's last steps);
# * 0008: lazy pages: the task with the least memory left is copied first (a sandbox's
#   small agent server has its memory back before a large data holder's).
# 0001-0005 each add a 'criu check --feature' name, which is how Bac recognises the build;
# a stamp next to it names the patch set it was built from (a new patch rebuilds it).
#
# CRIU caches what it probes of the kernel (~50 ms per run) only on a tmpfs; /run is not
# one on every host, so the build keeps it in /run/bac-criu, a tmpfs the server mounts.
#
# Idempotent: does nothing when a working criu >= 4.2 built from these patches is
# installed. Run as root.
# Bac finds criu at /usr/local/sbin/criu first, then on PATH (BAC_CRIU overrides both); an
# unpatched criu >= 4.2 still works, with established connections closed at a pause.
set -euo pipefail

WANT_MAJOR=4
WANT_MINOR=2
TARGET=/usr/local/sbin/criu
KDAT_DIR=/run/bac-criu
PATCHES=$(cd "$(dirname "$0")/criu" && pwd)

if [ "$(id -u)" != 0 ]; then
    echo "build-criu: must run as root" >&2
    exit 1
fi

# "Version: 4.2.1" -> 0 when >= 4.2
recent_enough() {
    local version
    version=$("$1" --version 2>/dev/null | awk '/^Version:/ {print $2; exit}') || return 1
    [ -n "$version" ] || return 1
    local major=${version%%.*} rest=${version#*.}
    local minor=${rest%%.*}
    [ "$major" -gt "$WANT_MAJOR" ] || { [ "$major" -eq "$WANT_MAJOR" ] && [ "$minor" -ge "$WANT_MINOR" ]; }
}

works() {
    [ -x "$1" ] && recent_enough "$1" && "$1" check >/dev/null 2>&1
}

# The newest patch's feature: a build that has it has them all.
patched() {
    "$1" check --feature tcp_close_external >/dev/null 2>&1
}

# Built without GnuTLS (TLS for CRIU's page server, which Bac does not use): loading it
# and the eight libraries it pulls in costs ~3.5 ms of every dump and restore here.
lean() {
    ! ldd "$1" 2>/dev/null | grep -q libgnutls
}

# Which patches (and build options) the installed CRIU was built with: a changed
# patch set rebuilds it, even where no 'criu check' feature tells the builds apart.
STAMP=/usr/local/lib/bac/criu.build
want_stamp="$(cat "$PATCHES"/*.patch | sha256sum | cut -d' ' -f1) NO_GNUTLS=1"
current() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ]
}

if works "$TARGET" && patched "$TARGET" && lean "$TARGET" && current; then
    echo "build-criu: $TARGET $("$TARGET" --version | awk '/^Version:/ {print $2}') (patched) works"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
deps=(
    build-essential pkg-config libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler
    protobuf-compiler python3-protobuf libnl-3-dev libnet1-dev libcap-dev libbsd-dev
    libnftables-dev uuid-dev libaio-dev xz-utils patch
)
missing=()
for pkg in "${deps[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "build-criu: installing build dependencies ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

work=$(mktemp -d /tmp/bac-criu.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"  # apt's download user (_apt) writes into it

# A private apt configuration: one deb-src entry for unstable, its own lists and cache.
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
cat > "$work/apt/sources.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main
EOF
apt_opts=(
    -o "Dir::Etc::SourceList=$work/apt/sources.list"
    -o "Dir::Etc::SourceParts=-"
    -o "Dir::State::Lists=$work/apt/lists"
    -o "Dir::Cache=$work/apt/cache"
    -o "APT::Get::List-Cleanup=0"
)
echo "build-criu: fetching criu's source from Debian's archive (unstable)"
apt-get "${apt_opts[@]}" update -qq
chown _apt "$work/src" 2>/dev/null || true
# The mirror may serve only the upstream tarball and not Debian's packaging files, which
# makes apt-get report failure; the upstream tarball is all the build needs, and apt has
# checked it against the signed Sources index before putting it in place.
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only criu >"$work/fetch.log" 2>&1) || true
orig=$(ls "$work"/src/criu_*.orig.tar.* 2>/dev/null | head -1 || true)
if [ -z "$orig" ] || [ ! -f "$orig" ]; then
    echo "build-criu: criu's source tarball could not be downloaded:" >&2
    cat "$work/fetch.log" >&2
    exit 1
fi
echo "build-criu: building $(basename "$orig")"
tar -xf "$orig" -C "$work/src"
srcdir=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'criu-*' | head -1)
for patch_file in "$PATCHES"/*.patch; do
    if ! patch -d "$srcdir" -p1 --forward --quiet <"$patch_file"; then
        echo "build-criu: $(basename "$patch_file") does not apply to $(basename "$srcdir");" \
             "the patches were made for criu 4.2.1" >&2
        exit 1
    fi
done
make -C "$srcdir" -j"$(nproc)" criu RUNDIR="$KDAT_DIR" NO_GNUTLS=1 >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; exit 1; }
install -D -m 0755 "$srcdir/criu/criu" "$TARGET"
mkdir -p "$(dirname "$STAMP")"
echo "$want_stamp" > "$STAMP"

if ! works "$TARGET" || ! patched "$TARGET" || ! lean "$TARGET"; then
    echo "build-criu: the built criu fails 'criu check':" >&2
    "$TARGET" check >&2 || true
    exit 1
fi
echo "build-criu: installed $TARGET $("$TARGET" --version | awk '/^Version:/ {print $2}')"
