"""`bac template build` before the server: Dockerfile errors exit 2 with file:line, and
the build view's step states and plain lines."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from bac import BuildLogEntry, Template
from bac.cli import cli
from bac.cli._template_progress import BuildView

# Nothing listens there: these commands must fail before talking to a server.
OFFLINE = {"BAC_API_URL": "http://127.0.0.1:9", "BAC_API_KEY": "unused"}


def build(context: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["template", "build", "-n", "t", *args, str(context)],
                                env=OFFLINE)
    return result.exit_code, result.stderr


@pytest.mark.parametrize(("dockerfile", "message"), [
    ("FROM base\nRUN true\nCOPY one\n", "Dockerfile:3: COPY needs at least a source and a "
                                       "destination"),
    ("FROM base\nFROM base\n", "Dockerfile:2: a second FROM: multi-stage builds"),
    ("FROM base\nADD https://x.test/a.tgz /a\n", "Dockerfile:2: ADD from a URL is not"),
    ("FROM base\nCOPY nothere /x\n", "Dockerfile:2: COPY source 'nothere' not found"),
    ("FRM base\n", "Dockerfile:1: unknown instruction 'FRM' (did you mean FROM?)"),
])
def test_recipe_errors_exit_2(tmp_path: Path, dockerfile: str, message: str) -> None:
    """A recipe error exits 2 with one `error: file:line: ...` line, offline."""
    (tmp_path / "Dockerfile").write_text(dockerfile)
    code, err = build(tmp_path)
    assert code == 2
    assert err.startswith(f"error: {tmp_path}/{message}")
    assert len(err.strip().splitlines()) == 1


def test_missing_dockerfile_and_bad_build_args(tmp_path: Path) -> None:
    """A missing -f file and a --build-arg without a value (unset here) are usage errors."""
    code, err = build(tmp_path, "-f", str(tmp_path / "Nope"))
    assert code == 2 and "cannot read" in err
    (tmp_path / "Dockerfile").write_text("FROM base\n")
    code, err = build(tmp_path, "--build-arg", "SURELY_UNSET_VARIABLE_42")
    assert code == 2 and "SURELY_UNSET_VARIABLE_42 has no value" in err
    code, err = build(tmp_path, "--build-arg", "=x")
    assert code == 2 and "expected KEY=VALUE" in err


def entry(step: str | None, message: str, level: str = "info") -> BuildLogEntry:
    return BuildLogEntry(datetime.now(UTC), level, message, step)


def test_plain_view_prefixes_every_line() -> None:
    """The plain view prints each line of each message with its step."""
    out = io.StringIO()
    view = BuildView(Template().run("a"), "demo", Console(file=out, width=200), live=False)
    with view:
        view.on_log(entry("1", "Step 1/1: RUN a\nsecond line"))
        view.on_log(entry(None, "uploaded"))
    assert out.getvalue().splitlines() == ["[1] Step 1/1: RUN a", "[1] second line",
                                           "uploaded"]


def test_step_states_follow_the_log() -> None:
    """A line for a step starts it and finishes the ones before; CACHED and error lines
    mark it; the render lists every step of the recipe."""
    template = Template().run("one").run("two").run("three")
    view = BuildView(template, "demo", Console(file=io.StringIO()), live=False)
    with pytest.raises(RuntimeError), view:
        view.on_log(entry("base", "FROM base"))
        view.on_log(entry("1", "Step 1/3: RUN one CACHED"))
        view.on_log(entry("2", "Step 2/3: RUN two"))
        view.on_log(entry("3", "Step 3/3: RUN three"))
        view.on_log(entry("3", "exit code 1", "error"))
        view.on_log(entry("finalize", "never"))
        raise RuntimeError("the build failed")
    states = {step.name: step.state for step in view.steps}
    # The step still running when the build raised is marked failed too.
    assert states == {"base": "done", "1": "cached", "2": "done", "3": "failed",
                      "finalize": "failed"}
    assert view.cached == 1
    recorded = Console(file=io.StringIO(), width=100, record=True)
    recorded.print(view.render())
    text = recorded.export_text()
    assert "Building demo" in text and "1/3 RUN one" in text and "cached" in text
