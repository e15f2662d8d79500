"""The configuration schema: every key, its type, default, unit and meaning.

The key names are a contract (DESIGN 2.11): scripts and deployments depend on
them. Each field carries its documentation in `metadata`, so the loader's error
messages, `config/example.yaml` and `docs/configuration.md` all come from this
one file and cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


def doc(text: str, unit: str = "", **extra) -> dict:
    """Field metadata: what the key means and its unit."""
    return {"doc": text, "unit": unit, **extra}


def _f(default, text: str, unit: str = "", **extra):
    if isinstance(default, (list, dict)):
        def factory(d: list | dict = default) -> list | dict:   # a fresh copy for every instance
            return type(d)(d)
        return field(default_factory=factory, metadata=doc(text, unit, **extra))
    return field(default=default, metadata=doc(text, unit, **extra))


def _sub(cls, text: str):
    return field(default_factory=cls, metadata=doc(text))


# --- cluster -------------------------------------------------------------------

@dataclass
class NodeConfig:
    """One crawling process of the cluster."""
    id: int = _f(0, "Node id, 0..N-1; unique in the cluster.", min=0)
    host: str = _f("127.0.0.1", "Address peers connect to for this node's peer port.")
    peer_port: int = _f(7400, "TCP port of the peer server (0 = any free port; single node only).", min=0, max=65535)
    metrics_port: int = _f(9400, "Port of the Prometheus /metrics endpoint (0 = any free port).", min=0, max=65535)
    source_address: str | None = _f(None, "Local address outgoing fetches are bound to, so servers can tell nodes "
                                          "apart.")
    proxy: str | None = _f(None, "This node's proxy (http://HOST:PORT or socks5h://HOST:PORT), instead of fetch.proxy; "
                                 "'' = no proxy for this node.")


@dataclass
class ClusterConfig:
    name: str = _f("local", "Cluster name; part of the peer handshake.")
    secret_env: str | None = _f("CRAWLER_CLUSTER_SECRET", "Environment variable holding the cluster secret.")
    secret_file: str | None = _f(None, "File holding the cluster secret (used instead of secret_env when set).")
    partition: Literal["modulo", "rendezvous"] = _f("modulo", "How hosts map to nodes: host_fp mod N, or rendezvous "
                                                              "hashing.")
    nodes: list[NodeConfig] = field(
        default_factory=lambda: [NodeConfig()],
        metadata=doc("One entry per crawling process."),
    )


# --- crawl ---------------------------------------------------------------------

SEED_SCOPES = ("host", "domain", "prefix", "any")


@dataclass
class SeedConfig:
    """A seed with the scope of the URLs it leads to (docs/scope.md)."""
    url: str = _f("", "The seed URL.")
    scope: Literal["host", "domain", "prefix", "any"] = _f(
        "any", "Where links found from this seed may go: its host, its domain (the host without a leading www. "
               "and every subdomain), URLs under its path up to the last '/', or anywhere.")


@dataclass
class CrawlConfig:
    seeds_file: str | None = _f(None, "File of seed URLs, one per line (# comments allowed; 'URL scope=SCOPE' gives "
                                      "a seed's scope, docs/scope.md); relative to the config file.")
    seeds: list[str | SeedConfig] = _f([], "Seed URLs given inline: a URL, or {url: URL, scope: SCOPE} with SCOPE "
                                           "host, domain, prefix or any (docs/scope.md).")
    data_dir: str = _f("data/node-{node}", "Where the node keeps its state; {node} is replaced by the node id; "
                                           "relative to the config file.")
    max_pages: int = _f(0, "Stop after this many fetches per node; 0 = no limit.", "pages", min=0)
    max_duration_s: float = _f(0.0, "Stop after this long; 0 = no limit.", "s", min=0)
    drain_timeout_s: float = _f(30.0, "On a clean stop (SIGTERM, SIGINT, a limit), fetches in flight may finish "
                                      "this long; later ones are cut and their URLs stay queued for the restart.",
                                "s", min=0)
    user_agent: str = _f("ExampleCrawler/1.0 (+https://example.org/crawler)",
                         "User-Agent header; include a contact URL. Its first word is the robots.txt product token.")


# --- fetch ---------------------------------------------------------------------

@dataclass
class DnsConfig:
    nameservers: list[str] = _f([], "Resolvers as ADDRESS or ADDRESS:PORT; empty = the system's.")
    overrides: dict[str, str] = _f({}, "Static answers: a host name or '*.suffix' mapped to an address (like curl "
                                       "--resolve). Override addresses are trusted by the private-network guard.")
    timeout_s: float = _f(5.0, "Time allowed for one DNS query.", "s", min=0.001)
    tries: int = _f(2, "Query attempts before a lookup fails.", min=1)
    min_ttl_s: float = _f(60.0, "Positive answers are cached at least this long.", "s", min=0)
    max_ttl_s: float = _f(3600.0, "Positive answers are cached at most this long.", "s", min=0)
    negative_ttl_s: float = _f(300.0, "NXDOMAIN and NODATA answers (the name has no address: permanent) are cached "
                                      "this long.", "s", min=0)
    error_ttl_s: float = _f(1.0, "Transient failures (SERVFAIL, REFUSED, timeouts, an unreachable resolver) are "
                                 "cached this long; shorter than robots.error_retry_s, so a retry asks again.",
                            "s", min=0)


@dataclass
class TlsConfig:
    verify: bool = _f(True, "Verify server certificates: a chain to a trusted CA, the validity dates and the host "
                            "name. A failure is recorded as tls_untrusted, tls_expired or tls_hostname_mismatch and "
                            "the origin's URLs are dropped. Off: any certificate is accepted (test webs only).")
    ca_file: str | None = _f(None, "PEM file of CA certificates trusted in addition to the system's (a private CA); "
                                   "relative to the config file.")
    ca_dir: str | None = _f(None, "Directory of CA certificates in OpenSSL's hashed layout (openssl rehash), trusted "
                                  "in addition to the system's; relative to the config file.")
    client_cert_file: str | None = _f(None, "PEM client certificate presented to servers that ask for one (may hold "
                                            "the key too); relative to the config file.")
    client_key_file: str | None = _f(None, "PEM private key of client_cert_file, when it is not in that file; "
                                           "relative to the config file.")


@dataclass
class FetchConfig:
    allow_private_networks: bool = _f(False, "Allow fetching private, loopback and link-local addresses (needed for "
                                             "local test webs reached through DNS; override addresses are always "
                                             "allowed).")
    max_body_bytes: int = _f(16 * 1024 * 1024, "Largest body accepted on the wire; larger ones are cut and recorded.",
                             "bytes", min=1)
    max_decoded_bytes: int = _f(64 * 1024 * 1024, "Largest body after content decoding (gzip bombs).", "bytes", min=1)
    max_header_bytes: int = _f(65536, "Largest response header line or field.", "bytes", min=256)
    connect_timeout_s: float = _f(10.0, "Time allowed to open a connection.", "s", min=0.001)
    read_timeout_s: float = _f(30.0, "Time allowed between two reads of the response.", "s", min=0.001)
    total_timeout_s: float = _f(120.0, "Time allowed for one whole fetch.", "s", min=0.001)
    keepalive_s: float = _f(60.0, "How long an idle connection to a host is kept open.", "s", min=0)
    max_connections: int = _f(0, "Most connections in use at once over all hosts (Cao et al. found about 64 before "
                                 "the CPU saturated); 0 means no cap. A fetch waits for a free connection before its "
                                 "timeouts start; idle keep-alive connections are not counted and close after "
                                 "keepalive_s.", "connections", min=0)
    min_bytes_per_s: int = _f(4096, "A body arriving slower than this, measured over min_rate_window_s, is cut "
                                    "(reason too_slow): a slow-loris server cannot hold a connection for minutes. "
                                    "0 = no floor.", "bytes/s", min=0)
    min_rate_window_s: float = _f(10.0, "The window the body rate is measured over (the first one starts with "
                                        "the response headers).", "s", min=0.001)
    proxy: str | None = _f(None, "Send every request through this proxy: http://HOST:PORT (HTTPS through CONNECT) or "
                                 "socks5h://HOST:PORT (the proxy resolves names). The private-network guard still "
                                 "judges each target; the proxy's own address is trusted. A node's cluster.nodes "
                                 "entry may set its own.")
    tls: TlsConfig = _sub(TlsConfig, "Certificates.")
    dns: DnsConfig = _sub(DnsConfig, "Name resolution.")


@dataclass
class RobotsConfig:
    enabled: bool = _f(True, "Fetch and obey robots.txt (RFC 9309).")
    max_bytes: int = _f(512000, "robots.txt is read up to this size (RFC 9309 asks for at least 500 KiB).",
                        "bytes", min=1)
    cache_s: float = _f(86400.0, "How long a fetched robots.txt is trusted.", "s", min=0)
    fetch_timeout_s: float = _f(10.0, "Time allowed for one robots.txt request (each hop of a redirect; bounds how "
                                      "long an origin that never answers can hold a crawl).", "s", min=0.001)
    error_retry_s: float = _f(2.0, "After a transient failure of robots.txt (5xx, 429, a timeout, a refused "
                                   "connection, a DNS SERVFAIL or REFUSED) the origin is treated as disallowed this "
                                   "long: its URLs are parked (kept queued, the host held back) and robots.txt is "
                                   "fetched again after it. Each further failure in a row multiplies the wait by "
                                   "error_backoff.", "s", min=0)
    error_backoff: float = _f(2.0, "Factor between consecutive waits of error_retry_s.", min=1)
    error_retry_max_s: float = _f(600.0, "Longest single wait of the back-off (a Retry-After may still ask for more, "
                                         "up to politeness.max_retry_after_s).", "s", min=0)
    error_max_retries: int = _f(5, "Times robots.txt is fetched again after transient failures in a row before the "
                                   "origin's URLs are dropped (crawl log reason robots_error_disallowed). At the "
                                   "defaults an origin whose robots.txt never answers is given up about a minute after "
                                   "its first failure (2+4+8+16+32 s of waits, six fetches of at most "
                                   "fetch_timeout_s); a long crawl may raise these.", min=0)
    dead_cache_s: float = _f(3600.0, "A permanent failure (the name does not exist, a certificate that fails "
                                     "verification, a private address) drops the origin's URLs at once, and those "
                                     "found later for this long; then robots.txt is tried once more.", "s", min=0)


# --- politeness and frontier -----------------------------------------------------

@dataclass
class PolitenessConfig:
    delay_factor: float = _f(10.0, "Mercator's k: after a fetch that took x seconds, wait k*x before the host's next "
                                   "request.", min=0)
    min_delay_s: float = _f(0.0, "Least wait between two requests to one host.", "s", min=0)
    max_delay_s: float = _f(60.0, "Most wait from delay_factor or Crawl-delay (an absurd Crawl-delay does not stall a "
                                  "host forever).", "s", min=0)
    respect_crawl_delay: bool = _f(True, "Obey robots.txt Crawl-delay.")
    max_retry_after_s: float = _f(3600.0, "Most a 429/503 Retry-After may hold back a host.", "s", min=0)
    default_retry_after_s: float = _f(30.0, "Back-off for a 429/503 that names no Retry-After.", "s", min=0)
    max_retries: int = _f(2, "Times a URL answered 429/503 is queued again before its answer is final.", min=0)
    per_ip: bool = _f(False, "Also keep one request in flight and the delay per IP address: hosts sharing an "
                             "address (virtual hosting) share its wait. Known from a host's first fetch on.")


@dataclass
class FrontierConfig:
    host_policy: str = _f("bfs", "Which allowed host is fetched next: bfs (oldest queued URL first), performance "
                                 "(expected pages per second R = P/T), quality (best queued URL), capability "
                                 "(expected quality per second C = quality sum / T). Politeness holds under any "
                                 "policy.")
    url_policy: str = _f("fifo", "Which URL of a host is fetched next: fifo (arrival order) or quality (best first, "
                                 "among the host's URLs held in RAM).")
    quality: str = _f("inlinks", "Where URL quality comes from: inlinks (links to the URL seen so far) or oracle "
                                 "(frontier.quality_file).")
    quality_file: str = _f("", "Oracle qualities for quality: oracle: UTF-8 lines 'URL<TAB>quality'; URLs not in it "
                               "have quality 0.")
    inlink_bits: int = _f(22, "In-link counters: 2**inlink_bits 4-byte counters indexed by URL fingerprint "
                              "(16 MiB at 22).", min=8, max=30)
    ewma_weight: float = _f(0.8, "Weight of the history in the EWMA estimates of connect and response time "
                                 "(est = w * est + (1 - w) * sample).", min=0, max=1)
    requests_per_connection: float = _f(50.0, "Requests one connection is assumed to serve for a server not "
                                              "fetched yet (the P of R = P/T).", "requests", min=1)
    memory_urls: int = _f(200000, "URLs the frontier keeps in RAM; past it, the queues of the hosts holding most "
                                  "are spilled to disk segments until half is free.", "URLs", min=1)
    chunk_urls: int = _f(512, "URLs per spilled chunk (one disk read brings a host's next chunk back).",
                         "URLs", min=1)
    checkpoint_interval_s: float = _f(60.0, "Time between frontier checkpoints (a restart replays the journal "
                                            "written since the last one).", "s", min=0.1)
    journal_fsync_s: float = _f(1.0, "Time between fsyncs of the frontier journal (what a power cut can take; "
                                     "a killed process loses nothing).", "s", min=0)
    confirm_interval_s: float = _f(1.0, "Cluster only: how often fetched pages are confirmed done, once their "
                                         "cross-host links are ACKed or spooled; a crash repeats the pages fetched "
                                         "since the last confirmation.", "s", min=0.01)
    resume_wait_s: float | None = _f(None, "After a crash, a host that had a request in flight waits this long "
                                           "before it is contacted again (the length of the cut request, so the "
                                           "delay it earned, is unknown). null: politeness.max_delay_s, the longest "
                                           "delay a response can earn; a shorter wait is for webs known to be fast.",
                                     "s", min=0)


# --- link handling ----------------------------------------------------------------

@dataclass
class ParseConfig:
    link_sources: list[str] = _f(
        ["a", "area", "link", "link[imagesrcset]", "img", "img[srcset]", "frame", "iframe", "embed",
         "source", "source[srcset]", "form", "script", "object", "video", "video[poster]", "audio", "track",
         "input", "body[background]", "table[background]", "td[background]", "th[background]",
         "meta[refresh]", "style", "*[style]"],
        "Where a page's links are: 'name' (its usual URL attribute: a = a[href], img = img[src], form = the "
        "action of GET forms, input = src of type=image, style = the CSS of <style>), 'name[attr]' (several per "
        "element allowed; srcset/imagesrcset read as srcset), 'meta[refresh]' (<meta http-equiv=refresh>), "
        "'*[style]' (CSS of style attributes). See docs/parsing.md.")
    follow_nofollow: bool = _f(False, "Also follow links marked rel=nofollow.")
    max_links_per_page: int = _f(10000, "URL candidates beyond this many on one page are not taken; they are counted "
                                        "as truncated_links (apart from non-crawlable ones).", "links", min=1)
    inline_max_bytes: int = _f(262144, "HTML bodies larger than this are parsed in a worker thread, so one huge or "
                                       "hostile page (deep nesting is quadratic in the parser) cannot stall the "
                                       "node's event loop.",
                               "bytes", min=0)
    timeout_s: float = _f(10.0, "A page parsed in a thread that takes longer is recorded as parse_timeout and its "
                                "links are not followed.", "s", min=0.001)
    threads: int = _f(2, "Threads for parsing large pages.", min=1)
    content_seen_size: int = _f(1_048_576, "Body fingerprints the content-seen test holds (8.2 bytes each, allocated "
                                           "at start); when full it forgets (CLOCK-SETS): a forgotten mirror's links "
                                           "are followed again, but no page's links are ever skipped wrongly. "
                                           "0 = off. See docs/parsing.md.", "entries", min=0)


@dataclass
class FilterConfig:
    allow_domains: list[str] = _f([], "Host suffixes that may be crawled; empty = all.")
    deny_domains: list[str] = _f([], "Host suffixes that are never crawled.")
    max_url_bytes: int = _f(2048, "Longest URL accepted.", "bytes", min=16)
    max_path_depth: int = _f(16, "Most path segments in a URL (crawler traps).", "segments", min=1)
    max_repeated_segments: int = _f(3, "Most times one path segment may repeat in a URL (crawler traps).", min=1)
    max_pages_per_host: int = _f(0, "Most URLs admitted per host; 0 = no limit.", "urls", min=0)
    deny_extensions: list[str] = _f([], "Path extensions never fetched, e.g. ['.zip', '.iso'].")


@dataclass
class ScopeConfig:
    """Which discovered URLs belong to the crawl (docs/scope.md)."""
    max_hops: int | None = _f(None, "Most links followed from a seed (a redirect counts as a link); null = no "
                                    "limit.", "links", min=0)
    include: list[str] = _f([], "Regular expressions (Python re, searched anywhere in the canonical URL); when "
                                "given, a URL must match one of them.")
    exclude: list[str] = _f([], "Regular expressions (Python re, searched anywhere in the canonical URL); a URL "
                                "matching one is not crawled.")
    memory_urls: int = _f(200_000, "URLs queued at the max_hops boundary whose smallest hop count is remembered, "
                                   "so a nearer path found later still counts; the oldest are forgotten first.",
                          "urls", min=0)
    memory_links: int = _f(1_000_000, "Links cut by max_hops from pages fetched at the boundary, remembered so a "
                                      "nearer path to such a page follows them without fetching it again; the "
                                      "oldest pages' are forgotten first.", "links", min=0)


# --- peers -------------------------------------------------------------------------

@dataclass
class PeersConfig:
    """Tunables of the peer transport (crawler/peers/options.py holds the same names)."""
    listen_host: str | None = _f(None, "Address the peer server binds (e.g. 0.0.0.0 in a container); null = the "
                                       "node's host.")
    queue_batches: int = _f(64, "Batches per peer waiting in memory; sending awaits (backpressure) when full and the "
                                "peer is up.", "batches", min=1)
    window_batches: int = _f(8, "Batches per peer sent but not yet acknowledged.", "batches", min=1)
    max_frame_bytes: int = _f(16 * 1024 * 1024, "Largest frame accepted or sent; bigger batches are split. Same on "
                                                "every node.", "bytes", min=4096)
    max_control_bytes: int = _f(65536, "Largest control message.", "bytes", min=256)
    connect_timeout_s: float = _f(5.0, "Time allowed to open a TCP connection to a peer.", "s", min=0.001)
    handshake_timeout_s: float = _f(5.0, "Time allowed for the authentication handshake.", "s", min=0.001)
    ping_interval_s: float = _f(5.0, "A silent link sends a PING after this long.", "s", min=0.001)
    dead_after_s: float = _f(15.0, "A link waiting for an answer that hears nothing this long is dropped and "
                                   "reconnected.", "s", min=0.001)
    ack_timeout_s: float = _f(60.0, "A batch unacknowledged this long drops the link.", "s", min=0.001)
    reconnect_min_s: float = _f(0.1, "First reconnect delay; doubles per failure, with jitter.", "s", min=0.001)
    reconnect_max_s: float = _f(30.0, "Cap of the reconnect delay.", "s", min=0.001)
    spill_after_s: float = _f(10.0, "A peer down this long has its queued batches spilled to disk (earlier when its "
                                    "queue is full).", "s", min=0.001)
    spool_segment_bytes: int = _f(64 * 1024 * 1024, "Spool files are rotated beyond this size.", "bytes", min=4096)
    recv_buffer_batches: int = _f(32, "Per incoming connection: frames read but not yet processed.", "batches", min=1)
    max_handshakes: int = _f(64, "Incoming connections allowed in the handshake at once.", "connections", min=1)
    termination_round_s: float = _f(0.1, "How often the coordinator (node 0) polls the cluster for the end of the "
                                         "crawl; while another node is busy the polls space out to 8 times this.",
                                    "s", min=0.001)


# --- splitter, DUE ------------------------------------------------------------------

@dataclass
class CacheConfig:
    policy: str = _f("clock-sets", "Cache policy: clock-sets (the paper's CLOCK in 32-entry sets, 8.2 bytes per "
                                   "entry), clock (the paper's CLOCK exactly, one ring, 16-24 bytes per entry), lru, "
                                   "random, static, sieve, s3fifo, arc, 2q or wtinylfu (offline only: min, infinite). "
                                   "See docs/caches.md.")
    size: int = _f(65536, "Entries the cache holds.", "entries", min=1)
    seed: int = _f(0, "Seed of the random policy.")
    preload_file: str | None = _f(None, "For static: .npy file of uint64 fingerprints to hold.")


@dataclass
class SplitterLogConfig:
    enabled: bool = _f(False, "Log every URL entering the splitter for replay (files go under data_dir).")
    rotate_bytes: int = _f(256 * 1024 * 1024, "Start a new log file beyond this size.", "bytes", min=4096)


@dataclass
class SplitterConfig:
    cache: CacheConfig = _sub(CacheConfig, "The splitter's URL cache.")
    cache_scope: Literal["cross", "all"] = _f("cross", "Which URLs pass the splitter cache: only those bound for "
                                                       "peers, or all.")
    batch_size: int = _f(1000, "A peer batch is sent at this many URLs...", "urls", min=1)
    batch_ms: float = _f(200.0, "...or this long after its first URL, whichever comes first.", "ms", min=0)
    log: SplitterLogConfig = _sub(SplitterLogConfig, "Binary stream log for replay.")


def _due_cache() -> CacheConfig:
    return CacheConfig(size=262144)


@dataclass
class DueConfig:
    cache: CacheConfig = field(default_factory=_due_cache, metadata=doc("The DUE's front cache."))
    buffer_size: int = _f(1_000_000, "URLs held before a merge with the disk set.", "urls", min=1)
    flush_interval_s: float = _f(0.5, "Least time between early merges asked for because the frontier runs low "
                                      "(an idle node merges at once).", "s", min=0)
    prompt_lookups: bool = _f(True, "When a page's links enter the buffer while a worker waits and a host they are for "
                                    "has nothing queued, look them up in the disk set at once and hand the new ones "
                                    "to the frontier, instead of waiting for the next merge: a host never idles while "
                                    "its next URLs wait in the buffer.")
    buckets: int = _f(64, "Fingerprint-prefix buckets of the on-disk set; a power of two. A DUE directory keeps "
                          "the count it was created with.", "buckets", min=1, max=65536)
    delta_ratio: float = _f(0.125, "A bucket's delta file is folded into its base once it holds this fraction of "
                                   "it; 0 = rewrite every touched bucket on every merge (classic Mercator).", min=0)
    background: bool = _f(True, "Merge in a background thread (half the buffer merging while the other half fills).")
    journal_fsync_s: float | None = _f(1.0, "fsync the journal at most this long after a write; null = only before "
                                            "merges and at checkpoint/close. Bounds the loss on power failure (a "
                                            "killed process loses nothing either way).", "s", min=0)
    window_entries: int = _f(4194304, "Most fingerprints of one bucket in memory at once during a merge "
                                      "(8 bytes each).", "fingerprints", min=1)


# --- output -----------------------------------------------------------------------

@dataclass
class WarcConfig:
    enabled: bool = _f(True, "Write fetched pages to WARC files under data_dir/warc.")
    rotate_bytes: int = _f(1024 ** 3, "Start a new WARC file beyond this size.", "bytes", min=4096)
    gzip_level: int = _f(6, "zlib level of each record's gzip member: 6 is zlib's default, as wget and Heritrix "
                            "write; 1 costs about half the CPU for files ~15% larger; 9 (warcio's own) about 1.3x "
                            "the CPU of 6 for ~0.5% smaller files.", min=0, max=9)


@dataclass
class StoreConfig:
    warc: WarcConfig = _sub(WarcConfig, "WARC output.")
    crawl_log: bool = _f(True, "Write data_dir/crawl.log.jsonl, one line per fetch.")


@dataclass
class MetricsConfig:
    bind: str = _f("127.0.0.1", "Address the /metrics endpoint listens on.")
    enabled: bool = _f(True, "Serve /metrics.")
    progress_interval_s: float = _f(5.0, "Progress line to stderr every this often; 0 = none.", "s", min=0)
    linger_s: float = _f(0.0, "Keep serving /metrics this long after the crawl ends, so a scraper sees the final "
                              "values (a signal ends it early).", "s", min=0)


@dataclass
class Config:
    cluster: ClusterConfig = _sub(ClusterConfig, "The nodes of the crawl.")
    crawl: CrawlConfig = _sub(CrawlConfig, "What to crawl and when to stop.")
    workers: int = _f(256, "Asyncio worker tasks per node.", min=1)
    fetch: FetchConfig = _sub(FetchConfig, "HTTP fetching.")
    robots: RobotsConfig = _sub(RobotsConfig, "robots.txt handling.")
    politeness: PolitenessConfig = _sub(PolitenessConfig, "Per-host politeness.")
    frontier: FrontierConfig = _sub(FrontierConfig, "URL frontier.")
    parse: ParseConfig = _sub(ParseConfig, "Link extraction.")
    filter: FilterConfig = _sub(FilterConfig, "URL filter.")
    scope: ScopeConfig = _sub(ScopeConfig, "Crawl scope: hops from the seeds, URL patterns.")
    splitter: SplitterConfig = _sub(SplitterConfig, "Host splitter.")
    peers: PeersConfig = _sub(PeersConfig, "Transport between nodes.")
    due: DueConfig = _sub(DueConfig, "Duplicate URL eliminator.")
    store: StoreConfig = _sub(StoreConfig, "Pages and crawl log on disk.")
    metrics: MetricsConfig = _sub(MetricsConfig, "Prometheus endpoint and progress.")
