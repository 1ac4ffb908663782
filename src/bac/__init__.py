"""Bac's Python SDK: sandboxes for AI agents, with the shape of E2B's SDK.

::

    from bac import Sandbox

    with Sandbox.create() as sandbox:
        print(sandbox.commands.run("uname -a").stdout)

``AsyncSandbox`` is the same API for asyncio. Configuration comes from arguments or
the environment: ``BAC_API_URL`` (default ``http://localhost:3000``) and
``BAC_API_KEY``, with ``E2B_API_URL``/``E2B_API_KEY`` accepted as fallbacks.
"""

from bac._code_results import (
    Context,
    Execution,
    ExecutionError,
    Logs,
    OutputMessage,
    Result,
)
from bac._config import ConnectionConfig, ConnectionOpts
from bac._envd import (
    AsyncCommandHandle,
    AsyncCommands,
    AsyncFileStream,
    AsyncFilesystem,
    AsyncPty,
    AsyncWatchHandle,
    CommandHandle,
    Commands,
    Filesystem,
    OutputHandler,
    Pty,
    Signature,
    WatchHandle,
    WriteData,
    WriteEntry,
    sign,
)
from bac._errors import (
    AlreadyExistsError,
    AuthenticationError,
    CommandExitError,
    InvalidArgumentError,
    NotEnoughSpaceError,
    NotFoundError,
    PathNotFoundError,
    PermissionDeniedError,
    RateLimitError,
    SandboxError,
    SandboxNotFoundError,
    SandboxNotRunningError,
    SandboxUnreachableError,
    ServerError,
    ServerUnreachableError,
    TimeoutError,
)
from bac._lifecycle import Lifecycle
from bac._models import (
    CommandResult,
    EntryInfo,
    FilesystemEvent,
    FilesystemEventType,
    FileType,
    ProcessInfo,
    PtySize,
    SandboxInfo,
    SandboxQuery,
    SandboxState,
    WriteInfo,
)
from bac._network import NetworkOpts
from bac._paginator import AsyncSandboxPaginator
from bac._sandbox import AsyncSandbox
from bac._saving import Checkpoint, SnapshotInfo
from bac._sync import Sandbox, SandboxPaginator
from bac._template import (
    AsyncTemplates,
    BaseRef,
    BuildInfo,
    BuildLogEntry,
    BuildState,
    BuildStatus,
    DockerfileError,
    DockerfileWarning,
    FromKind,
    Template,
    TemplateBuild,
    TemplateBuildError,
    TemplateInfo,
    Templates,
    TemplateStep,
    TemplateTag,
    classify_from,
)
from bac._version import __version__

__all__ = [
    "AlreadyExistsError",
    "AsyncCommandHandle",
    "AsyncCommands",
    "AsyncFileStream",
    "AsyncFilesystem",
    "AsyncPty",
    "AsyncSandbox",
    "AsyncSandboxPaginator",
    "AsyncTemplates",
    "AsyncWatchHandle",
    "AuthenticationError",
    "BaseRef",
    "BuildInfo",
    "BuildLogEntry",
    "BuildState",
    "BuildStatus",
    "Checkpoint",
    "CommandExitError",
    "CommandHandle",
    "CommandResult",
    "Commands",
    "ConnectionConfig",
    "ConnectionOpts",
    "Context",
    "DockerfileError",
    "DockerfileWarning",
    "EntryInfo",
    "Execution",
    "ExecutionError",
    "FileType",
    "Filesystem",
    "FilesystemEvent",
    "FilesystemEventType",
    "FromKind",
    "InvalidArgumentError",
    "Lifecycle",
    "Logs",
    "NetworkOpts",
    "NotEnoughSpaceError",
    "NotFoundError",
    "OutputHandler",
    "OutputMessage",
    "PathNotFoundError",
    "PermissionDeniedError",
    "ProcessInfo",
    "Pty",
    "PtySize",
    "RateLimitError",
    "Result",
    "Sandbox",
    "SandboxError",
    "SandboxInfo",
    "SandboxNotFoundError",
    "SandboxNotRunningError",
    "SandboxPaginator",
    "SandboxQuery",
    "SandboxState",
    "SandboxUnreachableError",
    "ServerError",
    "ServerUnreachableError",
    "Signature",
    "SnapshotInfo",
    "Template",
    "TemplateBuild",
    "TemplateBuildError",
    "TemplateInfo",
    "TemplateStep",
    "TemplateTag",
    "Templates",
    "TimeoutError",
    "WatchHandle",
    "WriteData",
    "WriteEntry",
    "WriteInfo",
    "__version__",
    "classify_from",
    "sign",
]
