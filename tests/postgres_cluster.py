"""A throwaway PostgreSQL cluster for tests: Debian's ``postgresql`` binaries, ``initdb``
in a temporary directory, the server on a unix socket only (no TCP port to collide with
other test runs), as the unprivileged ``postgres`` user when the tests run as root.

One cluster serves a whole test session; each test gets a fresh, empty database of its
own (:meth:`Cluster.new_database`), so tests stay isolated without paying for a cluster
each. Durability is switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``):
a crashed test cluster is thrown away, never recovered.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_USER = "postgres"  # made by Debian's postgresql-common
_SUPERUSER = "bac_test"


def postgres_bin() -> Path | None:
    """The newest installed server's ``bin`` directory (``/usr/lib/postgresql/<v>/bin``)."""
    found = [p for p in Path("/").glob(_BIN_GLOB.lstrip("/")) if (p / "initdb").is_file()]
    if not found:
        return None
    return max(found, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))


def missing_reason() -> str | None:
    """Why no cluster can start here, or None."""
    if postgres_bin() is None:
        return "PostgreSQL is not installed (scripts/setup installs Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(_USER)
        except KeyError:
            return f"no {_USER!r} user to run PostgreSQL as (Debian's postgresql makes it)"
    return None


@dataclass
class Cluster:
    root: Path
    bin: Path
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` over the unix socket."""
        return f"postgresql+asyncpg://{_SUPERUSER}@/{database}?host={self.socket_dir}"

    def _run(self, *argv: str, as_owner: bool = False) -> str:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if as_owner and os.geteuid() == 0:
            # The server refuses to run as root; the cluster's files are postgres's.
            # (Clients connect as anyone: the socket trusts every local user.)
            command = ["runuser", "-u", _USER, "--", *command]
        # In the cluster's own directory: the tests' (a checkout under /root, say) may be
        # closed to the postgres user.
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}")
        return done.stdout

    def psql(self, sql: str, database: str = "postgres") -> str:
        return self._run("psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                         "-h", str(self.socket_dir), "-U", _SUPERUSER, "-d", database,
                         "-c", sql)

    def dump(self, url: str) -> bytes:
        """``pg_dump`` of the database ``url`` names: what a backup of it holds."""
        database = url.split("?", 1)[0].rsplit("/", 1)[1]
        return self._run("pg_dump", "-h", str(self.socket_dir), "-U", _SUPERUSER,
                         database).encode()

    def new_database(self, prefix: str = "t", *, numbered: bool = True,
                     template: str = "template1") -> str:
        """A fresh database, a copy of ``template`` (by default empty); returns its URL."""
        name = f"{prefix}{next(self._names)}" if numbered else prefix
        # FILE_COPY: a small database copied as files, much faster than WAL-logging it.
        self.psql(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")
        return self.url(name)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", _SUPERUSER, "-A", "trust",
                  "-E", "UTF8", "--locale=C", "--no-sync", as_owner=True)
        self.up()

    def up(self) -> None:
        """Start the server on the cluster's files (after :meth:`down`)."""
        options = " ".join((
            f"-k {self.socket_dir}", "-c listen_addresses=''", "-c fsync=off",
            "-c synchronous_commit=off", "-c full_page_writes=off",
            "-c max_connections=200"))
        # -w: pg_ctl returns once the server accepts connections (it reads the server's
        # own status in postmaster.pid), so no test polls or sleeps.
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l",
                  str(self.root / "server.log"), "-w", "-t", "60", "start", as_owner=True)

    def down(self) -> None:
        """Stop the server, every connection dropped (:meth:`up` starts it again)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", as_owner=True)

    def restart(self) -> None:
        """Down and up, as a database restart or failover does to its clients. (Not
        ``pg_ctl restart``: it forgets the log file, and the server would keep this
        process's output pipe open.)"""
        self.down()
        self.up()

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop",
                      as_owner=True)


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    """A started cluster in a fresh temporary directory, stopped and removed after."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError(missing_reason())
    root = Path(tempfile.mkdtemp(prefix="bac-pg-"))
    try:
        (root / "socket").mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam(_USER)
            for path in (root, root / "socket"):
                os.chown(path, user.pw_uid, user.pw_gid)
        cluster = Cluster(root, bin_dir)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
