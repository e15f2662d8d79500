"""The DUE's release markers: where a committed merge's new URLs are until the caller has them."""

from pathlib import Path

import numpy as np

from crawler.due.release import POSITION_DTYPE, ReleaseMarkers


def test_a_marker_is_written_rewritten_atomically_and_swept(tmp_path: Path) -> None:
    markers = ReleaseMarkers(tmp_path / "release", durable=True)
    markers.write(3, np.array([1, 5, 9], dtype=POSITION_DTYPE))
    markers.write(4, np.array([2], dtype=POSITION_DTYPE))
    assert markers.read(3).tolist() == [1, 5, 9]
    markers.write(3, np.array([5], dtype=POSITION_DTYPE), atomic=True)
    assert markers.read(3).tolist() == [5]
    (tmp_path / "release" / "m00000007.pos.tmp").write_bytes(b"torn")    # a crash mid-rewrite
    markers.keep_only([3])
    assert sorted(p.name for p in (tmp_path / "release").iterdir()) == [markers.path(3).name]
    markers.remove(3)
    markers.remove(3)                                                    # gone already: fine
    assert list((tmp_path / "release").iterdir()) == []
