"""`crawler resize -c NEW --from OLD [--node ID]`: change the node count of a stopped crawl.

With `--node`, this process is that participant (run one on every machine of
both clusters). Without it, every participant whose address is on this
machine runs, each its own process, as `crawler cluster` runs nodes. Each
prints one JSON line of figures; the last line sums them. Exit status 0 when
every participant here finished, 1 otherwise (running the same command again
is safe: see participant.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys

from crawler.config import ConfigError, load

DEFAULT_TIMEOUT_S = 600.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crawler resize", description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--config", required=True, help="the cluster file of the new node count")
    p.add_argument("--from", dest="old", required=True, help="the cluster file the crawl ran with")
    p.add_argument("--node", type=int, default=None,
                   help="which participant this process is (node id, of the new file, or of the old one for a "
                        "node the new file drops); default: every participant on this machine")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"give up when another participant has not answered for S seconds (default "
                        f"{DEFAULT_TIMEOUT_S:.0f})")
    return p


def _run_one(args: argparse.Namespace) -> int:
    from crawler.cli import run_async
    from crawler.resize.participant import Participant, ResizeError
    from crawler.resize.plan import ResizePlan

    plan = ResizePlan.load(load(args.old), load(args.config), args.old, args.config)
    try:
        result = run_async(Participant(plan, args.node, timeout_s=args.timeout).run())
    except ResizeError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


def _run_local(args: argparse.Namespace) -> int:
    from crawler.cluster import is_local_address
    from crawler.resize.plan import ResizePlan

    plan = ResizePlan.load(load(args.old), load(args.config), args.old, args.config)
    local = [n.id for n in plan.nodes() if is_local_address(n.host)]
    if not local:
        raise ConfigError(f"{args.config}: no participant of the resize has an address on this machine")
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
    base = [sys.executable, "-m", "crawler", "--log-level", level, "resize", "-c", args.config, "--from", args.old,
            "--timeout", str(args.timeout)]

    async def run_all() -> list[tuple[int, int, str]]:
        async def one(node: int) -> tuple[int, int, str]:
            proc = await asyncio.create_subprocess_exec(*base, "--node", str(node), stdout=subprocess.PIPE)
            out, _ = await proc.communicate()
            return node, proc.returncode or 0, out.decode()
        return await asyncio.gather(*(one(n) for n in local))

    results = asyncio.run(run_all())
    totals = {"from_nodes": plan.old_nodes, "to_nodes": plan.new_nodes, "participants": len(local),
              "failed": [n for n, rc, _ in results if rc != 0], "moved_hosts": 0, "moved_queued": 0,
              "moved_seen": 0, "moved_transit": 0, "moved_robots": 0}
    for _node, rc, out in sorted(results):
        lines = [line for line in out.splitlines() if line.strip()]
        if rc == 0 and lines:
            print(lines[-1], flush=True)
            row = json.loads(lines[-1])
            for key in ("hosts", "queued", "seen", "transit", "robots"):
                totals[f"moved_{key}"] += row.get(f"sent_{key}", 0)
    print(json.dumps(totals, sort_keys=True), flush=True)
    return 1 if totals["failed"] else 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run_one(args) if args.node is not None else _run_local(args)
    except ConfigError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return 2
