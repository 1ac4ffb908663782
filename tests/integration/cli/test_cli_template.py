"""`bac template` against a real server: a Dockerfile with apt and pip installs, COPY, ENV,
WORKDIR, USER, CMD and HEALTHCHECK builds; sandboxes from it see all of it; rebuilds hit
the cache; syntax errors and failing steps are reported as they should be."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sdk_server import BacServer

from bac import Sandbox
from bac.cli import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]

DOCKERFILE = """\
# A template the way people write them.
FROM base
ARG PYPKG=six
RUN apt-get update -qq && \\
    apt-get install -y -qq --no-install-recommends tree && \\
    rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir --break-system-packages "$PYPKG"
COPY --chown=user:user app/ /srv/app/
COPY --chmod=755 tool.sh /usr/local/bin/tool
ENV APP_MODE=test APP_PKG=$PYPKG
WORKDIR /srv/app
USER user
EXPOSE 8000
CMD ["python3", "-m", "http.server", "8000"]
HEALTHCHECK --interval=1s CMD curl -sf http://127.0.0.1:8000/ -o /dev/null
"""
LAYER_STEPS = 5  # steps as written making layers: 2 RUN, 2 COPY, USER user; ENV, WORKDIR don't


def bac_cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


@dataclass
class Built:
    name: str
    context: Path
    first: Result


@pytest.fixture(scope="module")
def built(bac_server: BacServer, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Built]:
    """The Dockerfile above, built once with `bac template build` (plain output)."""
    env = {"BAC_API_URL": bac_server.url, "BAC_API_KEY": bac_server.api_key}
    context = tmp_path_factory.mktemp("template-context")
    (context / "app").mkdir()
    (context / "app" / "main.py").write_text("print('hello from the app')\n")
    (context / "app" / "secret.env").write_text("TOKEN=do-not-ship\n")
    (context / ".dockerignore").write_text("app/*.env\n")
    (context / "tool.sh").write_text("#!/bin/sh\necho tool ran\n")
    (context / "Dockerfile").write_text(DOCKERFILE)
    name = f"cli-app-{uuid.uuid4().hex[:8]}"
    first = bac_cli(env, "template", "build", "--name", name, "--plain", str(context))
    assert first.exit_code == 0, first.output
    yield Built(name, context, first)
    bac_cli(env, "template", "delete", name)


def test_build_output_and_warnings(built: Built) -> None:
    """The build prints its steps as they run, numbered as written (ARG and the
    Dockerfile's bookkeeping are no steps; ARGs exported to RUN), warns about EXPOSE and
    HEALTHCHECK options, and prints the template's name on stdout."""
    assert built.first.stdout == f"{built.name}\n"
    err = built.first.stderr
    assert f"warning: {built.context}/Dockerfile:13: EXPOSE is ignored" in err
    assert "HEALTHCHECK options are ignored" in err
    # Layers are shared machine-wide, so the installs may come from an earlier run's cache.
    assert "[1] Step 1/7: RUN apt-get update -qq && " in err
    assert "[2] Step 2/7: RUN pip install --no-cache-dir --break-system-packages" in err
    assert "[3] Step 3/7: COPY --chown=user:user app/ /srv/app/" in err
    assert "[7] Step 7/7: USER user" in err and "Step 8/" not in err
    assert f"built {built.name} in" in err


def test_sandbox_from_the_template_has_everything(built: Built, cli_env: dict[str, str],
                                                  bac_server: BacServer) -> None:
    """A sandbox created from the template has the packages, files (owner, mode, ignored
    ones left out), env, user and workdir, and its start command serves (ready)."""
    created = bac_cli(cli_env, "sandbox", "create", "-t", built.name, "--json")
    assert created.exit_code == 0, created.output
    sandbox_id = json.loads(created.stdout)["sandboxId"]
    with Sandbox.connect(sandbox_id, **bac_server.opts()) as box:  # killed and closed
        run = box.commands.run(
            "whoami; pwd; echo $APP_MODE $APP_PKG; tree --version | cut -c1-9; "
            "python3 -c 'import six; print(six.__name__)'; python3 main.py; tool; "
            "ls -A /srv/app; stat -c '%U %a' /srv/app/main.py /usr/local/bin/tool; "
            "curl -s -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8000/main.py")
        assert run.stdout.splitlines() == [
            "user", "/srv/app", "test six", "tree v2.1", "six", "hello from the app",
            "tool ran", "main.py", "user 644", "root 755", "200"]
        start = box.commands.run("ps -o user=,args= -C python3")
        assert re.search(r"^user +python3 -m http.server 8000$", start.stdout, re.M)
        exported = box.commands.run("printenv PYPKG || echo unset")
        assert exported.stdout.strip() == "unset"  # an ARG is for the build only


def test_unchanged_rebuild_is_all_cached(built: Built, cli_env: dict[str, str]) -> None:
    """Building again with nothing changed takes every layer from the cache."""
    again = bac_cli(cli_env, "template", "build", "--name", built.name, "--json",
                    str(built.context))
    assert again.exit_code == 0, again.output
    info = json.loads(again.stdout)
    assert (info["cachedSteps"], info["steps"]) == (LAYER_STEPS, 7)
    print(f"cached rebuild: {info['durationS']} s")
    assert info["durationS"] < 15


def test_changed_file_rebuilds_from_its_copy_on(built: Built, cli_env: dict[str, str],
                                                tmp_path: Path) -> None:
    """Changing one COPY'd file rebuilds from that COPY on; the installs stay cached."""
    context = tmp_path / "ctx"
    shutil.copytree(built.context, context)
    # Unique content: layers are shared machine-wide, across runs of this test too.
    (context / "tool.sh").write_text(f"#!/bin/sh\necho tool {uuid.uuid4().hex}\n")
    result = bac_cli(cli_env, "template", "build", "--name", built.name, "--plain",
                     str(context))
    assert result.exit_code == 0, result.output
    cached = set(re.findall(r"^\[(\d+)\] Step \d+/\d+: .* CACHED$", result.stderr, re.M))
    assert cached == {"1", "2", "3"}, result.stderr


def test_syntax_error_exits_2_with_file_and_line(cli_env: dict[str, str],
                                                 tmp_path: Path) -> None:
    """A Dockerfile error exits 2 with file:line and what was expected; nothing is made on
    the server."""
    (tmp_path / "Dockerfile").write_text("FROM base\nRUN true\nCOPY only-one\n")
    name = f"cli-bad-{uuid.uuid4().hex[:8]}"
    result = bac_cli(cli_env, "template", "build", "-n", name, str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path}/Dockerfile:3: COPY needs at least a source and a destination")
    listed = bac_cli(cli_env, "template", "list", "--json")
    assert name not in json.dumps(json.loads(listed.stdout))


def test_missing_copy_source_is_named(cli_env: dict[str, str], tmp_path: Path) -> None:
    """A COPY of a file missing from the context names it and its line (exit 2)."""
    (tmp_path / "Dockerfile").write_text("FROM base\nCOPY nothere.txt /x\n")
    result = bac_cli(cli_env, "template", "build", "-n", "cli-missing", str(tmp_path))
    assert result.exit_code == 2
    assert "Dockerfile:2: COPY source 'nothere.txt' not found in the context" in result.stderr


def test_failing_run_shows_output_and_exit_code(cli_env: dict[str, str],
                                                tmp_path: Path) -> None:
    """A failing RUN fails the build (exit 1): its output once, then one line naming the
    step as written, its Dockerfile line and the exit code. Nothing is left to start
    sandboxes from; the template is listed with status error and why until `rm`."""
    (tmp_path / "Dockerfile").write_text(
        "FROM base\nRUN echo preparing\nRUN echo about to fail >&2; exit 3\nRUN echo never\n")
    name = f"cli-fail-{uuid.uuid4().hex[:8]}"
    result = bac_cli(cli_env, "template", "build", "-n", name, "--plain", str(tmp_path))
    assert result.exit_code == 1, result.output
    err = result.stderr.splitlines()
    assert err[-2:] == [
        "[2] about to fail",
        f"error: step 2 ({tmp_path}/Dockerfile:3: RUN echo about to fail >&2; exit 3): RUN "
        "failed with exit code 3"]
    assert sum("about to fail" in line for line in err) == 3  # its step line, output, error
    assert not any("Last output" in line or "never" in line.replace("RUN echo never", "")
                   for line in err)
    created = bac_cli(cli_env, "sandbox", "create", "-t", name)
    assert created.exit_code != 0
    listed = bac_cli(cli_env, "template", "list", "--json")
    mine = [t for t in json.loads(listed.stdout) if name in t["names"]]
    assert [(t["buildStatus"], t["reason"]) for t in mine] == [
        ("error", "RUN failed with exit code 3")]
    table = bac_cli(cli_env, "template", "list").stdout.splitlines()
    assert table[0].split()[-1] == "ERROR"
    assert next(line for line in table if line.startswith(name)).endswith(
        "RUN failed with exit code 3")
    removed = bac_cli(cli_env, "template", "rm", name)
    assert removed.exit_code == 0 and removed.stdout == f"deleted {name}\n"
    listed = bac_cli(cli_env, "template", "list", "--json")
    assert not [t for t in json.loads(listed.stdout) if name in t["names"]]


def test_list_logs_and_delete(built: Built, cli_env: dict[str, str]) -> None:
    """list shows the template; logs replays a build; delete NAME:TAG drops a tag, delete
    NAME the template, and a second delete exits 4."""
    listed = bac_cli(cli_env, "template", "list", "--json")
    mine = [t for t in json.loads(listed.stdout) if built.name in t["names"]]
    assert len(mine) == 1 and mine[0]["buildStatus"] == "ready"
    table = bac_cli(cli_env, "template", "list")
    assert built.name in table.stdout
    info = bac_cli(cli_env, "template", "info", built.name, "--json")
    build_id = json.loads(info.stdout)["builds"][-1]["buildId"]
    logs = bac_cli(cli_env, "template", "logs", built.name, build_id)
    assert logs.exit_code == 0 and "Step 3/" in logs.stdout
    as_json = bac_cli(cli_env, "template", "logs", built.name, build_id, "--follow", "--json")
    assert all("message" in json.loads(line) for line in as_json.stdout.splitlines())
    missing_tag = bac_cli(cli_env, "template", "delete", f"{built.name}:nope")
    assert missing_tag.exit_code == 4
    gone = bac_cli(cli_env, "template", "delete", built.name)
    assert gone.exit_code == 0 and gone.stdout == f"deleted {built.name}\n"
    again = bac_cli(cli_env, "template", "delete", built.name)
    assert again.exit_code == 4 and "no such template" in again.stderr
