"""The `base-full` built-in: base plus the tools agents reach for (a C tool chain with
make, Node.js with npm, jq, vim), built on request and started like any template.

Builds it through the real path (``python -m bac_server.prepare --template base-full``:
apt in a chroot, npm from the host; instant once built on this machine), then runs each
tool in a sandbox made from it through a real server and Bac's SDK.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import TEMPLATES_DIR, ServerProcess, running

import bac

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    built = subprocess.run(
        [sys.executable, "-m", "bac_server.prepare", "--data-dir", TEMPLATES_DIR,
         "--template", "base-full"], capture_output=True, text=True, timeout=900, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    with running("base-full") as srv:
        srv.create_key("full")
        yield srv


def test_base_full_has_what_agents_reach_for(server: ServerProcess) -> None:
    with bac.Sandbox.create("base-full", api_key=server.keys[0], api_url=server.url) as sbx:
        # A native build from source, as `pip install` of a C extension would do.
        sbx.files.write("/home/user/hi.c", '#include <stdio.h>\nint main(void) '
                        '{ puts("compiled"); return 0; }\n')
        sbx.files.write("/home/user/Makefile", "hi: hi.c\n\tcc -O2 -o hi hi.c\n")
        made = sbx.commands.run("cd ~ && make -s && ./hi")
        assert made.stdout == "compiled\n"
        assert sbx.commands.run("c++ --version && pkg-config --version").exit_code == 0
        node = sbx.commands.run("node -e 'console.log(6 * 7)' && npm --version")
        assert node.stdout.splitlines()[0] == "42" and node.stdout.splitlines()[1][0].isdigit()
        assert sbx.commands.run("echo '{\"a\": [1, 2]}' | jq -c .a").stdout == "[1,2]\n"
        edited = sbx.commands.run("vim -Es -c 'normal! iedited' -c 'wq' /tmp/v.txt "
                                  "&& cat /tmp/v.txt")
        assert edited.stdout == "edited\n"
        # Still base underneath: its user, sudo and Python.
        assert sbx.commands.run("id -un && sudo -n true && python3 -c 'print(1)'").stdout \
            == "user\n1\n"

