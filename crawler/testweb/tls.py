"""The test web's certificates: which one each host presents, on disk, and a server context choosing by SNI.

Every host that speaks HTTPS (model.Tls) shares one certificate issued by a CA
made per run (certs.py) for `*.<domain>` and `<domain>`; the bad-certificate
hosts present their own, each failing verification for one reason:

    tls-self-signed.<domain>   self-signed                       -> tls_untrusted
    tls-expired.<domain>       CA-signed, validity ended         -> tls_expired
    tls-wrong-name.<domain>    CA-signed for WRONG_NAME          -> tls_hostname_mismatch

`write_certs(web, directory)` writes them as PEM files (`ca.crt`, what a
crawler's `fetch.tls.ca_file` names, beside them); the aiohttp server loads
them into `server_context(...)`, nginx names them in its server blocks
(static.py). A client that sends no SNI gets the shared certificate.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from . import certs
from .model import Role, Web

CA_FILE = "ca.crt"
"""File name of the CA certificate (what `fetch.tls.ca_file` names)."""
SHARED_STEM = "web"
"""File stem of the certificate every good HTTPS host shares."""
WRONG_NAME = "not-this-host.invalid"
"""The only name on the wrong-name host's certificate (under .invalid: it names no host of any web)."""

# OpenSSL verification codes (include/openssl/x509_vfy.h) -> crawl-log reasons (crawler/fetch/result.py).
_X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT = 2
_X509_V_ERR_CERT_NOT_YET_VALID = 9
_X509_V_ERR_CERT_HAS_EXPIRED = 10
_X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT = 18
_X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN = 19
_X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY = 20
_X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE = 21
_X509_V_ERR_HOSTNAME_MISMATCH = 62
VERIFY_REASONS = {
    _X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT: "tls_untrusted",
    _X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: "tls_untrusted",
    _X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN: "tls_untrusted",
    _X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "tls_untrusted",
    _X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE: "tls_untrusted",
    _X509_V_ERR_CERT_NOT_YET_VALID: "tls_expired",
    _X509_V_ERR_CERT_HAS_EXPIRED: "tls_expired",
    _X509_V_ERR_HOSTNAME_MISMATCH: "tls_hostname_mismatch",
}
"""OpenSSL verify code -> the reason a crawler records (any other failure: tls_handshake)."""


@dataclass(frozen=True)
class WebCerts:
    """The certificate files of a web's HTTPS hosts."""

    directory: Path
    ca_file: Path
    """The CA certificate: trust it and every good host verifies."""
    shared: certs.CertFiles
    """`*.<domain>`, presented by every good HTTPS host (and to clients without SNI)."""
    by_host: dict[str, certs.CertFiles] = field(default_factory=dict)
    """Host name -> its own certificate (the bad-certificate hosts)."""


def write_certs(web: Web, directory: str | Path, ca: certs.CertAuthority | None = None,
                ca_file: str | Path | None = None) -> WebCerts:
    """Issue the web's certificates (from `ca`, or a new CA) and write them under `directory`,
    the CA certificate to `ca_file` (default `directory/ca.crt`)."""
    directory = Path(directory)
    ca = ca or certs.CertAuthority()
    domain = web.params.domain
    ca_file = ca.write_ca(directory / CA_FILE if ca_file is None else Path(ca_file))
    shared = certs.write(directory, SHARED_STEM, ca.issue([f"*.{domain}", domain]))
    by_host: dict[str, certs.CertFiles] = {}
    for host in web.hosts:
        if host.role is Role.TLS_SELF_SIGNED:
            pair = certs.self_signed([host.name])
        elif host.role is Role.TLS_EXPIRED:
            pair = ca.issue([host.name], expired=True)
        elif host.role is Role.TLS_WRONG_NAME:
            pair = ca.issue([WRONG_NAME])
        else:
            continue
        by_host[host.name] = certs.write(directory, host.name, pair)
    return WebCerts(directory, ca_file, shared, by_host)


def server_context(web_certs: WebCerts) -> ssl.SSLContext:
    """A server context presenting the shared certificate, switching to a host's own by SNI."""
    default = _context(web_certs.shared)
    contexts = {name: _context(files) for name, files in web_certs.by_host.items()}

    def pick(sslobj: ssl.SSLObject, server_name: str | None, _ctx: ssl.SSLContext) -> None:
        ctx = contexts.get((server_name or "").lower().rstrip("."))
        if ctx is not None:
            sslobj.context = ctx  # returning None goes on with the handshake

    default.sni_callback = pick
    return default


def _context(files: certs.CertFiles) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(files.cert, files.key)
    return ctx


def client_context(ca_file: str | Path) -> ssl.SSLContext:
    """A verifying client context trusting the test web's CA (and only it)."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    return ctx


def verify_reason(exc: BaseException) -> str:
    """The crawl-log reason of a failed TLS handshake (tls_untrusted, tls_expired, tls_hostname_mismatch,
    or tls_handshake for anything that is not a certificate verification failure)."""
    code = getattr(exc, "verify_code", None)
    if code is None:
        code = getattr(getattr(exc, "certificate_error", None), "verify_code", None)  # aiohttp wraps it
    return VERIFY_REASONS.get(code, "tls_handshake") if isinstance(code, int) else "tls_handshake"
