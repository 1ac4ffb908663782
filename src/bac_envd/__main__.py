"""``python3 -m bac_envd``: listen, report readiness, answer the host, load on demand.

    python3 -m bac_envd [--host 0.0.0.0] [--port 49983] [--ready-fd N] [--preload]

Start-up order is the contract with the host:

1. bind + ``listen()``, the operator's CA certificates added to the sandbox's trust
   store (``_trust``, as pid 1), then ``ready\\n`` on ``--ready-fd`` (closed right
   after), so the host waits on a pipe instead of polling; a template with a start command
   (``/etc/bac/start.json``) hands the pipe to ``_supervisor``, which reports ready once
   that service is (bounded);
2. the bootstrap front (``_bootstrap``) answers ``GET /health`` and ``POST /init`` at
   once, while nothing else is loaded;
3. the first other request (or ``--preload`` finishing in a background thread) starts
   the full asyncio server (``_server``), which takes over the listening socket and the
   connections the front had accepted; the RPC stack loads on the first RPC.

As the first process of a sandbox (pid 1), steps 2 and 3 run in a forked child and this
process stays behind as its keeper (``_keeper``), restarting envd when it dies.

Arguments are parsed by hand: argparse (with the ``re``, ``gettext``, ``shutil`` it
pulls in) cost more than everything else before ``listen()`` together.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub; `signal` would load enum
import _socket
import os
import sys

from bac_envd._state import EnvdState

USAGE = "usage: python3 -m bac_envd [--host ADDR] [--port N] [--ready-fd FD] [--preload]"


class Options:
    host = "0.0.0.0"
    port = 49983
    ready_fd: int | None = None
    preload = False


def parse(argv: list[str]) -> Options:
    options = Options()
    args = iter(argv)
    for arg in args:
        name, eq, inline = arg.partition("=")
        if name in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        if name == "--preload" and not eq:
            options.preload = True
            continue
        if name not in ("--host", "--port", "--ready-fd"):
            raise SystemExit(f"{USAGE}\nbac_envd: unknown argument {arg!r}")
        value = inline if eq else next(args, None)
        if value is None:
            raise SystemExit(f"{USAGE}\nbac_envd: {name} needs a value")
        if name == "--host":
            options.host = value
        elif not value.isdigit():
            raise SystemExit(f"{USAGE}\nbac_envd: {name} must be a number, got {value!r}")
        elif name == "--port":
            options.port = int(value)
        else:
            options.ready_fd = int(value)
    return options


def _listen(host: str, port: int) -> _socket.socket:
    # The C-level _socket module: ``socket`` would import enum and selectors, which cost
    # more than everything else before listen() (see _bootstrap).
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio only turns Nagle off (TCP_NODELAY) on accepted
    # sockets whose proto says TCP; with 0 every small reply write waited for an ACK.
    sock = _socket.socket(family, _socket.SOCK_STREAM, _socket.IPPROTO_TCP)
    sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _signal_ready(fd: int) -> None:
    try:
        os.write(fd, b"ready\n")
    finally:
        os.close(fd)


def _preload_in_background() -> int:
    """Import everything in a thread; the returned fd turns readable when done."""
    import threading

    read_fd, write_fd = os.pipe()

    def load() -> None:
        try:
            import bac_envd._server  # noqa: F401
            from bac_envd._rpc import import_services

            import_services()
        finally:
            try:
                os.write(write_fd, b"x")
            except OSError:
                pass  # the front already ended on a request and closed its end
            os.close(write_fd)

    threading.Thread(target=load, name="envd-preload", daemon=True).start()
    return read_fd


def _start_supervisor(ready_fd: int | None) -> bool:
    """Start the template's start command supervisor if the template has one; it then
    owns the readiness pipe (see ``_supervisor``). False when there is none."""
    try:
        os.stat("/etc/bac/start.json")
    except OSError:
        return False
    argv = [sys.executable, "-m", "bac_envd._supervisor"]
    if ready_fd is not None:
        os.set_inheritable(ready_fd, True)
        argv += ["--ready-fd", str(ready_fd)]
    try:
        os.posix_spawn(sys.executable, argv, os.environ)
    except OSError as exc:
        print(f"bac_envd: cannot start the supervisor: {exc}", file=sys.stderr)
        return False
    finally:
        if ready_fd is not None:
            os.set_inheritable(ready_fd, False)
    if ready_fd is not None:
        os.close(ready_fd)
    return True


def _exit_on_signal(signum: int, frame: object) -> None:
    # As PID 1 of a sandbox, envd would ignore SIGTERM without a handler.
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    from bac_envd._memory import merge_pages

    merge_pages()  # before anything is allocated or forked
    try:
        sock = _listen(options.host, options.port)
    except OSError as exc:
        print(f"bac_envd: cannot listen on {options.host}:{options.port}: {exc}", file=sys.stderr)
        return 1
    if os.getpid() == 1:
        # The operator's CAs in the trust store before anything runs (``_trust``).
        from bac_envd._trust import install_or_say

        install_or_say()
    if not _start_supervisor(options.ready_fd) and options.ready_fd is not None:
        _signal_ready(options.ready_fd)
    _signal.signal(_signal.SIGTERM, _exit_on_signal)
    # Files and directories made by envd or its commands get E2B's modes (0644/0755)
    # whatever umask the launcher had.
    os.umask(0o022)

    from bac_envd._users import remember_users

    remember_users()
    state = EnvdState()
    if os.getpid() == 1:
        from bac_envd._keeper import Keeper

        Keeper(state, lambda: _serve(sock, state, options.preload)).run()
        return 0
    _serve(sock, state, options.preload)
    return 0


def _serve(sock: _socket.socket, state: EnvdState, preload: bool) -> None:
    from bac_envd._bootstrap import serve_until_needed

    wake = _preload_in_background() if preload else None
    pending = serve_until_needed(sock, state, wake)
    if wake is not None:
        os.close(wake)

    from bac_envd._server import serve

    serve(sock, pending, state, preload=preload)


if __name__ == "__main__":
    sys.exit(main())
