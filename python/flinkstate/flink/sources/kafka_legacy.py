"""The legacy `FlinkKafkaConsumer` (flink-connector-kafka up to 3.x, Flink 1.x): its union list state
`topic-partition-offset-states`, told by that name and its serializer (`FlinkKafkaConsumerBase.createStateSerializer`: a
TupleSerializer of KryoSerializer<KafkaTopicPartition> and LongSerializer).

An element is Tuple2(KafkaTopicPartition, Long): Flink's KryoSerializer (Kryo 2.24, references on) writes the class as
its registration id (varint id + 2: the KryoSerializer registers its type, so the id depends on the job's registrations;
kept as read), the reference marker 1 (a new object), then the fields by name: cachedHash and partition as zigzag
varints, topic as a non-null marker 1 and a Kryo string (ASCII: the bytes, the last with 0x80 set; otherwise a 0x80-flagged
length varint of chars + 1 and the chars as UTF-8); then the offset, a big-endian long. The offset is the last record the
consumer emitted (it seeks to offset + 1 on restore), or a sentinel: -915623761776 not set, -915623761775 earliest,
-915623761774 latest, -915623761773 the group's committed offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.sources.kafka import COMMITTED, EARLIEST, LATEST

__all__ = ["LEGACY_STATE", "SENTINELS", "LegacyEntry", "decode_element", "encode_element", "is_legacy_serializer", "java_hash"]

LEGACY_STATE = "topic-partition-offset-states"
KAFKA_TOPIC_PARTITION = "org.apache.flink.streaming.connectors.kafka.internals.KafkaTopicPartition"
NOT_SET = -915623761776
SENTINELS = {NOT_SET: "not_set", -915623761775: "earliest", -915623761774: "latest", -915623761773: "committed"}
_TO_SENTINEL = {EARLIEST: -915623761775, LATEST: -915623761774, COMMITTED: -915623761773}


@dataclass(frozen=True)
class LegacyEntry:
    """One partition's offset as the legacy consumer stores it (offset: the last emitted record's, or a sentinel)."""

    topic: str
    partition: int
    offset: int
    class_id: int
    cached_hash: int

    @property
    def next_offset(self) -> int:
        """Where the consumer goes on: offset + 1, or the split markers' value for a sentinel (earliest -2, latest -1,
        committed -3; not set: Long.MIN_VALUE)."""
        if self.offset in SENTINELS:
            back = {v: k for k, v in _TO_SENTINEL.items()}
            return back.get(self.offset, -(1 << 63))
        return self.offset + 1


def java_hash(s: str) -> int:
    """String.hashCode."""
    raw = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def is_legacy_serializer(node: object) -> bool:
    """Whether a state's value serializer is the legacy consumer's Tuple2<KryoSerializer<KafkaTopicPartition>, Long>."""
    children = getattr(node, "children", ())
    return (getattr(node, "kind", None) == "tuple" and len(children) == 2 and getattr(children[1], "kind", None) == "long"
            and KAFKA_TOPIC_PARTITION in (getattr(children[0], "payload", b"") + getattr(children[0], "snapshot", b"")).decode("latin-1"))


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    out = shift = 0
    for _ in range(5):
        if pos >= len(data):
            raise CorruptFileError(f"{where}: a varint runs past the end ({len(data)} bytes)")
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
    raise CorruptFileError(f"{where}: a varint longer than 5 bytes at offset {pos - 5}")


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _put_varint(out: bytearray, v: int) -> None:
    v &= 0xFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_string(data: bytes, pos: int, where: str) -> tuple[str, int]:
    if pos >= len(data):
        raise CorruptFileError(f"{where}: the topic runs past the end")
    b = data[pos]
    if not b & 0x80:  # ASCII, the last byte flagged
        end = pos
        while end < len(data) and not data[end] & 0x80:
            end += 1
        if end >= len(data):
            raise CorruptFileError(f"{where}: an ASCII string without its last byte")
        return (data[pos:end] + bytes([data[end] & 0x7F])).decode("ascii"), end + 1
    n = b & 0x3F  # a UTF-8 length: 6 bits in the first byte, then 7-bit groups
    pos += 1
    if b & 0x40:
        rest, pos = _varint(data, pos, where)
        n |= rest << 6
    if n == 0:
        raise CorruptFileError(f"{where}: a null topic")
    chars, units = n - 1, []
    for _ in range(chars):
        if pos >= len(data):
            raise CorruptFileError(f"{where}: the topic runs past the end")
        c = data[pos]
        top = c >> 4
        if top < 8:
            units.append(c)
            pos += 1
        elif top in (12, 13):
            units.append(((c & 0x1F) << 6) | (data[pos + 1] & 0x3F))
            pos += 2
        elif top == 14:
            units.append(((c & 0x0F) << 12) | ((data[pos + 1] & 0x3F) << 6) | (data[pos + 2] & 0x3F))
            pos += 3
        else:
            raise CorruptFileError(f"{where}: bad character byte {c:#x} in the topic")
    return struct.pack(f">{len(units)}H", *units).decode("utf-16-be", "surrogatepass"), pos


def _write_string(out: bytearray, s: str) -> None:
    units = struct.unpack(f">{len(s.encode('utf-16-be', 'surrogatepass')) // 2}H", s.encode("utf-16-be", "surrogatepass"))
    if 1 < len(units) < 64 and all(u < 0x80 for u in units):
        raw = bytearray(s.encode("ascii"))
        raw[-1] |= 0x80
        out += raw
        return
    n = len(units) + 1
    if n >> 6 == 0:
        out.append(n | 0x80)
    else:
        out.append((n & 0x3F) | 0xC0)
        _put_varint(out, n >> 6)
    for u in units:
        if u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes([0xC0 | (u >> 6), 0x80 | (u & 0x3F)])
        else:
            out += bytes([0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)])


def decode_element(data: bytes, where: str) -> LegacyEntry:
    """One union-state element, parsed exactly."""
    cid, pos = _varint(data, 0, where)
    ref, pos = _varint(data, pos, where)
    if cid < 2 or ref != 1:
        raise CorruptFileError(f"{where}: not a Kryo-written KafkaTopicPartition (class id {cid - 2}, reference marker {ref})")
    h, pos = _varint(data, pos, where)
    p, pos = _varint(data, pos, where)
    if pos >= len(data) or data[pos] != 1:
        raise CorruptFileError(f"{where}: the topic is null or missing")
    topic, pos = _read_string(data, pos + 1, where)
    if pos + 8 != len(data):
        raise CorruptFileError(f"{where}: {len(data) - pos} bytes where the offset (8) should end the element")
    entry = LegacyEntry(topic, _int32(_zigzag(p)), struct.unpack_from(">q", data, pos)[0], cid - 2, _int32(_zigzag(h)))
    if entry.cached_hash != _int32(31 * java_hash(topic) + entry.partition):
        raise CorruptFileError(f"{where}: KafkaTopicPartition {topic}-{entry.partition} has hash {entry.cached_hash}, not its own")
    return entry


def encode_element(e: LegacyEntry) -> bytes:
    """The element Flink's serializer writes for this entry (cachedHash recomputed as the constructor does)."""
    out = bytearray()
    _put_varint(out, e.class_id + 2)
    out.append(1)
    h = _int32(31 * java_hash(e.topic) + e.partition)
    _put_varint(out, (h << 1) ^ (h >> 31))
    _put_varint(out, (e.partition << 1) ^ (e.partition >> 31))
    out.append(1)
    _write_string(out, e.topic)
    return bytes(out) + struct.pack(">q", e.offset)


def stored_offset(next_offset: int) -> int:
    """What the legacy state stores to go on at next_offset (>= 0), or the sentinel of a split marker (-2, -1, -3)."""
    return _TO_SENTINEL[next_offset] if next_offset in _TO_SENTINEL else next_offset - 1
