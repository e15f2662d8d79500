"""Which tests scripts/test.sh may run side by side.

A test marked `slow` under tests/integration or tests/faults starts crawls
and servers and checks timing from the servers' logs (politeness gaps,
"no request for 10 s"); it gets the marker `serial`, and scripts/test.sh
runs those after the others. Those of the files in `_PAIRED` also get
`paired`: their checks are event-driven or lower bounds (exactly the
manifest, owners, politeness gaps measured from the server's start stamps),
which another crawl beside them only makes easier to meet, so they run two
at a time (one file per process). The rest bound a duration from above or
measure latencies (limits, back-offs, stalls, the real sites' crawl time,
faults on timers) and run one at a time on a quiet machine. Everything else (the unit and
property tests, slow ones included: CPU-bound, one process, nothing timed
from outside) may run in parallel, and the tests marked `beside` run beside
them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_SERIAL_DIRS = ("integration", "faults")
_PAIRED = frozenset({
    "test_cluster.py", "test_cluster_netns.py", "test_cluster_report.py", "test_cluster_resize.py",
    "test_resize_exchange.py",
    "test_control_cluster.py", "test_crawl_https.py", "test_crawl_policies.py", "test_crawl_scope.py",
    "test_crawl_testweb.py", "test_crawl_tiny_due.py", "test_demo.py", "test_prometheus.py", "test_replay_crawl.py",
    "test_due_crash.py", "test_testweb_https.py", "test_deploy_entrypoint.py", "test_node_kernels.py",
})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None or item.get_closest_marker("beside") is not None:
            continue
        path = Path(str(item.path))
        if path.parent.name in _SERIAL_DIRS:
            item.add_marker(pytest.mark.serial)
            if path.name in _PAIRED:
                item.add_marker(pytest.mark.paired)
