"""`crawler status` against real endpoints: a lingering node, a closed port, a wrong server, a silent one."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

import pytest
from aiohttp import web
from tests.support import crawls
from tests.support.configs import write_config
from tests.support.ports import free_port

from crawler.config import load
from crawler.status import (
    DEFAULT_TIMEOUT_S,
    NodeStatus,
    human_bytes,
    main,
    parse_status,
    read_cluster,
    render_table,
    total_row,
)
from crawler.testweb import WebParams

SHORT_TIMEOUT_S = 0.3                 # where every node is down, or down at once


@pytest.fixture
async def lingering_node(tmp_path):
    """A single node that crawled a small test web and still serves /metrics; yields (node, summary future)."""
    params = WebParams(hosts=6, pages=80, seed=11, crawl_delay_hosts=0.0, bad_host=False, slow_host=False, trap=False)
    async with crawls.lingering_node(tmp_path, params,
                                           config_extra={"politeness": {"delay_factor": 1}}) as lingering:
        yield lingering


@pytest.fixture
async def odd_servers():
    """(port of a server answering 404, port of a server that accepts and never answers)."""
    runner = web.AppRunner(web.Application())            # not a crawler node: 404 on /metrics
    await runner.setup()
    port_404 = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port_404)
    await site.start()
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader, writer):
        accepted.append(writer)

    silent_server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port_silent = silent_server.sockets[0].getsockname()[1]
    try:
        yield port_404, port_silent
    finally:
        for w in accepted:
            w.close()
        silent_server.close()
        await silent_server.wait_closed()
        await runner.cleanup()


def status_config(tmp_path, ports: list[int]):
    """A cluster file whose node i has its /metrics on ports[i] (nothing else of it is used)."""
    return write_config(tmp_path / "status.yaml", {
        "cluster": {"name": "status-test", "nodes": [
            {"id": i, "host": "127.0.0.1", "peer_port": free_port(), "metrics_port": p}
            for i, p in enumerate(ports)]},
        "crawl": {"data_dir": str(tmp_path / "node-{node}")},
    })


async def test_status_reads_a_live_node_and_shows_the_others_as_down(tmp_path, lingering_node, odd_servers):
    node, run = lingering_node
    port_404, port_silent = odd_servers
    closed = free_port()
    path = status_config(tmp_path, [node.metrics_server.port, closed, port_404, port_silent])
    rows = await read_cluster(load(path), DEFAULT_TIMEOUT_S)      # the live node may be slow on a busy machine

    summary = node.summary()
    up = rows[0]
    assert (up.node, up.up) == ("0", True)
    assert up.pages == summary["pages"] > 50
    assert up.status_classes == summary["status"]
    assert up.errors == summary["errors"]
    assert (up.frontier_urls, up.active_hosts) == (0, 0)                  # the crawl is over
    assert round(up.hit_rate("due"), 4) == summary["cache_hit_rates"]["due"]
    assert up.hit_rate("splitter") is None                                # one node: no cross-host lookups
    assert (up.peer_bytes_sent, up.peer_bytes_received) == (0, 0)

    assert [(r.node, r.up, r.reason) for r in rows[1:]] == [
        ("1", False, "connection refused"), ("2", False, "HTTP 404"),
        ("3", False, f"no answer in {DEFAULT_TIMEOUT_S:g} s")]

    total = total_row(rows)
    assert (total.pages, total.reason) == (summary["pages"], "1/4 up")

    # The command itself: a table, and the same figures as JSON; down nodes are not an error.
    path = status_config(tmp_path, [node.metrics_server.port, closed, port_404])
    table_args = ["-c", str(path)]
    code, table = await asyncio.to_thread(_run_main, table_args)
    assert code == 0
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["node", "state", "pages"]
    assert lines[1].split()[:3] == ["0", "up", str(summary["pages"])]
    assert lines[2].split()[:2] == ["1", "down"] and lines[2].endswith("connection refused")
    assert lines[-1].split()[:3] == ["total", "up", str(summary["pages"])] and lines[-1].endswith("1/3 up")
    code, out = await asyncio.to_thread(_run_main, table_args + ["--json"])
    assert code == 0
    data = json.loads(out)
    assert data["nodes"][0]["pages"] == data["total"]["pages"] == summary["pages"]
    assert data["total"]["cache_hit_rates"]["due"] == pytest.approx(summary["cache_hit_rates"]["due"], abs=1e-4)
    assert [n["up"] for n in data["nodes"]] == [True, False, False]


def _run_main(argv: list[str]) -> tuple[int, str]:
    """Call `crawler.status.main` (it runs its own event loop) and capture what it prints."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    return code, buf.getvalue()


def test_status_of_a_cluster_that_is_all_down(tmp_path):
    path = status_config(tmp_path, [free_port(), 0])
    code, out = _run_main(["-c", str(path), "--timeout", str(SHORT_TIMEOUT_S)])
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[:2] == ["0", "down"]
    assert lines[2].split()[:2] == ["1", "down"] and "metrics_port 0" in lines[2]
    assert lines[3].split()[:2] == ["total", "down"] and lines[3].endswith("0/2 up")


def test_status_with_a_bad_config_says_so(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {nodes: [{id: 0, metrics_port: -1}]}\n")
    assert main(["-c", str(bad)]) == 2
    assert "metrics_port" in capsys.readouterr().err


def test_parse_status_and_total_row():
    text = "\n".join([
        '# TYPE crawler_pages_total counter',
        'crawler_pages_total{kind="page",status_class="2xx"} 90.0',
        'crawler_pages_total{kind="page",status_class="4xx"} 10.0',
        'crawler_pages_total{kind="robots",status_class="2xx"} 7.0',
        '# TYPE crawler_fetch_errors_total counter',
        'crawler_fetch_errors_total{reason="dns_nxdomain"} 2.0',
        'crawler_fetch_errors_total{reason="read_timeout"} 1.0',
        '# TYPE crawler_frontier_urls gauge', 'crawler_frontier_urls 12.0',
        '# TYPE crawler_frontier_active_hosts gauge', 'crawler_frontier_active_hosts 3.0',
        '# TYPE crawler_cache_lookups_total counter',
        'crawler_cache_lookups_total{cache="due",result="hit"} 75.0',
        'crawler_cache_lookups_total{cache="due",result="miss"} 25.0',
        'crawler_cache_lookups_total{cache="splitter",result="hit"} 1.0',
        'crawler_cache_lookups_total{cache="splitter",result="miss"} 3.0',
        '# TYPE crawler_peer_bytes_sent_total counter',
        'crawler_peer_bytes_sent_total{peer="1"} 1000.0', 'crawler_peer_bytes_sent_total{peer="2"} 24.0',
        '# TYPE crawler_peer_bytes_received_total counter', 'crawler_peer_bytes_received_total{peer="1"} 2048.0',
        "",
    ])
    row = parse_status("0", "http://x/metrics", text)
    assert (row.pages, row.status_classes, row.errors) == (100, {"2xx": 90, "4xx": 10}, 3)
    assert (row.frontier_urls, row.active_hosts) == (12, 3)
    assert (row.hit_rate("due"), row.hit_rate("splitter")) == (0.75, 0.25)
    assert (row.peer_bytes_sent, row.peer_bytes_received) == (1024, 2048)

    other = NodeStatus(node="1", url="", up=True, pages=50, status_classes={"2xx": 50},
                       cache_lookups={"due": [25, 75]})
    down = NodeStatus(node="2", url="", up=False, reason="connection refused")
    total = total_row([row, other, down])
    assert (total.pages, total.status_classes, total.reason) == (150, {"2xx": 140, "4xx": 10}, "2/3 up")
    assert total.hit_rate("due") == 0.5                          # summed hits over summed lookups
    table = render_table([row, other, down]).splitlines()
    assert table[1].split() == ["0", "up", "100", "90", "0", "10", "0", "3", "12", "3", "75.00%", "25.00%",
                                "1.0", "KiB", "2.0", "KiB"]
    assert table[3].split()[:3] == ["2", "down", "-"] and table[3].endswith("connection refused")
    end = table[0].index("pages") + len("pages")                 # figures right-aligned under their header
    assert table[1][:end].endswith(" 100") and table[2][:end].endswith(" 50") and table[3][:end].endswith(" -")


def test_parse_status_refuses_what_is_not_a_crawler():
    with pytest.raises(ValueError):
        parse_status("0", "http://x/metrics", "# TYPE other_total counter\nother_total 1.0\n")


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 5 * 1024 ** 3)] == ["0 B", "1023 B", "1.0 KiB", "5.0 GiB"]


def test_parse_status_of_a_node_that_has_fetched_nothing_yet():
    """Its counter families are there without samples: up, with zero pages (not down, as it was shown)."""
    row = parse_status("0", "http://x/metrics", "# HELP crawler_pages_total Fetches.\n"
                                                "# TYPE crawler_pages_total counter\n")
    assert row.up and row.pages == 0
