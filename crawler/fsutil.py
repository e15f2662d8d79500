"""Small file-system helpers shared by the parts that write state."""

from __future__ import annotations

import errno
import os
from typing import IO


def short_write_error(path: object, written: int, wanted: int) -> OSError:
    """A write(2) that took fewer bytes than asked: the file system is full. Raised as ENOSPC, with the
    system's own words first, so callers treat it as the storage error it is (the node stops and resumes
    later) and an operator reads "No space left on device", not a bare count of bytes."""
    return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (short write: {written} of {wanted} bytes)",
                   str(path))


def close_durably(file: IO[bytes] | IO[str]) -> None:
    """Flush, fsync and close a file a later process must find whole (WARC, crawl log, stream log,
    frontier chunks): closing alone leaves the data in the page cache, lost with the machine."""
    file.flush()
    os.fsync(file.fileno())
    file.close()
