"""A URL's lineage survives wherever the URL waits: the frontier's RAM queues, spill segments and checkpoint,
and the DUE's journaled buffer across a crash (crawler/urls/lineage.py)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config.schema import CacheConfig, DueConfig, FrontierConfig
from crawler.due.disk import DiskDUE
from crawler.frontier import Frontier
from crawler.urls import fingerprints
from crawler.urls.lineage import Lineage, split, tag

lineages = st.builds(Lineage, st.integers(0, 1000), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))


@settings(max_examples=10, deadline=None)
@given(st.lists(lineages, min_size=1, max_size=60))
def test_lineage_survives_the_frontier_spill_and_checkpoint(tmp_path_factory, items):
    """Model: a dict URL -> lineage. After spilling (tiny RAM budget), a checkpoint and a restart, every URL
    comes back once with its lineage."""
    directory = tmp_path_factory.mktemp("frontier")
    config = FrontierConfig(memory_urls=8, chunk_urls=4, resume_wait_s=0.0)
    model = {f"http://h{i % 3}.test/{i}": lin for i, lin in enumerate(items)}

    async def run() -> dict[str, Lineage]:
        f = Frontier(config, workers=1, directory=directory)
        f.add_many([(tag(url, *lin), url.split("/")[2], 0.0) for url, lin in model.items()])
        spilled = f.stats()["spilled_urls"]
        f.checkpoint()
        f.shutdown()
        again = Frontier(config, workers=1, directory=directory)
        got = {}
        for _ in range(len(model)):
            host, item = await asyncio.wait_for(again.get(), 2)
            url, lin = split(item)
            assert url not in got
            got[url] = lin
            again.release(host, 0.0)
        again.shutdown()
        assert spilled > 0 or len(model) <= 8
        return got

    assert asyncio.run(run()) == model


def test_lineage_survives_the_due_journal_across_a_crash(tmp_path):
    """URLs buffered (journaled, not merged) when the process dies come out of the restarted DUE tagged as
    they went in."""
    config = DueConfig(cache=CacheConfig(policy="clock", size=4), buffer_size=1000)
    due = DiskDUE(tmp_path, config, background=False)
    urls = [f"http://a.test/{i}" for i in range(20)]
    items = [tag(u, i % 4, 0xFEED, 0xBEEF + i) for i, u in enumerate(urls)]
    assert due.submit(fingerprints(urls), items) == []        # buffered and journaled
    del due                                                    # a crash: no close, no merge
    again = DiskDUE(tmp_path, config, background=False)
    assert again.flush() == items
    assert [split(i)[1] for i in items] == [Lineage(i % 4, 0xFEED, 0xBEEF + i) for i in range(20)]
    again.close()
