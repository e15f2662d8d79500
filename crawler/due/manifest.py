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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from crawler.due.diskset import BucketTable
from crawler.fsutil import atomic_write

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
class DueCounters:
    """The DUE's lifetime counters (as of the last manifest write, plus this session)."""
    checks: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    merges: int = 0
    merge_seconds: float = 0.0
    new: int = 0
    duplicates_emitted: int = 0
    buffer_repeats: int = 0


@dataclass
class DueManifest:
    """The DUE's committed state, as MANIFEST.json holds it."""
    buckets: int
    table: BucketTable
    merge: int = 0                 # last merge committed
    merged_through: int = 0        # journal segments numbered <= this are merged
    unreleased: list[Release] = field(default_factory=list)
    counters: DueCounters = field(default_factory=DueCounters)

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
    def from_json(cls, data: dict, path: Path) -> DueManifest:
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
                counters=DueCounters(**data["counters"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{path}: malformed manifest ({exc})") from exc


def read_manifest(directory: Path) -> DueManifest | None:
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
    return DueManifest.from_json(data, path)


def write_manifest(directory: Path, manifest: DueManifest, durable: bool = True) -> None:
    """Replace the manifest atomically (and durably, unless told not to fsync)."""
    data = json.dumps(manifest.to_json(), separators=(",", ":"))
    atomic_write(Path(directory) / MANIFEST_NAME, data, durable=durable)
