"""PeekLog: what prompt lookups handed out before their merge, in RAM and in its two files."""

from pathlib import Path

import numpy as np

from crawler.due.diskset import DiskSet
from crawler.due.peek import PeekLog


def test_peeked_fingerprints_are_logged_at_the_next_call_and_restored(tmp_path: Path) -> None:
    peeks = PeekLog(tmp_path)
    peeks.early.update([11, 12])
    peeks.pending.extend([11, 12])
    peeks.write_last()
    assert peeks.last_path.exists() and not peeks.log_path.exists()
    peeks.log()
    assert peeks.pending == [] and not peeks.last_path.exists()
    assert peeks.logged().tolist() == [11, 12]
    again = PeekLog(tmp_path)
    disk = DiskSet(tmp_path / "set", buckets=2, delta_ratio=0.5, durable=False)
    try:
        buffered = np.array([12, 99], dtype=np.uint64)                    # 11 was merged meanwhile
        assert again.restore(again.logged(), buffered, disk) == 0
        assert again.early == {12}
    finally:
        disk.close()


def test_the_log_goes_when_nothing_peeked_is_early_any_more(tmp_path: Path) -> None:
    peeks = PeekLog(tmp_path)
    peeks.early.add(5)
    peeks.pending.append(5)
    peeks.log()
    peeks.early.clear()                                                  # its merge took it
    peeks.trim()
    assert not peeks.log_path.exists()
