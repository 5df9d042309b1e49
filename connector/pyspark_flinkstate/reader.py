"""Reading checkpoints in Spark: the core's scan tasks are the partitions.

The driver plans (`FlinkStateReader.__init__`, `pushFilters`, `partitions`): the pinned
checkpoint's `scan(...)` with the pushed keys, key groups and timer timestamps, planned into
tasks by key-group range. Executors run `read(partition)`: the task's `to_batches()` (merge,
TTL visibility, flattening, all in the core) cast to the schema Spark expects. Partitions
carry only picklable things: a task holds a key-group range, its files and the options.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from flinkstate.format.datafile import FileEntry
from flinkstate.format.merge import overlaps
from flinkstate.format.planning import plan_ranges
from flinkstate.read.scan import ScanTask
from flinkstate.read.visibility import shape_state
from pyspark.sql.datasource import DataSourceReader, InputPartition

from pyspark_flinkstate.options import INSIGHT_TABLES, METADATA_TABLES
from pyspark_flinkstate.resolve import Resolved

__all__ = ["FlinkStateReader", "FlinkStatePushdownReader", "TaskPartition", "ChangesPartition", "plan_ranges", "read_metrics"]

TARGET_ROWS_PER_PARTITION = 1_000_000
BATCH_ROWS = 131072

# files opened by read() in this process (the bench looks at it)
_METRICS = {"files_opened": 0, "partitions_read": 0}


def read_metrics(reset: bool = False) -> dict[str, int]:
    """Counters of this process's reads (files opened, partitions read)."""
    out = dict(_METRICS)
    if reset:
        for k in _METRICS:
            _METRICS[k] = 0
    return out


class TaskPartition(InputPartition):
    """One partition: one scan task of the core (picklable)."""

    def __init__(self, task: ScanTask | None) -> None:
        super().__init__(None if task is None else task.key_group_range)
        self.task = task


@dataclass
class ChangesPartition(InputPartition):
    """One partition of a changes read: a key-group range and the files of both checkpoints there."""

    key_group_start: int
    key_group_end: int
    entries: list[FileEntry]
    old_entries: list[FileEntry] | None = None
    whole: bool = False  # across a max-parallelism change: no range restriction

    def __init__(self, key_group_start: int, key_group_end: int, entries: list[FileEntry],
                 old_entries: list[FileEntry] | None = None, whole: bool = False) -> None:
        super().__init__((key_group_start, key_group_end))
        self.key_group_start = key_group_start
        self.key_group_end = key_group_end
        self.entries = entries
        self.old_entries = old_entries
        self.whole = whole


# ------------------------------------------------------------------ filters
def _col(f: Any) -> str | None:
    attr = getattr(f, "attribute", None)
    if isinstance(attr, tuple) and len(attr) == 1:
        return str(attr[0])
    return None


_HASHABLE_KEY = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_boolean, pa.types.is_floating)


class FlinkStateReader(DataSourceReader):
    """Reads one table of a checkpoint (no filter pushdown: used when Spark has it off)."""

    def __init__(self, res: Resolved, schema: Any) -> None:
        self.res = res
        self.schema = schema
        self.key_values: list[Any] | None = None  # pushed equality / IN on key
        self.key_groups: set[int] | None = None  # pushed key_group predicates and key groups of pushed keys
        self.ts_filters: list[tuple[str, int]] = []  # timers: (op, value) on timestamp
        self._target: pa.Schema | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Spark pickles the reader into the read function it broadcasts with every query, and plans the partitions
        with the live reader after that. A state, timers or operator-state read's tasks carry their own files and
        handles, so the resolved checkpoint is left behind: a Flink savepoint's is every operator's handles (6.2 MiB
        for one with an 800,000-element operator state, sent with each query). Metadata, insight and changes reads
        read from it, and keep it."""
        state = self.__dict__.copy()
        if self.res is not None and self._reads_tasks():
            state["res"] = None
        return state

    def _reads_tasks(self) -> bool:
        """Whether the read's partitions are the core's scan tasks (state, timers, operator state), which carry what
        they read; metadata, insight and changes reads read from the resolved checkpoint."""
        t = self.res.opts.table
        return t not in METADATA_TABLES and t not in INSIGHT_TABLES and t != "changes"

    # ---------------------------------------------------------------- planning
    def _timestamp_filter(self) -> Any:
        import pyarrow.dataset as ds

        expr = None
        for op, v in self.ts_filters:
            f = ds.field("timestamp")
            e = {"gt": f > v, "ge": f >= v, "lt": f < v, "le": f <= v, "eq": f == v}[op]
            expr = e if expr is None else expr & e
        return expr

    def _key_groups(self) -> set[int] | None:
        """The key groups pushed filters and the keyGroups option leave (None: all)."""
        kgs, ranges = self.key_groups, self.res.opts.key_groups
        if ranges is None:
            return kgs
        mp = self.res.max_parallelism
        given = {k for a, b in ranges for k in range(a, min(b, mp - 1) + 1)}
        return given if kgs is None else kgs & given

    def scan(self) -> Any:
        """The core scan this read is (state, timers or operatorState table)."""
        res, o = self.res, self.res.opts
        ck = res.checkpoint
        assert o.operator is not None
        if o.table == "timers":
            return ck.scan_timers(o.operator, o.state or None, keys=self.key_values, key_groups=self._key_groups(),
                                  timestamp_filter=self._timestamp_filter(), service_columns=True)
        if o.table == "operatorState":
            assert o.state is not None
            return ck.scan_operator_state(o.operator, o.state)
        assert o.state is not None
        return ck.scan(o.operator, o.state, keys=self.key_values, key_groups=self._key_groups(), ttl_reference=o.ttl_reference_ms,
                       include_expired=o.include_expired, flatten=o.flatten)

    def partitions(self) -> list[InputPartition]:
        if self.res.opts.table == "changes":
            return self._changes_partitions()
        if not self._reads_tasks():  # metadata and insight tables: one partition that reads the resolved checkpoint
            return [TaskPartition(None)]
        try:
            tasks = self.scan().plan(TARGET_ROWS_PER_PARTITION)
        except NotImplementedError as e:  # PySpark takes it from partitions() as "one partition" and reads nothing
            raise RuntimeError(f"{type(e).__module__}.{type(e).__name__}: {e}") from e
        return [TaskPartition(task) for task in tasks]

    def _changes_partitions(self) -> list[InputPartition]:
        from flinkstate.read.changes import changed_key_group_ranges

        res = self.res
        new, old = res.entries, res.from_entries
        if res.max_parallelism != res.from_max_parallelism or old is None or not res.state_in_to:
            return [ChangesPartition(0, res.max_parallelism - 1, list(new), old, whole=True)]
        ranges = plan_ranges(list(new) + list(old), res.max_parallelism)
        parts: list[InputPartition] = []
        for lo, hi in changed_key_group_ranges(old, new, ranges):
            parts.append(ChangesPartition(lo, hi, [e for e in new if overlaps(e, lo, hi)], [e for e in old if overlaps(e, lo, hi)]))
        return parts

    # ---------------------------------------------------------------- executors
    def _target_schema(self) -> pa.Schema:
        if self._target is None:
            from pyspark_flinkstate.schema import arrow_schema_for

            self._target = arrow_schema_for(self.schema)
        return self._target

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark_flinkstate.schema import to_spark_arrow
        from pyspark_flinkstate.worker_noise import quiet_closed_pipes

        quiet_closed_pipes()  # a limit that stops reading early must not print PySpark's BrokenPipe traceback
        _METRICS["partitions_read"] += 1
        target = self._target_schema()
        if isinstance(partition, ChangesPartition):
            table = self._read_changes(partition)
            if table is not None and table.num_rows:
                yield from to_spark_arrow(table, target).to_batches(max_chunksize=BATCH_ROWS)
            return
        if not isinstance(partition, TaskPartition):
            return  # nothing to read: Spark substitutes one empty partition
        if partition.task is None:
            table = self._metadata_table()
            if table.num_rows:
                yield from to_spark_arrow(table, target).to_batches(max_chunksize=BATCH_ROWS)
            return
        _METRICS["files_opened"] += len(getattr(partition.task, "entries", ()))
        for batch in partition.task.to_batches():
            yield from to_spark_arrow(pa.Table.from_batches([batch]), target).to_batches(max_chunksize=BATCH_ROWS)

    def _metadata_table(self) -> pa.Table:
        from pyspark_flinkstate.metadata import metadata_table

        return metadata_table(self.res)

    def _read_changes(self, p: ChangesPartition) -> pa.Table | None:
        from flinkstate.read.changes import diff_state

        res = self.res
        desc = res.descriptor()
        rng = None if p.whole else (p.key_group_start, p.key_group_end)
        _METRICS["files_opened"] += len(p.entries) + len(p.old_entries or [])
        out = diff_state(res.io, desc, p.old_entries, p.entries if res.state_in_to else None, res.from_max_parallelism,
                         res.max_parallelism, rng)
        if out.num_rows == 0:
            return None
        out = shape_state(out, desc, reference_ms=0, changes=True)
        return out.add_column(0, "checkpoint_id", pa.array(np.full(out.num_rows, res.checkpoint_id, dtype=np.int64)))


class FlinkStatePushdownReader(FlinkStateReader):
    """The reader when Spark pushes filters: key, key_group and timer timestamp predicates."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from flinkstate.core.keygroups import assign_key_group
        from pyspark.sql.datasource import (
            EqualTo,
            GreaterThan,
            GreaterThanOrEqual,
            In,
            LessThan,
            LessThanOrEqual,
        )

        res = self.res
        table = res.opts.table
        if table not in ("state", "timers"):
            yield from filters
            return
        mp = res.max_parallelism
        if table == "state":
            key_type = res.descriptor().key_type
        else:
            from flinkstate.core.descriptors import TimerServiceDescriptor

            key_type = TimerServiceDescriptor.from_dict(res.timer_services[0]).key_type
        hashable = any(f(key_type) for f in _HASHABLE_KEY)
        allowed: set[int] | None = None
        for f in filters:
            col = _col(f)
            if col == "key" and hashable and isinstance(f, (EqualTo, In)):
                vals = list(f.value) if isinstance(f, In) else [f.value]
                if any(v is None for v in vals):
                    yield f
                    continue
                try:
                    kgs = {assign_key_group(v, mp, key_type=key_type) for v in vals}
                    pa.array(vals, type=key_type)
                except (ValueError, TypeError, OverflowError, pa.ArrowException):
                    yield f
                    continue
                allowed = kgs if allowed is None else allowed & kgs
                self.key_values = vals if self.key_values is None else [v for v in self.key_values if v in set(vals)]
                continue
            if col == "key_group" and isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
                vals = list(f.value) if isinstance(f, In) else [f.value]
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                    yield f
                    continue
                if isinstance(f, (EqualTo, In)):
                    kgs = {v for v in vals if 0 <= v < mp}
                else:
                    v = vals[0]
                    lo, hi = 0, mp - 1
                    if isinstance(f, GreaterThan):
                        lo = v + 1
                    elif isinstance(f, GreaterThanOrEqual):
                        lo = v
                    elif isinstance(f, LessThan):
                        hi = v - 1
                    else:
                        hi = v
                    kgs = set(range(max(0, lo), min(mp - 1, hi) + 1))
                allowed = kgs if allowed is None else allowed & kgs
                continue
            if table == "timers" and col == "timestamp" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) \
                    and isinstance(f.value, int) and not isinstance(f.value, bool):
                op = {EqualTo: "eq", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt", LessThanOrEqual: "le"}[type(f)]
                self.ts_filters.append((op, int(f.value)))
                continue
            yield f
        if allowed is not None:
            self.key_groups = allowed
