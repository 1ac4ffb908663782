"""The operator's CA certificates inside sandboxes: a site of the fake internet answers
HTTPS with a certificate signed by a CA of the session's own (as a TLS-inspecting proxy
does). A sandbox of a backend told that CA (``ca_certificates``) reaches it with curl,
Python's default context, requests-style tools (``REQUESTS_CA_BUNDLE``) and after a
rebuild of the bundle by Debian's ``update-ca-certificates``; a sandbox of a backend told
nothing is refused by the certificate check, as it should be."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from backend_harness import SandboxFactory, backend_and_factory, private_data_dir
from fake_internet import FakeInternet

from bac_server.backends.base import TemplateImage
from bac_server.host import remove_tree

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

URL = "https://allowed.test/hello"
PY_FETCH = ("import json, urllib.request\n"
            f"print(json.load(urllib.request.urlopen({URL!r}, timeout=20))['path'])\n")


@pytest_asyncio.fixture(loop_scope="session")
async def trusting(template: TemplateImage, internet: FakeInternet
                   ) -> AsyncIterator[SandboxFactory]:
    data_dir = private_data_dir().with_name(f"ca-{os.getpid()}")
    try:
        async with backend_and_factory(template, data_dir=data_dir, pool_size=0,
                                       dns_upstreams=(internet.dns_server,),
                                       ca_certificates=internet.ca_pem) as (_, factory):
            yield factory
    finally:
        remove_tree(data_dir)


async def test_a_sandbox_trusts_the_operators_ca(trusting: SandboxFactory,
                                                 internet: FakeInternet) -> None:
    sbx = await trusting()
    curl = await sbx.run(f"curl -sS --max-time 20 {URL}")
    assert curl.exit_code == 0, curl.stderr
    assert '"path": "/hello"' in curl.stdout
    python = await sbx.python(PY_FETCH, user="user")
    assert python.exit_code == 0, python.stderr
    assert python.stdout.strip() == "/hello"
    env = await sbx.run("echo $SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS")
    assert env.stdout.split() == ["/etc/ssl/certs/ca-certificates.crt"] * 2 + [
        "/run/bac/ca.pem"]
    # Added once, as a file update-ca-certificates keeps: a rebuild inside still trusts it.
    count = await sbx.run("grep -c 'BEGIN CERTIFICATE' /usr/local/share/ca-certificates/"
                          "bac/operator-0.crt")
    assert count.stdout.strip() == "1"
    rebuilt = await sbx.run("update-ca-certificates --fresh >/dev/null 2>&1 && "
                            f"curl -sS --max-time 20 {URL}", user="root")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    # The CA file is the operator's, read-only inside: root there cannot change it.
    tamper = await sbx.run("echo x >> /run/bac/ca.pem", user="root")
    assert tamper.exit_code != 0


async def test_a_sandbox_told_nothing_refuses_the_certificate(
        make_sandbox: SandboxFactory, internet: FakeInternet) -> None:
    sbx = await make_sandbox()
    curl = await sbx.run(f"curl -sS --max-time 20 {URL}")
    assert curl.exit_code == 60, (curl.exit_code, curl.stderr)  # peer certificate refused
    python = await sbx.python(PY_FETCH, user="user")
    assert python.exit_code != 0 and "CERTIFICATE_VERIFY_FAILED" in python.stderr
    env = await sbx.run("echo ${SSL_CERT_FILE:-unset}")
    assert env.stdout.strip() == "unset"
