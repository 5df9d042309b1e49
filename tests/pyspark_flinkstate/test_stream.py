"""The change stream (readStream) and the streaming sink (writeStream) of format("flinkstate")."""

from __future__ import annotations

import os
import random
import threading
import time

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.core.errors import InvalidArgumentError

OP, ST = "op", "st"
DESC = fs.ValueStateDescriptor(name=ST, key_type=pa.string(), value_type=pa.int64())
OPTS = {"operator": OP, "state": ST}
MP = 8  # few key-group ranges: few partitions per checkpoint on a busy machine


def _checkpoint(store: fs.CheckpointStore, step: int, rng: random.Random, kind: str = "checkpoint") -> None:
    """One checkpoint of a churning job: upserts and deletes as a delta, every 7th a full rewrite."""
    if step % 7 == 0:
        keys = sorted(rng.sample(range(120), 40))
        t = pa.table({"key": [f"k{k}" for k in keys], "value": pa.array([step * 1000 + k for k in keys], pa.int64())})
        mode = "full"
    else:
        up = rng.sample(range(120), 12)
        gone = [k for k in rng.sample(range(120), 5) if k not in up]
        keys = up + gone
        t = pa.table({"key": [f"k{k}" for k in keys],
                      "value": pa.array([step * 1000 + k for k in up] + [None] * len(gone), pa.int64()),
                      "tombstone": [False] * len(up) + [True] * len(gone)})
        mode = "delta"
    with store.begin(kind=kind, max_parallelism=MP) as w:  # type: ignore[arg-type]
        w.put_state(OP, DESC, t, mode=mode)


class Churn(threading.Thread):
    """A job that keeps checkpointing a root until stopped (at most `steps` checkpoints; one savepoint among them)."""

    def __init__(self, root: str, first: int, steps: int, pause: float) -> None:
        super().__init__(daemon=True)
        self.store, self.first, self.steps, self.pause = fs.open(root), first, steps, pause
        self.rng = random.Random(first)
        self.error: BaseException | None = None
        self.halt = threading.Event()
        self.done = 0

    def run(self) -> None:
        try:
            for step in range(self.first, self.first + self.steps):
                if self.halt.is_set():
                    return
                _checkpoint(self.store, step, self.rng, "savepoint" if step == self.first + 3 else "checkpoint")
                self.done += 1
                time.sleep(self.pause)
        except BaseException as e:  # surfaced by the test
            self.error = e


def _rows(rows: list) -> list[tuple]:
    return sorted((r.checkpoint_id, r.change_type, r.key, r.value, r.key_group) for r in rows)


def _batch_changes(spark, root: str, first_emitted: int) -> list[tuple]:
    """The batch `changes` table of every consecutive pair of checkpoints (savepoints skipped) from `first_emitted` on."""
    ids = [c.checkpoint_id for c in fs.open(root).checkpoints() if c.kind == "checkpoint"]
    out: list[tuple] = []
    for prev, cid in zip(ids, ids[1:]):
        if cid >= first_emitted:
            df = spark.read.format("flinkstate").options(**OPTS, table="changes", fromCheckpointId=prev, toCheckpointId=cid).load(root)
            out += _rows(df.collect())
    return sorted(out)


def _drop_commit(cl: str, batch_id: int) -> None:
    """Forget that a micro-batch committed (its file and Hadoop's checksum of it)."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        path = os.path.join(cl, "commits", name)
        if os.path.exists(path):
            os.remove(path)


def _stream(spark, root: str, **opts):
    return spark.readStream.format("flinkstate").options(**OPTS, table="changes", **opts).load(root)


@pytest.mark.spark
@pytest.mark.slow
def test_change_stream_killed_and_restarted_emits_each_change_once(spark, tmp_path):
    root, cl = str(tmp_path / "job"), str(tmp_path / "cl")
    store = fs.open(root)
    rng = random.Random(0)
    for step in (1, 2):
        _checkpoint(store, step, rng)
    seen: list[tuple[int, list[tuple]]] = []  # (batch id, rows) of every foreachBatch call, replays included

    def sink(df, batch_id):
        seen.append((batch_id, _rows(df.collect())))

    def start():
        return (_stream(spark, root, startingCheckpointId=2).writeStream.foreachBatch(sink)
                .option("checkpointLocation", cl).trigger(processingTime="1 second").start())

    churn = Churn(root, 3, 200, 1.0)
    churn.start()
    q = start()
    deadline = time.time() + 400
    while len({b for b, r in seen if r}) < 2 and time.time() < deadline:
        time.sleep(0.2)
    q.stop()  # killed mid-way: the job keeps checkpointing
    assert len({b for b, r in seen if r}) >= 2
    # a crash after the offsets of the last batch were logged but before its commit: that batch runs again
    commits = sorted(int(n) for n in os.listdir(os.path.join(cl, "commits")) if n.isdigit())
    _drop_commit(cl, commits[-1])
    q = start()
    restarted = churn.done
    while churn.done < restarted + 3 and time.time() < deadline + 120:
        time.sleep(0.2)
    churn.halt.set()
    churn.join(60)
    assert churn.error is None and not churn.is_alive()
    q.processAllAvailable()
    q.stop()

    by_batch: dict[int, list[tuple]] = {}
    replays = 0
    for b, rows in seen:
        if b in by_batch:
            replays += 1
            assert rows == by_batch[b], f"batch {b} replayed with other rows"
        by_batch[b] = rows
    assert replays >= 1
    emitted = sorted(r for rows in by_batch.values() for r in rows)
    expected = _batch_changes(spark, root, 2)
    savepoints = {c.checkpoint_id for c in fs.open(root).checkpoints() if c.kind == "savepoint"}
    assert savepoints and not savepoints & {r[0] for r in emitted}
    assert len(emitted) == len(expected) and len(set(emitted)) == len(emitted)
    assert emitted == expected
    assert {r[1] for r in emitted} == {"upsert", "delete"}
    assert max(r[0] for r in emitted) == fs.open(root).checkpoints()[-1].checkpoint_id


@pytest.mark.spark
def test_change_stream_to_parquet_stopped_and_restarted_matches_batch_changes(spark, tmp_path):
    root, cl, out = str(tmp_path / "job"), str(tmp_path / "cl"), str(tmp_path / "out")
    store = fs.open(root)
    rng = random.Random(1)
    for step in range(1, 5):
        _checkpoint(store, step, rng)

    def run():
        q = (_stream(spark, root, startingCheckpointId="earliest").writeStream.format("parquet")
             .option("checkpointLocation", cl).option("path", out).trigger(availableNow=True).start())
        q.awaitTermination(120)

    run()
    for step in range(5, 9):
        _checkpoint(store, step, rng)
    run()
    run()  # nothing new: emits nothing
    got = _rows(spark.read.parquet(out).collect())
    # the first checkpoint has no predecessor: its whole state as upserts, then the batch changes table
    first = [(1, "upsert", r["key"], r["value"], r["key_group"]) for r in store.read_state(OP, ST, checkpoint_id=1).to_pylist()]
    assert got == sorted(first + _batch_changes(spark, root, 2))


def test_stream_read_options_are_checked():
    from pyspark_flinkstate.stream_reader import stream_read_options

    with pytest.raises(InvalidArgumentError, match="table='changes'"):
        stream_read_options({"path": "/x", **OPTS})
    with pytest.raises(InvalidArgumentError, match="fromcheckpointid"):
        stream_read_options({"path": "/x", **OPTS, "table": "changes", "fromCheckpointId": "1"})
    with pytest.raises(InvalidArgumentError, match="startingCheckpointId"):
        stream_read_options({"path": "/x", **OPTS, "table": "changes", "startingCheckpointId": "soon"})
    assert stream_read_options({"path": "/x", **OPTS, "table": "changes", "startingCheckpointId": "7"})[1] == 7


# ------------------------------------------------------------------ sink
SCHEMA_DDL = "key string, value long"


def _spark_schema():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField("key", StringType()), StructField("value", LongType())])


def test_sink_replayed_batch_id_writes_nothing(tmp_path):
    from pyspark_flinkstate.stream_writer import FlinkStateStreamWriter, committed_batch_id

    root = str(tmp_path / "job")
    store = fs.open(root)
    _checkpoint(store, 1, random.Random(0))
    opts = {"path": root, **OPTS, "checkpointLocation": str(tmp_path / "q1")}

    def batch(i):
        return pa.record_batch({"key": [f"s{i}", "k1"], "value": pa.array([i, 100 + i], pa.int64())})

    def run(batch_id, rows):
        w = FlinkStateStreamWriter(dict(opts), _spark_schema(), False)  # Spark makes one per commit
        w.commit([w.write(iter([rows]))], batch_id)

    run(0, batch(0))
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    files = sorted(e.path for e in store.files())
    run(0, batch(0))  # replay
    run(0, batch(9))  # a replay never writes, whatever it holds
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2]
    assert sorted(e.path for e in store.files()) == files
    _checkpoint(store, 2, random.Random(5))  # the job checkpoints meanwhile (3): the record carries over
    run(0, batch(0))
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3]
    run(1, batch(1))
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3, 4]
    state = {r["key"]: r["value"] for r in store.read_state(OP, ST).to_pylist()}
    assert state["s0"] == 0 and state["s1"] == 1 and "s9" not in state and state["k1"] == 101
    assert committed_batch_id(store, opts["checkpointLocation"]) == 1
    other = dict(opts, checkpointLocation=str(tmp_path / "q2"))  # another query: its own batch ids
    w = FlinkStateStreamWriter(other, _spark_schema(), False)
    w.commit([w.write(iter([batch(7)]))], 0)
    assert [c.checkpoint_id for c in store.checkpoints()][-1] == 5


@pytest.mark.spark
def test_sink_restarted_query_replays_uncommitted_batch_without_a_second_checkpoint(spark, tmp_path):
    root, src, cl = str(tmp_path / "job"), str(tmp_path / "src"), str(tmp_path / "cl")
    os.makedirs(src)
    import pyarrow.parquet as pq

    for i in range(3):
        pq.write_table(pa.table({"key": [f"k{i}", f"k{i + 10}"], "value": pa.array([i, i + 10], pa.int64())}), f"{src}/p{i}.parquet")

    def run():
        q = (spark.readStream.schema(SCHEMA_DDL).option("maxFilesPerTrigger", 1).parquet(src)
             .writeStream.format("flinkstate").options(**OPTS, maxParallelism="16").option("checkpointLocation", cl)
             .trigger(availableNow=True).start(root))
        q.awaitTermination(120)
        assert q.exception() is None

    run()
    store = fs.open(root)
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3]  # one checkpoint per micro-batch
    _drop_commit(cl, 2)  # the last batch's commit is lost: Spark runs it again
    run()
    assert [c.checkpoint_id for c in store.checkpoints()] == [1, 2, 3]
    state = {r["key"]: r["value"] for r in store.read_state(OP, ST).to_pylist()}
    assert state == {f"k{i}": i for i in range(3)} | {f"k{i + 10}": i + 10 for i in range(3)}
