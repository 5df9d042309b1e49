"""The streaming sink: `writeStream.format("flinkstate")`, one delta checkpoint per micro-batch.

Each micro-batch upserts its rows into the named keyed state (`operation=delete`: removes
their keys; complete output mode: replaces the state) as one new checkpoint, through the
batch writer's path (`plan_write`, `write_partition`, then a commit planned against the log
version the plan read). The checkpoint records the batch in its properties,
`flinkstate.sink.<query id>` = batch id, in the same atomic commit, and properties carry
over to later checkpoints: a batch Spark replays (a restart whose commit log lacks it) finds
its id already recorded and writes nothing.

The checkpoint id of a batch is only known at commit time (a job may checkpoint meanwhile),
so tasks ship their rows to the driver as Arrow IPC and the driver writes the delta files;
micro-batches are meant to be small.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from flinkstate.core.errors import CommitConflictError, InvalidArgumentError
from pyspark.sql.datasource import WriterCommitMessage

from pyspark_flinkstate.options import WriteOptions, parse_write_options
from pyspark_flinkstate.writer import plan_write, write_partition

try:  # PySpark 4.1+: Arrow batches instead of rows
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _Base
except ImportError:  # pragma: no cover - PySpark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as _Base

__all__ = ["FlinkStateStreamWriter", "StreamCommitMessage", "PROPERTY_PREFIX", "committed_batch_id"]

PROPERTY_PREFIX = "flinkstate.sink."
COMMIT_ATTEMPTS = 5  # a job checkpointing meanwhile makes a commit conflict: plan again
_QUERY_ID = "sql.streaming.queryId"  # Spark's local property on the tasks of a streaming query


@dataclass
class StreamCommitMessage(WriterCommitMessage):
    """One task's rows (Arrow IPC stream) and the streaming query it belongs to."""

    ipc: bytes = b""
    rows: int = 0
    query_id: str | None = None
    partition_id: int = 0


def committed_batch_id(store: Any, query_id: str, log_version: int | None = None) -> int | None:
    """The newest batch id a sink query recorded in any checkpoint of the log (None: none yet)."""
    key = PROPERTY_PREFIX + query_id
    seen = [int(r.metadata.get("properties", {})[key]) for r in store.catalog.records(log_version)
            if isinstance(r.metadata, dict) and key in r.metadata.get("properties", {})]
    return max(seen) if seen else None


def _to_ipc(batches: list[pa.RecordBatch], schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> list[pa.RecordBatch]:
    return list(pa.ipc.open_stream(pa.py_buffer(data)))


class FlinkStateStreamWriter(_Base):  # type: ignore[misc,valid-type]
    """Writes each micro-batch as one delta checkpoint of a keyed state, once per (query, batch id)."""

    def __init__(self, options: dict[str, str], schema: Any, overwrite: bool) -> None:
        lo = {str(k).lower(): v for k, v in options.items() if v is not None}
        self.query_fallback: str | None = lo.pop("checkpointlocation", None)
        self.opts: WriteOptions = parse_write_options(lo)
        self.schema = schema
        self.overwrite = overwrite
        plan_write(self.opts, schema, overwrite)  # typed errors at query start, not in the first batch

    def write(self, iterator: Iterator[Any]) -> StreamCommitMessage:
        """Ship this task's rows to the driver (Arrow IPC)."""
        from pyspark import TaskContext
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(self.schema, timezone="UTC")
        items = list(iterator)
        if items and not isinstance(items[0], pa.RecordBatch):  # PySpark 4.0 hands rows
            items = [pa.RecordBatch.from_pylist([r.asDict(recursive=True) for r in items], schema=target)]
        batches = [b for b in items if b.num_rows]
        ctx = TaskContext.get()
        qid = ctx.getLocalProperty(_QUERY_ID) if ctx is not None else None
        pid = ctx.partitionId() if ctx is not None else 0
        schema = batches[0].schema if batches else target
        return StreamCommitMessage(_to_ipc(batches, schema), sum(b.num_rows for b in batches), qid, pid)

    def _query_id(self, messages: list[Any]) -> str:
        ids = {m.query_id for m in messages if isinstance(m, StreamCommitMessage) and m.query_id}
        if len(ids) > 1:
            raise InvalidArgumentError(f"a micro-batch of the flinkstate sink came from several streaming queries: {sorted(ids)}")
        if ids:
            return ids.pop()
        if self.query_fallback:
            return self.query_fallback
        raise InvalidArgumentError(f"the flinkstate sink of operator {self.opts.operator!r} state {self.opts.state!r} "
                                   "cannot tell which query wrote this batch: set option 'checkpointLocation'")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Write the batch as one checkpoint unless this query already recorded this batch id."""
        msgs = sorted((m for m in messages if isinstance(m, StreamCommitMessage)), key=lambda m: m.partition_id)
        query_id = self._query_id(msgs)
        batches = [b for m in msgs if m.rows for b in _from_ipc(m.ipc)]
        if not batches and not self.overwrite:
            return  # nothing to upsert: no checkpoint
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                self._commit_once(batches, query_id, int(batchId))
                return
            except CommitConflictError:
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise

    def _commit_once(self, batches: list[pa.RecordBatch], query_id: str, batch_id: int) -> None:
        import flinkstate

        plan = plan_write(self.opts, self.schema, self.overwrite)  # the id and base of this batch's checkpoint
        store = flinkstate.open(plan.io.root, plan.io.storage_options or None)
        w = store.begin(kind=plan.kind, checkpoint_id=plan.checkpoint_id, base=plan.base_checkpoint_id, at_log_version=plan.planned_version)
        try:
            w.declare_max_parallelism(plan.operator, plan.max_parallelism)
            done = committed_batch_id(store, query_id, plan.planned_version)
            if done is not None and done >= batch_id:
                w.abort()
                return  # a replayed batch: its checkpoint exists
            msg = write_partition(plan, iter(batches), 0)
            w.adopt(msg.entries)
            w.add_state_files(plan.operator, plan.descriptor(), msg.entries, mode=plan.mode)
            w.set_property(PROPERTY_PREFIX + query_id, str(batch_id))
        except BaseException:
            w.abort()
            raise
        w.commit()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Tasks wrote no files (their rows travel in the messages): nothing to remove."""
