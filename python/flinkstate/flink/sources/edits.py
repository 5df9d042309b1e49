"""Rewind and skip: changes to a source's positions, applied to its reader state and its enumerator state together.

Each edit names what it changes; one the state cannot take (a partition or file it does not hold, an offset below
zero, an edit for another kind of source) is a typed error naming it, and `apply_edits` returns a changed copy only
when every edit applied (the state given is never changed).

Kafka: `SetOffset` (a number, or earliest / latest / committed: the connector's markers) sets the partition's split in
whichever reader holds it and in the enumerator where its version keeps offsets (v0, v3); `DropTopic`/`DropPartition`
remove it from both; `AddPartition` gives a new partition to the reader `KafkaSourceEnumerator.getSplitOwner` would
(or the one named) and records it as assigned. Files: `RereadFile` rewinds a file's split (held by a reader or pending
in the enumerator) to its start, or to a byte offset / a number of records to skip; a file already read to its end (only
a processed path) is forgotten instead, so that a continuously monitoring source enumerates and reads it again;
`ForgetPath` does only that. Number sequences: `SetSequence` moves a split's next number.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flinkstate.core.errors import InvalidArgumentError
from flinkstate.flink.sources.codec import new_split_version
from flinkstate.flink.sources.kafka import MARKERS, kafka_split, split_owner
from flinkstate.flink.sources.model import EnumEntry, ReaderSplit, SourceState, Split, SplitNotFoundError

__all__ = ["AddPartition", "DropPartition", "DropSplit", "DropTopic", "Edit", "ForgetPath", "MarkProcessed", "RereadFile", "SetOffset", "SetSequence", "apply_edits",
           "kafka_offset", "parse_edit"]


@dataclass(frozen=True)
class SetOffset:
    """Kafka: start `topic` partition `partition` at `offset` (>= 0, or "earliest", "latest", "committed")."""

    topic: str
    partition: int
    offset: int | str


@dataclass(frozen=True)
class DropTopic:
    """Kafka: forget every partition of `topic` (readers and enumerator)."""

    topic: str


@dataclass(frozen=True)
class DropPartition:
    """Kafka: forget one partition (readers and enumerator)."""

    topic: str
    partition: int


@dataclass(frozen=True)
class AddPartition:
    """Kafka: a partition the state does not hold, read from `offset` by `subtask` (default: the connector's owner)."""

    topic: str
    partition: int
    offset: int | str
    subtask: int | None = None


@dataclass(frozen=True)
class RereadFile:
    """Files: read `path` again from its start, from byte `offset`, or skipping `records` records."""

    path: str
    offset: int | None = None
    records: int = 0


@dataclass(frozen=True)
class ForgetPath:
    """Files: forget that `path` was enumerated, so a continuously monitoring source reads it again."""

    path: str


@dataclass(frozen=True)
class SetSequence:
    """Number sequences (NumberSequenceSource, DataGeneratorSource): the split `split_id` goes on from `next`."""

    split_id: str
    next: int


@dataclass(frozen=True)
class MarkProcessed:
    """Files: record `path` as already enumerated, so a continuously monitoring source never reads it (skip a file)."""

    path: str


@dataclass(frozen=True)
class DropSplit:
    """Any source: drop split `split_id` from the readers (of `subtask`, or all) and the enumerator, or from the
    enumerator alone (its unassigned or pending splits)."""

    split_id: str
    subtask: int | None = None
    enumerator_only: bool = False


Edit = SetOffset | DropTopic | DropPartition | AddPartition | RereadFile | ForgetPath | SetSequence | MarkProcessed | DropSplit
_KIND = {SetOffset: "kafka", DropTopic: "kafka", DropPartition: "kafka", AddPartition: "kafka", RereadFile: "file",
         ForgetPath: "file", SetSequence: "number_sequence", MarkProcessed: "file", DropSplit: None}


def kafka_offset(value: int | str, what: str) -> int:
    """An offset as the Kafka split stores it: a number >= 0, or a marker's value (earliest -2, latest -1, committed -3)."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in MARKERS:
            return MARKERS[v]
        try:
            value = int(v)
        except ValueError:
            raise InvalidArgumentError(f"{what}: offset {value!r} is not a number nor one of {sorted(MARKERS)}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{what}: offset {value!r} is not a number")
    if value < 0:
        raise InvalidArgumentError(f"{what}: offset {value} is below zero (earliest, latest and committed are given by name)")
    return value


def _listing(names: Iterable[str], limit: int = 12) -> str:
    names = sorted(set(names))
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "") if names else "nothing"


def _same_path(split_path: str | None, uri: tuple | None, given: str) -> bool:
    return split_path == given or (uri is not None and uri[4] == given)


def apply_edits(state: SourceState, edits: Sequence[Edit], parallelism: int | None = None) -> SourceState:
    """A copy of state with every edit applied (the readers and the enumerator together), or a typed error and no change.

    parallelism: the readers' count (for AddPartition's owner); default the subtasks the reader state has."""
    out = state.copy()
    for edit in edits:
        if type(edit) not in _KIND:
            raise InvalidArgumentError(f"operator {state.operator!r}: {edit!r} is not a source edit")
        kind = _KIND[type(edit)]
        if kind is not None and kind != out.kind:
            raise InvalidArgumentError(f"operator {state.operator!r} is a {out.kind} source: {type(edit).__name__} applies to {kind} sources")
        _apply(out, edit, parallelism)
    return out


def _kafka_held(out: SourceState) -> set[str]:
    held = {rs.split.split_id for rs in out.splits}
    if out.enumerator is not None:
        held |= {e.split.split_id for e in out.enumerator.entries}
    return held


def _apply(out: SourceState, edit: Edit, parallelism: int | None) -> None:
    enum = out.enumerator
    op = out.operator
    if isinstance(edit, SetOffset):
        sid = f"{edit.topic}-{edit.partition}"
        offset = kafka_offset(edit.offset, f"operator {op!r} partition {sid}")
        hit = False
        for i, rs in enumerate(out.splits):
            if rs.split.topic == edit.topic and rs.split.partition == edit.partition:
                out.splits[i] = ReaderSplit(rs.subtask, rs.version, rs.split.with_(starting_offset=offset))
                hit = True
        if enum is not None:
            for i, e in enumerate(enum.entries):
                if e.split.topic == edit.topic and e.split.partition == edit.partition:
                    keeps_offsets = enum.version in (0, 3)
                    if keeps_offsets:
                        enum.entries[i] = EnumEntry(e.status, e.split.with_(starting_offset=offset), e.subtask)
                    elif not hit:
                        raise InvalidArgumentError(f"operator {op!r}: partition {sid} is only in the enumerator, whose state "
                                                   f"(version {enum.version}) keeps no offsets: no reader holds it to start at {edit.offset}")
                    hit = True
        if not hit:
            raise SplitNotFoundError(f"operator {op!r}: the source state holds no partition {sid} (it holds {_listing(_kafka_held(out))})")
    elif isinstance(edit, (DropTopic, DropPartition)):
        def gone(s: Split) -> bool:
            return s.topic == edit.topic and (isinstance(edit, DropTopic) or s.partition == edit.partition)

        what = f"topic {edit.topic!r}" if isinstance(edit, DropTopic) else f"partition {edit.topic}-{edit.partition}"
        before = len(out.splits) + (len(enum.entries) if enum else 0)
        out.splits = [rs for rs in out.splits if not gone(rs.split)]
        if enum is not None:
            enum.entries = [e for e in enum.entries if not gone(e.split)]
        if before == len(out.splits) + (len(enum.entries) if enum else 0):
            raise SplitNotFoundError(f"operator {op!r}: the source state holds no {what} (it holds {_listing(_kafka_held(out))})")
    elif isinstance(edit, AddPartition):
        sid = f"{edit.topic}-{edit.partition}"
        if edit.partition < 0:
            raise InvalidArgumentError(f"operator {op!r}: partition {edit.partition} of topic {edit.topic!r} is below zero")
        if sid in _kafka_held(out):
            raise InvalidArgumentError(f"operator {op!r}: the source state already holds partition {sid}: set its offset instead")
        offset = kafka_offset(edit.offset, f"operator {op!r} partition {sid}")
        readers = parallelism or max(len(out.subtasks), 1)
        subtask = edit.subtask if edit.subtask is not None else split_owner(edit.topic, edit.partition, readers)
        if not 0 <= subtask < readers:
            raise InvalidArgumentError(f"operator {op!r}: subtask {subtask} is not one of its {readers} readers")
        split = kafka_split(edit.topic, edit.partition, offset)
        out.splits.append(ReaderSplit(subtask, new_split_version("kafka", out), split))
        if enum is not None:
            enum.entries.append(EnumEntry("assigned", split if enum.version in (0, 3) else kafka_split(edit.topic, edit.partition),
                                          subtask if enum.version == 0 else None))
    elif isinstance(edit, RereadFile):
        _reread(out, edit)
    elif isinstance(edit, ForgetPath):
        _forget(out, edit.path)
    elif isinstance(edit, MarkProcessed):
        if enum is None:
            raise SplitNotFoundError(f"operator {op!r} has no enumerator state to record path {edit.path!r} in")
        if not _processed(enum.processed_paths, edit.path):
            enum.processed_paths.append(edit.path)
    elif isinstance(edit, DropSplit):
        _drop_split(out, edit)
    elif isinstance(edit, SetSequence):
        if edit.next < 0:
            raise InvalidArgumentError(f"operator {op!r}: sequence position {edit.next} is below zero")
        hit = False
        for i, rs in enumerate(out.splits):
            if rs.split.split_id == edit.split_id:
                out.splits[i] = ReaderSplit(rs.subtask, rs.version, rs.split.with_(number_from=edit.next))
                hit = True
        if enum is not None:
            for i, e in enumerate(enum.entries):
                if e.split.split_id == edit.split_id:
                    enum.entries[i] = EnumEntry(e.status, e.split.with_(number_from=edit.next), e.subtask)
                    hit = True
        if not hit:
            held = [rs.split.split_id for rs in out.splits] + ([e.split.split_id for e in enum.entries] if enum else [])
            raise SplitNotFoundError(f"operator {op!r}: the source state holds no sequence split {edit.split_id!r} (it holds {_listing(held)})")


def _drop_split(out: SourceState, edit: DropSplit) -> None:
    enum, n = out.enumerator, len(out.splits) + (len(out.enumerator.entries) if out.enumerator else 0)
    if not edit.enumerator_only:
        out.splits = [rs for rs in out.splits if not (rs.split.split_id == edit.split_id and edit.subtask in (None, rs.subtask))]
    if enum is not None:
        keep = ("assigned",) if edit.enumerator_only else ()
        enum.entries = [e for e in enum.entries if not (e.split.split_id == edit.split_id and e.status not in keep)]
    if n == len(out.splits) + (len(enum.entries) if enum else 0):
        held = [rs.split.split_id for rs in out.splits] + ([e.split.split_id for e in enum.entries] if enum else [])
        where = "unassigned or pending split" if edit.enumerator_only else "split"
        sub = f" of subtask {edit.subtask}" if edit.subtask is not None else ""
        raise SplitNotFoundError(f"operator {out.operator!r}: the source state holds no {where} {edit.split_id!r}{sub} (it holds {_listing(held)})")


def _position(edit: RereadFile, op: str) -> tuple[int | None, int | None]:
    if edit.offset is not None and edit.offset < 0:
        raise InvalidArgumentError(f"operator {op!r} file {edit.path!r}: offset {edit.offset} is below zero")
    if edit.records < 0:
        raise InvalidArgumentError(f"operator {op!r} file {edit.path!r}: records to skip {edit.records} is below zero")
    if edit.offset is None and edit.records == 0:
        return None, None  # no position: the reader starts at the split's own offset
    return (-1 if edit.offset is None else edit.offset), edit.records


def _file_paths(out: SourceState) -> list[str]:
    paths = [rs.split.path or "" for rs in out.splits]
    if out.enumerator is not None:
        paths += [e.split.path or "" for e in out.enumerator.entries] + out.enumerator.processed_paths
    return paths


def _reread(out: SourceState, edit: RereadFile) -> None:
    op, enum = out.operator, out.enumerator
    reader_offset, records = _position(edit, op)
    hit = False
    for i, rs in enumerate(out.splits):
        if _same_path(rs.split.path, rs.split.uri, edit.path):
            out.splits[i] = ReaderSplit(rs.subtask, rs.version, rs.split.with_(reader_offset=reader_offset, records_to_skip=records))
            hit = True
    if enum is not None:
        for i, e in enumerate(enum.entries):
            if _same_path(e.split.path, e.split.uri, edit.path):
                enum.entries[i] = EnumEntry(e.status, e.split.with_(reader_offset=reader_offset, records_to_skip=records), e.subtask)
                hit = True
    if hit:
        return
    if enum is not None and _processed(enum.processed_paths, edit.path):
        if reader_offset is not None:
            raise SplitNotFoundError(f"operator {op!r}: file {edit.path!r} was read to its end (no split holds it): it can be "
                                     f"read again from its start only (forget its path), not from offset {edit.offset}")
        _forget(out, edit.path)
        return
    raise SplitNotFoundError(f"operator {op!r}: the source state holds no file {edit.path!r} (it holds {_listing(_file_paths(out))})")


def _processed(paths: list[str], given: str) -> list[int]:
    return [i for i, p in enumerate(paths) if p == given or p.partition(":")[2] == given]


def _forget(out: SourceState, path: str) -> None:
    op, enum = out.operator, out.enumerator
    if enum is None:
        raise SplitNotFoundError(f"operator {op!r} has no enumerator state: no processed path {path!r} to forget")
    hits = _processed(enum.processed_paths, path)
    if not hits:
        raise SplitNotFoundError(f"operator {op!r}: the enumerator has no processed path {path!r} (it has {_listing(enum.processed_paths)})")
    reading = [rs.subtask for rs in out.splits if _same_path(rs.split.path, rs.split.uri, path)]
    pending = [e for e in enum.entries if _same_path(e.split.path, e.split.uri, path)]
    if reading or pending:
        where = f"subtask {reading[0]} reads it" if reading else "the enumerator still has it pending"
        raise InvalidArgumentError(f"operator {op!r}: file {path!r} is not read to its end ({where}): forgetting it would read it "
                                   f"twice; rewind it instead")
    enum.processed_paths = [p for i, p in enumerate(enum.processed_paths) if i not in set(hits)]


def parse_edit(text: str) -> Edit:
    """An edit from its command-line form (see `flinkstate rewind --help`)."""
    verb, _, rest = text.partition(":")
    args = rest.split(":") if rest else []
    try:
        if verb == "offset" and len(args) == 3:
            return SetOffset(args[0], int(args[1]), args[2])
        if verb == "drop-topic" and len(args) == 1:
            return DropTopic(args[0])
        if verb == "drop-partition" and len(args) == 2:
            return DropPartition(args[0], int(args[1]))
        if verb == "add-partition" and len(args) in (3, 4):
            return AddPartition(args[0], int(args[1]), args[2], int(args[3]) if len(args) == 4 else None)
        if verb == "sequence" and len(args) == 2:
            return SetSequence(args[0], int(args[1]))
    except ValueError as e:
        raise InvalidArgumentError(f"edit {text!r}: {e}") from e
    raise InvalidArgumentError(f"edit {text!r}: expected offset:TOPIC:PARTITION:OFFSET, drop-topic:TOPIC, drop-partition:TOPIC:PARTITION, "
                               f"add-partition:TOPIC:PARTITION:OFFSET[:SUBTASK] or sequence:SPLIT:NEXT")
