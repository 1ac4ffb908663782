"""A template's ENV in real sandboxes: ``ENV PATH=/opt/venv/bin:$PATH`` reaches the
SDK's login-shell commands as user and root (a command's own PATH still wins), and ENV
values expand Docker's ``${NAME:-word}``/``${NAME:+word}`` forms against the build's env."""

from __future__ import annotations

import pytest
from engine_fixtures import (
    Log,
    SandboxFactory,
    Uploads,
    backend,
    backend_factory,
    data_dir,
    engine,
    log,
    make_sandbox,
    no_templates,
    store,
    template,
    uploads,
)

from bac_server.templates import (
    BuildEngine,
    BuildRecipe,
    EnvStep,
    FromTemplate,
    RunStep,
    TemplateBuildError,
    TemplateStore,
)

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]
# Fixtures, visible to pytest through this module.
__all__ = ["backend", "backend_factory", "data_dir", "engine", "log", "make_sandbox", "store",
           "template", "uploads"]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VENV_PATH = f"/opt/venv/bin:{DEFAULT_PATH}"
TOOL = "printf '#!/bin/sh\\necho venv tool\\n' > /opt/venv/bin/venvtool && chmod 755 " \
       "/opt/venv/bin/venvtool"
RECIPE = BuildRecipe(
    source=FromTemplate("base"),
    steps=(
        RunStep(f"python3 -m venv /opt/venv && {TOOL}", user="root"),
        EnvStep((("PATH", "/opt/venv/bin:$PATH"),)),
        # As the Dockerfile parser sends them: undeclared names raw, literal dollars as \$.
        EnvStep((("VENV", "${VIRTUAL_ENV:-/opt/venv}"), ("EMPTY", ""),
                 ("FALLBACK", "${EMPTY:-empty}${EMPTY-unset}"), ("MODE", "${MODE:+on}"),
                 ("HAS_PATH", "${PATH:+yes}"), ("LITERAL", "\\$HOME and ${HOME"))),
        RunStep('test "$(command -v python3)" = /opt/venv/bin/python3 && venvtool'),
    ),
    start_cmd='echo "$PATH" > /tmp/start-path; exec sleep infinity',
    ready_cmd="test -s /tmp/start-path",
)


async def test_env_path_reaches_sdk_commands(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads, log: Log,
        make_sandbox: SandboxFactory) -> None:
    """ENV PATH=/opt/venv/bin:$PATH is the PATH of build steps, the start command and
    commands.run as user and as root; a per-command PATH wins over it."""
    built = await engine.build(RECIPE, files=uploads, resolve_template=no_templates, log=log)
    assert dict(built.config.env)["PATH"] == VENV_PATH
    box = await make_sandbox(template=await store.built(built.digest, "venv-path"))
    probe = "echo $PATH; which python3 venvtool; venvtool"
    for user in ("user", "root"):
        result = await box.sdk.commands.run(probe, user=user)
        assert result.stdout.splitlines() == [
            VENV_PATH, "/opt/venv/bin/python3", "/opt/venv/bin/venvtool", "venv tool"], user
        mine = await box.sdk.commands.run("echo $PATH; command -v venvtool || echo none",
                                          user=user, envs={"PATH": "/usr/bin:/bin"})
        assert mine.stdout.splitlines() == ["/usr/bin:/bin", "none"], user
    started = await box.sdk.commands.run("cat /tmp/start-path")
    assert started.stdout.strip() == VENV_PATH


async def test_env_values_expand_dockerfile_forms(
        engine: BuildEngine, store: TemplateStore, uploads: Uploads, log: Log,
        make_sandbox: SandboxFactory) -> None:
    """${N:-w}, ${N-w}, ${N:+w} of names unset, empty or set, and \\$ kept literal, as
    Docker expands them; sandboxes see the expanded values."""
    built = await engine.build(RECIPE, files=uploads, resolve_template=no_templates, log=log)
    expected = {"VENV": "/opt/venv", "EMPTY": "", "FALLBACK": "empty", "MODE": "",
                "HAS_PATH": "yes", "LITERAL": "$HOME and ${HOME"}
    env = dict(built.config.env)
    assert {name: env[name] for name in expected} == expected
    box = await make_sandbox(template=await store.built(built.digest, "venv-forms"))
    shown = await box.sdk.commands.run(
        'printf "%s|" "$VENV" "$EMPTY" "$FALLBACK" "$MODE" "$HAS_PATH" "$LITERAL"')
    assert shown.stdout == "|".join(expected.values()) + "|"


async def test_required_variable_fails_the_build(engine: BuildEngine, uploads: Uploads,
                                                 log: Log) -> None:
    """${N:?message} of an unset name fails the build at that ENV step, naming it."""
    recipe = BuildRecipe(source=FromTemplate("base"),
                         steps=(EnvStep((("TOKEN", "${API_TOKEN:?set API_TOKEN}"),)),))
    with pytest.raises(TemplateBuildError, match="API_TOKEN: set API_TOKEN"):
        await engine.build(recipe, files=uploads, resolve_template=no_templates, log=log)
    assert any("API_TOKEN: set API_TOKEN" in message for message in log.at("1"))
