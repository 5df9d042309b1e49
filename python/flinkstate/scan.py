"""The scan interfaces: a pinned checkpoint, the scan of one state, and its picklable tasks.

Interfaces alone (no format code): a flinkstate checkpoint (`flinkstate.checkpoint`) and any
other kind of pinned checkpoint (a real Flink savepoint) implement them, and every reader -
the library's `read_*`, Spark, restore, changes and rewrites - goes through them. A task
holds only picklable things (a key-group range, its files, the options), so Spark ships
tasks to executors as partitions; `to_batches()` yields the rows of its key-group range.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["Checkpoint", "DEFAULT_TARGET_ROWS", "Scan", "ScanTask"]

DEFAULT_TARGET_ROWS = 1_000_000


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
        """Key groups of its keyed state."""

    @property
    @abstractmethod
    def created_at_ms(self) -> int:
        """When it was taken (epoch ms): the default time TTL is judged at."""

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
