"""Scripts that fit an image for sandboxes, run as root in the build sandbox.

*Ensure user* (a USER step, and the default user ``user`` of E2B templates): create the
user when missing (``useradd``, or busybox ``adduser``; home ``/home/<name>``; uid 1000 for
``user`` when free; passwordless sudo when sudo is installed), then report its home.

*Finalize* (the last layer of every template): check that ``/usr/bin/python3`` is at
least 3.9 (envd runs on it; a python3 elsewhere on PATH is linked there), make the mount
points sandboxes need, make the working directory, and write ``/etc/bac/start.json`` for
envd's supervisor (``bac_envd._supervisor``) when the template has a start or ready
command. A template without either keeps its parent's start.json, as Docker keeps CMD.

Both report what they learnt as ``bac-fact: name=value`` lines, which the engine keeps in
``layer.json`` (a cached step is not run again, its facts still count).
"""

from __future__ import annotations

import json
import re

from .._errors import TemplateBuildError
from .._steps import TemplateConfig

FACT_PREFIX = "bac-fact: "
MIN_PYTHON = (3, 9)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")
_GROUP = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}")


def check_user(spec: str, what: str) -> None:
    """``name``, ``uid`` or either with ``:group``; anything else is refused by name."""
    user, has_group, group = spec.partition(":")
    if not (user.isdigit() or _NAME.fullmatch(user)) or (
            has_group and not (group.isdigit() or _GROUP.fullmatch(group))):
        raise TemplateBuildError(f"{what}: invalid user {spec!r} (expected name, uid, or "
                                 "either followed by ':group')")


def needs_account(user: str) -> bool:
    """Whether ``user`` names an account to ensure (root and bare uids need none)."""
    name = user.partition(":")[0]
    return name != "root" and not name.isdigit()


ENSURE_USER = r"""
set -eu
u=$1
home_of() { sed -n "s/^$u:[^:]*:[^:]*:[^:]*:[^:]*:\([^:]*\):.*/\1/p" /etc/passwd | head -n 1; }
if ! grep -q "^$u:" /etc/passwd 2>/dev/null; then
    shell=/bin/sh
    [ ! -x /bin/bash ] || shell=/bin/bash
    uid=
    if [ "$u" = user ] && ! cut -d: -f3 /etc/passwd | grep -qx 1000; then uid=1000; fi
    if command -v useradd >/dev/null 2>&1; then
        group=--user-group
        if grep -q "^$u:" /etc/group 2>/dev/null; then group="-g $u"; fi
        useradd --create-home --home-dir "/home/$u" ${uid:+--uid "$uid"} $group \
            --shell "$shell" "$u"
    elif command -v adduser >/dev/null 2>&1; then
        adduser -D -h "/home/$u" -s "$shell" ${uid:+-u "$uid"} "$u"
    else
        echo "bac: cannot create user $u: the image has neither useradd nor adduser" >&2
        exit 1
    fi
    if command -v sudo >/dev/null 2>&1; then
        mkdir -p /etc/sudoers.d
        printf '%s ALL=(ALL:ALL) NOPASSWD: ALL\n' "$u" > "/etc/sudoers.d/90-bac-$u"
        chmod 0440 "/etc/sudoers.d/90-bac-$u"
    fi
    echo "bac: created user $u ($(id "$u"))"
fi
echo "bac-fact: home=$(home_of)"
"""

FINALIZE = r"""
set -eu
user=$1 workdir=$2 start=$3
py=/usr/bin/python3
if [ ! -e "$py" ] && found=$(command -v python3); then
    mkdir -p /usr/bin
    ln -s "$found" "$py"
    echo "bac: linked $py to $found"
fi
need="sandboxes need python3 >= @NEED@ at $py (envd runs on it); install it in a RUN step"
if [ ! -x "$py" ]; then
    echo "bac: this image has no python3: $need" >&2
    exit 3
fi
if ! version=$("$py" -S -s -c 'import sys; print("%d.%d" % sys.version_info[:2])'); then
    echo "bac: $py does not run: $need" >&2
    exit 3
fi
if ! "$py" -S -s -c 'import sys; sys.exit(sys.version_info < @TUPLE@)'; then
    echo "bac: $py is Python $version: $need" >&2
    exit 3
fi
echo "bac-fact: python=$version"
mkdir -p /opt/bac /etc/bac /proc /sys /dev /tmp
for f in hosts hostname resolv.conf; do
    [ -e "/etc/$f" ] || [ -L "/etc/$f" ] || : > "/etc/$f"
done
if [ ! -d "$workdir" ]; then
    mkdir -p "$workdir"
    chown "$user" "$workdir" 2>/dev/null || true
fi
if [ -n "$start" ]; then
    printf '%s\n' "$start" > /etc/bac/start.json
    chmod 0644 /etc/bac/start.json
fi
sudo=no
if command -v sudo >/dev/null 2>&1; then sudo=yes; fi
echo "bac-fact: sudo=$sudo"
""".replace("@NEED@", ".".join(map(str, MIN_PYTHON))).replace("@TUPLE@", repr(MIN_PYTHON))


def ensure_user_argv(user: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", ENSURE_USER, "sh", user.partition(":")[0])


def start_json(config: TemplateConfig) -> str:
    """What envd's supervisor reads; empty when the template starts nothing."""
    if config.start_cmd is None and config.ready_cmd is None:
        return ""
    body: dict[str, object] = {
        "user": config.user, "cwd": config.workdir, "env": dict(config.env),
        # E2B runs the start command once per sandbox; a finished one is not restarted.
        "restart": False,
        # No ready command: ready as soon as the start command runs.
        "ready_cmd": config.ready_cmd or "true"}
    if config.start_cmd is not None:
        body["argv"] = ["/bin/sh", "-c", config.start_cmd]
    return json.dumps(body, sort_keys=True)


def finalize_argv(config: TemplateConfig) -> tuple[str, ...]:
    return ("/bin/sh", "-c", FINALIZE, "sh", config.user, config.workdir, start_json(config))


def split_facts(line: str, facts: dict[str, str]) -> bool:
    """Record ``line`` in ``facts`` if it is one; True when it was."""
    if not line.startswith(FACT_PREFIX):
        return False
    name, _, value = line[len(FACT_PREFIX):].partition("=")
    facts[name.strip()] = value.strip()
    return True
