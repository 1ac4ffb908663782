"""Template's Python builder and the build request body it makes (E2B's wire shape)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bac import (
    BuildState,
    BuildStatus,
    DockerfileError,
    InvalidArgumentError,
    Template,
    TemplateBuildError,
)
from bac._template._build import failure
from bac._template._models import BuildLogEntry


def test_builder_steps_to_wire() -> None:
    """Each builder call is one E2B step; COPY carries user, padded mode and files hash;
    start and ready commands ride along."""
    template = (Template("code-interpreter", context="/ctx")
                .run("apt-get update", user="root")
                .run(["pip install a", "pip install b"])
                .copy(["app.py", Path("lib")], "/app/", user="user:user", mode=0o755)
                .env({"A": "1"}, B="2")
                .workdir("/app").user("user")
                .start_cmd("python3 app.py", ready_cmd="curl -sf localhost:8000"))
    body = template.to_wire({2: "h" * 64, 3: "g" * 64})
    assert body == {
        "fromTemplate": "code-interpreter",
        "force": False,
        "startCmd": "python3 app.py",
        "readyCmd": "curl -sf localhost:8000",
        "steps": [
            {"type": "RUN", "args": ["apt-get update", "root"], "force": False},
            {"type": "RUN", "args": ["pip install a && pip install b"], "force": False},
            {"type": "COPY", "args": ["app.py", "/app/", "user:user", "0755"], "force": False,
             "filesHash": "h" * 64},
            {"type": "COPY", "args": ["lib", "/app/", "user:user", "0755"], "force": False,
             "filesHash": "g" * 64},
            {"type": "ENV", "args": ["A", "1", "B", "2"], "force": False},
            {"type": "WORKDIR", "args": ["/app"], "force": False},
            {"type": "USER", "args": ["user"], "force": False},
        ],
    }
    assert template.context == Path("/ctx")


def test_from_image_with_registry_login() -> None:
    """from_image sends fromImage, with fromImageRegistry only when credentials are set."""
    plain = Template.from_image("debian:bookworm").to_wire({})
    assert plain == {"fromImage": "debian:bookworm", "steps": [], "force": False}
    private = Template.from_image("127.0.0.1:5000/app:1", username="u", password="p")
    assert private.to_wire({})["fromImageRegistry"] == {
        "type": "registry", "username": "u", "password": "p"}
    with pytest.raises(InvalidArgumentError, match="both username and password"):
        Template.from_image("x/y", username="u")


def test_skip_cache_forces_later_steps_or_everything() -> None:
    """skip_cache() before any step forces the whole build; later, only the steps after."""
    assert Template().skip_cache().run("a").to_wire({})["force"] is True
    partial = Template().run("a").skip_cache().run("b").to_wire({})
    assert partial["force"] is False
    assert [s["force"] for s in partial["steps"]] == [False, True]
    assert Template().run("a").to_wire({}, force=True)["force"] is True


@pytest.mark.parametrize("call", [
    lambda t: t.run(""),
    lambda t: t.copy("/etc/passwd", "/x"),
    lambda t: t.copy("../up", "/x"),
    lambda t: t.copy([], "/x"),
    lambda t: t.copy("a", "/x", mode=0o17777),
    lambda t: t.env({"A=B": "1"}),
    lambda t: t.workdir(" "),
    lambda t: t.user(""),
    lambda t: t.start_cmd(""),
])
def test_builder_rejects_bad_input(call: object) -> None:
    """Empty commands, sources outside the context, bad modes and names are refused."""
    with pytest.raises(InvalidArgumentError):
        call(Template())  # type: ignore[operator]


def test_constructor_choices() -> None:
    """The default base is the `base` template; template and image are exclusive."""
    assert Template().base.ref == "base"
    with pytest.raises(InvalidArgumentError, match="not both"):
        Template("base", from_image="debian:bookworm")


def test_from_dockerfile_reads_file_and_defaults_context(tmp_path: Path) -> None:
    """from_dockerfile uses the Dockerfile's directory as context and its own
    Dockerfile.dockerignore; unreadable files are clear errors."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM debian:bookworm\nCOPY . /src/\nCMD [\"sleep\", \"inf\"]\n")
    (tmp_path / "Dockerfile.dockerignore").write_text("*.log\n")
    template = Template.from_dockerfile(dockerfile, build_args={"X": "1"})
    assert template.context == tmp_path.resolve()
    assert template.dockerignore_file == tmp_path / "Dockerfile.dockerignore"
    assert template.start_command == "sleep inf"
    assert template.base.kind == "image"
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        Template.from_dockerfile(tmp_path / "missing")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InvalidArgumentError, match="not UTF-8"):
        Template.from_dockerfile(tmp_path / "bin")
    with pytest.raises(DockerfileError, match="Dockerfile:1"):
        (tmp_path / "Dockerfile").write_text("FORM base\n")
        Template.from_dockerfile(dockerfile)


def entry(step: str, message: str, level: str = "info") -> BuildLogEntry:
    from datetime import UTC, datetime

    return BuildLogEntry(datetime.now(UTC), level, message, step)


def test_failure_points_at_the_dockerfile_line(tmp_path: Path) -> None:
    """A failed step maps back to its Dockerfile line and instruction, with its output as
    the tail (from the server's reason when no line was seen); a base failure is base's."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM base\nRUN true\nRUN pip install nope\n")
    template = Template.from_dockerfile(dockerfile)
    reason_logs = [entry("3", "Step 3/6: RUN true CACHED"),
                   entry("4", "Step 4/6: RUN pip install nope"),
                   entry("4", "ERROR: no matching distribution"),
                   entry("4", "RUN failed with exit code 1", "error")]
    state = BuildState("tpl", "b1", BuildStatus.ERROR, [], "RUN failed with exit code 1", "4",
                       reason_logs)
    error = failure(template.user_steps, state, [])
    assert isinstance(error, TemplateBuildError)
    assert str(error) == (f"build b1 of tpl failed: step 2 ({dockerfile}:3: RUN pip install "
                          "nope): RUN failed with exit code 1")
    assert [e.message for e in error.logs] == ["ERROR: no matching distribution"]
    base = failure(template.user_steps, BuildState("tpl", "b1", BuildStatus.ERROR, [],
                                                   "no such image", "base"), [])
    assert str(base) == "build b1 of tpl failed: step base: no such image"
