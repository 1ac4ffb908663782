"""The sandbox tools as a model sees them: names, descriptions, argument schemas, hints.

Every front (MCP, OpenAI, Anthropic, LangChain) lists these same specs; the descriptions
are written for a model choosing and calling a tool: what it does, when to use it, what
it returns, and what to pass.
"""

from __future__ import annotations

from typing import Any

from bac.agents._model import ToolHints, ToolSpec

SANDBOX_ID: dict[str, Any] = {
    "type": "string",
    "description": "The sandbox's id, as create_sandbox or list_sandboxes returned it.",
}


def _schema(required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def _string(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


def _integer(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **more}


def _map(description: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "string"},
            "description": description}


CREATE = ToolSpec(
    "create_sandbox", "Create a sandbox",
    "Start a new isolated Linux sandbox (a small Debian machine with Python, a shell and "
    "the network) and return its id. Every other tool takes this id. Use the template "
    "'code-interpreter' to run Python with run_code (charts come back as images); 'base' "
    "is enough for shell commands and files. The sandbox ends after `timeout` seconds "
    "(0: never) unless on_timeout is 'pause', which keeps it, paused, to resume later.",
    _schema(
        [],
        template=_string("Template to start from: 'base' (default) or 'code-interpreter' "
                         "(needed by run_code), or a template or snapshot id.",
                         default="base"),
        timeout=_integer("Seconds the sandbox lives (0: no end). Default 300.",
                         minimum=0, default=300),
        on_timeout=_string("What happens at the timeout: 'kill' (default) or 'pause'.",
                           enum=["kill", "pause"], default="kill"),
        metadata=_map("Labels to find the sandbox by later (e.g. {\"task\": \"t1\"})."),
        envs=_map("Environment variables every process in the sandbox sees."),
    ),
    ToolHints(),
)

LIST = ToolSpec(
    "list_sandboxes", "List sandboxes",
    "List the sandboxes this API key can see (running and paused), newest first, with "
    "their template, state, metadata and end time. Use it to find a sandbox created "
    "earlier instead of creating another.",
    _schema([], metadata=_map("Only sandboxes whose metadata holds every pair given.")),
    ToolHints(read_only=True, idempotent=True),
)

RUN_COMMAND = ToolSpec(
    "run_command", "Run a shell command",
    "Run a bash command in the sandbox and wait for it to end; returns its exit code, "
    "stdout and stderr (output is also streamed as progress while it runs). A non-zero "
    "exit code is a normal result, not a failure of this tool. For long-running servers "
    "append ' &' and then use get_port_url.",
    _schema(
        ["sandbox_id", "command"],
        sandbox_id=SANDBOX_ID,
        command=_string("The command line, run by bash -l -c (pipes, && and globs work)."),
        cwd=_string("Working directory (default: the user's home)."),
        envs=_map("Extra environment variables for this command."),
        timeout=_integer("Seconds before the command is killed (0: no limit). Default 60.",
                         minimum=0, default=60),
    ),
    ToolHints(destructive=True, open_world=True),
)

RUN_CODE = ToolSpec(
    "run_code", "Run Python code",
    "Run code in the sandbox's Jupyter kernel (state persists between calls: variables, "
    "imports) and return what it printed, its results and its error if it raised. A "
    "matplotlib figure shown with plt.show() comes back as a PNG image. The sandbox must "
    "come from the 'code-interpreter' template.",
    _schema(
        ["sandbox_id", "code"],
        sandbox_id=SANDBOX_ID,
        code=_string("The code to run, as a notebook cell."),
        language=_string("Kernel language: 'python' (default), or e.g. 'bash', 'r', 'js' "
                         "when the template has that kernel.", default="python"),
        timeout=_integer("Seconds before the execution is interrupted (0: none). "
                         "Default 300.", minimum=0, default=300),
    ),
    ToolHints(destructive=True, open_world=True),
)

READ_FILE = ToolSpec(
    "read_file", "Read a file",
    "Read a text file in the sandbox and return its contents (at most max_bytes; longer "
    "files are cut and say so).",
    _schema(
        ["sandbox_id", "path"],
        sandbox_id=SANDBOX_ID,
        path=_string("Absolute path, or relative to the user's home."),
        max_bytes=_integer("Most bytes to return. Default 100000.", minimum=1,
                           default=100_000),
    ),
    ToolHints(read_only=True, idempotent=True),
)

WRITE_FILE = ToolSpec(
    "write_file", "Write a file",
    "Create or replace a text file in the sandbox (parent directories are created). It "
    "overwrites an existing file without asking.",
    _schema(
        ["sandbox_id", "path", "content"],
        sandbox_id=SANDBOX_ID,
        path=_string("Absolute path, or relative to the user's home."),
        content=_string("The whole new contents of the file."),
    ),
    ToolHints(destructive=True, idempotent=True),
)

LIST_FILES = ToolSpec(
    "list_files", "List a directory",
    "List the entries of a directory in the sandbox: name, type (file, dir, symlink) and "
    "size.",
    _schema(
        ["sandbox_id"],
        sandbox_id=SANDBOX_ID,
        path=_string("Directory to list (default: the user's home).", default="."),
        depth=_integer("Levels to descend (1: only the directory's own entries).",
                       minimum=1, maximum=5, default=1),
    ),
    ToolHints(read_only=True, idempotent=True),
)

PORT_URL = ToolSpec(
    "get_port_url", "Get a port's URL",
    "The URL at which a server listening on `port` inside the sandbox is reached from "
    "outside (start the server first with run_command, in the background).",
    _schema(["sandbox_id", "port"], sandbox_id=SANDBOX_ID,
            port=_integer("The TCP port the server listens on.", minimum=1, maximum=65535)),
    ToolHints(read_only=True, idempotent=True),
)

PAUSE = ToolSpec(
    "pause_sandbox", "Pause a sandbox",
    "Pause the sandbox: its processes, memory and files are saved and it stops using CPU "
    "and memory; it never times out while paused. resume_sandbox (or any later call to "
    "it) brings it back exactly as it was.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID),
    ToolHints(idempotent=True),
)

RESUME = ToolSpec(
    "resume_sandbox", "Resume a sandbox",
    "Resume a paused sandbox (same id, files, processes and memory). On a running sandbox "
    "it only extends its life to `timeout` seconds from now when that is later.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID,
            timeout=_integer("Seconds it lives from now (default: the server's).",
                             minimum=1)),
    ToolHints(idempotent=True),
)

CHECKPOINT = ToolSpec(
    "checkpoint_sandbox", "Checkpoint a sandbox",
    "Save the sandbox's whole state now (files, processes, memory) under a name, and keep "
    "it running. Take one before a risky step; restore_sandbox rolls back to it.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID,
            name=_string("A name to restore it by (e.g. 'before-upgrade').")),
    ToolHints(),
)

RESTORE = ToolSpec(
    "restore_sandbox", "Restore a checkpoint",
    "Roll the sandbox back to one of its checkpoints (by name or id): every change since "
    "is lost. Returns the sandbox's checkpoints when the one named is not found.",
    _schema(["sandbox_id", "checkpoint"], sandbox_id=SANDBOX_ID,
            checkpoint=_string("The checkpoint's name or id.")),
    ToolHints(destructive=True, idempotent=True),
)

FORK = ToolSpec(
    "fork_sandbox", "Fork a sandbox",
    "Make `count` new sandboxes that continue from this one's current state (files, "
    "processes, memory), each with its own id; the original keeps running. Use it to try "
    "several approaches from the same point.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID,
            count=_integer("How many forks (1-10). Default 1.", minimum=1, maximum=10,
                           default=1)),
    ToolHints(),
)

KILL = ToolSpec(
    "kill_sandbox", "Kill a sandbox",
    "End the sandbox for good: its processes and files are gone (its checkpoints too). "
    "Call it when the work is done.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID),
    ToolHints(destructive=True, idempotent=True),
)

TRACE = ToolSpec(
    "read_trace", "Read a sandbox's trace",
    "What happened in the sandbox, oldest first: its lifecycle (created, paused, ...), "
    "every process run (command, exit code, duration) and every file transfer. Readable "
    "after the sandbox ended too. Pass the returned next_cursor as `after` for more.",
    _schema(["sandbox_id"], sandbox_id=SANDBOX_ID,
            kinds=_string("Comma-separated kinds to keep, e.g. 'process' or "
                          "'process,transfer' (default: all)."),
            after=_integer("Return events after this cursor.", minimum=0, default=0),
            limit=_integer("Most events to return (1-200). Default 50.", minimum=1,
                           maximum=200, default=50)),
    ToolHints(read_only=True, idempotent=True),
)

SPECS: tuple[ToolSpec, ...] = (
    CREATE, LIST, RUN_COMMAND, RUN_CODE, READ_FILE, WRITE_FILE, LIST_FILES, PORT_URL,
    PAUSE, RESUME, CHECKPOINT, RESTORE, FORK, KILL, TRACE,
)
