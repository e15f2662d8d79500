"""DiskDUE: front cache, journaled buffer, bucketed merges, restart."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tests.support.due import MASK64, batch, url_of

from crawler.config.schema import CacheConfig, DueConfig
from crawler.due.disk import DiskDUE
from crawler.due.diskset import DiskSet
from crawler.due.journal import SEGMENT_MAGIC, SubmitJournal
from crawler.due.manifest import read_manifest

REQUIRED_STATS = ("checks", "cache_hits", "cache_misses", "buffer", "disk_fingerprints", "disk_bytes",
                  "merges", "merge_seconds", "new", "duplicates_emitted")


def config(buffer_size: int = 8, cache_size: int = 4) -> DueConfig:
    return DueConfig(cache=CacheConfig(policy="clock", size=cache_size), buffer_size=buffer_size)


def submit(due: DiskDUE, ids: list[int]) -> list[str]:
    return due.submit(*batch(ids))


@pytest.fixture(params=[False, True], ids=["sync", "background"])
def background(request) -> bool:
    return request.param


def test_new_urls_come_out_once(tmp_path: Path, background: bool) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=5), buckets=4, background=background)
    out = []
    rng = np.random.default_rng(7)
    for _ in range(60):
        out += submit(due, rng.integers(0, 50, 9).tolist())
    out += due.flush()
    seen = {url_of(i) for i in range(50)}
    assert sorted(out) == sorted(set(out))
    assert set(out) <= seen
    assert due.pending == 0
    assert due.stats()["new"] == len(out) == due.stats()["disk_fingerprints"]
    due.close()


def test_merge_at_buffer_size_releases_in_the_same_call(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=4), background=False)
    assert submit(due, [10, 11, 12]) == []
    assert due.pending == 3
    assert submit(due, [13]) == [url_of(i) for i in (10, 11, 12, 13)]
    assert due.pending == 0
    assert submit(due, [10, 14]) == []        # 10 is a cache hit; 14 waits in the buffer
    assert due.flush() == [url_of(14)]
    due.close()


def test_emission_keeps_arrival_order(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=False)
    ids = [30, 5, 17, 5, 99, 30, 2, 64]
    submit(due, ids)
    assert due.flush() == [url_of(i) for i in dict.fromkeys(ids)]
    due.close()


def test_repeats_inside_the_buffer_are_caught(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=1000, cache_size=1), background=False)
    for _ in range(3):
        submit(due, [1, 2, 3, 4, 5, 6])
    out = due.flush()
    assert sorted(out) == sorted(url_of(i) for i in range(1, 7))
    stats = due.stats()
    assert stats["buffer_repeats"] > 0
    assert stats["cache_misses"] > 6        # the 1-entry cache let repeats through to the buffer
    due.close()


def test_background_merge_results_arrive_later_or_at_flush(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=4), background=True)
    out = submit(due, [20, 21])              # half the buffer: a background merge starts
    out += submit(due, [22])
    out += due.flush()
    assert sorted(out) == sorted(url_of(i) for i in (20, 21, 22))
    assert due.pending == 0
    due.close()


def test_start_merge_does_not_wait_and_poll_collects(tmp_path: Path, background: bool) -> None:
    """The node's early merge: started without blocking, collected by a later poll (bounded wait)."""
    due = DiskDUE(tmp_path, config(buffer_size=100), background=background)
    submit(due, [1, 2])
    assert due.flush() == [url_of(1), url_of(2)]
    assert not due.start_merge()                 # nothing buffered
    submit(due, [2, 3, 4, 3])
    assert due.start_merge()
    assert due.merging == background             # without a thread it ran in the call
    assert not due.start_merge()                 # the buffer went to that merge
    out = submit(due, [5])                       # the buffer fills again meanwhile (and a finished
                                                 # merge's URLs may come out here)
    for _ in range(500):
        out += due.poll()
        if not due.merging:
            break
        time.sleep(0.01)
    assert not due.merging
    assert out == [url_of(3), url_of(4)]
    assert due.pending == 1
    assert due.flush() == [url_of(5)]
    assert due.poll() == []
    due.close()


def test_peek_hands_out_a_submits_new_urls_at_once_and_the_merge_not_again(tmp_path: Path, background: bool) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=background)
    submit(due, [1, 2, 3])
    assert due.flush() == [url_of(i) for i in (1, 2, 3)]                # 1..3 on disk now
    start = due.buffered
    # With a 1-entry cache each of these misses it: all four are buffered.
    assert submit(due, [2, 4, 5, 4]) == [] and due.buffered == start + 4
    assert due.peek(start) == [url_of(4), url_of(5)]                   # 2 is on disk; 4 once, in arrival order
    assert due.peek(start) == []                                        # handed out already
    assert due.pending == 4                                             # still to be written to disk
    assert due.flush() == []                                            # the merge does not hand them out again
    assert due.stats()["peeked"] == 2 and due.stats()["new"] == 5 and due.pending == 0
    start = due.buffered
    submit(due, [4, 6])                                                 # 4: on disk now (the cache may miss it)
    assert due.peek(start) == [url_of(6)]
    due.close()


def test_peek_during_a_background_merge_of_the_same_url_hands_it_out_once(tmp_path: Path) -> None:
    """A URL buffered earlier is being merged when a later page finds it again (the cache forgot it) and
    peeks: one of the two hands it out, never both."""
    due = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=True)
    submit(due, [7, 1])                          # 7 buffered; the 1-entry cache keeps only 1
    assert due.start_merge()                     # 7 is in the running merge
    start = due.buffered
    submit(due, [7])                             # a cache miss again
    out = due.peek(start) + due.flush()
    assert sorted(out) == sorted([url_of(7), url_of(1)])
    due.close()


def test_peeked_urls_are_not_handed_out_again_after_a_crash(tmp_path: Path) -> None:
    """The peek log: once the caller has the peeked URLs (the next call into the DUE), a crash before their
    merge does not hand them out again; a crash before that call may, and loses nothing either way."""
    due = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=False)
    start = due.buffered
    submit(due, [1, 2])
    assert due.peek(start) == [url_of(1), url_of(2)]
    assert due.poll() == []                              # the next call: the caller has them, they are logged
    start = due.buffered
    submit(due, [3])
    assert due.peek(start) == [url_of(3)]                # a crash comes before any further call
    del due
    again = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=False)
    assert again.pending == 3                            # all three are still to be written to disk
    assert again.stats()["duplicates_emitted"] == 1      # 3 may have been queued: its second hand-out counts
    assert again.flush() == [url_of(3)]                  # 1 and 2 were logged: not again; 3 was not: again
    again.close()
    assert DiskDUE(tmp_path, config(), background=False).stats()["duplicates_emitted"] == 1   # counted once
    assert not (tmp_path / "peeked.u64").exists()        # nothing early any more: the log is gone
    third = DiskDUE(tmp_path, config(buffer_size=100, cache_size=1), background=False)
    assert third.pending == 0 and submit(third, [1, 2, 3]) == [] and third.flush() == []
    third.close()


def test_a_url_peeked_while_its_merge_ran_is_not_handed_out_again_after_a_crash(tmp_path: Path) -> None:
    """The merge committed with 7 among its new URLs while a peek handed 7 out; the crash comes before the
    merge is collected. The restart replays the merge's URLs without 7 (the peek log names it)."""
    committed, crash_taken = threading.Event(), threading.Event()

    def hook(point: str) -> None:
        if point == "merge:committed":
            committed.set()
            assert crash_taken.wait(30)

    live = tmp_path / "live"
    due = DiskDUE(live, config(buffer_size=100, cache_size=1), background=True, fault_hook=hook)
    submit(due, [7, 1])
    assert due.start_merge()
    assert committed.wait(30)
    start = due.buffered
    submit(due, [7])                             # the cache forgot 7; the disk set (old table) has not got it
    assert due.peek(start) == [url_of(7)]
    due.checkpoint()                             # a later call: the caller has 7, the peek log names it
    image = tmp_path / "image"
    shutil.copytree(live, image)                 # the directory as a SIGKILL would leave it
    crash_taken.set()
    due.close()
    again = DiskDUE(image, config(buffer_size=100, cache_size=1), background=False)
    assert again.flush() == [url_of(1)]
    assert again.stats()["duplicates_emitted"] == 1   # the replayed merge's URL 1: the caller may have had it
    again.close()


def test_stats_has_the_metrics(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(), buckets=2)
    submit(due, [1, 2, 2, 3])
    due.flush()
    stats = due.stats()
    for key in REQUIRED_STATS:
        assert key in stats, key
    assert stats["checks"] == 4
    assert stats["cache_hits"] + stats["cache_misses"] == 4
    assert stats["disk_fingerprints"] == 3
    assert stats["disk_bytes"] == 3 * 8
    assert stats["merges"] == 1
    due.close()


def test_restart_restores_the_buffer_and_the_set(tmp_path: Path, background: bool) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100), background=background)
    submit(due, [1, 2, 3])
    assert due.flush() and due.pending == 0
    submit(due, [3, 4, 5])                   # 3 is old; 4 and 5 stay buffered
    due.close()
    again = DiskDUE(tmp_path, config(buffer_size=100), background=background)
    assert again.pending == 2
    assert submit(again, [1, 2]) == []       # known from disk, not from the (empty) cache
    assert sorted(again.flush()) == [url_of(4), url_of(5)]
    stats = again.stats()
    assert stats["disk_fingerprints"] == 5 and stats["duplicates_emitted"] == 0
    again.close()


def test_results_not_handed_out_before_close_come_out_after_restart(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=4), background=True)
    submit(due, [7, 8])                      # starts a background merge
    due.close()                              # waits for it; its URLs were never returned
    again = DiskDUE(tmp_path, config(buffer_size=4), background=True)
    assert again.pending == 2
    assert sorted(again.flush()) == [url_of(7), url_of(8)]
    assert again.stats()["duplicates_emitted"] == 0
    again.close()


def test_a_crash_after_a_merge_hands_its_urls_out_again_and_counts_them(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    submit(due, [1, 2, 3])
    first = due.flush()
    # A crash here: the caller may or may not have kept `first`; no further call was made.
    del due
    again = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    assert again.pending == 3
    assert again.flush() == first
    assert again.stats()["duplicates_emitted"] == 3
    assert submit(again, [4]) == [] and again.flush() == [url_of(4)]
    again.close()
    third = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    assert third.pending == 0                # released by the call after the hand-out
    third.close()


def test_unusual_urls_survive_the_journal(tmp_path: Path) -> None:
    urls = ["http://a.test/x\ny", "http://b.test/\u00e9\u4e2d", "http://c.test/\r\t", "http://d.test/\udcff"]
    fps = np.array([11, 12, 13, 14], dtype=np.uint64)
    due = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    due.submit(fps, urls)
    due.close()
    again = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    assert again.flush() == urls
    again.close()


def test_a_torn_journal_tail_is_cut_off(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    submit(due, [1, 2])
    submit(due, [3])
    due.close()
    journal = SubmitJournal(tmp_path / "journal")
    seq = journal.existing()[-1]
    path = journal.path(seq)
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x44\x55\x4a\x4c" + b"\x05\x00\x00\x00" + b"garbage")   # a record cut short
    again = DiskDUE(tmp_path, config(buffer_size=100), background=False)
    assert again.pending == 3
    assert path.stat().st_size == whole
    assert sorted(again.flush()) == sorted(url_of(i) for i in (1, 2, 3))
    again.close()


def test_a_corrupt_record_ends_the_valid_journal(tmp_path: Path) -> None:
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    journal.append(np.array([1, 2], dtype=np.uint64), ["http://a/", "http://b/"])
    good = journal.active_bytes
    journal.append(np.array([3], dtype=np.uint64), ["http://c/"])
    journal.close()
    data = bytearray(journal.path(1).read_bytes())
    data[-3] ^= 0xFF                              # flip a byte of the last URL
    journal.path(1).write_bytes(bytes(data))
    scan = journal.scan(1)
    assert scan.fps.tolist() == [1, 2] and scan.urls == ["http://a/", "http://b/"]
    assert scan.valid_bytes == good and scan.torn_bytes > 0
    assert journal.path(1).read_bytes().startswith(SEGMENT_MAGIC)


def test_a_mapped_journal_window_takes_writes_without_page_faults(tmp_path: Path) -> None:
    """The window's first write per page would fault on the hot path (a shared file
    mapping starts write-protected); MADV_POPULATE_WRITE takes those faults when the
    window is mapped. Counted from the process's minor faults, not timed."""
    import resource

    from crawler.due import journal as journal_module
    if journal_module._POPULATE_WRITE is None:
        pytest.skip("the compiled kernel is not built (CRAWLER_CACHE_PURE_PYTHON or no compiler)")
    probe_fd = os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT, 0o644)
    try:                                 # asked on a scratch mapping: asking on the window would populate it
        probe = journal_module._reserve_and_map(probe_fd, 0, 4096)[1]
        supported = journal_module._POPULATE_WRITE(probe)
        probe.close()
    finally:
        os.close(probe_fd)
    if not supported:
        pytest.skip("this kernel or file system refuses MADV_POPULATE_WRITE")
    path = tmp_path / "segment"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        window = journal_module._reserve_and_map(fd, 0, 1 << 20)[1]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for offset in range(0, len(window), 4096):
            window[offset] = 1
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        window.close()
    finally:
        os.close(fd)
    assert faults < 16, f"{faults} page faults writing 256 pages of a mapped window"
    assert path.read_bytes()[::4096] == b"\x01" * 256


def test_journal_reads_selected_positions(tmp_path: Path) -> None:
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    urls = [f"http://x.test/{i}" for i in range(100)]
    for start in range(0, 60, 7):
        part = urls[start:min(start + 7, 60)]
        journal.append(np.arange(start, start + len(part), dtype=np.uint64), part)
    journal.open_segment(2)
    journal.append(np.arange(60, 100, dtype=np.uint64), urls[60:])
    journal.close()
    want = np.array([0, 6, 7, 8, 59, 60, 99])
    assert journal.read_urls([1, 2], want) == [urls[i] for i in want]
    assert journal.read_urls([1, 2], np.arange(100)) == urls


@pytest.mark.parametrize("delta_ratio", [0.0, 0.125, 4.0])
def test_disk_set_matches_a_model(tmp_path: Path, delta_ratio: float) -> None:
    rng = np.random.default_rng(3)
    disk = DiskSet(tmp_path, buckets=4, delta_ratio=delta_ratio, window_entries=5)
    model: set[int] = set()
    edges = np.array([0, 1, (1 << 62) - 1, 1 << 62, (1 << 63) + 5, MASK64], dtype=np.uint64)
    for gen in range(1, 15):
        keys = np.unique(np.concatenate([rng.integers(0, 1 << 64, 20, dtype=np.uint64, endpoint=False),
                                         edges[rng.random(len(edges)) < 0.3]]))
        plan = disk.merge(keys, gen)
        expect = np.array([int(k) not in model for k in keys], dtype=bool)
        assert (plan.new_mask == expect).all()
        disk.adopt(plan)
        model |= {int(k) for k in keys}
        assert disk.count == len(model)
    probe = np.array(sorted(model) + [12345], dtype=np.uint64)
    assert disk.contains(probe).tolist() == [True] * len(model) + [12345 in model]
    names = {p.name for p in tmp_path.iterdir()}
    assert names == disk.table.files()                 # replaced files were deleted
    if delta_ratio == 0:
        assert not any(name.endswith(".delta") for name in names)
    else:
        for path in tmp_path.iterdir():                   # every file sorted, no repeats
            data = np.fromfile(path, dtype=np.uint64)
            assert (np.diff(data.astype(np.float64)) >= 0).all() and len(np.unique(data)) == len(data)


def test_unreferenced_set_files_are_swept_on_restart(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100), buckets=2, background=False)
    submit(due, [1, 2, 3])
    due.flush()
    due.close()
    stray = tmp_path / "set" / "b0000.g000000ff.base"
    stray.write_bytes(b"\0" * 8)
    again = DiskDUE(tmp_path, config(buffer_size=100), buckets=2, background=False)
    assert not stray.exists()
    assert again.stats()["disk_fingerprints"] == 3
    again.close()


def test_the_bucket_count_on_disk_wins(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(), buckets=8)
    submit(due, [1, 2])
    due.flush()
    due.close()
    again = DiskDUE(tmp_path, config(), buckets=64)
    assert again.stats()["buckets"] == 8
    assert submit(again, [1, 2]) == [] and again.flush() == []
    again.close()
    assert read_manifest(tmp_path).buckets == 8


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        DiskDUE(tmp_path / "a", config(), buckets=3)
    due = DiskDUE(tmp_path / "b", config())
    with pytest.raises(ValueError):
        due.submit(np.array([1, 2], dtype=np.uint64), ["http://x/"])
    with pytest.raises(ValueError):
        due.submit(np.array([1], dtype=np.uint64), [])
    assert due.submit(np.array([], dtype=np.uint64), []) == []
    # A rejected batch left nothing behind: not in the cache, the buffer or the journal.
    assert due.stats()["checks"] == 0
    due.submit(np.array([1], dtype=np.uint64), ["http://x/"])
    assert due.flush() == ["http://x/"]
    due.close()


def test_submit_after_close_raises_and_an_abandoned_due_is_collected(tmp_path: Path) -> None:
    """submit is bound to the front, which calls back into the DUE: a cycle that
    close() breaks and the garbage collector collects when close() was never called."""
    import gc
    import weakref
    due = DiskDUE(tmp_path / "a", config(), background=False)
    assert submit(due, [1, 2]) == []
    due.close()
    with pytest.raises(RuntimeError, match="closed"):
        submit(due, [3])
    abandoned = DiskDUE(tmp_path / "b", config(), background=False)
    assert submit(abandoned, [1, 2]) == []
    ref = weakref.ref(abandoned)
    del abandoned
    gc.collect()
    assert ref() is None


def test_checkpoint_makes_the_journal_durable(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=100), journal_fsync_s=None)
    submit(due, [1, 2])
    assert due._journal.dirty
    due.checkpoint()
    assert not due._journal.dirty
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.counters.checks == 2
    due.close()


def test_a_failed_merge_gives_its_input_back(tmp_path: Path) -> None:
    class Boom(Exception):
        pass

    armed = {"on": True}

    def hook(point: str) -> None:
        if point == "merge:written" and armed["on"]:
            raise Boom

    due = DiskDUE(tmp_path, config(buffer_size=100), background=False, fault_hook=hook)
    submit(due, [1, 2, 3])
    with pytest.raises(Boom):
        due.flush()
    assert due.pending == 3
    assert not any(p.name.endswith(".base") for p in (tmp_path / "set").iterdir())
    armed["on"] = False
    assert sorted(due.flush()) == sorted(url_of(i) for i in (1, 2, 3))
    due.close()


def test_ram_holds_only_the_buffer(tmp_path: Path) -> None:
    due = DiskDUE(tmp_path, config(buffer_size=64, cache_size=8), buckets=4, background=False)
    for start in range(0, 5000, 50):
        submit(due, list(range(start, start + 50)))
    due.flush()
    assert due.stats()["disk_fingerprints"] == 5000
    assert len(due._urls) == 0 and len(due._buf) <= 64 + 1024 + 50
    assert os.path.getsize(tmp_path / "MANIFEST.json") < 4096
    due.close()


@pytest.mark.parametrize("ahead", [False, True], ids=["mapped-here", "mapped-ahead"])
@pytest.mark.parametrize("how", ["window-full", "slow-record"])
def test_a_failed_journal_write_forgets_the_cache(tmp_path: Path, monkeypatch, how: str, ahead: bool) -> None:
    """The journal fails where it can: reserving the next window (a full disk;
    here, or in the mapper thread that prepares it), or in its own append
    (the records the kernel leaves to it)."""
    import crawler.due.journal as journal_module
    monkeypatch.setattr(journal_module, "WINDOW_BYTES", 1 << 13 if ahead else 1 << 12)
    monkeypatch.setattr(journal_module, "NEXT_OVERLAP_BYTES", 1 << 12 if ahead else 1 << 20)
    due = DiskDUE(tmp_path, config(buffer_size=1000, cache_size=512), background=False)
    ids = list(range(2, 402 if ahead else 202))   # ~12 / 6 KB of record: more than the 8 / 4 KiB window
    fps, urls = batch(ids)
    if how == "slow-record":
        ids, fps, urls = ids[:2], fps[:2], [urls[0] + "\nnewline", urls[1]]

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    target = (journal_module, "_reserve") if how == "window-full" else (due._journal, "append")
    real = getattr(*target)
    monkeypatch.setattr(*target, full_disk)
    with pytest.raises(OSError):
        due.submit(fps, urls)
    assert due.pending == 0 and due._urls == []
    monkeypatch.setattr(*target, real)
    due.submit(fps, urls)                    # not cache hits: the URLs were never accepted
    assert sorted(due.flush()) == sorted(urls)
    due.close()


def test_a_window_the_mapper_thread_could_not_prepare_is_mapped_here(tmp_path: Path, monkeypatch) -> None:
    """A full disk in the mapper thread: the slide maps the window itself, and fails the append if the disk is
    still full."""
    import crawler.due.journal as journal_module
    monkeypatch.setattr(journal_module, "WINDOW_BYTES", 1 << 13)
    monkeypatch.setattr(journal_module, "NEXT_OVERLAP_BYTES", 1 << 12)
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    real = journal_module._reserve

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal_module, "_reserve", full_disk)
    journal._drop_next()
    journal._prepare_next()                       # fails in the mapper thread
    fps, urls = batch(list(range(2, 402)))        # ~12 KB: does not fit in the first window
    with pytest.raises(OSError):
        journal.append(fps, urls)
    monkeypatch.setattr(journal_module, "_reserve", real)
    journal.append(fps, urls)
    journal.append(fps[:3], urls[:3])
    journal.shutdown()
    assert journal.scan(1).urls == urls + urls[:3]


@pytest.mark.parametrize("overlap", [1 << 20, 1 << 13], ids=["mapped-here", "mapped-ahead"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "abandoned"])
def test_journal_windows_slide_over_a_long_segment(tmp_path: Path, monkeypatch, closed: bool, overlap: int) -> None:
    """Records cross window ends; with a small overlap the next window is the one the
    mapper thread prepared (a record that does not fit in it is mapped here)."""
    import crawler.due.journal as journal_module
    monkeypatch.setattr(journal_module, "WINDOW_BYTES", 1 << 16)
    monkeypatch.setattr(journal_module, "NEXT_OVERLAP_BYTES", overlap)
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    rng = np.random.default_rng(5)
    fps_all, urls_all = [], []
    for k in range(300):
        n = 3000 if k == 150 else int(rng.integers(1, 40))      # one record larger than a window
        fps = rng.integers(0, 1 << 63, n, dtype=np.uint64)
        urls = [f"http://w{k}.test/{i}" for i in range(n)]
        journal.append(fps, urls)
        fps_all.append(fps)
        urls_all += urls
    if closed:
        journal.close()
    else:
        journal.fsync_active()             # a crash: the mapping is left as it is, reserve and all
    scan = journal.scan(1)
    assert scan.urls == urls_all
    assert (scan.fps == np.concatenate(fps_all)).all()
    assert journal.read_urls([1], np.array([0, 5000, len(urls_all) - 1])) == \
        [urls_all[0], urls_all[5000], urls_all[-1]]
    if closed:
        assert scan.torn_bytes == 0


def test_tunables_come_from_the_config_unless_given(tmp_path: Path) -> None:
    c = DueConfig(cache=CacheConfig(policy="clock", size=4), buffer_size=8, buckets=8, delta_ratio=0.5,
                  background=False, journal_fsync_s=None, window_entries=1000)
    due = DiskDUE(tmp_path / "a", c, durable=False)
    assert due.stats()["buckets"] == 8 and not due.background and due._journal_fsync_s is None
    assert due._set.window_entries == 1000 and due._set.delta_ratio == 0.5
    due.close()
    due = DiskDUE(tmp_path / "b", c, buckets=4, background=True, durable=False)   # arguments win
    assert due.stats()["buckets"] == 4 and due.background
    due.close()


def test_journal_append_after_a_failed_segment_open_raises_oserror(tmp_path, monkeypatch):
    """A full disk while opening the next segment must keep failing as OSError (the node stops on
    it), never as a TypeError from the missing mapping."""
    import errno

    import numpy as np

    from crawler.due import journal as jm

    j = jm.SubmitJournal(tmp_path / "journal", False)
    j.open_segment(1)

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jm, "_reserve", full)
    with pytest.raises(OSError):
        j.open_segment(2)
    with pytest.raises(OSError) as info:
        j.append(np.array([1], dtype=np.uint64), ["http://a.test/"])
    assert info.value.errno == errno.ENOSPC


def test_a_segment_after_a_small_one_starts_small_and_its_windows_grow(tmp_path: Path) -> None:
    """Early merges rotate segments of a few KB: the next segment starts with a small
    window (less to reserve, fault in and cut back), and its windows grow fourfold
    up to WINDOW_BYTES as it fills; every record reads back."""
    import crawler.due.journal as journal_module
    small, full = journal_module.SMALL_WINDOW_BYTES, journal_module.WINDOW_BYTES
    assert journal_module.first_window_bytes(None) == small
    assert journal_module.first_window_bytes(2_000) == small
    assert journal_module.first_window_bytes(small) == 2 * small
    assert journal_module.first_window_bytes(50 * full) == full
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    assert len(journal.window) == small                 # nothing known yet
    fps, urls = batch(list(range(2, 30)))
    journal.append(fps, urls)
    journal.open_segment(2)
    assert len(journal.window) == small
    # The mapper thread reserves the next window (4x, overlapping half of this one) while
    # appends begin; wait for it, or the file's size depends on the thread's timing.
    journal.settle()
    assert (tmp_path / "j00000002.log").stat().st_size == small // 2 + 4 * small
    rng = np.random.default_rng(9)
    lengths, written, kept = [], 0, []
    while written < 3 * full:
        n = int(rng.integers(50, 400))
        fps = rng.integers(0, 1 << 63, n, dtype=np.uint64)
        urls = [f"http://grow.test/{written}/{i}" for i in range(n)]
        journal.append(fps, urls)
        kept += urls
        written = journal.active_bytes
        if not lengths or lengths[-1] != len(journal.window):
            lengths.append(len(journal.window))
    journal.shutdown()
    assert lengths[:4] == [small, 4 * small, 16 * small, min(full, 64 * small)]
    assert lengths[-1] == full and lengths == sorted(lengths)
    assert journal.scan(2).urls == kept
    assert journal.scan(1).urls == batch(list(range(2, 30)))[1]
    assert (tmp_path / "j00000002.log").stat().st_size == written     # cut back to its records
