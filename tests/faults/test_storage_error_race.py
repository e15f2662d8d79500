"""The loss behind the full-disk test's rare misses, made deterministic.

The DUE hands a merge's new URLs to the node and releases the merge (deletes
its journal segments) at its next call: by then the frontier has recorded
them. When the frontier's journal cannot record them (the disk is full), no
later call may release them. The node's watch loop made one: it starts the
periodic checkpoint as a task, then in the same tick takes a merge's URLs
(`poll`) and queues them; when that queueing hit the full disk, the task
ran next and the DUE's checkpoint released the merge. After the restart
those URLs were nowhere: not in the frontier (its journal failed), not in
the DUE (released, and on disk as seen). The pages only they lead to were
never fetched, which is what the full-disk test saw about one run in four:
the trap's chain is where a page has one way in. (In a cluster, a submit
after the splitter's await was another such call.)

Now the node holds the DUE at its first storage error (`DiskDUE.hold`):
nothing is released any more and every call raises. The fault is injected
where it happened: the frontier's journal writes to /dev/full, the kernel's
own "no space left on device".
"""

from __future__ import annotations

import asyncio
import os

import pytest
from tests.support.configs import one_node_config

from crawler.config import from_dict
from crawler.due.disk import DiskDUE
from crawler.node import Node
from crawler.state import save_all
from crawler.urls import fingerprints


def config(tmp_path):
    return from_dict(one_node_config(tmp_path / "node-{node}", metrics={"progress_interval_s": 0}))


async def test_urls_the_frontier_failed_to_record_are_handed_out_again_after_the_restart(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full to fail a write with ENOSPC")
    c = config(tmp_path)
    node = Node(c, 0)
    urls = [f"http://h{i}.test/page" for i in range(5)]
    node.due.submit(fingerprints(urls), urls)
    handed = node.due.flush()                       # a merge's new URLs, released at the DUE's next call
    assert sorted(handed) == sorted(urls)

    journal = node.frontier._journal
    real_fd, journal._fd = journal._fd, os.open("/dev/full", os.O_WRONLY)
    try:
        saving = asyncio.create_task(save_all(node.parts, node.state))    # the periodic checkpoint, started
        node.enqueue(handed)                        # same tick: the frontier cannot record them
        assert node.storage_error and "No space left" in node.storage_error
        try:
            await saving                            # the DUE's checkpoint comes first in it
        except OSError as exc:
            refused = exc                           # held: it refuses, a storage error like any other
        else:
            refused = None
    finally:
        os.close(real_fd)

    # A crash now: a new DUE on the same directory, as the restarted node would open it.
    again = DiskDUE(tmp_path / "node-0" / "due", c.due)
    try:
        assert sorted(again.flush()) == sorted(urls)
        assert again.stats()["duplicates_emitted"] == len(urls)     # the node may have had them: counted
        assert refused is not None and "held after a storage error" in str(refused)
        with pytest.raises(OSError, match="held"):
            node.due.submit(fingerprints(["http://late.test/"]), ["http://late.test/"])
    finally:
        again.close()
        node.due.close()                            # held: closes without writing anything
        node.frontier.shutdown()
