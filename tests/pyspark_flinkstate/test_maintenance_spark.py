"""Compaction and TTL expiry as Spark jobs (one task per key-group range), and the compaction policy Spark appends apply."""

from __future__ import annotations

import io
import json
import os
import sys

import pyarrow as pa
import pytest

import flinkstate as fs
from flinkstate.cli import main
from fsc_helpers import build_job, fmt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: shared helpers
from maintenance_model import TTL_MS, everything, model_rows, random_history, stored  # noqa: E402

pytestmark = pytest.mark.spark


def _tasks_of_last_job(spark) -> int:
    st = spark.sparkContext.statusTracker()
    jobs = st.getJobIdsForGroup(None)
    stages = st.getJobInfo(max(jobs)).stageIds
    return sum(st.getStageInfo(s).numTasks for s in stages if st.getStageInfo(s) is not None)


def test_spark_compact_and_expire_match_the_model(spark, tmp_path):
    import pyspark_flinkstate

    root = str(tmp_path / "job")
    store, m = random_history(root, 2)
    before = everything(store, 2_500)
    files_before = len(store.files())
    lines: list[str] = []
    res = pyspark_flinkstate.compact(spark, root, progress=lines.append)
    ranges = sum(s.ranges for s in res.steps)
    assert res.checkpoint_id is not None and ranges > 1
    assert _tasks_of_last_job(spark) == ranges  # one Spark task per key-group range
    print(f"spark compact: files {files_before} -> {len(store.files())} ({ranges} tasks)")
    assert everything(store, 2_500) == before
    assert len(store.files()) < files_before and not [e for e in store.files() if e.kind in ("delta", "timers-delta")]
    assert [line for line in lines if line.startswith("compact op/val (keyed)")]
    # the same root read by Spark: identical to the library's read
    got = sorted((r.key, r.value) for r in fmt(spark, root, operator="op", state="plain").collect())
    assert got == sorted(zip(*store.read_state("op", "plain").select(["key", "value"]).to_pydict().values()))
    # expiry from the command line with --spark (the active session runs it; one summary line per state on stderr)
    out = io.StringIO()
    assert main(["expire", root, "--at", "3000", "--spark", "--json"], out=out) == 0
    doc = json.loads(out.getvalue())
    assert _tasks_of_last_job(spark) == sum(s["ranges"] for s in doc["steps"]) > 0
    for st in ("val", "lst", "map"):
        assert stored(store, st) == model_rows(m, st, 3_000)
    assert doc["dropped"]["op/val"] == sum(1 for _, ts in m.val.values() if ts + TTL_MS <= 3_000)
    res = pyspark_flinkstate.expire(spark, root, at=3_000)  # nothing left to drop: no job's files, no checkpoint
    assert res.checkpoint_id is None and set(res.dropped.values()) == {0}


COUNT = fs.ValueStateDescriptor(name="count", key_type=pa.string(), value_type=pa.int64())


def test_spark_appends_apply_the_compaction_policy(spark, tmp_path):
    root = str(tmp_path / "job")
    store = build_job(root)
    model = {r["key"]: r["value"] for r in store.read_state("sessions", "count").to_pylist()}
    policy = fs.CompactionPolicy()
    compacted_at = None
    for i in range(policy.max_deltas + 1):
        rows = [(f"a{i}-{j}", i * 10 + j) for j in range(3)] + [(f"u{i + 10}", -i)]
        spark.createDataFrame(rows, "key string, value bigint").coalesce(1).write.format("flinkstate").mode("append") \
            .option("operator", "sessions").option("state", "count").save(root)
        model.update(dict(rows))
        cid = store.latest_checkpoint_id()
        files = store.state_files("sessions", "count")
        fulls = [e for e in files if e.kind == "full" and e.created_by_checkpoint_id == cid]
        if fulls:
            compacted_at = i
            assert not [e for e in files if e.kind == "delta"]  # the chain became one full file, in the append's checkpoint
            break
    assert compacted_at is not None and compacted_at < policy.max_deltas
    assert [c.checkpoint_id for c in store.checkpoints()][-1] == 3 + compacted_at  # no extra checkpoint: the append's own
    got = {r["key"]: r["value"] for r in store.read_state("sessions", "count").to_pylist()}
    assert got == model
