"""The control token: what a change to a running node must carry.

The token is HMAC-SHA256(cluster secret, a fixed label), in hex: anyone who
holds the cluster secret (the operator's `crawler ctl`, reading the same
secret_env or secret_file as the nodes) can compute it, nobody else can, and
the secret itself never travels. The label keeps it apart from the peers'
handshake proofs, made with the same secret. It is a bearer token: the
control requests travel in clear like /metrics, so the metrics port belongs
on a network the operator trusts (docs/operations.md). A node compares
tokens with hmac.compare_digest (constant time).

A single node may run without a cluster secret (it has no peers to prove
itself to). Its operator must still be able to pause it, so such a node
makes a local secret of its own, `state/control.secret` in its data_dir
(random, readable by its owner only, kept across restarts), and `crawler ctl`
on the same machine reads it from there: whoever may read the node's
data_dir may steer it, nobody else.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from crawler.fsutil import atomic_file

LABEL = b"crawler-control/1"
SCHEME = "Bearer "
OK, MISSING, WRONG = 200, 401, 403      # token_status answers: HTTP status codes
LOCAL_SECRET = "control.secret"          # in a node's state directory, when the cluster has no secret


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


def local_secret_path(state_dir: Path) -> Path:
    return state_dir / LOCAL_SECRET


def local_secret(state_dir: Path) -> bytes:
    """The node's own secret (a single node without a cluster secret): read, or made once (mode 0600)."""
    path = local_secret_path(state_dir)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = ""
    if not text:
        text = secrets.token_hex(32)
        state_dir.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, "wb") as f:
            os.fchmod(f.fileno(), 0o600)          # before it gets its name: never readable by others
            f.write((text + "\n").encode("ascii"))
    return text.encode("ascii")
