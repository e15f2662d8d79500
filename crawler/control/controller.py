"""`Control`: what a node does with an operator's command, and what it keeps of it.

Each command changes the node's own parts and nothing else; `crawler ctl`
sends it to every node, so the cluster changes as a whole:

- pause/resume: the frontier hands out nothing while paused (the fetches in
  flight finish) and the node never calls itself idle, so neither a single
  node nor the cluster's termination check (crawler/termination.py) ends a
  paused crawl;
- seeds: canonicalized and filtered like links, each node keeps the URLs it
  owns (the splitter's partition, as with the seeds at start) and offers them
  to its DUE, which drops what the crawl has seen; the DUE merges at once, so
  a node that was idle or about to finish gets the work within a tick;
- block/unblock: the frontier drops the queued URLs of matching hosts
  (counted as `dropped`); new URLs of such hosts are refused before the DUE
  (links, seeds) or, arriving from a peer that had not heard of the block
  yet, before the frontier (counted as `rejected`); a URL in flight
  finishes and is not put back;
- delay: the frontier's release of a matching host waits at least this long
  (from the host's next request on);
- stop: the clean drain of SIGTERM.

Settings are saved before the answer (settings.py); the counts are crawl
totals saved at every checkpoint (`ControlTotals`, the state protocol).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from crawler.config import ConfigError, cluster_secret
from crawler.control.hosts import HostPatterns, PatternError, parse_pattern
from crawler.control.metrics import ControlCollector
from crawler.control.settings import ControlSettings, SettingsError
from crawler.control.token import control_token, local_secret
from crawler.state import StateStore
from crawler.urls import canonicalize, host_of

if TYPE_CHECKING:
    from crawler.node.node import Node

log = logging.getLogger("crawler.control")

BLOCKED = 1.0                     # the value of a block in its HostPatterns
STOP_REASON = "ctl_stop"          # the summary's `stop` after `crawler ctl stop`


class CommandError(Exception):
    """A command this node cannot carry out: `status` is the HTTP answer, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Control:
    """The node's side of `crawler ctl`: settings, their effect on the parts, the counts."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.state_dir = node.data_dir / "state"
        self.settings = ControlSettings()
        self.blocked = HostPatterns()
        self.delays = HostPatterns()
        self.token: str | None = None             # set at start: from the cluster's secret or the node's own
        self.dropped = 0                          # queued URLs removed by a block (this process)
        self.rejected = 0                         # new URLs refused by a block (this process)
        self.restored_dropped = 0                 # the same, before this process (ControlTotals)
        self.restored_rejected = 0
        self.part = ControlTotals(self)
        node.registry.register(ControlCollector(self))

    @property
    def paused(self) -> bool:
        return self.settings.paused

    def start(self) -> None:
        """At start, after the node's state is restored: the saved settings take effect again (a block
        drops what a crash's journal brought back to the frontier)."""
        node = self.node
        secret = cluster_secret(node.config, node.source)
        if secret is None:                        # a single node: its own secret (token.py)
            try:
                secret = local_secret(self.state_dir)
            except OSError as exc:
                raise ConfigError(f"node {node.node_id}: cannot keep the control secret in {self.state_dir}: "
                                  f"{exc.strerror or exc}") from None
        self.token = control_token(secret)
        try:
            settings = ControlSettings.load(self.state_dir)
        except SettingsError as exc:
            raise ConfigError(f"node {node.node_id}: {exc}") from None
        self._apply(settings)
        if settings.paused:
            log.warning("node %d: paused (crawler ctl pause); `crawler ctl -c FILE resume` goes on", node.node_id)
        node.frontier.refuse = self._refuse_requeue

    def _apply(self, settings: ControlSettings) -> int:
        """Make `settings` the node's; returns the queued URLs a new block dropped."""
        frontier = self.node.frontier
        self.settings = settings
        self.blocked = HostPatterns({p: BLOCKED for p in settings.blocked})
        self.delays = HostPatterns(settings.delays)
        frontier.min_delay_of = self._min_delay if self.delays else None
        if settings.paused and not frontier.paused:
            frontier.pause()
        elif not settings.paused and frontier.paused:
            frontier.resume()
        dropped = frontier.drop_hosts(self.blocked.matches) if self.blocked else 0
        self.dropped += dropped
        return dropped

    def _change(self, settings: ControlSettings) -> int:
        """Save, then apply (a change the disk refused is not made)."""
        from crawler.node.errors import is_storage_error  # crawler.node imports this module
        try:
            settings.save(self.state_dir)
        except OSError as exc:
            if is_storage_error(exc):
                self.node.storage_failed(exc)
            raise CommandError(503, f"cannot save {self.state_dir}: {exc.strerror or exc}") from None
        return self._apply(settings)

    # --- the hot path's checks ----------------------------------------------------------------
    def admit(self, urls: list[str]) -> list[str]:
        """`urls` without those of blocked hosts (counted). Hot path: nothing but a truth test when no
        block is set."""
        blocked = self.blocked
        if not blocked:
            return urls
        kept = [u for u in urls if not blocked.matches(host_of(u))]
        self.rejected += len(urls) - len(kept)
        return kept

    def _refuse_requeue(self, host: str) -> bool:
        """The frontier asks before putting a URL back (robots.txt first, a retry, a cut drain): not for a
        host blocked meanwhile."""
        if self.blocked and self.blocked.matches(host):
            self.dropped += 1
            return True
        return False

    def _min_delay(self, host: str) -> float:
        return self.delays.lookup(host) or 0.0

    # --- commands --------------------------------------------------------------------------------
    def pause(self) -> dict:
        self._change(replace(self.settings, paused=True))
        log.warning("node %d: paused by crawler ctl (%d fetches in flight finish)", self.node.node_id,
                    self.node.inflight)
        return {"paused": True, "inflight": self.node.inflight}

    def resume(self) -> dict:
        self._change(replace(self.settings, paused=False))
        log.warning("node %d: resumed by crawler ctl", self.node.node_id)
        return {"paused": False}

    def block(self, text: object) -> dict:
        pattern = _pattern(text)
        blocked = sorted(set(self.settings.blocked) | {pattern})
        dropped = self._change(replace(self.settings, blocked=blocked))
        inflight = self.node.frontier.busy_matching(HostPatterns({pattern: BLOCKED}).matches)
        log.warning("node %d: blocked %s: %d queued URLs dropped, %d fetches in flight finish", self.node.node_id,
                    pattern, dropped, inflight)
        return {"pattern": pattern, "dropped": dropped, "inflight": inflight}

    def unblock(self, text: object) -> dict:
        pattern = _pattern(text)
        was = pattern in self.settings.blocked
        self._change(replace(self.settings, blocked=[p for p in self.settings.blocked if p != pattern]))
        log.warning("node %d: unblocked %s", self.node.node_id, pattern)
        return {"pattern": pattern, "was_blocked": was}

    def delay(self, text: object, seconds: object) -> dict:
        """A least delay for matching hosts; 0 removes it."""
        pattern = _pattern(text)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise CommandError(400, f"seconds must be a number >= 0, not {seconds!r}")
        delays = dict(self.settings.delays)
        if seconds:
            delays[pattern] = float(seconds)
        else:
            delays.pop(pattern, None)
        self._change(replace(self.settings, delays=delays))
        log.warning("node %d: delay for %s: %g s", self.node.node_id, pattern, seconds)
        return {"pattern": pattern, "seconds": float(seconds)}

    def add_seeds(self, raw: Iterable[object]) -> dict:
        """Take the URLs this node owns through the seed path (filter, DUE, frontier)."""
        from crawler.node.errors import is_storage_error  # crawler.node imports this module
        from crawler.node.seeds import in_scope, submit_seeds
        node = self.node
        if node.storage_error:
            raise CommandError(503, f"node {node.node_id} cannot write its state ({node.storage_error})")
        if node.stop_reason:
            raise CommandError(409, f"node {node.node_id} is stopping ({node.stop_reason}); seeds not taken")
        received = invalid = 0
        canonical = []
        for item in raw:
            received += 1
            url = canonicalize(item) if isinstance(item, str) else None
            if url is None:
                invalid += 1
            else:
                canonical.append(url)
        urls = node.filter.filter(canonical)
        filtered = len(canonical) - len(urls)
        before = self.rejected
        urls = self.admit(urls)
        blocked = self.rejected - before
        urls = in_scope(node, urls)
        due = node.due
        try:
            owned = submit_seeds(node, urls)
            if due.buffered and not due.merging and due.start_merge():    # a ctl seed must not wait its turn
                node.enqueue(due.poll())
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            node.storage_failed(exc)
            raise CommandError(503, f"node {node.node_id} cannot write its state: {exc.strerror or exc}") from None
        if owned:
            log.warning("node %d: %d seeds added by crawler ctl (the DUE drops those seen before)",
                        node.node_id, owned)
        return {"received": received, "not_crawlable": invalid, "filtered": filtered, "blocked": blocked,
                "owned": owned}

    def stop(self) -> dict:
        """The clean drain of SIGTERM (the node leaves without lingering)."""
        node = self.node
        node.interrupted.set()
        node.stop(STOP_REASON)
        return {"stopping": True, "inflight": node.inflight}

    # --- reading ---------------------------------------------------------------------------------
    def totals(self) -> dict[str, int]:
        return {"dropped": self.restored_dropped + self.dropped, "rejected": self.restored_rejected + self.rejected}

    def status(self) -> dict:
        """GET /control/status: the settings, the counts and where the node's crawl stands."""
        node = self.node
        return {"node": node.node_id, "paused": self.paused, "blocked": sorted(self.settings.blocked),
                "delays": dict(sorted(self.settings.delays.items())), "blocked_urls": self.totals(),
                "stop": node.stop_reason, "inflight": node.inflight, "queued": node.frontier.queued,
                "changes": self.token is not None}

    def summary(self) -> dict:
        """The node summary's `control` entry."""
        return {"paused": self.paused, "blocked": sorted(self.settings.blocked),
                "delays": dict(sorted(self.settings.delays.items())), "blocked_urls": self.totals()}


def _pattern(text: object) -> str:
    if not isinstance(text, str):
        raise CommandError(400, f"a host pattern must be a string, not {text!r}")
    try:
        return parse_pattern(text)
    except PatternError as exc:
        raise CommandError(400, str(exc)) from None


class ControlTotals:
    """The block counts as a part of the state protocol (crawler/state.py): crawl totals, saved at every
    checkpoint with the frontier they describe."""

    name = "control_totals"
    VERSION = 1

    def __init__(self, control: Control) -> None:
        self.control = control

    def save(self, store: StateStore, *, final: bool = False) -> None:
        store.write(self.name, self.VERSION, [self.control.totals()])

    def restore(self, store: StateStore) -> None:
        records = store.read(self.name, self.VERSION)
        if not records:
            return
        rec = records[0]
        dropped, rejected = rec["dropped"], rec["rejected"]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (dropped, rejected)):
            raise ValueError(f"not counts: {rec!r}")
        self.control.restored_dropped, self.control.restored_rejected = dropped, rejected
