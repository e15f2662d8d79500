"""The DUE's manifest: the one file whose atomic replacement commits a merge.

`MANIFEST.json` names everything that is durable: the bucket table of the
on-disk set (which base and delta file each bucket uses), the last merge
committed, the journal segments it consumed, the merges whose new URLs may
not have reached the caller yet (`unreleased`, replayed after a crash), and
the lifetime counters. It is written to a temporary file, fsynced, renamed
over the old one and the directory fsynced: readers see the old or the new
manifest, never a mix.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from crawler.due.diskset import BucketTable
from crawler.fsutil import fsync_dir

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_FORMAT = "crawler-due"
MANIFEST_VERSION = 1


class ManifestError(RuntimeError):
    """The manifest is unreadable or from another format."""


@dataclass
class Release:
    """A committed merge whose journal segments still exist.

    Its new URLs are at `positions` (a file of sorted int64 entry positions in
    its segments). Until the segments are deleted, recovery hands those URLs
    out again, counting them as possible duplicates when `count_duplicates`.
    """
    merge: int
    segments: list[int]
    count_duplicates: bool = True


@dataclass
class Counters:
    """Lifetime counters (as of the last manifest write, plus this session)."""
    checks: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    merges: int = 0
    merge_seconds: float = 0.0
    new: int = 0
    duplicates_emitted: int = 0
    buffer_repeats: int = 0


@dataclass
class Manifest:
    buckets: int
    table: BucketTable
    merge: int = 0                 # last merge committed
    merged_through: int = 0        # journal segments numbered <= this are merged
    unreleased: list[Release] = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)

    def to_json(self) -> dict:
        return {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "buckets": self.buckets,
            "merge": self.merge,
            "merged_through": self.merged_through,
            "unreleased": [asdict(r) for r in self.unreleased],
            "counters": asdict(self.counters),
            "table": self.table.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict, path: Path) -> Manifest:
        if data.get("format") != MANIFEST_FORMAT or data.get("version") != MANIFEST_VERSION:
            raise ManifestError(f"{path}: not a {MANIFEST_FORMAT} manifest of version {MANIFEST_VERSION}")
        try:
            return cls(
                buckets=int(data["buckets"]),
                table=BucketTable.from_json(data["table"]),
                merge=int(data["merge"]),
                merged_through=int(data["merged_through"]),
                unreleased=[Release(int(r["merge"]), [int(s) for s in r["segments"]], bool(r["count_duplicates"]))
                            for r in data["unreleased"]],
                counters=Counters(**data["counters"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{path}: malformed manifest ({exc})") from exc


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest in `directory`, or None if there is none yet."""
    path = Path(directory) / MANIFEST_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from exc
    return Manifest.from_json(data, path)


def write_manifest(directory: Path, manifest: Manifest, durable: bool = True) -> None:
    """Replace the manifest atomically (and durably, unless told not to fsync)."""
    directory = Path(directory)
    tmp = directory / (MANIFEST_NAME + ".tmp")
    data = json.dumps(manifest.to_json(), separators=(",", ":")).encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, directory / MANIFEST_NAME)
    if durable:
        fsync_dir(directory)
