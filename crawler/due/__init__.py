"""Duplicate URL eliminator (DUE): only never-seen URLs go on to the frontier.

Local URLs from the host splitter and URLs that peers send us both enter here
(DESIGN 2.5). The contract every implementation keeps:

- ``submit(fps, urls) -> list[str]``: offer a batch (uint64 fingerprints and
  their canonical URLs, same order). Returns the URLs this call proved new.
  An implementation that batches (Mercator's merge) may return nothing now
  and release the new URLs at a later ``submit`` or at ``flush``.
- ``flush() -> list[str]``: decide everything pending now (the node calls it
  when the frontier runs low, so small crawls never stall).
- ``pending``: URLs accepted but not yet decided.
- ``stats()``, ``close()``.

`MemoryDUE` is the in-memory stand-in: exact, immediate, RAM grows with the
number of URLs seen. The disk-backed DUE with a front cache, a journaled
buffer and bucketed sorted merges replaces it behind the same interface.
"""

from crawler.due.base import DUE
from crawler.due.memory import MemoryDUE

__all__ = ["DUE", "MemoryDUE"]
