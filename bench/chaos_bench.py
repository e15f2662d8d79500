"""The long chaos run: N seeds in a row of a 3-node cluster under kills, partitions, a lossy link and a full disk.

Each seed builds its own stage (network namespaces, tmpfs disks, a test web
of 90 hosts / 2,700 pages) and crawls it while its seeded schedule injects,
at random moments: 3 kills (SIGKILL, restart after 0-30 s), 2 partitions of
20 s between two running nodes, 20 s of 5% loss and 50 ms delay on one
node's link, one node's disk filled (it stops, exit 3) and freed (restarted).
What is injected, how, and how a run is judged: tests/faults/chaos_support.py.
Per seed one line (kills survived, partitions, lossy links, disk fills,
re-fetches against their bound, PASS/FAIL), then a summary line and JSON.
Needs root (namespaces, iptables, tmpfs); the short run for CI is
tests/faults/test_chaos.py.

    python bench/chaos_bench.py [--seeds 10] [--first-seed 1] [--keep DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchkit import add_kernels_option, check_kernels, use_installed_crawler

use_installed_crawler()

from tests.faults import chaos_support as chaos  # noqa: E402  (after the path is set)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds in a row (default 10)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="keep each seed's logs and data under this folder")
    parser.add_argument("--quiet", action="store_true", help="no line per injected fault")
    add_kernels_option(parser)
    args = parser.parse_args()
    check_kernels(args)
    cannot = chaos.unavailable()
    if "all" in cannot:
        print(f"cannot run: {cannot['all']}")
        return 2
    for kind, why in cannot.items():
        print(f"left out: {kind}: {why}")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    plan = chaos.LONG_PLAN
    print(f"plan: {plan}", flush=True)
    outcomes = []
    started = time.monotonic()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        tmp = Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-", dir=args.keep))
        outcome = chaos.run_seed(tmp, seed, plan, log=(lambda _: None) if args.quiet else print)
        outcomes.append(outcome)
        print(outcome.line(), flush=True)
        if outcome.ok and args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
        elif not outcome.ok:
            print(f"  logs kept in {tmp}", flush=True)
    passed = sum(o.ok for o in outcomes)
    total = {k: sum(o.injected[k] for o in outcomes) for k in chaos.KINDS}
    summary = {
        "seeds": len(outcomes), "passed": passed, "kills": total["kill"],
        "kills_survived": sum(o.kills_survived for o in outcomes), "partitions": total["partition"],
        "lossy_links": total["lossy"], "disk_fills": total["disk_fill"],
        "disk_fill_stops": sum(o.full_stops for o in outcomes), "refetches": sum(o.refetches for o in outcomes),
        "refetch_bound": sum(o.bound for o in outcomes), "skipped": sum(len(o.skipped) for o in outcomes),
        "wall_s": round(time.monotonic() - started),
    }
    print(f"summary: {passed} of {len(outcomes)} seeds passed; kills survived {summary['kills_survived']}/"
          f"{summary['kills']}, partitions {summary['partitions']}, lossy links {summary['lossy_links']}, disk "
          f"fills {summary['disk_fills']} (stopped their node {summary['disk_fill_stops']}); re-fetches "
          f"{summary['refetches']} (bound {summary['refetch_bound']}); {summary['wall_s']} s")
    print(json.dumps(summary))
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
