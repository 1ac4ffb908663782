"""``python -m bac_server.prepare``: make this host ready to serve sandboxes.

Idempotent, and the second run only checks: prepares the host (cgroups, firewall table,
sysctls), builds the base template (about a minute the first time, then instant), the
envd bundle the sandboxes mount, and the templates derived from base: code-interpreter
(about two minutes the first time) and desktop (about one); ``--base-only`` skips them,
``--template NAME`` (repeatable) builds one more built-in on request (``base-full``).
``scripts/setup`` calls it; ``bac serve`` calls the same host preparation at start-up, so
a server never runs on a half-prepared host.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from bac_server.app import build_templates
from bac_server.backends.namespaces import NamespaceConfig, ensure_envd_bundle
from bac_server.config import ServerConfig
from bac_server.host import HostSetupError, IdRange, prepare_host, secure_data_dir
from bac_server.templates import TemplateError


def _say(line: str) -> None:
    print(f"    {line}", flush=True)


DEFAULT_LAYERS = ("code-interpreter", "desktop")


async def _prepare(config: ServerConfig, skip_layers: bool = False,
                   extra: tuple[str, ...] = ()) -> None:
    started = time.monotonic()
    _say("host: cgroups, nftables table, sysctls; data dir private")
    await asyncio.to_thread(prepare_host)
    await asyncio.to_thread(secure_data_dir, config.data_dir, IdRange())
    templates = build_templates(config)
    image = await templates.ensure_base(progress=_say)
    _say(f"template base: {image.rootfs}")
    bundles = NamespaceConfig(data_dir=config.data_dir).bundles_dir
    bundle = await ensure_envd_bundle(bundles, image.rootfs, progress=_say)
    _say(f"envd bundle: {bundle}")
    layers = () if skip_layers else DEFAULT_LAYERS
    for name in dict.fromkeys((*layers, *extra)):
        layer_started = time.monotonic()
        image = await templates.ensure(name, progress=_say)
        _say(f"template {name}: {image.rootfs} ({time.monotonic() - layer_started:.1f} s)")
    _say(f"ready in {time.monotonic() - started:.1f} s (data dir {config.data_dir})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bac_server.prepare", description=__doc__)
    parser.add_argument("--data-dir", help="Bac's data directory (default $BAC_DATA_DIR)")
    parser.add_argument("--base-only", action="store_true",
                        help="build only the base template, not code-interpreter or desktop")
    parser.add_argument("--template", action="append", default=[], metavar="NAME",
                        help="also build this built-in template (base-full); repeatable")
    args = parser.parse_args(argv)
    config = ServerConfig.from_env().with_overrides(data_dir=args.data_dir)
    try:
        asyncio.run(_prepare(config, skip_layers=args.base_only, extra=tuple(args.template)))
    except (HostSetupError, TemplateError) as exc:
        print(f"bac setup: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
