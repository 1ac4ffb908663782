"""Local administration: ``bac serve``, ``bac keys`` and ``bac admin``.

The only CLI module that imports the server package (import-linter allows exactly this
one): the rest of the CLI is a client of the public SDK. The server is imported lazily,
inside each command, so client commands never pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from bac.cli._output import (
    BacGroup,
    CliError,
    View,
    json_option,
    listing_options,
    print_json,
    print_table,
    stdout,
)


def _admin() -> Any:
    try:
        from bac_server import admin
    except ImportError as exc:  # the SDK can be installed without the server's extras
        raise CliError("the Bac server is not installed here (pip install 'bac[server]'): "
                       f"{exc}") from exc
    return admin


def _call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an admin function, turning its validation errors into one-line CLI errors."""
    try:
        return func(*args, **kwargs)
    except (ValueError, LookupError, PermissionError) as exc:
        raise CliError(str(exc), exit_code=2) from exc


@click.command()
@click.option("--host", default=None,
              help="Address to listen on (default: BAC_HOST or 127.0.0.1, this machine only).")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port for the API and gateway (default: BAC_PORT or 3000).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where state and templates live (default: BAC_DATA_DIR or /var/lib/bac).")
@click.option("--domain", default=None,
              help="Domain of sandbox host names {port}-{id}.DOMAIN (default: localhost).")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PEM certificate chain: serve HTTPS only (default: BAC_TLS_CERT).")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PEM private key of --tls-cert (default: BAC_TLS_KEY).")
@click.option("--role", type=click.Choice(["all", "api"]), default=None,
              help="all: one process runs everything (default: BAC_ROLE or all); api: a "
                   "replica of the API and gateway over node agents (docs/scale-out.md).")
def serve(host: str | None, port: int | None, data_dir: Path | None, domain: str | None,
          tls_cert: Path | None, tls_key: Path | None, role: str | None) -> None:
    """Run the Bac server (REST API + gateway) in the foreground.

    \b
    Examples:
      bac serve                                 # http://127.0.0.1:3000
      bac serve --host 0.0.0.0 --port 8080 --data-dir /srv/bac
      BAC_DATABASE_URL=postgresql+asyncpg://... BAC_NODE_TOKEN=... bac serve --role api
    """
    given = {"host": host, "port": port, "data_dir": data_dir, "domain": domain,
             "tls_cert": tls_cert, "tls_key": tls_key, "role": role}
    overrides = {key: value for key, value in given.items() if value is not None}
    _call(_admin().serve, **overrides)


@click.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where its sandboxes' state lives (default: BAC_DATA_DIR or /var/lib/bac).")
@click.option("--listen", default=None,
              help="host:port serving the API replicas (default: BAC_NODE_LISTEN or "
                   "0.0.0.0:7070).")
@click.option("--tunnel-listen", default=None,
              help="host:port of the tunnel into its sandboxes (default: "
                   "BAC_NODE_TUNNEL_LISTEN or 0.0.0.0:7071).")
@click.option("--advertise", default=None,
              help="The address API replicas reach this node at (default: "
                   "BAC_NODE_ADVERTISE, else the listen address, else this host's).")
def node(data_dir: Path | None, listen: str | None, tunnel_listen: str | None,
         advertise: str | None) -> None:
    """Run a node agent: this machine runs sandboxes for the API replicas.

    Needs BAC_DATABASE_URL (PostgreSQL, shared with the replicas), BAC_NODE_TOKEN (the
    replicas' too) and the store's key file (BAC_STORE_KEY_FILE, the replicas' too).

    \b
    Examples:
      BAC_DATABASE_URL=postgresql+asyncpg://bac@db/bac BAC_NODE_TOKEN=... bac node
    """
    given = {"node_listen": listen, "node_tunnel_listen": tunnel_listen,
             "node_advertise": advertise}
    overrides = {key: value for key, value in given.items() if value is not None}
    _call(_admin().serve_node, data_dir=data_dir, **overrides)


@click.group(cls=BacGroup)
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The server's data directory (default: BAC_DATA_DIR or /var/lib/bac).")
@click.pass_context
def keys(ctx: click.Context, data_dir: Path | None) -> None:
    """Create, list and revoke API keys (in this machine's server state).

    \b
    Examples:
      export BAC_API_KEY=$(bac keys create my-team)
      bac keys ls
    """
    ctx.obj = {"data_dir": data_dir}


def _data_dir(ctx: click.Context) -> Path | None:
    obj = ctx.obj if isinstance(ctx.obj, dict) else {}
    data_dir: Path | None = obj.get("data_dir")
    return data_dir


@keys.command()
@click.argument("team")
@click.argument("name", default="default")
@json_option
@click.pass_context
def create(ctx: click.Context, team: str, name: str, as_json: bool) -> None:
    """Create a key for TEAM (created if new) and print it; it is shown only once.

    \b
    Examples:
      export BAC_API_KEY=$(bac keys create my-team)
      bac keys create my-team ci --json
    """
    key = _call(_admin().create_key, team, name, data_dir=_data_dir(ctx))
    if as_json:
        print_json({"team": team, "name": name, "key": key})
    else:
        click.echo(key)


@keys.command(name="list")
@listing_options
@click.pass_context
def list_(ctx: click.Context, view: View) -> None:
    """List keys (their prefixes, never the keys themselves).

    \b
    Examples:
      bac keys ls
      bac keys ls -q                             # key ids only
    """
    infos = _call(_admin().list_keys, data_dir=_data_dir(ctx))
    rows = [
        {
            "keyId": k.key_id, "team": k.team, "name": k.name, "prefix": k.prefix,
            "createdAt": k.created_at.isoformat(),
            "revokedAt": k.revoked_at.isoformat() if k.revoked_at else None,
        }
        for k in infos
    ]
    view.show(["KEY ID", "TEAM", "NAME", "PREFIX", "CREATED", "REVOKED"],
              [[r["keyId"], r["team"], r["name"], r["prefix"],
                r["createdAt"][:16].replace("T", " "),
                (r["revokedAt"] or "")[:16].replace("T", " ")] for r in rows], rows)


@keys.command()
@click.argument("key_id_or_prefix")
@click.pass_context
def revoke(ctx: click.Context, key_id_or_prefix: str) -> None:
    """Revoke a key by its id or prefix; requests with it fail from then on.

    \b
    Examples:
      bac keys revoke e2b_1a2b3c4d
      bac keys rm KEY_ID
    """
    count = _call(_admin().revoke_key, key_id_or_prefix, data_dir=_data_dir(ctx))
    if not count:
        raise CliError(f"no active key matches {key_id_or_prefix!r}", exit_code=4)
    stdout.print(f"revoked {count} key{'s' if count != 1 else ''}")


@click.group(cls=BacGroup)
def admin() -> None:
    """Maintain this machine's server state (run where the server's data lives).

    \b
    Examples:
      bac admin gc --dry-run
    """


def _size(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


@admin.command()
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The server's data directory (default: BAC_DATA_DIR or /var/lib/bac).")
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
@click.option("--grace", "grace_s", type=click.FloatRange(min=0), default=None,
              help="Seconds an entry must have been unused before it is deleted "
                   "(default: BAC_GC_GRACE_S or 900).")
@json_option
def gc(data_dir: Path | None, dry_run: bool, grace_s: float | None, as_json: bool) -> None:
    """Delete template layers, images, manifests and uploads nothing uses any more.

    \b
    Examples:
      bac admin gc --dry-run
      bac admin gc --grace 0
    """
    report: dict[str, Any] = _call(_admin().collect_garbage, data_dir=data_dir,
                                   dry_run=dry_run, grace_s=grace_s)
    if as_json:
        print_json(report)
        return
    verb = "would delete" if dry_run else "deleted"
    if report["skipped"]:
        stdout.print(f"template storage not collected: {report['skipped']}")
    rows = [[f["kind"], f["name"], _size(f["size"]), f"{f['unreferenced_s']:.0f}s"]
            for f in report["deleted"]]
    rows += [["upload", f"{u['team_id']}/{u['files_hash'][:16]}", _size(u["size"]),
              f"{u['unused_s']:.0f}s"] for u in report["uploads"]]
    if rows:
        print_table(None, ["KIND", "NAME", "SIZE", "UNUSED FOR"], rows)
    waiting = report["waiting"]
    kept = ", ".join(f"{n} {k}s" for k, n in sorted(report["kept"].items()))
    stdout.print(f"{verb} {len(rows)} entries, {_size(report['freedBytes'])}"
                 + (f"; {len(waiting)} unused entries ({_size(sum(w['size'] for w in waiting))})"
                    " wait for their grace period" if waiting else "")
                 + (f"; kept {kept}" if kept else "")
                 + (f"; {len(report['busy'])} being built, left" if report["busy"] else ""))
