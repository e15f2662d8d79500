"""The atomic replacement every state file goes through: old or new content, never a mix, no leftovers."""

from __future__ import annotations

import pytest

from crawler.fsutil import atomic_file, atomic_write, fsync_dir, tmp_path


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path_factory):
    d = tmp_path_factory.mktemp("a")
    target = d / "state.json"
    atomic_write(target, "old\n")
    atomic_write(target, b"new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in d.iterdir()) == ["state.json"]


def test_a_failing_writer_keeps_the_old_content_and_removes_its_temporary(tmp_path_factory):
    d = tmp_path_factory.mktemp("b")
    target = d / "state.json"
    atomic_write(target, "old\n")
    with pytest.raises(RuntimeError), atomic_file(target, "w", encoding="utf-8") as f:
        f.write("half of the new")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old\n"
    assert not tmp_path(target).exists()


def test_not_durable_still_replaces_and_fsync_dir_accepts_a_directory(tmp_path_factory):
    d = tmp_path_factory.mktemp("c")
    atomic_write(d / "x.bin", b"\x00\x01", durable=False)
    assert (d / "x.bin").read_bytes() == b"\x00\x01"
    fsync_dir(d)
