"""What one fetch produced: the record every caller of the fetcher receives.

A fetch never raises for anything the network or the server does; it returns a
`FetchResult` whose `reason` says what happened. `reason == "ok"` means a
complete HTTP response was received, whatever its status (a 404 is "ok": the
server answered). Every other reason is a failure code from `REASONS`, and the
fields filled before the failure (status, headers, the part of the body that
was read) are kept, so the crawl log and the WARC writer can record them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OK = "ok"
DNS_NXDOMAIN = "dns_nxdomain"
DNS_ERROR = "dns_error"
PRIVATE_ADDRESS = "private_address"
CONNECT_TIMEOUT = "connect_timeout"
CONNECT_ERROR = "connect_error"
READ_TIMEOUT = "read_timeout"
TOTAL_TIMEOUT = "total_timeout"
BODY_TOO_LARGE = "body_too_large"
DECODED_TOO_LARGE = "decoded_too_large"
BAD_CONTENT_ENCODING = "bad_content_encoding"
HEADER_TOO_LARGE = "header_too_large"
PROTOCOL_ERROR = "protocol_error"
URL_TOO_LONG = "url_too_long"
UNSUPPORTED_SCHEME = "unsupported_scheme"
INVALID_URL = "invalid_url"
TLS_UNTRUSTED = "tls_untrusted"
TLS_EXPIRED = "tls_expired"
TLS_HOSTNAME_MISMATCH = "tls_hostname_mismatch"
TLS_HANDSHAKE = "tls_handshake"
TOO_SLOW = "too_slow"
PROXY_ERROR = "proxy_error"

REASONS: tuple[tuple[str, str], ...] = (
    (OK, "A complete HTTP response was received (any status, 3xx included)."),
    (DNS_NXDOMAIN, "The host name does not exist or has no address records (NXDOMAIN/NODATA)."),
    (DNS_ERROR, "The DNS lookup failed otherwise (timeout, SERVFAIL, refused, unreachable resolver)."),
    (PRIVATE_ADDRESS, "Every address of the host is private, loopback, link-local, multicast, reserved or "
                      "unspecified and fetch.allow_private_networks is off; nothing was connected."),
    (CONNECT_TIMEOUT, "The TCP (and TLS) connection was not established within fetch.connect_timeout_s (through a "
                      "SOCKS proxy: the proxy, its connection to the target and TLS together)."),
    (CONNECT_ERROR, "The connection failed: refused, unreachable or reset."),
    (TLS_UNTRUSTED, "The server's certificate does not chain to a trusted CA (unknown issuer, self-signed) or "
                    "fails verification otherwise (revoked, bad signature, unfit for a server); nothing was sent."),
    (TLS_EXPIRED, "The server's certificate has expired or is not valid yet; nothing was sent."),
    (TLS_HOSTNAME_MISMATCH, "The server's certificate is not valid for the host name; nothing was sent."),
    (TLS_HANDSHAKE, "The TLS handshake failed otherwise (protocol or cipher mismatch, a reset, a client "
                    "certificate refused); nothing was sent."),
    (PROXY_ERROR, "The proxy (fetch.proxy or the node's own) could not be reached, refused the CONNECT tunnel "
                  "or answered with a SOCKS error (e.g. it could not reach the target); detail says which. "
                  "A plain-HTTP target's failure comes back as the proxy's own error page instead."),
    (READ_TIMEOUT, "The server went silent for longer than fetch.read_timeout_s (headers or body)."),
    (TOTAL_TIMEOUT, "The whole fetch took longer than fetch.total_timeout_s."),
    (BODY_TOO_LARGE, "The body on the wire exceeded the size limit; the first limit bytes are kept, "
                     "truncated=True, the connection was closed."),
    (DECODED_TOO_LARGE, "The content-decoded body exceeded fetch.max_decoded_bytes (e.g. a gzip bomb); "
                        "decoding stopped at the limit, truncated=True, the connection was closed."),
    (BAD_CONTENT_ENCODING, "The body could not be decoded (corrupt gzip/deflate/br/zstd data or an unsupported "
                           "Content-Encoding); raw_body holds what was received, body what decoded before the error."),
    (TOO_SLOW, "The body arrived slower than fetch.min_bytes_per_s over fetch.min_rate_window_s; what was "
                "read is kept, truncated=True, the connection was closed."),
    (HEADER_TOO_LARGE, "A response header line or field exceeded fetch.max_header_bytes."),
    (PROTOCOL_ERROR, "The response was not valid HTTP, or the connection broke before the response was complete."),
    (URL_TOO_LONG, "The URL is longer than the fetcher's max_url_bytes; nothing was sent."),
    (UNSUPPORTED_SCHEME, "The URL's scheme is not http or https; nothing was sent."),
    (INVALID_URL, "The URL could not be parsed into a request (no host, bad port...); nothing was sent."),
)

REASON_CODES: frozenset[str] = frozenset(code for code, _ in REASONS)

PERMANENT: frozenset[str] = frozenset({DNS_NXDOMAIN, PRIVATE_ADDRESS, TLS_UNTRUSTED, TLS_EXPIRED,
                                       TLS_HOSTNAME_MISMATCH})
"""Failures that say an origin cannot be fetched at all, now or on a retry: its URLs are dropped at once."""


@dataclass(slots=True)
class FetchResult:
    """One fetch: the response as received, or how far it got and why it stopped."""

    url: str
    status: int = 0                                 # HTTP status; 0 = no HTTP response
    reason: str = OK                                # "ok" or a failure code from REASONS
    http_reason: str = ""                           # reason phrase of the status line
    headers: Sequence[tuple[str, str]] = ()         # response headers as received, in order
    content_type: str | None = None                 # media type, lower-case, no parameters
    charset: str | None = None                      # charset parameter of Content-Type
    location: str | None = None                     # raw Location of a 3xx, unresolved
    retry_after_s: float | None = None              # parsed Retry-After of a 429/503
    body: bytes = b""                               # content-decoded body (what parsing sees)
    raw_body: bytes = b""                           # body as on the wire, de-chunked; `body` itself when not encoded
    wire_bytes: int = 0                             # status line + headers (as reconstructed) + raw_body
    truncated: bool = False                         # the body was cut at a limit
    ip: str | None = None                           # the server's address (via a proxy: the target's, resolved here)
    started: float = 0.0                            # time.time() at start
    duration_s: float = 0.0                         # monotonic duration of the whole fetch
    connect_s: float | None = None                  # opening a new connection (DNS included); None: reused
    request_headers: Sequence[tuple[str, str]] = ()  # request headers as sent
    detail: str = ""                                # human-readable cause of a failure, for logs
