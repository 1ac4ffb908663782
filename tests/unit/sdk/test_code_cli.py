"""`bac run-code` argument checks and image files; the sync twin mirrors the async API."""

from __future__ import annotations

import base64
import inspect
from pathlib import Path

from click.testing import CliRunner

from bac import AsyncSandbox, Result, Sandbox
from bac.cli import cli
from bac.cli._run_code import write_images

PNG = b"\x89PNG\r\n\x1a\nfake"


def test_write_images_decodes_base64_and_keeps_svg_text(tmp_path: Path) -> None:
    """PNG is written as decoded bytes, SVG as its text; text-only results write nothing."""
    result = Result(png=base64.b64encode(PNG).decode(), svg="<svg/>", text="<Figure>")
    paths = write_images(result, tmp_path, "cell1-1")
    assert paths == [tmp_path / "cell1-1.png", tmp_path / "cell1-1.svg"]
    assert paths[0].read_bytes() == PNG and paths[1].read_text() == "<svg/>"
    assert write_images(Result(text="2"), tmp_path, "cell1-2") == []


def test_language_and_context_together_is_usage_error() -> None:
    """--language with --context is rejected before any request (exit 2)."""
    result = CliRunner().invoke(
        cli, ["--api-key", "k", "run-code", "sbx", "1", "-l", "python", "-c", "ctx"])
    assert result.exit_code == 2
    assert "not both" in result.output


def test_sync_twin_has_the_async_signatures() -> None:
    """Every code method of Sandbox takes the same parameters as AsyncSandbox's."""
    for name in ("run_code", "create_code_context", "list_code_contexts",
                 "restart_code_context", "remove_code_context"):
        sync = list(inspect.signature(getattr(Sandbox, name)).parameters)
        async_ = list(inspect.signature(getattr(AsyncSandbox, name)).parameters)
        assert sync == async_, name
