"""Duplicate URL eliminator (DUE): only never-seen URLs go on to the frontier.

Local URLs from the host splitter and URLs that peers send us both enter here
(DESIGN 2.5). The contract every implementation keeps:

- ``submit(fps, urls) -> list[str]``: offer a batch (uint64 fingerprints and
  their canonical URLs, same order). Returns the URLs this call proved new.
  An implementation that batches (Mercator's merge) may return nothing now
  and release the new URLs at a later ``submit`` or at ``flush``.
- ``flush() -> list[str]``: decide everything pending now (the node calls it
  when it is idle, so small crawls never stall, and at a clean stop).
- ``start_merge() -> bool`` and ``poll() -> list[str]``: the same without
  blocking the caller (the node's early merge while fetches are in flight);
  ``merging`` says one is running.
- ``pending``: URLs accepted but not yet decided.
- ``stats()``, ``close()``.

`DiskDUE` is the one the node runs (docs/due.md): a front cache, a journaled
buffer, and sorted merges with a bucketed on-disk set, so RAM is bounded by
cache + buffer. Its hot path is one compiled call per `submit` (`submit_pass`),
and its merges run in a background thread as compiled passes that release
the GIL (`merge_pass`); both have pure-Python twins. `MemoryDUE` is exact, immediate and grows with the number of
URLs seen: the reference model the tests compare against.
"""

from crawler.due.base import DUE
from crawler.due.disk import DiskDUE
from crawler.due.memory import MemoryDUE

__all__ = ["DUE", "DiskDUE", "MemoryDUE"]
