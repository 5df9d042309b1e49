"""The checkpoint store: list, read and write the checkpoints of one job root.

`flinkstate.open(path)` returns a `CheckpointStore`. Reads see only committed checkpoints;
writes go through a `CheckpointWriter` (`store.begin(...)`) that commits atomically.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any, Literal

from flinkstate.descriptors import KeyedStateDescriptor, OperatorStateDescriptor, TimerServiceDescriptor
from flinkstate.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    StateNotFoundError,
)
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.filekind import Scope
from flinkstate.format.manifest import DeltaCatalog, LogRecord
from flinkstate.format.merge import order_entries
from flinkstate.io import FileIO
from flinkstate.metadata import CheckpointInfo, CheckpointMetadata, OperatorMetadata
from flinkstate.reads import ReadApi

if TYPE_CHECKING:
    from flinkstate.checkpoint import StoreCheckpoint
    from flinkstate.checkpoint_writer import CheckpointWriter
    from flinkstate.maintenance import MaintenanceResult, Progress, Runner
    from flinkstate.policy import CompactionPolicy

__all__ = ["CheckpointStore", "open_store"]


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


class CheckpointStore(ReadApi):
    """Checkpoints and savepoints of one job root (a local path, memory:// or s3:// URL)."""

    def __init__(self, path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> None:
        self.io = FileIO(path, storage_options)
        self.catalog = DeltaCatalog(self.io)

    @property
    def root(self) -> str:
        """The job root URL."""
        return self.io.root

    def __repr__(self) -> str:
        return f"CheckpointStore({self.root!r})"

    # ------------------------------------------------------------------ listing
    def _records(self, include_discarded: bool = False) -> list[LogRecord]:
        recs = self.catalog.records()
        return recs if include_discarded else [r for r in recs if r.status == C.STATUS_COMPLETED]

    def checkpoints(self, *, include_discarded: bool = False) -> list[CheckpointInfo]:
        """Committed checkpoints and savepoints, oldest first (retained ones unless asked)."""
        return [_info(r) for r in self._records(include_discarded)]

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
        from flinkstate.checkpoint import StoreCheckpoint

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
        from flinkstate.errors import CorruptFileError

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
            from flinkstate.errors import CorruptFileError

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

    def begin(
        self,
        *,
        kind: Literal["checkpoint", "savepoint"] = "checkpoint",
        checkpoint_id: int | None = None,
        base: int | Literal["latest"] | None = "latest",
        max_parallelism: int | None = None,
        at_log_version: int | None = None,
    ) -> CheckpointWriter:
        """Start writing a new checkpoint or savepoint on top of `base` (everything else is carried over).

        at_log_version: plan against that version of the log (a two-phase write: the driver planned,
        executors wrote files, the driver commits); a checkpoint committed since then is a conflict.
        """
        from flinkstate.checkpoint_writer import CheckpointWriter

        return CheckpointWriter(self, kind=kind, checkpoint_id=checkpoint_id, base=base, max_parallelism=max_parallelism,
                                at_log_version=at_log_version)

    @classmethod
    def from_io(cls, io: FileIO) -> CheckpointStore:
        """A store over an existing FileIO (e.g. one shipped to a Spark executor)."""
        store = cls.__new__(cls)
        store.io = io
        store.catalog = DeltaCatalog(io)
        return store

    def discard(self, checkpoint_ids: list[int]) -> list[str]:
        """Discard checkpoints (not savepoints) and delete shared files no retained checkpoint uses."""
        if (isinstance(checkpoint_ids, (str, bytes)) or not isinstance(checkpoint_ids, (list, tuple))
                or any(isinstance(c, bool) or not isinstance(c, int) for c in checkpoint_ids)):
            raise InvalidArgumentError(f"checkpoint_ids must be a list of checkpoint ids (integers), got {checkpoint_ids!r}")
        _refuse_gc_if_damaged(self)
        from flinkstate.registry import discard_checkpoints

        return discard_checkpoints(self, checkpoint_ids)

    def collect_orphans(self, retention: dt.timedelta | None = None) -> list[str]:
        """Delete files no checkpoint can ever use: folders of killed savepoint attempts and files inside
        the Delta tables no version references, older than `retention` (default 7 days, as Delta's VACUUM)."""
        from flinkstate.registry import ORPHAN_RETENTION, collect_orphans

        return collect_orphans(self, ORPHAN_RETENTION if retention is None else retention)

    def retain(self, num_retained: int) -> list[str]:
        """Keep the newest `num_retained` checkpoints (savepoints are never touched), then collect
        garbage; returns the deleted paths."""
        if isinstance(num_retained, bool) or not isinstance(num_retained, int) or num_retained < 1:
            raise InvalidArgumentError(f"num_retained must be an int >= 1, got {num_retained!r}")

        def beyond(retained: list[LogRecord]) -> list[int]:  # chosen at the log version the discard is planned on
            cps = [r.checkpoint_id for r in retained if r.kind == C.CHECKPOINT]
            return cps[:-num_retained] if len(cps) > num_retained else []

        _refuse_gc_if_damaged(self)
        from flinkstate.registry import discard_checkpoints

        return discard_checkpoints(self, beyond)

    def compact(self, operator: str | None = None, state: str | None = None, *, policy: CompactionPolicy | None = None,
                progress: Progress | None = None, run: Runner | None = None) -> MaintenanceResult:
        """Merge delta chains into full files per key-group range as one new checkpoint; every read stays identical.

        One state, an operator's, or all (keyed states and timer services); without a policy every range holding a
        delta, with one only the ranges past its threshold. Nothing due: no checkpoint (`result.checkpoint_id` None).
        """
        from flinkstate.maintenance import compact

        return compact(self, operator, state, policy=policy, progress=progress, run=run)

    def expire(self, operator: str | None = None, state: str | None = None, *, at: int | None = None,
               progress: Progress | None = None, run: Runner | None = None) -> MaintenanceResult:
        """Drop the entries of one TTL state (or all) expired at `at` (epoch ms, default now) as one new checkpoint;
        `result.dropped` counts them per state."""
        from flinkstate.maintenance import expire

        return expire(self, operator, state, at=at, progress=progress, run=run)


def _check_version(r: LogRecord) -> LogRecord:
    from flinkstate.errors import CorruptFileError

    if r.damage:
        raise CorruptFileError(f"{r.damage}; other checkpoints are not affected and read by id")
    versions = {r.format_version, r.metadata.get("format_version", C.FORMAT_VERSION)}
    unknown = [v for v in versions if v not in C.SUPPORTED_FORMAT_VERSIONS]
    if unknown:
        raise CorruptFileError(
            f"checkpoint {r.checkpoint_id} was written in format version {unknown[0]}; this release reads {list(C.SUPPORTED_FORMAT_VERSIONS)}"
        )
    return r


def _refuse_gc_if_damaged(store: CheckpointStore) -> None:
    """CorruptFileError unless every retained checkpoint's log row reads: GC never runs on a partial view."""
    from flinkstate.errors import CorruptFileError

    damaged = [r for r in store.catalog.records() if r.damage and r.status == C.STATUS_COMPLETED]
    if damaged:
        raise CorruptFileError(f"garbage collection refused at {store.root}, nothing deleted: {damaged[0].damage}; "
                               f"damaged checkpoints: {[r.checkpoint_id for r in damaged]}")


def open_store(path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None, **flink: Any) -> Any:
    """Open the checkpoint store at a local path or fsspec URL (it may be empty).

    A Flink savepoint, retained checkpoint or job checkpoint folder (`_metadata`, `chk-N/`) opens as a
    read-only `flinkstate.flink.source.FlinkSource` with the same read API; `flink` keywords
    (raw_values, row_fields, ttl, reference_ms) go to it and are refused for a flinkstate root.
    """
    from flinkstate.errors import InvalidArgumentError
    from flinkstate.flink.source import FlinkSource, is_flink_path

    if is_flink_path(os.fspath(path), storage_options):
        return FlinkSource(path, storage_options=storage_options, **flink)
    if flink:
        raise InvalidArgumentError(f"{os.fspath(path)} is not a Flink savepoint or checkpoint: options {sorted(flink)} apply to those only")
    return CheckpointStore(path, storage_options)
