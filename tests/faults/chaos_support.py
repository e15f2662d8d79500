"""Chaos for a 3-node cluster in its own network namespaces: a seeded schedule of faults, judged from outside.

Used by tests/faults/test_chaos.py (a short run) and bench/chaos_bench.py
(the long run, several seeds in a row). The same seed gives the same
schedule (kinds, moments, victims drawn in order, durations).

The stage (tests/integration/netns.py): a bridge in its own namespace, the
test web in one namespace, each node in another, each node's data_dir on a
tmpfs of its own (so its disk can be filled without touching anyone else's).
Faults, at random moments of the crawl:

- kill: SIGKILL a random running node, start it again after `down_s` (uniform).
- partition: cut the link between two running nodes for `partition_s`: in
  each one's namespace, iptables drops what it sends to the other (the
  test web stays reachable from both).
- lossy: one node's link loses 5% of what it sends and delays the rest by
  50 ms, for `lossy_s`. This kernel has no sch_netem, so not `tc netem`:
  `iptables -m statistic --mode random --probability 0.05 -j DROP` for the
  loss and `-j NFQUEUE` to tests/faults/nfqdelay.py (holds every packet
  50 ms, then accepts it) for the delay, both on the node's egress.
- disk_fill: fill a running node's tmpfs (a file written until ENOSPC).
  The node stops by design (exit 3, stop "storage_error"); the file is
  removed and the node started again, a restart judged like a kill.

Judged from outside when every node has ended (`Outcome.problems`): every
node's last process exited 0; every page of the manifest fetched, nothing
unexpected or forbidden; every request from the address of its host's owner;
no politeness shortfall in the server's log (no two requests to a host at
once, none closer than politeness.min_delay_s or the host's Crawl-delay);
page re-fetches at most what the nodes reported in flight or done but
unconfirmed when they resumed, plus what their DUEs counted as emitted twice.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration import netns
from tests.support.configs import write_config
from tests.support.fixtures import REPO
from tests.support.processes import crawler_env

from crawler.splitter import Partitioner
from crawler.testweb.audit import ROBOTS_PATH, compare, overlaps, politeness_shortfalls
from crawler.testweb.process import TestWebProcess

NODES = 3
KINDS = ("kill", "partition", "lossy", "disk_fill")
PEER_PORT, METRICS_PORT, WEB_PORT = 7400, 9400, 8080
SECRET_ENV = {"CRAWLER_CHAOS_SECRET": "chaos-test-secret-0123456789"}
LOSS_SHARE = 0.05
DELAY_MS = 50
DISK_BYTES = 64 << 20            # each node's tmpfs: room for its whole crawl many times over
FILL_CHUNK_BYTES = 1 << 20
TICK_S = 0.1
STOP_WAIT_S = 10.0
RESUMED = re.compile(r"resumed: .* (\d+) fetches were in flight, (\d+) done but unconfirmed")


@dataclass(frozen=True)
class Plan:
    """How much chaos, how long each fault lasts, and the web it happens to."""

    kills: int = 1
    partitions: int = 1
    lossy: int = 1
    disk_fills: int = 1
    window_s: tuple[float, float] = (3.0, 25.0)      # faults start at uniform moments in here (s after start)
    down_s: tuple[float, float] = (0.0, 30.0)        # a killed node is started again after this
    partition_s: float = 20.0
    lossy_s: float = 20.0
    fill_hold_s: float = 15.0        # most wait for a filled node to stop before the space is freed anyway
    full_down_s: tuple[float, float] = (0.5, 3.0)    # a node stopped by a full disk: freed, restarted after this
    hosts: int = 30
    pages: int = 600
    min_delay_s: float = 0.4         # politeness: paces the crawl (the largest host's pages x this) so the
                                     # faults find it running
    workers: int = 16
    limit_s: float = 300.0           # the whole run, faults and crawl, must end within this


CI_PLAN = Plan(kills=2, window_s=(3.0, 22.0), down_s=(0.0, 5.0), partition_s=6.0, lossy_s=8.0,
               fill_hold_s=8.0, hosts=30, pages=600, limit_s=150.0)
"""A short run (~60 s; its largest host has 89 pages): every kind of fault, shorter outages than the long run."""
LONG_PLAN = Plan(kills=3, partitions=2, lossy=1, disk_fills=1, window_s=(5.0, 70.0), down_s=(0.0, 30.0),
                 partition_s=20.0, lossy_s=20.0, fill_hold_s=15.0, hosts=90, pages=2700, limit_s=600.0)
"""The issue's figures: kills down 0-30 s, partitions of 20 s, 5% loss and 50 ms for 20 s."""


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str


def schedule(seed: int, plan: Plan) -> list[Fault]:
    """The faults of one run in time order (victims are drawn when each fires, from the same rng)."""
    rng = random.Random(seed)
    counts = {"kill": plan.kills, "partition": plan.partitions, "lossy": plan.lossy, "disk_fill": plan.disk_fills}
    faults = [Fault(round(rng.uniform(*plan.window_s), 2), kind) for kind in KINDS for _ in range(counts[kind])]
    return sorted(faults, key=lambda f: f.at_s)


def unavailable() -> dict[str, str]:
    """Kind of fault (or "all") -> why it cannot be injected here; empty when everything can."""
    reason = netns.available()
    if reason:
        return {"all": reason}
    out = {}
    if shutil.which("iptables") is None:
        for kind in ("partition", "lossy"):
            out[kind] = "iptables(8) is not installed (Debian package iptables)"
    elif subprocess.run(["iptables", "-L", "-n"], capture_output=True).returncode != 0:
        for kind in ("partition", "lossy"):
            out[kind] = "iptables cannot read its tables (no nf_tables/x_tables in this kernel)"
    if shutil.which("mount") is None:
        out["disk_fill"] = "mount(8) is missing: cannot give a node a small tmpfs"
    return out


@dataclass
class Outcome:
    seed: int
    injected: dict[str, int]          # faults really injected, by kind
    skipped: list[str]                # faults not injected, each with why
    kills_survived: int
    full_stops: int                   # disk fills that stopped their node (each then restarted)
    codes: dict[int, int | None]
    refetches: int
    bound: int
    problems: list[str]
    wall_s: float
    events: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        return (f"seed {self.seed}: {'PASS' if self.ok else 'FAIL'} in {self.wall_s:.0f} s; "
                f"kills survived {self.kills_survived}/{self.injected['kill']}, partitions "
                f"{self.injected['partition']}, lossy links {self.injected['lossy']}, disk fills "
                f"{self.injected['disk_fill']} (stopped their node {self.full_stops}); re-fetches "
                f"{self.refetches} (bound {self.bound})" + (f"; skipped {self.skipped}" if self.skipped else "")
                + (f"; PROBLEMS {self.problems}" if self.problems else ""))


@dataclass
class NodeSlot:
    """One node: its namespace, address, current process and what the schedule has done to it."""

    index: int
    ns: str
    addr: str
    disk: Path
    proc: subprocess.Popen | None = None
    state: str = "running"            # running | down | full | done | failed
    started: float = 0.0
    restarts: int = 0
    restart_at: float = 0.0
    restart_why: str = ""
    filled_until: float = 0.0


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


class ChaosRun:
    """One seeded run: build the stage, crawl under the schedule, tear down, judge. Use `run()`."""

    def __init__(self, tmp: Path, seed: int, plan: Plan, log=print) -> None:
        self.tmp, self.seed, self.plan, self.log = Path(tmp), seed, plan, log
        self.rng = random.Random(seed * 7919 + 1)        # victims and durations; the moments are `schedule`'s
        self.cannot = unavailable()
        self.injected = dict.fromkeys(KINDS, 0)
        self.skipped: list[str] = []
        self.events: list[str] = []
        self.killed: list[int] = []           # victims of the kills, in order
        self.full_stops = 0
        self.pending: list[tuple[float, str, tuple]] = []   # (when, action, args): ends of faults
        self.delayers: dict[int, subprocess.Popen] = {}
        self.partitions: set[tuple[int, int]] = set()
        self.mounts: list[Path] = []
        self.switch: netns.Switch | None = None
        self.slots: list[NodeSlot] = []
        self.t0 = 0.0

    # --- the stage --------------------------------------------------------------------------------

    def _mount(self, where: Path) -> None:
        where.mkdir(parents=True, exist_ok=True)
        _run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(where)])
        self.mounts.append(where)

    def _config(self, seeds: str, web_addr: str) -> Path:
        p = self.plan
        return write_config(self.tmp / "crawl.yaml", {
            "cluster": {"name": "chaos", "secret_env": next(iter(SECRET_ENV)), "nodes": [
                {"id": s.index, "host": s.addr, "peer_port": PEER_PORT, "metrics_port": METRICS_PORT,
                 "source_address": s.addr} for s in self.slots]},
            "crawl": {"seeds_file": seeds, "data_dir": str(self.tmp / "disk-{node}" / "data")},
            "workers": p.workers,
            "fetch": {"dns": {"overrides": {"*.web.test": web_addr}}, "read_timeout_s": 5, "total_timeout_s": 20},
            "politeness": {"min_delay_s": p.min_delay_s},
            # resume_wait_s >= min_delay_s: a restarted node keeps the gap to a host it was fetching when killed.
            "frontier": {"checkpoint_interval_s": 0.5, "resume_wait_s": p.min_delay_s + 0.5,
                         "confirm_interval_s": 0.2},
            "peers": {"spill_after_s": 0.5},
            "splitter": {"batch_ms": 50},
            "metrics": {"bind": "0.0.0.0", "progress_interval_s": 0},
        })

    def _start(self, slot: NodeSlot) -> None:
        env = crawler_env(SECRET_ENV)
        with (self.tmp / f"node-{slot.index}.stdout").open("ab") as out, \
                (self.tmp / f"node-{slot.index}.stderr").open("ab") as err:
            slot.proc = subprocess.Popen(["ip", "netns", "exec", slot.ns, sys.executable, "-m", "crawler", "run",
                                          "-c", str(self.config), "--node", str(slot.index)],
                                         stdout=out, stderr=err, env=env)
        slot.state, slot.started = "running", time.monotonic()

    def resumed(self, i: int) -> list[tuple[int, int]]:
        path = self.tmp / f"node-{i}.stderr"
        return [tuple(map(int, m)) for m in RESUMED.findall(path.read_text())] if path.exists() else []

    def _iptables(self, slot: NodeSlot, *rule: str) -> None:
        _run(["ip", "netns", "exec", slot.ns, "iptables", "-w", *rule])

    # --- faults -----------------------------------------------------------------------------------

    def _live(self) -> list[NodeSlot]:
        """Nodes running a crawl (a restarted one once it has said it resumed)."""
        return [s for s in self.slots if s.state == "running" and s.proc.poll() is None
                and time.monotonic() - s.started > 1.0 and len(self.resumed(s.index)) >= s.restarts]

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:6.1f}s {text}"
        self.events.append(line)
        self.log(f"  [seed {self.seed}] {line}")

    def _fire(self, kind: str) -> bool:
        """Inject one fault now; False when no node is in a state to take it yet."""
        live = self._live()
        now = time.monotonic()
        if kind == "kill":
            if not live:
                return False
            slot = self.rng.choice(live)
            slot.proc.send_signal(signal.SIGKILL)
            slot.proc.wait(STOP_WAIT_S)
            slot.state, slot.restart_at = "down", now + self.rng.uniform(*self.plan.down_s)
            slot.restart_why = "after kill"
            self.killed.append(slot.index)
            self._note(f"kill node {slot.index}; restart in {slot.restart_at - now:.1f} s")
        elif kind == "partition":
            pairs = [(a.index, b.index) for a in live for b in live if a.index < b.index
                     and (a.index, b.index) not in self.partitions]
            if not pairs:
                return False
            a, b = self.rng.choice(pairs)
            self._iptables(self.slots[a], "-I", "OUTPUT", "-d", self.slots[b].addr, "-j", "DROP")
            self._iptables(self.slots[b], "-I", "OUTPUT", "-d", self.slots[a].addr, "-j", "DROP")
            self.partitions.add((a, b))
            self.pending.append((now + self.plan.partition_s, "heal", (a, b)))
            self._note(f"partition nodes {a} and {b} for {self.plan.partition_s:.0f} s")
        elif kind == "lossy":
            free = [s for s in live if s.index not in self.delayers]
            if not free:
                return False
            slot = self.rng.choice(free)
            self._make_lossy(slot)
            self.pending.append((now + self.plan.lossy_s, "clear", (slot.index,)))
            self._note(f"node {slot.index}: {LOSS_SHARE:.0%} loss, {DELAY_MS} ms delay for {self.plan.lossy_s:.0f} s")
        elif kind == "disk_fill":
            if not live:
                return False
            slot = self.rng.choice(live)
            written = self._fill(slot)
            slot.state, slot.filled_until = "full", now + self.plan.fill_hold_s
            self._note(f"fill node {slot.index}'s disk ({written >> 20} MiB written)")
        self.injected[kind] += 1
        return True

    def _make_lossy(self, slot: NodeSlot) -> None:
        queue = slot.index + 1
        dev = f"eth-n{slot.index}"
        proc = subprocess.Popen(["ip", "netns", "exec", slot.ns, sys.executable, "-m", "tests.faults.nfqdelay",
                                 "--queue", str(queue), "--delay-ms", str(DELAY_MS)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=(self.tmp / "nfqdelay.stderr").open("ab"), text=True)
        self.delayers[slot.index] = proc
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"nfqdelay did not start; see {self.tmp / 'nfqdelay.stderr'}")
        self._iptables(slot, "-A", "OUTPUT", "-o", dev, "-m", "statistic", "--mode", "random",
                       "--probability", str(LOSS_SHARE), "-j", "DROP")
        self._iptables(slot, "-A", "OUTPUT", "-o", dev, "-j", "NFQUEUE", "--queue-num", str(queue),
                       "--queue-bypass")

    def _clear_lossy(self, i: int) -> None:
        slot, dev = self.slots[i], f"eth-n{i}"
        self._iptables(slot, "-D", "OUTPUT", "-o", dev, "-m", "statistic", "--mode", "random",
                       "--probability", str(LOSS_SHARE), "-j", "DROP")
        self._iptables(slot, "-D", "OUTPUT", "-o", dev, "-j", "NFQUEUE", "--queue-num", str(i + 1),
                       "--queue-bypass")
        proc = self.delayers.pop(i)
        proc.terminate()
        proc.wait(STOP_WAIT_S)
        proc.stdout.close()

    def _heal(self, a: int, b: int) -> None:
        self._iptables(self.slots[a], "-D", "OUTPUT", "-d", self.slots[b].addr, "-j", "DROP")
        self._iptables(self.slots[b], "-D", "OUTPUT", "-d", self.slots[a].addr, "-j", "DROP")
        self.partitions.discard((a, b))

    def _fill(self, slot: NodeSlot) -> int:
        """Write a file on the node's tmpfs until it is full; the bytes written."""
        written = 0
        chunk = b"\0" * FILL_CHUNK_BYTES
        with (slot.disk / "filler").open("wb", buffering=0) as f:
            try:
                while written < DISK_BYTES * 2:
                    written += f.write(chunk)
            except OSError:
                pass
        return written

    def _free(self, slot: NodeSlot) -> None:
        (slot.disk / "filler").unlink(missing_ok=True)

    # --- the run ----------------------------------------------------------------------------------

    def _step(self, now: float) -> None:
        """Ends of faults that are due, restarts that are due, and nodes that ended."""
        for item in sorted(p for p in self.pending if p[0] <= now):
            self.pending.remove(item)
            _, action, args = item
            if action == "heal":
                self._heal(*args)
                self._note(f"heal nodes {args[0]} and {args[1]}")
            elif action == "clear":
                self._clear_lossy(*args)
                self._note(f"node {args[0]}: link clean again")
        for slot in self.slots:
            code = slot.proc.poll()
            if slot.state == "down" and now >= slot.restart_at:
                slot.restarts += 1
                self._start(slot)
                self._note(f"restart node {slot.index} ({slot.restart_why})")
            elif slot.state == "full":
                if code is None and now < slot.filled_until:
                    continue
                self._free(slot)
                if code == 3:
                    self.full_stops += 1
                    slot.state, slot.restart_at = "down", now + self.rng.uniform(*self.plan.full_down_s)
                    slot.restart_why = "after its disk was freed"
                    self._note(f"node {slot.index} stopped on its full disk (exit 3); freed, restart in "
                               f"{slot.restart_at - now:.1f} s")
                elif code is None:
                    slot.state = "running"
                    self._note(f"node {slot.index} did not stop on its full disk in "
                               f"{self.plan.fill_hold_s:.0f} s; freed")
                else:
                    slot.state = "done" if code == 0 else "failed"
                    self._note(f"node {slot.index} exited {code} while its disk was full; freed")
            elif slot.state == "running" and code is not None:
                slot.state = "done" if code == 0 else "failed"
                self._note(f"node {slot.index} exited {code}")

    def _crawl(self) -> None:
        faults = schedule(self.seed, self.plan)
        self.log(f"  [seed {self.seed}] schedule: " + ", ".join(f"{f.kind}@{f.at_s:.1f}s" for f in faults))
        for f in faults:
            if f.kind in self.cannot:
                self.skipped.append(f"{f.kind}: {self.cannot[f.kind]}")
        faults = [f for f in faults if f.kind not in self.cannot]
        self.t0 = time.monotonic()
        for slot in self.slots:
            self._start(slot)
        deadline = self.t0 + self.plan.limit_s
        give_up_s = self.plan.window_s[1] + 60.0         # a fault that finds no node to take it by then is skipped
        while time.monotonic() < deadline:
            now = time.monotonic()
            while faults and self.t0 + faults[0].at_s <= now:
                if self._fire(faults[0].kind):
                    faults.pop(0)
                elif now - self.t0 > give_up_s or all(s.state in ("done", "failed") for s in self.slots):
                    self.skipped.append(f"{faults.pop(0).kind}: no node in a state to take it")
                else:
                    break
            self._step(now)
            if any(s.state == "failed" for s in self.slots):
                break
            if all(s.state == "done" for s in self.slots) and not faults:
                break
            time.sleep(TICK_S)
        for f in faults:
            self.skipped.append(f"{f.kind}: the crawl ended first")

    def run(self) -> Outcome:
        started = time.monotonic()
        self.tmp.mkdir(parents=True, exist_ok=True)
        if "all" in self.cannot:
            raise RuntimeError(self.cannot["all"])
        self.switch = netns.Switch()
        web = None
        try:
            self.switch.add_host("web", 1)
            web_addr = self.switch.hosts["web"][1]
            for i in range(NODES):
                ns, addr = self.switch.add_host(f"n{i}", 10 + i)
                disk = self.tmp / f"disk-{i}"
                self._mount(disk)
                self.slots.append(NodeSlot(i, ns, addr, disk))
            web = TestWebProcess(self.tmp / "web", [
                "--bind", web_addr, "--port", str(WEB_PORT), "--hosts", str(self.plan.hosts), "--pages",
                str(self.plan.pages), "--no-bad-host", "--no-slow-host", "--no-trap", "--seed", str(self.seed)],
                command_prefix=self.switch.prefix("web"))
            web.start()
            self.config = self._config(web.info["seeds"], web_addr)
            try:
                self._crawl()
            finally:
                for slot in self.slots:                  # by PID, whatever happened
                    if slot.proc is not None and slot.proc.poll() is None:
                        slot.proc.kill()
                        slot.proc.wait(STOP_WAIT_S)
                for a, b in sorted(self.partitions):
                    self._heal(a, b)
                for i in sorted(self.delayers):
                    self._clear_lossy(i)
            requests, manifest = web.requests(), web.manifest()
        finally:
            if web is not None:
                web.stop()
            for where in self.mounts:
                subprocess.run(["umount", str(where)], capture_output=True, timeout=20)
            self.switch.close()
        return self._judge(requests, manifest, time.monotonic() - started)

    # --- the verdict ------------------------------------------------------------------------------

    def _judge(self, requests, manifest, wall_s: float) -> Outcome:
        problems = []
        codes = {s.index: (s.proc.returncode if s.proc else None) for s in self.slots}
        if codes != dict.fromkeys(range(NODES), 0):
            problems.append(f"exit codes {codes}")
        result = compare(requests, manifest)
        if result.missing:
            problems.append(f"{len(result.missing)} pages never fetched, e.g. {sorted(result.missing)[:5]}")
        if result.unexpected or result.forbidden:
            problems.append(f"unexpected {sorted(result.unexpected)[:5]}, forbidden {sorted(result.forbidden)[:5]}")
        part = Partitioner(NODES)
        by_host = defaultdict(set)
        for r in requests:
            by_host[r.host].add(r.peer)
        strays = {h: sorted(p) for h, p in by_host.items() if p != {self.slots[part.owner(h)].addr}}
        if strays:
            problems.append(f"hosts fetched by a node that does not own them: {dict(list(strays.items())[:5])}")
        if overlaps(requests):
            problems.append(f"{len(overlaps(requests))} overlapping requests to one host")
        gaps = politeness_shortfalls(requests, manifest, {}, 0.0, self.plan.min_delay_s)
        if gaps:
            problems.append(f"{len(gaps)} politeness shortfalls, e.g. {gaps[:3]}")
        resumed = [r for i in range(NODES) for r in self.resumed(i)]
        restarts = sum(s.restarts for s in self.slots)
        if len(resumed) != restarts:
            problems.append(f"{restarts} restarts but {len(resumed)} 'resumed' lines")
        emitted = 0
        for i in range(NODES):
            lines = (self.tmp / f"node-{i}.stdout").read_text().splitlines()
            if lines and lines[-1].startswith("{"):
                emitted += json.loads(lines[-1])["due"]["duplicates_emitted"]
        refetches = sum(n - 1 for url, n in result.duplicates.items() if not url.endswith(ROBOTS_PATH))
        bound = sum(a + b for a, b in resumed) + emitted
        if refetches > bound:
            problems.append(f"{refetches} page re-fetches > bound {bound}: {list(result.duplicates.items())[:5]}")
        if any(s.state != "done" for s in self.slots) and not problems:
            problems.append(f"node states {[s.state for s in self.slots]}")
        kills_survived = sum(1 for i in self.killed if codes[i] == 0)
        return Outcome(self.seed, self.injected, self.skipped, kills_survived, self.full_stops, codes, refetches,
                       bound, problems, wall_s, self.events)


def run_seed(tmp: Path, seed: int, plan: Plan, log=print) -> Outcome:
    return ChaosRun(tmp, seed, plan, log).run()
