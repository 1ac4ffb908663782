"""A sandbox's relay CA: the certificate authority its trust store holds so that the egress
relay can terminate TLS for the hosts its rules name (``_proxy``), and the
certificates minted from it, one per host.

The CA is made per sandbox (an EC P-256 key and a self-signed certificate that signs
certificates, no sub-CA: path length 0) when the sandbox is handed out; its
certificate goes to the sandbox through envd's ``/init`` (``bacTrust``), which adds it
to the trust store. Its key is in the server's memory and, for a restarted server to
take the sandbox back, in the slot's ``relay-ca.sealed`` sealed with the store's key
(``Egress``): never in clear in a file, and never in the store, a checkpoint or the
sandbox. Without the store's key (or the file) a re-attached sandbox has no CA: the
relay closes its ruled TLS connections instead of sending them anywhere (fail closed).

Leaf certificates (one EC key per CA, a certificate per host name, valid for a week and
minted again a day before they end) are loaded into an ``ssl.SSLContext`` through a
memfd: ``load_cert_chain`` takes only paths, and the key never touches a file system.
"""

from __future__ import annotations

import datetime
import json
import os
import ssl
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_CA_DAYS = 3650
_LEAF = datetime.timedelta(days=7)
_RENEW = datetime.timedelta(days=1)
_SKEW = datetime.timedelta(hours=1)
_MAX_HOSTS = 256  # contexts kept per sandbox (a *.domain rule names unboundedly many)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _context_from(chain_and_key: bytes) -> ssl.SSLContext:
    """A server context holding ``chain_and_key`` (PEM), read from a memfd."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # HTTP/1.1 only: the relay reads each request with h11.
    context.set_alpn_protocols(["http/1.1"])
    fd = os.memfd_create("bac-relay-leaf", os.MFD_CLOEXEC)
    try:
        os.write(fd, chain_and_key)
        context.load_cert_chain(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    return context


def _new_ca(label: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Bac"),
                      x509.NameAttribute(NameOID.COMMON_NAME,
                                         f"Bac egress relay CA {label}"[:64])])
    now = _now()
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW).not_valid_after(now + datetime.timedelta(_CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256()))
    return key, cert


class RelayCa:
    """One sandbox's CA and the server contexts of the hosts it was asked for."""

    def __init__(self, label: str, *, saved: str | None = None) -> None:
        """A new CA, or with ``saved`` the one ``saved()`` gave (raises ValueError for
        text that is not one)."""
        if saved is None:
            self._key, self._cert = _new_ca(label)
        else:
            data = json.loads(saved)
            key = serialization.load_pem_private_key(data["key"].encode(), None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError("not an EC key")
            self._key = key
            self._cert = x509.load_pem_x509_certificate(data["cert"].encode())
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._leaf_key_pem = _pem_key(self._leaf_key)
        self._contexts: dict[str, tuple[datetime.datetime, ssl.SSLContext]] = {}
        self._lock = threading.Lock()

    def saved(self) -> str:
        """The CA, key included, as text to seal (never to write in clear)."""
        return json.dumps({"key": _pem_key(self._key).decode("ascii"),
                           "cert": self.cert_pem})

    def _leaf(self, host: str, now: datetime.datetime) -> bytes:
        public = self._leaf_key.public_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self._cert.subject).public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _SKEW).not_valid_after(now + _LEAF)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM) + \
            self._cert.public_bytes(serialization.Encoding.PEM) + self._leaf_key_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """The TLS server context presenting a certificate for ``host`` (one per host,
        minted again before it ends)."""
        now = _now()
        with self._lock:
            found = self._contexts.get(host)
            if found is not None and found[0] - _RENEW > now:
                return found[1]
            context = _context_from(self._leaf(host, now))
            if len(self._contexts) >= _MAX_HOSTS:
                self._contexts.pop(next(iter(self._contexts)))
            self._contexts[host] = (now + _LEAF, context)
            return context
