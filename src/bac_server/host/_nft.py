"""nftables commands through libnftables (what the ``nft`` tool is built on), in-process.

Spawning ``nft`` costs a few milliseconds per call, so the library is called directly
(ctypes, five functions of its stable C API). Each call is one atomic transaction: a
script either applies whole or not at all. Without the library, the ``nft`` binary is
used instead. libnftables reads the whole ruleset into its cache before each command,
which grows with the sandboxes on the host: it is for the static table and start-up
listings only; per-sandbox changes are raw netlink batches
(``backends/namespaces/network/nft``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import shutil
import subprocess
import threading
from typing import Any

from ._errors import MissingDependency


class NftError(RuntimeError):
    """nftables refused a script (the message is nft's own)."""


_OUTPUT_JSON = 1 << 4  # NFT_CTX_OUTPUT_JSON


class _Library:
    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path, use_errno=True)
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
        lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
        self._lib = lib
        self._contexts: dict[bool, int] = {}
        self._lock = threading.Lock()

    def _context(self, as_json: bool) -> int:
        ctx = self._contexts.get(as_json)
        if ctx is None:
            ctx = self._lib.nft_ctx_new(0)
            if not ctx:
                raise NftError("nft_ctx_new failed")
            self._lib.nft_ctx_buffer_output(ctx)
            self._lib.nft_ctx_buffer_error(ctx)
            if as_json:
                self._lib.nft_ctx_output_set_flags(ctx, _OUTPUT_JSON)
            self._contexts[as_json] = ctx
        return ctx

    def run(self, script: str, as_json: bool) -> str:
        # A context is not thread-safe; scripts are short, so one lock is enough.
        with self._lock:
            ctx = self._context(as_json)
            rc = self._lib.nft_run_cmd_from_buffer(ctx, script.encode())
            out = (self._lib.nft_ctx_get_output_buffer(ctx) or b"").decode()
            err = (self._lib.nft_ctx_get_error_buffer(ctx) or b"").decode()
        if rc != 0:
            raise NftError(err.strip() or f"nft failed with {rc}")
        return out


def _binary_run(script: str, as_json: bool) -> str:
    binary = shutil.which("nft")
    if binary is None:
        raise MissingDependency("nftables is not installed (apt-get install nftables)")
    args = [binary, "-j", "-f", "-"] if as_json else [binary, "-f", "-"]
    done = subprocess.run(args, input=script, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NftError(done.stderr.strip() or f"nft exited {done.returncode}")
    return done.stdout


_library: _Library | None = None
_loaded = False
_load_lock = threading.Lock()


def _get_library() -> _Library | None:
    global _library, _loaded
    with _load_lock:
        if not _loaded:
            _loaded = True
            path = ctypes.util.find_library("nftables")
            if path is not None:
                try:
                    _library = _Library(path)
                except (OSError, AttributeError):
                    _library = None
    return _library


def nft(script: str) -> str:
    """Run an nft script as one transaction; raises NftError if it is refused."""
    lib = _get_library()
    # SECURITY: every caller renders its script from validated values only (addresses,
    # ports and names Bac made); nothing a sandbox or client wrote reaches it verbatim.
    return lib.run(script, False) if lib is not None else _binary_run(script, False)


def nft_json(command: str) -> list[dict[str, Any]]:
    """Run a listing command and return the ``nftables`` array of its JSON output."""
    lib = _get_library()
    out = lib.run(command, True) if lib is not None else _binary_run(command, True)
    if not out.strip():
        return []
    items: list[dict[str, Any]] = json.loads(out).get("nftables", [])
    return items
