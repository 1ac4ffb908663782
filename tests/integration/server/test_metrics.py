"""Prometheus ``/metrics`` of a real server (in this process, on a clock the test moves):
real sandboxes through the official SDK, scraped over HTTP on the metrics' own listener
with its bearer token, parsed with the Prometheus client's own parser."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from e2b import AsyncSandbox
from e2b.exceptions import NotFoundException
from inprocess_server import InProcessServer, inprocess_server
from prometheus_client.parser import text_string_to_metric_families

from bac import AsyncTemplates, Template, TemplateBuildError

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "scrape-token-for-tests"
TEAMS = ("alpha", "beta", "gamma", "delta", "epsilon")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[InProcessServer]:
    async with inprocess_server("metrics", teams=TEAMS, metrics_token=TOKEN,
                                metrics_max_teams=2) as srv:
        yield srv


async def _scrape(server: InProcessServer, token: str | None = TOKEN) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.get(server.metrics_url, headers=headers)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
           **labels: str) -> float:
    """The sum over the series of ``name`` whose labels include ``labels``."""
    return sum(value for (found, have), value in samples.items()
               if found == name and set(labels.items()) <= set(have))


async def test_a_scrape_needs_the_token(server: InProcessServer) -> None:
    assert (await _scrape(server, None)).status_code == 401
    assert (await _scrape(server, "wrong")).status_code == 401
    answer = await _scrape(server)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    async with httpx.AsyncClient(timeout=30) as client:  # not on the API's port
        on_api = await client.get(f"{server.url}/metrics")
    assert "bac_sandboxes" not in on_api.text


async def test_a_create_a_pause_gateway_traffic_and_spend_show(server: InProcessServer) -> None:
    before = _samples((await _scrape(server)).text)
    sbx = await AsyncSandbox.create(timeout=600, **server.opts())
    try:
        assert (await sbx.commands.run("echo hello")).stdout == "hello\n"
        with pytest.raises(NotFoundException):
            await sbx.files.list("/no/such/dir")  # a unary RPC's Connect error
        with pytest.raises(Exception, match="nosuchuser"):
            await sbx.commands.run("true", user="nosuchuser")  # a stream's end-of-stream error
        await server.advance(100)  # 100 s of a running 2-vCPU, 512 MiB sandbox
        await sbx.pause()
        after = _samples((await _scrape(server)).text)
    finally:
        await sbx.kill()

    def grew(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert grew("bac_sandbox_create_seconds_count", template="base") == 1
    assert grew("bac_sandbox_pause_seconds_count") == 1
    assert _value(after, "bac_sandboxes", state="paused", template="base") == 1
    assert grew("bac_gateway_requests_total", protocol="http", status="2xx") >= 1
    assert grew("bac_gateway_requests_total", protocol="http", status="4xx") == 1
    assert grew("bac_gateway_bytes_total", direction="out") > 0
    assert grew("bac_gateway_bytes_total", direction="in") > 0
    assert grew("bac_envd_rpc_errors_total", code="not_found") == 1, after
    assert grew("bac_envd_rpc_errors_total") == 2
    vcpu = grew("bac_sandbox_vcpu_seconds_total")
    assert 200 <= vcpu < 210, vcpu  # 2 vCPUs x 100 simulated seconds (+ the real rest)
    assert 50 <= grew("bac_sandbox_memory_gib_seconds_total") < 53
    assert not any("sandbox" in dict(labels) for (_, labels) in after)  # no id labels


async def test_team_labels_stay_bounded(server: InProcessServer) -> None:
    """Five teams, a cap of two: two keep their own series, the rest are "other"."""
    made = []
    try:
        for team in range(len(TEAMS)):
            made.append(await AsyncSandbox.create(timeout=600, **server.opts(team)))
        samples = _samples((await _scrape(server)).text)
    finally:
        for sbx in made:
            await sbx.kill()
    teams = {dict(labels)["team"] for (name, labels) in samples if name == "bac_sandboxes"}
    assert "other" in teams and len(teams) <= 3, teams
    assert _value(samples, "bac_sandboxes", state="running") == len(TEAMS)
    spenders = {dict(labels)["team"] for (name, labels) in samples
                if name == "bac_sandbox_vcpu_seconds_total"}
    assert len(spenders) <= 3, spenders


async def test_template_builds_are_counted_by_outcome(server: InProcessServer) -> None:
    """A build that succeeds and one whose RUN fails: one each, with their durations."""
    before = _samples((await _scrape(server)).text)
    tag = uuid.uuid4().hex[:8]
    opts = {"api_url": server.url, "api_key": server.keys[0]}
    async with AsyncTemplates(**opts) as templates:
        await templates.build(Template("base").run(f"echo {tag} > /tmp/tag"), f"ok-{tag}")
        with pytest.raises(TemplateBuildError):
            await templates.build(Template("base").run(f"echo {tag}; exit 7"), f"no-{tag}")
    after = _samples((await _scrape(server)).text)
    for outcome in ("ready", "error"):
        name = "bac_template_build_seconds_count"
        assert _value(after, name, outcome=outcome) - _value(before, name, outcome=outcome) == 1
    assert _value(after, "bac_template_build_seconds_sum", outcome="ready") > 0
