"""The scan interfaces: a pinned checkpoint, the scan of one state, and its picklable tasks.

Interfaces alone (no format code): a flinkstate checkpoint (`flinkstate.read.checkpoint`) and any
other kind of pinned checkpoint (a real Flink savepoint) implement them, and every reader -
the library's `read_*`, Spark, restore, changes and rewrites - goes through them. A task
holds only picklable things (a key-group range, its files, the options), so Spark ships
tasks to executors as partitions; `to_batches()` yields the rows of its key-group range.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from flinkstate.core.errors import OperatorNotFoundError, StateNotFoundError

if TYPE_CHECKING:
    from flinkstate.core.descriptors import (
        KeyedStateDescriptor,
        OperatorStateDescriptor,
        TimerServiceDescriptor,
    )
    from flinkstate.format.metadata import OperatorMetadata

__all__ = ["Checkpoint", "ChunkReader", "DEFAULT_TARGET_ROWS", "METADATA_TABLES", "Scan", "ScanTask", "TableRef", "WholeChunks"]

DEFAULT_TARGET_ROWS = 1_000_000
METADATA_TABLES = ("checkpoints", "files", "states", "operators")


@dataclass(frozen=True)
class TableRef:
    """One table of a checkpoint, as a reader names it: `table` (the name Spark's `table` option takes: "state", "timers",
    "operatorState", a metadata table...), the operator and state it is of (None for tables of the whole checkpoint), and
    what it holds (`kind`: the state's kind, "timers-event", "operator-union", "metadata"...)."""

    table: str
    operator: str | None = None
    state: str | None = None
    kind: str = "metadata"


class ScanTask(ABC):
    """One unit of reading: the rows of a key-group range of one state (picklable)."""

    key_group_range: tuple[int, int]

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of the batches this task yields."""

    @abstractmethod
    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Read, merge and shape the task's rows."""

    def to_arrow(self) -> pa.Table:
        """The task's rows as one table."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self.schema)

    def chunk_reader(self) -> ChunkReader:
        """The task's rows a key-group sub-range at a time (rows with a `key_group` column): here read whole and cut;
        a task of a flinkstate store reads its files' row groups as the sub-ranges come."""
        return WholeChunks(self.to_arrow())


class ChunkReader(ABC):
    """A task's rows taken a key-group sub-range at a time (`take`, ascending, inside the task's range); `nbytes` is
    an estimate of all of them, known before any is taken (to choose the sub-ranges). Close it when done."""

    nbytes: int

    @abstractmethod
    def take(self, lo: int, hi: int) -> pa.Table:
        """The rows of key groups lo..hi, in the task's schema."""

    def close(self) -> None:
        """Release what it holds."""

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WholeChunks(ChunkReader):
    """A task's rows read whole, cut by key group (sorted rows: zero-copy slices)."""

    def __init__(self, table: pa.Table) -> None:
        self.table, self.nbytes = table, table.nbytes
        self._kg = table.column("key_group").to_numpy()
        self._sorted = bool((self._kg[1:] >= self._kg[:-1]).all())

    def take(self, lo: int, hi: int) -> pa.Table:
        if self._sorted:
            a, b = np.searchsorted(self._kg, [lo, hi + 1])
            return self.table.slice(int(a), int(b - a))
        return self.table.filter(pa.array((self._kg >= lo) & (self._kg <= hi)))


class Scan(ABC):
    """A planned read of one state of a pinned checkpoint."""

    @property
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The schema of the rows."""

    @abstractmethod
    def plan(self, target_rows: int = DEFAULT_TARGET_ROWS) -> list[ScanTask]:
        """Tasks covering the state, each holding about target_rows rows (key-group ranges)."""

    def to_arrow(self) -> pa.Table:
        """Every row, in one table (the local case)."""
        tables = [t.to_arrow() for t in self.plan()]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()


class Checkpoint(ABC):
    """A checkpoint loaded once: its figures, operators, descriptors and files; immutable and picklable."""

    @property
    @abstractmethod
    def checkpoint_id(self) -> int:
        """The checkpoint's id."""

    @property
    @abstractmethod
    def max_parallelism(self) -> int:
        """The checkpoint's default max parallelism (an operator added without its own gets it); see `max_parallelism_of`."""

    def max_parallelism_of(self, operator: str) -> int:
        """Key groups of one operator's keyed state and timers: Flink gives every operator its own max parallelism."""
        own = self.operator(operator).max_parallelism
        return self.max_parallelism if own is None else own

    @property
    @abstractmethod
    def created_at_ms(self) -> int:
        """When it was taken (epoch ms): the default time TTL is judged at."""

    @property
    @abstractmethod
    def operators(self) -> dict[str, OperatorMetadata]:
        """Operators by uid, with their declared states."""

    @property
    def flink_version(self) -> str | None:
        """The Flink release(s) that wrote this checkpoint ("1.19-1.20", "2.3"), None when Flink did not write it."""
        return None

    def name_of(self, operator: str) -> str:
        """The name this checkpoint lists an operator by (a Flink savepoint's also takes its uid or operator id)."""
        return operator

    def serializers_of(self, operator: str, state: str) -> tuple[str | None, str | None]:
        """The Flink serializer snapshot classes of a state's key and values (None, None: the checkpoint holds no
        Flink serializers, as a flinkstate checkpoint's Arrow types are its declaration)."""
        return None, None

    def key_group_figures(self, operator: str, state: str) -> pa.Table | None:
        """Per key group of a keyed state, what its files tell without decoding a value: `key_group`, `entries` and
        `bytes` (stored bytes); None when they do not tell (then `read.insight` decodes the state's rows instead)."""
        return None

    def ttl_timestamps(self, operator: str, state: str) -> pa.Array | None:
        """A TTL state's last-access times (epoch ms, one per entry or list element) read without its values; None
        when the files do not hold them apart (then `read.insight` decodes the state's rows instead)."""
        return None

    def tables(self) -> list[TableRef]:
        """Every table of the checkpoint: each keyed state, timer service and operator state of each operator, then the
        metadata tables. A checkpoint holding other kinds of tables lists them too (a subclass adds them), so a caller
        that registers every table (`pyspark_flinkstate.register_tables`) registers those without knowing them."""
        out = []
        for uid in sorted(self.operators):
            op = self.operators[uid]
            out += [TableRef("state", uid, n, op.keyed_states[n].kind) for n in sorted(op.keyed_states)]
            out += [TableRef("timers", uid, n, f"timers-{op.timer_services[n].domain}") for n in sorted(op.timer_services)]
            out += [TableRef("operatorState", uid, n, f"operator-{op.operator_states[n].mode}") for n in sorted(op.operator_states)]
        return out + [TableRef(t) for t in METADATA_TABLES]

    def operator(self, uid: str) -> OperatorMetadata:
        """One operator (by any name `name_of` resolves); OperatorNotFoundError lists the operators that exist."""
        op = self.operators.get(self.name_of(uid))
        if op is None:
            raise OperatorNotFoundError(f"operator {uid!r} is not in checkpoint {self.checkpoint_id}; operators: {sorted(self.operators)}")
        return op

    def state_descriptor(self, operator: str, state: str) -> KeyedStateDescriptor:
        """A keyed state's descriptor; StateNotFoundError lists the states that exist."""
        return _declared(self.operator(operator).keyed_states, operator, "keyed state", state)

    def timer_service(self, operator: str, service: str) -> TimerServiceDescriptor:
        """A timer service's descriptor; StateNotFoundError lists the services that exist."""
        return _declared(self.operator(operator).timer_services, operator, "timer service", service)

    def operator_state_descriptor(self, operator: str, name: str) -> OperatorStateDescriptor:
        """An operator state's descriptor; StateNotFoundError lists the operator states that exist."""
        return _declared(self.operator(operator).operator_states, operator, "operator state", name)

    def timer_services_of(self, operator: str, service: str | None) -> list[TimerServiceDescriptor]:
        """One service, or every service of the operator (which must share key and namespace types)."""
        if service is not None:
            return [self.timer_service(operator, service)]
        op = self.operator(operator)
        services = [op.timer_services[n] for n in sorted(op.timer_services)]
        if not services:
            raise StateNotFoundError(f"operator {operator!r} has no timer service in checkpoint {self.checkpoint_id}")
        if len({str(s.key_type) for s in services}) > 1 or len({str(s.namespace_type) for s in services}) > 1:
            from flinkstate.core.errors import InvalidArgumentError

            raise InvalidArgumentError(f"timer services of operator {operator!r} have different key or namespace types; "
                                       f"choose one: {sorted(op.timer_services)}")
        return services

    @abstractmethod
    def scan(self, operator: str, state: str, *, keys: Sequence[Any] | None = None, key_groups: Sequence[int] | None = None,
             ttl_reference: int | None = None, include_expired: bool = False, flatten: bool = True,
             columns: Sequence[str] | None = None, raw: bool = False) -> Scan:
        """A keyed state: key_group, key, [namespace], [user_key], value, [ttl_expires_at, expired].

        keys / key_groups restrict the read to those keys' key groups; TTL is judged at
        ttl_reference (epoch ms, default the checkpoint's time); raw=True gives the stored rows
        (merged, with `ttl_timestamp` last-access times, lists per key) for restore and rewrites.
        """

    @abstractmethod
    def scan_timers(self, operator: str, service: str | None = None, *, keys: Sequence[Any] | None = None,
                    key_groups: Sequence[int] | None = None, timestamp_filter: Any = None) -> Scan:
        """Timers of one service (None: every service of the operator, with a `timer_service` column)."""

    @abstractmethod
    def scan_operator_state(self, operator: str, name: str) -> Scan:
        """An operator state: subtask, [key], value."""

    @abstractmethod
    def scan_coordinator(self, operator: str) -> Scan:
        """An operator coordinator's state and buffered events: record_type, subtask, seq, payload."""


_D = TypeVar("_D")


def _declared(found: Mapping[str, _D], operator: str, what: str, name: str) -> _D:
    """found[name]; StateNotFoundError names the operator and lists what it has."""
    d = found.get(name)
    if d is None:
        raise StateNotFoundError(f"operator {operator!r} has no {what} {name!r}; {what}s: {sorted(found)}")
    return d
