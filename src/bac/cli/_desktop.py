"""``bac desktop``: a desktop sandbox's screen from the command line.

``open`` starts the stream inside when it is not running and prints the viewer's URL (a
short-lived stream token for this sandbox in it, no password), or opens it in the local
browser with ``--browser``; ``screenshot`` writes the screen to a PNG file.
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from bac.cli._context import in_sandbox
from bac.cli._output import BacGroup, CliError, json_option, print_json


@click.group(cls=BacGroup)
def desktop() -> None:
    """See and show a desktop sandbox's screen (sandboxes of the `desktop` template).

    \b
    Examples:
      bac desktop open $SBX                 # prints the viewer's URL (valid 5 minutes)
      bac desktop open $SBX --browser       # opens it in this machine's browser
      bac desktop screenshot $SBX screen.png
    """


@desktop.command("open")
@click.argument("sandbox_id")
@click.option("--ttl", type=click.IntRange(min=1), default=None, metavar="SECONDS",
              help="How long the URL admits a viewer (default: the server's, 5 minutes;"
                   " at most an hour).")
@click.option("--browser", is_flag=True, help="Open the URL in this machine's web browser.")
@json_option
@click.pass_context
def open_(ctx: click.Context, sandbox_id: str, ttl: int | None, browser: bool,
          as_json: bool) -> None:
    """Start SANDBOX_ID's desktop stream if needed and print (or open) its viewer's URL.

    \b
    Examples:
      bac desktop open $SBX
      bac desktop open $SBX --ttl 3600 --browser
    """

    stream = in_sandbox(ctx, sandbox_id, lambda box: box.desktop.stream(ttl))
    if as_json:
        print_json({"url": stream.url, "port": stream.port,
                    "expiresAt": stream.expires_at.isoformat()})
    else:
        click.echo(stream.url)
    if browser and not webbrowser.open(stream.url):
        raise CliError("no web browser could be opened here; the URL is above")


@desktop.command()
@click.argument("sandbox_id")
@click.argument("output", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.pass_context
def screenshot(ctx: click.Context, sandbox_id: str, output: Path) -> None:
    """Write SANDBOX_ID's screen to OUTPUT as a PNG image.

    \b
    Examples:
      bac desktop screenshot $SBX screen.png
    """

    png = in_sandbox(ctx, sandbox_id, lambda box: box.desktop.screenshot())
    output.write_bytes(png)
    click.echo(f"{output} ({len(png)} bytes)", err=True)
