"""Any port a process in the sandbox listens on is reachable through the gateway, by headers
and by host name, and the SDK's get_host names it."""

from __future__ import annotations

import time

import httpx
from bac_process import ServerProcess
from e2b import Sandbox


def test_user_server_on_any_port(server: ServerProcess, sbx: Sandbox) -> None:
    """A python http.server on port 8000 answers through the gateway both ways of routing."""
    sbx.files.write("/home/user/site/index.html", "<p>from the sandbox</p>")
    sbx.commands.run("cd /home/user/site && python3 -m http.server 8000", background=True)
    headers = {"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "8000"}
    deadline = time.monotonic() + 30
    response = httpx.get(server.url + "/index.html", headers=headers)
    while response.status_code == 502 and time.monotonic() < deadline:
        # Nothing tells the host when the server inside has bound its port: poll.
        assert "port is not open" in response.json()["message"]
        time.sleep(0.1)
        response = httpx.get(server.url + "/index.html", headers=headers)
    assert response.status_code == 200
    assert response.text == "<p>from the sandbox</p>"
    host = sbx.get_host(8000)
    # The domain and the port the server was reached on: the address works as it is (a
    # client resolving *.localhost to this machine needs nothing else).
    assert host == f"8000-{sbx.sandbox_id}.localhost:{server.port}"
    by_host = httpx.get(server.url + "/index.html", headers={"Host": host})
    assert by_host.text == "<p>from the sandbox</p>"
