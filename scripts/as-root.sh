# Sourced by scripts/up, scripts/test and scripts/setup: Bac needs root (namespaces,
# cgroups, mounts). Run as root, the script goes on; run as a user, it starts again
# through sudo (keeping BAC_* and the proxy settings); without sudo it says so and stops.
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo --preserve-env=BAC_DATA_DIR,BAC_DATABASE_URL,BAC_HOST,BAC_PORT,BAC_ADMIN_TOKEN,BAC_SANDBOX_CA_CERTS,http_proxy,https_proxy,no_proxy \
            bash "$(pwd)/scripts/$(basename "$0")" "$@"  # the caller cd'ed to the checkout
    fi
    echo "bac: $(basename "$0") must run as root (sandboxes need namespaces, cgroups and mounts): run it as root, or install sudo" >&2
    exit 1
fi
