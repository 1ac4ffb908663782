"""envd's modules of a sandbox: ``commands``, ``pty`` and ``files``, and their blocking twins.

They speak envd's protocol (Connect RPCs and ``/files``) through the server's gateway
with the sandbox's own access token. Layers, lowest first: the connection and how its
answers become SDK errors (``_connection``, ``_errors``); a running command's handle and
a directory watch (``_command_handle``, ``_watch``); the modules (``_commands``, ``_pty``,
``_files`` with the transfers of ``_transfer``); signed ``/files`` URLs (``_signature``);
the blocking twins (``_sync``).
"""

from bac._envd._command_handle import AsyncCommandHandle, OutputHandler
from bac._envd._commands import AsyncCommands
from bac._envd._connection import EnvdConnection
from bac._envd._errors import PORT_CLOSED, SANDBOX_GONE
from bac._envd._files import AsyncFilesystem
from bac._envd._pty import AsyncPty
from bac._envd._signature import Signature, file_url, sign
from bac._envd._sync import CommandHandle, Commands, FileStream, Filesystem, Pty, WatchHandle
from bac._envd._transfer import AsyncFileStream, WriteData, WriteEntry
from bac._envd._watch import AsyncWatchHandle
from bac_protocol.signing import Operation

__all__ = [
    "PORT_CLOSED",
    "SANDBOX_GONE",
    "AsyncCommandHandle",
    "AsyncCommands",
    "AsyncFileStream",
    "AsyncFilesystem",
    "AsyncPty",
    "AsyncWatchHandle",
    "CommandHandle",
    "Commands",
    "EnvdConnection",
    "FileStream",
    "Filesystem",
    "Operation",
    "OutputHandler",
    "Pty",
    "Signature",
    "WatchHandle",
    "WriteData",
    "WriteEntry",
    "file_url",
    "sign",
]
