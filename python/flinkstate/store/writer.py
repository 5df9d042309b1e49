"""Writing one checkpoint or savepoint: data files first, then one idempotent Delta commit.

A `CheckpointWriter` starts from a base checkpoint and carries every file of it over by
reference, except what is replaced. Savepoints copy what they carry into their own folder
so they are self-contained. The commit is planned against the log version read in `begin`.
"""

from __future__ import annotations

import datetime as dt
import numbers
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from flinkstate.core.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    TimerServiceDescriptor,
    same_schema,
    validate_name,
)
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    CorruptFileError,
    FlinkStateError,
    InvalidArgumentError,
    OperatorNotFoundError,
    SchemaMismatchError,
    StateNotFoundError,
    StorageError,
)
from flinkstate.core.keygroups import (
    UPPER_BOUND_MAX_PARALLELISM,
    default_max_parallelism,
)
from flinkstate.format import constants as C
from flinkstate.format.datafile import FileEntry
from flinkstate.format.filekind import FileKind
from flinkstate.format.integrity import check_carried_files, check_writable
from flinkstate.format.metadata import (
    CheckpointInfo,
    CheckpointMetadata,
    OperatorMetadata,
)
from flinkstate.format.writer import (
    data_dir,
    write_coordinator_file,
    write_operator_state_file,
    write_state_files,
    write_timer_files,
)
from flinkstate.store.registry import pinned, track_writer, untrack_writer

if TYPE_CHECKING:
    from flinkstate.format.logrows import Collection
    from flinkstate.read.checkpoint import StoreCheckpoint
    from flinkstate.store.root import StoreRoot

__all__ = ["CheckpointWriter"]

Scope = Literal["keyed", "timers", "operator", "coordinator"]
#: pauses (s) before each fresh read of the log that tells whether a commit whose storage call failed had landed
_OUTCOME_READS = (0.0, 0.2, 1.0)


def _valid_max_parallelism(value: Any) -> int:
    """value when it is a max parallelism Flink allows, else InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(f"max_parallelism must be an integer in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {value!r}")
    return value


def _same_types(a: Any, b: Any) -> bool:
    return same_schema(a, b)  # a TTL config change (not on/off) is not a schema change


class CheckpointWriter:
    """Builds one checkpoint; use as a context manager or call `commit()` / `abort()`."""

    def __init__(
        self,
        store: StoreRoot,
        *,
        kind: Literal["checkpoint", "savepoint"],
        checkpoint_id: int | None,
        base: int | Literal["latest"] | None,
        max_parallelism: int | None,
        at_log_version: int | None = None,
    ) -> None:
        if kind not in (C.CHECKPOINT, C.SAVEPOINT):
            raise InvalidArgumentError(f"kind must be 'checkpoint' or 'savepoint', got {kind!r}")
        if not (base is None or base == "latest" or (isinstance(base, numbers.Integral) and not isinstance(base, bool))):
            raise InvalidArgumentError(f"base must be a checkpoint id (an int), 'latest' or None, got {base!r}")
        self.store = store
        self.io = store.io
        self.kind = kind
        self.attempt_id = uuid.uuid4().hex
        catalog = store.catalog
        check_writable(self.io)
        catalog.ensure_tables()
        current = catalog.log_version()
        assert current is not None
        if at_log_version is not None:  # a two-phase write commits against the log version its plan read
            if isinstance(at_log_version, bool) or not isinstance(at_log_version, int) or not 0 <= at_log_version <= current:
                raise InvalidArgumentError(f"at_log_version must be a log version in [0, {current}] of {store.root}, got {at_log_version!r}")
            current = at_log_version
        self.planned_version: int = current
        all_records = catalog.records(self.planned_version)
        retained = [r for r in all_records if r.status == C.STATUS_COMPLETED]
        if base == "latest":
            base_rec = retained[-1] if retained else None
        elif base is None:
            base_rec = None
        elif int(base) in pinned(store):
            # a pending snapshot built on it: it may have been discarded since, its files are kept
            base_rec = next((r for r in all_records if r.checkpoint_id == int(base)), None) or store.record(int(base))
        else:
            base_rec = store.record(int(base))
        if base_rec is not None and base_rec.damage:  # never build on a checkpoint whose operators are unknown
            raise CorruptFileError(f"{base_rec.damage}; pass base=<an intact checkpoint id> or discard it; nothing was written")
        self.base = base_rec
        used = {r.checkpoint_id for r in all_records}
        if checkpoint_id is None:
            checkpoint_id = (max(used) + 1) if used else 1
        if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int) or checkpoint_id < 0:
            raise InvalidArgumentError(f"checkpoint id must be a non-negative integer, got {checkpoint_id!r}")
        if checkpoint_id in used:
            raise CommitConflictError(f"checkpoint {checkpoint_id} is already committed at {store.root}")
        if used and checkpoint_id < max(used):
            # files merge in order of the checkpoint that created them: ids must increase
            raise InvalidArgumentError(f"checkpoint id {checkpoint_id} must be greater than the newest committed id {max(used)} at {store.root}")
        self.checkpoint_id = checkpoint_id
        base_mp = base_rec.max_parallelism if base_rec else None
        mp = _valid_max_parallelism(max_parallelism if max_parallelism is not None else (base_mp or default_max_parallelism(1)))
        self.max_parallelism = mp  # the checkpoint's default: an operator added without its own gets it
        self._rewritten: set[tuple[str, str, str]] = set()
        self.operators: dict[str, OperatorMetadata] = {}
        self.properties: dict[str, str] = {}
        self._entries: list[FileEntry] = []
        self._new_paths: list[str] = []
        self._kept: set[str] = set()
        self._done = False
        #: the log row of a prepared commit whose outcome is not known yet (files and manifest rows recorded)
        self._row: dict[str, Any] | None = None
        #: the committed checkpoint's figures, once `commit()` succeeded
        self.info: CheckpointInfo | None = None
        base_operators = {} if base_rec is None else store.metadata_of(base_rec).operators  # typed error if they do not decode
        track_writer(self)  # from here on garbage collection keeps the base and every file referenced
        self._base_paths: frozenset[str] = frozenset()
        if base_rec is not None:
            self.operators = {u: o.copy() for u, o in base_operators.items()}
            self.properties = dict(base_rec.metadata.get("properties", {}))
            try:
                self._entries = list(store.manifest_of(base_rec))  # never a partial list: a base pruned meanwhile is an error
            except CheckpointNotFoundError as e:
                self._release()
                raise CommitConflictError(f"checkpoint {checkpoint_id}: its base checkpoint {base_rec.checkpoint_id} was discarded "
                                          f"by a concurrent writer while this write began at {store.root}; begin again") from e
            self._base_paths = frozenset(e.path for e in self._entries)
        self._renamed_from: dict[str, str] = {}  # new uid -> uid in the base checkpoint
        self._seq = 0
        # each base operator's max parallelism (by its uid here): an operator whose value changes is rescaled
        self._base_max_parallelism: dict[str, int] = {u: o.max_parallelism for u, o in self.operators.items() if o.max_parallelism is not None}
        if max_parallelism is not None:
            self.set_max_parallelism(mp)  # every operator takes the max parallelism begin was given

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._done:
            self.commit()

    # ------------------------------------------------------------------ helpers
    def _op(self, operator: str, create: bool = True) -> OperatorMetadata:
        if self._done:
            raise InvalidArgumentError(f"checkpoint {self.checkpoint_id}: this writer already committed or aborted; "
                                       f"operator {operator!r} cannot be changed in it (begin a new checkpoint)")
        validate_name(operator, "operator uid")
        op = self.operators.get(operator)
        if op is None:
            if not create:
                raise OperatorNotFoundError(f"operator {operator!r} is not in the base checkpoint; operators: {sorted(self.operators)}")
            op = self.operators[operator] = OperatorMetadata(uid=operator, max_parallelism=self.max_parallelism)
        return op

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _drop(self, operator: str, scope: str, name: str | None, within: tuple[int, int] | None = None) -> None:
        keep = []
        for e in self._entries:
            if e.operator == operator and FileKind(e.kind).scope.value == scope and (scope == "coordinator" or e.state == name):
                if within is None or (within[0] <= e.key_group_start and e.key_group_end <= within[1]):
                    continue
            keep.append(e)
        self._entries = keep

    def _add(self, entries: Sequence[FileEntry]) -> None:
        for e in entries:
            self._entries.append(e)
            self._new_paths.append(e.path)

    def _check_keyed(self, operator: str, desc: KeyedStateDescriptor, allow_schema_change: bool) -> OperatorMetadata:
        _check_descriptor(operator, desc, KeyedStateDescriptor, "KeyedStateDescriptor")
        op = self._op(operator)
        if desc.name in op.timer_services:
            raise InvalidArgumentError(f"operator {operator!r}: {desc.name!r} is already a timer service")
        old = op.keyed_states.get(desc.name)
        if old is not None and not allow_schema_change and not _same_types(old, desc):
            ttl = "" if old.ttl_enabled == desc.ttl_enabled else (
                f" (TTL turned {'on' if desc.ttl_enabled else 'off'}: that changes what is stored; rewrite the state in full)")
            raise SchemaMismatchError(
                f"operator {operator!r} state {desc.name!r}: declared as {old.kind} "
                f"key {old.key_type} value {old.value_type}, got {desc.kind} key {desc.key_type} value {desc.value_type}{ttl}"
            )
        return op

    def declare(self, operator: str, descriptor: KeyedStateDescriptor | TimerServiceDescriptor) -> None:
        """Record how the job that writes this checkpoint declares a state or timer service, whether or not its data
        changes: what Flink allows to change on restore (FLIP-25: TTL duration, update type, visibility, cleanup) is
        then this checkpoint's, and reads, `expire`, `compact`, changes and export judge it by it. A change of types
        (or TTL turned on or off, which changes what is stored) is SchemaMismatchError, as in a put."""
        if isinstance(descriptor, TimerServiceDescriptor):
            op = self._op(operator)
            old = op.timer_services.get(descriptor.name)
            if descriptor.name in op.keyed_states:
                raise InvalidArgumentError(f"operator {operator!r}: {descriptor.name!r} is already a keyed state")
            if old is not None and not _same_types(old, descriptor):
                raise SchemaMismatchError(f"operator {operator!r} timer service {descriptor.name!r}: types differ from the stored ones")
            op.timer_services[descriptor.name] = descriptor
            return
        self._check_keyed(operator, descriptor, False).keyed_states[descriptor.name] = descriptor

    # ------------------------------------------------------------------ keyed state
    def put_state(
        self,
        operator: str,
        descriptor: KeyedStateDescriptor,
        table: pa.Table,
        *,
        mode: Literal["full", "delta"] = "full",
        key_group_range: tuple[int, int] | None = None,
        ranges: Sequence[tuple[int, int]] | None = None,
        allow_schema_change: bool = False,
    ) -> list[FileEntry]:
        """Write a keyed state: `full` replaces it (in `key_group_range` if given), `delta` upserts/deletes.

        A full put must hold each entry (key, namespace, user key) once: DuplicateKeyError otherwise.
        """
        if mode not in ("full", "delta"):
            raise InvalidArgumentError(f"mode must be 'full' or 'delta', got {mode!r}")
        op = self._check_keyed(operator, descriptor, allow_schema_change or mode == "full" and key_group_range is None)
        if mode == "delta" and descriptor.name not in op.keyed_states:
            op.keyed_states[descriptor.name] = descriptor
        if ranges is None and key_group_range is not None:
            ranges = [key_group_range]
        entries = write_state_files(
            self.io, operator, descriptor, table, checkpoint_id=self.checkpoint_id, checkpoint_kind=self.kind,
            max_parallelism=self.max_parallelism_of(operator), delta=mode == "delta", ranges=ranges, seq=self._next_seq(),
        )
        self.add_state_files(operator, descriptor, entries, mode=mode, key_group_range=key_group_range, allow_schema_change=True)
        return entries

    def delete(self, operator: str, name: str, keys: pa.Table) -> list[FileEntry]:
        """Delete entries of a keyed state (a delta): a row of `keys` with a `key` alone removes that key's whole entry
        (every user key of a map state, a list state's list, in every namespace); `namespace` and `user_key` columns
        narrow it to those. The entries are found in the checkpoint as this writer has it (its base and what it wrote)."""
        from flinkstate.core.keygroups import assign_key_groups, is_supported_key_type
        from flinkstate.format.deletes import deleted_columns, named_entries, needs_stored_entries, tombstones
        from flinkstate.format.schemas import as_table

        op = self._op(operator, create=False)
        desc = op.keyed_states.get(name)
        if desc is None:
            raise StateNotFoundError(f"cannot delete from operator {operator!r} state {name!r}: it does not exist; keyed states: {sorted(op.keyed_states)}")
        what = f"operator {operator!r} state {name!r}"
        keys = as_table(keys, what)
        given = deleted_columns(desc, keys.column_names, what)
        entries = keys.select(given)
        if needs_stored_entries(desc, given):
            kgs = None  # only the deleted keys' key groups are read, where keys hash
            if is_supported_key_type(desc.key_type):
                kgs = sorted(set(assign_key_groups(keys.column(C.COL_KEY).cast(desc.key_type), self.max_parallelism_of(operator)).to_pylist()))
            stored = self.view().scan(operator, name, key_groups=kgs, raw=True).to_arrow()
            entries = named_entries(stored, entries, desc)
        return self.put_state(operator, desc, tombstones(entries, desc), mode="delta")

    def view(self) -> StoreCheckpoint:
        """The checkpoint this writer is building, pinned as a StoreCheckpoint (its operators and files so far) to scan."""
        from flinkstate.format.manifest import LogRecord
        from flinkstate.format.merge import order_entries
        from flinkstate.format.metadata import CheckpointInfo
        from flinkstate.read.checkpoint import StoreCheckpoint

        entries = tuple(order_entries(self.entries()))
        created = dt.datetime.now(dt.timezone.utc)
        base = None if self.base is None else self.base.checkpoint_id
        rec = LogRecord(self.checkpoint_id, self.attempt_id, self.kind, C.STATUS_COMPLETED, created, self.max_parallelism, C.FORMAT_VERSION,
                        base, len(entries), 0, sum(e.bytes for e in entries), {})
        info = CheckpointInfo(checkpoint_id=self.checkpoint_id, kind=self.kind, status=C.STATUS_COMPLETED, created_at=created,
                              max_parallelism=self.max_parallelism, files=len(entries), rows=0, bytes=rec.bytes, base_checkpoint_id=base,
                              format_version=C.FORMAT_VERSION)
        return StoreCheckpoint(self.io, rec, CheckpointMetadata(info=info, operators=dict(self.operators), properties=dict(self.properties)),
                               entries, committed=False)

    def add_state_files(
        self,
        operator: str,
        descriptor: KeyedStateDescriptor,
        entries: Sequence[FileEntry],
        *,
        mode: Literal["full", "delta"] = "full",
        key_group_range: tuple[int, int] | None = None,
        allow_schema_change: bool = False,
    ) -> None:
        """Register files already written (e.g. by Spark executors) for a keyed state."""
        op = self._check_keyed(operator, descriptor, allow_schema_change)
        if mode == "full":
            self._drop(operator, "keyed", descriptor.name, key_group_range)
            if key_group_range is None:
                self._rewritten.add((operator, "keyed", descriptor.name))
        op.keyed_states[descriptor.name] = descriptor
        self._add(entries)

    def reuse_files(self, operator: str, descriptor: KeyedStateDescriptor | TimerServiceDescriptor, entries: Sequence[FileEntry]) -> None:
        """Reference files an earlier attempt wrote (aborted, or not yet confirmed) instead of uploading
        their content again (FLINK-24611). A full file replaces what the base has in its key-group range.

        The caller pins them until this writer is open (`flinkstate.store.registry.pin`); this writer then
        keeps them from garbage collection until it commits or aborts, and never deletes them.
        """
        from flinkstate.format.merge import order_entries

        timers = isinstance(descriptor, TimerServiceDescriptor)
        op = self._op(operator)
        scope = "timers" if timers else "keyed"
        for e in order_entries(entries):
            if e.kind not in C.DELTA_KINDS:
                self._drop(operator, scope, descriptor.name, (e.key_group_start, e.key_group_end))
            self._entries.append(e)
        if timers:
            op.timer_services[descriptor.name] = descriptor  # type: ignore[assignment]
        else:
            op.keyed_states[descriptor.name] = descriptor  # type: ignore[assignment]

    def adopt(self, entries: Sequence[FileEntry]) -> None:
        """Files written for this attempt (e.g. by Spark executors) that are not registered: `abort` deletes them too."""
        self._new_paths.extend(e.path for e in entries)

    def add_timer_files(
        self,
        operator: str,
        descriptor: TimerServiceDescriptor,
        entries: Sequence[FileEntry],
        *,
        mode: Literal["full", "delta"] = "full",
        key_group_range: tuple[int, int] | None = None,
    ) -> None:
        """Register timer files already written (e.g. by Spark executors) for a timer service."""
        op = self._op(operator)
        if descriptor.name in op.keyed_states:
            raise InvalidArgumentError(f"operator {operator!r}: {descriptor.name!r} is already a keyed state")
        if mode == "full":
            self._drop(operator, "timers", descriptor.name, key_group_range)
            if key_group_range is None:
                self._rewritten.add((operator, "timers", descriptor.name))
        op.timer_services[descriptor.name] = descriptor
        self._add(entries)

    def keep_on_abort(self, entries: Sequence[FileEntry]) -> None:
        """Files `abort` leaves in place: a state backend may reuse them in its next checkpoint;
        the registry deletes them once a later checkpoint completes without them."""
        self._kept.update(e.path for e in entries)

    def put_timers(
        self,
        operator: str,
        descriptor: TimerServiceDescriptor,
        table: pa.Table,
        *,
        mode: Literal["full", "delta"] = "full",
        key_group_range: tuple[int, int] | None = None,
        ranges: Sequence[tuple[int, int]] | None = None,
    ) -> list[FileEntry]:
        """Write a timer service's timers (`delta`: tombstone column marks deleted timers).

        A full put must hold each timer (key, namespace, timestamp) once: DuplicateKeyError otherwise.
        """
        _check_descriptor(operator, descriptor, TimerServiceDescriptor, "TimerServiceDescriptor")
        op = self._op(operator)
        if descriptor.name in op.keyed_states:
            raise InvalidArgumentError(f"operator {operator!r}: {descriptor.name!r} is already a keyed state")
        old = op.timer_services.get(descriptor.name)
        if old is not None and mode == "delta" and not _same_types(old, descriptor):
            raise SchemaMismatchError(f"operator {operator!r} timer service {descriptor.name!r}: types differ from the stored ones")
        if ranges is None and key_group_range is not None:
            ranges = [key_group_range]
        entries = write_timer_files(
            self.io, operator, descriptor, table, checkpoint_id=self.checkpoint_id, checkpoint_kind=self.kind,
            max_parallelism=self.max_parallelism_of(operator), delta=mode == "delta", ranges=ranges, seq=self._next_seq(),
        )
        self.add_timer_files(operator, descriptor, entries, mode=mode, key_group_range=key_group_range)
        return entries

    def put_operator_state(self, operator: str, descriptor: OperatorStateDescriptor, table: pa.Table) -> FileEntry:
        """Replace an operator state (subtask, [key], value)."""
        _check_descriptor(operator, descriptor, OperatorStateDescriptor, "OperatorStateDescriptor")
        op = self._op(operator)
        entry = write_operator_state_file(self.io, operator, descriptor, table, checkpoint_id=self.checkpoint_id, checkpoint_kind=self.kind, seq=self._next_seq())
        self._drop(operator, "operator", descriptor.name)
        op.operator_states[descriptor.name] = descriptor
        self._add([entry])
        return entry

    def add_operator_state_files(
        self, operator: str, descriptor: OperatorStateDescriptor, entries: Sequence[FileEntry], *, mode: Literal["full", "append"] = "full"
    ) -> None:
        """Register operator-state files already written (e.g. by Spark executors): `full` replaces the state,
        `append` adds their elements to the stored ones (reads concatenate the files)."""
        if mode not in ("full", "append"):
            raise InvalidArgumentError(f"mode must be 'full' or 'append', got {mode!r}")
        op = self._op(operator)
        if descriptor.name in op.keyed_states or descriptor.name in op.timer_services:
            raise InvalidArgumentError(f"operator {operator!r}: {descriptor.name!r} is already a keyed state or timer service")
        old = op.operator_states.get(descriptor.name)
        if old is not None and mode == "append" and old.to_dict() != descriptor.to_dict():
            raise SchemaMismatchError(f"operator {operator!r} operator state {descriptor.name!r}: declared as {old.mode} "
                                      f"{old.value_type}, appended as {descriptor.mode} {descriptor.value_type}")
        bad = [e.path for e in entries if e.kind != C.KIND_OPERATOR or e.operator != operator or e.state != descriptor.name]
        if bad:
            raise InvalidArgumentError(f"operator {operator!r} operator state {descriptor.name!r}: files {bad[:3]} are not its operator-state files")
        if mode == "full":
            self._drop(operator, "operator", descriptor.name)
        op.operator_states[descriptor.name] = descriptor
        self._add(entries)

    def put_coordinator(self, operator: str, table: pa.Table) -> FileEntry:
        """Replace an operator coordinator's state and buffered events."""
        op = self._op(operator)
        entry = write_coordinator_file(self.io, operator, table, checkpoint_id=self.checkpoint_id, checkpoint_kind=self.kind, seq=self._next_seq())
        self._drop(operator, "coordinator", None)
        op.has_coordinator = True
        self._add([entry])
        return entry

    # ------------------------------------------------------------------ structure
    def set_parallelism(self, operator: str, parallelism: int) -> None:
        """Record the parallelism an operator ran with (informational)."""
        mp = self.max_parallelism_of(operator)
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or not 1 <= parallelism <= mp:
            raise InvalidArgumentError(f"parallelism of operator {operator!r} must be in [1, {mp}] (its max parallelism), got {parallelism!r}")
        self._op(operator).parallelism = parallelism

    def max_parallelism_of(self, operator: str) -> int:
        """An operator's max parallelism in this checkpoint: its own, or the default for an operator not here yet."""
        op = self.operators.get(operator)
        return self.max_parallelism if op is None or op.max_parallelism is None else op.max_parallelism

    def set_max_parallelism(self, max_parallelism: int, operator: str | None = None) -> None:
        """Set one operator's max parallelism (None: every operator's, and the default of operators added later).

        An operator of the base whose value changes is rescaled: each of its keyed states and timer services must be
        written in full in this checkpoint (`rewrite.rescale_into` re-keys what the caller does not write); set it
        before writing the operator's keyed state or timers.
        """
        _valid_max_parallelism(max_parallelism)
        new = set(self._new_paths)
        for uid in list(self.operators) if operator is None else [operator]:
            op = self._op(uid)
            if op.max_parallelism == max_parallelism:
                continue
            written = [e.path for e in self._entries if e.operator == uid and e.path in new and FileKind(e.kind).scope.value in ("keyed", "timers")]
            if written:
                raise InvalidArgumentError(f"checkpoint {self.checkpoint_id}: operator {uid!r} already has keyed state or timers written for max "
                                           f"parallelism {op.max_parallelism} in it ({written[0]}); set its max parallelism first")
            op.max_parallelism = max_parallelism
        if operator is None:
            self.max_parallelism = max_parallelism

    def declare_max_parallelism(self, operator: str, max_parallelism: int) -> None:
        """The max parallelism a writer of one operator (a state backend, a Spark job) uses for it; in a checkpoint
        without a base it is also the default. Other operators keep theirs."""
        self.set_max_parallelism(max_parallelism, None if self.base is None else operator)

    def rescaled_operators(self) -> list[str]:
        """The operators (uids here) whose max parallelism differs from the one they have in the base."""
        return [uid for uid, op in self.operators.items()
                if uid in self._base_max_parallelism and self._base_max_parallelism[uid] != self.max_parallelism_of(uid)]

    @property
    def rescaled(self) -> bool:
        """Whether this checkpoint changes the max parallelism of an operator of its base."""
        return bool(self.rescaled_operators())

    def set_property(self, key: str, value: str) -> None:
        """A free-form checkpoint property (stored in the log's metadata)."""
        self.properties[str(key)] = str(value)

    def remove_state(self, operator: str, name: str) -> None:
        """Drop a keyed state, timer service or operator state from the new checkpoint."""
        op = self._op(operator, create=False)
        for scope, table in (("keyed", op.keyed_states), ("timers", op.timer_services), ("operator", op.operator_states)):
            if name in table:
                del table[name]
                self._drop(operator, scope, name)
                self._rewritten.discard((operator, scope, name))
                return
        raise StateNotFoundError(f"operator {operator!r} has no state {name!r}; states: {sorted([*op.keyed_states, *op.timer_services, *op.operator_states])}")

    def remove_operator(self, operator: str) -> None:
        """Drop an operator and all its state from the new checkpoint."""
        self._op(operator, create=False)
        del self.operators[operator]
        self._base_max_parallelism.pop(operator, None)
        self._entries = [e for e in self._entries if e.operator != operator]
        self._rewritten = {r for r in self._rewritten if r[0] != operator}

    def rename_operator(self, old: str, new: str) -> None:
        """Change an operator's uid; its files are referenced under the new uid."""
        op = self._op(old, create=False)
        validate_name(new, "operator uid")
        if new in self.operators:
            raise InvalidArgumentError(f"cannot rename operator {old!r} to {new!r}: {new!r} already exists")
        self.operators[new] = op.copy(uid=new)
        del self.operators[old]
        if old in self._base_max_parallelism:
            self._base_max_parallelism[new] = self._base_max_parallelism.pop(old)
        self._entries = [_replace(e, operator=new) if e.operator == old else e for e in self._entries]
        self._renamed_from[new] = self._renamed_from.pop(old, old)
        # what was rewritten in full under the old uid stays rewritten under the new one
        self._rewritten = {(new, s, n) if u == old else (u, s, n) for u, s, n in self._rewritten if u != new}

    def base_uid(self, operator: str) -> str:
        """The uid an operator of this writer has in the base checkpoint (renames followed back)."""
        return self._renamed_from.get(operator, operator)

    def rewritten(self, operator: str, scope: Literal["keyed", "timers"], name: str) -> bool:
        """Whether this writer already replaced a keyed state or timer service in full (renames followed)."""
        return (operator, scope, name) in self._rewritten

    def entries(self) -> list[FileEntry]:
        """The files the new checkpoint will use (so far)."""
        return list(self._entries)

    # ------------------------------------------------------------------ commit
    def referenced_paths(self) -> list[str]:
        """Paths this writer carries over from its base or wrote (kept from garbage collection while it is open)."""
        return [e.path for e in list(self._entries)] + list(self._new_paths)

    def abort(self) -> None:
        """Forget this attempt and delete the files it wrote (after an unknown commit outcome: keep them, as the
        commit may have landed; garbage collection deletes them if it did not)."""
        if self._done:
            return
        self._done = True
        self._release()
        if self._row is not None:
            return
        for p in self._new_paths:
            if p in self._kept:
                continue
            try:
                self.io.delete(p)
            except OSError:
                continue  # left for garbage collection: it is not referenced by any checkpoint
        if self.kind == C.SAVEPOINT:
            self.io.remove_empty_dirs(C.SAVEPOINTS_DIR)  # an aborted savepoint leaves no empty folders behind

    def commit(self) -> CheckpointInfo:
        """Record the files and complete the checkpoint in one Delta commit of the log; its figures as committed.

        The outcome returned is the one that happened, whatever other processes do afterwards (a concurrent
        `retain` may discard the checkpoint the moment it lands: it still landed). An error means nothing landed,
        except `CommitOutcomeUnknownError`: the storage call failed and the log could not be read to tell; then
        this writer keeps its files, and calling `commit()` again finds its own landed attempt or commits it.
        """
        if self.info is not None:
            return self.info
        if self._done:
            raise InvalidArgumentError(f"checkpoint {self.checkpoint_id}: this writer already committed or aborted")
        if self._row is None:
            try:
                self._row = self._prepare()
            except BaseException:
                self.abort()
                raise
        elif self._landed(self._row):
            return self._finish(self._row)  # the earlier call's commit had landed after all
        row = self._row
        try:
            self.store.catalog.commit_log(row, self.planned_version, self._rebase)
        except StorageError as e:  # the storage call failed: did the row land before it did?
            if not self._landed(row, cause=e):
                self._row = None  # a fresh log read shows it did not: abort as for any failure
                self.abort()
                raise
        except BaseException:
            self._row = None
            self.abort()
            raise
        return self._finish(row)

    def _prepare(self) -> dict[str, Any]:
        """Check and own the files, record them in the manifest, and return the log row that completes the checkpoint."""
        self._check_rescaled()
        self._drop_shadowed()
        new = set(self._new_paths)
        try:
            check_carried_files(self.io, self.checkpoint_id, [e for e in self._entries if e.path not in new])
            if self.kind == C.SAVEPOINT:
                self._own_files()
            else:
                self._release_savepoint_files()
        except CorruptFileError as e:
            self.conflict_if_collected(self.store.catalog.log_version(), e)  # damage only if no collection explains it
            raise
        self.store.catalog.append_manifest(self.checkpoint_id, self.attempt_id, self._entries)
        now = dt.datetime.now(dt.timezone.utc)
        return {
            "checkpoint_id": self.checkpoint_id,
            "attempt_id": self.attempt_id,
            "event": C.EVENT_COMPLETED,
            "kind": self.kind,
            "event_time": now,
            "created_at": now,
            "max_parallelism": self.max_parallelism,
            "format_version": C.FORMAT_VERSION,
            "base_checkpoint_id": None if self.base is None else self.base.checkpoint_id,
            "files": len(self._entries),
            "rows": sum(e.rows for e in self._entries if e.kind not in C.DELTA_KINDS),
            "bytes": sum(e.bytes for e in self._entries),
            "metadata": _json(CheckpointMetadata.encode(self.operators, self.properties)),
        }

    def _landed(self, row: dict[str, Any], cause: BaseException | None = None) -> bool:
        """Whether this attempt's log row is in the log, read afresh (a few tries); CommitOutcomeUnknownError when the
        log cannot be read to tell (this writer then keeps its files and may commit again)."""
        failure: BaseException | None = cause
        for pause in _OUTCOME_READS:
            time.sleep(pause)
            try:
                return any(r.attempt_id == self.attempt_id for r in self.store.catalog.records())
            except (OSError, FlinkStateError) as e:
                failure = e
        raise CommitOutcomeUnknownError(
            f"{self.kind} {self.checkpoint_id} (attempt {self.attempt_id}) at {self.store.root}: the commit of the log failed "
            f"({failure}) and the log could not be read to tell whether it landed; its files are kept: call commit() again "
            "on this writer (it finds its own landed attempt), never write the same data anew") from failure

    def _finish(self, row: dict[str, Any]) -> CheckpointInfo:
        """The writer is done: its checkpoint's figures from the row it committed (no lookup a concurrent retain races)."""
        self._done = True
        self._row = None
        self._release()
        self.info = CheckpointInfo(
            checkpoint_id=row["checkpoint_id"], kind=row["kind"], status=C.STATUS_COMPLETED, created_at=row["created_at"],
            max_parallelism=row["max_parallelism"], files=row["files"], rows=row["rows"], bytes=row["bytes"],
            base_checkpoint_id=row["base_checkpoint_id"], format_version=row["format_version"])
        return self.info

    def _check_rescaled(self) -> None:
        """Every keyed state and timer service of a rescaled operator must have been rewritten: none of its files
        written for the old max parallelism may remain (InvalidArgumentError naming them otherwise)."""
        rescaled = set(self.rescaled_operators())
        if not rescaled:
            return
        new = set(self._new_paths)
        missing = sorted({f"{e.operator}/{e.state}" + (" (timers)" if FileKind(e.kind).scope.value == "timers" else "")
                          for e in self._entries if e.operator in rescaled and e.path not in new
                          and FileKind(e.kind).scope.value in ("keyed", "timers")})
        if missing:
            changes = ", ".join(f"{u}: {self._base_max_parallelism[u]} -> {self.max_parallelism_of(u)}" for u in sorted(rescaled))
            raise InvalidArgumentError(
                f"checkpoint {self.checkpoint_id}: max parallelism changed ({changes}) but these states were not rewritten in full: {missing}"
            )

    def _release(self) -> None:
        untrack_writer(self)

    def _rebase(self, version: int) -> bool:
        """Another commit landed first: conflict only with the same id or a later completed checkpoint.

        Returns False when this attempt's own commit already landed (idempotent success).
        Commits of other ids (savepoints, discards, other checkpoints) do not conflict; as in
        Flink's CheckpointCoordinator, a completed checkpoint aborts earlier pending checkpoints
        (not savepoints).
        """
        for r in self.store.catalog.records(version):
            if r.checkpoint_id == self.checkpoint_id:
                if r.attempt_id == self.attempt_id:
                    return False
                raise CommitConflictError(f"checkpoint {self.checkpoint_id} was committed by another writer at {self.store.root}")
            if self.kind == C.CHECKPOINT and r.kind == C.CHECKPOINT and r.checkpoint_id > self.checkpoint_id:
                raise CommitConflictError(
                    f"checkpoint {self.checkpoint_id}: checkpoint {r.checkpoint_id} completed first at {self.store.root} "
                    "and subsumes this pending checkpoint")
        self.conflict_if_collected(version)
        return True

    def conflict_if_collected(self, version: int | None, cause: BaseException | None = None) -> None:
        """CommitConflictError when a garbage collection announced after this write was planned may delete a file
        it references (FORMAT.md section 14): its base discarded, a reused file, its own savepoint folder."""
        for c in self.store.catalog.collections(version):
            if c.planned_version < self.planned_version:
                continue  # announced before this write was planned: its plan saw everything this write carries
            why = self._collected_by(c)
            if why is not None:
                raise CommitConflictError(
                    f"{self.kind} {self.checkpoint_id}: a garbage collection at {self.store.root} (log version {c.planned_version + 1}, "
                    f"after this write was planned at {self.planned_version}) may delete {why}; nothing of this attempt is visible, "
                    "begin again") from cause

    def _collected_by(self, c: Collection) -> str | None:
        """What of this write a collection may delete (None: nothing)."""
        if self.checkpoint_id not in c.protected and self.checkpoint_id <= (c.latest if self.kind == C.SAVEPOINT else c.line):
            return f"the files written for {self.kind} {self.checkpoint_id} (id at or below the newest at that version)"
        new = set(self._new_paths)
        carried = [e for e in self._entries if e.path not in new]
        if self.base is not None and self.base.checkpoint_id not in c.protected and any(e.path in self._base_paths for e in carried):
            return f"files of its base checkpoint {self.base.checkpoint_id}, which was discarded"
        reused = [e for e in carried if e.path not in self._base_paths and e.created_by_checkpoint_id <= c.line
                  and e.path not in c.kept_paths]
        if reused:
            return f"{self.io.url(reused[0].path)}, a file of an earlier attempt it reuses"
        return None

    def _drop_shadowed(self) -> None:
        """Stop referencing files every key group of which a newer full file replaces."""
        from flinkstate.format.merge import (
            live_positions,
            newest_full_order,
            order_entries,
        )

        groups: dict[tuple[str, str, str | None], list[FileEntry]] = {}
        for e in self._entries:
            groups.setdefault((e.operator, FileKind(e.kind).scope.value, e.state), []).append(e)
        keep: list[FileEntry] = []
        for (_, scope, _), entries in groups.items():
            if scope not in ("keyed", "timers") or len(entries) == 1:
                keep += entries
                continue
            ordered = order_entries(entries)
            keep += [ordered[pos] for pos in live_positions(ordered, newest_full_order(ordered, self.max_parallelism_of(entries[0].operator)))]
        self._entries = keep

    def _release_savepoint_files(self) -> None:
        """Copy what a checkpoint still carries from a savepoint's folder into shared/ (Flink's NO_CLAIM).

        The user owns a savepoint and may delete it; a checkpoint after a restore from it must
        not reference its files. Only files the snapshot did not rewrite are copied.
        """
        owned = []
        for e in self._entries:
            if not e.path.startswith(C.SAVEPOINTS_DIR + "/"):
                owned.append(e)
                continue
            rel = e.path.split("/", 2)[2]  # <operator>/<sub>/<file> below savepoints/sp-N/
            new = f"{C.SHARED_DIR}/{rel.rsplit('/', 1)[0]}/{_owned_name(rel, self.checkpoint_id)}"
            self._new_paths.append(new)  # tracked before the copy: GC leaves it, abort deletes it
            self._copy(e, new)
            owned.append(_replace(e, path=new))
        self._entries = owned

    def _copy(self, e: FileEntry, new: str) -> None:
        """Copy a carried file; CorruptFileError naming it when it is gone."""
        try:
            self.io.copy(e.path, new)
        except FileNotFoundError as err:
            raise CorruptFileError(f"checkpoint {self.checkpoint_id} would carry over damaged files of its base: {self.io.url(e.path)} "
                                   f"(written by checkpoint {e.created_by_checkpoint_id}) is missing; nothing was committed") from err

    def _own_files(self) -> None:
        """Copy every carried-over file into the savepoint's folder (self-contained)."""
        base = data_dir(C.SAVEPOINT, self.checkpoint_id) + "/"
        owned = []
        for e in self._entries:
            if e.path.startswith(base):
                owned.append(e)
                continue
            rel = e.path.split("/", 1)[1] if e.path.startswith(C.SHARED_DIR + "/") else e.path.split("/", 2)[2]
            # a fresh suffix: another attempt of this savepoint id copying the same file must not write (or delete) this copy
            new = f"{base}{rel.rsplit('/', 1)[0]}/{_owned_name(rel, None)}"
            self._new_paths.append(new)  # tracked before the copy: abort deletes it
            self._copy(e, new)
            owned.append(_replace(e, path=new))
        self._entries = owned


def _owned_name(path: str, checkpoint_id: int | None) -> str:
    """A fresh name for a copy of `path`: a new random suffix, and the id of `checkpoint_id` when given (it created it)."""
    import re
    import uuid as _uuid

    name = path.rsplit("/", 1)[-1]
    if checkpoint_id is not None:
        name = re.sub(r"^\d{10}-", f"{checkpoint_id:010d}-", name)
    return re.sub(r"-[0-9a-f]+\.parquet$", f"-{_uuid.uuid4().hex[:12]}.parquet", name)


def _replace(e: FileEntry, **kw: Any) -> FileEntry:
    import dataclasses

    return dataclasses.replace(e, **kw)


def _json(doc: Any) -> str:
    import json

    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _check_descriptor(operator: str, desc: object, kind: Any, kind_name: str) -> None:
    """InvalidArgumentError naming the operator unless desc is a descriptor of that kind (a state's name is not one)."""
    if not isinstance(desc, kind):
        raise InvalidArgumentError(f"operator {operator!r}: the descriptor must be {'an' if kind_name[0] in 'AEIOU' else 'a'} {kind_name}, got {desc!r} "
                                   f"({type(desc).__name__}); declare the state with flinkstate's descriptors")
