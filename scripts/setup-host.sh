#!/usr/bin/env bash
# System packages Bac's namespace sandboxes need, on Debian 12 (bookworm) or 13 (trixie).
# Idempotent: installs only what is missing; a second run only checks. Run as root.
#
#   crun, runc        OCI runtimes (crun is the default; runc is a drop-in)
#   mmdebstrap        builds template root filesystems from Debian's archive
#   debian-archive-keyring  verifies what mmdebstrap downloads
#   nftables          Bac's firewall table (sandboxes reach nothing but their answers)
#   iproute2          ip(8), used by tests and for inspection (the server uses netlink)
#   uidmap            newuidmap/newgidmap for user-namespace id mapping
#   util-linux        mount, nsenter, unshare
#   python3-venv      the server's virtual environment
#   skopeo, umoci     FROM images: skopeo copies from registries and archives into an OCI
#                     layout, umoci unpacks its layers (whiteouts as the OCI spec says)
#   docker-registry   a registry the image tests run on loopback (its system service is
#                     disabled below: tests start their own)
#   postgresql        the store's tests run on PostgreSQL too, each session in a throwaway
#                     cluster of its own (tests/postgres_cluster.py: initdb and pg_ctl from
#                     these binaries, as the package's user postgres); Bac itself needs it
#                     only with BAC_DATABASE_URL pointing at a server on this machine
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "setup-host: must run as root" >&2
    exit 1
fi

. /etc/os-release
case "${ID:-}:${VERSION_ID:-}" in
    debian:12|debian:13) ;;
    *) echo "setup-host: warning: tested on Debian 12 and 13, this is ${PRETTY_NAME:-unknown}" >&2 ;;
esac

packages=(
    ca-certificates crun curl debian-archive-keyring docker-registry e2fsprogs gcc iproute2 libc6-dev
    mmdebstrap
    lxcfs nftables postgresql python3 python3-venv runc skopeo uidmap umoci util-linux
)

missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "setup-host: all packages present"
else
    echo "setup-host: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The docker-registry package enables a registry on :5000 of every interface; nothing of
# Bac uses it (the image tests run their own on loopback), so it must not run.
if command -v systemctl >/dev/null 2>&1 && systemctl -q is-enabled docker-registry.service 2>/dev/null; then
    systemctl disable docker-registry.service >/dev/null 2>&1 || true
fi
if [ -d /run/systemd/system ]; then
    systemctl stop docker-registry.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/docker-registry ]; then
    /etc/init.d/docker-registry stop >/dev/null 2>&1 || true
    update-rc.d docker-registry disable >/dev/null 2>&1 || true
fi

# Checks that no package can fix: tell the operator clearly instead of failing later.
if ! grep -qw overlay /proc/filesystems; then
    echo "setup-host: the kernel has no overlayfs; sandboxes cannot run here" >&2
    exit 1
fi
if [ "$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)" = 0 ]; then
    echo "setup-host: user namespaces are disabled (sysctl user.max_user_namespaces)" >&2
    exit 1
fi
bash "$(dirname "$0")/build-criu.sh" || echo "setup-host: no working CRIU >= 4.1: pause keeps memory resident (freezer) or filesystem-only" >&2
crun --version | head -1

# Kernels the code interpreter's host-side tests drive (the code-interpreter template
# installs its own copies): R's IRkernel from Debian, tslab (JavaScript/TypeScript) from npm,
# a JDK for Java.
# npm itself also installs tslab into that template, so it is required, not optional.
if ! dpkg-query -W -f='${Status}' r-cran-irkernel 2>/dev/null | grep -q "install ok installed"; then
    echo "setup-host: installing r-cran-irkernel"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends r-cran-irkernel
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-host: installing nodejs and npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi
command -v tslab >/dev/null 2>&1 || npm install -g --silent tslab@1.0.22
# Java's kernel wraps the JDK's jshell (Debian's default JDK: 17 on bookworm, 21 on trixie).
if ! command -v jshell >/dev/null 2>&1; then
    echo "setup-host: installing default-jdk-headless (jshell)"
    # Slim Debian images drop man pages, and the JDK's postinst then fails registering its
    # man page alternatives (Debian bug #863199).
    mkdir -p /usr/share/man/man1
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jdk-headless
fi
# Mission Control's browser tests drive Debian's Chromium through Playwright (never a
# browser Playwright downloads).
if [ ! -x /usr/bin/chromium ]; then
    echo "setup-host: installing chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
fi
