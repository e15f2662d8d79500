"""The node's errors: a port it cannot listen on, and the write errors that stop it."""

from __future__ import annotations

import errno

from crawler.config import ConfigError

# Write errors that stop the node (its state could no longer be recorded).
STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def is_storage_error(exc: OSError) -> bool:
    """Is this a failure to write state (disk full, quota, read-only, I/O error), which stops the node?"""
    return exc.errno in STORAGE_ERRNOS


class ListenError(ConfigError):
    """A port of the node's config cannot be listened on (taken, or not an address of this machine)."""
