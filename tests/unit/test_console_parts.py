"""The console's pure parts: the host tally (counts, the per-second ring, bounded memory), the cluster view's
merging, and the page's files shipped as package data."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from importlib import resources

from tests.support.fixtures import REPO

from crawler.console.tally import HostTally
from crawler.console.view import STEP_S, cluster_view, rate_points
from crawler.fetch import FetchResult
from crawler.status import NodeStatus


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def page(host: str, status: int = 200, reason: str = "ok", size: int = 100) -> FetchResult:
    return FetchResult(url=f"http://{host}/x", status=status, reason=reason, wire_bytes=size if status else 0)


def test_tally_counts_pages_statuses_and_failures_per_host():
    tally = HostTally(clock=Clock(1000.5))
    for r in (page("a.test"), page("a.test", 404), page("a.test", 503), page("b.test", 0, "connect_timeout"),
              page("b.test", 0, "connect_timeout"), page("b.test", 0, "reset")):
        tally.record(r, "page")
    tally.record(page("c.test", 0, "dns_nxdomain"), "robots")     # a failing robots.txt: a failing host
    tally.record(page("d.test"), "robots")                        # robots.txt answered: not a page
    tally.record(page("e.test", 200, "body_too_large"), "page")   # cut at a limit: a page and a failure
    top = tally.top()
    assert [h["host"] for h in top["busiest"]] == ["a.test", "e.test", "b.test", "c.test"]
    a = top["busiest"][0]
    assert (a["pages"], a["bytes"], a["status_4xx"], a["status_5xx"], a["errors"]) == (3, 300, 1, 1, 0)
    assert [(h["host"], h["errors"], h["status_5xx"], h["reason"]) for h in top["failing"]] == \
        [("b.test", 3, 0, "connect_timeout"), ("a.test", 0, 1, ""), ("c.test", 1, 0, "dns_nxdomain"),
         ("e.test", 1, 0, "body_too_large")]
    assert top["busiest"][1]["pages"] == 1
    assert "d.test" not in tally.hosts


def test_tally_series_counts_responses_per_second_over_a_ring():
    clock = Clock(5000.2)
    tally = HostTally(window_s=10, clock=clock)
    for second, n in ((5000, 2), (5003, 1), (5009, 4)):
        clock.now = second + 0.5
        for _ in range(n):
            tally.record(page("a.test"), "page")
    tally.record(page("a.test", 0, "reset"), "page")              # no response: not in pages/s
    assert tally.series(5010) == (5000, [2, 0, 0, 1, 0, 0, 0, 0, 0, 4])
    clock.now = 5012.5                                          # slot of 5002: the ring wraps over 5000's
    tally.record(page("a.test"), "page")
    assert tally.series(5013) == (5003, [1, 0, 0, 0, 0, 0, 4, 0, 0, 1])
    assert tally.series(5030) == (5020, [0] * 10)               # old slots are not counted again


def test_tally_memory_is_bounded_and_keeps_the_busiest_and_the_failing():
    tally = HostTally(max_hosts=8, clock=Clock(0.0))
    for i in range(3):
        for _ in range(50):
            tally.record(page(f"big{i}.test"), "page")
    for _ in range(20):
        tally.record(page("broken.test", 0, "reset"), "page")
    for i in range(100):
        tally.record(page(f"small{i}.test"), "page")
    assert len(tally.hosts) <= 8
    assert tally.forgotten > 0
    assert {"big0.test", "big1.test", "big2.test", "broken.test"} <= set(tally.hosts)
    assert tally.top()["failing"][0]["host"] == "broken.test"


def test_rate_points_average_steps_and_align_on_seconds():
    pages = [5] * 10 + [0] * 10                                   # seconds 100..119
    assert rate_points(100, pages, end=120, window_s=20, step_s=5) == [5.0, 5.0, 0.0, 0.0]
    # A node whose series starts later (clock a second ahead): missing seconds count 0.
    assert rate_points(101, pages, end=120, window_s=20, step_s=5) == [4.0, 5.0, 1.0, 0.0]


def _view(node: int, pages: list[int], busiest: list[dict], failing: list[dict], failures: dict, paused: bool,
          stop: str = "") -> dict:
    return {"node": node, "time": 120, "rate": {"start": 120 - len(pages), "pages": pages}, "busiest": busiest,
            "failing": failing, "failures": failures,
            "control": {"paused": paused, "stop": stop, "inflight": 2, "blocked": ["x.test"] if node else []}}


def _host(host: str, pages: int, errors: int = 0, s5: int = 0) -> dict:
    return {"host": host, "pages": pages, "bytes": 0, "errors": errors, "status_4xx": 0, "status_5xx": s5,
            "reason": "reset" if errors else ""}


def test_cluster_view_merges_nodes_hosts_failures_and_says_who_is_down():
    rows = [NodeStatus("0", "u0", True, pages=10, cache_lookups={"due": [3, 1]}),
            NodeStatus("1", "u1", True, pages=20),
            NodeStatus("2", "u2", False, reason="connection refused")]
    views = {0: _view(0, [1] * 20, [_host("a", 9)], [_host("f", 1, errors=4)], {"reset": 4}, paused=True),
             1: _view(1, [2] * 20, [_host("b", 12), _host("c", 3)], [_host("g", 2, s5=5)],
                      {"reset": 1, "dns_nxdomain": 7}, paused=False)}
    view = cluster_view("test", 0, 120, 20, rows, views, {2: "connection refused"})
    assert [n["id"] for n in view["nodes"]] == [0, 1, 2]
    assert [n["console_error"] for n in view["nodes"]] == ["", "", "connection refused"]
    assert view["nodes"][0]["cache_hit_rates"] == {"due": 0.75}
    assert view["total"]["pages"] == 30 and view["total"]["reason"] == "2/3 up"
    assert view["state"] == "partly paused"
    assert [(h["host"], h["node"]) for h in view["busiest"]] == [("b", 1), ("a", 0), ("c", 1)]
    assert [h["host"] for h in view["failing"]] == ["g", "f"]                # 5 five-hundreds before 4 errors
    assert view["failures"] == {"dns_nxdomain": 7, "reset": 5}
    assert view["blocked"] == ["x.test"]
    assert view["rate"]["total"] == [3.0] * (20 // STEP_S)
    assert set(view["rate"]["nodes"]) == {"0", "1"}


def test_cluster_view_state_words():
    rows = [NodeStatus("0", "u0", True), NodeStatus("1", "u1", True)]
    def state(*views: dict) -> str:
        return cluster_view("t", 0, 120, 20, rows, dict(enumerate(views)), {})["state"]
    assert state(_view(0, [], [], [], {}, True), _view(1, [], [], [], {}, True)) == "paused"
    assert state(_view(0, [], [], [], {}, False), _view(1, [], [], [], {}, False)) == "running"
    assert state(_view(0, [], [], [], {}, False, "done"), _view(1, [], [], [], {}, False, "done")) == "done"
    assert state(_view(0, [], [], [], {}, False, "signal"), _view(1, [], [], [], {}, False, "done")) == "stopping"
    assert cluster_view("t", 0, 120, 20, [NodeStatus("0", "u", False, reason="x")], {}, {0: "x"})["state"] == "down"


def test_the_page_files_are_package_data():
    """Served from the package (importlib.resources) and matched by pyproject's package-data, so a wheel or an
    editable install carries them."""
    static = resources.files("crawler.console").joinpath("static")
    names = sorted(p.name for p in static.iterdir())
    assert names == ["console.css", "console.html", "console.js"]
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = package_data["crawler.console"]
    assert all(any(fnmatch(f"static/{n}", g) for g in globs) for n in names)
    html = static.joinpath("console.html").read_text()
    # Nothing from elsewhere: every src/href is the node's own path or a data: URL.

    refs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert refs and all(r.startswith("/console/") or r.startswith("data:") for r in refs), refs
