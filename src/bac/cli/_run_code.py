"""``bac run-code``: run a cell in a code-interpreter sandbox, streaming what it prints.

Stdout and stderr are written as they arrive; then the text of each result is printed,
and with ``--save-images DIR`` its PNG, JPEG and SVG representations are written to
files whose paths are printed. A cell that raised prints its traceback and exits 1;
every other failure is one ``error:`` line with the usual exit codes.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
from pathlib import Path
from typing import Any

import click

from bac import Execution, OutputMessage, Result
from bac.cli._context import attach, run
from bac.cli._output import CliError, json_option, print_json

# Image representations that can be written as files: (attribute, extension, base64?).
IMAGE_FORMATS = (("png", "png", True), ("jpeg", "jpg", True), ("svg", "svg", False))


def _emit(message: OutputMessage) -> None:
    target = sys.stderr if message.error else sys.stdout
    target.write(message.line)
    target.flush()


def write_images(result: Result, directory: Path, stem: str) -> list[Path]:
    """Write the result's images to ``directory/stem.<ext>``; the paths written."""
    saved: list[Path] = []
    for attribute, extension, encoded in IMAGE_FORMATS:
        value: str | None = getattr(result, attribute)
        if value is None:
            continue
        path = directory / f"{stem}.{extension}"
        try:
            path.write_bytes(base64.b64decode(value) if encoded else value.encode())
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot save the {attribute} result to {path}: {exc}") from exc
        saved.append(path)
    return saved


def has_image(result: Result) -> bool:
    return any(getattr(result, attribute) is not None for attribute, _, _ in IMAGE_FORMATS)


def print_results(execution: Execution, image_dir: Path | None) -> list[Path]:
    """Print each result's text (or where its images went); the image files written."""
    saved: list[Path] = []
    for index, result in enumerate(execution.results, start=1):
        stem = f"cell{execution.execution_count or 0}-{index}"
        if image_dir is not None and has_image(result):
            for path in write_images(result, image_dir, stem):
                click.echo(str(path))
                saved.append(path)
        elif has_image(result):
            click.echo(f"[{', '.join(result.formats())} result: use --save-images DIR to "
                       "save its images]", err=True)
        elif result.text is not None:
            click.echo(result.text)
    return saved


def print_error(execution: Execution) -> None:
    error = execution.error
    assert error is not None
    text = error.traceback or f"{error.name}: {error.value}"
    # Tracebacks keep the kernel's ANSI colours; they only help a terminal.
    click.echo(text if sys.stderr.isatty() else click.unstyle(text), err=True)


def read_code(code: str) -> str:
    if code != "-":
        return code
    return sys.stdin.read()


async def execute(
    ctx: click.Context, sandbox_id: str, code: str, language: str | None,
    context: str | None, limit: float, stream: bool,
) -> Execution:
    box = await attach(ctx, sandbox_id)
    try:
        return await box.run_code(
            code, language=language, context=context, timeout=limit,
            on_stdout=_emit if stream else None, on_stderr=_emit if stream else None,
        )
    finally:
        await box.aclose()


@click.command("run-code")
@click.argument("sandbox_id")
@click.argument("code")
@click.option("-l", "--language", default=None,
              help="python (default), bash, javascript, typescript or r.")
@click.option("-c", "--context", "context_id", default=None, metavar="ID",
              help="Run in this context (from the SDK's create_code_context).")
@click.option("--save-images", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Write PNG/JPEG/SVG results to files in DIR.")
@click.option("--timeout", type=click.FloatRange(min=0), default=300, show_default=True,
              help="Interrupt the cell after this many seconds (0: never).")
@json_option
@click.pass_context
def run_code(
    ctx: click.Context, sandbox_id: str, code: str, language: str | None,
    context_id: str | None, save_images: Path | None, timeout: float, as_json: bool,
) -> None:
    """Run CODE (or '-' for stdin) in the code-interpreter sandbox SANDBOX_ID.

    \b
    Examples:
      bac run-code $SBX 'import sys; print(sys.version)'
      echo 'x = 41; x + 1' | bac run-code $SBX -
      bac run-code $SBX --language bash 'ls /' --json
    """
    if language and context_id:
        raise click.UsageError("give --language or --context, not both")
    if save_images is not None:
        save_images.mkdir(parents=True, exist_ok=True)
    execution = run(execute(ctx, sandbox_id, read_code(code), language, context_id, timeout,
                            stream=not as_json))
    if as_json:
        data: dict[str, Any] = dataclasses.asdict(execution)
        if save_images is not None:
            saved: list[str] = []
            for index, result in enumerate(execution.results, start=1):
                stem = f"cell{execution.execution_count or 0}-{index}"
                saved.extend(str(p) for p in write_images(result, save_images, stem))
            data["saved_images"] = saved
        print_json(data)
    else:
        print_results(execution, save_images)
        if execution.error is not None:
            print_error(execution)
    ctx.exit(1 if execution.error is not None else 0)
