"""What starts a desktop sandbox's stream inside it: x11vnc on the X display, noVNC's
websockify serving the viewer and its WebSocket on the stream port. The same programs and
ports as the official ``e2b-desktop`` SDK's ``stream.start()``, without a VNC password (the
gateway admits a viewer only with a stream token). Shared by Bac's SDK and Mission Control,
which both run it through envd; a no-op when the stream runs already.
"""

from __future__ import annotations

DISPLAY = ":0"
STREAM_PORT = 6080
VNC_PORT = 5900
START_BOUND_S = 15
# START_STREAM's exit status when the sandbox has no desktop to stream.
NO_DESKTOP = 3

START_STREAM = (
    "command -v x11vnc >/dev/null && pgrep -x Xvfb >/dev/null || "
    f"{{ echo 'no desktop here: x11vnc and a running Xvfb come with the desktop "
    f"template' >&2; exit {NO_DESKTOP}; }}; "
    f"pgrep -x x11vnc >/dev/null || x11vnc -bg -display {DISPLAY} -forever -wait 50 -shared "
    f"-rfbport {VNC_PORT} -nopw -quiet 2>/tmp/x11vnc_stderr.log; "
    f"ss -ltn 'sport = :{STREAM_PORT}' | grep -q LISTEN || "
    f"(cd /opt/noVNC/utils && setsid ./novnc_proxy --vnc localhost:{VNC_PORT} "
    f"--listen {STREAM_PORT} --web /opt/noVNC >/tmp/novnc.log 2>&1 &); "
    f"for _ in $(seq {START_BOUND_S * 10}); do "
    f"ss -ltn 'sport = :{STREAM_PORT}' | grep -q LISTEN && exit 0; sleep 0.1; done; "
    "echo 'the stream did not start: see /tmp/novnc.log and /tmp/x11vnc_stderr.log' >&2; "
    "exit 1"
)
