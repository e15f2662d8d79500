"""The control token: what a change to a running node must carry.

The token is HMAC-SHA256(cluster secret, a fixed label), in hex: anyone who
holds the cluster secret (the operator's `crawler ctl`, reading the same
secret_env or secret_file as the nodes) can compute it, nobody else can, and
the secret itself never travels. The label keeps it apart from the peers'
handshake proofs, made with the same secret. It is a bearer token: the
control requests travel in clear like /metrics, so the metrics port belongs
on a network the operator trusts (docs/operations.md). A node compares
tokens with hmac.compare_digest (constant time).
"""

from __future__ import annotations

import hashlib
import hmac

LABEL = b"crawler-control/1"
SCHEME = "Bearer "
OK, MISSING, WRONG = 200, 401, 403      # token_status answers: HTTP status codes


def control_token(secret: bytes) -> str:
    """The cluster's control token (hex) from its secret."""
    return hmac.new(secret, LABEL, hashlib.sha256).hexdigest()


def token_status(authorization: str | None, expected: str | None) -> int:
    """OK when `authorization` ("Bearer <token>") carries `expected`; MISSING (401) without a bearer
    token; WRONG (403) for another token, or for any token when the node has none (no cluster secret:
    changes are off)."""
    if not authorization or not authorization.startswith(SCHEME):
        return MISSING
    given = authorization[len(SCHEME):].strip().encode("ascii", "replace")
    if expected is None:
        return WRONG
    return OK if hmac.compare_digest(given, expected.encode("ascii")) else WRONG
