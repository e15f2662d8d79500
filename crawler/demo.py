"""`crawler demo`: the embedded default run, with nothing to set up.

Starts the synthetic test web as a child process on free loopback ports
(HTTP, and HTTPS with a CA made for the run: HTTPS-only hosts, http -> https
redirects, three hosts whose certificates a crawler must refuse), writes a
cluster config for it (three nodes on loopback, each binding its fetches to
its own address 127.0.0.1-3; DNS overrides point `*.web.test` at the
loopback address, so no DNS server is needed and the private-network guard
stays on; `fetch.tls.ca_file` names the web's CA), runs the cluster (`crawler cluster`, one process per node,
with a fresh random cluster secret), then checks the crawl from the outside:
the server's access log against the web's manifest and the politeness rules.
While it runs it says where each node's /metrics is; it prints a table per
node, where its files are and what to type next (`crawler status`,
Prometheus), and, last, one JSON line.

The nodes log their splitter streams (`splitter.log.enabled`), and the demo
ends with what `crawler replay` does with them, in short (`demo_replay`):
the miss rates of a few cache policies at a few sizes, and a PNG of them
(matplotlib, the `replay` extra; without it the table alone, and how to get
the figure).

Its folder (`--dir`, or a new one under the system's temporary directory) is
kept: the WARC files, crawl logs, node state and the web's access log are
what a user wants to open next. `--remove` deletes it at the end, and then
the JSON line names no folder.
"""

from __future__ import annotations

import argparse
import io
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from crawler.config.schema import PolitenessConfig
from crawler.ports import free_ports
from crawler.testweb.audit import compare, fetch_durations, overlaps, politeness_shortfalls
from crawler.testweb.process import TestWebProcess

SECRET_ENV = "CRAWLER_CLUSTER_SECRET"
REPLAY_POLICIES = ("lru", "clock", "sieve", "min")     # the paper's two, a 2024 one, and the floor
REPLAY_SIZES = (1 << 6, 1 << 8, 1 << 10, 1 << 12)      # around a demo node's distinct cross URLs
MAX_REPORTED = 10                 # politeness shortfalls printed (all are counted)
DEMO_HTTPS_SHARE = 0.2            # of the web's hosts HTTPS-only, and as many redirecting http -> https


def crawl_records(data_dir: Path) -> Iterator[dict]:
    """Every node's crawl log records (for the politeness check's fetch times)."""
    for path in data_dir.glob("node-*/crawl.log.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            yield json.loads(line)


def demo_config(seeds: str, data_dir: Path, workers: int, nodes: int, ca_file: str) -> dict:
    ports = free_ports(2 * nodes)
    return {
        "cluster": {"name": "demo", "secret_env": SECRET_ENV, "nodes": [
            {"id": i, "host": "127.0.0.1", "peer_port": ports[2 * i], "metrics_port": ports[2 * i + 1],
             "source_address": f"127.0.0.{i + 1}"} for i in range(nodes)]},
        "crawl": {"seeds_file": seeds, "data_dir": str(data_dir / "node-{node}")},
        "workers": workers,
        "splitter": {"log": {"enabled": True}},
        "fetch": {"dns": {"overrides": {"*.web.test": "127.0.0.1"}}, "tls": {"ca_file": ca_file},
                  "read_timeout_s": 3, "total_timeout_s": 20,
                  "max_body_bytes": 4 << 20, "max_decoded_bytes": 16 << 20},
        "metrics": {"progress_interval_s": 2},
    }


def demo(args: argparse.Namespace) -> int:
    from crawler.cli import run_async
    from crawler.cluster import run_cluster

    root = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="crawler-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    web_args = ["--hosts", str(args.hosts), "--pages", str(args.pages), "--private-links", "--stall-s", "6",
                "--https-share", str(DEMO_HTTPS_SHARE), "--https-redirect-share", str(DEMO_HTTPS_SHARE),
                "--tls-bad-hosts"]
    print(f"demo: a test web of {args.hosts} hosts / {args.pages} pages, crawled by {args.nodes} nodes; "
          f"files in {root}", file=sys.stderr)
    try:
        with TestWebProcess(root / "web", web_args) as web:
            config_path = root / "crawl.yaml"
            config = demo_config(web.info["seeds"], root / "data", args.workers, args.nodes, web.info["ca_file"])
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            metrics = [f"http://127.0.0.1:{n['metrics_port']}/metrics" for n in config["cluster"]["nodes"]]
            (root / "prometheus.yml").write_text(prometheus_config(config))
            print(f"demo: while it runs, each node's metrics are at {', '.join(metrics)}; in another terminal: "
                  f"crawler status -c {config_path}", file=sys.stderr, flush=True)
            lines = io.StringIO()
            started = time.monotonic()
            code = run_async(run_cluster(str(config_path), extra_env={SECRET_ENV: secrets.token_hex(16)},
                                         out=lines))
            wall_s = time.monotonic() - started
            requests = web.requests()
            manifest = web.manifest()
        outputs = [json.loads(line) for line in lines.getvalue().splitlines() if line.strip()]
        nodes, cluster = outputs[:-1], outputs[-1]
        result = compare(requests, manifest)
        overlap = overlaps(requests)
        gaps = politeness_shortfalls(requests, manifest, fetch_durations(crawl_records(root / "data")),
                                    PolitenessConfig().delay_factor)
        for gap in gaps[:MAX_REPORTED]:
            print(f"demo: politeness shortfall: {gap}", file=sys.stderr)
        ok = code == 0 and result.ok and not overlap and not gaps
        report = {
            "demo": "ok" if ok else "mismatch",
            "nodes": len(nodes),
            "pages": cluster["pages"],
            "expected_pages": len(manifest.fetched),
            "missing": len(result.missing), "unexpected": len(result.unexpected),
            "fetched_twice": len(result.duplicates), "robots_forbidden_fetched": len(result.forbidden),
            "overlapping_requests": len(overlap), "politeness_violations": len(gaps),
            "cache_hit_rates": cluster["cache_hit_rates"],
            "peer_bytes_sent": cluster["peer_bytes_sent"],
            "wall_s": round(wall_s, 1),
        }
        print(_table(nodes, report))
        report["replay"] = demo_replay(root / "data", root / "replay")
        if args.remove:
            shutil.rmtree(root, ignore_errors=True)
            report["replay"] = {k: None for k in report["replay"]}        # it was in the folder
            print(f"demo: removed {root} (--remove)", file=sys.stderr, flush=True)
        else:
            report["files"] = str(root)
            print(_next_steps(root, config_path))
        print(json.dumps(report, sort_keys=True), flush=True)
        return 0 if ok else 1
    except BaseException:
        if args.remove:
            shutil.rmtree(root, ignore_errors=True)
        raise


def prometheus_config(config: dict) -> str:
    """A Prometheus configuration scraping the demo's nodes, labelled as deploy/prometheus/prometheus.yml
    labels a cluster (its recording rules work on it)."""
    name = config["cluster"]["name"]
    targets = "".join(f'      - targets: ["127.0.0.1:{n["metrics_port"]}"]\n'
                      f'        labels: {{cluster: {name}, node: "{n["id"]}"}}\n' for n in config["cluster"]["nodes"])
    return ("# Written by crawler demo: scrapes its nodes while a crawl of crawl.yaml runs.\n"
            "# prometheus --config.file=prometheus.yml   (docs/metrics.md lists every series)\n"
            "global: {scrape_interval: 5s, scrape_timeout: 4s}\n"
            "scrape_configs:\n  - job_name: crawler\n    static_configs:\n" + targets)


def _next_steps(root: Path, config_path: Path) -> str:
    """Where the demo's files are, what to type next, and how to remove them."""
    return "\n".join([
        "",
        f"files kept in {root}:",
        "  data/node-*/warc/*.warc.gz    WARC files (warcio index FILE lists their records)",
        "  data/node-*/crawl.log.jsonl   crawl logs, one JSON line per fetch",
        "  data/node-*                   each node's state: frontier, DUE, checkpoints",
        "  data/node-*/splitter-log      splitter stream logs: crawler replay data/ (crawler replay --help)",
        "  replay/                       the short replay's results.csv and figure",
        "  web/                          the test web: access.log.jsonl, manifest.json, seeds.txt, ca.crt",
        "next, while a crawl of this config runs (the demo's own has ended):",
        f"  crawler status -c {config_path}",
        f"  prometheus --config.file={root / 'prometheus.yml'}   (docs/metrics.md lists every series)",
        f"remove them with: rm -r {root}",
    ])


def _rate(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _table(nodes: list[dict], report: dict) -> str:
    head = (f"{'node':>4}  {'pages':>6}  {'failures':>8}  {'splitter hits':>13}  {'DUE hits':>8}  "
            f"{'sent to peers':>13}  {'pages/s':>7}")
    lines = [head, "-" * len(head)]
    for s in sorted(nodes, key=lambda s: s["node"]):
        rates = s["cache_hit_rates"]
        lines.append(f"{s['node']:>4}  {s['pages']:>6}  {s['errors']:>8}  {_rate(rates.get('splitter')):>13}  "
                     f"{_rate(rates.get('due')):>8}  {s['peer_bytes_sent']:>11} B  {s['pages_per_s']:>7}")
    rates = report["cache_hit_rates"]
    lines.append(f"{'all':>4}  {report['pages']:>6}  {sum(s['errors'] for s in nodes):>8}  "
                 f"{_rate(rates.get('splitter')):>13}  {_rate(rates.get('due')):>8}  {report['peer_bytes_sent']:>11} B")
    lines.append("")
    lines.append(f"expected pages {report['expected_pages']}: missing {report['missing']}, unexpected "
                 f"{report['unexpected']}, fetched twice {report['fetched_twice']}, robots-forbidden fetched "
                 f"{report['robots_forbidden_fetched']}")
    lines.append(f"politeness (server's log): {report['overlapping_requests']} overlapping requests, "
                 f"{report['politeness_violations']} delays shorter than the politeness rules")
    return "\n".join(lines)


def demo_replay(data_dir: Path, out: Path) -> dict:
    """The splitter streams the nodes logged, replayed through a few policies at a few sizes: prints
    the table of miss rates and the PNG's path (or how to get the PNG); returns what it wrote."""
    from crawler.replay import ReplayOptions, load_streams, replay, result_rows
    from crawler.replay.plots import PlotsUnavailable, plot_miss_rate, require_matplotlib
    from crawler.replay.results import write_results
    from crawler.replay.traces import InputError

    try:
        streams = load_streams([data_dir])
    except InputError as exc:                       # a crawl stopped before any page: nothing logged
        print(f"replay: no splitter streams to replay ({exc})")
        return {"png": None, "results": None}
    # numpy's LRU pass: numba's would compile for longer than this short stream takes.
    result = replay(streams, ReplayOptions(policies=REPLAY_POLICIES, sizes=REPLAY_SIZES, engine="numpy"))
    rows = result_rows(result)
    out.mkdir(parents=True, exist_ok=True)
    write_results(out / "results.csv", rows)
    print(_replay_table(result, rows))
    try:
        require_matplotlib()
    except PlotsUnavailable:
        print("figure: matplotlib is not installed; pip install -e '.[replay]' for the PNG "
              f"(the miss rates are in {out / 'results.csv'})")
        return {"png": None, "results": str(out / "results.csv")}
    trace = "cross" if result.stats["cross"].requests else "full"
    png = plot_miss_rate(result, rows, trace, out / f"miss_rate_{trace}.png")
    print(f"figure: {png}")
    return {"png": None if png is None else str(png), "results": str(out / "results.csv")}


def _replay_table(result, rows) -> str:
    """Miss rates per trace and policy (rows) and size (columns)."""
    sizes = result.options.sizes
    head = f"{'trace':<6} {'policy':<7}" + "".join(f"  {'2^' + str(s.bit_length() - 1):>6}" for s in sizes)
    lines = ["", "splitter cache replay: miss rate of each policy at each cache size (entries per node)",
             head, "-" * len(head)]
    by_key = {(r.trace, r.policy, r.size): r.miss_rate for r in rows}
    for trace in result.options.traces:
        st = result.stats[trace]
        for policy in result.options.policies:
            cells = "".join(f"  {_rate(by_key.get((trace, policy, s))):>6}" for s in sizes)
            lines.append(f"{trace:<6} {policy:<7}{cells}")
        lines.append(f"{'':<6} ({st.requests:,} requests, {st.distinct:,} distinct)")
    return "\n".join(lines)
