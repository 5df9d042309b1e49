"""`NumberSequenceSource` and `DataGeneratorSource` (which uses its splits): `NumberSequenceSource.SplitSerializer` and
`CheckpointSerializer`, both version 1 (flink-dist 1.18 to 2.3).

Split v1: writeUTF id, long from (the next number the reader emits: the reader checkpoints its progress in it),
long to (the last, inclusive). Enumerator v1: int n, n x split: the splits not yet assigned.
"""

from __future__ import annotations

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.sources._wire import Out, done
from flinkstate.flink.sources.model import EnumEntry, EnumeratorState, Split

__all__ = ["ENUM_VERSIONS", "SPLIT_VERSIONS", "decode_enumerator", "decode_split", "encode_enumerator", "encode_split"]

SPLIT_VERSIONS = (1,)
ENUM_VERSIONS = (1,)


def _read(r: DataReader) -> Split:
    split_id = r.utf()
    return Split("number_sequence", split_id, number_from=r.i64(), number_to=r.i64())


def decode_split(version: int, data: bytes, where: str) -> Split:
    """One NumberSequenceSplit, parsed exactly."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"{where}: number sequence split version {version} (known: {SPLIT_VERSIONS})")
    r = DataReader(data, where=where)
    s = _read(r)
    done(r)
    return s


def encode_split(s: Split, version: int = 1) -> bytes:
    """SplitSerializer.serialize."""
    if version not in SPLIT_VERSIONS:
        raise CorruptFileError(f"number sequence split version {version} cannot be written (known: {SPLIT_VERSIONS})")
    return Out().utf(s.split_id).i64(s.number_from or 0).i64(s.number_to or 0).bytes()


def decode_enumerator(version: int, data: bytes, coordinator_version: int, where: str) -> EnumeratorState:
    """The unassigned splits (CheckpointSerializer), parsed exactly."""
    if version not in ENUM_VERSIONS:
        raise CorruptFileError(f"{where}: number sequence enumerator version {version} (known: {ENUM_VERSIONS})")
    r = DataReader(data, where=where)
    n = r.i32()
    if n < 0 or n > r.remaining():
        raise CorruptFileError(f"{where}: {n} number sequence splits claimed")
    st = EnumeratorState("number_sequence", coordinator_version, version, entries=[EnumEntry("unassigned", _read(r)) for _ in range(n)])
    done(r)
    return st


def encode_enumerator(st: EnumeratorState) -> bytes:
    """CheckpointSerializer.serialize."""
    out = Out().i32(len(st.entries))
    for e in st.entries:
        out.raw(encode_split(e.split))
    return out.bytes()
