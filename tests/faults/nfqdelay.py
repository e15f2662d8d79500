"""Delay every packet of an NFQUEUE queue by a fixed time: netem's `delay` where the kernel has no netem.

The chaos test wants "5% loss, 50 ms delay" on one node's link. This kernel
is built without sch_netem (`tc qdisc ... netem`: "Specified qdisc kind is
unknown") and without act_gact or nft_queue, but it has nf_tables with the
xtables compatibility layer, so inside the node's namespace

    iptables -A OUTPUT -o DEV -m statistic --mode random --probability 0.05 -j DROP
    iptables -A OUTPUT -o DEV -j NFQUEUE --queue-num Q --queue-bypass

drops 5% of what the node sends and hands the rest to this program, which
holds each packet `delay_ms` and then accepts it. Every packet waits the
same time, so their order is kept, as netem keeps it without jitter. Only
the packet's metadata is copied to user space (NFQNL_COPY_META), and the
queue fails open (NFQA_CFG_F_FAIL_OPEN): a full queue passes packets on
undelayed instead of dropping them.

Speaks nfnetlink_queue over a raw netlink socket (no libnetfilter_queue):

    python -m tests.faults.nfqdelay --queue Q --delay-ms 50

Prints "ready" on stdout once bound; stops on SIGTERM (the kernel drops
what was still queued: a lost packet, which TCP resends).
"""

from __future__ import annotations

import argparse
import heapq
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
QUEUE_MAXLEN = 20000          # packets held at once (50 ms of a busy node's traffic fits easily)
RECV_BYTES = 1 << 16


def _attr(kind: int, payload: bytes) -> bytes:
    head = struct.pack("=HH", 4 + len(payload), kind)
    return head + payload + b"\0" * (-len(payload) % 4)


def _message(msg: int, queue: int, attrs: bytes, flags: int, seq: int) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def _attrs(data: bytes):
    while len(data) >= 4:
        length, kind = struct.unpack_from("=HH", data)
        if length < 4:
            return
        yield kind & 0x3FFF, data[4:length]
        data = data[(length + 3) & ~3:]


def _configure(sock: socket.socket, queue: int) -> None:
    """Bind the queue, copy metadata only, fail open; raise on any refusal."""
    steps = [
        _attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, 0)),
        _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
        _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)),
        _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
        + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
    ]
    for seq, attrs in enumerate(steps, 1):
        sock.send(_message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, seq))
        reply = sock.recv(RECV_BYTES)
        _, kind, _, _, _ = struct.unpack_from("=IHHII", reply)
        if kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", reply, 16)
            if code:
                raise OSError(-code, f"nfnetlink_queue config step {seq} refused")


def packet_ids(buf: bytes):
    """The packet ids of the NFQNL_MSG_PACKET messages in one recv() buffer."""
    while len(buf) >= 16:
        length, kind, _, _, _ = struct.unpack_from("=IHHII", buf)
        if length < 16:
            return
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            for akind, payload in _attrs(buf[20:length]):
                if akind == NFQA_PACKET_HDR:
                    yield struct.unpack_from("!I", payload)[0]
        buf = buf[(length + 3) & ~3:]


def run(queue: int, delay_s: float) -> None:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((0, 0))
    _configure(sock, queue)
    print("ready", flush=True)
    held: list[tuple[float, int]] = []      # (release time, packet id); ids rise, so the heap is a FIFO
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    while not stopping:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, pid = heapq.heappop(held)
            verdict = _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pid))
            sock.send(_message(NFQNL_MSG_VERDICT, queue, verdict, NLM_F_REQUEST, 0))
        wait = max(0.0, held[0][0] - now) if held else 0.5
        try:
            ready, _, _ = select.select([sock], [], [], wait)
        except InterruptedError:
            continue
        if ready:
            try:
                buf = sock.recv(RECV_BYTES)
            except OSError:            # ENOBUFS: the kernel dropped messages; those packets fail open
                continue
            release = time.monotonic() + delay_s
            for pid in packet_ids(buf):
                heapq.heappush(held, (release, pid))
    sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    args = parser.parse_args()
    run(args.queue, args.delay_ms / 1000.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
