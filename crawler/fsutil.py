"""Small file-system helpers shared by the parts that write state: the one place that knows how a file is
replaced atomically and made durable, so no part can forget a step (each missing step loses data only when
the machine crashes, which no ordinary test sees)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


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


def fsync_and_close(fd: int) -> None:
    """fsync a raw file descriptor handed over for it (often in a thread, off the event loop), then
    close it, closing also when the fsync fails."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a directory's entries (new, renamed, deleted files) durable: a rename is in the directory,
    not in the file, and is lost with the machine until the directory itself is synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def tmp_path(path: Path) -> Path:
    """The name a replacement is written under before the rename: beside the target (the same file
    system, so the rename is atomic), recognisable as unfinished."""
    return path.with_name(path.name + ".tmp")


@contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb", *, durable: bool = True,
                **open_args: Any) -> Iterator[IO[Any]]:
    """Write `path` as a whole or not at all: the body writes a temporary file beside it, which on a clean
    exit is flushed, fsynced (when `durable`), renamed over `path`, and the directory fsynced. On an error
    the temporary file is removed and `path` keeps its old content. A reader therefore finds the old
    file or the new one, never a mix, also after a crash."""
    path = Path(path)
    tmp = tmp_path(path)
    try:
        with open(tmp, mode, **open_args) as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, durable: bool = True) -> None:
    """Replace `path` with `data` atomically (see `atomic_file`); text is written as UTF-8."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_file(path, "wb", durable=durable) as f:
        f.write(raw)
