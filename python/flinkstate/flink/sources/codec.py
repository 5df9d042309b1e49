"""A source operator's state as a whole: the reader-state framing, the coordinator framing, and which source it is.

Reader state (`SourceOperator`'s operator list state "SourceReaderState", BytePrimitiveArraySerializer): each element
is `SimpleVersionedSerialization.writeVersionAndSerialize`: int split serializer version, int length, the split.
Coordinator state (`SourceCoordinator.writeCheckpointBytes`, flink-runtime 1.18 to 2.3): int coordinator serde version
(`SourceCoordinatorSerdeUtils`: 0 or 1), int enumerator serializer version, int length, the enumerator's bytes; version
0 (Flink before 1.14) wrote the readers' assignments after them, which are kept as they are.

A savepoint does not record which connector wrote these bytes (the reader state's serializer is the byte-array one,
the coordinator bytes carry only versions). The kind is therefore decided by the bytes alone and never guessed: a kind
is taken when every split and the enumerator parse exactly (to their last byte) with its serializers at their
versions; when none does, or more than one (an enumerator with no splits can be both Kafka and a number sequence), the
source is an `UnknownSourceError` naming the candidates, unless the caller declares the kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from flinkstate.flink._io import DataReader
from flinkstate.flink.errors import CorruptFileError
from flinkstate.flink.sources import files, kafka, sequence
from flinkstate.flink.sources._wire import Out
from flinkstate.flink.sources.model import (
    KINDS,
    EnumeratorState,
    ReaderSplit,
    SourceKind,
    SourceState,
    UnknownSourceError,
)

__all__ = ["COORDINATOR_VERSIONS", "READER_STATE", "decode_source", "encode_reader_split", "encode_source", "new_split_version", "split_codec", "unframe_element"]

READER_STATE = "SourceReaderState"
COORDINATOR_VERSIONS = (0, 1)
_CODECS = {"kafka": kafka, "file": files, "number_sequence": sequence}
_CURRENT_SPLIT = {"kafka": 0, "file": 1, "number_sequence": 1}


def split_codec(kind: SourceKind):  # noqa: ANN201 - a module
    """The codec module of a kind (decode_split, encode_split, decode_enumerator, encode_enumerator)."""
    return _CODECS[kind]


def unframe_element(data: bytes, where: str) -> tuple[int, bytes]:
    """A SourceReaderState element's (split serializer version, split bytes)."""
    r = DataReader(data, where=where)
    version, n = r.i32(), r.i32()
    if n != r.remaining():
        raise CorruptFileError(f"{where}: split of {n} bytes in an element of {len(data)} bytes")
    return version, r.bytes(n)


def _unframe_coordinator(data: bytes, where: str) -> tuple[int, int, bytes, bytes]:
    r = DataReader(data, where=where)
    cv = r.i32()
    if cv not in COORDINATOR_VERSIONS:
        raise CorruptFileError(f"{where}: source coordinator serde version {cv} (known: {COORDINATOR_VERSIONS})")
    version = r.i32()
    body = r.sized()
    trailing = r.bytes(r.remaining())
    if cv >= 1 and trailing:
        raise CorruptFileError(f"{where}: {len(trailing)} unexpected bytes after the enumerator checkpoint")
    return cv, version, body, trailing


def _try(kind: SourceKind, framed: list[tuple[int, int, bytes]], coord: tuple[int, int, bytes, bytes] | None,
         where: str) -> tuple[list[ReaderSplit], EnumeratorState | None]:
    codec = _CODECS[kind]
    splits = [ReaderSplit(sub, v, codec.decode_split(v, b, f"{where} subtask {sub}")) for sub, v, b in framed]
    enum = None
    if coord is not None:
        cv, version, body, trailing = coord
        enum = codec.decode_enumerator(version, body, cv, f"{where} enumerator")
        enum.trailing = trailing
    return splits, enum


def decode_source(operator: str, elements: Sequence[tuple[int, bytes]], coordinator: bytes | None, *,
                  kind: SourceKind | None = None, subtasks: Sequence[int] = ()) -> SourceState:
    """Decode one source operator: its reader-state elements (subtask, bytes) and coordinator bytes (None: none).

    kind: the source's kind when the caller knows it (then its serializers must parse every byte); else it is the one
    kind whose serializers parse every byte exactly, or an UnknownSourceError naming the operator and the candidates."""
    where = f"operator {operator!r} source state"
    if kind is not None and kind not in KINDS:
        raise UnknownSourceError(f"operator {operator!r}: {kind!r} is not a source kind flinkstate knows ({', '.join(KINDS)})")
    framed = [(sub, *unframe_element(data, f"{where} subtask {sub}")) for sub, data in elements]
    coord = _unframe_coordinator(coordinator, f"{where} coordinator") if coordinator is not None else None
    subs = tuple(sorted(set(subtasks) | {s for s, _ in elements}))
    if kind is not None:
        try:
            splits, enum = _try(kind, framed, coord, where)
        except CorruptFileError as e:
            raise UnknownSourceError(f"operator {operator!r}: its state is not a {kind} source's: {e}") from e
        return SourceState(operator, kind, splits, enum, subs)
    if not framed and coord is None:
        raise UnknownSourceError(f"operator {operator!r} holds no split and no enumerator state: its source kind is unknown")
    found: dict[SourceKind, tuple[list[ReaderSplit], EnumeratorState | None]] = {}
    why: dict[str, str] = {}
    for k in KINDS:
        try:
            found[k] = _try(k, framed, coord, where)
        except CorruptFileError as e:
            why[k] = str(e).removeprefix(where + " ")
    if len(found) == 1:
        (k, (splits, enum)), = found.items()
        return SourceState(operator, k, splits, enum, subs)
    versions = sorted({v for _, v, _ in framed})
    what = f"split serializer versions {versions}" + (f", enumerator version {coord[1]}" if coord else "")
    if not found:
        raise UnknownSourceError(f"operator {operator!r}: a source of an unknown kind ({what}): its bytes parse as none of "
                                 f"{', '.join(KINDS)} ({'; '.join(f'{k}: {w}' for k, w in why.items())}); they stay bytes")
    raise UnknownSourceError(f"operator {operator!r}: its source state ({what}) parses as {' and as '.join(found)}: declare "
                             f"its kind (source_kinds={{{operator!r}: ...}}, --source-kind {operator}=KIND)")


def encode_reader_split(rs: ReaderSplit) -> bytes:
    """One reader-state element: version, length, the split in that version."""
    body = _CODECS[rs.split.kind].encode_split(rs.split, rs.version)
    return Out().i32(rs.version).sized(body).bytes()


def new_split_version(kind: SourceKind, state: SourceState) -> int:
    """The split serializer version a split added to this state is written with: that of its other splits."""
    for rs in state.splits:
        return rs.version
    if state.enumerator is not None and state.enumerator.split_version is not None:
        return state.enumerator.split_version
    return _CURRENT_SPLIT[kind]


def encode_source(state: SourceState) -> tuple[list[tuple[int, bytes]], bytes | None]:
    """The reader-state elements (subtask, bytes) and coordinator bytes of a (changed) source state, each in the versions
    it was read with."""
    elements = [(rs.subtask, encode_reader_split(rs)) for rs in state.splits]
    coordinator = None
    if state.enumerator is not None:
        e = state.enumerator
        body = _CODECS[e.kind].encode_enumerator(e)
        coordinator = Out().i32(e.coordinator_version).i32(e.version).sized(body).raw(e.trailing).bytes()
    return elements, coordinator
