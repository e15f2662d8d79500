"""The URL frontier: which URL to fetch next, never two at once per host, and none lost to a crash.

Mercator's shape (Najork & Heydon) with Cao, Jiang and Singh's two-level
scheduling, as DESIGN 2.6 asks:

    add(url, host, quality) ──> per-host queue: RAM head (URL policy order),
                                  chunks spilled to segment files, RAM tail
                                  │
      host states: WAITING (heap by next-contact time) -> READY (heap by host
      policy score) -> BUSY (one worker holds it) -> WAITING / IDLE
                                  │
    get() <───────────────────────┘  the best READY host's next URL
    release(host, delay_s)           back to WAITING until now + delay_s

Politeness is the state machine: a host is handed out only from READY and
only after its next-contact time, and it is BUSY until released, so at most
one request per host is in flight whatever the policy (and, with per-IP
politeness, per address). The node computes the delay (max(k x fetch time,
min_delay_s, Crawl-delay), or Retry-After).

Policies (policy.py): hosts by `bfs`, `performance` (R = P/T), `quality`,
`capability` (C = quality sum / T), from EWMA estimates of connect and
response time; URLs within a host by `fifo` or `quality`. Quality comes from
quality.py: in-links seen so far, or an oracle file.

The modules: frontier.py (the Frontier: adding, scheduling, get/release),
hostqueue.py (one host's queue and state), politeness.py (per-IP politeness),
spill.py and segments.py (bounded memory), checkpoint.py and journal.py
(durability), policy.py and quality.py (ranking), stats.py (counters).

Bounded memory (spill.py): past `memory_urls` URLs in RAM, the hosts
holding most are spilled to append-only segment files (segments.py). RAM is
then the budget plus a small record per host with queued URLs.

Durable (checkpoint.py, journal.py): every add, fetch start and fetch end is
a journal line; checkpoints capture the whole frontier; a restarted node
resumes from the newest checkpoint plus the journal, re-fetching only what
was in flight.
Workers block in `get()` on futures served in arrival order; one timer wakes
the dispatcher when the earliest waiting host becomes ready.
"""

from crawler.frontier.frontier import Frontier
from crawler.frontier.policy import HOST_POLICIES, URL_POLICIES, GlobalEstimates, HostPolicy, HostStats, HostView
from crawler.frontier.quality import InlinkScorer, OracleScorer
from crawler.frontier.stats import FrontierStats

__all__ = ["Frontier", "FrontierStats", "HOST_POLICIES", "URL_POLICIES", "GlobalEstimates", "HostPolicy",
           "HostStats", "HostView", "InlinkScorer", "OracleScorer"]
