"""Small file-system helpers shared by the parts that write state."""

from __future__ import annotations

import errno
import os


def short_write_error(path: object, written: int, wanted: int) -> OSError:
    """A write(2) that took fewer bytes than asked: the file system is full. Raised as ENOSPC, with the
    system's own words first, so callers treat it as the storage error it is (the node stops and resumes
    later) and an operator reads "No space left on device", not a bare count of bytes."""
    return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (short write: {written} of {wanted} bytes)",
                   str(path))
