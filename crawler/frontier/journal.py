"""The frontier's write-ahead journal and checkpoints: how a node's frontier survives a restart.

State on disk (`<data_dir>/frontier/`):

    checkpoint-<g>.jsonl   the whole frontier at one moment: a header line,
                           then one line per host (its chunk references, the
                           URL it had in flight and those put back or not
                           confirmed, when it may next be contacted, its
                           estimates); the rest of the URLs it held in RAM
                           are one more chunk, first in its list, in a
                           segment the checkpoint writes for itself (older
                           checkpoints hold them as rows here: still read)
    journal-<g>.log        everything since checkpoint g, one line each:
                             a <seq> <quality> <host> <url>   URL added
                             s <host> <url>                   fetch started
                             d <host> <wall next> <url>       fetch finished (url
                                                              empty: put back, or
                                                              not confirmed yet)
                             c <url>                          confirmed done
    seg-*.dat              spilled chunks (segments.py)

Recovery loads the newest complete checkpoint and replays the journals from
its generation on. A URL whose fetch started and did not finish is fetched
again (that is the bound on re-fetches: the URLs in flight), and its host
first waits `resume_wait_s`, because the length of the interrupted request
is unknown and the server may still be serving it. A finished URL that is
still in a queue after replay is remembered in a small set and skipped when
its turn comes.

A checkpoint is written to a temporary name, fsynced with the segments it
names, renamed, and only then are older checkpoints and journals deleted.
Journal lines are single `write(2)` calls: a killed process loses none of
them; `fsync` runs every `journal_fsync_s` (power loss is bounded by it).
A torn last line (power loss mid-write) is ignored with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crawler.fsutil import atomic_file, short_write_error

log = logging.getLogger(__name__)

CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{10})\.jsonl$")
JOURNAL_NAME = re.compile(r"^journal-(\d{10})\.log$")
# 2: queued URLs are lineage-tagged strings (crawler/urls/lineage.py); 1 (still read): bare URLs, which
# read as lineage unknown. The journal and segment lines hold the same strings in the same places.
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)


def checkpoint_path(directory: Path, gen: int) -> Path:
    return directory / f"checkpoint-{gen:010d}.jsonl"


def journal_path(directory: Path, gen: int) -> Path:
    return directory / f"journal-{gen:010d}.log"


def numbered_files(directory: Path, pattern: re.Pattern) -> dict[int, Path]:
    """Files of `directory` whose name matches `pattern`, by the number in its first group."""
    out = {}
    for path in directory.iterdir():
        m = pattern.match(path.name)
        if m:
            out[int(m.group(1))] = path
    return out


@dataclass
class HostRecord:
    """One host as a checkpoint line holds it."""
    name: str
    next_ok_wall: float = 0.0
    ip: str | None = None
    stats: list | None = None                       # [connect_s, response_s, fetches, connections]
    chunks: list[list] = field(default_factory=list)
    ram: list[list] = field(default_factory=list)   # [seq, quality, url, first (0/1)]
    inflight: str | None = None

    def to_json(self) -> str:
        row: dict[str, object] = {"h": self.name}
        if self.next_ok_wall:
            row["n"] = round(self.next_ok_wall, 3)
        if self.ip:
            row["ip"] = self.ip
        if self.stats:
            row["st"] = self.stats
        if self.chunks:
            row["ck"] = self.chunks
        if self.ram:
            row["r"] = self.ram
        if self.inflight:
            row["f"] = self.inflight
        return json.dumps(row, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> HostRecord:
        row = json.loads(line)
        return cls(row["h"], row.get("n", 0.0), row.get("ip"), row.get("st"), row.get("ck", []),
                   row.get("r", []), row.get("f"))


@dataclass
class Checkpoint:
    gen: int
    seq: int
    done: list[str]
    hosts: list[HostRecord]
    written_wall: float
    unconfirmed: list[str] = field(default_factory=list)


def write_checkpoint(directory: Path, gen: int, seq: int, done: list[str], hosts: Iterator[HostRecord], *,
                     unconfirmed: Sequence[str] = ()) -> Path:
    """Write checkpoint `gen` atomically (tmp, fsync, rename, fsync dir)."""
    final = checkpoint_path(directory, gen)
    header = {"version": FORMAT_VERSION, "gen": gen, "seq": seq, "wall": time.time(), "done": done,
              "unconfirmed": list(unconfirmed)}
    with atomic_file(final, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(json.dumps(header, separators=(",", ":"), ensure_ascii=False) + "\n")
        for record in hosts:
            f.write(record.to_json() + "\n")
    return final


def read_checkpoint(path: Path) -> Checkpoint:
    with path.open(encoding="utf-8", errors="surrogatepass") as f:
        header = json.loads(f.readline())
        if header.get("version") not in READ_VERSIONS:
            raise ValueError(f"{path}: unknown frontier checkpoint version {header.get('version')!r}")
        hosts = [HostRecord.from_json(line) for line in f if line.strip()]
    return Checkpoint(int(header["gen"]), int(header["seq"]), list(header.get("done", [])), hosts,
                      float(header.get("wall", 0.0)), list(header.get("unconfirmed", [])))


def latest_checkpoint(directory: Path) -> Path | None:
    found = numbered_files(directory, CHECKPOINT_NAME)
    return found[max(found)] if found else None


def journals_from(directory: Path, gen: int) -> list[Path]:
    found = numbered_files(directory, JOURNAL_NAME)
    return [found[g] for g in sorted(found) if g >= gen]


def journal_generation(path: Path) -> int:
    m = JOURNAL_NAME.fullmatch(path.name)
    if m is None:
        raise ValueError(f"{path}: not a frontier journal file name")
    return int(m.group(1))


def remove_before(directory: Path, gen: int) -> None:
    """Delete checkpoints and journals older than generation `gen`, and stray temporaries (a crash
    mid-write leaves one)."""
    for pattern in (CHECKPOINT_NAME, JOURNAL_NAME):
        for g, path in numbered_files(directory, pattern).items():
            if g < gen:
                path.unlink(missing_ok=True)
    for path in directory.glob("checkpoint-*.tmp"):
        path.unlink(missing_ok=True)


def read_journal(path: Path) -> Iterator[list[str]]:
    """Records of one journal as field lists; a torn last line is skipped with a warning."""
    data = path.read_bytes()
    if not data:
        return
    text = data.decode("utf-8", "surrogatepass")
    lines = text.split("\n")
    if lines[-1]:
        log.warning("%s: the last journal line is incomplete (%d bytes); ignored", path, len(lines[-1]))
    for line in lines[:-1]:
        if not line:
            continue
        kind = line[0]
        if kind == "a":
            yield line.split("\t", 4)
        elif kind == "s":
            yield line.split("\t", 2)
        elif kind == "d":
            yield line.split("\t", 3)
        elif kind == "c":
            yield line.split("\t", 1)
        else:
            log.warning("%s: unknown journal record %r; ignored", path, line[:80])


class FrontierJournal:
    """The frontier's write-ahead journal: appends records with one write(2) each; fsyncs on request."""

    def __init__(self, directory: Path, gen: int, on_error: Callable[[OSError], None] | None = None) -> None:
        """`on_error`: called (instead of raising) when a record cannot be written; later records
        are dropped, so the file ends at the last complete record, as after a crash."""
        self.path = journal_path(directory, gen)
        self.gen = gen
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.bytes = 0
        self._dirty = False
        self._on_error = on_error
        self.failed: OSError | None = None

    def write(self, text: str) -> None:
        if self.failed is not None:
            return
        data = text.encode("utf-8", "surrogatepass")
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise short_write_error(self.path, written, len(data))
        except OSError as exc:
            if self._on_error is None:
                raise
            self._on_error(exc)                  # may raise: then this write simply failed
            self.failed = exc
            return
        self.bytes += len(data)
        self._dirty = True

    def added(self, rows: list[tuple[int, float, str, str]]) -> None:
        """URLs added: (seq, quality, host, url) each."""
        self.write("".join(f"a\t{seq}\t{q!r}\t{host}\t{url}\n" for seq, q, host, url in rows))

    def started(self, host: str, url: str) -> None:
        self.write(f"s\t{host}\t{url}\n")

    def finished(self, host: str, next_ok_wall: float, url: str) -> None:
        self.write(f"d\t{host}\t{next_ok_wall:.3f}\t{url}\n")

    def confirmed(self, urls: list[str]) -> None:
        self.write("".join(f"c\t{url}\n" for url in urls))

    def sync(self) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def dup_if_dirty(self) -> int | None:
        """A duplicate of the file descriptor to fsync elsewhere (a thread: an fsync on the event
        loop stalls every fetch in flight), if anything was written since the last one."""
        if not self._dirty:
            return None
        self._dirty = False
        return os.dup(self._fd)

    def detach(self) -> int | None:
        """Stop writing and hand over the file to be fsynced and closed elsewhere: its descriptor
        if it has unsynced writes, else None (closed here)."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return None
        if self._dirty:
            self._dirty = False
            return fd
        os.close(fd)
        return None

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
