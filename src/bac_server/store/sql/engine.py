"""Open the database engine: SQLite in WAL mode (the embedded default) or PostgreSQL
through asyncpg, from the URL ``BAC_DATABASE_URL`` gives; any other URL is refused here,
in one line, before anything connects."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bac_server.store.base import StoreError, StoreUnavailable

# SQLite makes these beside the database, with the database file's mode and owner.
SIDE_FILES = ("-wal", "-shm", "-journal")

SQLITE = "sqlite+aiosqlite"
POSTGRESQL = "postgresql+asyncpg"
# Seconds a new PostgreSQL connection may take (asyncpg's own default is 60): an
# unreachable server fails the start-up soon, in one line.
CONNECT_TIMEOUT_S = 10
# How long a SQLite writer waits for the write lock before the request fails (503).
BUSY_TIMEOUT_MS = 15_000


def shown(url: sa.URL) -> str:
    """The URL as messages name it: the password hidden."""
    return url.render_as_string(hide_password=True)


def parse_url(url: str) -> sa.URL:
    """``url`` as SQLAlchemy reads it, if it names an engine and driver the store runs on."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise StoreError(f"the database URL {url.split('@')[-1]!r} is not a URL such as "
                         f"{POSTGRESQL}://user:password@host/database") from None
    if parsed.drivername not in (SQLITE, POSTGRESQL):
        hint = (f"use {POSTGRESQL}://" if parsed.get_backend_name() in ("postgres", "postgresql")
                else f"the store runs on {POSTGRESQL}:// or {SQLITE}:///")
        raise StoreError(f"the database URL {shown(parsed)} names the driver "
                         f"{parsed.drivername!r}: {hint}")
    return parsed


def open_engine(url: str) -> AsyncEngine:
    """Create the engine; for SQLite, make the file (root's alone) and set the pragmas."""
    parsed = parse_url(url)
    if parsed.drivername == POSTGRESQL:
        # pre_ping: a connection the server closed (a restart, a failover) is replaced
        # before use instead of failing the request that drew it.
        engine = create_async_engine(parsed, pool_pre_ping=True,
                                     connect_args={"timeout": CONNECT_TIMEOUT_S})
        sa.event.listen(engine.sync_engine, "do_connect", _connect_or_unavailable(parsed))
        sa.event.listen(engine.sync_engine, "handle_error", _lost_is_unavailable)
        return engine
    if parsed.database and parsed.database != ":memory:":
        private_database_file(Path(parsed.database))
    engine = create_async_engine(parsed)
    sa.event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    sa.event.listen(engine.sync_engine, "handle_error", _locked_is_unavailable)
    return engine


def private_database_file(path: Path) -> None:
    """Make the SQLite file 0600 before SQLite opens it, so the WAL and shared-memory
    files it makes follow; tighten those an older server left. Refuses a symlink or a
    file of another user: the store would write secrets wherever it points."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600))
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
        try:
            # O_PATH: closing a real descriptor would drop SQLite's POSIX locks on the
            # file, were it open in this process already.
            fd = os.open(candidate, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                raise StoreError(f"the database file {candidate} is not a file of this "
                                 f"server's user (a symlink? owner uid {st.st_uid})")
            if st.st_mode & 0o077:
                # SECURITY: the store's rows are the server's alone, sealed or not; the
                # inode changed is the one just checked.
                os.chmod(f"/proc/self/fd/{fd}", 0o600)
        finally:
            os.close(fd)


def unavailable(url: sa.URL, cause: BaseException) -> StoreUnavailable:
    """The one-line error naming the database (password hidden) and why it failed."""
    text = str(cause).strip()
    why = text.splitlines()[0] if text else type(cause).__name__
    return StoreUnavailable(f"cannot use the database {shown(url)}: {why}")


def _connect_or_unavailable(url: sa.URL) -> Callable[[Any, Any, Any, Any], Any]:
    """The ``do_connect`` hook of ``url``'s engine: a server that cannot be reached is an
    OSError from asyncpg, which SQLAlchemy passes on untranslated; made the store's
    StoreUnavailable here (the API answers it 503)."""

    def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        try:
            return dialect.loaded_dbapi.connect(*cargs, **cparams)
        except (OSError, TimeoutError) as exc:
            raise unavailable(url, exc) from exc

    return connect


def _lost_is_unavailable(context: sa.engine.ExceptionContext) -> BaseException | None:
    # A connection the database dropped under a statement (not the pool's own check
    # before use, which replaces the connection itself). A statement cancelled by its
    # caller is told as a lost connection too (the connection is dropped): it stays the
    # caller's cancellation, or a task told to stop would take it for an outage and retry.
    if not isinstance(context.original_exception, Exception):
        return None
    if context.is_disconnect and not context.is_pre_ping and context.engine is not None:
        return unavailable(context.engine.url, context.original_exception)
    return None


def _locked_is_unavailable(context: sa.engine.ExceptionContext) -> BaseException | None:
    # SQLite's write lock held past the busy timeout by other writers: the request may be
    # retried (a 503 saying so), it is no fault of the server's code (not a 500).
    cause = context.original_exception
    if isinstance(cause, sqlite3.OperationalError) and "database is locked" in str(cause):
        return StoreUnavailable(f"the database is busy (its write lock was held longer than "
                                f"{BUSY_TIMEOUT_MS // 1000} s by others); retry")
    return None


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL: readers never block the writer, and a crash (kill -9) loses no committed row.
    # synchronous=NORMAL is durable against process crashes in WAL mode; only a power
    # loss can drop the last transactions, which reconciliation at start-up repairs.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.close()
