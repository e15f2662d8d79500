"""What a resize receiver holds while it applies what it was handed, against holding it all.

Stages the records of a move (hosts with their queues, seen URLs) in a
receiver's `resize/` directory as the peer layer would, batches resent and
interleaved, then reads them in two child processes and reports each one's
peak RSS (ru_maxrss) and time:

- baseline: every record materialised at once, as the receiver did before
  (a dict of the records by number, then the hosts with their queues and the
  URL lists built from it);
- staged: `crawler.resize.records.Received`, read as `apply_receiver` reads
  it (the hosts one at a time, then the seen and queued URLs, then the
  transit), holding an index of 8 bytes per record.

    python bench/resize_staging_bench.py --records 2000000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from benchkit import use_installed_crawler

use_installed_crawler()

from crawler.frontier.handoff import HostHandoff  # noqa: E402
from crawler.resize.records import (  # noqa: E402
    QUEUED,
    SEEN,
    SPACE,
    SPACE_IN_TRANSIT,
    TRANSIT,
    Staging,
    host_line,
    queued_line,
    url_line,
)

RUN = "bench"
BATCH = 2000
RESENT = 0.05            # share of batches delivered twice, at a random later point


def stage(directory: Path, records: int, seed: int) -> int:
    """Write about `records` records from one sender; returns the count its DONE names."""
    rng = random.Random(seed)
    staging = Staging(directory, RUN)
    lines: list[str] = []
    pending: list[list[str]] = []
    n = h = 0
    while n < records:
        host = HostHandoff(f"h{h:07d}.example.org", time.time() + 5, "10.0.0.1", [0.01, 0.02, 9, 1])
        h += 1
        lines.append(host_line(RUN, n, host))
        n += 1
        for i in range(rng.randrange(1, 60)):
            lines.append(queued_line(RUN, n, host.name, i, 0.5, f"https://{host.name}/p/{i}/index.html 2 ab cd"))
            n += 1
        for i in range(rng.randrange(0, 30)):
            kind = SEEN if i % 4 else TRANSIT
            lines.append(url_line(RUN, n, kind, f"https://{host.name}/s/{i}.html"))
            n += 1
        while len(lines) >= BATCH:
            batch, lines = lines[:BATCH], lines[BATCH:]
            staging.append(0, batch)
            if rng.random() < RESENT:
                pending.append(batch)
            if pending and rng.random() < 0.2:
                staging.append(0, pending.pop(0))
    if lines:
        staging.append(0, lines)
    for batch in pending:
        staging.append(0, batch)
    assert staging.finish(0, n, None)
    return n


def read_baseline(directory: Path) -> dict:
    """Everything in memory at once: the receiver before the staged reading."""
    records: dict[int, tuple[str, str]] = {}
    with (directory / "from-0.log").open(encoding="utf-8", errors="surrogatepass") as f:
        for line in f:
            run, n, kind, rest = line[:-1].replace(SPACE_IN_TRANSIT, SPACE).split("\t", 3)
            if run == RUN:
                records[int(n)] = (kind, rest)
    hosts: dict[str, HostHandoff] = {}
    seen: list[str] = []
    transit: list[str] = []
    for k in sorted(records):
        kind, rest = records[k]
        if kind == QUEUED:
            name, seq, quality, url = rest.split("\t", 3)
            hosts[name].entries.append((int(seq), float(quality), url))
        elif kind == SEEN:
            seen.append(rest)
        elif kind == TRANSIT:
            transit.append(rest)
        else:
            header = HostHandoff.from_header(json.loads(rest))
            hosts[header.name] = header
    urls = seen + [e[2] for h in hosts.values() for e in h.entries]
    return {"hosts": len(hosts), "queued": sum(len(h.entries) for h in hosts.values()), "seen": len(seen),
            "transit": len(transit), "seen_and_queued": len(urls)}


def read_staged(directory: Path) -> dict:
    """As apply_receiver reads: hosts one at a time, then the URLs, each as a stream."""
    received = Staging(directory, RUN).received([0])
    hosts = queued = 0
    for host in received.hosts():
        hosts += 1
        queued += len(host.entries)
    seen_and_queued = sum(1 for _ in received.urls(SEEN + QUEUED))
    return {"hosts": hosts, "queued": queued, "seen": received.counts[SEEN],
            "transit": sum(1 for _ in received.urls(TRANSIT)), "seen_and_queued": seen_and_queued}


def measure(way: str, directory: Path) -> dict:
    """Run one way in a child process: its result, seconds and peak RSS."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        t0 = time.perf_counter()
        out = (read_baseline if way == "baseline" else read_staged)(directory)
        out["seconds"] = time.perf_counter() - t0
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = json.loads(f.read())
    _, status, usage = os.wait4(pid, 0)
    assert status == 0, status
    out["peak_rss_mib"] = usage.ru_maxrss / 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=2_000_000, help="records staged (default 2,000,000)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; base RSS of this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "resize"
        t0 = time.perf_counter()
        count = stage(directory, args.records, args.seed)
        size = (directory / "from-0.log").stat().st_size
        print(f"staged {count:,} records ({size / 2**20:.0f} MiB on disk, batches resent and interleaved) "
              f"in {time.perf_counter() - t0:.1f} s")
        results = {way: measure(way, directory) for way in ("baseline", "staged")}
    base, staged = results["baseline"], results["staged"]
    assert {k: v for k, v in base.items() if k not in ("seconds", "peak_rss_mib")} == \
        {k: v for k, v in staged.items() if k not in ("seconds", "peak_rss_mib")}, results
    for way, r in results.items():
        print(f"{way:8s}  peak RSS {r['peak_rss_mib']:8.0f} MiB   {r['seconds']:6.1f} s   hosts {r['hosts']:,} "
              f"queued {r['queued']:,} seen {r['seen']:,} transit {r['transit']:,}")
    print(f"staged / baseline: peak RSS {staged['peak_rss_mib'] / base['peak_rss_mib']:.2f}, "
          f"time {staged['seconds'] / base['seconds']:.2f}")


if __name__ == "__main__":
    main()
