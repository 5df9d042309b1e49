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
from flinkstate.flink.serde.kryo.wire import KryoInput, KryoOutput, WireError
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


def decode_element(data: bytes, where: str) -> LegacyEntry:
    """One union-state element, parsed exactly (Kryo 2's encodings: serde.kryo.wire)."""
    r = KryoInput(data, 0, 2)
    try:
        cid, ref = r.varint(), r.varint()
        if cid < 2 or ref != 1:
            raise CorruptFileError(f"{where}: not a Kryo-written KafkaTopicPartition (class id {cid - 2}, reference marker {ref})")
        h, partition = r.varint(positive=False), r.varint(positive=False)
        topic = r.string() if r.byte() == 1 else None
        if topic is None:
            raise CorruptFileError(f"{where}: the topic is null or missing")
        pos = r.pos
    except WireError as e:
        raise CorruptFileError(f"{where}: {e}") from e
    if pos + 8 != len(data):
        raise CorruptFileError(f"{where}: {len(data) - pos} bytes where the offset (8) should end the element")
    entry = LegacyEntry(topic, partition, struct.unpack_from(">q", data, pos)[0], cid - 2, h)
    if entry.cached_hash != _int32(31 * java_hash(topic) + entry.partition):
        raise CorruptFileError(f"{where}: KafkaTopicPartition {topic}-{entry.partition} has hash {entry.cached_hash}, not its own")
    return entry


def encode_element(e: LegacyEntry) -> bytes:
    """The element Flink's serializer writes for this entry (cachedHash recomputed as the constructor does)."""
    out = KryoOutput(2)
    out.varint(e.class_id + 2)
    out.byte(1)  # a new object (references on)
    out.varint(_int32(31 * java_hash(e.topic) + e.partition), positive=False)
    out.varint(e.partition, positive=False)
    out.byte(1)  # the topic is not null
    out.string(e.topic, ascii_max=63)  # Kryo 2 writes ASCII strings of up to 63 characters as such
    return bytes(out.out) + struct.pack(">q", e.offset)


def stored_offset(next_offset: int) -> int:
    """What the legacy state stores to go on at next_offset (>= 0), or the sentinel of a split marker (-2, -1, -3)."""
    return _TO_SENTINEL[next_offset] if next_offset in _TO_SENTINEL else next_offset - 1
