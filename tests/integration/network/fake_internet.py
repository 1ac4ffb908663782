"""A fake internet in network namespaces of this machine, routed from the host.

Two namespaces stand in for the outside: ``bacfi-web`` holds the "public" addresses
198.51.100.10, .20 and .30 (documentation range, never routed anywhere else; the routes
below keep it on this machine) plus 169.254.169.254 (a cloud metadata look-alike), and
``bacfi-dns`` holds the resolver 198.51.100.53. Each is linked to the host by a veth in
private space, as a real uplink would be. Nothing leaves this machine. The web answers
HTTPS on port 443 too, with a certificate for the ZONE's names signed by a CA made for
the session (``FakeInternet.ca_pem``), as a TLS-inspecting proxy's would be.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVERS = Path(__file__).with_name("fake_servers.py")
SITE_A, SITE_B, SITE_C = "198.51.100.10", "198.51.100.20", "198.51.100.30"
DNS_SERVER = "198.51.100.53"
METADATA = "169.254.169.254"
WEB_UPLINK = "10.203.255.2"  # the web namespace's own (private) uplink address


@dataclass(frozen=True)
class FakeInternet:
    dns_server: str = DNS_SERVER
    # The CA that signed the sites' HTTPS certificate (port 443), as PEM.
    ca_pem: bytes = b""


TLS_NAMES = ("allowed.test", "other.test")


def _make_tls(directory: Path) -> bytes:
    """A CA and a certificate for ``TLS_NAMES`` signed by it (``site.pem``, ``site.key``
    in ``directory``); returns the CA's certificate."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Fake internet test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False,
                                       decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    site = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_NAMES[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(name) for name in TLS_NAMES]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (directory / "site.pem").write_bytes(site.public_bytes(serialization.Encoding.PEM))
    (directory / "site.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM)


def requests_seen() -> list[dict[str, object]]:
    """Every request the fake web server parsed so far (method, path, Host headers),
    asked from the host, which routes to it directly."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{SITE_A}/_seen", timeout=5) as reply:
        seen: list[dict[str, object]] = json.loads(reply.read())
    return seen


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _namespace(name: str, host_if: str, host_addr: str, peer_addr: str,
               addresses: list[str], routes: list[str]) -> None:
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    _ip("netns", "add", name)
    _ip("link", "add", host_if, "type", "veth", "peer", "name", "uplink", "netns", name)
    _ip("addr", "add", f"{host_addr}/30", "dev", host_if)
    _ip("link", "set", host_if, "up")
    ns = ["-n", name]
    _ip(*ns, "addr", "add", f"{peer_addr}/30", "dev", "uplink")
    _ip(*ns, "link", "set", "uplink", "up")
    _ip(*ns, "link", "set", "lo", "up")
    for address in addresses:
        _ip(*ns, "addr", "add", f"{address}/32", "dev", "lo")
    _ip(*ns, "route", "add", "default", "via", host_addr)
    for route in routes:
        _ip("route", "replace", route, "via", peer_addr)


def _start(name: str, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["ip", "netns", "exec", name, sys.executable, str(SERVERS), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=None if env is None else os.environ | env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server says when it listens
    if line.strip() != b"ready":
        proc.kill()
        rest, _ = proc.communicate()
        raise RuntimeError(f"fake {args[0]} server failed: {line!r}{rest!r}")
    return proc


@contextlib.contextmanager
def fake_internet() -> Iterator[FakeInternet]:
    procs: list[subprocess.Popen[bytes]] = []
    tls = tempfile.TemporaryDirectory(prefix="bacfi-tls-")
    try:
        ca_pem = _make_tls(Path(tls.name))
        _namespace("bacfi-web", "bacfi0", "10.203.255.1", WEB_UPLINK,
                   [SITE_A, SITE_B, SITE_C, METADATA], ["198.51.100.0/24", f"{METADATA}/32"])
        _namespace("bacfi-dns", "bacfi1", "10.203.255.5", "10.203.255.6",
                   [DNS_SERVER], [f"{DNS_SERVER}/32"])
        procs = [_start("bacfi-web", "web", env={"FAKE_TLS_DIR": tls.name}),
                 _start("bacfi-dns", "dns", DNS_SERVER)]
        yield FakeInternet(ca_pem=ca_pem)
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate()  # reaps it and closes its stdout pipe
        tls.cleanup()
        for route in ("198.51.100.0/24", f"{DNS_SERVER}/32", f"{METADATA}/32"):
            subprocess.run(["ip", "route", "del", route], capture_output=True)
        for name, link in (("bacfi-web", "bacfi0"), ("bacfi-dns", "bacfi1")):
            subprocess.run(["ip", "link", "del", link], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
