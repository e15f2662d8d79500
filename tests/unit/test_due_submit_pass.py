"""The DUE's submit kernel: the compiled one and its pure-Python twin agree byte for byte."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from tests.support.due import batch, fp_of

import crawler.due.disk as disk_module
from crawler._native import NATIVE
from crawler.cache import make_cache
from crawler.cache.clock import PyClockKernel
from crawler.config.schema import CacheConfig, DueConfig
from crawler.due import front as front_module
from crawler.due import submit_pass
from crawler.due.disk import DiskDUE
from crawler.due.journal import SubmitJournal

compiled = pytest.mark.skipif(not submit_pass.COMPILED, reason="the compiled extension is not built")
WINDOW_BYTES = 1 << 16
POLICIES = [("clock", {}), ("clock-sets", {}), ("lru", {}), ("random", {"seed": 3}),
            ("static", {"preload": np.array([fp_of(i) for i in range(0, 400, 7)], dtype=np.uint64)})]


def batches(seed: int, count: int) -> list[tuple[np.ndarray, list[str]]]:
    """Batches with repeats inside and across calls; sizes from 0 to past the kernel's stack scratch (512)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        size = int(rng.choice([0, 1, 7, 60, 300, 700]))
        out.append(batch(rng.integers(0, 400, size).tolist()))
    return out


class Side:
    """One implementation's state: cache, buffer, URL list, window and append position."""

    def __init__(self, cache, window_bytes: int = WINDOW_BYTES) -> None:
        self.cache = cache
        self.buf = np.zeros(100_000, dtype=np.uint64)
        self.n = 0
        self.urls: list[str] = []
        self.window = bytearray(window_bytes)
        self.pos = 0

    def submit(self, fn, fps: np.ndarray, urls: list[str], window=True) -> tuple[int, int]:
        m, size = fn(self.cache, fps, urls, self.buf, self.n, self.urls, self.window if window else None, self.pos)
        self.n += m
        if size > 0:
            self.pos += size
        return m, size


@compiled
def test_crc32_is_zlibs() -> None:
    rng = np.random.default_rng(1)
    for size in (0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 79, 80, 81, 127, 128, 129, 1000, 4099):  # folding from 64 bytes
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        for start in (0, 1, 0xFFFFFFFF, 0x12345678):
            assert NATIVE.crc32(data, start) == zlib.crc32(data, start)
        assert NATIVE.crc32(data[3:], NATIVE.crc32(data[:3])) == zlib.crc32(data)


@compiled
@pytest.mark.parametrize("policy,options", POLICIES, ids=[p for p, _ in POLICIES])
def test_compiled_and_python_kernels_agree(policy: str, options: dict) -> None:
    native = Side(make_cache(policy, 64, **options))
    python = Side(make_cache(policy, 64, **options))
    for fps, urls in batches(seed=len(policy), count=60):
        assert native.submit(submit_pass.submit, fps, urls) == python.submit(submit_pass.py_submit, fps, urls)
    assert native.n == python.n > 0
    assert (native.buf == python.buf).all()
    assert native.urls == python.urls
    assert native.pos == python.pos
    assert native.window == python.window
    assert (native.cache.hits, native.cache.misses) == (python.cache.hits, python.cache.misses)
    assert sorted(native.cache.keys()) == sorted(python.cache.keys())


@compiled
def test_any_cache_object_works_through_its_batch_call() -> None:
    """A cache the kernel does not know (here the pure-Python CLOCK) is asked through check_and_add_many."""
    native = Side(make_cache("clock", 64))
    other = Side(PyClockKernel(64))
    for fps, urls in batches(seed=9, count=40):
        assert other.submit(submit_pass.submit, fps, urls) == native.submit(submit_pass.submit, fps, urls)
    assert native.window == other.window and native.urls == other.urls


@pytest.mark.parametrize("fn", [pytest.param("submit", marks=compiled), "py_submit"])
def test_fingerprints_in_any_array_form_read_the_same(fn: str) -> None:
    """A plain uint64 array takes the compiled kernel's fast path; a strided view, another
    byte order or dtype, or a list of ints of the same values must give the same answers."""
    submit = getattr(submit_pass, fn)
    fps, urls = batch(list(range(40)) + list(range(20)))          # both ends of the range, repeats
    doubled = np.repeat(fps, 2)
    forms = [fps, doubled[::2], fps.astype(">u8"), fps.view(np.int64), [int(f) for f in fps],
             np.asfortranarray(fps)]
    expect = Side(make_cache("clock", 64))
    want = expect.submit(submit, fps, urls)
    for form in forms:
        side = Side(make_cache("clock", 64))
        assert side.submit(submit, form, urls) == want
        assert side.urls == expect.urls and side.window == expect.window
        assert side.buf[:side.n].tolist() == expect.buf[:expect.n].tolist()
    with pytest.raises((ValueError, TypeError)):
        Side(make_cache("clock", 64)).submit(submit, fps.reshape(6, 10), urls)  # not 1-d


@pytest.mark.parametrize("fn", [pytest.param("submit", marks=compiled), "py_submit"])
def test_records_it_cannot_write_are_left_to_the_journal(fn: str) -> None:
    submit = getattr(submit_pass, fn)
    fps, urls = batch([1, 2, 3])
    for bad in (["http://a.test/x\ny", urls[1], urls[2]],          # a newline: the LENGTHS record
                ["http://a.test/\udc80", urls[1], urls[2]]):       # a lone surrogate
        side = Side(make_cache("clock", 64))
        assert side.submit(submit, fps, bad) == (3, -1)
        assert side.urls == bad and side.n == 3 and not any(side.window)
    side = Side(make_cache("clock", 64), window_bytes=40)            # no room for the record
    assert side.submit(submit, fps, urls) == (3, -1)
    assert side.submit(submit, fps, urls) == (0, 0)                # all hits now: nothing to write
    side = Side(make_cache("clock", 64))
    assert side.submit(submit, fps, urls, window=False) == (3, -1)
    with pytest.raises(ValueError):
        side.submit(submit, fps, urls[:2])
    side.n = len(side.buf) - 1
    with pytest.raises(ValueError):                                 # the caller must make room first
        side.submit(submit, *batch([7, 8]))


def test_kernel_records_are_journal_records(tmp_path: Path) -> None:
    journal = SubmitJournal(tmp_path)
    journal.open_segment(1)
    cache = make_cache("clock", 1 << 10)
    buf = np.zeros(10_000, dtype=np.uint64)
    kept: list[str] = []
    n = 0
    for fps, urls in batches(seed=4, count=30):
        m, size = submit_pass.submit(cache, fps, urls, buf, n, kept, journal.window,
                                journal.active_bytes - journal.window_at)
        if size >= 0:
            journal.advance(size)
        elif m:
            journal.append(buf[n:n + m], kept[n:])
        n += m
    journal.close()
    scan = journal.scan(1)
    assert scan.torn_bytes == 0
    assert scan.urls == kept and (scan.fps == buf[:n]).all()


def make_front(cls, window_bytes: int = WINDOW_BYTES):
    """A front whose calls back into Python say which it was: slow(fps, urls) answers
    None (the front did nothing) and finish(r) answers r (accept's answer)."""
    front = cls(make_cache("clock", 64), np.zeros(4_000, dtype=np.uint64))
    front.window = bytearray(window_bytes)
    front.slow = lambda fps, urls: None
    front.finish = lambda r: r
    return front


def front_state(front) -> tuple:
    return (front.n, front.active_bytes, front.dirty, front.checks, front.buf[:front.n].tolist(),
            list(front.urls), bytes(front.window))


@compiled
@pytest.mark.parametrize("window_bytes", [WINDOW_BYTES, 3_000])
def test_compiled_and_python_fronts_agree(window_bytes: int) -> None:
    """Same answers and the same state, call by call, through look_at, merge_done, fsync_at,
    the hook, pending deliveries, full windows (3,000 bytes) and a buffer without room."""
    fronts = [make_front(front_module.DueFront, window_bytes), make_front(front_module.PyFront, window_bytes)]
    kinds = set()
    for step, (fps, urls) in enumerate(batches(seed=13, count=120)):
        knob = step % 9
        for front in fronts:
            front.look_at = 2_000 if knob != 1 else 0
            front.merge_done = knob == 2
            front.fsync_at = 0.0 if knob == 3 else float("inf")
            front.hooked = knob == 4
            front.attention = knob == 5
            if front.n > 3_200 and knob != 6:               # as if a merge took the buffer
                front.n = 0
        answers = []
        for front in fronts:
            if knob == 7 and len(urls) and front.n + len(urls) <= len(front.buf):
                answers.append(front.accept(fps, urls))
            else:
                answers.append(front.submit(fps, urls))
            if answers[-1].__class__ is tuple:                # Python would journal it; here: skip
                n, m = answers[-1]
                front.n = n + m
                front.window_at = front.active_bytes       # and slide the window
                front.window = bytearray(window_bytes)
        assert answers[0] == answers[1], step
        assert front_state(fronts[0]) == front_state(fronts[1]), step
        kinds.add(type(answers[0]).__name__)
    assert kinds == {"list", "int", "NoneType", "tuple"}         # every answer was exercised


@pytest.mark.parametrize("cls", [pytest.param("DueFront", marks=compiled), "PyFront"])
def test_the_front_hands_back_when_python_must_look(cls: str) -> None:
    front = make_front(getattr(front_module, cls))
    calls = []
    front.slow = lambda fps, urls: calls.append(("slow", list(urls))) or ["from slow"]
    front.finish = lambda r: calls.append(("finish", r)) or ["from finish"]
    fps, urls = batch([1, 2, 3])
    assert front.submit(fps, urls) == [] and front.n == 3 and front.checks == 3 and front.dirty
    assert front.submit(fps, urls) == []                         # all hits: nothing new
    assert calls == []
    front.attention = True
    assert front.submit(*batch([4])) == ["from slow"] and front.n == 3   # URLs to hand out first
    front.attention = False
    assert front.submit(fps, tuple(urls)) == ["from slow"]               # not a list
    assert front.submit(np.array([], dtype=np.uint64), []) == ["from slow"]
    assert calls == [("slow", batch([4])[1]), ("slow", urls), ("slow", [])] and front.checks == 6
    calls.clear()
    front.look_at = 4
    assert front.submit(*batch([4])) == ["from finish"] and front.n == 4  # the buffer reached look_at
    front.look_at = 100
    front.fsync_at = 0.0
    assert front.submit(*batch([5])) == ["from finish"]          # the fsync is due
    assert front.submit(*batch([5])) == []                       # (only when something was written)
    front.fsync_at = float("inf")
    front.merge_done = True
    assert front.submit(*batch([6])) == ["from finish"]
    assert calls == [("finish", 1), ("finish", 1), ("finish", 1)]
    front.merge_done = False
    front.n = len(front.buf)
    calls.clear()
    assert front.submit(*batch([7])) == ["from slow"] and calls == [("slow", batch([7])[1])]  # no room
    with pytest.raises(ValueError):
        front.accept(*batch([7]))
    front.n = 6
    with pytest.raises(ValueError):
        front.submit(fps, urls[:2])
    front.slow = lambda fps, urls: 1 / 0                         # what Python raises comes out
    front.attention = True
    with pytest.raises(ZeroDivisionError):
        front.submit(fps, urls)


@compiled
def test_a_due_on_either_kernel_writes_the_same_files(tmp_path: Path, monkeypatch) -> None:
    config = DueConfig(cache=CacheConfig(policy="clock", size=32), buffer_size=500)
    outs, journals = [], []
    for name, front in (("native", front_module.DueFront), ("python", front_module.PyFront)):
        monkeypatch.setattr(disk_module, "DueFront", front)
        due = DiskDUE(tmp_path / name, config, buckets=4, background=False, durable=False)
        out = []
        for fps, urls in batches(seed=11, count=40):
            out += due.submit(fps, urls)
        due.checkpoint()                          # released segments are deleted in a helper thread
        journals.append(sorted((p.name, p.read_bytes()) for p in (tmp_path / name / "journal").iterdir()))
        out += due.flush()
        outs.append(out)
        due.close()
    assert outs[0] == outs[1] and len(outs[0]) == len(set(outs[0])) > 0
    assert journals[0] == journals[1]


def test_the_due_runs_without_the_extension(tmp_path: Path) -> None:
    """CRAWLER_CACHE_PURE_PYTHON=1: the DUE takes the pure-Python kernel, end to end with a restart."""
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[2]
    script = (
        "import sys; from pathlib import Path\n"
        "from crawler.due import submit_pass\n"
        "from crawler.due.disk import DiskDUE\n"
        "from crawler.config.schema import DueConfig\n"
        "from tests.support.due import batch\n"
        "assert not submit_pass.COMPILED\n"
        "d = Path(sys.argv[1]); c = DueConfig(buffer_size=50)\n"
        "due = DiskDUE(d, c, durable=False); out = due.submit(*batch(list(range(30)) * 2)); due.close()\n"
        "due = DiskDUE(d, c, durable=False)\n"
        "out += due.submit(*batch(list(range(20, 45)))) + due.flush(); due.close()\n"
        "assert len(out) == len(set(out)) == 45, out\n"
    )
    env = {**os.environ, "CRAWLER_CACHE_PURE_PYTHON": "1", "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "due")], env=env, cwd=repo,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
