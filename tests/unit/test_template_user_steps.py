"""A build shows the steps as written: one per Dockerfile instruction or builder call (a
COPY of several sources is one), none for the Dockerfile's bookkeeping, and the server's
log (numbered in the steps sent) is shown in those terms."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bac import BuildLogEntry, BuildState, BuildStatus, Template
from bac._template._build import TAIL_LINES, failure

FIVE_LINES = 'FROM base\nRUN echo hi\nCOPY a.txt b.txt /srv/\nENV X=1\nCMD ["python3"]\n'


def entry(step: str | None, message: str, level: str = "info") -> BuildLogEntry:
    return BuildLogEntry(datetime.now(UTC), level, message, step)


def dockerfile(tmp_path: Path, text: str = FIVE_LINES) -> Template:
    (tmp_path / "Dockerfile").write_text(text)
    return Template.from_dockerfile(tmp_path / "Dockerfile")


def shown(template: Template, log: list[BuildLogEntry]) -> list[tuple[str | None, str]]:
    steps = template.user_steps
    return [(e.step, e.message) for line in log for e in steps.show(line)]


def test_a_five_line_dockerfile_is_three_steps(tmp_path: Path) -> None:
    """FROM, RUN, COPY of two sources, ENV and CMD: three steps between base and
    finalize (8 are sent), each with its Dockerfile line, as written."""
    template = dockerfile(tmp_path)
    assert len(template.steps) == 8
    assert [(s.number, s.label, s.origin.line if s.origin else None)
            for s in template.user_steps.steps] == [
        ("1", "RUN echo hi", 2), ("2", "COPY a.txt b.txt /srv/", 3), ("3", "ENV X=1", 4)]


def test_the_servers_log_is_shown_in_the_steps_as_written(tmp_path: Path) -> None:
    """The server's log of that build (as a Bac server writes it) loses the bookkeeping
    steps' lines, and each line is shown under its step as written."""
    server_log = [
        entry(None, "Building template t (tid), build b"),
        entry("base", "FROM base"), entry("base", "using template base"),
        entry("1", "Step 1/8: USER root"), entry("2", "Step 2/8: WORKDIR /"),
        entry("3", "Step 3/8: RUN echo hi"), entry("3", "hi"),
        entry("3", "done in 0.1s, layer 93 (0 KiB)"),
        entry("4", "Step 4/8: COPY a.txt /srv/ CACHED"),
        entry("5", "Step 5/8: COPY b.txt /srv/"), entry("5", "done in 0.4s, layer 60 (8 KiB)"),
        entry("6", "Step 6/8: ENV X=1"),
        entry("7", "Step 7/8: USER user"), entry("7", "done in 0.1s, layer a2 (0 KiB)"),
        entry("8", "Step 8/8: WORKDIR /home/user"),
        entry("finalize", "finalize"),
    ]
    template = dockerfile(tmp_path)
    assert shown(template, server_log) == [
        (None, "Building template t (tid), build b"),
        ("base", "FROM base"), ("base", "using template base"),
        ("1", "Step 1/3: RUN echo hi"), ("1", "hi"), ("1", "done in 0.1s, layer 93 (0 KiB)"),
        ("2", "Step 2/3: COPY a.txt b.txt /srv/"), ("2", "COPY a.txt /srv/ CACHED"),
        ("2", "COPY b.txt /srv/"), ("2", "done in 0.4s, layer 60 (8 KiB)"),
        ("3", "Step 3/3: ENV X=1"),
        ("finalize", "done in 0.1s, layer a2 (0 KiB)"),
        ("finalize", "finalize"),
    ]


def test_cached_counts_steps_whose_every_part_was_cached() -> None:
    """A builder call is one step however many sources it copies; it counts as cached
    only when every part came from the cache."""
    template = Template(context="/ctx").run("a").copy(["x", "y"], "/d/").run("b")
    steps = template.user_steps
    assert [s.label for s in steps.steps] == ["RUN a", "COPY x y /d/", "RUN b"]
    for line in [entry("1", "Step 1/4: RUN a CACHED"), entry("2", "Step 2/4: COPY x /d/ CACHED"),
                 entry("3", "Step 3/4: COPY y /d/"), entry("4", "Step 4/4: RUN b CACHED")]:
        steps.show(line)
    assert steps.cached == 2


def test_an_output_line_like_a_step_line_is_output(tmp_path: Path) -> None:
    """Only a step's first `Step k/N:` line begins it: the same text in its output stays."""
    template = dockerfile(tmp_path)
    assert shown(template, [entry("3", "Step 3/8: RUN echo hi"), entry("3", "Step 3/8: hi")]) \
        == [("1", "Step 1/3: RUN echo hi"), ("1", "Step 3/8: hi")]


def test_a_failure_names_the_step_as_written_with_its_output_only(tmp_path: Path) -> None:
    """The failing step sent maps to its instruction and line; the error keeps that step's
    output (its last TAIL_LINES lines), not its heading, its error line or other steps'."""
    template = dockerfile(tmp_path, "FROM base\nRUN echo ok\nRUN seq 100; exit 3\n")
    steps = template.user_steps
    log = [entry("3", "Step 3/6: RUN echo ok"), entry("3", "ok"),
           entry("4", "Step 4/6: RUN seq 100; exit 3"),
           *(entry("4", str(n)) for n in range(1, 101)),
           entry("4", "RUN failed with exit code 3", "error")]
    seen = [line for item in log for line in steps.show(item)]
    state = BuildState("tpl", "b1", BuildStatus.ERROR, [], "RUN failed with exit code 3", "4")
    error = failure(steps, state, seen)
    assert (error.step, error.origin and error.origin.line) == ("2", 3)
    assert error.instruction == "RUN seq 100; exit 3"
    assert [e.message for e in error.logs] == [str(n) for n in range(101 - TAIL_LINES, 101)]
    assert str(error) == (f"build b1 of tpl failed: step 2 ({tmp_path}/Dockerfile:3: "
                          "RUN seq 100; exit 3): RUN failed with exit code 3")
