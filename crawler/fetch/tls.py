"""TLS for the fetcher: one SSL context per node from `fetch.tls`, and what a TLS failure means.

The context (`make_context`) is built once, when the fetcher is made, so a
configuration mistake stops the node at start with the key to fix
(`ConfigError`) instead of failing every HTTPS fetch of the crawl:

- `verify: true` (the default): the system's trusted CAs, plus `ca_file` and
  `ca_dir` when given (added to the system store, never replacing it: a
  private CA must not make the public web untrusted), host names checked;
- `verify: false`: no certificate is checked at all (a test web whose
  certificates nobody signed); the fetcher says so once in the log;
- `client_cert_file` (+ `client_key_file`): presented to servers that ask.

`classify` turns the exception of a failed handshake into one of the reason
codes of result.py. Certificate problems are told apart by OpenSSL's verify
code (`ssl.SSLCertVerificationError.verify_code`), never by message text:

- expired or not yet valid                       -> tls_expired
- the name is not in the certificate             -> tls_hostname_mismatch
- any other verification failure (unknown issuer,
  self-signed, self-signed in the chain, unable
  to verify, revoked, weak key...)               -> tls_untrusted
- any other TLS failure (protocol version, cipher,
  an alert, a client certificate refused)        -> tls_handshake
"""

from __future__ import annotations

import os
import ssl

from crawler.config.loader import ConfigError
from crawler.config.schema import TlsConfig
from crawler.fetch import result as R

# OpenSSL X509_V_ERR_* codes (include/openssl/x509_vfy.h), stable across OpenSSL versions.
_X509_V_ERR_CERT_NOT_YET_VALID = 9
_X509_V_ERR_CERT_HAS_EXPIRED = 10
_X509_V_ERR_HOSTNAME_MISMATCH = 62
_X509_V_ERR_EMAIL_MISMATCH = 63
_X509_V_ERR_IP_ADDRESS_MISMATCH = 64
_EXPIRED_CODES = frozenset({_X509_V_ERR_CERT_NOT_YET_VALID, _X509_V_ERR_CERT_HAS_EXPIRED})
_MISMATCH_CODES = frozenset({_X509_V_ERR_HOSTNAME_MISMATCH, _X509_V_ERR_EMAIL_MISMATCH,
                             _X509_V_ERR_IP_ADDRESS_MISMATCH})
_HASH_NAME_CHARS = 8                      # OpenSSL's hashed names: 8 hex digits, a dot, a number
_KEY = "fetch.tls"


class _EncryptedKey(Exception):
    """The client key asks for a passphrase; a crawler has nobody to type it."""


def _no_passphrase() -> bytes:
    raise _EncryptedKey()


def _has_hashed_names(directory: str) -> bool:
    """True if `directory` holds at least one OpenSSL hashed name (`5ed36f99.0`), as openssl rehash makes."""
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and len(stem) == _HASH_NAME_CHARS and suffix.isdigit():
            try:
                int(stem, 16)
            except ValueError:
                continue
            return True
    return False


def _fail(key: str, path: str, what: str) -> ConfigError:
    return ConfigError(f"{_KEY}.{key}: {what} ({path})")


def make_context(config: TlsConfig) -> ssl.SSLContext:
    """The client SSL context for `fetch.tls`; raises ConfigError naming the key of a bad setting."""
    if config.verify:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)     # system trust, host names checked
        if config.ca_file:
            if not os.path.isfile(config.ca_file):
                raise _fail("ca_file", config.ca_file, "no such file")
            try:
                ctx.load_verify_locations(cafile=config.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise _fail("ca_file", config.ca_file, f"not a readable PEM file of CA certificates: {exc}") from None
        if config.ca_dir:
            if not os.path.isdir(config.ca_dir):
                raise _fail("ca_dir", config.ca_dir, "no such directory")
            try:
                hashed = _has_hashed_names(config.ca_dir)
            except OSError as exc:
                raise _fail("ca_dir", config.ca_dir, f"cannot list it: {exc.strerror}") from None
            if not hashed:
                # OpenSSL only looks certificates up by hashed name: a directory without them trusts nothing.
                raise _fail("ca_dir", config.ca_dir, "holds no hashed certificate names; run "
                                                     "'openssl rehash' on it")
            ctx.load_verify_locations(capath=config.ca_dir)
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if config.client_cert_file:
        _load_client_cert(ctx, config.client_cert_file, config.client_key_file)
    elif config.client_key_file:
        raise _fail("client_key_file", config.client_key_file, "given without fetch.tls.client_cert_file")
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, cert_file: str, key_file: str | None) -> None:
    for key, path in (("client_cert_file", cert_file), ("client_key_file", key_file)):
        if path and not os.path.isfile(path):
            raise _fail(key, path, "no such file")
    try:
        # OpenSSL's errors do not say which of the two files is wrong: read the certificates alone first.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert_file)
    except (OSError, ssl.SSLError) as exc:
        raise _fail("client_cert_file", cert_file, f"not a readable PEM certificate: {exc}") from None
    key, path = ("client_key_file", key_file) if key_file else ("client_cert_file", cert_file)
    try:
        ctx.load_cert_chain(cert_file, key_file, password=_no_passphrase)
    except _EncryptedKey:
        raise _fail(key, path, "the private key is encrypted; give an unencrypted key readable by the "
                               "crawler only") from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise _fail(key, path, "the private key does not match the client certificate") from None
        what = "holds no PEM private key" + ("" if key_file else "; give fetch.tls.client_key_file")
        raise _fail(key, path, f"{what} ({exc})") from None
    except OSError as exc:
        raise _fail(key, path, f"cannot read it: {exc.strerror}") from None


def classify(exc: BaseException) -> str:
    """The tls_* reason of one exception of a failure chain, or "" when it is no TLS error."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = getattr(exc, "verify_code", None)
        if code is None:
            return ""                                      # aiohttp's wrapper; the cause it wraps says which
        if code in _EXPIRED_CODES:
            return R.TLS_EXPIRED
        if code in _MISMATCH_CODES:
            return R.TLS_HOSTNAME_MISMATCH
        return R.TLS_UNTRUSTED
    if isinstance(exc, ssl.SSLError):
        return R.TLS_HANDSHAKE
    return ""
