#!/usr/bin/env bash
# Mission Control's browser libraries (htmx, xterm.js, uPlot): installed from the npm
# registry with the versions and hashes of package-lock.json, then copied into the
# dashboard's static/vendor/, which the server serves itself (never a CDN). Idempotent:
# a stamp holding the lock file's hash makes the second run a check; npm's own cache
# (~/.npm) serves a re-install without the network.
set -euo pipefail
self="$(realpath "$0")"
cd "$(dirname "$self")/../src/bac_server/dashboard"

vendor=static/vendor
stamp="$vendor/.stamp"
want="$(sha256sum assets/package-lock.json assets/package.json "$self" | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup-ui: assets present ($vendor)"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-ui: npm is missing (scripts/setup-host.sh installs it)" >&2
    exit 1
fi
echo "setup-ui: installing Mission Control's assets from npm"
# --ignore-scripts: nothing a package ships runs here; we only copy its built files.
npm ci --prefix assets --ignore-scripts --no-audit --no-fund --loglevel=error
modules=assets/node_modules
tmp="$(mktemp -d "$vendor.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$modules/htmx.org/dist/htmx.min.js" "$tmp/htmx.min.js"
cp "$modules/@xterm/xterm/lib/xterm.js" "$tmp/xterm.js"
cp "$modules/@xterm/xterm/css/xterm.css" "$tmp/xterm.css"
cp "$modules/@xterm/addon-fit/lib/addon-fit.js" "$tmp/addon-fit.js"
cp "$modules/uplot/dist/uPlot.iife.min.js" "$tmp/uPlot.iife.min.js"
cp "$modules/uplot/dist/uPlot.min.css" "$tmp/uPlot.min.css"
echo "$want" > "$tmp/.stamp"
chmod 755 "$tmp"
rm -rf "$vendor"
mv "$tmp" "$vendor"
trap - EXIT
echo "setup-ui: assets installed ($vendor)"
