"""Checkpoint and restore: the one small protocol every stateful part of a node speaks.

A node restarted on its data_dir must go on where it stopped, not start its
caches cold: without its robots.txt cache it would ask every host for
robots.txt again, without its DNS cache query every name again, and its
crawl totals would restart at zero. Every part with state that outlives the
process is a `Stateful`: a `name` and two methods,

    save(store, final=False)   write what a later process needs (final: the
                               clean stop's last save; parts may close files);
                               may return an awaitable (the caches and the
                               frontier's periodic checkpoint write in a thread)
    restore(store)             read it back, once, before the crawl goes on

and the node keeps a list of them: `save_all` at every periodic checkpoint
(`frontier.checkpoint_interval_s`) and at a clean stop, `restore_all` at
start. Nothing else in the node special-cases checkpointing.

Parts that already have their own durable files join through thin adapters
(below): the frontier (checkpoint + journal), the DUE (journal + manifest)
and the peer spools; their `restore` is what their constructors already did.
Parts without files of their own (robots.txt cache, DNS cache, crawl
totals) write through the `StateStore`: one JSON Lines file per part under
`<data_dir>/state/`, `<name>.jsonl`, whose first line is a header

    {"name": "robots", "saved_at": 1718000000.0, "version": 1}

then one JSON object per line, then an end line `{"end": "robots",
"records": 123}` (a file cut short is seen as such). A file is written
to a temporary name, fsynced, renamed over the old one and the directory
fsynced: a crash leaves the old file or the new one, never half of one. A
file that is missing, unreadable, cut short, of another part or of a
version this code does not know is a logged skip of that part (it starts
empty, the crawl still resumes), never a crash.

Cost: a save rewrites its part's whole file. The robots.txt and DNS caches
copy their dicts on the event loop (shallow copies) and encode, write and
fsync in a worker thread (`CacheState`), and skip the save when nothing
changed since the last one; the frontier's checkpoint also writes in a
thread. Measured at the caches' default bounds on a loaded 2-CPU VM
(`bench/state_bench.py`): 200,000 robots.txt entries of ~1 KB save in
~3.7 s (220 MB) while the loop is held at most ~20 ms (it was held the
whole ~3.6 s when the save ran on it), and restore in ~2.5-3.6 s (their
text is parsed when an origin is first asked for); 1,000,000 DNS answers
save in ~8.5 s (87 MB) with the loop held at most ~40 ms (was ~8.6 s), and
restore in 35-57 s when every name has its own address (the
private-network guard checks each distinct address; restore is at
start-up). A live DNS cache holds the names of the last hour at most
(`fetch.dns.max_ttl_s`), usually far fewer.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import time
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from crawler.fsutil import atomic_file

if TYPE_CHECKING:
    from crawler.due import DiskDUE
    from crawler.frontier import Frontier
    from crawler.peers import PeerNetwork

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"
WRITE_BATCH_LINES = 4096               # records encoded before one write() call
# A part's restore may find a well-formed file whose content it cannot use: these mean "skip the part".
RESTORE_ERRORS = (ValueError, TypeError, KeyError, IndexError)


class StateError(ValueError):
    """A state file that cannot be used (cut short, not JSON, another part's, unknown version)."""


class StateStore:
    """Versioned JSON Lines files under one directory, written atomically and durably."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        # One encoder for every record: json.dumps() with options builds a new one per call.
        self._encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

    def path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"

    def write(self, name: str, version: int, records: Iterable[dict]) -> int:
        """Replace part `name`'s file with `records` (one JSON object each); returns how many.

        Written in batches of lines (a large cache never becomes one big
        string) through fsutil.atomic_file (fsync, rename, fsync of the directory). On
        any error the old file stays as it was and the error (OSError: disk full...) propagates.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        count = 0
        with atomic_file(self.path(name), "w", encoding="utf-8") as out:
            header = {"name": name, "version": version, "saved_at": round(time.time(), 3)}
            out.write(json.dumps(header, sort_keys=True) + "\n")
            encode, lines = self._encode, []
            for record in records:                  # large caches: written in batches of lines
                lines.append(encode(record))
                if len(lines) == WRITE_BATCH_LINES:
                    out.write("\n".join(lines) + "\n")
                    count += len(lines)
                    lines.clear()
            if lines:
                out.write("\n".join(lines) + "\n")
                count += len(lines)
            out.write(json.dumps({"end": name, "records": count}) + "\n")
        return count

    def read(self, name: str, version: int) -> list[dict] | None:
        """Part `name`'s records, or None (logged) when there is no usable file of this version."""
        path = self.path(name)
        try:
            with open(path, encoding="utf-8") as src:
                header = json.loads(src.readline())
                if not isinstance(header, dict) or header.get("name") != name:
                    raise StateError(f"not a {name!r} state file (header {header!r:.200})")
                if header.get("version") != version:
                    raise StateError(f"version {header.get('version')!r}; this crawler reads version {version}")
                records = [json.loads(line) for line in src]
            trailer = records.pop() if records else None
            if trailer != {"end": name, "records": len(records)}:
                raise StateError(f"cut short or damaged: {len(records)} records, end line {trailer!r:.100}")
            if not all(isinstance(r, dict) for r in records):
                raise StateError("a record is not a JSON object")
        except FileNotFoundError:
            log.debug("no %s: %s starts empty", path, name)
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("%s is not usable (%s); %s starts empty, the crawl goes on", path, exc, name)
            return None
        return records


@runtime_checkable
class Stateful(Protocol):
    """A part of a node whose state outlives the process."""

    name: str

    def save(self, store: StateStore, *, final: bool = False) -> Awaitable[None] | None:
        """Make the part's state durable (`final`: the clean stop's last save)."""

    def restore(self, store: StateStore) -> None:
        """Load what an earlier process saved; a part with nothing saved stays empty."""


async def save_all(parts: Iterable[Stateful], store: StateStore, *, final: bool = False) -> None:
    """Save every part in order (awaiting those that write in the background); the first error
    (a full disk: OSError) stops and propagates."""
    for part in parts:
        result = part.save(store, final=final)
        if inspect.isawaitable(result):
            await result


class CacheState:
    """Save for a cache kept whole in RAM (robots.txt, DNS), off the event loop.

    The cache counts its changes in `_changes`; `_snapshot()` copies what it
    needs on the loop, cheaply (a shallow copy of its dicts: their entries are
    replaced, never changed in place, so a thread may read them), and
    `_records(snapshot)` turns the copy into records in a worker thread, where
    the file is encoded, written and fsynced. Written on the loop, 1,000,000
    DNS answers held every fetch for ~8 s. An unchanged cache is not written
    again. One write at a time: a save waits for the one before it (a
    checkpoint cancelled at a stop leaves its thread writing the same file).
    """

    name: str
    state_version: int
    _changes: int
    _saved_changes: int
    _writing: asyncio.Future | None = None     # the thread writing this part's file, while it runs

    def _snapshot(self) -> object:
        """What `_records` needs, copied on the loop (must stay cheap: it holds the loop)."""
        raise NotImplementedError

    @staticmethod
    def _records(snapshot: object) -> Iterable[dict]:
        """The snapshot's records; runs in a worker thread, so it reads the snapshot only."""
        raise NotImplementedError

    def save(self, store: StateStore, *, final: bool = False) -> Awaitable[None]:
        return self._save(store)

    async def _save(self, store: StateStore) -> None:
        await self.wait_saved()
        if self._changes == self._saved_changes:
            return
        changes = self._changes
        records = self._records(self._snapshot())     # a generator: its body runs in the thread
        loop = asyncio.get_running_loop()
        self._writing = loop.run_in_executor(None, store.write, self.name, self.state_version, records)
        # Shielded: a cancelled checkpoint must not forget the thread, which goes on writing the file.
        await asyncio.shield(self._writing)            # OSError (disk full) propagates to the caller
        self._saved_changes = changes

    async def wait_saved(self) -> None:
        """Wait for a write still in flight (one whose save was cancelled); its error was the
        cancelled caller's, so it is not raised here (the next save writes again)."""
        while self._writing is not None and not self._writing.done():
            await asyncio.wait([self._writing])


def restore_all(parts: Iterable[Stateful], store: StateStore) -> None:
    """Restore every part; one whose saved state is unusable is logged and starts empty."""
    for part in parts:
        try:
            part.restore(store)
        except RESTORE_ERRORS as exc:
            log.warning("%s: saved state is not usable (%s: %s); %s starts empty, the crawl goes on",
                        store.path(part.name), type(exc).__name__, exc, part.name)


# --- adapters for parts with durable files of their own ---------------------------------------

class FrontierState:
    """The frontier: save = `checkpoint_async()` (snapshot on the loop, written in a thread; at the
    clean stop `shutdown()`: a last checkpoint, after any still being written, that also closes its
    files); restore = nothing more: its constructor loaded the newest checkpoint and replayed the
    journal written after it."""

    name = "frontier"

    def __init__(self, frontier: Frontier) -> None:
        self.frontier = frontier

    def save(self, store: StateStore, *, final: bool = False) -> Awaitable[None] | None:
        if final:
            self.frontier.shutdown()
            return None
        return self.frontier.checkpoint_async()

    def restore(self, store: StateStore) -> None:
        """Done by `Frontier(directory=...)`."""


class DueState:
    """The DUE: save = `checkpoint()` (journal fsynced, manifest written); restore = nothing more:
    its constructor reloaded the disk set, redid unfinished merges and reread the journaled buffer.
    At the clean stop the node first merges the buffer into the frontier, then saves."""

    name = "due"

    def __init__(self, due: DiskDUE) -> None:
        self.due = due

    def save(self, store: StateStore, *, final: bool = False) -> None:
        self.due.checkpoint()

    def restore(self, store: StateStore) -> None:
        """Done by `DiskDUE(directory, ...)`."""


class PeerSpoolState:
    """The peer spools: save = nothing: a batch goes to a spool in one write(2), which a killed
    process cannot lose, and pages whose cross-host links are neither ACKed nor spooled stay
    unconfirmed in the frontier (fetched again after a crash). The clean stop's flush is
    `PeerNetwork.close()` (deliver, else spool), which the node awaits before the DUE's merge and
    this save. Restore = nothing more: each link reloads its spool and sequence numbers."""

    name = "peers"

    def __init__(self, peers: PeerNetwork) -> None:
        self.peers = peers

    def save(self, store: StateStore, *, final: bool = False) -> None:
        """Nothing to do (see the class)."""

    def restore(self, store: StateStore) -> None:
        """Done by `PeerNetwork.start()`."""
