"""When the node's new URLs leave the DUE buffer early: the early-merge rule and the prompt-lookup test.

The DUE buffers a page's links and merges the buffer into its disk set every
`due.flush_interval_s`; only then do the new URLs reach the frontier. That
suits a busy node. When workers wait for a host ("the frontier runs low":
queued URLs on hosts that must wait out politeness do not count, a policy may
hold many URLs on few hosts), the buffer may hold their next work, and two
rules fetch it sooner:

- Early merge (`EarlyMergePolicy`, the watch loop). An idle node merges at
  once (nothing in flight to stall). With fetches in flight the merge runs in
  the DUE's background thread (tens of ms: on the loop it would stall those
  fetches and inflate their measured times, and so their hosts' politeness
  delays). It costs ~10 ms of CPU whatever it yields. While the frontier holds
  a queue per worker, merges that yield fewer URLs than workers waited for
  back off (more URLs for busy hosts do not help), doubling the wait up to
  `EARLY_MERGE_BACKOFF_MAX` flush intervals; once it holds less, the next
  hosts' URLs may be in the buffer, so it merges every interval.
- Prompt lookup (`is_hungry`, per page while a worker waits): links that may
  feed a waiting worker are looked up in the DUE's disk set at once
  (`due.prompt_lookups`, docs/due.md).
"""

from __future__ import annotations

from collections.abc import Callable

EARLY_MERGE_BACKOFF_MAX = 8      # early merges that yield little back off up to this many flush intervals


class EarlyMergePolicy:
    """When the watch loop merges the DUE buffer before `due.flush_interval_s` has passed: pure
    bookkeeping over the times and counts the loop hands it (see the module docstring for why)."""

    def __init__(self, flush_interval_s: float, workers: int, now: float) -> None:
        self.flush_interval_s = flush_interval_s
        self.workers = workers
        self.wait_s = flush_interval_s          # between early merges while they yield little
        self.last_flush = now
        self.running: tuple[int, int] | None = None    # a running early merge: (workers waiting, DUE's new count)

    def flushed(self, now: float) -> None:
        """The quiet node merged at once (a flush, not an early merge)."""
        self.last_flush = now

    def should_start(self, now: float, waiting_workers: int, queued: int) -> bool:
        """Start an early merge now? Only while workers wait, once the interval in force has passed: the
        flush interval while the frontier holds fewer URLs than workers, the backed-off wait otherwise."""
        if not waiting_workers:
            return False
        return now - self.last_flush >= (self.flush_interval_s if queued < self.workers else self.wait_s)

    def started(self, now: float, waiting_workers: int, new_count: int) -> None:
        """An early merge was asked for with `waiting_workers` waiting and the DUE's new-URL count at
        `new_count`; the interval counts from now even if the DUE declines it (`not_started`)."""
        self.last_flush = now
        self.running = (waiting_workers, new_count)

    def not_started(self) -> None:
        """The DUE did not start the merge."""
        self.running = None

    def finished(self, new_count: int) -> None:
        """The early merge ended with the DUE's new-URL count at `new_count`: if it yielded at least a URL
        per waiting worker the wait is the flush interval again, else it doubles, up to the cap."""
        assert self.running is not None, "finished() follows started()"
        waited, new_before = self.running
        self.running = None
        self.wait_s = (self.flush_interval_s if new_count - new_before >= waited
                       else min(self.wait_s * 2, self.flush_interval_s * EARLY_MERGE_BACKOFF_MAX))


def is_hungry(links: list[str], page_host: str | None, queued_of: Callable[[str], int],
              host_of: Callable[[str], str], owner: Callable[[str], int], me: int, single: bool) -> bool:
    """Could these links, now in the DUE buffer, feed a waiting worker? Yes if their page's host, or
    a host of ours one of them is for, has nothing queued. Asked only while a worker waits."""
    if page_host is not None and not queued_of(page_host):
        return True
    for url in links:
        other = host_of(url)
        if other != page_host and not queued_of(other) and (single or owner(other) == me):
            return True
    return False
