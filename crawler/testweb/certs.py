"""A private certificate authority for HTTPS test webs: made per run, never trusted by the system.

Tests and the demo need real TLS: a CA the crawler is told about
(`fetch.tls.ca_file`), host certificates it issues, and the certificates a
crawler meets on the real web and must refuse, each for its own reason:

    issue(names)                    valid, signed by the CA          -> verifies
    self_signed(names)              signed by its own key            -> tls_untrusted
    issue(names, expired=True)      signed by the CA, validity past  -> tls_expired
    issue(["other.name"])           valid, for another name          -> tls_hostname_mismatch

Keys are ECDSA P-256: generating one takes about a millisecond, so a test web
of a hundred hosts gets its certificates in well under a second. Files are
PEM; `write()` puts a certificate and its key side by side with the key
readable by its owner only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALID_DAYS = 30
"""Lifetime of the CA and of the certificates it issues (a test run needs minutes)."""
EXPIRED_DAYS_AGO = 2
"""An expired certificate's validity ended this many days ago (past any clock skew allowance)."""
BACKDATE = dt.timedelta(hours=1)
"""Validity starts this long before now, so a peer whose clock is a little behind still accepts it."""
KEY_FILE_MODE = 0o600


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its private key on disk (PEM)."""

    cert: Path
    key: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    """DNS names, and IP addresses for names that are addresses (127.0.0.1)."""
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _pem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _leaf(names: list[str], subject_key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          issuer_key: ec.EllipticCurvePrivateKey, not_before: dt.datetime, not_after: dt.datetime,
          client: bool) -> x509.Certificate:
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (x509.CertificateBuilder()
               .subject_name(_name(names[0]))
               .issuer_name(issuer)
               .public_key(subject_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(not_before)
               .not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if not client:
        builder = builder.add_extension(_san(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


class CertAuthority:
    """A CA made in memory; `ca_pem` is what a client is told to trust."""

    def __init__(self, name: str = "crawler test CA", *, valid_days: int = CA_VALID_DAYS) -> None:
        self._key = _new_key()
        now = dt.datetime.now(dt.UTC)
        self._valid_days = valid_days
        self.subject = _name(name)
        self.cert = (x509.CertificateBuilder()
                     .subject_name(self.subject)
                     .issuer_name(self.subject)
                     .public_key(self._key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - BACKDATE)
                     .not_valid_after(now + dt.timedelta(days=valid_days))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()),
                                    critical=False)
                     .sign(self._key, hashes.SHA256()))
        self.ca_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, names: list[str], *, expired: bool = False, client: bool = False) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM) for `names` (the first is the subject's CN), signed by this CA.

        `expired`: the validity ended EXPIRED_DAYS_AGO days ago. `client`: a client
        certificate (clientAuth usage, no names checked), for `fetch.tls.client_cert_file`.
        """
        if not names:
            raise ValueError("a certificate needs at least one name")
        now = dt.datetime.now(dt.UTC)
        if expired:
            not_after = now - dt.timedelta(days=EXPIRED_DAYS_AGO)
            not_before = not_after - dt.timedelta(days=self._valid_days)
        else:
            not_before, not_after = now - BACKDATE, now + dt.timedelta(days=self._valid_days)
        key = _new_key()
        return _pem(_leaf(names, key, self.subject, self._key, not_before, not_after, client), key)

    def write_ca(self, path: str | Path) -> Path:
        """The CA certificate as a PEM file (what `fetch.tls.ca_file` names)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.ca_pem)
        return path


def self_signed(names: list[str]) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) signed by its own key: no CA vouches for it."""
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    subject = _name(names[0])
    cert = _leaf(names, key, subject, key, now - BACKDATE, now + dt.timedelta(days=CA_VALID_DAYS), False)
    return _pem(cert, key)


def write(directory: str | Path, stem: str, pair: tuple[bytes, bytes]) -> CertFiles:
    """Write `stem.crt` and `stem.key` under `directory`; the key is readable by its owner only."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(pair[0])
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, KEY_FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(pair[1])
    return CertFiles(cert_path, key_path)
