"""What a FLIP-27 source keeps in a savepoint, decoded: splits (reader state) and the enumerator's checkpoint.

A `Split` holds the fields of one source kind's split (the others stay None); `EnumeratorState` holds the
enumerator's entries (splits with their assignment status, processed paths) and the versions it was written with,
so that it is written back in the same versions. Errors name the operator, subtask, split or path at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from flinkstate.flink.errors import SourceStateError, SplitNotFoundError, UnknownSourceError

__all__ = ["KINDS", "EnumEntry", "EnumeratorState", "ReaderSplit", "SourceKind", "SourceState", "SourceStateError",
           "Split", "SplitNotFoundError", "UnknownSourceError"]

SourceKind = Literal["kafka", "file", "number_sequence"]
KINDS: tuple[SourceKind, ...] = ("kafka", "file", "number_sequence")
Status = Literal["assigned", "unassigned", "pending"]


@dataclass(frozen=True)
class Split:
    """One split of a source, as its connector's split serializer writes it.

    kafka: topic, partition, starting_offset (or -2 earliest, -1 latest, -3 committed, Long.MIN_VALUE migrated),
    stopping_offset (Long.MIN_VALUE: none; -1 latest, -3 committed); file: path (Flink's Path as text), offset,
    length, modification_time, file_size, hosts, reader_offset and records_to_skip (the reader's CheckpointedPosition,
    None when it has none: read from the split's offset); number_sequence: number_from (the next number) to number_to.
    """

    kind: SourceKind
    split_id: str
    topic: str | None = None
    partition: int | None = None
    starting_offset: int | None = None
    stopping_offset: int | None = None
    path: str | None = None
    uri: tuple[str | None, str | None, str | None, int, str | None, str | None, str | None] | None = None
    offset: int | None = None
    length: int | None = None
    modification_time: int | None = None
    file_size: int | None = None
    hosts: tuple[str, ...] = ()
    reader_offset: int | None = None
    records_to_skip: int | None = None
    number_from: int | None = None
    number_to: int | None = None

    def with_(self, **changes: object) -> Split:
        """A copy with these fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ReaderSplit:
    """One element of a subtask's `SourceReaderState`: the split and the split serializer version it was written with."""

    subtask: int
    version: int
    split: Split


@dataclass(frozen=True)
class EnumEntry:
    """A split the enumerator remembers: assigned (to `subtask` where the state says), unassigned, or pending (files)."""

    status: Status
    split: Split
    subtask: int | None = None


@dataclass
class EnumeratorState:
    """The enumerator's checkpoint: its entries and processed paths, and the versions to write it back with.

    coordinator_version: the SourceCoordinator's framing (0 or 1); version: the enumerator serializer's; split_version:
    the split serializer version inside it (None where the format keeps no split bytes); trailing: bytes after the
    enumerator's in a version-0 framing (kept as they were)."""

    kind: SourceKind
    coordinator_version: int
    version: int
    entries: list[EnumEntry] = field(default_factory=list)
    processed_paths: list[str] = field(default_factory=list)
    split_version: int | None = None
    initial_discovery_finished: bool | None = None
    trailing: bytes = b""


@dataclass
class SourceState:
    """One source operator's state: its kind, every subtask's splits, and the enumerator (None without a coordinator)."""

    operator: str
    kind: SourceKind
    splits: list[ReaderSplit]
    enumerator: EnumeratorState | None
    subtasks: tuple[int, ...] = ()  # every subtask the reader state has (also those holding no split)

    def copy(self) -> SourceState:
        """A copy whose lists can be changed without changing this one."""
        enum = None
        if self.enumerator is not None:
            e = self.enumerator
            enum = replace(e, entries=list(e.entries), processed_paths=list(e.processed_paths))
        return SourceState(self.operator, self.kind, list(self.splits), enum, self.subtasks)
