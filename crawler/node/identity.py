"""Which crawl a data_dir holds, and whether this run may resume it.

A node started on a data_dir with an unfinished crawl of the same node of the
same cluster resumes it; `--fresh` removes the earlier crawl's state first
(WARC files and the crawl log stay). Everything else -- another crawl, a
finished one, or state without `state.json` -- is refused with a message that
names the data_dir and says what to do: silently mixing two crawls' frontiers
and DUEs would corrupt both.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from crawler.config import Config, ConfigError
from crawler.fsutil import atomic_write

log = logging.getLogger("crawler.node")

# What a later run resumes; --fresh removes it (WARC files and the crawl log stay).
STATE_DIRS = ("due", "peers", "frontier", "state")
STATE_FILE = "state.json"
CARRIED = ("resized",)        # kept by every later write of state.json: the last node-count change (crawler resize)


class DataDir:
    """One node's data_dir: its identity in `state.json`, the check at start and `--fresh`."""

    def __init__(self, path: Path, config: Config, node_id: int, source: str) -> None:
        self.path = path
        self.node_id = node_id
        self.source = source
        c = config
        self.identity: dict[str, Any] = {"cluster": c.cluster.name, "node": node_id, "nodes": len(c.cluster.nodes),
                                         "partition": c.cluster.partition}
        self.carried: dict[str, Any] = {}

    def check(self, fresh: bool) -> bool:
        """True when this run resumes an earlier one on data_dir; refuses what is not ours to resume."""
        state_path = self.path / STATE_FILE
        found = [d for d in STATE_DIRS if (self.path / d).exists() and any((self.path / d).iterdir())]
        if fresh:
            for d in found:
                shutil.rmtree(self.path / d)
            state_path.unlink(missing_ok=True)
            if found:
                log.warning("node %d: --fresh: removed the earlier crawl's %s under %s", self.node_id,
                            ", ".join(found), self.path)
            return False
        if not found:
            return False
        hint = "Run with --fresh to start over (WARC files and the crawl log are kept), or use another data_dir."
        where = f"{self.source}: crawl.data_dir: {self.path}"
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{where} holds crawl state ({', '.join(found)}) but no {STATE_FILE}: it is not "
                              f"a crawl this version can resume. {hint}") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{where}: {state_path.name} is unreadable ({exc}). {hint}") from None
        mine = self.identity
        theirs = {k: state.get(k) for k in mine}
        if theirs != mine:
            diff = ", ".join(f"{k} {theirs[k]!r} (now {mine[k]!r})" for k in mine if theirs[k] != mine[k])
            if all(theirs[k] == mine[k] for k in ("cluster", "node")):
                hint = ("To go on with the new node count, run `crawler resize -c NEW --from OLD` on every node "
                        "of both files first (docs/operations.md, 'Change the node count'). " + hint)
            raise ConfigError(f"{where} holds another crawl: {diff}. {hint}")
        if state.get("finished"):
            raise ConfigError(f"{where} holds a crawl that finished at {state.get('finished_at', '?')}; "
                              f"there is nothing to resume. {hint}")
        self.carried = {k: state[k] for k in CARRIED if k in state}
        log.warning("node %d: resuming the crawl in %s", self.node_id, self.path)
        return True

    def write_state(self, **extra: object) -> None:
        """`state.json`: the identity and whether the crawl finished; replaced whole and durably."""
        state = dict(self.identity, **self.carried)
        state.update(extra)
        atomic_write(self.path / STATE_FILE, json.dumps(state, sort_keys=True) + "\n")

    def remove_state(self) -> None:
        """Remove a crawl's state again (a start that failed before crawling anything)."""
        for d in STATE_DIRS:
            shutil.rmtree(self.path / d, ignore_errors=True)
