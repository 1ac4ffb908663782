"""`bac template build` before the server: Dockerfile errors exit 2 with file:line, and
the build view's step states and plain lines."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from bac import BuildLogEntry, Template, TemplateBuildError
from bac._template._errors import Origin
from bac.cli import cli
from bac.cli._template import _failure_line
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


def test_plain_view_leaves_the_builds_error_to_the_commands_last_line() -> None:
    """The plain view prints a step's output as it comes but not the error line the
    command ends on; an error line the failure does not repeat is still printed."""
    out = io.StringIO()
    error = TemplateBuildError("RUN failed with exit code 3", template_id="t", build_id="b",
                               step="1")
    view = BuildView(Template().run("make"), "demo", Console(file=out, width=200), live=False)
    with pytest.raises(TemplateBuildError), view:
        view.on_log(entry("1", "Step 1/1: RUN make"))
        view.on_log(entry("1", "make: *** [all] Error 3"))
        view.on_log(entry("1", "RUN failed with exit code 3", "error"))
        raise error
    assert out.getvalue().splitlines() == ["[1] Step 1/1: RUN make",
                                           "[1] make: *** [all] Error 3"]
    out = io.StringIO()
    view = BuildView(Template().run("make"), "demo", Console(file=out, width=200), live=False)
    with pytest.raises(RuntimeError), view:
        view.on_log(entry(None, "the server stopped", "error"))
        raise RuntimeError("lost the server")
    assert out.getvalue().splitlines() == ["the server stopped"]


def test_failure_line_names_the_step_as_written() -> None:
    """The command's last line: the step, its Dockerfile line and instruction, and the
    reason (on one line, never cut); base and finalize errors say what they are about."""
    def line(step: str, reason: str, origin: Origin | None = None,
             instruction: str | None = None) -> str:
        return _failure_line(TemplateBuildError(reason, template_id="t", build_id="b",
                                                step=step, origin=origin,
                                                instruction=instruction))

    assert line("2", "RUN failed with exit code 3", Origin("Dockerfile", 3), "RUN make") == (
        "step 2 (Dockerfile:3: RUN make): RUN failed with exit code 3")
    assert line("1", "COPY x /d/: files missing", None, "COPY x /d/") == (
        "step 1 (COPY x /d/): COPY x /d/: files missing")
    assert line("base", "no template or image named 'nosuchbase'") == (
        "no template or image named 'nosuchbase'")
    assert line("finalize", "finalize failed:\n  no python3") == (
        "finalize failed: no python3")


def test_a_step_cached_in_part_is_running_again() -> None:
    """A step with several parts (a COPY of several sources) is cached only while every
    part said so: a part that runs makes it run."""
    view = BuildView(Template(context="/ctx").copy(["a", "b"], "/d/"), "demo",
                     Console(file=io.StringIO()), live=False)
    with view:
        view.on_log(entry("1", "Step 1/1: COPY a b /d/"))
        view.on_log(entry("1", "COPY a /d/ CACHED"))
        assert view.steps[1].state == "cached"
        view.on_log(entry("1", "COPY b /d/"))
        assert view.steps[1].state == "running"
        view.on_log(entry("finalize", "finalize"))
    assert [step.state for step in view.steps] == ["waiting", "done", "done"]
