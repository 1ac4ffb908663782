"""``run_code`` and the code-context methods, mixed into ``AsyncSandbox`` and ``Sandbox``.

They work on sandboxes made from the ``code-interpreter`` template (alias
``code-interpreter-v1``), whose kernel server listens on port 49999; on any other
sandbox they raise :class:`~bac.SandboxUnreachableError` saying nothing listens there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bac import _errors as e
from bac._code import DEFAULT_RUN_TIMEOUT, Callback, CodeClient, context_path
from bac._code_results import Context, Execution, ExecutionError, OutputMessage, Result
from bac._portal import PORTAL

if TYPE_CHECKING:
    from bac._sandbox import AsyncSandbox

class AsyncCodeMethods:
    """Code-interpreter methods of :class:`AsyncSandbox`."""

    _code: CodeClient

    async def run_code(
        self,
        code: str,
        language: str | None = None,
        context: Context | str | None = None,
        on_stdout: Callback[OutputMessage] | None = None,
        on_stderr: Callback[OutputMessage] | None = None,
        on_result: Callback[Result] | None = None,
        on_error: Callback[ExecutionError] | None = None,
        envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_RUN_TIMEOUT,  # noqa: ASYNC109 - E2B API
        request_timeout: float | None = None,
    ) -> Execution:
        """Run ``code`` in ``context`` (a context or its id), else the default context of
        ``language`` (Python when neither is given).

        Callbacks (plain or coroutine functions) fire as the kernel produces output,
        before the cell ends. An exception raised by the code is not raised here: it is
        ``execution.error``. ``timeout`` bounds the whole execution (0/None: none);
        when it passes, the kernel is interrupted and :class:`~bac.TimeoutError` raised.
        """
        if language is not None and context is not None:
            raise e.InvalidArgumentError("give either language or context, not both")
        if timeout is not None and timeout < 0:
            raise e.InvalidArgumentError(f"timeout must be >= 0 seconds, got {timeout}")
        body: dict[str, Any] = {
            "code": code,
            "context_id": context.id if isinstance(context, Context) else context,
            "language": language,
            "env_vars": envs,
        }
        return await self._code.execute(
            body, timeout, request_timeout, on_stdout, on_stderr, on_result, on_error
        )

    async def create_code_context(
        self, cwd: str | None = None, language: str | None = None,
        request_timeout: float | None = None,
    ) -> Context:
        """A new kernel with its own state (Python unless ``language``), in ``cwd``."""
        body = {key: value for key, value in (("language", language), ("cwd", cwd)) if value}
        answer = await self._code.request(
            "POST", "/contexts", "create_code_context", request_timeout, body
        )
        return Context.from_json(answer)

    async def list_code_contexts(self, request_timeout: float | None = None) -> list[Context]:
        """Every context of the sandbox's kernel server."""
        answer = await self._code.request("GET", "/contexts", "list_code_contexts",
                                          request_timeout)
        if not isinstance(answer, list):
            raise e.ServerError(f"list_code_contexts: expected a list, got {answer!r:.200}")
        return [Context.from_json(item) for item in answer]

    async def restart_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        """Restart the context's kernel: same id and cwd, all state lost."""
        await self._code.request("POST", context_path(context, "/restart"),
                                 "restart_code_context", request_timeout)

    async def remove_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        """Stop the context's kernel for good."""
        await self._code.request("DELETE", context_path(context), "remove_code_context",
                                 request_timeout)


class CodeMethods:
    """Blocking twins of :class:`AsyncCodeMethods`; callbacks run on the SDK's loop thread."""

    _inner: AsyncSandbox

    def run_code(
        self,
        code: str,
        language: str | None = None,
        context: Context | str | None = None,
        on_stdout: Callback[OutputMessage] | None = None,
        on_stderr: Callback[OutputMessage] | None = None,
        on_result: Callback[Result] | None = None,
        on_error: Callback[ExecutionError] | None = None,
        envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_RUN_TIMEOUT,
        request_timeout: float | None = None,
    ) -> Execution:
        """Run ``code``; see :meth:`AsyncSandbox.run_code`."""
        return PORTAL.run(self._inner.run_code(
            code, language, context, on_stdout, on_stderr, on_result, on_error, envs,
            timeout, request_timeout,
        ))

    def create_code_context(
        self, cwd: str | None = None, language: str | None = None,
        request_timeout: float | None = None,
    ) -> Context:
        return PORTAL.run(self._inner.create_code_context(cwd, language, request_timeout))

    def list_code_contexts(self, request_timeout: float | None = None) -> list[Context]:
        return PORTAL.run(self._inner.list_code_contexts(request_timeout))

    def restart_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        PORTAL.run(self._inner.restart_code_context(context, request_timeout))

    def remove_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        PORTAL.run(self._inner.remove_code_context(context, request_timeout))
