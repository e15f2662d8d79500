"""A node whose data_dir fills up stops with a clear error and leaves a state it can resume from.

The data_dir is a small tmpfs the test mounts (root only; skipped with the
reason where mounting is not allowed). After the node has stopped on the
full disk, its data_dir is copied to a roomy place and the node is started
there: it resumes and the crawl completes with every expected page, which
is the proof that nothing on the full disk was left half-written.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from tests.support.configs import one_node_config, write_config
from tests.support.crawls import last_json
from tests.support.processes import run_crawler

from crawler.testweb.audit import compare
from crawler.testweb.process import TestWebProcess

pytestmark = pytest.mark.slow

SMALL_BYTES = 3 << 20          # the crawl writes ~6 MiB (WARC files ~5.3 MiB): it runs out mid-crawl


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-limited tmpfs needs root and mount(8)")
    where = tmp_path / "small"
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_BYTES}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def config(tmp_path, seeds: str, data: str) -> dict:
    return one_node_config(
        data, seeds_file=seeds,
        workers=8,
        fetch={"dns": {"overrides": {"*.web.test": "127.0.0.1"}}},
        # A fetch the full disk cut holds its host for resume_wait_s after the restart (its earned delay is
        # unknown; at the default, politeness.max_delay_s, that is 60 s, as bench/kill_bench.py runs it): not this
        # test's subject.
        frontier={"checkpoint_interval_s": 0.3, "resume_wait_s": 1.0},
        metrics={"progress_interval_s": 0},
    )


def test_full_disk_stops_clearly_and_the_state_resumes(tmp_path, small_disk):
    with TestWebProcess(tmp_path / "web", ["--hosts", "20", "--pages", "1500", "--no-bad-host",
                                           "--no-slow-host"]) as web:
        full = write_config(tmp_path / "full.yaml",
                            config(tmp_path, web.info["seeds"], str(small_disk / "node-{node}")))
        code, out, err = run_crawler(["run", "-c", str(full)], timeout_s=120)
        assert code == 3, (code, err[-3000:])
        summary = last_json(out)
        assert summary["stop"] == "storage_error" and "No space left" in summary["storage_error"]
        assert "cannot write its state" in err and "Traceback" not in err
        roomy = tmp_path / "roomy"
        shutil.copytree(small_disk / "node-0", roomy / "node-0")
        again = write_config(tmp_path / "again.yaml", config(tmp_path, web.info["seeds"], str(roomy / "node-{node}")))
        code, out, err = run_crawler(["run", "-c", str(again)], timeout_s=300)
        assert code == 0, err[-3000:]
        assert "resum" in err
        result = compare(web.requests(), web.manifest())
    assert not result.missing and not result.unexpected and not result.forbidden
