"""The `desktop` template: base plus an X desktop the official `e2b-desktop` SDK drives.

Everything comes from Debian's packages: Xvfb (the X server, no GPU), XFCE (session,
window manager, desktop, panel), x11vnc and noVNC + websockify (the stream), xdotool,
scrot and the X utilities (the SDK's mouse, keyboard, screenshot and window verbs),
Firefox ESR, a text editor and a terminal, fonts.

The SDK's ``Sandbox.create()`` runs ``Xvfb :0 ...`` and ``startxfce4`` itself and waits for
them. Here the desktop is already up when the sandbox is handed out: the start command
(``SESSION``, kept running by envd's supervisor as ``user``) starts Xvfb and XFCE and
reports ready once ``xfce4-session``, ``xfwm4`` and ``xfdesktop`` run. Two shims earlier on
``PATH`` than the real programs make the SDK's commands find that desktop:

* ``/usr/local/bin/Xvfb``: the same arguments as the running server's → nothing to do;
  other ones (a ``resolution`` or ``dpi`` given to ``create``) → the session is restarted
  with them, which the SDK waits for as it would for its own Xvfb;
* ``/usr/local/bin/startxfce4``: waits for the session's XFCE instead of starting a
  second one (outside a session, the real one runs);
* ``/usr/local/bin/xdotool``: Debian's xdotool hangs in ``mousemove --sync`` to where the
  pointer already is, which the SDK's clicks at a position do, and sleeps 100 ms after
  the last click of every ``click``.

The stream is not started: the SDK's ``stream.start()`` refuses when x11vnc already runs.
It finds noVNC where E2B's image has it, ``/opt/noVNC`` (links to Debian's
``/usr/share/novnc``) with a ``utils/novnc_proxy`` that runs Debian's websockify.
"""

from __future__ import annotations

from ._code_interpreter import LayerRecipe, StartCommand

DISPLAY = ":0"
SCREEN = (1024, 768)
STREAM_PORT = 6080
VNC_PORT = 5900
# What the SDK's create() runs by default, after "Xvfb".
DEFAULT_XVFB_ARGS = (f"{DISPLAY} -ac -screen 0 {SCREEN[0]}x{SCREEN[1]}x24 -retro -dpi 96 "
                     "-nolisten tcp -nolisten unix")
# The session's and the shims' notes, in the sandbox (only `user` and root live there).
STATE_DIR = "/tmp/.bac-desktop"  # noqa: S108
SESSION = "/usr/local/lib/bac-desktop/session"

_SESSION_SCRIPT = f"""#!/bin/bash
# Bac's desktop session: Xvfb and XFCE, run as the sandbox user by envd's supervisor,
# which restarts it when it exits. $1: the fd to write "ready" to.
set -u
state={STATE_DIR}
mkdir -p "$state"
args_file=$state/xvfb.args
[ -s "$args_file" ] || echo '{DEFAULT_XVFB_ARGS}' >"$args_file"
read -r -a args <"$args_file"
export DISPLAY=${{args[0]}}
rm -f "$state/running.args"
# Leftovers of a previous run (a restart) must not hold the display or answer for it.
pkill -u "$(id -u)" -x 'Xvfb|xfce4-session|xfwm4|xfdesktop|xfce4-panel|xfconfd|xfsettingsd' \
    2>/dev/null && sleep 0.2
/usr/bin/Xvfb "${{args[@]}}" >"$state/xvfb.log" 2>&1 &
xvfb=$!
echo "$xvfb" >"$state/xvfb.pid"
for _ in $(seq 200); do
    xdpyinfo >/dev/null 2>&1 && break
    kill -0 "$xvfb" 2>/dev/null || exit 1
    sleep 0.05
done
# X's own screen saver would blank the screen after ten idle minutes.
xset s off s noblank -dpms 2>/dev/null
/usr/bin/startxfce4 >"$state/xfce.log" 2>&1 &
for _ in $(seq 600); do
    pgrep -u "$(id -u)" -x xfce4-session >/dev/null && pgrep -u "$(id -u)" -x xfwm4 >/dev/null \\
        && pgrep -u "$(id -u)" -x xfdesktop >/dev/null && break
    sleep 0.1
done
cp "$args_file" "$state/running.args"
echo ready >&"$1"
eval "exec $1>&-"
# The session lives as long as its X server.
wait "$xvfb"
"""

_XVFB_SHIM = f"""#!/bin/bash
# Bac: the desktop session already runs an X server (see {SESSION}). The same
# arguments: nothing to do. Others: restart the session with them.
state={STATE_DIR}
if [ ! -s "$state/xvfb.pid" ] || ! kill -0 "$(cat "$state/xvfb.pid")" 2>/dev/null; then
    exec /usr/bin/Xvfb "$@"
fi
if [ "$*" = "$(cat "$state/xvfb.args")" ]; then
    exit 0
fi
echo "$*" >"$state/xvfb.args"
kill "$(cat "$state/xvfb.pid")"
exit 0
"""

_STARTXFCE4_SHIM = f"""#!/bin/bash
# Bac: the desktop session starts XFCE (see {SESSION}); wait for it rather than
# starting a second one.
state={STATE_DIR}
if [ ! -s "$state/xvfb.args" ]; then
    exec /usr/bin/startxfce4 "$@"
fi
for _ in $(seq 600); do
    # running.args: the session's X runs with the arguments last asked for.
    cmp -s "$state/xvfb.args" "$state/running.args" \\
        && pgrep -u "$(id -u)" -x xfce4-session >/dev/null \\
        && pgrep -u "$(id -u)" -x xfwm4 >/dev/null \\
        && pgrep -u "$(id -u)" -x xfdesktop >/dev/null && exit 0
    sleep 0.1
done
exit 1
"""

# Debian's xdotool (3.20160805) waits forever in `mousemove --sync` when the pointer is
# already there, and the SDK moves with --sync before every click at a position. Its
# `click` also sleeps its --delay (100 ms unless given) after every click, the last one
# included, so each of the SDK's clicks took 100 ms more than it does: the gaps between
# repeated clicks (a double click, a scroll) are kept, the one after the last goes.
_XDOTOOL_SHIM = """#!/bin/bash
if [ "$1" = click ] && [ $# -ge 2 ]; then
    given=("$@")
    repeat=1 delay= rest=()
    shift
    while [ $# -gt 1 ]; do
        case "$1" in
            --repeat) repeat=$2; shift 2 ;;
            --delay) delay=$2; shift 2 ;;
            *) rest+=("$1"); shift ;;
        esac
    done
    if [ $# -ne 1 ] || ! [[ "$repeat" =~ ^[1-9][0-9]*$ ]]; then
        exec /usr/bin/xdotool "${given[@]}"
    fi
    if [ "$repeat" -gt 1 ]; then
        /usr/bin/xdotool click --repeat $((repeat - 1)) ${delay:+--delay "$delay"} \\
            "${rest[@]}" "$1" || exit
    fi
    exec /usr/bin/xdotool click --delay 0 "${rest[@]}" "$1"
fi
if [ "$1" = mousemove ] && [ "$2" = --sync ] && [ $# -eq 4 ]; then
    eval "$(/usr/bin/xdotool getmouselocation --shell 2>/dev/null | grep -E '^[XY]=[0-9]+$')"
    if [ "${X:-}" = "$3" ] && [ "${Y:-}" = "$4" ]; then
        exit 0
    fi
    # Off the screen's edge the pointer may not move either.
    timeout 2 /usr/bin/xdotool "$@"
    status=$?
    [ $status -eq 124 ] && exit 0
    exit $status
fi
exec /usr/bin/xdotool "$@"
"""

_NOVNC_PROXY = """#!/bin/bash
# noVNC's launcher as E2B's image has it, over Debian's websockify:
#   novnc_proxy --vnc HOST:PORT --listen PORT --web DIR
vnc=localhost:5900 listen=6080 web=/opt/noVNC
while [ $# -gt 0 ]; do
    case $1 in
        --vnc) vnc=$2; shift 2 ;;
        --listen) listen=$2; shift 2 ;;
        --web) web=$2; shift 2 ;;
        *) shift ;;
    esac
done
exec websockify --web "$web" "$listen" "$vnc"
"""

# xfwm4 without its compositor: no GPU here, and it would redraw for nothing.
_XFWM4_XML = """<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfwm4" version="1.0">
  <property name="general" type="empty">
    <property name="use_compositing" type="bool" value="false"/>
  </property>
</channel>
"""

_XFCONF = "/etc/xdg/xfce4/xfconf/xfce-perchannel-xml"

DESKTOP = LayerRecipe(
    name="desktop",
    aliases=(),
    parent="base",
    # XFCE idles at ~130 MiB; Firefox with one page takes ~300 MiB more, which filled the
    # server's 512 MiB default.
    memory_mb=1024,
    debian_packages=(
        "xvfb", "x11-utils", "x11-xserver-utils", "xdotool", "scrot",
        "xfce4-session", "xfwm4", "xfdesktop4", "xfce4-panel", "xfce4-terminal", "dbus-x11",
        "x11vnc", "novnc", "websockify", "net-tools",
        "xdg-utils", "libgtk-3-bin", "firefox-esr", "mousepad",
        "fonts-dejavu-core", "fonts-liberation", "adwaita-icon-theme",
    ),
    pypi_packages=(),
    npm_global_packages=(),
    guest_packages=(),
    start=StartCommand(
        argv=(SESSION, "{ready_fd}"),
        user="user",
        cwd="/home/user",
        env=(("DISPLAY", DISPLAY),),
        ready_line=b"ready\n",
        ready_url="",
        restart_on_exit=True,
    ),
    post_install=(
        # /opt/noVNC as in E2B's image: Debian's noVNC, and our utils/novnc_proxy.
        ("sh", "-c", "for f in /usr/share/novnc/*; do [ \"${f##*/}\" = utils ] || "
                     "ln -sfn \"$f\" /opt/noVNC/; done"),
        # launch("mousepad") and launch("firefox") (gtk-launch finds applications by
        # their .desktop file's name; Debian's are org.xfce.mousepad and firefox-esr).
        ("sh", "-c", "mkdir -p /usr/local/share/applications && cd /usr/share/applications "
                     "&& ln -s $PWD/org.xfce.mousepad.desktop "
                     "/usr/local/share/applications/mousepad.desktop "
                     "&& ln -s $PWD/firefox-esr.desktop "
                     "/usr/local/share/applications/firefox.desktop"),
        # The panel's default layout, so it does not ask on first start.
        ("cp", "/etc/xdg/xfce4/panel/default.xml", f"{_XFCONF}/xfce4-panel.xml"),
    ),
    files=(
        (SESSION, _SESSION_SCRIPT, 0o755),
        ("/usr/local/bin/Xvfb", _XVFB_SHIM, 0o755),
        ("/usr/local/bin/startxfce4", _STARTXFCE4_SHIM, 0o755),
        ("/usr/local/bin/xdotool", _XDOTOOL_SHIM, 0o755),
        ("/opt/noVNC/utils/novnc_proxy", _NOVNC_PROXY, 0o755),
        (f"{_XFCONF}/xfwm4.xml", _XFWM4_XML, 0o644),
    ),
)
