"""Map a node's stats snapshot to Prometheus metric families at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

Snapshot = Callable[[], dict]


def _counter(name: str, doc: str, labels: list[str], values: dict) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        fam.add_metric(list(key) if isinstance(key, tuple) else [str(key)], value)
    return fam


def _gauge(name: str, doc: str, value: float, labels: list[str] | None = None,
           per_label: dict | None = None) -> GaugeMetricFamily:
    if labels:
        fam = GaugeMetricFamily(name, doc, labels=labels)
        for key, v in sorted((per_label or {}).items()):
            fam.add_metric(list(key) if isinstance(key, tuple) else [str(key)], v)
        return fam
    return GaugeMetricFamily(name, doc, value=value)


class NodeCollector(Collector):
    """Reads `snapshot()` (the node's `metrics_snapshot`) and yields metric families."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterable:
        s = self._snapshot()
        yield _counter("crawler_pages", "Fetches that got an HTTP response, by status class and kind (page or robots).",
                       ["status_class", "kind"], s["pages"])
        yield _counter("crawler_bytes", "Body bytes received on the wire, by status class.",
                       ["status_class"], s["bytes"])
        yield _counter("crawler_fetch_errors", "Fetches that got no complete HTTP response, by reason.",
                       ["reason"], s["errors"])
        yield _counter("crawler_links_extracted", "Links extracted from pages (before the filter).",
                       [], {(): s["links_extracted"]})
        yield _counter("crawler_links_truncated", "Links dropped because their page had more than "
                       "parse.max_links_per_page (each such page is logged with links_dropped).",
                       [], {(): s["links_truncated"]})
        yield _counter("crawler_filter_rejected", "URLs dropped by the URL filter, by reason.",
                       ["reason"], s["filter_rejected"])
        yield _counter("crawler_robots_denied", "URLs not fetched because robots.txt disallows them.",
                       [], {(): s["robots_denied"]})
        yield _counter("crawler_robots_parked", "URLs put back because their origin's robots.txt was unreachable.",
                       [], {(): s["robots_parked"]})
        yield _counter("crawler_robots_unreachable",
                       "URLs dropped: robots.txt unreachable past robots.error_max_retries.",
                       [], {(): s["robots_unreachable"]})
        yield _counter("crawler_urls_dropped", "URLs dropped without a request because their origin failed "
                       "permanently (no such name, a certificate that fails verification), by that reason.",
                       ["reason"], s["urls_dropped"])
        yield _gauge("crawler_crawl_pages",
                     "The crawl's fetches with an HTTP response since it began, across restarts.",
                     0, ["status_class", "kind"], s["crawl_pages"])
        yield _gauge("crawler_crawl_bytes", "The crawl's body bytes received since it began, across restarts.",
                     0, ["status_class"], s["crawl_bytes"])
        yield _gauge("crawler_crawl_fetch_errors", "The crawl's fetches without a response since it began, across "
                     "restarts.", 0, ["reason"], s["crawl_errors"])
        yield _counter("crawler_duplicate_content", "Pages whose body was seen before (links not processed again).",
                       [], {(): s["duplicate_content"]})
        yield _counter("crawler_worker_errors", "Unexpected errors caught in a worker (the worker went on).",
                       [], {(): s["worker_errors"]})
        yield _counter("crawler_cache_lookups", "URL cache lookups, by cache and result (hit rate = hit / all).",
                       ["cache", "result"], s["cache_lookups"])
        yield _gauge("crawler_cache_entries", "Entries held in each URL cache.", 0, ["cache"], s["cache_entries"])
        yield _gauge("crawler_cache_capacity", "Capacity of each URL cache.", 0, ["cache"], s["cache_capacity"])
        yield _counter("crawler_due_checks", "URLs offered to the duplicate URL eliminator.", [], {(): s["due_checks"]})
        yield _counter("crawler_due_new_urls", "URLs the DUE found new (sent to the frontier).", [], {(): s["due_new"]})
        yield _gauge("crawler_frontier_urls", "URLs queued in the frontier.", s["frontier_urls"])
        yield _gauge("crawler_frontier_active_hosts", "Hosts with a back queue.", s["frontier_active_hosts"])
        yield _gauge("crawler_frontier_busy_hosts", "Hosts with a request in flight.", s["frontier_busy_hosts"])
        yield _counter("crawler_dns_lookups", "DNS lookups, by result.", ["result"], s["dns_lookups"])
        yield _counter("crawler_dns_failures", "DNS lookups that failed, by reason.", ["reason"], s["dns_failures"])
        yield SummaryMetricFamily("crawler_dns_query_seconds", "Time spent in DNS queries that reached a server.",
                                  count_value=s["dns_queries"], sum_value=s["dns_seconds"])
        yield _counter("crawler_splitter_urls", "URLs entering the host splitter, by destination node and kind.",
                       ["destination", "kind"], s["splitter_urls"])
        yield _counter("crawler_splitter_batches_sent", "Batches the splitter handed to the peer transport.",
                       [], {(): s["splitter_batches"]})
        peers = s["peers"]
        for key, doc in (("batches_sent", "Peer batches accepted for sending (first transmissions), per peer."),
                         ("urls_sent", "URLs in peer batches sent, per peer."),
                         ("bytes_sent", "Bytes of peer batches sent, per peer."),
                         ("batches_received", "Peer batches received and processed, per peer (duplicates excluded)."),
                         ("urls_received", "URLs in peer batches received, per peer."),
                         ("bytes_received", "Bytes of peer batches received, per peer."),
                         ("batches_resent", "Peer batches sent again after a reconnect, per peer."),
                         ("batches_duplicate", "Peer batches received again and dropped, per peer.")):
            yield _counter(f"crawler_peer_{key}", doc, ["peer"], {str(p): v[key] for p, v in peers.items()})
        yield _gauge("crawler_peer_spooled_batches", "Batches for a peer waiting in its spool on disk.", 0, ["peer"],
                     {str(p): v["spooled"] for p, v in peers.items()})
        yield _gauge("crawler_peer_connected", "1 when the outgoing link to the peer is up.", 0, ["peer"],
                     {str(p): v["connected"] for p, v in peers.items()})
        yield _counter("crawler_peer_rejected_connections", "Incoming peer connections closed, by reason.",
                       ["reason"], s["peer_rejected"])
        due = s["due"]
        yield _gauge("crawler_due_buffer_urls", "URLs in the DUE's buffer waiting for a merge.", due.get("buffer", 0))
        yield _gauge("crawler_due_disk_fingerprints", "Fingerprints in the DUE's on-disk set.",
                     due.get("disk_fingerprints", due.get("seen", 0)))
        yield _gauge("crawler_due_disk_bytes", "Bytes of the DUE's on-disk set.", due.get("disk_bytes", 0))
        yield _counter("crawler_due_merges", "Merges of the DUE buffer with the disk set.", [],
                       {(): due.get("merges", 0)})
        yield _counter("crawler_due_merge_seconds", "Time spent merging the DUE buffer.", [],
                       {(): due.get("merge_seconds", 0.0)})
        yield _counter("crawler_due_duplicates_emitted", "URLs emitted twice after a crash (bounded by one buffer).",
                       [], {(): due.get("duplicates_emitted", 0)})
