"""Signed-in sessions, kept on the server: the browser holds only a random name for one.

A session is found by the SHA-256 of its cookie value, so the table holds no value a
browser could send back, and a lookup's time says nothing about how much of a guess was
right. Each session has its own CSRF token (sent back on every change) and ends after
``idle_s`` without a request or ``max_s`` after sign-in, whichever comes first, or at
sign-out. Sessions live in the server's memory: a restart signs everyone out (fails
closed). The table is bounded; past ``limit`` the least recently used session ends.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from bac_server.control import Team

COOKIE = "bac_session"


@dataclass(frozen=True)
class Principal:
    """Who signed in: a team (by one of its API keys) or the operator (every team).

    ``api_key`` stays on the server: each request checks it again, so a revoked key ends
    its sessions (within the key service's cache time)."""

    team: Team | None
    label: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def operator(self) -> bool:
        return self.team is None


@dataclass(eq=False)
class Session:
    principal: Principal
    csrf: str
    created: float
    last_seen: float
    ended: bool = False


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Sessions:
    def __init__(self, *, idle_s: float, max_s: float, limit: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._idle_s = idle_s
        self._max_s = max_s
        self._limit = limit
        self._clock = clock
        self._table: OrderedDict[str, Session] = OrderedDict()

    def open(self, principal: Principal) -> tuple[str, Session]:
        """A new session; returns the cookie value (given out once) and the session."""
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(principal, secrets.token_urlsafe(32), now, now)
        self._table[_digest(cookie)] = session
        while len(self._table) > self._limit:
            self._table.popitem(last=False)[1].ended = True
        return cookie, session

    def find(self, cookie: str | None) -> Session | None:
        """The live session of ``cookie``, its idle time reset; None when there is none
        (unknown, expired: an expired one is forgotten)."""
        if not cookie or len(cookie) > 128:
            return None
        key = _digest(cookie)
        session = self._table.get(key)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self._idle_s or now - session.created > self._max_s:
            del self._table[key]
            session.ended = True
            return None
        session.last_seen = now
        self._table.move_to_end(key)
        return session

    def alive(self, session: Session) -> bool:
        """Whether ``session`` (found before) has not ended since (a long stream checks)."""
        return not session.ended and self._clock() - session.created <= self._max_s

    def close(self, cookie: str | None) -> None:
        if cookie:
            session = self._table.pop(_digest(cookie), None)
            if session is not None:
                session.ended = True

    def __len__(self) -> int:
        return len(self._table)
