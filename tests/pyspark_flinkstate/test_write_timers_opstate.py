"""Spark writes of list appends, timers and operator state: read back through Spark and the core, restored into the backend."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import flinkstate as fs
from flinkstate.core.descriptors import ListStateDescriptor
from flinkstate.runtime import KeyedJob, KeyedProcessFunction
from fsc_helpers import error_text, fmt

pytestmark = pytest.mark.spark


def _w(df, root, mode="append", **opts):
    w = df.write.format("flinkstate").mode(mode)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save(root)


def _lists(spark, root, state="items"):
    return {r.key: list(r.value) for r in fmt(spark, root, operator="op", state=state, flattenCollections="false").collect()}


def test_list_append_appends_elements_and_list_mode_overwrite_replaces(spark, tmp_path):
    root = str(tmp_path / "la")
    store = fs.open(root)
    with store.begin() as w:
        w.put_state("op", ListStateDescriptor(name="items", key_type=pa.int64(), value_type=pa.string()),
                    pa.table({"key": pa.array([1, 2, 3], pa.int64()), "value": [["a", "b"], ["c"], ["d"]]}))
    # flattened elements spread over 3 tasks: key 1 gets elements in several tasks
    new = spark.createDataFrame([(1, "x"), (1, "y"), (4, "n"), (1, "z"), (2, "q")], "key bigint, value string").coalesce(1)
    _w(new, root, operator="op", state="items")
    got = _lists(spark, root)
    assert got == {1: ["a", "b", "x", "y", "z"], 2: ["c", "q"], 3: ["d"], 4: ["n"]}
    # several tasks hold elements of one key: the stored list is kept once, then the new elements
    many = spark.createDataFrame([(1, f"e{i}") for i in range(6)] + [(3, "f")], "key bigint, value string").repartition(3)
    _w(many, root, operator="op", state="items")
    got = _lists(spark, root)
    assert got[1][:5] == ["a", "b", "x", "y", "z"] and sorted(got[1][5:]) == [f"e{i}" for i in range(6)]
    assert got[3] == ["d", "f"] and got[2] == ["c", "q"]
    # arrays append too
    _w(spark.createDataFrame([(2, ["r", "s"])], "key bigint, value array<string>"), root, operator="op", state="items")
    assert _lists(spark, root)[2] == ["c", "q", "r", "s"]
    # listMode=overwrite keeps the former replace-per-key behaviour
    _w(spark.createDataFrame([(2, ["only"]), (4, ["m"])], "key bigint, value array<string>"), root, operator="op", state="items",
       listMode="overwrite")
    got = _lists(spark, root)
    assert got[2] == ["only"] and got[4] == ["m"] and got[3] == ["d", "f"]
    assert store.read_state("op", "items").num_rows == sum(len(v) for v in got.values())
    # listMode on a non-list write is refused, nothing committed
    n = len(store.checkpoints())
    with pytest.raises(Exception) as ei:
        _w(spark.createDataFrame([(2, "z")], "key bigint, value string"), root, "overwrite", operator="op", state="items", listMode="append")
    assert "listMode" in error_text(ei)
    assert len(store.checkpoints()) == n


def test_list_append_keeps_namespaces_ttl_and_task_order():
    """The connector's task and commit steps without a JVM: TTL lists and namespaces, one key split over two tasks."""
    import tempfile

    from flinkstate.core.ttl import StateTtlConfig

    from pyspark_flinkstate.writer import commit_plan, plan_write, write_partition

    root = tempfile.mkdtemp()
    store = fs.open(root)
    d = ListStateDescriptor(name="l", key_type=pa.string(), namespace_type=pa.int64(), value_type=pa.int32(), ttl=StateTtlConfig(ttl_ms=10**12))
    with store.begin() as w:
        w.put_state("op", d, pa.table({"key": ["a", "a", "b"], "namespace": pa.array([1, 2, 1], pa.int64()),
                                       "value": pa.array([[1, 2], [3], [4]], pa.list_(pa.int32())),
                                       "ttl_timestamp": pa.array([[5, 6], [7], [8]], pa.list_(pa.int64()))}))
    schema = pa.schema([("key", pa.string()), ("namespace", pa.int64()), ("value", pa.int64())])
    plan = plan_write({"path": root, "operator": "op", "state": "l"}, schema, False)
    b1 = pa.record_batch({"key": ["a", "c", "a"], "namespace": pa.array([1, 1, 2], pa.int64()), "value": pa.array([10, 11, 12], pa.int64())}, schema=schema)
    b2 = pa.record_batch({"key": ["a", "b"], "namespace": pa.array([1, 1], pa.int64()), "value": pa.array([20, 21], pa.int64())}, schema=schema)
    commit_plan(plan, [write_partition(plan, iter([b1]), 0), write_partition(plan, iter([b2]), 1)])
    got = {(r["key"], r["namespace"]): (r["value"], r["ttl_timestamp"][:len(r["value"]) - 1]) for r in store.read_state("op", "l", raw=True).to_pylist()}
    assert {k: v[0] for k, v in got.items()} == {("a", 1): [1, 2, 10, 20], ("a", 2): [3, 12], ("b", 1): [4, 21], ("c", 1): [11]}
    assert got[("a", 1)][1][:2] == [5, 6] and got[("a", 2)][1] == [7] and got[("b", 1)][1] == [8]  # stored elements keep their times


# ------------------------------------------------------------------ timers
class _Recorder(KeyedProcessFunction):
    """Registers an event-time timer at each element's `ts`; records what fires."""

    fired: list[tuple[str, int, str]] = []

    def process_element(self, value, ctx):
        ctx.register_event_time_timer(value["ts"])

    def on_timer(self, timestamp, ctx):
        _Recorder.fired.append((ctx.current_key, timestamp, ctx.time_domain))


def _job_root(root):
    """A KeyedJob checkpoint (operator 'tm') holding event timers u0@100, u1@200, u2@300."""
    kw = dict(key_selector=lambda e: e["user"], key_type=pa.string(), max_parallelism=64, checkpoint_path=root)
    with KeyedJob("tm", _Recorder, parallelism=2, **kw) as job:
        job.run([{"user": f"u{i}", "ts": 100 * (i + 1)} for i in range(3)], final_watermark=False)
        job.trigger_checkpoint(full=True)
        job.wait_for_checkpoints()
    return kw


def _restore_fire(root, kw):
    _Recorder.fired = []
    with KeyedJob.restore("tm", _Recorder, parallelism=3, **{k: v for k, v in kw.items() if k != "max_parallelism"}) as job:
        job.advance_watermark(10**12)
        job.advance_processing_time(10**12)
    return sorted(_Recorder.fired)


def _timers(spark, root, service):
    return sorted((r.key, r.timestamp, r.domain) for r in fmt(spark, root, operator="tm", table="timers", state=service).collect())


def test_timers_written_from_spark_read_back_and_fire_after_restore(spark, tmp_path):
    root = str(tmp_path / "tm")
    kw = _job_root(root)
    store = fs.open(root)
    assert _timers(spark, root, "event-timers") == [("u0", 100, "event"), ("u1", 200, "event"), ("u2", 300, "event")]
    # append: new timers; one already stored stays once (as Flink's registerTimer)
    add = spark.createDataFrame([("u1", 250), ("u9", 900), ("u0", 100)], "key string, timestamp bigint").repartition(2)
    _w(add, root, operator="tm", table="timers", timerService="event-timers")
    want = [("u0", 100, "event"), ("u1", 200, "event"), ("u1", 250, "event"), ("u2", 300, "event"), ("u9", 900, "event")]
    assert _timers(spark, root, "event-timers") == want
    core = store.read_timers("tm", "event-timers")
    assert sorted(zip(core.column("key").to_pylist(), core.column("timestamp").to_pylist())) == [(k, t) for k, t, _ in want]
    assert core.column("key_group").to_pylist() == [fs.assign_key_group(k, 64) for k in core.column("key").to_pylist()]
    assert _restore_fire(root, kw) == want
    # delete timers (append with operation=delete)
    _w(spark.createDataFrame([("u1", 200)], "key string, timestamp bigint"), root, operator="tm", table="timers",
       state="event-timers", operation="delete")
    want.remove(("u1", 200, "event"))
    assert _timers(spark, root, "event-timers") == want
    # processing-time timers into the runtime's processing service; overwrite the event timers
    _w(spark.createDataFrame([("u5", 5000)], "key string, timestamp int"), root, "overwrite", operator="tm", table="timers",
       state="processing-timers")
    _w(spark.createDataFrame([("u7", 700), ("u8", 800)], "key string, timestamp bigint"), root, "overwrite", operator="tm",
       table="timers", state="event-timers")
    assert _timers(spark, root, "event-timers") == [("u7", 700, "event"), ("u8", 800, "event")]
    assert _timers(spark, root, "processing-timers") == [("u5", 5000, "processing")]
    assert store.timer_service("tm", "processing-timers").domain == "processing"
    assert _restore_fire(root, kw) == [("u5", 5000, "processing"), ("u7", 700, "event"), ("u8", 800, "event")]
    # a timers read written back as is (its key_group, domain, timer_service columns) into another service
    back = fmt(spark, root, operator="tm", table="timers", state="event-timers").withColumn("timer_service", F.lit("event_copy"))
    _w(back, root, "overwrite", operator="tm", table="timers", state="event_copy")
    assert _timers(spark, root, "event_copy") == [("u7", 700, "event"), ("u8", 800, "event")]
    with pytest.raises(Exception) as ei:
        _w(fmt(spark, root, operator="tm", table="timers", state="event-timers"), root, operator="tm", table="timers", state="event_copy")
    assert "'timer_service'" in error_text(ei)


def test_timer_write_errors_name_the_culprit_and_commit_nothing(spark, tmp_path):
    root = str(tmp_path / "te")
    _job_root(root)
    store = fs.open(root)
    n = len(store.checkpoints())
    before = store.read_timers("tm", "event-timers")

    def refused(df, match, mode="append", **opts):
        with pytest.raises(Exception) as ei:
            _w(df, root, mode, operator="tm", table="timers", **opts)
        assert match in error_text(ei), error_text(ei)
        assert len(store.checkpoints()) == n and store.read_timers("tm", "event-timers").equals(before)

    ok = "key string, timestamp bigint"
    refused(spark.createDataFrame([("a", "x")], "key string, timestamp string"), "'timestamp'", state="event-timers")
    refused(spark.createDataFrame([("a", 1.5)], "key string, timestamp double"), "'timestamp'", state="event-timers")
    refused(spark.createDataFrame([(1, 5)], "key int, timestamp bigint"), "'key'", state="event-timers")
    refused(spark.createDataFrame([("a", 5, 1)], ok + ", extra int"), "extra", state="event-timers")
    refused(spark.createDataFrame([("a",)], "key string"), "'timestamp'", state="event-timers")
    refused(spark.createDataFrame([("a", 5)], ok), "timeDomain", state="my-timers")
    refused(spark.createDataFrame([(1, 5)], "key bigint, timestamp bigint"), "the operator's keys", state="my-timers", timeDomain="event")
    refused(spark.createDataFrame([("a", 5)], ok), "timeDomain", state="event-timers", timeDomain="processing")
    # a timer given twice: in one task, and across tasks
    refused(spark.createDataFrame([("a", 5), ("a", 5)], ok).coalesce(1), "more than once", state="event-timers")
    one = spark.createDataFrame([("b", 7)], ok).coalesce(1)
    refused(one.union(one), "more than once", state="event-timers")


# ------------------------------------------------------------------ operator state
def _opstate(spark, root, name):
    df = fmt(spark, root, operator="src", table="operatorState", state=name)
    return sorted(tuple(r) for r in df.collect())


def test_operator_state_written_from_spark_reads_back_and_exports_for_restore(spark, tmp_path):
    from flinkstate.flink import read_metadata, read_operator_state
    from flinkstate.flink.bridge.store_export import export_savepoint

    root = str(tmp_path / "os")
    store = fs.open(root)
    with store.begin(max_parallelism=64) as w:  # an operator with keyed state and one stored split list
        w.put_state("src", fs.ValueStateDescriptor(name="v", value_type=pa.int64()), pa.table({"key": ["a"], "value": pa.array([1], pa.int64())}))
        w.put_operator_state("src", fs.OperatorStateDescriptor(name="offsets", value_type=pa.int64()),
                             pa.table({"subtask": pa.array([0], pa.int32()), "value": pa.array([5], pa.int64())}))
    offs = spark.createDataFrame([(0, 10), (1, 11), (1, 12)], "subtask int, value bigint").repartition(2)
    _w(offs, root, operator="src", table="operatorState", state="offsets")  # append: split list elements added
    assert _opstate(spark, root, "offsets") == [(0, 5), (0, 10), (1, 11), (1, 12)]
    _w(spark.createDataFrame([(0, 7)], "subtask int, value bigint"), root, "overwrite", operator="src", table="operatorState", state="offsets")
    assert _opstate(spark, root, "offsets") == [(0, 7)]
    # a new union state (no subtask column: subtask 0) and a new broadcast state (key column)
    _w(spark.createDataFrame([("x",), ("y",)], "value string"), root, "overwrite", operator="src", table="operatorState",
       state="names", stateKind="union")
    rules = spark.createDataFrame([("r1", "a>1"), ("r2", "b<2")], "key string, value string").repartition(2)
    _w(rules, root, "overwrite", operator="src", table="operatorState", state="rules")
    _w(spark.createDataFrame([("r3", "c=3")], "key string, value string"), root, operator="src", table="operatorState", state="rules")
    assert store.operator_state_descriptor("src", "names").mode == "union"
    assert store.operator_state_descriptor("src", "rules").mode == "broadcast"
    assert _opstate(spark, root, "names") == [(0, "x"), (0, "y")]
    assert _opstate(spark, root, "rules") == [(0, "r1", "a>1"), (0, "r2", "b<2"), (0, "r3", "c=3")]
    core = store.read_operator_state("src", "rules")
    assert sorted(core.column("key").to_pylist()) == ["r1", "r2", "r3"]
    assert store.read_state("src", "v").column("value").to_pylist() == [1]  # keyed state carried over
    # restore: exported as a Flink savepoint, the operator states Flink restores hold the written elements
    dest = export_savepoint(root, str(tmp_path / "sp"))
    meta = read_metadata(dest)
    assert sorted(read_operator_state(meta, "src", "offsets").column("value").to_pylist()) == [7]
    assert sorted(read_operator_state(meta, "src", "names").column("value").to_pylist()) == ["x", "y"]
    got = read_operator_state(meta, "src", "rules")
    assert sorted(zip(got.column("key").to_pylist(), got.column("value").to_pylist())) == [("r1", "a>1"), ("r2", "b<2"), ("r3", "c=3")]


def test_operator_state_write_errors_commit_nothing(spark, tmp_path):
    root = str(tmp_path / "oe")
    _w(spark.createDataFrame([("r1", "a")], "key string, value string"), root, "overwrite", operator="src", table="operatorState", state="rules")
    store = fs.open(root)
    n = len(store.checkpoints())

    def refused(df, match, mode="append", **opts):
        with pytest.raises(Exception) as ei:
            _w(df, root, mode, operator="src", table="operatorState", **opts)
        assert match in error_text(ei), error_text(ei)
        assert len(store.checkpoints()) == n and store.read_operator_state("src", "rules").num_rows == 1

    kv = "key string, value string"
    refused(spark.createDataFrame([("r1", "b")], kv), "more than once", state="rules")  # already stored
    one = spark.createDataFrame([("r2", "b")], kv).coalesce(1)
    refused(one.union(one), "more than once", state="rules")  # given by two tasks
    refused(spark.createDataFrame([("r2", 1)], "key string, value int"), "'value'", state="rules")
    refused(spark.createDataFrame([("r2",)], "key string"), "'value'", state="rules")
    refused(spark.createDataFrame([("r2", "b", "x")], kv + ", extra string"), "extra", state="rules")
    refused(spark.createDataFrame([(-1, "r2", "b")], "subtask int, " + kv), "'subtask'", state="rules")
    refused(spark.createDataFrame([("r2", "b")], kv), "stateKind", state="rules", stateKind="union")
    refused(spark.createDataFrame([("r2", "b")], kv), "stateKind", state="rules", stateKind="keyed")
    refused(spark.createDataFrame([("r2", "b")], kv), "operation=delete", state="rules", operation="delete")


def test_write_options_of_timers_and_operator_state():
    from flinkstate.core.errors import InvalidArgumentError

    from pyspark_flinkstate.options import parse_write_options

    o = parse_write_options({"path": "/r", "operator": "op", "table": "timers", "timerService": "event_user-timers", "timeDomain": "EVENT"})
    assert (o.table, o.state, o.time_domain) == ("timers", "event_user-timers", "event")
    o = parse_write_options({"path": "/r", "operator": "op", "table": "operatorstate", "state": "rules", "stateKind": "broadcast"})
    assert (o.table, o.state_kind) == ("operatorState", "broadcast")
    assert parse_write_options({"path": "/r", "operator": "op", "state": "s", "listMode": "overwrite"}).list_mode == "overwrite"
    bad = [
        ({"table": "timers", "state": "a", "timerService": "b"}, "different timer services"),
        ({"table": "timers", "state": "a", "timeDomain": "wall"}, "timeDomain"),
        ({"table": "timers", "state": "a", "stateKind": "list"}, "stateKind"),
        ({"table": "timers"}, "timer service"),
        ({"table": "operatorState", "state": "a", "stateKind": "map"}, "list, union, broadcast"),
        ({"table": "operatorState", "state": "a", "timerService": "a"}, "timerService"),
        ({"table": "operatorState", "state": "a", "operation": "delete"}, "operation=delete"),
        ({"table": "timers", "state": "a", "ttlMs": "5"}, "ttlMs"),
        ({"state": "a", "listMode": "merge"}, "listMode"),
        ({"state": "a", "table": "changes"}, "table"),
    ]
    for extra, match in bad:
        with pytest.raises(InvalidArgumentError, match=match):
            parse_write_options({"path": "/r", "operator": "op", **extra})
