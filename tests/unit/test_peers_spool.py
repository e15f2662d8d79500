"""The on-disk spill of the peer transport and its persistent sequence numbers."""

import json

from crawler.peers.frames import batch_seq, decode_batch, encode_batch
from crawler.peers.spool import SEQ_LEASE, SeqAllocator, Spool


def frames(seqs):
    return [encode_batch(s, [f"http://h{s}.test/{i}" for i in range(3)]) for s in seqs]


def drain(spool: Spool) -> list[int]:
    """Read everything unread and ACK it; returns the sequence numbers in read order."""
    got = []
    while (item := spool.read_next()) is not None:
        frame, segment = item
        got.append(batch_seq(frame))
        spool.ack(segment)
    return got


def segments(path):
    return sorted(p.name for p in path.glob("seg-*.spool"))


def test_append_read_ack_removes_files(tmp_path):
    spool = Spool(tmp_path, segment_bytes=300)          # small: several segments
    spool.append(frames(range(1, 21)))
    assert spool.unread == 20 and spool.live == 20
    assert len(segments(tmp_path)) > 1
    assert drain(spool) == list(range(1, 21))
    assert spool.live == 0 and segments(tmp_path) == []
    spool.close()


def test_unacked_records_survive_a_restart_in_order(tmp_path):
    spool = Spool(tmp_path, segment_bytes=500)
    spool.append(frames(range(1, 11)))
    frame, segment = spool.read_next()                  # sent, never ACKed
    assert batch_seq(frame) == 1
    spool.close()
    again = Spool(tmp_path)
    assert again.unread == 10
    assert drain(again) == list(range(1, 11))
    again.close()
    assert segments(tmp_path) == []


def test_torn_tail_is_cut_and_the_rest_kept(tmp_path):
    spool = Spool(tmp_path)
    spool.append(frames(range(1, 6)))
    spool.close()
    [name] = segments(tmp_path)
    path = tmp_path / name
    data = path.read_bytes()
    path.write_bytes(data[:-7])                         # a crash in the middle of the last record
    again = Spool(tmp_path)
    assert again.stats.corrupt_records == 1
    assert drain(again) == [1, 2, 3, 4]
    again.close()


def test_corrupt_record_stops_the_scan_of_that_segment(tmp_path):
    spool = Spool(tmp_path)
    spool.append(frames(range(1, 4)))
    spool.close()
    [name] = segments(tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF                                    # flip a byte of the last URL
    path.write_bytes(bytes(data))
    again = Spool(tmp_path)
    assert drain(again) == [1, 2]
    again.close()


def test_dump_of_older_batches_is_replayed_first(tmp_path):
    """At close, batches still in memory (older than what is spooled) go to a segment of their own."""
    spool = Spool(tmp_path)
    spool.append(frames(range(10, 15)))
    spool.dump(frames([3, 1, 2]))
    spool.close()
    again = Spool(tmp_path)
    assert drain(again) == [1, 2, 3, 10, 11, 12, 13, 14]
    again.close()


def test_reader_catching_up_seals_the_segment(tmp_path):
    spool = Spool(tmp_path)
    spool.append(frames([1, 2]))
    first = [spool.read_next(), spool.read_next()]
    spool.append(frames([3]))                           # goes to a new segment: the old one can go once ACKed
    for _, segment in first:
        spool.ack(segment)
    assert len(segments(tmp_path)) == 1
    assert drain(spool) == [3]
    assert segments(tmp_path) == []
    spool.close()


def test_frames_come_back_byte_identical(tmp_path):
    spool = Spool(tmp_path)
    [frame] = frames([7])
    spool.append([frame])
    got, _ = spool.read_next()
    assert got == frame
    assert decode_batch(got[5:])[0] == 7
    spool.close()


def test_sequence_numbers_never_repeat_across_restarts(tmp_path):
    alloc = SeqAllocator.open(tmp_path)
    first = [alloc.next() for _ in range(10)]
    assert first == list(range(1, 11))
    again = SeqAllocator.open(tmp_path)
    assert again.stream_id == alloc.stream_id
    assert again.next() > first[-1]
    lease_end = json.loads((tmp_path / "stream.json").read_text())["lease_end"]
    assert lease_end >= again.next() + SEQ_LEASE - 2
    big = [again.next() for _ in range(SEQ_LEASE * 2)]  # crosses leases
    assert big == sorted(set(big))
    assert SeqAllocator.open(tmp_path / "other").stream_id != alloc.stream_id


def test_sequence_numbers_start_above_the_spool(tmp_path):
    assert SeqAllocator.open(tmp_path, floor=5000).next() == 5001


def test_prepended_batches_are_read_first_in_order_and_survive_a_restart(tmp_path):
    spool = Spool(tmp_path)
    spool.append(frames([5, 6]))
    spool.prepend(frames([4, 3]))                 # older than everything unread: a dead connection's window
    assert spool.unread == 4
    assert drain(spool) == [3, 4, 5, 6]
    spool.close()
    again = Spool(tmp_path)
    again.prepend(frames([1, 2]))
    again.append(frames([7]))
    again.close()
    third = Spool(tmp_path)                        # unacked: all back, sorted
    assert drain(third) == [1, 2, 7]
    third.close()


def test_spooled_batches_keep_each_urls_lineage_and_version_1_spools_are_read(tmp_path):
    """A batch waiting in the spool across a restart comes back with its URLs' lineage; a segment written by
    protocol version 1 (magic MCRPSPL1, bare URLs) is still read: its URLs come with lineage unknown."""
    from crawler.urls.lineage import UNKNOWN, Lineage, split, tag
    tagged = [tag(f"http://a.test/{i}", i, 0xABCDEF, 0x1234 + i) for i in range(5)]
    spool = Spool(tmp_path / "v2")
    spool.append([encode_batch(7, tagged)])
    spool.close()
    again = Spool(tmp_path / "v2")
    frame, _ = again.read_next()
    assert [split(u)[1] for u in decode_batch(frame[5:])[1]] == [Lineage(i, 0xABCDEF, 0x1234 + i) for i in range(5)]
    again.close()
    old = Spool(tmp_path / "v1")
    old.append([encode_batch(3, ["http://b.test/"])])
    old.close()
    (segment,) = (tmp_path / "v1").glob("seg-*.spool")
    data = segment.read_bytes()
    segment.write_bytes(b"MCRPSPL1" + data[8:])
    reread = Spool(tmp_path / "v1")
    frame, _ = reread.read_next()
    assert [split(u) for u in decode_batch(frame[5:])[1]] == [("http://b.test/", UNKNOWN)]
    reread.close()
