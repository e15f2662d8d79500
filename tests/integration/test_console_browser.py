"""The console in a real browser: headless Chromium (Debian's chromium and chromium-driver) driven by selenium.

One 3-node crawl of the test web and one browser (started once): the console
of node 0 shows the three nodes with the counts their /metrics give; the
token typed in and Pause pressed, the cluster pauses (the page says so,
every node's /control/status says so, the test web's access log has no
request started afterwards for PAUSED_S, the crawl does not end); Resume,
and the crawl completes with every page fetched once. The browser's console
must stay free of errors throughout. A screenshot of the paused console is
kept: under $CRAWLER_TEST_ARTIFACTS when set, else the test's tmp dir (the
path is printed).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from tests.support.configs import NODES, SECRET
from tests.support.crawls import start_test_cluster
from tests.support.processes import find_binary, stop_process, wait_until

from crawler.control import control_token
from crawler.testweb.audit import ROBOTS_PATH
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

ARTIFACTS_ENV = "CRAWLER_TEST_ARTIFACTS"   # where the screenshot goes (CI keeps that directory)
PAUSED_S = 3.0            # no request started this long after the page shows "paused"
PAGE_TIMEOUT_S = 30.0     # the page showing what the test waits for
CRAWL_TIMEOUT_S = 90.0
WEB = ["--hosts", "10", "--pages", "240", "--stall-s", "1", "--no-trap", "--no-slow-host",
       "--crawl-delay-hosts", "0", "--no-bad-host"]
MIN_DELAY_S = 0.1         # the biggest host takes a few seconds: the pause lands mid-crawl
SECRET_VALUE = next(iter(SECRET.values()))


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, once for the module; skips (printing why) without chromium, its driver or selenium."""
    missing = [f"{name} (Debian package {pkg})" for name, pkg in (("chromium", "chromium"),
                                                                   ("chromedriver", "chromium-driver"))
               if find_binary(name) is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip, the test extra)")
    if missing:
        reason = f"not installed: {', '.join(missing)}; scripts/test.sh installs them"
        print(reason)
        pytest.skip(reason)
    options = Options()
    options.binary_location = find_binary("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1600", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=find_binary("chromedriver")), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def artifacts_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get(ARTIFACTS_ENV) or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def control_status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/control/status", timeout=5) as resp:
        return json.loads(resp.read())


def metrics_pages(port: int) -> int:
    """A node's pages as `crawler status` counts them (the crawl totals of kind page)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("crawler_crawl_pages{") and 'kind="page"' in line)


def page_nodes(driver) -> dict[int, tuple[str, int]]:
    """node id -> (state, pages) as the page's node table shows them (read in one script: the page redraws
    the table at every poll, which would leave element handles stale)."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#nodes tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))")
    return {int(cells[0].split()[0]): (cells[1], int(cells[2].replace(",", ""))) for cells in rows}


def shown(driver, selector: str) -> int:
    """How many elements match `selector` now."""
    return driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector)


class BrowserLog:
    """Everything the browser's console said (selenium hands each entry over once)."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.entries: list[dict] = []

    def errors(self) -> list[dict]:
        self.entries += self.driver.get_log("browser")
        return [e for e in self.entries if e["level"] == "SEVERE"]


def test_console_shows_the_cluster_and_pauses_it(tmp_path, browser):
    log = BrowserLog(browser)
    with TestWebProcess(tmp_path / "web", WEB) as web:
        manifest = web.manifest()
        _, metrics, proc = start_test_cluster(tmp_path, web.info["seeds"], politeness={"min_delay_s": MIN_DELAY_S})
        try:
            def serving() -> bool:
                try:
                    control_status(metrics[0])
                    return True
                except OSError:
                    return proc.poll() is not None
            wait_until(serving, PAGE_TIMEOUT_S, "node 0's metrics port")
            assert proc.poll() is None, (tmp_path / "cluster.err").read_text()[-3000:]
            browser.get(f"http://127.0.0.1:{metrics[0]}/")

            # The three nodes, each with pages.
            wait_until(lambda: len(nodes := page_nodes(browser)) == NODES and all(p > 0 for _, p in nodes.values()),
                       PAGE_TIMEOUT_S, "the page's node table: three nodes with pages", poll_s=0.2)

            # The token typed in, Pause pressed: the page, the nodes and the access log agree.
            browser.find_element("id", "token").send_keys(control_token(SECRET_VALUE.encode()))
            browser.find_element("id", "use-token").click()
            browser.find_element("id", "pause").click()
            wait_until(lambda: browser.find_element("id", "state").text == "paused", PAGE_TIMEOUT_S,
                       "the page to show the cluster paused", poll_s=0.05)
            t_shown = time.time()
            assert all(control_status(p)["paused"] for p in metrics)
            # Paused, the counts stand still: the page shows each node's pages as its /metrics counts them.
            wait_until(lambda: {i: p for i, (_, p) in page_nodes(browser).items()} ==
                       {i: metrics_pages(p) for i, p in enumerate(metrics)}, PAGE_TIMEOUT_S,
                       "the page's counts to equal /metrics", poll_s=0.2)
            assert all(state == "paused" for state, _ in page_nodes(browser).values())
            assert shown(browser, "#busiest tbody tr") > 0 and shown(browser, "#failures tbody tr") > 0
            assert shown(browser, "#chart polyline.total") == 1
            time.sleep(max(0.0, t_shown + PAUSED_S - time.time()))
            late = [r for r in web.requests() if r.start >= t_shown]
            assert late == [], late[:5]
            assert proc.poll() is None, "the crawl ended while paused"
            shot = artifacts_dir(tmp_path) / "console-paused.png"
            browser.save_screenshot(str(shot))
            print(f"console screenshot: {shot}")
            assert log.errors() == []

            # Resume: the crawl goes on and completes.
            browser.find_element("id", "resume").click()
            wait_until(lambda: browser.find_element("id", "state").text != "paused", PAGE_TIMEOUT_S,
                       "the page to show the cluster resumed", poll_s=0.05)
            assert "node 2: ok" in browser.find_element("id", "answer").text
            assert log.errors() == []
            browser.get("about:blank")          # the nodes leave when done: the page would report them gone
            out_text, _ = proc.communicate(timeout=CRAWL_TIMEOUT_S)
            assert proc.returncode == 0, (tmp_path / "cluster.err").read_text()[-3000:]
        finally:
            stop_process(proc)
        requests = web.requests()

    assert log.errors() == []
    summary = [json.loads(line) for line in out_text.decode().splitlines() if line.startswith("{")][-1]
    assert summary["stop"] == ["done"]
    pages = Counter((r.host, r.path) for r in requests if r.path != ROBOTS_PATH)
    assert [k for k, n in pages.items() if n > 1] == []
    wanted = {(u.split("/")[2].split(":")[0], "/" + u.split("/", 3)[3]) for u in manifest.fetched}
    assert wanted - set(pages) == set()
