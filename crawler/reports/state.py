"""The node's per-host tally as a part of the state protocol (crawler/state.py), and exact totals after a kill.

Saved at every checkpoint to `state/report.jsonl`: a first record with the
crawl log's byte offsets (where this crawl's lines begin, `start`, and how far
the tally has counted, `offset`) and the node-level counts, then one record
per host. The snapshot is taken on the event loop in one step (offset and
counts agree), the file is written in a thread (`CacheState`).

After a SIGKILL the node's totals would be those of its last checkpoint, while
the crawl log (written through, a line per `write(2)`: crawler/store) holds
every fetch up to the kill, and the test web's access log every request. So at
restore the lines after `offset` are counted again (`Tally.add_line`) into the
tally, and the node's restored totals (`PageCounts`: fetches, responses by
class and kind, bytes, errors, links, robots.txt fetches and denials, dropped
URLs) are set to the tally's: `/metrics`, the summary, the live report and a report read from the
logs then count the same fetches, each line once. A page whose line was
written before the kill and that is fetched again after it (its fetch was not
yet journaled as done, or not confirmed to its peers) has two lines, and
counts twice everywhere: the server answered it twice.

A crawl started with `--fresh` on a data_dir whose crawl log holds an earlier
crawl's lines begins at the log's end: `start` says where.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Awaitable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from crawler.reports.tally import HostRow, Tally
from crawler.state import CacheState, StateStore

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.reports")

CRAWL_LOG = "crawl.log.jsonl"          # crawler/node/records.py names it so
STATE_NAME = "report"
STATE_VERSION = 1


def read_lines(path: Path, offset: int, tally: Tally) -> int:
    """Count the crawl-log lines of `path` from byte `offset` into `tally`; returns the end offset. A
    torn last line (power loss mid-write) is left out and logged."""
    try:
        src = path.open("rb")
    except FileNotFoundError:
        return offset
    with src:
        src.seek(offset)
        for raw in src:
            if not raw.endswith(b"\n"):
                log.warning("%s: the last line is incomplete (%d bytes); not counted", path, len(raw))
                tally.bad_lines += 1
                break
            offset += len(raw)
            try:
                tally.add_line(json.loads(raw))
            except ValueError:
                tally.bad_lines += 1
    return offset


def read_state(state_dir: Path) -> tuple[dict, Tally] | None:
    """(the header record, the tally) a node saved, or None when it saved none usable."""
    records = StateStore(state_dir).read(STATE_NAME, STATE_VERSION)
    if not records:
        return None
    head = records[0]
    try:
        tally = Tally.from_json(head["totals"], {r["h"]: r for r in records[1:]})
        for key in ("start", "offset"):
            if not isinstance(head[key], int) or head[key] < 0:
                raise ValueError(f"{key} is not an offset")
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("%s: %s is not usable (%s)", state_dir, STATE_NAME, exc)
        return None
    return head, tally


class ReportState(CacheState):
    """The tally (what `Records` counts) saved with the crawl log's offset; see the module's docstring."""

    name = STATE_NAME
    state_version = STATE_VERSION

    def __init__(self, node: Node, tally: Tally) -> None:
        self.node = node
        self.tally = tally
        self.start: int | None = None           # this crawl's first byte in the crawl log
        self._changes = 0
        self._saved_changes = -1
        self._shadow: dict[str, tuple] = {}     # host -> its row as last snapshotted (`HostRow.frozen`)
        self._changed = tally.watch()           # hosts changed since the last snapshot

    @property
    def log_path(self) -> Path:
        return self.node.data_dir / CRAWL_LOG

    def begin(self) -> None:
        """After the crawl log is opened: a crawl without a saved tally starts at the log's current end, and
        says so on disk at once (a kill before the first checkpoint must not lose where its lines begin)."""
        crawl_log = self.node.records.crawl_log
        if self.start is None:
            self.start = crawl_log.offset() if crawl_log is not None else 0
            self.node.state.write(self.name, self.state_version, self._records(self._snapshot()))

    def _snapshot(self) -> object:
        """On the loop: the offset, the counts and a copy of the rows changed since the last snapshot only
        (copying every row held the loop ~8 s per million hosts). The writer thread reads `_shadow`; the
        next snapshot waits for it (CacheState), so the two never touch it at once."""
        crawl_log = self.node.records.crawl_log
        offset = crawl_log.offset() if crawl_log is not None else 0
        head = {"start": self.start or 0, "offset": offset, "totals": self.tally.totals_json()}
        hosts, shadow = self.tally.hosts, self._shadow
        for host in self._changed:
            shadow[host] = hosts[host].frozen()
        self._changed.clear()
        return head, shadow

    @staticmethod
    def _records(snapshot: object) -> Iterable[dict]:
        head, rows = cast(tuple[dict, dict[str, tuple]], snapshot)
        yield head
        thaw = HostRow.thaw
        for host, row in rows.items():
            yield {"h": host, **thaw(row)}

    def save(self, store: StateStore, *, final: bool = False) -> Awaitable[None]:
        self._changes = self.tally.lines + 1          # the offset moves with the lines: always a new file
        return self._save(store)

    def restore(self, store: StateStore) -> None:
        """The saved tally plus the crawl-log lines after it; the node's restored totals get those lines."""
        saved = read_state(store.directory)
        if saved is None:
            return
        head, tally = saved
        self.start = head["start"]
        tail = Tally()
        end = read_lines(self.log_path, head["offset"], tail)
        self.tally.merge(tally)
        # The saved rows are the shadow the next snapshot starts from (copied here, at start-up, not
        # during the crawl); the lines after the checkpoint make their hosts dirty again.
        self._shadow = {host: row.frozen() for host, row in self.tally.hosts.items()}
        self._changed.clear()
        self.tally.merge(tail)
        set_line_totals(self.node, self.tally)
        if tail.lines:
            log.warning("node %d: %d crawl-log lines after the last checkpoint counted again (%d bytes)",
                        self.node.node_id, tail.lines, end - head["offset"])


def set_line_totals(node: Node, tally: Tally) -> None:
    """The node's restored totals, for what crawl-log lines count, become the tally's (saved plus the lines
    after it). Set, not added: the counters file (crawler/node/totals.py) is written at another instant of
    the checkpoint, and a kill may fall between the two writes."""
    r = node.restored
    r.fetches, r.robots_fetches, r.links_extracted = tally.fetches, tally.robots_fetches, tally.links
    r.pages, r.bytes, r.errors = Counter(tally.pages), Counter(tally.bytes), Counter(tally.errors)
    r.robots_denied, r.robots_unreachable, r.dropped = tally.robots_denied, tally.robots_unreachable, \
        Counter(tally.dropped)
