"""The report's aggregation: the tally from fetches and from crawl-log lines, its state and the tail after a
kill, the read-only count of queued URLs, the tables and their files."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from crawler.config.schema import FrontierConfig
from crawler.fetch import FetchResult
from crawler.filter.scope import Seed as ScopedSeed
from crawler.frontier import Frontier
from crawler.node.records import Records
from crawler.node.totals import PageCounts
from crawler.reports.build import HOST_COLUMNS, ClusterReport
from crawler.reports.collect import NodeData, node_from_answer, node_from_data_dir
from crawler.reports.queued import queued_by_host
from crawler.reports.seeds import HostScope, Seed, scope_of
from crawler.reports.state import read_lines
from crawler.reports.tally import HostRow, Tally
from crawler.reports.write import write_report
from crawler.urls import fingerprint


def result(url: str, status: int = 200, reason: str = "ok", wire_bytes: int = 100,
           content_type: str | None = "text/html") -> FetchResult:
    return FetchResult(url=url, status=status, reason=reason, wire_bytes=wire_bytes, content_type=content_type,
                       body=b"x" if status else b"", duration_s=0.01)


def recorded(tmp_path: Path) -> tuple[Records, PageCounts]:
    """A node's Records writing a real crawl log, with a mix of fetches and skips."""
    counts = PageCounts()
    records = Records(counts, CollectorRegistry())
    from crawler.store import CrawlLog
    records.crawl_log = CrawlLog(tmp_path / "crawl.log.jsonl")
    records.record(result("http://a.test/robots.txt", 404, wire_bytes=10), "robots")
    records.record(result("http://a.test/"), "page", links=3)
    records.record(result("http://a.test/x", 301, wire_bytes=0), "page", links=1)
    records.record(result("http://a.test/y", 503, wire_bytes=5), "page")
    records.record(result("http://b.test/", content_type="text/css"), "page", failure="parse_timeout")
    records.record(result("http://c.test/", 0, "timeout", 0, None), "page")
    records.record(result("http://c.test/robots.txt", 0, "dns_nxdomain", 0, None), "robots")
    records.write_line({"url": "http://a.test/private", "kind": "page", "status": 0,
                        "reason": "robots_fetched_disallowed"})
    records.write_line({"url": "http://d.test/", "kind": "page", "status": 0, "reason": "dns_nxdomain",
                        "dropped": "origin"})
    records.write_line({"url": "http://e.test/", "kind": "page", "status": 0, "reason": "robots_error_disallowed"})
    counts.fetches = 5                  # visit.py counts a page attempt (records.py does not)
    counts.errors["parse_timeout"] += 1  # visit.py counts it, records.py writes it in the line
    counts.links_extracted = 4
    return records, counts


def test_live_tally_equals_the_tally_of_its_crawl_log_lines_and_the_node_counts(tmp_path):
    records, counts = recorded(tmp_path)
    records.crawl_log.close()
    live = records.tally
    again = Tally()
    end = read_lines(tmp_path / "crawl.log.jsonl", 0, again)
    assert end == (tmp_path / "crawl.log.jsonl").stat().st_size
    assert again.to_json() == live.to_json() and again.bad_lines == 0 and again.lines == 10
    # The node-level figures are PageCounts' (what /metrics and the summary show).
    assert live.pages == counts.pages and live.bytes == counts.bytes and live.errors == counts.errors
    assert (live.fetches, live.robots_fetches, live.links) == (counts.fetches, counts.robots_fetches, 4)
    assert (live.robots_denied, live.robots_unreachable, live.dropped) == (1, 1, Counter({"dns_nxdomain": 1}))
    a = live.hosts["a.test"]
    assert (a.fetched, a.bytes, a.status, a.robots_fetches, a.robots_denied) == (3, 115, [0, 1, 1, 0, 1, 0], 1, 1)
    assert live.hosts["c.test"].failures == Counter({"timeout": 1, "dns_nxdomain": 1})
    assert live.hosts["b.test"].failures == Counter({"parse_timeout": 1})
    assert live.hosts["d.test"].dropped == live.hosts["e.test"].dropped == 1
    assert live.codes == Counter({200: 2, 301: 1, 503: 1}) and live.mime["text/css"] == 1


def test_tally_round_trips_through_json_and_merges_by_adding():
    t = Tally()
    t.fetch("http://a.test/", "page", 200, "ok", 10, "text/html", links=2)
    t.fetch("http://a.test/z", "page", 0, "timeout", 0, None)
    back = Tally.from_json(json.loads(json.dumps(t.to_json())))
    assert back.to_json() == t.to_json()
    back.merge(t)
    assert back.hosts["a.test"].fetched == 2 and back.hosts["a.test"].failures == Counter({"timeout": 2})
    assert back.fetches == 4 and back.pages[("2xx", "page")] == 2


@pytest.mark.parametrize("line", ["[]", '{"url": 3, "reason": "ok"}', '{"kind": "page"}',
                                  '{"url": "http://a.test/", "reason": "ok", "duration_s": 0.1, "bytes": -1}'])
def test_a_line_that_is_not_a_crawl_log_line_is_counted_as_bad_and_left_out(line):
    t = Tally()
    t.add_line(json.loads(line))
    assert t.bad_lines == 1 and t.lines == 0 and not t.hosts


def test_a_torn_last_line_is_not_counted_and_the_offset_stops_before_it(tmp_path):
    path = tmp_path / "crawl.log.jsonl"
    good = json.dumps({"url": "http://a.test/", "kind": "page", "status": 200, "reason": "ok", "bytes": 5,
                       "duration_s": 0.1}) + "\n"
    path.write_text(good + "not json\n" + good[:20])
    t = Tally()
    assert read_lines(path, 0, t) == len(good) + len("not json\n")
    assert t.hosts["a.test"].fetched == 1 and t.bad_lines == 2
    assert read_lines(path, len(good), Tally()) == len(good) + len("not json\n")   # from an offset on


def test_host_row_refuses_what_is_not_a_row():
    with pytest.raises(ValueError):
        HostRow.from_json({"status": [1, 2]})
    with pytest.raises(ValueError):
        HostRow.from_json({"fetched": True, "status": [0] * 6})


def test_queued_by_host_counts_what_a_restart_would_fetch_without_writing(tmp_path):
    directory = tmp_path / "frontier"
    frontier = Frontier(FrontierConfig(), 1, directory=directory)
    frontier.add_many([(f"http://a.test/{i}", "a.test", 0.0) for i in range(5)]
                      + [(f"http://b.test/{i}", "b.test", 0.0) for i in range(3)])
    frontier.checkpoint()
    frontier.add("http://b.test/late", "b.test")                       # in the journal only
    host, url = frontier._pick()                                        # a fetch that finishes
    frontier.release(host, 0.0)
    frontier.sync()
    assert dict(queued_by_host(directory)) == dict(frontier.queued_hosts())
    before = sorted((p.name, p.stat().st_mtime_ns) for p in directory.iterdir())
    expected = {"a.test": 5, "b.test": 4}
    expected[host] -= 1
    assert dict(queued_by_host(directory)) == expected
    assert sorted((p.name, p.stat().st_mtime_ns) for p in directory.iterdir()) == before
    frontier.shutdown()
    assert dict(queued_by_host(directory)) == expected                  # after the clean stop's checkpoint
    assert queued_by_host(tmp_path / "none") == Counter()


def test_a_stopped_node_is_read_from_its_data_dir(tmp_path):
    data = tmp_path / "node-0"
    (data / "state").mkdir(parents=True)
    lines = [{"url": "http://old.test/", "kind": "page", "status": 200, "reason": "ok", "bytes": 1,
              "duration_s": 0.1}]
    old = "".join(json.dumps(x) + "\n" for x in lines)
    new = json.dumps({"url": "http://a.test/", "kind": "page", "status": 404, "reason": "ok", "bytes": 3,
                      "duration_s": 0.1}) + "\n"
    (data / "crawl.log.jsonl").write_text(old + new)
    from crawler.reports.state import STATE_NAME, STATE_VERSION
    from crawler.state import StateStore
    StateStore(data / "state").write(STATE_NAME, STATE_VERSION,
                                     [{"start": len(old), "offset": len(old), "totals": Tally().totals_json()}])
    (data / "state" / "control.json").write_text(json.dumps({"version": 1, "blocked": [".a.test"]}))
    n = node_from_data_dir(0, data)
    assert set(n.tally.hosts) == {"a.test"} and n.tally.hosts["a.test"].status[3] == 1   # the --fresh crawl only
    assert n.blocked == [".a.test"] and n.blocked_urls == {"dropped": 0, "rejected": 0}


def test_an_answer_that_is_not_a_node_report_names_where_it_came_from():
    from crawler.reports.collect import ReportError
    with pytest.raises(ReportError, match="http://n1"):
        node_from_answer({"node": 1}, "http://n1")


def test_the_tables_sum_the_nodes_and_are_written_as_csv_and_json(tmp_path):
    one, two = Tally(), Tally()
    seed_a = f"{fingerprint('http://a.test/'):016x}"
    one.fetch("http://a.test/", "page", 200, "ok", 10, "text/html", seed=seed_a)
    one.fetch("http://a.test/robots.txt", "robots", 200, "ok", 4, "text/plain")
    two.fetch("http://a.test/r", "page", 200, "ok", 6, "text/html", seed=seed_a)   # a robots.txt redirect's host
    two.fetch("http://b.test/", "page", 0, "timeout", 0, None)
    nodes = [NodeData(0, one, Counter({"a.test": 2}), ["b.test"], {"dropped": 3, "rejected": 1}),
             NodeData(1, two, Counter({"c.test": 1}))]
    report = ClusterReport.of(nodes, [Seed("http://a.test/", HostScope("a.test")),
                                      Seed("http://z.test/", HostScope("z.test"))], "data")
    files = write_report(report, tmp_path / "out")
    hosts = json.loads(files["hosts.json"].read_text())
    assert [h["host"] for h in hosts] == ["a.test", "b.test", "c.test"]
    a = hosts[0]
    assert (a["fetched"], a["bytes"], a["status_2xx"], a["queued"], a["blocked"]) == (2, 20, 2, 2, False)
    assert hosts[1]["blocked"] and hosts[1]["failures_by_reason"] == {"timeout": 1}
    with files["hosts.csv"].open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == HOST_COLUMNS and rows[1]["blocked"] == "yes" and rows[1]["failures_by_reason"] == \
        "timeout=1"
    seeds = json.loads(files["seeds.json"].read_text())
    assert [(s["seed"], s["fetched"], s["status_2xx"], s["hosts_fetched"], s["queued"]) for s in seeds] == \
        [("http://a.test/", 2, 2, 2, 2), ("http://z.test/", 0, 0, 0, 0)]
    assert Tally.from_json(json.loads(json.dumps(two.to_json()))).seed_pages == Counter({seed_a: 1})
    summary = json.loads(files["summary.json"].read_text())
    assert (summary["fetched"], summary["fetches"], summary["queued"], summary["failures"]) == (2, 3, 3, 1)
    assert summary["blocked_urls"] == {"dropped": 3, "rejected": 1} and summary["status"] == {"2xx": 2}
    assert json.loads(files["status_codes.json"].read_text()) == [{"status": 200, "class": "2xx", "responses": 2}]
    assert json.loads(files["mime_types.json"].read_text())[0] == {"mime_type": "text/html", "responses": 2,
                                                                   "share": 1.0}


def test_a_restart_counts_the_lines_after_the_checkpoint_and_sets_the_totals_from_them(tmp_path):
    """After a SIGKILL: the saved tally covers the first line, the crawl log holds two more; the node's
    restored totals (stale in counters.jsonl) become those of all three lines."""
    from tests.support.configs import one_node_config

    from crawler.config import from_dict
    from crawler.node import Node
    from crawler.reports.state import STATE_NAME, STATE_VERSION

    node = Node(from_dict(one_node_config(tmp_path / "node-{node}")), 0, fresh=True)
    try:
        lines = [{"url": f"http://a.test/{i}", "kind": "page", "status": 200 + 200 * i, "reason": "ok",
                  "bytes": 10, "duration_s": 0.1} for i in range(3)]
        text = [json.dumps(x) + "\n" for x in lines]
        (tmp_path / "node-0" / "crawl.log.jsonl").write_text("".join(text))
        saved = Tally()
        saved.add_line(lines[0])
        head = {"start": 0, "offset": len(text[0]), "totals": saved.totals_json()}
        node.state.write(STATE_NAME, STATE_VERSION, [head, {"h": "a.test", **saved.hosts["a.test"].to_json()}])
        node.restored = PageCounts(fetches=7, retries=3)             # the counters file: another instant
        node.report_state.restore(node.state)
        r = node.restored
        assert (r.fetches, r.page_fetches, r.retries) == (3, 3, 3)     # retries: not in the log, kept
        assert r.pages == Counter({("2xx", "page"): 1, ("4xx", "page"): 1, ("6xx", "page"): 1})
        row = node.records.tally.hosts["a.test"]
        assert (row.fetched, row.bytes, row.status) == (3, 30, [0, 1, 0, 1, 0, 1])
        assert node.report_state.start == 0
    finally:
        node.due.close()


def test_a_seeds_scope_covers_its_host_its_domain_or_every_host():
    known = {"a.test": 1, "www.b.test": 1, "x.b.test": 1, "b.test": 1, "c.test": 1}
    kinds = ("host", "domain", "prefix", "any")
    scoped = {kind: scope_of(ScopedSeed("http://www.b.test/docs/", kind)) for kind in kinds}
    assert scoped["host"].hosts(known) == ["www.b.test"]
    assert sorted(scoped["domain"].hosts(known)) == ["b.test", "www.b.test", "x.b.test"]
    assert scoped["prefix"].hosts(known) == ["www.b.test"] and scoped["prefix"].name == "prefix (host)"
    assert sorted(scoped["any"].hosts(known)) == sorted(known)
