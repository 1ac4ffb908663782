"""The operator's CA certificates, added to the sandbox's trust store when it starts.

An operator whose sandboxes reach the internet through a TLS-inspecting proxy, or reach
internal services signed by a private CA, names those CAs to the server
(``BAC_SANDBOX_CA_CERTS``). The host puts them, as PEM, at ``/run/bac/ca.pem`` (a
read-only mount of the sandbox's own); before envd reports ready, the sandbox's first
process adds each one the template does not trust yet:

- to the system bundle ``/etc/ssl/certs/ca-certificates.crt`` (what OpenSSL, curl,
  Debian's pip and requests read; made when the template has none) and to the other
  bundles a distribution may keep (Fedora's, Alpine's ``/etc/ssl/cert.pem``);
- as ``/usr/local/share/ca-certificates/bac/operator-<n>.crt``, where Debian's
  ``update-ca-certificates`` finds them, so a later rebuild of the bundle inside (an
  ``apt-get upgrade`` of ca-certificates) keeps them.

The host also sets ``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE`` and ``PIP_CERT`` to the
system bundle and ``NODE_EXTRA_CA_CERTS`` to ``/run/bac/ca.pem`` in every process's
environment (unless the template or the request set them), for the tools that would
otherwise read a bundle of their own. This runs as the sandbox's root, inside it: the
host never opens a path of the sandbox's. Idempotent: a certificate already there (by its
DER bytes) is not added again, so a restart or a snapshot's restore changes nothing.
Built on ``os`` alone: it runs before envd's front, on every sandbox's boot.

The same way, ``/init`` may carry the sandbox's own relay CA (``bacTrust``: the host's
egress relay terminates TLS with it for the hosts the sandbox's network rules name, and
keeps its key); ``install_text`` adds it (as ``relay-0.crt``, replacing the CA of the
sandbox a checkpoint was taken from). A certificate is all the sandbox gets: nothing
here can sign.
"""

from __future__ import annotations

import os

SOURCE = "/run/bac/ca.pem"
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
OTHER_BUNDLES = ("/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
LOCAL_DIR = "/usr/local/share/ca-certificates"

_BEGIN = "-----BEGIN CERTIFICATE-----"
_END = "-----END CERTIFICATE-----"


def certificates(text: str) -> list[str]:
    """The PEM certificates in ``text``, each as one normalised block (64-column base64
    between its markers, ending in a newline); anything else is skipped."""
    found: list[str] = []
    rest = text
    while True:
        start = rest.find(_BEGIN)
        if start < 0:
            return found
        end = rest.find(_END, start)
        if end < 0:
            return found
        body = "".join(rest[start + len(_BEGIN):end].split())
        rest = rest[end + len(_END):]
        if body:
            lines = [body[i:i + 64] for i in range(0, len(body), 64)]
            found.append("\n".join([_BEGIN, *lines, _END]) + "\n")


def _key(block: str) -> str:
    return "".join(block.split("\n")[1:-2])


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _write(path: str, text: str) -> None:
    """Replace ``path`` whole (a reader never sees half a bundle), world-readable."""
    partial = f"{path}.bac-new"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, text.encode("ascii"))
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    os.replace(partial, path)


def _merge(path: str, extra: list[str], new: bool = False) -> list[str]:
    """Append to the bundle at ``path`` the certificates of ``extra`` it lacks; returns
    those added. ``new``: they were just made, so only a copy added here before (the
    same normalised text) is looked for, not every certificate parsed (a bundle of ~140
    takes 3-10 ms to parse; this runs in a create's ``/init``)."""
    text = _read(path) or ""
    if new:
        missing = [block for block in extra if block not in text]
    else:
        have = {_key(block) for block in certificates(text)}
        missing = [block for block in extra if _key(block) not in have]
    if missing:
        if text and not text.endswith("\n"):
            text += "\n"
        _write(path, text + "".join(missing))
    return missing


def install(source: str = SOURCE) -> int:
    """Add the certificates at ``source`` to the sandbox's trust store; returns how many
    the system bundle lacked (0: none given, or all there)."""
    return install_text(_read(source) or "")


def install_text(text: str, kind: str = "operator", *, new: bool = False) -> int:
    """Add the PEM certificates in ``text`` to the trust store, as ``<kind>-<n>.crt``
    where ``update-ca-certificates`` finds them; returns how many the bundle lacked.
    ``new``: certificates just made (see ``_merge``)."""
    extra = certificates(text)
    if not extra:
        return 0
    real = os.path.realpath(BUNDLE)
    if not os.path.exists(real):
        os.makedirs(os.path.dirname(real), mode=0o755, exist_ok=True)
        # A distribution keeping its bundle elsewhere: start from it.
        base = next((t for p in OTHER_BUNDLES if (t := _read(p))), "")
        _write(real, base)
    added = _merge(real, extra, new)
    seen = {real}
    for other in OTHER_BUNDLES:
        path = os.path.realpath(other)
        if path not in seen and os.path.isfile(path):
            seen.add(path)
            _merge(path, extra, new)
    if added and os.path.isdir(LOCAL_DIR):
        local = os.path.join(LOCAL_DIR, "bac")
        os.makedirs(local, mode=0o755, exist_ok=True)
        for n, block in enumerate(added):
            _write(os.path.join(local, f"{kind}-{n}.crt"), block)
    return len(added)


def install_or_say() -> None:
    """``install``, a failure said on stderr: a store left as the template made it must
    not stop the sandbox (its commands would then fail on the proxy's certificate, with
    OpenSSL's own words)."""
    try:
        install()
    except (OSError, UnicodeError) as exc:
        os.write(2, f"bac_envd: adding the operator's CA certificates failed: {exc}\n"
                 .encode(errors="replace"))
