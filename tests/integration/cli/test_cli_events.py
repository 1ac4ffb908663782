"""``bac events`` and ``bac webhooks`` against a real server, and the SDK's ``Events``
under them: a sandbox's events in order, a webhook made, listed, refused, deleted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result
from sdk_server import BacServer

import bac
from bac.cli import cli

pytestmark = [pytest.mark.root, pytest.mark.slow]


def bac_cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def test_bac_events_lists_a_sandboxs_lifecycle(cli_env: dict[str, str],
                                               bac_server: BacServer) -> None:
    with bac.Sandbox.create(timeout=60, api_key=bac_server.api_key,
                            api_url=bac_server.url) as sandbox:
        sandbox.set_timeout(90)
        sandbox.kill()
    shown = bac_cli(cli_env, "events", sandbox.sandbox_id, "--json")
    assert shown.exit_code == 0, shown.output
    types = [e["type"] for e in json.loads(shown.stdout)]
    assert types == ["sandbox.lifecycle.created", "sandbox.lifecycle.updated",
                     "sandbox.lifecycle.killed"]
    table = bac_cli(cli_env, "events", sandbox.sandbox_id, "--type",
                    "sandbox.lifecycle.killed")
    assert table.exit_code == 0 and "killed" in table.stdout and "created" not in table.stdout
    with bac.Events(api_key=bac_server.api_key, api_url=bac_server.url) as events:
        newest = events.sandbox(sandbox.sandbox_id, limit=1)
        assert [e.type for e in newest] == ["sandbox.lifecycle.killed"]
        assert newest[0].sandbox_id == sandbox.sandbox_id
        with pytest.raises(bac.InvalidArgumentError):
            events.sandbox(sandbox.sandbox_id, limit=500)
    with bac.Events(api_key=bac_server.other_team_key, api_url=bac_server.url) as other, \
            pytest.raises(bac.NotFoundError):
        other.sandbox(sandbox.sandbox_id)
    missing = bac_cli(cli_env, "events", "nosuch")
    assert missing.exit_code == 4 and "nosuch" in missing.stderr


def test_bac_webhooks_create_list_delete(cli_env: dict[str, str]) -> None:
    made = bac_cli(cli_env, "webhooks", "create", "http://8.8.8.8:9/hook", "--event",
                   "sandbox.lifecycle.checkpointed", "--secret", "s3cret", "--name", "cli",
                   "--json")
    assert made.exit_code == 0, made.output
    hook = json.loads(made.stdout)
    assert hook["url"] == "http://8.8.8.8:9/hook" and "secret" not in made.stdout
    listed = bac_cli(cli_env, "webhooks", "list", "--json")
    assert [h["id"] for h in json.loads(listed.stdout)] == [hook["id"]]
    assert "cli" in bac_cli(cli_env, "webhooks", "list").stdout
    logged = bac_cli(cli_env, "webhooks", "deliveries", hook["id"], "--json")
    assert (logged.exit_code, json.loads(logged.stdout)) == (0, [])
    refused = bac_cli(cli_env, "webhooks", "create", "http://127.0.0.1:9/hook", "--event",
                      "sandbox.lifecycle.created", "--secret", "s3cret")
    assert refused.exit_code == 2 and "refused" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    no_secret = bac_cli({k: v for k, v in cli_env.items() if k != "BAC_WEBHOOK_SECRET"},
                        "webhooks", "create", "http://8.8.8.8/", "--event",
                        "sandbox.lifecycle.created")
    assert no_secret.exit_code == 2 and "secret" in no_secret.stderr
    assert bac_cli(cli_env, "webhooks", "delete", hook["id"]).exit_code == 0
    again = bac_cli(cli_env, "webhooks", "delete", hook["id"])
    assert again.exit_code == 4 and hook["id"] in again.stderr
