"""Host splitter: every URL goes to the node that owns its host (DESIGN 2.3).

`Partitioner.owner(host)` maps a host to a node (`modulo`: host_fp mod N, as in
Mercator; `rendezvous`: highest random weight, so adding a node moves ~1/N of
the hosts). `HostSplitter.route()` takes a page's filtered links with their
fingerprints: URLs we own go on to our DUE; cross-host URLs first pass the
splitter cache (a `crawler.cache` policy, `splitter.cache`), and only misses
are appended to that peer's outgoing batch, which is sent at `batch_size`
URLs or `batch_ms` after its first URL. With `cache_scope: all` the cache
sees local URLs too. `StreamLog` records every URL entering the splitter
(fingerprint, destination, cross and cache-hit flags) for `crawler replay`.
"""

from crawler.splitter.owner import Partitioner, modulo_owner, rendezvous_owner
from crawler.splitter.splitter import HostSplitter
from crawler.splitter.streamlog import FLAG_CACHE_HIT, FLAG_CROSS, RECORD, StreamLog, read_header, read_records

__all__ = ["FLAG_CACHE_HIT", "FLAG_CROSS", "HostSplitter", "Partitioner", "RECORD", "StreamLog",
           "modulo_owner", "read_header", "read_records", "rendezvous_owner"]
