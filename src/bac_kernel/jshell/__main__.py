"""`python -m bac_kernel.jshell -f <connection file>`: the Java kernel process.

An ipykernel `Kernel` whose cells go to `JShellHost.java` (its own session, so the SIGINT
of an interrupt reaches only this process, which turns it into a `stop` for JShell: the
running cell ends and the state built so far stays). Each cell's output is forwarded as
it comes; the last expression's value is the cell's `execute_result`.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel

_HOST = Path(__file__).with_name("JShellHost.java")


class JavaKernel(Kernel):
    implementation = "bac-jshell"
    implementation_version = "1"
    language = "java"
    language_info = {  # ipykernel's class attribute
        "name": "java", "mimetype": "text/x-java-source", "file_extension": ".java",
    }
    banner = "Java (JShell)"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self._host = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", str(_HOST)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=os.getcwd(),
            start_new_session=True,
        )
        first = self._read()
        if first.get("type") != "ready":
            raise RuntimeError(f"JShell did not start: {first}")

    def _read(self) -> dict[str, Any]:
        assert self._host.stdout is not None
        line = self._host.stdout.readline()
        if not line:
            raise RuntimeError("JShell exited")
        message: dict[str, Any] = json.loads(line)
        return message

    def _publish(self, msg_type: str, content: dict[str, Any]) -> None:
        self.send_response(self.iopub_socket, msg_type, content)  # type: ignore[no-untyped-call]

    def _command(self, line: str) -> None:
        assert self._host.stdin is not None
        self._host.stdin.write(line.encode() + b"\n")
        self._host.stdin.flush()

    async def do_execute(  # type: ignore[override]
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool = False,
        *,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        self._command("eval " + base64.b64encode(code.encode()).decode())
        error: dict[str, Any] | None = None
        while True:
            try:
                message = self._read()
            except KeyboardInterrupt:
                self._command("stop")  # JShell ends the cell; its "done" still follows
                continue
            kind = message.pop("type")
            if kind == "done":
                break
            if silent:
                continue
            if kind == "stream":
                self._publish("stream", message)
            elif kind == "result":
                self._publish("execute_result", {
                    "execution_count": self.execution_count,
                    "data": {"text/plain": message["text"]}, "metadata": {},
                })
            elif kind == "error":
                error = message
                self._publish("error", message)
        if error is not None:
            return {"status": "error", "execution_count": self.execution_count, **error}
        return {"status": "ok", "execution_count": self.execution_count, "payload": [],
                "user_expressions": {}}

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        self._host.kill()
        self._host.wait()
        return {"status": "ok", "restart": restart}


if __name__ == "__main__":
    IPKernelApp.launch_instance(kernel_class=JavaKernel)
