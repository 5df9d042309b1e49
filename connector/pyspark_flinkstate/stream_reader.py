"""The change stream: `spark.readStream.format("flinkstate").option("table", "changes")`.

Offsets are checkpoint ids, `{"checkpoint_id": N}`: everything up to checkpoint N has been
emitted. A micro-batch (start, end] emits, for every retained completed checkpoint c in it,
the changes of the state from the previous retained checkpoint to c, tagged
`checkpoint_id = c`: the batch `changes` table with `fromCheckpointId=prev`,
`toCheckpointId=c`, planned and read by the batch reader (one diff, in the core). A
checkpoint with no earlier retained one emits its whole state as upserts.

Savepoints are not part of the stream (neither emitted nor used as the base of a diff):
checkpoints complete in increasing id order (a later one subsumes a pending earlier one),
so an offset never has to move back; a savepoint may complete with any id.

Planning is a pure function of (start, end] and the retained checkpoints, so Spark replaying
a batch after a restart from its checkpointLocation emits the same rows: with an exactly-once
sink, every change is emitted once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from flinkstate.core.errors import (
    CheckpointNotFoundError,
    InvalidArgumentError,
    OperatorNotFoundError,
    StateNotFoundError,
)
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from pyspark_flinkstate.options import ReadOptions, default_of, parse_read_options
from pyspark_flinkstate.reader import ChangesPartition, FlinkStateReader
from pyspark_flinkstate.resolve import Resolved, resolve

try:  # PySpark 4.2+: Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        SupportsTriggerAvailableNow as _AvailableNow,
    )
except ImportError:  # pragma: no cover - older PySpark
    _AvailableNow = object  # type: ignore[assignment,misc]

__all__ = ["FlinkStateStreamReader", "ChangeStreamPartition", "OFFSET_KEY", "stream_read_options"]

OFFSET_KEY = "checkpoint_id"
_NOT_IN_STREAM = ("checkpointid", "fromcheckpointid", "tocheckpointid")


def stream_read_options(options: dict[str, str]) -> tuple[ReadOptions, str | int]:
    """The batch read options of a stream and its starting point ('latest', 'earliest' or a checkpoint id)."""
    lo = {str(k).lower(): v for k, v in options.items() if v is not None}
    table = str(lo.get("table", "state"))
    if table.lower() != "changes":
        raise InvalidArgumentError(
            f"a streaming read of flinkstate emits the changes table: add option table='changes' (got table={table!r})")
    given = [k for k in _NOT_IN_STREAM if k in lo]
    if given:
        raise InvalidArgumentError(
            f"option(s) {given} do not apply to a streaming read: its offsets are checkpoint ids; use 'startingCheckpointId'")
    raw = str(lo.pop("startingcheckpointid", default_of("startingCheckpointId"))).strip()
    starting: str | int
    if raw.lower() in ("latest", "earliest"):
        starting = raw.lower()
    else:
        try:
            starting = int(raw)
        except ValueError:
            raise InvalidArgumentError(f"option 'startingCheckpointId' must be a checkpoint id, 'earliest' or 'latest'; got {raw!r}") from None
        if starting < 0:
            raise InvalidArgumentError(f"option 'startingCheckpointId' must be a non-negative checkpoint id, got {starting}")
    return parse_read_options(lo), starting


class ChangeStreamPartition(InputPartition):
    """One partition of a micro-batch: a changes partition of one checkpoint pair and its plan (picklable)."""

    def __init__(self, res: Resolved, inner: ChangesPartition) -> None:
        super().__init__((res.checkpoint_id, inner.value))
        self.res = res
        self.inner = inner


class FlinkStateStreamReader(DataSourceStreamReader, _AvailableNow):  # type: ignore[misc]
    """Emits, per newly completed checkpoint, the changes of one keyed state; offsets are checkpoint ids."""

    def __init__(self, options: dict[str, str], schema: Any) -> None:
        self.opts, self.starting = stream_read_options(options)
        self.schema = schema
        self._target: int | None = None  # Trigger.AvailableNow: the newest checkpoint when it started

    def _checkpoint_ids(self) -> list[int]:
        """Retained completed checkpoints (not savepoints), oldest first."""
        import flinkstate

        store = flinkstate.open(self.opts.path, self.opts.storage_options or None)
        return [c.checkpoint_id for c in store.checkpoints() if c.kind == "checkpoint"]

    def initialOffset(self) -> dict[str, int]:
        """Where a new query starts: before `startingCheckpointId` (default after the newest checkpoint)."""
        ids = self._checkpoint_ids()
        if self.starting == "latest":
            return {OFFSET_KEY: ids[-1] if ids else -1}
        if self.starting == "earliest":
            return {OFFSET_KEY: ids[0] - 1 if ids else -1}
        n = int(self.starting)
        if ids and n <= ids[-1] and n not in ids:
            raise CheckpointNotFoundError(
                f"option 'startingCheckpointId' {n}: checkpoint {n} is not retained at {self.opts.path}; retained checkpoints: {ids}")
        return {OFFSET_KEY: n - 1}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        """The newest completed checkpoint (never before `start`)."""
        ids = self._checkpoint_ids()
        if self._target is not None:
            ids = [c for c in ids if c <= self._target]
        low = int(start[OFFSET_KEY]) if start else -1
        return {OFFSET_KEY: max([low] + ids[-1:])}

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: stop at the newest checkpoint completed now."""
        ids = self._checkpoint_ids()
        self._target = ids[-1] if ids else -1

    def _pair(self, prev: int | None, cid: int) -> Resolved | None:
        """The planned batch changes read of checkpoint `cid` against `prev` (None: the state is in neither)."""
        opts = dataclasses.replace(self.opts, table="changes", from_checkpoint_id=cid if prev is None else prev, to_checkpoint_id=cid)
        try:
            res = resolve(opts)
        except (StateNotFoundError, OperatorNotFoundError):
            return None
        if prev is None:  # the first checkpoint: everything it holds is new
            if not res.state_in_to:
                return None
            res.from_entries, res.from_checkpoint_id, res.from_max_parallelism = None, None, res.max_parallelism
        return res

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """The changes partitions of every retained checkpoint in (start, end]."""
        lo, hi = int(start[OFFSET_KEY]), int(end[OFFSET_KEY])
        ids = self._checkpoint_ids()
        parts: list[InputPartition] = []
        for i, cid in enumerate(ids):
            if not lo < cid <= hi:
                continue
            res = self._pair(ids[i - 1] if i else None, cid)
            if res is None:
                continue
            planned = FlinkStateReader(res, self.schema).partitions()
            slim = dataclasses.replace(res, entries=[], from_entries=None)  # the partitions carry their files
            parts += [ChangeStreamPartition(slim, p) for p in planned if isinstance(p, ChangesPartition)]
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The changes of one partition, through the batch reader."""
        assert isinstance(partition, ChangeStreamPartition)
        yield from FlinkStateReader(partition.res, self.schema).read(partition.inner)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: offsets live in Spark's checkpointLocation."""
