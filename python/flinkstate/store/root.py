"""A root's read side: its log and manifest, its checkpoints' records, metadata and files, pinned checkpoints.

The part of the store that garbage collection (`registry`), the writer and maintenance are handed: it never
writes, commits or deletes, so those modules sit above it and the public `CheckpointStore` above them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, Self

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
)
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    StateNotFoundError,
)
from flinkstate.core.io import FileIO
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.filekind import Scope
from flinkstate.format.manifest import DeltaCatalog, LogRecord
from flinkstate.format.merge import order_entries
from flinkstate.format.metadata import (
    CheckpointInfo,
    CheckpointMetadata,
    OperatorMetadata,
)
from flinkstate.read.reads import ReadApi

if TYPE_CHECKING:
    from flinkstate.read.checkpoint import StoreCheckpoint

__all__ = ["StoreRoot"]


def _info(r: LogRecord) -> CheckpointInfo:
    return CheckpointInfo(
        checkpoint_id=r.checkpoint_id,
        kind=r.kind,
        status="damaged" if r.damage else r.status,
        created_at=r.created_at,
        max_parallelism=r.max_parallelism,
        files=r.files,
        rows=r.rows,
        bytes=r.bytes,
        base_checkpoint_id=r.base_checkpoint_id,
        format_version=r.format_version,
    )


class StoreRoot(ReadApi):
    """The read side of one job root (a local path, memory:// or s3:// URL): what `CheckpointStore` adds to it writes."""

    def __init__(self, path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> None:
        self.io = FileIO(path, storage_options)
        self.catalog = DeltaCatalog(self.io)

    @property
    def root(self) -> str:
        """The job root URL."""
        return self.io.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    # ------------------------------------------------------------------ listing
    def _records(self, include_discarded: bool = False) -> list[LogRecord]:
        recs = self.catalog.records()
        return recs if include_discarded else [r for r in recs if r.status == C.STATUS_COMPLETED]

    def checkpoints(self, *, include_discarded: bool = False) -> list[CheckpointInfo]:
        """Committed checkpoints and savepoints, oldest first (retained ones unless asked)."""
        records = self._records(include_discarded)
        for r in records:
            if not r.damage:  # a damaged row is listed as damaged; a newer format is not this release's to list
                _check_format_version(r)
        return [_info(r) for r in records]

    def latest_checkpoint_id(self) -> int | None:
        """Id of the newest retained checkpoint or savepoint (None when there is none)."""
        recs = self._records()
        return recs[-1].checkpoint_id if recs else None

    def record(self, checkpoint_id: int | None = None) -> LogRecord:
        """The log record of a retained checkpoint (default the latest); typed error listing ids."""
        recs = self._records()
        if checkpoint_id is None:
            if not recs:
                raise CheckpointNotFoundError(f"no committed checkpoint at {self.root}")
            return _check_version(recs[-1])
        if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int):
            raise InvalidArgumentError(f"checkpoint id must be an integer, got {checkpoint_id!r}")
        for r in recs:
            if r.checkpoint_id == checkpoint_id:
                return _check_version(r)
        ids = [r.checkpoint_id for r in recs]
        raise CheckpointNotFoundError(f"checkpoint {checkpoint_id} is not committed at {self.root}; retained checkpoints: {ids}")

    def info(self, checkpoint_id: int | None = None) -> CheckpointInfo:
        """Figures of one checkpoint (default the latest), without loading its files."""
        return _info(self.record(checkpoint_id))

    def checkpoint(self, checkpoint_id: int | None = None) -> StoreCheckpoint:
        """One checkpoint (default the latest) loaded once, pinned: figures, operators, descriptors and files.

        Every read of it (scans, `read_*` with the same id) sees that checkpoint even if newer ones are committed.
        """
        from flinkstate.read.checkpoint import StoreCheckpoint

        r = self.record(checkpoint_id)
        entries = tuple(order_entries(self.manifest_of(r)))
        return StoreCheckpoint(self.io, r, self.metadata_of(r), entries)

    def manifest_of(self, r: LogRecord) -> list[FileEntry]:
        """A checkpoint's manifest rows, all of them: a checkpoint discarded (and its rows pruned) meanwhile is
        CheckpointNotFoundError, rows missing otherwise CorruptFileError; never a partial file list."""
        entries = self.catalog.manifest(r.checkpoint_id, r.attempt_id)
        if len(entries) == r.files:
            return entries
        now = {x.checkpoint_id: x for x in self.catalog.records()}.get(r.checkpoint_id)
        if now is None or now.status != C.STATUS_COMPLETED:
            raise CheckpointNotFoundError(f"checkpoint {r.checkpoint_id} was discarded at {self.root} while it was being read")
        from flinkstate.core.errors import CorruptFileError

        raise CorruptFileError(f"checkpoint {r.checkpoint_id}: the log {self.io.url(C.LOG_TABLE)} records {r.files} files but the "
                               f"manifest {self.io.url(C.MANIFEST_TABLE)} lists {len(entries)}")

    def metadata(self, checkpoint_id: int | None = None) -> CheckpointMetadata:
        """Operators and descriptors of one checkpoint (default the latest)."""
        return self.metadata_of(self.record(checkpoint_id))

    def metadata_of(self, r: LogRecord) -> CheckpointMetadata:
        """Operators and descriptors of a log record; CorruptFileError naming the checkpoint when they do not decode."""
        try:
            return CheckpointMetadata(
                info=_info(r),
                operators=CheckpointMetadata.decode_operators(r.metadata, r.max_parallelism),
                properties=dict(r.metadata.get("properties", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            from flinkstate.core.errors import CorruptFileError

            raise CorruptFileError(f"checkpoint {r.checkpoint_id} is damaged: its metadata in the log {self.io.url(C.LOG_TABLE)} "
                                   f"does not describe its operators ({type(e).__name__}: {e})") from e

    def files(self, checkpoint_id: int | None = None) -> list[FileEntry]:
        """Every file the checkpoint uses (its shared-state manifest)."""
        r = self.record(checkpoint_id)
        return order_entries(self.manifest_of(r))

    # ------------------------------------------------------------------ lookups
    def operator(self, operator: str, checkpoint_id: int | None = None) -> OperatorMetadata:
        """One operator's metadata; OperatorNotFoundError lists the operators that exist."""
        return self.metadata(checkpoint_id).operator(operator)

    def state_descriptor(self, operator: str, state: str, checkpoint_id: int | None = None) -> KeyedStateDescriptor:
        """A keyed state's descriptor; StateNotFoundError lists the states that exist."""
        op = self.operator(operator, checkpoint_id)
        d = op.keyed_states.get(state)
        if d is None:
            raise StateNotFoundError(f"operator {operator!r} has no keyed state {state!r}; keyed states: {sorted(op.keyed_states)}")
        return d

    def timer_service(self, operator: str, service: str, checkpoint_id: int | None = None) -> TimerServiceDescriptor:
        """A timer service's descriptor; StateNotFoundError lists the services that exist."""
        op = self.operator(operator, checkpoint_id)
        d = op.timer_services.get(service)
        if d is None:
            raise StateNotFoundError(f"operator {operator!r} has no timer service {service!r}; timer services: {sorted(op.timer_services)}")
        return d

    def operator_state_descriptor(self, operator: str, name: str, checkpoint_id: int | None = None) -> OperatorStateDescriptor:
        """An operator state's descriptor; StateNotFoundError lists the operator states that exist."""
        op = self.operator(operator, checkpoint_id)
        d = op.operator_states.get(name)
        if d is None:
            raise StateNotFoundError(f"operator {operator!r} has no operator state {name!r}; operator states: {sorted(op.operator_states)}")
        return d

    def state_files(self, operator: str, state: str, checkpoint_id: int | None = None, *, scope: Literal["keyed", "timers", "operator", "coordinator"] = "keyed") -> list[FileEntry]:
        """The ordered files (oldest first) of one state at a checkpoint."""
        return self.checkpoint(checkpoint_id).state_files(operator, state if scope != "coordinator" else None, Scope(scope))

    @classmethod
    def from_io(cls, io: FileIO) -> Self:
        """A store over an existing FileIO (e.g. one shipped to a Spark executor)."""
        store = cls.__new__(cls)
        store.io = io
        store.catalog = DeltaCatalog(io)
        return store


def _check_version(r: LogRecord) -> LogRecord:
    from flinkstate.core.errors import CorruptFileError

    if r.damage:
        raise CorruptFileError(f"{r.damage}; other checkpoints are not affected and read by id")
    return _check_format_version(r)


def _check_format_version(r: LogRecord) -> LogRecord:
    """CorruptFileError naming the checkpoint and its version unless this release reads the format it was written in."""
    from flinkstate.core.errors import CorruptFileError

    unknown = r.unsupported_format()
    if unknown is not None:
        raise CorruptFileError(
            f"checkpoint {r.checkpoint_id} was written in format version {unknown}; this release reads {list(C.SUPPORTED_FORMAT_VERSIONS)}"
        )
    return r
