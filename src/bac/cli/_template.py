"""``bac template``: build templates from Dockerfiles, list, inspect, delete, read logs.

``bac template build`` exits 2 on a Dockerfile error (``Dockerfile:7: ...``) before
anything reaches the server, and 1 when a step fails: the failing step's output is shown
once (streamed by the plain view; its last lines, ``TemplateBuildError.logs``, after the
live view), then one line saying which step failed and why (its exit code).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from bac import (
    AsyncTemplates,
    BuildInfo,
    BuildLogEntry,
    FromKind,
    NotFoundError,
    Template,
    TemplateBuildError,
    TemplateInfo,
)
from bac.cli._context import connection, run
from bac.cli._output import (
    BacGroup,
    CliError,
    View,
    json_option,
    listing_options,
    print_json,
    print_table,
    stderr,
    stdout,
)
from bac.cli._template_progress import BuildView


@click.group(cls=BacGroup)
def template() -> None:
    """Build templates from Dockerfiles; list, inspect and delete them.

    \b
    Examples:
      bac template build -n my-template .
      bac template ls
    """


def _build_args(values: tuple[str, ...]) -> dict[str, str]:
    """``K=V``, or ``K`` alone to take the value from this environment (as docker does)."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {value!r}",
                                     param_hint="--build-arg")
        if not sep:
            if key not in os.environ:
                raise click.BadParameter(f"{key} has no value and is not set here",
                                         param_hint="--build-arg")
            val = os.environ[key]
        out[key] = val
    return out


def _failure_line(error: TemplateBuildError) -> str:
    """``step 2 (Dockerfile:3: RUN make): RUN failed with exit code 2``, on one line."""
    reason = " ".join((error.reason or str(error)).split())
    if error.step is None or not error.step.isdigit():
        return reason  # base and finalize errors name what they are about
    where = ": ".join(str(part) for part in (error.origin, error.instruction) if part)
    return f"step {error.step} ({where}): {reason}" if where else f"step {error.step}: {reason}"


def _show_output(error: TemplateBuildError) -> None:
    """The failing step's last lines, whole (the live view showed only a few, briefly)."""
    for entry in error.logs:
        for line in entry.message.splitlines() or [""]:
            stderr.print(Text.assemble(("  │ ", "dim"), line), highlight=False)


@template.command()
@click.argument("context", default=".", type=click.Path(exists=True, file_okay=False))
@click.option("-f", "--file", "dockerfile", default=None, type=click.Path(dir_okay=False),
              help="The Dockerfile (default: CONTEXT/Dockerfile).")
@click.option("-n", "--name", required=True, help="Template name, optionally NAME:TAG.")
@click.option("--tag", "tags", multiple=True, help="Tag the build (repeat).")
@click.option("--build-arg", multiple=True, metavar="KEY=VALUE",
              help="Value of an ARG (repeat); KEY alone takes it from the environment.")
@click.option("--start-cmd", default=None, help="Start command (overrides CMD/ENTRYPOINT).")
@click.option("--ready-cmd", default=None,
              help="Command that exits 0 once a sandbox is ready (overrides HEALTHCHECK).")
@click.option("--cpu", type=click.IntRange(min=1), default=None, help="vCPUs of sandboxes.")
@click.option("--memory-mb", type=click.IntRange(min=1), default=None,
              help="Memory of sandboxes, MiB.")
@click.option("--no-cache", is_flag=True, help="Rebuild every step.")
@click.option("--from-template", "from_kind", flag_value="template", default=None,
              help="Read FROM as a Bac template name.")
@click.option("--from-image", "from_kind", flag_value="image",
              help="Read FROM as an image reference.")
@click.option("--plain", is_flag=True, help="Print log lines instead of a live display.")
@json_option
@click.pass_context
def build(ctx: click.Context, context: str, dockerfile: str | None, name: str,
          tags: tuple[str, ...], build_arg: tuple[str, ...], start_cmd: str | None,
          ready_cmd: str | None, cpu: int | None, memory_mb: int | None, no_cache: bool,
          from_kind: FromKind | None, plain: bool, as_json: bool) -> None:
    """Build a template from a Dockerfile and the files of CONTEXT (default: .).

    \b
    Examples:
      bac template build -n my-template .
      bac template build -n py:3.12 -f docker/Dockerfile --build-arg V=3.12 .
      bac sandbox create -t my-template
    """
    path = Path(dockerfile) if dockerfile else Path(context) / "Dockerfile"
    recipe = Template.from_dockerfile(path, context=context, build_args=_build_args(build_arg),
                                      from_kind=from_kind)
    if start_cmd is not None:
        recipe.start_cmd(start_cmd)
    if ready_cmd is not None:
        recipe.ready_cmd(ready_cmd)
    for warning in recipe.warnings:
        stderr.print(f"[yellow]warning:[/] {warning}", highlight=False)
    console = Console(stderr=True, soft_wrap=True)
    view = BuildView(recipe, name, console, live=console.is_terminal and not plain)

    async def body() -> BuildInfo:
        async with AsyncTemplates(**connection(ctx)) as templates:
            return await templates.build(recipe, name, tags=tags, cpu_count=cpu,
                                         memory_mb=memory_mb, skip_cache=no_cache,
                                         on_log=view.on_log)

    try:
        with view:
            info = run(body())
    except TemplateBuildError as exc:
        if view.live:
            _show_output(exc)  # the plain view printed it as it came
        raise CliError(_failure_line(exc)) from exc
    if as_json:
        print_json(info.to_json())
        return
    stderr.print(f"built [bold]{name}[/] in {info.duration_s:.1f}s "
                 f"({info.cached_steps} cached; build {info.build_id})", highlight=False)
    click.echo(name)


def _when(info: TemplateInfo) -> str:
    stamp = info.updated_at or info.created_at
    return stamp.astimezone().strftime("%Y-%m-%d %H:%M:%S") if stamp else ""


@template.command(name="list")
@listing_options
@click.pass_context
def list_(ctx: click.Context, view: View) -> None:
    """List this team's templates (and the public ones); ERROR says why one's newest build
    failed (`bac template rm` removes a template whose builds all failed).

    \b
    Examples:
      bac template ls
      bac template ls -q                         # ids only
    """

    async def body() -> list[TemplateInfo]:
        async with AsyncTemplates(**connection(ctx)) as templates:
            return await templates.list()

    found = run(body())
    view.show(["NAME", "ID", "STATUS", "CPU", "MEM MB", "BUILDS", "UPDATED", "ERROR"], [
        (", ".join(i.names) or i.template_id, i.template_id,
         i.build_status.value if i.build_status else "", i.cpu_count, i.memory_mb,
         i.build_count, _when(i), _one_line(i.reason)) for i in found],
        [info.to_json() for info in found], ids=[i.template_id for i in found],
        empty="no templates")


def _one_line(reason: str | None) -> str:
    return " ".join(reason.split()) if reason else ""


@template.command()
@click.argument("name")
@json_option
@click.pass_context
def info(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show one template and its builds.

    \b
    Examples:
      bac template info my-template
      bac template info my-template --format json
    """

    async def body() -> TemplateInfo:
        async with AsyncTemplates(**connection(ctx)) as templates:
            return await templates.get(name)

    found = run(body())
    if as_json:
        print_json(found.to_json())
        return
    rows = [(k, v) for k, v in found.to_json().items()
            if k != "builds" and (k != "reason" or v is not None)]
    rows += [(f"build {b.build_id}",
              f"{b.status.value}: {_one_line(b.reason)}" if b.reason else b.status.value)
             for b in found.builds]
    print_table(found.name, ["FIELD", "VALUE"], rows)


@template.command()
@click.argument("names", nargs=-1, required=True)
@click.pass_context
def delete(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Delete templates; NAME:TAG removes only that tag. Fails (exit 4) on a missing one.

    \b
    Examples:
      bac template rm my-template
      bac template delete my-template:old-tag
    """

    async def body() -> list[str]:
        missing: list[str] = []
        async with AsyncTemplates(**connection(ctx)) as templates:
            for name in names:
                base, _, tag = name.partition(":")
                try:
                    if tag:
                        await templates.remove_tags(base, [tag])
                    elif not await templates.delete(name):
                        raise NotFoundError(name)
                except NotFoundError:
                    missing.append(name)
                    continue
                stdout.print(f"deleted {name}", highlight=False)
        return missing

    missing = run(body())
    if missing:
        raise CliError(f"no such template: {', '.join(missing)}", exit_code=4)


@template.command()
@click.argument("name")
@click.argument("build_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the build ends.")
@json_option
@click.pass_context
def logs(ctx: click.Context, name: str, build_id: str, follow: bool, as_json: bool) -> None:
    """Print the log of build BUILD_ID of template NAME (--json: one object a line).

    \b
    Examples:
      bac template logs my-template BUILD_ID --follow
    """

    def emit(entry: BuildLogEntry) -> None:
        if as_json:
            click.echo(json.dumps(entry.to_json()))
        else:
            stamp = entry.timestamp.astimezone().strftime("%H:%M:%S")
            where = f"[{entry.step}] " if entry.step else ""
            click.echo(f"{stamp} {where}{entry.message}")

    async def body() -> None:
        async with AsyncTemplates(**connection(ctx)) as templates:
            async for entry in templates.logs(name, build_id, follow=follow):
                emit(entry)

    run(body())
