"""crawler/launcher.py on its own: what a forked node runs, and the refusal to fork with threads.
(The launcher at work, starting, stopping and losing nodes, is tested through `crawler cluster`:
tests/integration/test_cluster.py and tests/faults/test_cluster_supervisor.py.)"""

from __future__ import annotations

import subprocess
import sys

from tests.support.fixtures import REPO

from crawler.launcher import node_argv, node_name, parse_args


def test_a_forked_node_runs_crawler_run_for_its_id():
    assert node_argv("c.yaml", 2, None) == ["run", "-c", "c.yaml", "--node", "2"]
    assert node_argv("c.yaml", 0, 0.0) == ["run", "-c", "c.yaml", "--node", "0", "--progress-interval", "0.0"]
    args = parse_args(["-c", "c.yaml", "--node", "0:7", "--node", "1:9"])
    assert args.node == [(0, 7), (1, 9)] and args.config == "c.yaml"
    assert [node_name(i) for i in (0, 99, 100, 65535)] == ["crawler-node-0", "crawler-node-99", "crawler-n100",
                                                          "crawler-n65535"]


def test_the_launcher_does_not_fork_with_a_thread_running():
    """fork() copies only the calling thread: a lock another thread held stays locked forever
    in the child. The launcher checks before it forks, and says so."""
    code = ("import threading, time, sys\n"
            "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
            "from crawler.launcher import main\n"
            "sys.exit(main(['-c', 'unused.yaml', '--node', '0:1']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 70, proc.stderr
    assert "threads after imports; forking is not safe" in proc.stderr
    assert proc.stdout == ""                   # no "started" line: nothing was forked
