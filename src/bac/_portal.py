"""One background event loop that runs the async SDK on behalf of the sync one.

The sync classes are thin wrappers: each call submits the async implementation's
coroutine to this loop and blocks on the result, so there is one implementation of
every behaviour. The loop lives in a daemon thread started on first use; callbacks
given to sync calls (``on_stdout``, ``on_event``...) run on that thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Portal:
    """A lazily started event loop thread that sync code can submit coroutines to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                thread = threading.Thread(target=serve, name="bac-sdk-loop", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal loop and wait for its result."""
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a sync bac call was made from a callback running on the SDK's own loop; "
                "use AsyncSandbox there, or do the work outside the callback"
            )
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted (e.g. Ctrl-C) while waiting: don't leave the call running.
            future.cancel()
            try:
                future.result(timeout=5)
            except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
                pass
            except BaseException:  # noqa: S110 - the original exception is re-raised below
                pass
            raise


PORTAL = Portal()
