"""flink-connector-kafka's KafkaSource: `KafkaPartitionSplitSerializer` (version 0) and `KafkaSourceEnumStateSerializer`
(versions 0 to 3), read from the connector's source (apache/flink-connector-kafka, v3.0 to v5.0).

Split v0: writeUTF topic, writeInt partition, writeLong starting offset, writeLong stopping offset
(`KafkaPartitionSplit`: -2 earliest, -1 latest, -3 committed, Long.MIN_VALUE migrated / no stopping offset).
Enumerator v0 (`SerdeUtils.serializeSplitAssignments`): int subtasks, int split version, per subtask int id, int n,
n x (int length, split). v1: int n, n x (UTF topic, int partition), all assigned. v2: int n, n x (UTF topic, int
partition, int status: 0 assigned, 1 unassigned), bool initial discovery finished. v3 (connector 5.0): int n, int
split version, n x (int length, split, int status), bool initial discovery finished. v1 and v2 keep no offsets (the
connector restores them as MIGRATED). A split's id is `TopicPartition.toString()`: "topic-partition".
"""

from __future__ import annotations

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.sources._wire import Out, done
from flinkstate.flink.sources.model import EnumEntry, EnumeratorState, Split

__all__ = ["COMMITTED", "EARLIEST", "ENUM_VERSIONS", "LATEST", "MARKERS", "MIGRATED", "NO_STOPPING_OFFSET", "SPLIT_VERSIONS",
           "decode_enumerator", "decode_split", "encode_enumerator", "encode_split", "kafka_split", "split_owner"]

SPLIT_VERSIONS = (0,)
ENUM_VERSIONS = (0, 1, 2, 3)
EARLIEST, LATEST, COMMITTED = -2, -1, -3
MIGRATED = NO_STOPPING_OFFSET = -(1 << 63)
MARKERS = {"earliest": EARLIEST, "latest": LATEST, "committed": COMMITTED}
_STATUS = {0: "assigned", 1: "unassigned"}
_CODE = {v: k for k, v in _STATUS.items()}


def kafka_split(topic: str, partition: int, starting_offset: int | None = None, stopping_offset: int = NO_STOPPING_OFFSET) -> Split:
    """A KafkaPartitionSplit (starting_offset None: not known, as the v1/v2 enumerator states keep it)."""
    return Split("kafka", f"{topic}-{partition}", topic=topic, partition=partition, starting_offset=starting_offset,
                 stopping_offset=stopping_offset)


def split_owner(topic: str, partition: int, readers: int) -> int:
    """The reader subtask KafkaSourceEnumerator.getSplitOwner gives a partition: ((topic.hashCode() * 31 & MAX_INT) +
    partition) % readers."""
    h = 0
    for u in _utf16(topic):
        h = (31 * h + u) & 0xFFFFFFFF
    h = (h * 31) & 0x7FFFFFFF
    return (h % readers + partition) % readers


def _utf16(s: str) -> list[int]:
    raw = s.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def _read_split(r: DataReader) -> Split:
    topic = r.utf()
    partition = r.i32()
    return kafka_split(topic, partition, r.i64(), r.i64())


def decode_split(version: int, data: bytes, where: str) -> Split:
    """One split's bytes (version 0), parsed exactly."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"{where}: Kafka split version {version} (known: {SPLIT_VERSIONS})")
    r = DataReader(data, where=where)
    s = _read_split(r)
    done(r)
    return s


def encode_split(s: Split, version: int = 0) -> bytes:
    """KafkaPartitionSplitSerializer.serialize."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"Kafka split version {version} cannot be written (known: {SPLIT_VERSIONS})")
    start = MIGRATED if s.starting_offset is None else s.starting_offset
    stop = NO_STOPPING_OFFSET if s.stopping_offset is None else s.stopping_offset
    return Out().utf(s.topic or "").i32(s.partition or 0).i64(start).i64(stop).bytes()


def decode_enumerator(version: int, data: bytes, coordinator_version: int, where: str) -> EnumeratorState:
    """A KafkaSourceEnumState of any version, parsed exactly."""
    r = DataReader(data, where=where)
    st = EnumeratorState("kafka", coordinator_version, version)
    if version == 0:
        subtasks = r.i32()
        st.split_version = r.i32()
        for _ in range(subtasks):
            subtask, n = r.i32(), r.i32()
            for _ in range(n):
                st.entries.append(EnumEntry("assigned", decode_split(st.split_version, r.sized(), where), subtask))
    elif version in (1, 2):
        for _ in range(r.i32()):
            topic, partition = r.utf(), r.i32()
            code = r.i32() if version == 2 else 0
            if code not in _STATUS:
                raise CorruptFileError(f"{where}: Kafka partition {topic}-{partition} has assignment status {code}")
            st.entries.append(EnumEntry(_STATUS[code], kafka_split(topic, partition)))  # type: ignore[arg-type]
        if version == 2:
            st.initial_discovery_finished = r.bool()
    elif version == 3:
        n = r.i32()
        st.split_version = r.i32()
        for _ in range(n):
            split = decode_split(st.split_version, r.sized(), where)
            code = r.i32()
            if code not in _STATUS:
                raise CorruptFileError(f"{where}: Kafka partition {split.split_id} has assignment status {code}")
            st.entries.append(EnumEntry(_STATUS[code], split))  # type: ignore[arg-type]
        st.initial_discovery_finished = r.bool()
    else:
        raise CorruptFileError(f"{where}: Kafka enumerator state version {version} (known: {ENUM_VERSIONS})")
    done(r)
    return st


def encode_enumerator(st: EnumeratorState) -> bytes:
    """The enumerator state in its own version (v1/v2 keep topic and partition only, as the connector wrote them)."""
    out = Out()
    if st.version == 0:
        by: dict[int, list[Split]] = {}
        for e in st.entries:
            by.setdefault(e.subtask if e.subtask is not None else 0, []).append(e.split)
        out.i32(len(by)).i32(st.split_version or 0)
        for subtask, splits in by.items():
            out.i32(subtask).i32(len(splits))
            for s in splits:
                out.sized(encode_split(s, st.split_version or 0))
    elif st.version in (1, 2):
        out.i32(len(st.entries))
        for e in st.entries:
            out.utf(e.split.topic or "").i32(e.split.partition or 0)
            if st.version == 2:
                out.i32(_CODE[e.status])
        if st.version == 2:
            out.bool(bool(st.initial_discovery_finished))
    elif st.version == 3:
        out.i32(len(st.entries)).i32(st.split_version or 0)
        for e in st.entries:
            out.sized(encode_split(e.split, st.split_version or 0)).i32(_CODE[e.status])
        out.bool(bool(st.initial_discovery_finished))
    else:
        raise CorruptFileError(f"Kafka enumerator state version {st.version} cannot be written (known: {ENUM_VERSIONS})")
    return out.bytes()
