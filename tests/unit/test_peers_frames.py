"""Frame codec of the peer transport: round trips, and refusal of truncated, oversized and garbage input."""

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.peers.frames import (
    HEADER_BYTES,
    MALFORMED,
    NONCE_BYTES,
    FrameError,
    FrameType,
    Hello,
    batch_seq,
    decode_auth,
    decode_batch,
    decode_bye,
    decode_control,
    decode_hello,
    decode_seq,
    encode_auth,
    encode_batch,
    encode_bye,
    encode_control,
    encode_frame,
    encode_hello,
    encode_seq,
    read_frame,
)
from crawler.urls.lineage import UNKNOWN, Lineage, tag
from crawler.urls.lineage import split as split_lineage

MAX_FRAME_BYTES = 1 << 20
# A canonical URL holds neither a newline nor a space (the space separates its lineage on the wire).
url_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n "), max_size=80)
url_lists = st.lists(url_text, max_size=40)
seqs = st.integers(min_value=0, max_value=2**64 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
frame_types = st.sampled_from(list(FrameType))
payloads = st.binary(max_size=300)


def payload_of(frame: bytes) -> bytes:
    length, _ = struct.unpack_from(">IB", frame)
    assert length == len(frame) - 4
    return frame[HEADER_BYTES:]


async def read_all(chunks: list[bytes], max_frame_bytes: int = MAX_FRAME_BYTES) -> tuple[list, str]:
    """Frames read from a real StreamReader fed `chunks`; and the reason reading stopped."""
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    frames = []
    while True:
        try:
            frames.append(await read_frame(reader, max_frame_bytes))
        except FrameError as exc:
            return frames, exc.reason


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(data)]:
        pieces.append(data[last:p])
        last = p
    return [p for p in pieces if p]


@given(seqs, url_lists)
def test_batch_round_trip(seq, urls):
    frame = encode_batch(seq, urls)
    assert batch_seq(frame) == seq
    assert decode_batch(payload_of(frame)) == (seq, urls)


lineages = st.tuples(st.integers(0, 2**16), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))


@given(seqs, st.lists(st.tuples(url_text, lineages), max_size=40))
def test_batch_carries_each_urls_lineage(seq, items):
    """Version 2: every URL of a BATCH arrives with its own hops, seed and referrer."""
    tagged = [tag(url, *lineage) for url, lineage in items]
    got_seq, got = decode_batch(payload_of(encode_batch(seq, tagged)))
    assert got_seq == seq and got == tagged
    assert [split_lineage(u) for u in got] == [(url, Lineage(*lineage)) for url, lineage in items]


def test_batch_of_bare_urls_still_decodes_with_lineage_unknown():
    """A version-1 body (bare URLs, as an old spool holds) is a valid version-2 body: lineage unknown."""
    _, urls = decode_batch(payload_of(encode_batch(3, ["http://a/", "http://b/x"])))
    assert [split_lineage(u) for u in urls] == [("http://a/", UNKNOWN), ("http://b/x", UNKNOWN)]


def test_batch_with_broken_lineage_is_malformed():
    body = b"http://a/ 1 ff 0\nhttp://b/ 2 ff"
    with pytest.raises(FrameError) as err:
        decode_batch(struct.pack(">QI", 1, 2) + body)
    assert err.value.reason == MALFORMED and "lineage" in str(err.value)


def test_batch_refuses_newline_in_url():
    with pytest.raises(ValueError):
        encode_batch(1, ["http://a/\nhttp://b/"])


def test_batch_count_mismatch_is_malformed():
    payload = payload_of(encode_batch(5, ["http://a/", "http://b/"]))
    lying = struct.pack(">QI", 5, 3) + payload[12:]
    with pytest.raises(FrameError) as err:
        decode_batch(lying)
    assert err.value.reason == MALFORMED
    with pytest.raises(FrameError):
        decode_batch(struct.pack(">QI", 5, 1) + b"\xff\xfe")          # not UTF-8


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.text(max_size=60),
       st.binary(min_size=NONCE_BYTES, max_size=NONCE_BYTES), st.integers(0, 2**64 - 1))
def test_hello_round_trip(from_id, to_id, cluster, nonce, stream_id):
    if len(cluster.encode("utf-8", "surrogatepass")) > 255 or any("\ud800" <= ch <= "\udfff" for ch in cluster):
        return
    hello = Hello(from_id, to_id, cluster, nonce, stream_id)
    assert decode_hello(payload_of(encode_hello(hello))) == hello


@given(json_values.filter(lambda v: isinstance(v, dict))
       | st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_control_round_trip(message):
    assert decode_control(payload_of(encode_control(message, 65536)), 65536) == message


def test_small_codecs():
    assert decode_seq(payload_of(encode_seq(FrameType.ACK, 2**64 - 1))) == 2**64 - 1
    assert decode_auth(payload_of(encode_auth(b"m" * 32))) == b"m" * 32
    assert decode_bye(payload_of(encode_bye("closing"))) == "closing"
    for bad in (b"", b"1234567", b"123456789"):
        with pytest.raises(FrameError):
            decode_seq(bad)
    with pytest.raises(FrameError):
        decode_auth(b"short")
    with pytest.raises(FrameError):
        decode_control(b"[1, 2]", 100)                 # JSON, but not an object
    with pytest.raises(FrameError):
        decode_control(b'{"a": 1}', 4)                 # over the limit


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(frame_types, payloads), max_size=8), st.lists(st.integers(0, 10**6), max_size=12))
async def test_read_frame_reassembles_any_chunking(frames, cuts):
    wire = b"".join(encode_frame(t, p) for t, p in frames)
    got, reason = await read_all(split(wire, cuts))
    assert got == [(t, p) for t, p in frames]
    assert reason == "eof"


@given(frame_types, st.binary(min_size=1, max_size=200), st.data())
async def test_truncated_frame_is_refused(ftype, payload, data):
    frame = encode_frame(ftype, payload)
    cut = data.draw(st.integers(1, len(frame) - 1))
    got, reason = await read_all([frame[:cut]])
    assert got == [] and reason == "truncated"


async def test_oversized_frame_is_refused_before_reading_it():
    head = struct.pack(">IB", 5000, FrameType.BATCH)
    got, reason = await read_all([head + b"x" * 10], max_frame_bytes=4096)
    assert got == [] and reason == "oversized"


async def test_zero_length_and_unknown_type_are_malformed():
    assert (await read_all([struct.pack(">IB", 0, 3)]))[1] == "malformed"
    assert (await read_all([struct.pack(">IB", 1, 99)]))[1] == "malformed"


@given(st.binary(max_size=600))
async def test_garbage_stream_only_raises_frame_error(garbage):
    frames, reason = await read_all([garbage], max_frame_bytes=4096)
    assert reason in {"eof", "truncated", "oversized", "malformed"}
    for _ftype, payload in frames:                  # every decoder refuses garbage with FrameError only
        for decode in (decode_hello, decode_auth, decode_batch, decode_seq, decode_bye,
                       lambda p: decode_control(p, 4096)):
            try:
                decode(payload)
            except FrameError:
                pass


@given(st.binary(max_size=400))
def test_garbage_payloads_never_crash_decoders(payload):
    for decode in (decode_hello, decode_auth, decode_batch, decode_seq, decode_bye,
                   lambda p: decode_control(p, 4096)):
        try:
            decode(payload)
        except FrameError:
            pass
