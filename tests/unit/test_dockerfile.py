"""The Dockerfile subset: every instruction into E2B build steps, with Docker's rules."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from bac import DockerfileError
from bac._template._dockerfile import DockerfileRecipe, parse_dockerfile


def parse(text: str, context: Path | str = ".", **kwargs: object) -> DockerfileRecipe:
    return parse_dockerfile(text, context=context, **kwargs)  # type: ignore[arg-type]


def steps(template: DockerfileRecipe) -> list[tuple[str, ...]]:
    return [(step.type, *step.args) for step in template.steps]


def body(template: DockerfileRecipe) -> list[tuple[str, ...]]:
    """The steps between the leading USER root/WORKDIR / and the trailing defaults."""
    found = steps(template)
    assert found[:2] == [("USER", "root"), ("WORKDIR", "/")]
    written = [step.origin is not None for step in template.steps]
    return found[2 : len(written) - written[::-1].index(True)]


def error(text: str, context: Path | str = ".", **kwargs: object) -> str:
    with pytest.raises(DockerfileError) as caught:
        parse(text, context, **kwargs)
    return str(caught.value)


# -- FROM ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("ref", "kind"), [
    ("base", "template"),
    ("code-interpreter", "template"),
    ("code-interpreter:v2", "template"),
    ("debian:bookworm", "image"),
    ("oci:/srv/images/app:1", "image"),
    ("oci-archive:app.tar", "image"),
    ("docker-archive:/tmp/app.tar", "image"),
    ("localhost:5000/team/app:1.0", "image"),
    ("python@sha256:abcd", "image"),
    ("scratch", "image"),
    ("my-app", "auto"),
    ("my-app:v3", "auto"),
])
def test_from_kinds(ref: str, kind: str) -> None:
    """FROM names a template or an image by the documented rule; bare names are left to
    the server's answer."""
    template = parse(f"FROM {ref}\n")
    assert (template.base.ref, template.base.kind) == (ref, kind)


def test_from_kind_override_and_stage_name() -> None:
    """--from-template/--from-image force the kind; a single `AS name` stage is fine."""
    assert parse("FROM team/app AS build\n", from_kind="template").base.kind == "template"
    assert parse("FROM base\n", from_kind="image").base.kind == "image"


def test_docker_defaults_then_e2b_defaults() -> None:
    """Steps start as root in /, and the template ends as `user` in /home/user unless the
    Dockerfile chose."""
    assert steps(parse("FROM base\nRUN id\n")) == [
        ("USER", "root"), ("WORKDIR", "/"), ("RUN", "id"),
        ("USER", "user"), ("WORKDIR", "/home/user")]
    chosen = steps(parse("FROM base\nUSER nobody\nWORKDIR /srv\n"))
    assert chosen[-2:] == [("USER", "nobody"), ("WORKDIR", "/srv")]


def test_from_errors_are_located() -> None:
    """A missing, second or malformed FROM, and instructions before FROM, name the line."""
    assert error("# nothing\nARG X=1\n") == "Dockerfile: no FROM instruction"
    assert error("") == "Dockerfile: no FROM instruction"
    assert error("FROM base\nRUN true\nFROM base\n").startswith(
        "Dockerfile:3: a second FROM: multi-stage builds are not supported")
    assert error("RUN true\nFROM base\n") == (
        "Dockerfile:1: RUN before FROM: only ARG may come before the first FROM")
    assert error("FROM a b\n") == (
        "Dockerfile:1: FROM needs an image or a template, optionally followed by AS NAME")
    assert error("FROM --flag=1 base\n") == "Dockerfile:1: unknown flag for FROM: --flag"


def test_from_platform_warns() -> None:
    """FROM --platform is accepted and reported as ignored."""
    template = parse("FROM --platform=linux/amd64 base\n")
    assert [str(w) for w in template.warnings] == [
        "Dockerfile:1: FROM --platform is ignored: templates use the server's architecture"]


# -- RUN -----------------------------------------------------------------------------------


def test_run_shell_form_with_continuations_and_comments() -> None:
    """Continued lines join (escape and newline dropped), comment and blank lines inside
    are skipped, and later line numbers stay right."""
    text = ("FROM base\n"
            "RUN apt-get update && \\\n"
            "    # install it\n"
            "\n"
            "    apt-get install -y jq\n"
            "RUN [\"python3\", \"-c\", \"print('a b')\"]\n"
            "RUN [not json\n"
            "COPY\n")
    assert error(text) == "Dockerfile:8: COPY needs at least a source and a destination"
    template = parse(text.replace("COPY\n", ""))
    assert body(template)[:3] == [
        ("RUN", "apt-get update &&     apt-get install -y jq"),
        ("RUN", "python3 -c 'print('\"'\"'a b'\"'\"')'"),
        ("RUN", "[not json")]
    assert [s.origin.line for s in template.steps[2:5] if s.origin] == [2, 6, 7]
    # Docker's warning for the blank line, at the instruction's last line.
    assert [str(w) for w in template.warnings] == [
        "Dockerfile:5: Empty continuation line found in: RUN apt-get update &&     "
        "apt-get install -y jq"]


def test_run_flags_and_errors() -> None:
    """RUN --mount is ignored with a warning; unknown flags and empty RUNs are errors."""
    template = parse("FROM base\nRUN --mount=type=cache,target=/root/.cache pip install x\n")
    assert body(template)[0] == ("RUN", "pip install x")
    assert "RUN --mount is ignored" in str(template.warnings[0])
    assert error("FROM base\nRUN --privileged true\n") == (
        "Dockerfile:2: unknown flag for RUN: --privileged")
    assert error("FROM base\nRUN\n") == "Dockerfile:2: RUN needs a command"
    assert error("FROM base\nRUN []\n") == "Dockerfile:2: RUN needs a command"


def test_run_heredocs() -> None:
    """A bare heredoc is the script (run by its #! interpreter); a heredoc after a command
    is kept for the shell; an unterminated one names its line."""
    script = parse("FROM base\nRUN <<EOF\nset -e\necho hi\nEOF\nRUN true\n")
    assert body(script)[:2] == [("RUN", "set -e\necho hi\n"), ("RUN", "true")]
    python = parse("FROM base\nRUN <<'EOF'\n#!/usr/bin/env python3\nprint(1)\nEOF\n")
    assert body(python)[0] == ("RUN", "/usr/bin/env python3 <<'BAC_SCRIPT_EOF'\n"
                                      "#!/usr/bin/env python3\nprint(1)\nBAC_SCRIPT_EOF\n")
    piped = parse("FROM base\nRUN cat <<-EOF > /etc/x\n\tone\n\tEOF\n")
    assert body(piped)[0] == ("RUN", "cat <<-EOF > /etc/x\none\nEOF\n")
    assert error("FROM base\nRUN true\nRUN cat <<EOF\nno end\n") == (
        "Dockerfile:3: heredoc <<EOF is never terminated (expected a line 'EOF')")


# -- COPY / ADD ----------------------------------------------------------------------------


def test_copy_sources_destinations_and_flags() -> None:
    """One COPY step per source; destinations resolve against WORKDIR; --chown expands
    variables and --chmod is padded octal."""
    template = parse("FROM base\nARG OWNER=app\nWORKDIR /srv\n"
                     "COPY --chown=${OWNER}:staff --chmod=755 a.py b/ lib/\n"
                     "COPY c.txt .\nCOPY /d.txt ./sub/d.txt\nCOPY [\"e f.txt\", \"/abs\"]\n"
                     "COPY --link g ../up/\n")
    assert body(template)[1:] == [
        ("COPY", "a.py", "/srv/lib/", "app:staff", "0755"),
        ("COPY", "b", "/srv/lib/", "app:staff", "0755"),
        ("COPY", "c.txt", "/srv/", "", ""),
        ("COPY", "d.txt", "/srv/sub/d.txt", "", ""),
        ("COPY", "e f.txt", "/abs", "", ""),
        ("COPY", "g", "/up/", "", ""),
    ]
    # A source is one word, whatever its variables hold (BuildKit splits no value).
    spaced = parse("FROM base\nARG F='a b'\nCOPY $F /x/\n")
    assert body(spaced)[0] == ("COPY", "a b", "/x/", "", "")


@pytest.mark.parametrize(("line", "message"), [
    ("COPY a", "COPY needs at least a source and a destination"),
    ("ADD", "ADD needs at least a source and a destination"),
    ("COPY a b /dest", "COPY with several sources needs a destination directory ending in /"),
    ("COPY ../secret /x", "COPY source '../secret' is outside the build context"),
    ("COPY --from=build /app /app", "COPY --from: multi-stage builds are not supported"),
    ("COPY --chmod=u+x a /a", "COPY --chmod needs octal permission bits like 0755, got 'u+x'"),
    ("COPY --chown= a /a", "COPY --chown needs USER[:GROUP]"),
    ("COPY --exclude=*.md . /a", "COPY --exclude: it is not supported; use .dockerignore"),
    ("ADD https://example.com/x.tgz /x", "ADD from a URL is not supported"),
    ("COPY http://example.com/x /x", "COPY from a URL is not supported"),
    ("ADD --checksum=sha256:00 a /a", "ADD --checksum: ADD from a URL is not supported"),
])
def test_copy_errors(line: str, message: str) -> None:
    """Each COPY/ADD mistake gets its own located message."""
    assert error(f"FROM base\n{line}\n").startswith(f"Dockerfile:2: {message}")


def test_add_local_archive_is_unpacked(tmp_path: Path) -> None:
    """ADD of a local tar.gz copies it to a staging dir and unpacks it with tar; ADD of a
    plain file is a COPY."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo("x.txt")
        tar.addfile(info, io.BytesIO(b""))
    (tmp_path / "site.tgz").write_bytes(archive.getvalue())
    (tmp_path / "plain.txt").write_text("plain")
    template = parse("FROM base\nADD site.tgz /var/www\nADD plain.txt /etc/\n", tmp_path)
    assert body(template)[:3] == [
        ("COPY", "site.tgz", "/tmp/.bac-add-2/", "", ""),
        ("RUN", "mkdir -p /var/www && tar -xf /tmp/.bac-add-2/site.tgz -C /var/www && "
                "rm -rf /tmp/.bac-add-2/", "root"),
        ("COPY", "plain.txt", "/etc/", "", ""),
    ]


def test_copy_heredoc_writes_the_file() -> None:
    """COPY <<EOF /path becomes a root RUN that writes exactly the body there."""
    template = parse("FROM base\nCOPY --chmod=600 <<EOF /etc/app.conf\nkey = 'v'\nEOF\n")
    (kind, command, user) = body(template)[0]
    assert (kind, user) == ("RUN", "root")
    assert command == ("mkdir -p /etc && printf %s a2V5ID0gJ3YnCg== | base64 -d > "
                       "/etc/app.conf && chmod 0600 /etc/app.conf")


# -- ENV / ARG -----------------------------------------------------------------------------


def test_env_forms_and_substitution() -> None:
    """ENV k=v (quotes, several pairs, old values within one line) and ENV k v; names the
    Dockerfile never declared stay as written for the build to substitute."""
    template = parse('FROM base\nENV A=1 B="two words" C=$A\nENV A=2 D=$A\n'
                     "ENV LEGACY  some   value\nENV PATH=/opt/bin:$PATH E=${A}x\n")
    assert body(parse("FROM base\nENV P='$5' Q=\\$HOME\n"))[0] == (
        "ENV", "P", "\\$5", "Q", "\\$HOME")
    assert body(template)[:4] == [
        ("ENV", "A", "1", "B", "two words", "C", "$A"),
        ("ENV", "A", "2", "D", "1"),
        ("ENV", "LEGACY", "some   value"),
        ("ENV", "PATH", "/opt/bin:$PATH", "E", "2x"),
    ]


@pytest.mark.parametrize(("line", "message"), [
    ("ENV", "ENV needs NAME=value (or NAME value)"),
    # What BuildKit's parser and lexer find wrong is said in their words.
    ("ENV A=1 B", "Syntax error - can't find = in \"B\". Must be of the form: name=value"),
    ("ENV ONLY", "ENV must have two arguments"),
    ("ENV =x", "invalid ENV name ''"),
    ('ENV A="open', "failed to process '\"open': unexpected end of statement while looking "
                    "for matching double-quote"),
    ("ENV A='open", "failed to process \"'open\": unexpected end of statement while looking "
                    "for matching single-quote"),
    ("ENV A=${B", "failed to process '${B': syntax error: missing '}'"),
    ("ENV A=${}", "failed to process '${}': syntax error: bad substitution"),
    ("ENV A=${B#x}", "unsupported substitution ${B#...}: B is not declared"),
    ("ARG", "ARG needs a name, optionally NAME=default"),
    ("ARG 1X=2", "invalid ARG name '1X'"),
])
def test_env_and_arg_errors(line: str, message: str) -> None:
    """Malformed ENV/ARG and substitutions name the line and the problem."""
    assert error(f"FROM base\n{line}\n").startswith(f"Dockerfile:2: {message}")


def test_syntax_errors_come_before_conversion_errors() -> None:
    """As in BuildKit, the whole file is parsed before any instruction is converted: a
    syntax error further down is the one reported."""
    assert error("FROM base\nUSER a b\nENV A=1 B\n").startswith(
        "Dockerfile:3: Syntax error - can't find = in \"B\"")
    assert error('FROM base\nRUN ["a", 1]\n') == (
        "Dockerfile:2: Only strings are supported in JSON arrays")


def test_substitution_modifiers() -> None:
    """${V:-x} ${V-x} ${V:+x} ${V+x} follow the shell for set, empty and unset V;
    ${V:?msg} fails with msg."""
    template = parse("FROM base\nARG SET=v\nARG EMPTY=\n"
                     "ARG A=${SET:-d}.${EMPTY:-d}.${NONE:-d} B=${SET-d}.${EMPTY-d}.${NONE-d}\n"
                     "ARG C=${SET:+a}.${EMPTY:+a}.${EMPTY+a}.${NONE+a}\nRUN x\n")
    assert body(template) == [("RUN", "export SET=v EMPTY='' A=v.d.d B=v..d C=a..a.; x")]
    assert error("FROM base\nARG E=\nWORKDIR ${E:?must be set}\n") == (
        "Dockerfile:3: failed to process '${E:?must be set}': E: must be set")


def test_pattern_substitutions_of_declared_names() -> None:
    """BuildKit's ${V#p} ${V%p} ${V/p/r} ${V//p/r} work on the names the Dockerfile
    declares (the build cannot do them on the others: see test_env_and_arg_errors)."""
    template = parse("FROM base\nARG V=hello.tar.gz\n"
                     "ENV A=${V%.tar.gz} B=${V#hel} C=${V/l/L} D=${V//l/L}\n")
    assert body(template)[0] == ("ENV", "A", "hello", "B", "lo.tar.gz", "C", "heLlo.tar.gz",
                                 "D", "heLLo.tar.gz")


def test_arg_scope_and_build_args() -> None:
    """An ARG before FROM serves FROM only, until declared again after it (inheriting the
    value); --build-arg overrides defaults; unused build args are reported."""
    text = ("ARG BASE=base\nARG VER=1\nFROM $BASE\nRUN echo $VER\nWORKDIR /v$VER\n"
            "ARG VER\nWORKDIR /v$VER\nARG MODE=dev\nRUN make $MODE\n")
    template = parse(text)
    assert template.base.ref == "base"
    assert body(template)[:4] == [
        ("RUN", "echo $VER"), ("WORKDIR", "/v"), ("WORKDIR", "/v1"),
        ("RUN", "export VER=1 MODE=dev; make $MODE")]
    overridden = parse(text, build_args={"BASE": "code-interpreter", "MODE": "prod",
                                         "UNUSED": "1", "HTTP_PROXY": "http://p"})
    assert overridden.base.ref == "code-interpreter"
    assert body(overridden)[3] == ("RUN", "export VER=1 MODE=prod; make $MODE")
    assert [str(w) for w in overridden.warnings] == [
        "build args not consumed by any ARG: UNUSED"]


def test_env_values_keep_literal_dollars_literal() -> None:
    """In ENV a `$` made literal (quotes, escapes, a `$` before a quote, an ARG's value) is
    sent as \\$, and a reference left for the build has its word unquoted."""
    template = parse("FROM base\nARG P='$x y'\n"
                     "ENV A=$P B=$HOME'$HOME'\"$HOME\" C=${HOME:-'a b'} D=$\"x\"\n")
    assert body(template)[0] == ("ENV", "A", "\\$x y", "B", "$HOME\\$HOME$HOME",
                                 "C", "${HOME:-a b}", "D", "\\$x")


def test_env_wins_over_arg() -> None:
    """ENV of the same name overrides an ARG, in substitutions and in RUN's environment."""
    template = parse("FROM base\nARG X=arg\nENV X=env\nWORKDIR /$X\nRUN echo $X\n")
    assert body(template)[1:3] == [("WORKDIR", "/env"), ("RUN", "echo $X")]


# -- WORKDIR / USER / start and ready ------------------------------------------------------


def test_workdir_and_user() -> None:
    """Relative WORKDIRs chain; USER takes one word, variables allowed."""
    template = parse("FROM base\nENV U=app\nWORKDIR /srv\nWORKDIR a/b\nWORKDIR ..\nUSER $U\n")
    assert body(template)[1:] == [("WORKDIR", "/srv"), ("WORKDIR", "/srv/a/b"),
                                  ("WORKDIR", "/srv/a"), ("USER", "app")]
    assert error("FROM base\nUSER a b\n") == "Dockerfile:2: USER needs exactly one argument, got 2"
    assert error("FROM base\nWORKDIR\n") == (
        "Dockerfile:2: WORKDIR needs exactly one argument, got 0")


def test_workdir_is_the_whole_line_and_flags_are_checked() -> None:
    """As in Docker, WORKDIR's path is the rest of the line, blanks included; a flag on an
    instruction that has none is an error, not a word."""
    assert body(parse("FROM base\nWORKDIR /my dir\n"))[0] == ("WORKDIR", "/my dir")
    assert error("FROM base\nWORKDIR --x /srv\n") == (
        "Dockerfile:2: unknown flag for WORKDIR: --x")
    assert error("FROM base\nCMD --help\n") == "Dockerfile:2: unknown flag for CMD: --help"


@pytest.mark.parametrize(("lines", "start"), [
    ('CMD ["python3", "app.py"]', "python3 app.py"),
    ("CMD python3 app.py --port $PORT", "python3 app.py --port $PORT"),
    ('ENTRYPOINT ["/entry.sh"]\nCMD ["--flag", "a b"]', "/entry.sh --flag 'a b'"),
    ('ENTRYPOINT ["/entry.sh"]\nCMD run it', "/entry.sh /bin/sh -c 'run it'"),
    ("ENTRYPOINT /entry.sh shell\nCMD ignored", "/entry.sh shell"),
    ('CMD ["first"]\nCMD ["last"]', "last"),
])
def test_start_command(lines: str, start: str) -> None:
    """CMD and ENTRYPOINT combine into the start command as Docker combines them."""
    assert parse(f"FROM base\n{lines}\n").start_command == start


def test_healthcheck_is_the_ready_command() -> None:
    """HEALTHCHECK CMD (shell or exec form) is the ready command; NONE clears it; options
    are ignored with a warning."""
    shell = parse("FROM base\nHEALTHCHECK --interval=5s CMD curl -sf localhost:8000\n")
    assert shell.ready_command == "curl -sf localhost:8000"
    assert "HEALTHCHECK options are ignored" in str(shell.warnings[0])
    exec_form = parse('FROM base\nHEALTHCHECK CMD ["test", "-f", "/ready"]\n')
    assert exec_form.ready_command == "test -f /ready"
    assert parse("FROM base\nHEALTHCHECK CMD true\nHEALTHCHECK NONE\n").ready_command is None
    assert error("FROM base\nHEALTHCHECK curl x\n") == (
        "Dockerfile:2: HEALTHCHECK needs CMD <command> or NONE")
    assert parse("FROM base\n").start_command is None


# -- other instructions, directives --------------------------------------------------------


def test_ignored_refused_and_unknown_instructions() -> None:
    """EXPOSE/LABEL/VOLUME/STOPSIGNAL/MAINTAINER warn; SHELL/ONBUILD and unknown ones fail."""
    template = parse("FROM base\nexpose 80\nLABEL a=b\nVOLUME /data\nSTOPSIGNAL TERM\n"
                     "MAINTAINER me\n")
    assert [(w.origin.line if w.origin else 0, w.message.split()[0])
            for w in template.warnings] == [
        (2, "EXPOSE"), (3, "LABEL"), (4, "VOLUME"), (5, "STOPSIGNAL"), (6, "MAINTAINER")]
    assert error('FROM base\nSHELL ["/bin/bash", "-c"]\n').startswith(
        "Dockerfile:2: SHELL is not supported")
    assert error("FROM base\nONBUILD RUN x\n").startswith("Dockerfile:2: ONBUILD is not supported")
    assert error("FROM base\nCOPYY a b\n") == (
        "Dockerfile:2: unknown instruction 'COPYY' (did you mean COPY?)")
    assert error("FROM base\nFROBNICATE x\n") == "Dockerfile:2: unknown instruction 'FROBNICATE'"


@pytest.mark.parametrize(("text", "message"), [
    ("FRM base\n", "Dockerfile:1: unknown instruction 'FRM' (did you mean FROM?)"),
    ("frm base\nRUN true\n", "Dockerfile:1: unknown instruction 'FRM' (did you mean FROM?)"),
    ("FROM base\nWORKDR /srv\n", "Dockerfile:2: unknown instruction 'WORKDR' (did you mean "
                                 "WORKDIR?)"),
    ("ARG V=1\nRUNN true\nFROM base\n", "Dockerfile:2: unknown instruction 'RUNN' (did you "
                                        "mean RUN?)"),
])
def test_misspelt_instruction_is_named_with_the_nearest_one(text: str, message: str) -> None:
    """A misspelt instruction is reported as unknown with the nearest valid one, also
    before FROM (not as an instruction out of place)."""
    assert error(text) == message


def test_escape_directive() -> None:
    """`# escape=`` makes the backtick the continuation and escape character, so
    backslashes are plain path characters."""
    template = parse("# escape=`\n# syntax=docker/dockerfile:1\nFROM base\n"
                     "RUN echo a `\n    b\nCOPY dir\\file.txt C:\\dest\\\n")
    assert body(template)[:2] == [("RUN", "echo a     b"),
                                  ("COPY", "dir\\file.txt", "/C:\\dest\\", "", "")]
    assert error("# escape=x\nFROM base\n") == (
        "Dockerfile:1: invalid escape token 'x' does not match ` or \\")
    assert error("# escape=`\n# escape=`\nFROM base\n") == (
        "Dockerfile:2: only one escape parser directive can be used")
    # A directive after the first comment is only a comment.
    assert body(parse("# hello\n# escape=`\nFROM base\nRUN a \\\n  b\n"))[0] == (
        "RUN", "a   b")


def test_file_name_in_errors() -> None:
    """Errors carry the Dockerfile's own path."""
    with pytest.raises(DockerfileError) as caught:
        parse_dockerfile("FROM base\nUSER\n", file="deploy/Dockerfile.prod")
    assert str(caught.value) == "deploy/Dockerfile.prod:2: USER needs exactly one argument, got 0"
    assert (caught.value.file, caught.value.line) == ("deploy/Dockerfile.prod", 2)
    assert caught.value.status_code is None
