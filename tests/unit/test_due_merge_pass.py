"""The DUE's merge kernels: the compiled ones and their numpy twins agree, array for array and byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tests.support.due import batch

from crawler._native import NATIVE
from crawler.config.schema import CacheConfig, DueConfig
from crawler.due import merge_pass as mk
from crawler.due.disk import DiskDUE
from crawler.due.diskset import CorruptSetError, DiskSet

compiled = pytest.mark.skipif(not mk.COMPILED, reason="the compiled extension is not built")
MASK64 = (1 << 64) - 1
KERNELS = ("sort_unique_into", "find_new", "write_buckets", "fsync_files", "remove_files", "pick")
TWINS = {name: getattr(mk, "py_" + name.removesuffix("_into")) for name in KERNELS}


def fingerprints(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random fingerprints with repeats, both ends of the range, and runs sharing their top bytes."""
    fps = rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False)
    if n > 40:
        fps[rng.integers(0, n, n // 3)] = fps[rng.integers(0, n, n // 3)]
        fps[:5] = [0, MASK64, 0, MASK64, 1]
        fps[5:n // 4] = rng.integers(0, 1 << 12, n // 4 - 5, dtype=np.uint64)   # same top bytes
    return fps


@compiled
@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 256, 1000, 50_000])
def test_sort_unique_agrees(n: int) -> None:
    fps = fingerprints(np.random.default_rng(n), n)
    keys, first = mk.sort_unique(fps)
    twin_keys, twin_first = mk.sort_unique(fps, mk.py_sort_unique)
    assert keys.tolist() == twin_keys.tolist() == sorted(set(fps.tolist()))
    assert first.tolist() == twin_first.tolist()
    earliest = {}
    for i, fp in enumerate(fps.tolist()):
        earliest.setdefault(fp, i)
    assert first.tolist() == [earliest[k] for k in keys.tolist()]


def use(monkeypatch, twins: bool) -> None:
    """Make diskset (and everything else) call the twins, or the compiled kernels."""
    for name in KERNELS:
        monkeypatch.setattr(mk, name, TWINS[name] if twins else getattr(NATIVE, "due_" + name.removesuffix("_into")))


@compiled
@pytest.mark.parametrize("window_entries", [1, 3, 64, 1 << 22])
@pytest.mark.parametrize("delta_ratio", [0.0, 0.125, 2.0])
def test_a_set_grown_by_either_kernel_has_the_same_files(tmp_path: Path, monkeypatch, window_entries: int,
                                                         delta_ratio: float) -> None:
    rng = np.random.default_rng(int(window_entries + 10 * delta_ratio))
    sets = {}
    for twins in (False, True):
        use(monkeypatch, twins)
        sets[twins] = DiskSet(tmp_path / str(twins), buckets=8, delta_ratio=delta_ratio,
                              window_entries=window_entries, durable=True)
    seen: set[int] = set()
    for gen in range(1, 12):
        keys = np.unique(fingerprints(rng, int(rng.choice([0, 1, 40, 400]))))
        budget = int(rng.integers(1, 4)) if gen % 3 else None
        masks = []
        for twins, disk in sets.items():
            use(monkeypatch, twins)
            plan = disk.merge(keys, gen, fold_budget=budget)
            masks.append(plan.new_mask.tolist())
            disk.adopt(plan)
        assert masks[0] == masks[1] == [k not in seen for k in keys.tolist()]
        seen |= set(keys.tolist())
        native, twin = sets[False], sets[True]
        assert native.table.to_json() == twin.table.to_json()
        files = sorted(p.name for p in native.directory.iterdir())
        assert files == sorted(p.name for p in twin.directory.iterdir())
        for name in files:
            assert (native.directory / name).read_bytes() == (twin.directory / name).read_bytes(), name
    probe = np.array(sorted(seen)[::3] + [12345, 0, MASK64], dtype=np.uint64)
    for twins, disk in sets.items():
        use(monkeypatch, twins)
        assert disk.contains(probe).tolist() == [int(p) in seen for p in probe.tolist()]


@pytest.mark.parametrize("twins", [pytest.param(False, marks=compiled), True], ids=["compiled", "twin"])
def test_a_bucket_file_of_the_wrong_size_is_reported(tmp_path: Path, monkeypatch, twins: bool) -> None:
    use(monkeypatch, twins)
    disk = DiskSet(tmp_path, buckets=2, delta_ratio=0.5, durable=False)
    disk.adopt(disk.merge(np.array([1, 2, 3, MASK64], dtype=np.uint64), 1))
    disk.adopt(disk.merge(np.array([4, MASK64 - 1], dtype=np.uint64), 2))
    victim = sorted(disk.directory.iterdir())[0]
    with open(victim, "ab") as f:
        f.write(b"\0" * 8)
    with pytest.raises(CorruptSetError, match=victim.name):
        disk.merge(np.array([5, 6, MASK64 - 2], dtype=np.uint64), 3)
    victim.unlink()
    with pytest.raises(FileNotFoundError) as info:
        disk.merge(np.array([5, 6, MASK64 - 2], dtype=np.uint64), 3)
    assert os.fsdecode(info.value.filename) == str(victim)
    assert sorted(p.name for p in disk.directory.iterdir()) == sorted(disk.table.files() - {victim.name})


@pytest.mark.parametrize("twins", [pytest.param(False, marks=compiled), True], ids=["compiled", "twin"])
def test_fsync_remove_and_pick(tmp_path: Path, monkeypatch, twins: bool) -> None:
    use(monkeypatch, twins)
    paths = []
    for i in range(20):
        (tmp_path / str(i)).write_bytes(b"x" * i)
        paths.append(os.fsencode(tmp_path / str(i)))
    mk.fsync_files(paths, 16)
    mk.fsync_files([], 16)
    with pytest.raises(FileNotFoundError) as info:
        mk.fsync_files(paths[:3] + [os.fsencode(tmp_path / "missing")], 4)
    assert os.fsdecode(info.value.filename).endswith("missing")
    mk.remove_files(paths[:5] + [None, os.fsencode(tmp_path / "missing")])
    assert sorted(int(p.name) for p in tmp_path.iterdir()) == list(range(5, 20))
    with pytest.raises(OSError):
        mk.remove_files([os.fsencode(tmp_path)])                  # a directory
    urls = [f"http://a.test/{i}" for i in range(10)]
    positions = np.array([0, 3, 3, 9], dtype=np.int64)
    assert mk.pick(urls, positions) == [urls[0], urls[3], urls[3], urls[9]]
    assert mk.pick(urls, positions[:0]) == []
    with pytest.raises(IndexError):
        mk.pick(urls, np.array([10], dtype=np.int64))


@compiled
def test_a_due_on_either_merge_kernel_gives_the_same_urls_and_files(tmp_path: Path, monkeypatch) -> None:
    config = DueConfig(cache=CacheConfig(policy="clock", size=16), buffer_size=120)
    rng = np.random.default_rng(8)
    calls = [batch(rng.integers(0, 2000, int(rng.integers(0, 90))).tolist()) for _ in range(60)]
    outs, sets = [], []
    for twins in (False, True):
        use(monkeypatch, twins)
        due = DiskDUE(tmp_path / str(twins), config, buckets=4, delta_ratio=0.25, background=False,
                      window_entries=7, durable=False)
        out = []
        for fps, urls in calls:
            out += due.submit(fps, urls)
        out += due.flush()
        due.close()
        outs.append(out)
        sets.append(sorted((p.name, p.read_bytes()) for p in (tmp_path / str(twins) / "set").iterdir()))
    assert outs[0] == outs[1]
    assert len(outs[0]) == len(set(outs[0])) == len({u for _, urls in calls for u in urls})
    assert sets[0] == sets[1]
