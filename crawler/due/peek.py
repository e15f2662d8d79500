"""The fingerprints prompt lookups (`DiskDUE.peek`) handed out before their merge, and their files.

A peek hands out URLs that are still in the buffer; the merge that later
takes them must not hand them out again, also after a restart. So the
fingerprints are remembered in RAM (`early`) until their merge is collected,
and on disk in two files of raw uint64:

    peeked.u64        appended at the next call after the one that handed them
                      out (by then the caller has queued them: a crash repeats
                      them at worst, never loses them); rewritten when it holds
                      mostly fingerprints now on disk
    peeked-last.u64   the last peek's fingerprints until then: a restart hands
                      them out again and counts them as duplicates
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crawler.due.diskset import FP_BYTES, FP_DTYPE, DiskSet
from crawler.fsutil import atomic_file

PEEK_LOG = "peeked.u64"         # fingerprints prompt lookups handed out before their merge (uint64, appended)
PEEK_LAST = "peeked-last.u64"   # the last peek's fingerprints, until the next call logs them (uint64)
PEEK_LOG_SLACK_BYTES = 65536    # the log is rewritten once it holds this much more than the early set
_NO_FPS = np.empty(0, dtype=np.uint64)


class PeekLog:
    """Peeked fingerprints not yet merged: in RAM and in the two files of one DUE directory."""

    def __init__(self, directory: Path) -> None:
        self.early: set[int] = set()       # fingerprints peek handed out, until their merge collects
        self.pending: list[int] = []       # those of the last peeks, not yet in the log
        self.handed_out = 0                # URLs handed out by peek (this session)
        self.log_path = directory / PEEK_LOG
        self.last_path = directory / PEEK_LAST

    def write_last(self) -> None:
        """Before the caller has them: a crash from here to the next call hands them out again, counted."""
        if self.pending:
            self.last_path.write_bytes(np.asarray(self.pending, dtype=FP_DTYPE).tobytes())

    def log(self) -> None:
        """Append the fingerprints the last peeks handed out to the log, so a restart does not hand them
        out again: the restored buffer holds them, and the restored early set makes its merge skip them."""
        if self.pending:
            with open(self.log_path, "ab") as log_file:
                log_file.write(np.asarray(self.pending, dtype=FP_DTYPE).tobytes())
            self.pending = []
            self.last_path.unlink(missing_ok=True)   # after the append: a crash between reads them as logged

    def trim(self) -> None:
        """After a merge took peeked fingerprints: drop the log when nothing is early any more, rewrite it
        (atomically; not fsynced, as appends are not) when it holds mostly fingerprints now on disk."""
        if self.early:
            try:
                size = self.log_path.stat().st_size
            except FileNotFoundError:
                return
            if size <= PEEK_LOG_SLACK_BYTES + 2 * FP_BYTES * len(self.early):
                return
            logged = self.early.difference(self.pending)
            with atomic_file(self.log_path, "wb", durable=False) as f:
                np.fromiter(logged, dtype=np.uint64, count=len(logged)).astype(FP_DTYPE).tofile(f)
        else:                                        # every peeked fingerprint is on disk, its marker without it
            self.pending = []
            self.log_path.unlink(missing_ok=True)
            self.last_path.unlink(missing_ok=True)

    def logged(self) -> np.ndarray:
        """The fingerprints in the log (read at restore, before the buffer is)."""
        return _read_fps(self.log_path)

    def restore(self, logged: np.ndarray, buffered: np.ndarray, disk: DiskSet) -> int:
        """Peeked fingerprints the restored buffer still holds and the disk does not: those `logged` (the
        caller had them) are early again, so their merge skips them; those of the last peek only (the
        caller may or may not have queued them) come out again. Returns how many of those: duplicates."""
        duplicates = 0
        last = _read_fps(self.last_path)
        if len(buffered) and (len(logged) or len(last)):
            logged = logged[np.isin(logged, buffered)]
            logged = logged[~disk.contains(logged)] if len(logged) else logged
            self.early = set(logged.tolist())
            last = np.unique(last[np.isin(last, buffered) & ~np.isin(last, logged)])
            if len(last):
                duplicates = int((~disk.contains(last)).sum())
        if not self.early:
            self.log_path.unlink(missing_ok=True)
        return duplicates

    def forget_last(self) -> None:
        """The last peek's fingerprints are counted (the restore's manifest is written)."""
        self.last_path.unlink(missing_ok=True)


def _read_fps(path: Path) -> np.ndarray:
    """A file of fingerprints (a torn last one is dropped), empty if there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return _NO_FPS
    return np.frombuffer(data[:len(data) - len(data) % FP_BYTES], dtype=FP_DTYPE).astype(np.uint64)
